#!/usr/bin/env bash
# Test bed only (never shipped): the images a Kubernetes version runs, made here with no pull, as OCI
# image layouts (and oci-archive tarballs for `ctr -n k8s.io images import`):
#
#   scripts/k8s/images.sh VERSION
#
# Each image is one layer written by oci.py: the binary built by build.sh at the path and entrypoint the
# upstream manifests expect, plus a small base (/etc/passwd, /etc/group, /etc/nsswitch.conf, CA bundle, /tmp):
#   registry.k8s.io/kube-apiserver|kube-controller-manager|kube-scheduler:VERSION  /usr/local/bin/<name> (kubeadm's
#       static pods run `kube-apiserver ...` from PATH; Entrypoint unset like upstream's go-runner-free images)
#   registry.k8s.io/kube-proxy:VERSION     /usr/local/bin/kube-proxy + iptables/ip6tables (nft and legacy),
#       conntrack, ipset with their libraries, taken from a debootstrap'd Debian rootfs cached by recipe hash
#   registry.k8s.io/etcd:<kubeadm's tag>   /usr/local/bin/etcd, /usr/local/bin/etcdctl, /usr/local/bin/etcdutl (as upstream's)
#   registry.k8s.io/coredns/coredns:<tag>  /coredns, Entrypoint ["/coredns"]
#   registry.k8s.io/pause:<tag>            /pause (scripts/k8s/pause.c, gcc -static), Entrypoint ["/pause"]
#   ghcr.io/kube-vip/kube-vip:<version>    /kube-vip, Entrypoint ["/kube-vip"] (when it built)
#   ghcr.io/kube-vip/kube-vip-cloud-provider:<version>  /kube-vip-cloud-provider, Cmd as upstream's Dockerfile,
#       user nonroot (65532)
#   clusterctl.test/busybox:1              Debian's busybox-static at /bin/busybox with its applet links, Cmd ["sh"]
#   ghcr.io/flannel-io/flannel:<tag>       /opt/bin/flanneld (the manifest's command) + the iptables subset above
#       (flanneld runs iptables, iptables-restore, ip6tables for --ip-masq) + busybox (the install-cni init
#       container runs `cp`)
#   ghcr.io/flannel-io/flannel-cni-plugin:<tag>  /flannel + busybox (its init container runs `cp -f /flannel ...`)
#   docker.io/rancher/local-path-provisioner:<version>  /usr/bin/local-path-provisioner (build.sh, from its Go module
#       at the version the product pins) + busybox (upstream's image is FROM alpine: the helper pods the provisioner
#       starts from the same image run `sh`, `mkdir`, `rm`), Cmd ["local-path-provisioner"] as upstream's Dockerfile
#   registry.k8s.io/networking/kube-network-policies:<version>  /bin/netpol (build.sh's kube-network-policies, built
#       as upstream's Dockerfile builds it), Cmd ["/bin/netpol"] as upstream's; written only once build.sh has built
#       that program (the NetworkPolicy benchmark, cni/benches/netpol, builds it)
#   clusterctl.test/registry:2             the lab's local registry (`spec.registry.local`, issue 27): the equivalent
#       of upstream's registry:2 made from Debian's docker-registry package (/bin/registry with the libc it links,
#       /etc/docker/registry/config.yml as registry:2's: filesystem storage at /var/lib/registry, :5000),
#       Entrypoint ["registry"], Cmd ["serve", "/etc/docker/registry/config.yml"]; run by the host's Docker
#   clusterctl.test/haproxy:1              the lab's API load balancer (`spec.docker.loadBalancer`, issue 27): the
#       equivalent of kind's kindest/haproxy made from Debian's haproxy package (/usr/sbin/haproxy with the
#       libraries it links, kind's default /usr/local/etc/haproxy/haproxy.cfg), Entrypoint
#       ["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]; run by the host's Docker
# and the images the conformance tests of the e2e suite run (issue 24), under the names and tags the framework's
# image manifest (test/utils/image/manifest.go of k8s.io/kubernetes@VERSION) gives them:
#   registry.k8s.io/e2e-test-images/agnhost:<tag>  /agnhost (build.sh builds k8s.io/kubernetes/test/images/agnhost)
#       on a Debian rootfs with what upstream's alpine image adds (test/images/agnhost/Dockerfile): dig
#       (bind9-dnsutils), curl, nc (netcat-openbsd), iproute2, iperf, bash; /coredns, /uploads,
#       /agnhost-2 -> agnhost, /localhost.crt + /localhost.key (the module's porter/ pair), the user
#       user-defined-in-image (1000) in group-defined-in-image (50000); Entrypoint ["/agnhost"], Cmd ["pause"]
#   registry.k8s.io/e2e-test-images/jessie-dnsutils:<tag>  the same Debian rootfs (dnsutils: dig, nslookup) + /coredns
#   registry.k8s.io/e2e-test-images/busybox:<tag>  Debian's busybox-static (as clusterctl.test/busybox:1)
# These three are written only for a VERSION whose e2e.test build.sh has built (the suite that runs them).
# Images the suite lists that are not made here (httpd, nginx, sample-apiserver, …): the tests using them are
# left out of scripts/conformance.sh's CI focus (docs/testing.md lists them).
# The names and tags are what `kubeadm config images list --kubernetes-version VERSION` prints; flannel's are
# the two `image:` references of the pinned kube-flannel.yml that build.sh read from flannel's Go module
# (the binaries: flanneld of that tag and the flannel plugin build.sh builds, see cni-versions.sh).
#
# Layout: $CACHE/images/VERSION/<name>/ (OCI layout dir), $CACHE/images/VERSION/<name>.oci.tar (oci-archive)
# and $CACHE/images/VERSION/images.txt, one line per image: REF LAYOUT_DIR ARCHIVE. An image is rewritten
# only when its inputs (its binaries and trees, its line here, oci.py, RECIPE) change. Prints images.txt at the end.
set -euo pipefail

