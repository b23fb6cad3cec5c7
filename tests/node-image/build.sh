#!/bin/sh
# The test-bed node image recipe: a Debian root file system that boots systemd as PID 1 and behaves like a
# bare Kubernetes node (sshd, containerd, runc, the CNI reference plugins — linked into /opt/cni/bin —, sudo, skopeo — which loads OCI
# archives into containers-storage, the store CRI-O reads —, nftables — whose `nft` the builtin CNI agent programs its
# NetworkPolicy and masquerade tables with; Debian leaves its nftables.service disabled, as on a host), imported into the local Docker engine with no
# registry. Called by clusterctl_testbed::docker::NodeImage::ensure(), under a file lock, with: TAG SUITE MIRROR, with
# scripts/k8s/node/node-init.sh copied next to this file. The tag is a hash of both files, so a changed recipe
# builds a new image.
#
# The image's entrypoint is node-init.sh (then CMD /sbin/init): it remounts the container's own, private cgroup
# tree read-write, so containers run with `--cgroupns private` and no bind mount of the host's /sys/fs/cgroup
# (a node's systemd and kubelet then stay inside the node's cgroup instead of the host's root cgroups).
#
# Each container makes its own SSH host keys (ed25519, ECDSA) at first boot (clusterctl-hostkeys.service), so host-key
# pinning and trust-on-first-use can be tested between nodes. User `tester` (no password) has
# passwordless sudo, for the transports' sudo paths. Root logs in by key only (Debian's default).
set -eu
tag="$1"; suite="$2"; mirror="$3"
here=$(dirname "$0")
[ -f "$here/node-init.sh" ] || { echo "node-init.sh missing next to $0" >&2; exit 1; }

if docker image inspect "$tag" >/dev/null 2>&1; then
  exit 0
fi

root=$(mktemp -d /var/tmp/clusterctl-node-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT INT TERM

debootstrap --variant=minbase \
  --include=systemd,systemd-sysv,dbus,openssh-server,iproute2,iputils-ping,ca-certificates,containerd,runc,containernetworking-plugins,sudo,procps,skopeo,nftables \
  "$suite" "$root" "$mirror" >"$root.log" 2>&1 || { tail -n 30 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"

# Host keys unique to each container, made before sshd starts.
rm -f "$root"/etc/ssh/ssh_host_*
cat >"$root/etc/systemd/system/clusterctl-hostkeys.service" <<'UNIT'
[Unit]
Description=SSH host keys unique to this node (clusterctl test bed)
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
# ed25519 and ECDSA only: RSA key generation is slow enough on a loaded 2-core host with many nodes
# booting at once to hit a start timeout. sshd serves with the keys that exist.
ExecStart=/usr/bin/ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key
ExecStart=/usr/bin/ssh-keygen -q -t ecdsa -N "" -f /etc/ssh/ssh_host_ecdsa_key
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
UNIT
mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
ln -sf ../clusterctl-hostkeys.service "$root/etc/systemd/system/multi-user.target.wants/clusterctl-hostkeys.service"

# Units that have no use in a container and slow the boot down.
for u in systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket \
         getty@tty1.service console-getty.service systemd-timesyncd.service apt-daily.timer \
         apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer; do
  ln -sf /dev/null "$root/etc/systemd/system/$u"
done

# A non-root user with passwordless sudo.
chroot "$root" useradd -m -s /bin/sh tester
echo 'tester ALL=(ALL) NOPASSWD:ALL' >"$root/etc/sudoers.d/tester"
chmod 0440 "$root/etc/sudoers.d/tester"

# The CNI reference plugins where containerd and kubelets look for them, as the kubernetes-cni package puts
# them (containerd runs `loopback` from /opt/cni/bin for every pod; Debian installs them in /usr/lib/cni).
mkdir -p "$root/opt/cni/bin"
for f in "$root"/usr/lib/cni/*; do ln -s "/usr/lib/cni/${f##*/}" "$root/opt/cni/bin/${f##*/}"; done

# The entrypoint: a private, writable cgroup tree, then systemd (see the header).
install -m 0755 "$here/node-init.sh" "$root/usr/local/sbin/node-init.sh"

# Keep the image small: no apt lists or docs.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/usr/share/doc/* "$root"/usr/share/man/*

tar -C "$root" -c . | docker import --change 'ENTRYPOINT ["/usr/local/sbin/node-init.sh"]' --change 'CMD ["/sbin/init"]' --change 'ENV container=docker' - "$tag" >/dev/null
