#!/bin/sh
# The kernel values the kubelet's container manager insists on (pkg/kubelet/cm setupKernelTunables). In a
# container /proc/sys is read-only and these are host-wide: show the kubelet the expected value through a
# read-only bind mount of a file over each one that differs, instead of changing the host.
set -e
mkdir -p /run/kubelet-sysctls
for kv in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
          kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
  k=${kv%%=*}; v=${kv#*=}
  [ "$(cat /proc/sys/$k)" = "$v" ] && continue
  f=/run/kubelet-sysctls/$(echo "$k" | tr / .)
  echo "$v" >"$f"
  mount --bind -o ro "$f" "/proc/sys/$k"
  echo "kubelet-sysctls: /proc/sys/$k shows $v"
done