CACHE=${CLUSTERCTL_TESTBED_CACHE:-/var/cache/clusterctl-testbed}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { printf '[k8s/images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ $# -eq 1 ] || die "usage: $0 VERSION"
VERSION=$1

mkdir -p "$CACHE/lock" "$CACHE/rootfs"
# One lock per VERSION for its images (versions are written side by side: v1.35.4's cold builds do not hold
# up v1.34.4's images), and one for the rootfs trees every version shares, taken (and held to the end)
# only while one of them is missing.
exec 8>"$CACHE/lock/images-$VERSION.lock"
flock 8
shared_locked=""
shared_lock() { [ -n "$shared_locked" ] || { exec 9>"$CACHE/lock/images.lock"; flock 9; shared_locked=1; }; }

# ---- the tools rootfs (iptables, conntrack, ipset, busybox-static, CA bundle), cached by recipe hash ----
suite=$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release | tr -d '"'); suite=${suite:-bookworm}
mirror=""
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  mirror=$(awk -v s="$suite" 'BEGIN{RS=""} $0 ~ "Suites:[^\n]*[ ]" s "([ \n]|$)" {
      for (i=1;i<=NF;i++) if ($i=="URIs:") {print $(i+1); exit}}' /etc/apt/sources.list.d/debian.sources)
