#!/bin/sh
# Entrypoint of every test-bed node container (baked into the node image of tests/node-image/build.sh as
# /usr/local/sbin/node-init.sh): gives the node its own writable cgroup tree, then execs its command
# (default /sbin/init, i.e. systemd). Run the container WITHOUT `-v /sys/fs/cgroup:/sys/fs/cgroup:rw` and with
# `--cgroupns private`: Docker then mounts each cgroup hierarchy rooted at this container's own cgroup, but
# read-only; CAP_SYS_ADMIN may flip the bind mounts to read-write (a plain `remount,rw` fails with "mount
# point is busy"). With the host's tree bind-mounted instead, every node's systemd and kubelet share the
# host's root cgroups (/system.slice, /kubepods.slice), and the Docker cgroup of the container gets emptied
# and removed ("docker exec" then fails with "error adding pid N to cgroups: ... /sys/fs/cgroup/blkio/docker/
# <id>/cgroup.procs: no such file or directory"). kind's node image entrypoint does the same (fix_cgroup).
set -e
for m in $(findmnt -rn -o TARGET -t cgroup,cgroup2); do mount -o remount,bind,rw "$m"; done
# cgroup v1 host: systemd also wants the unified (cgroup2) hierarchy for its own bookkeeping.
if [ "$(stat -fc %T /sys/fs/cgroup)" = tmpfs ] && ! mountpoint -q /sys/fs/cgroup/unified 2>/dev/null; then
  mkdir -p /sys/fs/cgroup/unified && mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup/unified || true
fi
[ $# -gt 0 ] || set -- /sbin/init
exec "$@"
