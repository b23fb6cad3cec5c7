#!/bin/sh
# Entrypoint of a node container that runs a kubelet (test bed): gives the node its own writable cgroup tree,
# then execs systemd. Run the container WITHOUT `-v /sys/fs/cgroup:/sys/fs/cgroup:rw` and with
# `--cgroupns private`: Docker then mounts each cgroup v1 hierarchy rooted at this container's own cgroup, but
# read-only; CAP_SYS_ADMIN may flip the bind mounts to read-write. With the host's tree bind-mounted instead,
# every node's systemd and kubelet share the host's root cgroups (/system.slice, /kubepods.slice), and the
# Docker cgroup of the container gets emptied and removed ("docker exec" then fails with "error adding pid
# N to cgroups: ... /sys/fs/cgroup/blkio/docker/<id>/cgroup.procs: no such file or directory").
set -e
for m in $(findmnt -rn -o TARGET -t cgroup); do mount -o remount,bind,rw "$m"; done
if ! mountpoint -q /sys/fs/cgroup/unified 2>/dev/null; then
  mkdir -p /sys/fs/cgroup/unified && mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup/unified || true
fi
exec /sbin/init "$@"