fi
[ -n "$mirror" ] || mirror=$(awk -v s="$suite" '$1=="deb" { u=$2; t=$3; if (u ~ /^\[/) {u=$3; t=$4}; if (t==s) {print u; exit} }' /etc/apt/sources.list 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
TOOLS_PACKAGES="iptables,conntrack,ipset,busybox-static,ca-certificates"
tools_key=$(printf '%s %s %s' "$suite" "$TOOLS_PACKAGES" "v1" | sha256sum | cut -c1-12)
tools="$CACHE/rootfs/tools-$suite-$tools_key"
for t in "$tools" "$CACHE/rootfs/iptables-$tools_key" "$CACHE/rootfs/base-$tools_key" "$CACHE/rootfs/busybox-$tools_key"; do
  [ -f "$t/.complete" ] || shared_lock
done
if [ ! -f "$tools/.complete" ]; then
  command -v debootstrap >/dev/null || die "debootstrap missing (apt-get install -y debootstrap)"
  log "debootstrap $suite from $mirror with $TOOLS_PACKAGES (once; about a minute)"
  rm -rf "$tools"; mkdir -p "$tools"
  debootstrap --variant=minbase --include="$TOOLS_PACKAGES" "$suite" "$tools" "$mirror" >"$tools.log" 2>&1 \
    || { tail -n 30 "$tools.log" >&2; die "debootstrap failed"; }
  touch "$tools/.complete"
fi

# The iptables/conntrack/ipset subset: the programs, the xtables extension modules they dlopen, and every
# library either needs (ldd inside the rootfs), as a tree oci.py copies in.
ipt="$CACHE/rootfs/iptables-$tools_key"
if [ ! -f "$ipt/.complete" ]; then
  log "extracting the iptables subset of $tools"
  rm -rf "$ipt"; mkdir -p "$ipt/usr/sbin" "$ipt/etc"
  progs=(/usr/sbin/xtables-nft-multi /usr/sbin/xtables-legacy-multi /usr/sbin/conntrack /usr/sbin/ipset)
  for p in "${progs[@]}"; do cp -a "$tools$p" "$ipt$p"; done
  # iptables in nft mode, like Debian 12's default (the node's own iptables uses the same backend).
  for t in iptables ip6tables; do
    for s in "" -save -restore; do
      ln -sf xtables-nft-multi "$ipt/usr/sbin/$t$s"
      ln -sf xtables-nft-multi "$ipt/usr/sbin/$t-nft$s"
      ln -sf xtables-legacy-multi "$ipt/usr/sbin/$t-legacy$s"
    done
  done
  mkdir -p "$ipt/usr/lib/x86_64-linux-gnu"
  cp -a "$tools/usr/lib/x86_64-linux-gnu/xtables" "$ipt/usr/lib/x86_64-linux-gnu/"
  objs=("${progs[@]}")
  for so in "$tools"/usr/lib/x86_64-linux-gnu/xtables/*.so; do objs+=("${so#"$tools"}"); done
  libs=$(for o in "${objs[@]}"; do chroot "$tools" ldd "$o" 2>/dev/null || true; done \
    | awk '/=> \// {print $3} /^\t\/lib64\// {print $1}' | sort -u)
  for l in $libs; do
    real=$(chroot "$tools" readlink -f "$l")
    mkdir -p "$ipt$(dirname "$l")"
    cp -L "$tools$real" "$ipt$l"
  done
  for f in etc/protocols etc/ethertypes etc/services; do [ -f "$tools/$f" ] && cp "$tools/$f" "$ipt/$f"; done
  touch "$ipt/.complete"
fi

# ---- the common base --------------------------------------------------------------------------------
base="$CACHE/rootfs/base-$tools_key"
if [ ! -f "$base/.complete" ]; then
  rm -rf "$base"; mkdir -p "$base/etc/ssl/certs"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$base/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$base/etc/group"
  printf 'hosts: files dns\n' >"$base/etc/nsswitch.conf"
  cp -L "$tools/etc/ssl/certs/ca-certificates.crt" "$base/etc/ssl/certs/ca-certificates.crt"
  touch "$base/.complete"
fi

# ---- pause -------------------------------------------------------------------------------------------
pause_bin="$CACHE/bin/pause/$(sha256sum "$here/pause.c" | cut -c1-12)/pause"
if [ ! -x "$pause_bin" ]; then
  mkdir -p "$(dirname "$pause_bin")"
  gcc -static -Os -s -Wall -o "$pause_bin.tmp" "$here/pause.c" || die "gcc -static pause.c failed (needs gcc and libc6-dev)"
  mv "$pause_bin.tmp" "$pause_bin"
fi

# ---- busybox ----------------------------------------------------------------------------------------
bb="$CACHE/rootfs/busybox-$tools_key"
if [ ! -f "$bb/.complete" ]; then
  rm -rf "$bb"; mkdir -p "$bb/bin"
  cp "$tools/bin/busybox" "$bb/bin/busybox"
  for a in $("$bb/bin/busybox" --list); do [ "$a" = busybox ] || ln -sf busybox "$bb/bin/$a"; done
  touch "$bb/.complete"
fi

# ---- images ------------------------------------------------------------------------------------------
[ -z "${K8S_IMAGES_ROOTFS_ONLY:-}" ] || { log "rootfs only: $tools $ipt $bb"; exit 0; }
# The binaries (a no-op when cached). kube-vip may be recorded as unbuildable: then no kube-vip image.
"$here/build.sh" "$VERSION" kubeadm kube-apiserver kube-controller-manager kube-scheduler kube-proxy \
  etcd etcdctl etcdutl coredns kube-vip >/dev/null
bin() { "$here/paths.sh" "$VERSION" "$1"; }
envfile="$CACHE/versions/$VERSION.env"
# shellcheck disable=SC1090
. "$envfile"
out="$CACHE/images/$VERSION"
mkdir -p "$out"
images=$("$(bin kubeadm)" config images list --kubernetes-version "$VERSION")
ref_of() { grep -E "^registry\.k8s\.io/$1:" <<<"$images" || die "kubeadm lists no $1 image: $images"; }
# Every image's key (image() below) holds its reference, its arguments (every file and tree it is made of),
# those inputs' names, sizes and mtimes, and script_key: oci.py (which writes the layouts) and RECIPE, the
# version of what this script adds to every image (the base tree, image()'s layout). Not this script's own
# text, as it once was: then adding etcdutl to the etcd image rewrote every image, and runs of a branch and
# of main rewrote them all again in turn. Now a change to one image's line rewrites that image alone;
# change RECIPE by hand when the shared part changes (pause.c is in its image's --file path). RECIPE and
# OCI_PY are the values the hash of the scripts had when this began, so the switch rewrote no image.
RECIPE=092c69e8e928f968
OCI_PY=e06fa032d1119135
script_key=$RECIPE
oci_key=$(sha256sum "$here/oci.py" | cut -c1-16)
[ "$oci_key" = "$OCI_PY" ] || script_key=$(printf '%s %s' "$RECIPE" "$oci_key" | sha256sum | cut -c1-16)
: >"$out/images.txt.tmp"

# image REF ARGS... : writes the layout unless its key (inputs' names, sizes, mtimes + scripts) matches.
image() {
  local ref=$1; shift
  local name=${ref#*/}; name=${name//\//_}; name=${name//:/_}
  local dir="$out/$name" archive="$out/$name.oci.tar"
  local key; key=$( { echo "$ref $script_key $*"; for a in "$@"; do
      case "$a" in --file=*|--tree=*) p=${a#*=}; p=${p%%:*}; find "$p" -printf '%p %s %T@\n' 2>/dev/null;; esac; done; } | sha256sum | cut -c1-32)
  if [ -f "$dir/.key" ] && [ "$(cat "$dir/.key")" = "$key" ] && [ -f "$archive" ]; then
    log "up to date: $ref"
  else
    local t0=$SECONDS
    python3 "$here/oci.py" --out "$dir" --archive "$archive" --ref "$ref" --tree="$base:/" --dir=/tmp "$@"
    echo "$key" >"$dir/.key"
    log "wrote $ref in $((SECONDS - t0))s ($(du -sh "$archive" | cut -f1))"
  fi
  printf '%s %s %s\n' "$ref" "$dir" "$archive" >>"$out/images.txt.tmp"
}

for c in kube-apiserver kube-controller-manager kube-scheduler; do
  image "$(ref_of "$c")" --file="$(bin "$c"):/usr/local/bin/$c:0755"
done
image "$(ref_of kube-proxy)" --file="$(bin kube-proxy):/usr/local/bin/kube-proxy:0755" --tree="$ipt:/"
image "$(ref_of etcd)" --file="$(bin etcd):/usr/local/bin/etcd:0755" --file="$(bin etcdctl):/usr/local/bin/etcdctl:0755" \
  --file="$(bin etcdutl):/usr/local/bin/etcdutl:0755"
image "$(ref_of coredns/coredns)" --file="$(bin coredns):/coredns:0755" --entrypoint='["/coredns"]'
image "$(ref_of pause)" --file="$pause_bin:/pause:0755" --entrypoint='["/pause"]'
if vip=$(bin kube-vip 2>/dev/null) && [ -x "$vip" ]; then
  image "ghcr.io/kube-vip/kube-vip:$KUBE_VIP_VERSION" --file="$vip:/kube-vip:0755" --entrypoint='["/kube-vip"]'
else
  log "no kube-vip binary for $VERSION: no kube-vip image"
fi
"$here/build.sh" "$VERSION" kube-vip-cloud-provider >/dev/null
kvcp=$(bin kube-vip-cloud-provider)
image "ghcr.io/kube-vip/kube-vip-cloud-provider:$(basename "$(dirname "$kvcp")")" \
  --file="$kvcp:/kube-vip-cloud-provider:0755" --cmd='["/kube-vip-cloud-provider"]' --user=65532:65532
image clusterctl.test/busybox:1 --tree="$bb:/" --cmd='["sh"]'

# flannel (issue 13): the two images the pinned kube-flannel.yml runs, named as it names them.
"$here/build.sh" "$VERSION" flanneld flannel-cni flannel-manifest >/dev/null
flannel_yml=$(bin flannel-manifest)
flannel_ref() { grep -oE "image: *ghcr\.io/flannel-io/$1:[^ \"]+" "$flannel_yml" | sed 's/^image: *//' | sort -u \
  | { read -r r || die "no ghcr.io/flannel-io/$1 image in $flannel_yml"; echo "$r"; }; }
flannel_image=$(flannel_ref flannel); flannel_cni_image=$(flannel_ref flannel-cni-plugin)
image "$flannel_image" --file="$(bin flanneld):/opt/bin/flanneld:0755" --tree="$ipt:/" --tree="$bb:/" \
  --entrypoint='["/opt/bin/flanneld"]'
image "$flannel_cni_image" --file="$(bin flannel-cni):/flannel:0755" --tree="$bb:/"

# The lab's default StorageClass (issue 27): rancher/local-path-provisioner under the name and tag upstream's
# deploy/local-path-storage.yaml gives it, at the version build.sh pins (the product's pin, render's local_path.rs).
"$here/build.sh" "$VERSION" local-path-provisioner >/dev/null
lpp=$(bin local-path-provisioner)
image "docker.io/rancher/local-path-provisioner:$(basename "$(dirname "$lpp")")" \
  --file="$lpp:/usr/bin/local-path-provisioner:0755" --tree="$bb:/" --cmd='["local-path-provisioner"]'

# The lab's local registry (issue 27): Debian's docker-registry (scripts/packages/airgap.list) as registry:2.
registry_bin=/usr/bin/docker-registry
[ -x "$registry_bin" ] || die "$registry_bin missing (apt-get install -y docker-registry)"
reg_key=$(printf '%s %s' "$(dpkg-query -W -f '${Version}' docker-registry 2>/dev/null)" v1 | sha256sum | cut -c1-12)
reg_tree="$CACHE/rootfs/registry-$reg_key"
if [ ! -f "$reg_tree/.complete" ]; then
  rm -rf "$reg_tree"; mkdir -p "$reg_tree/bin" "$reg_tree/etc/docker/registry" "$reg_tree/var/lib/registry"
  cp "$registry_bin" "$reg_tree/bin/registry"
  for l in $(ldd "$registry_bin" | awk '/=> \// {print $3} /^\t\/lib64\// {print $1}'); do
    mkdir -p "$reg_tree$(dirname "$l")"; cp -L "$l" "$reg_tree$l"
  done
  cat >"$reg_tree/etc/docker/registry/config.yml" <<'YML'
version: 0.1
log:
  fields:
    service: registry
storage:
  cache:
    blobdescriptor: inmemory
  filesystem:
    rootdirectory: /var/lib/registry
http:
  addr: :5000
  headers:
    X-Content-Type-Options: [nosniff]
health:
  storagedriver:
    enabled: true
    interval: 10s
    threshold: 3
YML
  touch "$reg_tree/.complete"
fi
image clusterctl.test/registry:2 --tree="$reg_tree:/" --entrypoint='["registry"]' \
  --cmd='["serve", "/etc/docker/registry/config.yml"]' --env=PATH=/bin:/usr/bin

# The lab's API load balancer (issue 27 item 4): Debian's haproxy (scripts/packages/airgap.list) keeping the
# node contract of kind's kindest/haproxy, which the product pins (spec's lab.rs): haproxy in PATH, the
# configuration at /usr/local/etc/haproxy/haproxy.cfg (kind's default, maxconn 4000: a frontend on :6443 without servers,
# replaced by clusterctl before the first start), Entrypoint ["haproxy", "-W", "-db", "-f", that file],
# reloaded on SIGHUP; run by the host's Docker.
haproxy_bin=/usr/sbin/haproxy
[ -x "$haproxy_bin" ] || die "$haproxy_bin missing (apt-get install -y haproxy)"
lb_key=$(printf '%s %s' "$(dpkg-query -W -f '${Version}' haproxy 2>/dev/null)" v1 | sha256sum | cut -c1-12)
lb_tree="$CACHE/rootfs/haproxy-$lb_key"
if [ ! -f "$lb_tree/.complete" ]; then
  rm -rf "$lb_tree"; mkdir -p "$lb_tree/usr/sbin" "$lb_tree/usr/local/etc/haproxy" "$lb_tree/run" "$lb_tree/var/lib/haproxy"
  cp "$haproxy_bin" "$lb_tree/usr/sbin/haproxy"
  for l in $(ldd "$haproxy_bin" | awk '/=> \// {print $3} /^\t\/lib64\// {print $1}'); do
    mkdir -p "$lb_tree$(dirname "$l")"; cp -L "$l" "$lb_tree$l"
  done
  printf 'global\n  maxconn 4000\n\nfrontend controlPlane\n  bind 0.0.0.0:6443\n  mode tcp\n  default_backend kube-apiservers\n\nbackend kube-apiservers\n  mode tcp\n' \
    >"$lb_tree/usr/local/etc/haproxy/haproxy.cfg"
  touch "$lb_tree/.complete"
fi
image clusterctl.test/haproxy:1 --tree="$lb_tree:/" \
  --entrypoint='["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]' --env=PATH=/usr/sbin:/usr/bin:/sbin:/bin

# ---- the conformance suite's images (issue 24), for a version whose e2e.test is built --------------------
e2e_images() {
  E2E_PACKAGES="bash,curl,bind9-dnsutils,netcat-openbsd,iproute2,iperf,iputils-ping,procps,wget,ca-certificates"
  e2e_key=$(printf '%s %s %s' "$suite" "$E2E_PACKAGES" "v1" | sha256sum | cut -c1-12)
  e2e_rootfs="$CACHE/rootfs/e2e-$suite-$e2e_key"
  [ -f "$e2e_rootfs/.complete" ] || shared_lock
  if [ ! -f "$e2e_rootfs/.complete" ]; then
    log "debootstrap $suite from $mirror with $E2E_PACKAGES (once; about a minute)"
    rm -rf "$e2e_rootfs"; mkdir -p "$e2e_rootfs"
    debootstrap --variant=minbase --include="$E2E_PACKAGES" "$suite" "$e2e_rootfs" "$mirror" >"$e2e_rootfs.log" 2>&1 \
      || { tail -n 30 "$e2e_rootfs.log" >&2; die "debootstrap (e2e images) failed"; }
    rm -rf "$e2e_rootfs"/var/cache/apt/archives/*.deb "$e2e_rootfs"/var/lib/apt/lists/* "$e2e_rootfs"/usr/share/doc \
      "$e2e_rootfs"/usr/share/man "$e2e_rootfs"/usr/share/info "$e2e_rootfs"/usr/share/locale "$e2e_rootfs"/dev/*
    # upstream's `adduser -u 1000 -D user-defined-in-image; addgroup -g 50000 group-defined-in-image; addgroup user… group…`
    echo 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh' >>"$e2e_rootfs/etc/passwd"
    echo 'user-defined-in-image:x:1000:' >>"$e2e_rootfs/etc/group"
    echo 'group-defined-in-image:x:50000:user-defined-in-image' >>"$e2e_rootfs/etc/group"
    mkdir -p "$e2e_rootfs/home/user-defined-in-image" "$e2e_rootfs/uploads"
    touch "$e2e_rootfs/.complete"
  fi
  "$here/build.sh" "$VERSION" agnhost >/dev/null
  k8s_src=$(GOMODCACHE="$CACHE/go/mod" GOFLAGS=-mod=mod GOPROXY=https://proxy.golang.org GOTOOLCHAIN=local \
    go mod download -json "k8s.io/kubernetes@$VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  manifest="$k8s_src/test/utils/image/manifest.go"
  [ -f "$manifest" ] || die "no $manifest"
  # e2e_ref NAME: the reference manifest.go gives NAME (configs[X] = Config{list.PromoterE2eRegistry, "NAME", "TAG"}).
  e2e_ref() {
    local tag; tag=$(sed -nE "s/^[[:space:]]*configs\[[A-Za-z]+\] = Config\{list\.PromoterE2eRegistry, \"$1\", \"([^\"]+)\"\}.*/\1/p" "$manifest" | head -n 1)
    [ -n "$tag" ] || die "$manifest names no e2e image $1"
    echo "registry.k8s.io/e2e-test-images/$1:$tag"
  }
  agnhost_ref=$(e2e_ref agnhost)
  [ "${agnhost_ref##*:}" = "$(tr -d ' \n' <"$k8s_src/test/images/agnhost/VERSION")" ] \
    || log "warning: manifest.go's $agnhost_ref differs from test/images/agnhost/VERSION"
  image "$agnhost_ref" --tree="$e2e_rootfs:/" --file="$(bin agnhost):/agnhost:0755" --symlink=/agnhost-2:agnhost \
    --file="$(bin coredns):/coredns:0755" \
    --file="$k8s_src/test/images/agnhost/porter/localhost.crt:/localhost.crt:0644" \
    --file="$k8s_src/test/images/agnhost/porter/localhost.key:/localhost.key:0644" \
    --entrypoint='["/agnhost"]' --cmd='["pause"]'
  image "$(e2e_ref jessie-dnsutils)" --tree="$e2e_rootfs:/" --file="$(bin coredns):/coredns:0755"
  image "$(e2e_ref busybox)" --tree="$bb:/" --cmd='["sh"]'
}
# kube-network-policies (issue 28): the NetworkPolicy benchmark's peer, under upstream's image name.
if knp=$(bin kube-network-policies 2>/dev/null) && [ -x "$knp" ]; then
  image "registry.k8s.io/networking/kube-network-policies:$(basename "$(dirname "$knp")")" \
    --file="$knp:/bin/netpol:0755" --cmd='["/bin/netpol"]'
else
  log "no kube-network-policies binary: no kube-network-policies image"
fi
if bin e2e.test >/dev/null 2>&1; then e2e_images; else log "no e2e.test for $VERSION: no conformance images"; fi

mv "$out/images.txt.tmp" "$out/images.txt"
cat "$out/images.txt"
