#!/usr/bin/env bash
# Test bed only (never shipped): builds the upstream Kubernetes programs, and the node-side programs a
# Kubernetes version needs, from their published Go modules, into a cache outside the clone:
#
#   scripts/k8s/build.sh VERSION [PROGRAM...]
#
# VERSION is a Kubernetes tag (v1.34.4). PROGRAMs (default: all) are any of
#   kubeadm kubelet kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubectl
#   etcd etcdctl etcdutl coredns crictl kube-vip kube-vip-cloud-provider containerd containerd-shim-runc-v2 ctr runc
#   cni-plugins
#   helm flanneld flannel-cni flannel-manifest cilium-chart kindnet-manifest e2e.test ginkgo agnhost kwok
#   kube-network-policies
#   local-path-provisioner (github.com/rancher/local-path-provisioner@$LOCAL_PATH_PROVISIONER_VERSION: the binary of
#   the rancher/local-path-provisioner image, the default StorageClass of docker-provider labs; images.sh wraps it)
# or the groups `kubernetes` (the seven Kubernetes programs), `control-plane` (kubeadm, kubelet, kubectl,
# kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, etcd, etcdctl, coredns), `node`
# (containerd, containerd-shim-runc-v2, ctr, runc, cni-plugins, crictl), `cni` (helm, flanneld, flannel-cni,
# flannel-manifest, cilium-chart, kindnet-manifest: what the third-party CNI tests run or serve, versions in
# cni-versions.sh). flannel-manifest, cilium-chart and kindnet-manifest are upstream files, not programs:
# flannel's Documentation/kube-flannel.yml, the `helm package` of cilium's install/kubernetes/cilium, and
# kind's default CNI manifest (the constant kind's node image build writes to /kind/manifests/default-cni.yaml,
# evaluated by scripts/k8s/kind-cni.go), each read from its Go module at the pinned tag.
# `conformance` (e2e.test, ginkgo, agnhost) is the conformance suite of the same module: e2e.test is
# `go test -c k8s.io/kubernetes/test/e2e`, stamped with the same version ldflags as the Kubernetes programs;
# ginkgo is github.com/onsi/ginkgo/v2/ginkgo at the version k8s.io/kubernetes@VERSION's go.mod requires;
# agnhost is k8s.io/kubernetes/test/images/agnhost (the binary of the e2e image; images.sh wraps it).
# They are built in their own copy of the build module under their own lock (e2e.test takes minutes), and
# only when named (not part of the default `all`). `kwok` (sigs.k8s.io/kwok/cmd/kwok at $KWOK_VERSION, the scale
# benchmarks' simulated Nodes and Pods) is built only when named too, with the module's `fast` node and pod
# Stage files copied beside it (stages/*.yaml: kwok refuses to start without stages). `kube-network-policies`
# (sigs.k8s.io/kube-network-policies/cmd at $KUBE_NETWORK_POLICIES_VERSION, the NetworkPolicy benchmark's peer,
# built as upstream's Dockerfile builds /bin/netpol: CGO_ENABLED=0 go build ./cmd) likewise only when named.
#
# Layout ($CACHE = ${CLUSTERCTL_TESTBED_CACHE:-/var/cache/clusterctl-testbed}):
#   $CACHE/bin/<program>/<program version>/<program>   one binary (cni-plugins: a CNI bin dir of plugins)
#   $CACHE/versions/<VERSION>.env                      component versions chosen for VERSION (paths.sh reads it)
#   $CACHE/go/mod, $CACHE/go/build                     GOMODCACHE, GOCACHE
#   $CACHE/work/<module>@<version>/go.mod              the generated build modules (never in the repo)
#   $CACHE/times.log                                   one line per build: date program version seconds
# The Kubernetes programs are keyed by VERSION; etcd, CoreDNS and the rest by their own versions, chosen
# for VERSION (etcd and CoreDNS: what `kubeadm config images list` pins; the others: the defaults below,
# overridable by CONTAINERD_VERSION, RUNC_VERSION, CNI_PLUGINS_VERSION, CRICTL_VERSION, KUBE_VIP_VERSION).
# kube-vip-cloud-provider (the LoadBalancer address allocator) is keyed by KUBE_VIP_CLOUD_PROVIDER_VERSION
# alone (the product's default, v0.0.12), whatever VERSION is.
#
# A second run finds every binary and runs no go command. Concurrent callers serialise on a flock, and the
# one that waited finds the binaries the first one built.
set -euo pipefail

CACHE=${CLUSTERCTL_TESTBED_CACHE:-/var/cache/clusterctl-testbed}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

log() { printf '[k8s/build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ $# -ge 1 ] || die "usage: $0 VERSION [PROGRAM...]"
VERSION=$1; shift
[[ $VERSION =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || die "VERSION must look like v1.34.4, got '$VERSION'"
MINOR=${BASH_REMATCH[1]}
PATCH=${BASH_REMATCH[2]}

K8S_PROGRAMS=(kubeadm kubelet kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubectl)
CONTAINERD_PROGRAMS=(containerd containerd-shim-runc-v2 ctr)
CNI_PROGRAMS=(helm flanneld flannel-cni flannel-manifest cilium-chart kindnet-manifest)
CONFORMANCE_PROGRAMS=(e2e.test ginkgo agnhost)
ALL_PROGRAMS=("${K8S_PROGRAMS[@]}" etcd etcdctl etcdutl coredns crictl kube-vip kube-vip-cloud-provider "${CONTAINERD_PROGRAMS[@]}" runc cni-plugins "${CNI_PROGRAMS[@]}" local-path-provisioner)
CNI_PLUGINS=(bridge host-local loopback portmap ptp bandwidth tuning firewall static)

# Node-side defaults (not pinned by kubeadm). containerd 2.2 and runc 1.3 are what Kubernetes 1.34–1.36 CI
# runs; Debian 12's containerd 1.6.20 and CNI plugins 1.1.1 are older than those releases support.
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.2.1}
RUNC_VERSION=${RUNC_VERSION:-v1.3.3}
CNI_PLUGINS_VERSION=${CNI_PLUGINS_VERSION:-v1.10.0}
KUBE_VIP_VERSION=${KUBE_VIP_VERSION:-v1.0.0}
KUBE_VIP_CLOUD_PROVIDER_VERSION=${KUBE_VIP_CLOUD_PROVIDER_VERSION:-v0.0.12}
# The version the product pins (render's local_path.rs); its binary is keyed by this version alone.
LOCAL_PATH_PROVISIONER_VERSION=${LOCAL_PATH_PROVISIONER_VERSION:-v0.0.30}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
KUBE_NETWORK_POLICIES_VERSION=${KUBE_NETWORK_POLICIES_VERSION:-v0.8.0}
# shellcheck source=cni-versions.sh
. "$here/cni-versions.sh"

# ---- which programs --------------------------------------------------------------------------------
want=()
if [ $# -eq 0 ]; then want=("${ALL_PROGRAMS[@]}"); fi
for p in "$@"; do
  case "$p" in
    all) want+=("${ALL_PROGRAMS[@]}") ;;
    kubernetes) want+=("${K8S_PROGRAMS[@]}") ;;
    control-plane) want+=("${K8S_PROGRAMS[@]}" etcd etcdctl etcdutl coredns) ;;
    node) want+=("${CONTAINERD_PROGRAMS[@]}" runc cni-plugins crictl) ;;
    cni) want+=("${CNI_PROGRAMS[@]}") ;;
    conformance) want+=("${CONFORMANCE_PROGRAMS[@]}") ;;
    *)
      ok=0; for q in "${ALL_PROGRAMS[@]}" "${CONFORMANCE_PROGRAMS[@]}" kwok kube-network-policies; do [ "$q" = "$p" ] && ok=1; done
      [ $ok = 1 ] || die "unknown program '$p' (known: ${ALL_PROGRAMS[*]} ${CONFORMANCE_PROGRAMS[*]} kwok kube-network-policies)"
      want+=("$p") ;;
  esac
done
# de-duplicate, keep order
declare -A seen=(); wanted=()
for p in "${want[@]}"; do [ -n "${seen[$p]:-}" ] || { seen[$p]=1; wanted+=("$p"); }; done

mkdir -p "$CACHE/bin" "$CACHE/versions" "$CACHE/work" "$CACHE/go" "$CACHE/lock"
envfile="$CACHE/versions/$VERSION.env"

# The binary path of PROGRAM under the component versions in $envfile (empty when not yet known).
path_of() {
  local p=$1 v=""
  case "$p" in
    kubeadm|kubelet|kube-apiserver|kube-controller-manager|kube-scheduler|kube-proxy|kubectl|e2e.test|agnhost) v=$VERSION ;;
    ginkgo) v=$(ginkgo_version) ;;
    kube-vip-cloud-provider) v=$KUBE_VIP_CLOUD_PROVIDER_VERSION ;;
    local-path-provisioner) v=$LOCAL_PATH_PROVISIONER_VERSION ;;
    kwok) v=$KWOK_VERSION ;;
    kube-network-policies) v=$KUBE_NETWORK_POLICIES_VERSION ;;
    helm|flanneld|flannel-cni|flannel-manifest|cilium-chart|kindnet-manifest) cni_path "$p"; return 0 ;;
    *) [ -f "$envfile" ] && v=$(. "$envfile"; case "$p" in
          etcd|etcdctl|etcdutl) echo "${ETCD_VERSION:-}" ;; coredns) echo "${COREDNS_VERSION:-}" ;;
          crictl) echo "${CRICTL_VERSION:-}" ;; kube-vip) echo "${KUBE_VIP_VERSION:-}" ;;
          containerd|containerd-shim-runc-v2|ctr) echo "${CONTAINERD_VERSION:-}" ;;
          runc) echo "${RUNC_VERSION:-}" ;; cni-plugins) echo "${CNI_PLUGINS_VERSION:-}" ;; esac) ;;
  esac
  [ -n "$v" ] || return 0
  if [ "$p" = cni-plugins ]; then echo "$CACHE/bin/$p/$v"; else echo "$CACHE/bin/$p/$v/$p"; fi
}
# The ginkgo version k8s.io/kubernetes@VERSION's go.mod requires (empty before the module is downloaded).
ginkgo_version() {
  local mod="$CACHE/go/mod/cache/download/k8s.io/kubernetes/@v/$VERSION.mod"
  [ -f "$mod" ] || return 0
  awk '$1=="github.com/onsi/ginkgo/v2" {print $2; exit} $1=="require" && $2=="github.com/onsi/ginkgo/v2" {print $3; exit}' "$mod"
}
# libseccomp-dev is installed: runc is built with seccomp (scripts/packages/packages.list).
seccomp_lib() { [ -f /usr/lib/x86_64-linux-gnu/libseccomp.a ] || [ -f /usr/lib/libseccomp.a ]; }
have() {
  local f; f=$(path_of "$1"); [ -n "$f" ] || return 1
  case "$1" in
    cni-plugins) [ -x "$f/bridge" ] ;;
    # A runc cached before libseccomp-dev was there counts as missing once it is: containerd 2 starts
    # every pod sandbox with the default seccomp profile, which such a runc refuses ("seccomp: config
    # provided but seccomp not supported").
    runc) [ -x "$f" ] && { ! seccomp_lib || "$f" --version 2>/dev/null | grep -q '^libseccomp'; } ;;
    flannel-manifest|cilium-chart|kindnet-manifest) [ -f "$f" ] ;;
    *) [ -f "$f" ] && [ -x "$f" ] ;;
  esac
}
# kube-vip may be recorded as unbuildable (a marker with the reason); then it counts as done.
vip_failed() { local f; f=$(path_of kube-vip); [ -n "$f" ] && [ -f "$(dirname "$f")/FAILED" ]; }

all_present() {
  local p
  for p in "${wanted[@]}"; do
    if [ "$p" = kube-vip ] && vip_failed; then continue; fi
    have "$p" || return 1
  done
}

report() {
  local p f
  for p in "${wanted[@]}"; do
    f=$(path_of "$p")
    if [ "$p" = kube-vip ] && vip_failed; then
      printf '%-26s NOT BUILT: %s\n' "$p" "$(head -n 1 "$(dirname "$f")/FAILED")"
    else
      printf '%-26s %s\n' "$p" "$f"
    fi
  done
}

# Fast path: everything there, no lock, no go.
if all_present; then report; exit 0; fi

# Locks: one per build module (the generated go.mod dir is shared by the programs of one module, and go
# rewrites its go.mod/go.sum), one per VERSION for the versions file. A caller that waited re-checks and
# finds what the holder built; builds of different modules may run side by side.
locked() {  # locked NAME CMD...: runs CMD under an exclusive flock on $CACHE/lock/NAME.lock
  local name=$1 fd rc=0; shift
  exec {fd}>"$CACHE/lock/${name//\//_}.lock"
  if ! flock -n "$fd"; then log "waiting for the lock $name"; flock "$fd"; fi
  "$@" || rc=$?
  exec {fd}>&-
  return $rc
}

# ---- Go environment --------------------------------------------------------------------------------
command -v go >/dev/null || die "go not found (Go 1.26 is on the machine image)"
export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build"
export GOPROXY=https://proxy.golang.org GOTOOLCHAIN=local GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0
unset GOOS GOARCH GOPRIVATE GONOSUMDB GONOPROXY 2>/dev/null || true

served() { go list -m "$1@$2" >/dev/null 2>&1; }

# A stable 40-hex "commit" for version stamps: the module proxy serves no VCS origin for these modules,
# so this is the sha1 of the module's go.sum hash (stable per module version; not upstream's commit).
stable_commit() {
  local j; j=$(go mod download -json "$1@$2")
  printf '%s' "$(printf '%s' "$j" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Sum"])')" | sha1sum | cut -c1-40
}
module_time() {   # commit time the proxy records for the version (fixed per version)
  local j; j=$(go mod download -json "$1@$2")
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["Time"])' "$(printf '%s' "$j" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Info"])')"
}

# Writes a build module for MODULE@MVERSION under $CACHE/work and prints its dir. It carries the target's
# go and godebug directives (so the binary gets upstream's GODEBUG defaults) and its non-local replace
# directives (so dependency versions are upstream's). Extra `-replace=` flags may follow.
make_build_module() {
  local module=$1 mversion=$2; shift 2
  local dir="$CACHE/work/$(printf '%s' "$module" | tr '/' '_')@$mversion"
  if [ -f "$dir/go.mod" ] && [ -f "$dir/.complete" ]; then echo "$dir"; return; fi
  rm -rf "$dir"; mkdir -p "$dir"
  local gomod; gomod=$(go mod download -json "$module@$mversion" | python3 -c '
import json,sys
d=json.load(sys.stdin)
if d.get("Error"): sys.exit("go mod download %s@%s: %s" % (d["Path"], d["Version"], d["Error"]))
print(d["GoMod"])') || return 1
  python3 - "$gomod" "$module" "$mversion" "$dir/go.mod" "$@" <<'PY'
import re, subprocess, sys, json
gomod, module, version, out, *extra = sys.argv[1:]
text = open(gomod).read()
j = json.loads(subprocess.check_output(["go", "mod", "edit", "-json", gomod]))
lines = ["// Generated by clusterctl scripts/k8s/build.sh: builds %s@%s outside its repository." % (module, version),
         "module clusterctl.test/build", "", "go %s" % j.get("Go", "1.22")]
for g in j.get("GoDebug") or j.get("Godebug") or []:
    lines.append("godebug %s=%s" % (g["Key"], g["Value"]))
lines += ["", "require %s %s" % (module, version), ""]
reps = []
for r in j.get("Replace") or []:
    new = r["New"]
    if not new.get("Version"):
        continue  # a local path inside the upstream repository: its modules are required at the same version
    old = r["Old"]["Path"] + ((" " + r["Old"]["Version"]) if r["Old"].get("Version") else "")
    reps.append("\t%s => %s %s" % (old, new["Path"], new["Version"]))
for e in extra:
    o, n = e.split("=", 1)
    np, nv = n.split("@", 1)
    reps.append("\t%s => %s %s" % (o, np, nv))
if reps:
    lines += ["replace ("] + reps + [")"]
open(out, "w").write("\n".join(lines) + "\n")
PY
  echo "$dir"
}

# go_build NAME OUTDIR_VERSION BUILD_MODULE_DIR PACKAGE LDFLAGS [TAGS] [CGO]
go_build() {
  local name=$1 keyver=$2 dir=$3 pkg=$4 ldflags=$5 tags=${6:-} cgo=${7:-0}
  [ -n "$dir" ] && [ -f "$dir/go.mod" ] || { log "no build module for $name"; return 1; }
  local dest="$CACHE/bin/$name/$keyver"
  mkdir -p "$dest"
  local t0 t1; t0=$(date +%s.%N)
  log "building $name $keyver ($pkg, CGO_ENABLED=$cgo${tags:+, tags: $tags})"
  ( cd "$dir" && CGO_ENABLED=$cgo go build -trimpath ${tags:+-tags "$tags"} -ldflags "$ldflags" -o "$dest/.$name.tmp" "$pkg" ) \
    || { rm -f "$dest/.$name.tmp"; return 1; }
  touch "$dir/.complete"
  mv -f "$dest/.$name.tmp" "$dest/$name"
  t1=$(date +%s.%N)
  local secs; secs=$(python3 -c "print(round($t1-$t0,1))")
  printf '%s %s %s %ss nproc=%s\n' "$(date -u +%FT%TZ)" "$name" "$keyver" "$secs" "$(nproc)" >>"$CACHE/times.log"
  TIMES+=("$name $keyver ${secs}s")
  log "built $name $keyver in ${secs}s"
}
TIMES=()

# ---- Kubernetes ------------------------------------------------------------------------------------
k8s_module_dir() {
  served k8s.io/kubernetes "$VERSION" || die "k8s.io/kubernetes@$VERSION is not served by the module proxy; served: $(go list -m -versions k8s.io/kubernetes)"
  local gomod staging=()
  gomod=$(go mod download -json "k8s.io/kubernetes@$VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  # Every staging module of k8s.io/kubernetes (its replace block, `k8s.io/<m> => ./staging/src/k8s.io/<m>`)
  # is required at v0.MINOR.PATCH, the tag published together with VERSION.
  mapfile -t staging < <(go mod edit -json "$gomod" | python3 -c '
import json,sys
for r in json.load(sys.stdin).get("Replace") or []:
    if r["New"]["Path"].startswith("./staging/"): print(r["Old"]["Path"])')
  [ ${#staging[@]} -gt 0 ] || die "no staging modules in k8s.io/kubernetes@$VERSION go.mod"
  local reps=() m
  for m in "${staging[@]}"; do reps+=("$m=$m@v0.$MINOR.$PATCH"); done
  make_build_module k8s.io/kubernetes "$VERSION" "${reps[@]}"
}

k8s_ldflags() {
  local commit date x=""
  commit=$(stable_commit k8s.io/kubernetes "$VERSION")
  date=$(module_time k8s.io/kubernetes "$VERSION")
  local p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    x+=" -X $p.gitVersion=$VERSION -X $p.gitMajor=1 -X $p.gitMinor=$MINOR -X $p.gitTreeState=clean"
    x+=" -X $p.gitCommit=$commit -X $p.buildDate=$date"
  done
  echo "-s -w$x"
}

build_k8s() {
  local prog=$1
  have "$prog" && return 0
  [ -n "${K8S_DIR:-}" ] || K8S_DIR=$(k8s_module_dir)
  [ -n "${K8S_LDFLAGS:-}" ] || K8S_LDFLAGS=$(k8s_ldflags)
  go_build "$prog" "$VERSION" "$K8S_DIR" "k8s.io/kubernetes/cmd/$prog" "$K8S_LDFLAGS"
  local got; got=$("$CACHE/bin/$prog/$VERSION/$prog" --version 2>/dev/null || true)
  [ "$prog" = kubeadm ] && got=$("$CACHE/bin/kubeadm/$VERSION/kubeadm" version -o short)
  [ "$prog" = kubectl ] && got=$("$CACHE/bin/kubectl/$VERSION/kubectl" version --client -o yaml | sed -n 's/^ *gitVersion: //p' | head -n1)
  case "$got" in *"$VERSION"*) ;; *) log "warning: $prog reports '$got', expected $VERSION" ;; esac
}

# ---- the conformance suite (e2e.test, ginkgo, agnhost) -------------------------------------------------
# A copy of the Kubernetes build module, so the long e2e.test build holds its own lock, not the one the
# Kubernetes programs build under.
e2e_module_dir() {
  local src dir="$CACHE/work/k8s.io_kubernetes-e2e@$VERSION"
  if [ -f "$dir/go.mod" ]; then echo "$dir"; return; fi
  src=$(locked "k8s.io/kubernetes@$VERSION" k8s_module_dir) || return 1
  mkdir -p "$dir"; cp "$src/go.mod" "$dir/go.mod"; [ -f "$src/go.sum" ] && cp "$src/go.sum" "$dir/go.sum"
  echo "$dir"
}

build_conformance() {
  local prog=$1
  have "$prog" && return 0
  local dir; dir=$(e2e_module_dir) || return 1
  [ -n "${K8S_LDFLAGS:-}" ] || K8S_LDFLAGS=$(k8s_ldflags)
  case "$prog" in
    agnhost) go_build agnhost "$VERSION" "$dir" k8s.io/kubernetes/test/images/agnhost "$K8S_LDFLAGS" ;;
    ginkgo)
      local want; want=$(ginkgo_version)
      [ -n "$want" ] || die "cannot read the ginkgo version from k8s.io/kubernetes@$VERSION's go.mod"
      go_build ginkgo "$want" "$dir" github.com/onsi/ginkgo/v2/ginkgo "-s -w"
      local got; got=$(cd "$dir" && go list -m -f '{{.Version}}' github.com/onsi/ginkgo/v2)
      [ "$got" = "$want" ] || log "warning: ginkgo resolved to $got in the build module, k8s.io/kubernetes requires $want" ;;
    e2e.test)
      local dest="$CACHE/bin/e2e.test/$VERSION" t0 t1 secs
      mkdir -p "$dest"; t0=$(date +%s.%N)
      log "building e2e.test $VERSION (go test -c k8s.io/kubernetes/test/e2e; minutes)"
      ( cd "$dir" && go test -c -trimpath -ldflags "$K8S_LDFLAGS" -o "$dest/.e2e.test.tmp" k8s.io/kubernetes/test/e2e ) \
        || { rm -f "$dest/.e2e.test.tmp"; return 1; }
      mv -f "$dest/.e2e.test.tmp" "$dest/e2e.test"
      t1=$(date +%s.%N); secs=$(python3 -c "print(round($t1-$t0,1))")
      printf '%s %s %s %ss nproc=%s\n' "$(date -u +%FT%TZ)" e2e.test "$VERSION" "$secs" "$(nproc)" >>"$CACHE/times.log"
      TIMES+=("e2e.test $VERSION ${secs}s")
      log "built e2e.test $VERSION in ${secs}s"
      # The framework prints the version it was stamped with (and exits) for --version.
      local got; got=$(timeout 60 "$dest/e2e.test" --version 2>/dev/null || true)
      [ "$got" = "$VERSION" ] || log "warning: e2e.test --version says '$got', expected $VERSION" ;;
  esac
}

# ---- the versions for VERSION (needs kubeadm) --------------------------------------------------------
nearest_served() {  # MODULE WANTED: WANTED when served, else the newest listed patch of its minor, else ""
  local module=$1 wanted=$2
  if served "$module" "$wanted"; then echo "$wanted"; return; fi
  local mm=${wanted%.*}
  go list -m -versions "$module" | tr ' ' '\n' | grep -E "^${mm//./\\.}\.[0-9]+$" | sort -V | tail -n 1
}

resolve_versions() {
  [ -f "$envfile" ] && return 0
  build_k8s kubeadm
  local images etcd_tag coredns_tag pause_tag etcd_v coredns_v crictl_v
  images=$("$CACHE/bin/kubeadm/$VERSION/kubeadm" config images list --kubernetes-version "$VERSION" 2>/dev/null)
  etcd_tag=$(sed -n 's#^registry.k8s.io/etcd:##p' <<<"$images")
  coredns_tag=$(sed -n 's#^registry.k8s.io/coredns/coredns:##p' <<<"$images")
  pause_tag=$(sed -n 's#^registry.k8s.io/pause:##p' <<<"$images")
  [ -n "$etcd_tag" ] && [ -n "$coredns_tag" ] || die "cannot read etcd/coredns from: $images"
  etcd_v=$(nearest_served go.etcd.io/etcd/server/v3 "v${etcd_tag%%-*}")
  coredns_v=$(nearest_served github.com/coredns/coredns "$coredns_tag")
  crictl_v=${CRICTL_VERSION:-}
  if [ -z "$crictl_v" ]; then
    crictl_v=$(nearest_served sigs.k8s.io/cri-tools "v1.$MINOR.0")
    # none of this minor: the newest served older one
    [ -n "$crictl_v" ] || crictl_v=$(go list -m -versions sigs.k8s.io/cri-tools | tr ' ' '\n' | grep -E '^v1\.[0-9]+\.[0-9]+$' \
      | awk -F. -v m="$MINOR" '$2<=m' | sort -V | tail -n 1)
  fi
  cat >"$envfile.tmp" <<EOF
# Component versions for Kubernetes $VERSION (written by scripts/k8s/build.sh; read by paths.sh and images.sh).
KUBERNETES_VERSION=$VERSION
ETCD_IMAGE_TAG=$etcd_tag
ETCD_VERSION=$etcd_v
COREDNS_IMAGE_TAG=$coredns_tag
COREDNS_VERSION=$coredns_v
PAUSE_IMAGE_TAG=$pause_tag
CRICTL_VERSION=$crictl_v
KUBE_VIP_VERSION=$KUBE_VIP_VERSION
CONTAINERD_VERSION=$CONTAINERD_VERSION
RUNC_VERSION=$RUNC_VERSION
CNI_PLUGINS_VERSION=$CNI_PLUGINS_VERSION
EOF
  mv "$envfile.tmp" "$envfile"
  log "versions for $VERSION: etcd $etcd_v (image $etcd_tag), coredns $coredns_v, pause $pause_tag, crictl $crictl_v"
}

# ---- the others --------------------------------------------------------------------------------------
ev() { (. "$envfile"; eval "echo \${$1}"); }

build_etcd() {
  local prog=$1 v; v=$(ev ETCD_VERSION)
  have "$prog" && return 0
  local module pkg
  case "$prog" in
    etcd) module=go.etcd.io/etcd/server/v3; pkg=go.etcd.io/etcd/server/v3 ;;
    # etcdutl (snapshot status/restore: removed from etcdctl in 3.6) ships in the upstream etcd image.
    etcdutl) module=go.etcd.io/etcd/etcdutl/v3; pkg=go.etcd.io/etcd/etcdutl/v3 ;;
    *) module=go.etcd.io/etcd/etcdctl/v3; pkg=go.etcd.io/etcd/etcdctl/v3 ;;
  esac
  local dir; dir=$(make_build_module "$module" "$v")
  go_build "$prog" "$v" "$dir" "$pkg" "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$(stable_commit "$module" "$v" | cut -c1-8)"
}

build_coredns() {
  local v; v=$(ev COREDNS_VERSION)
  have coredns && return 0
  local dir; dir=$(make_build_module github.com/coredns/coredns "$v")
  go_build coredns "$v" "$dir" github.com/coredns/coredns \
    "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$(stable_commit github.com/coredns/coredns "$v" | cut -c1-7)"
}

build_crictl() {
  local v; v=$(ev CRICTL_VERSION)
  have crictl && return 0
  local dir; dir=$(make_build_module sigs.k8s.io/cri-tools "$v")
  go_build crictl "$v" "$dir" sigs.k8s.io/cri-tools/cmd/crictl "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$v"
}

build_kube_vip() {
  local v; v=$(ev KUBE_VIP_VERSION)
  have kube-vip && return 0
  vip_failed && return 0
  local dir err=""
  # The checksum database the proxy mirrors answers 404 for github.com/kube-vip/kube-vip (v0.9.2, v1.0.0:
  # "verifying go.mod: ... sumdb/sum.golang.org/lookup/github.com/kube-vip/kube-vip@v1.0.0: 404 Not Found"),
  # so that one module is fetched from the proxy without the checksum database (its dependencies are checked).
  local -x GONOSUMDB=github.com/kube-vip/kube-vip
  local errf; errf=$(mktemp)
  dir=$(make_build_module github.com/kube-vip/kube-vip "$v" 2>"$errf") || { err=$(cat "$errf"); dir=""; }
  rm -f "$errf"
  if [ -z "$dir" ] || ! err=$(go_build kube-vip "$v" "$dir" github.com/kube-vip/kube-vip \
      "-s -w -X main.Version=$v -X main.Build=$(stable_commit github.com/kube-vip/kube-vip "$v" | cut -c1-8)" 2>&1); then
    mkdir -p "$CACHE/bin/kube-vip/$v"
    printf 'go build github.com/kube-vip/kube-vip@%s failed:\n%s\n' "$v" "$err" >"$CACHE/bin/kube-vip/$v/FAILED"
    log "kube-vip $v did not build; reason in $CACHE/bin/kube-vip/$v/FAILED (remove that file to try again)"
    printf '%s\n' "$err" | tail -n 20 >&2
    return 0
  fi
  printf '%s\n' "$err" >&2
}

# kube-vip-cloud-provider as upstream's Dockerfile builds it (static, CGO off, the version stamped into
# component-base); the same checksum-database gap as kube-vip's (GONOSUMDB for github.com/kube-vip).
build_kube_vip_cloud_provider() {
  local v=$KUBE_VIP_CLOUD_PROVIDER_VERSION
  have kube-vip-cloud-provider && return 0
  local -x GONOSUMDB=github.com/kube-vip
  local dir; dir=$(make_build_module github.com/kube-vip/kube-vip-cloud-provider "$v") || return 1
  go_build kube-vip-cloud-provider "$v" "$dir" github.com/kube-vip/kube-vip-cloud-provider \
    "-s -w -extldflags -static -X k8s.io/component-base/version.gitVersion=$v"
}

build_containerd() {
  local prog=$1 v; v=$(ev CONTAINERD_VERSION)
  have "$prog" && return 0
  local dir; dir=$(make_build_module github.com/containerd/containerd/v2 "$v")
  local x="-X github.com/containerd/containerd/v2/version.Version=$v -X github.com/containerd/containerd/v2/version.Revision=$(stable_commit github.com/containerd/containerd/v2 "$v") -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"
  # Static, no cgo: the btrfs snapshotter (cgo) is left out with the upstream build tag no_btrfs.
  go_build "$prog" "$v" "$dir" "github.com/containerd/containerd/v2/cmd/$prog" "-s -w $x" "no_btrfs"
}

build_runc() {
  local v; v=$(ev RUNC_VERSION)
  have runc && return 0
  local dir; dir=$(make_build_module github.com/opencontainers/runc "$v")
  # runc needs cgo (libcontainer/nsenter is C). With libseccomp-dev present it is built like upstream's
  # release: -tags seccomp, linked statically against libseccomp.a.
  local tags="urfave_cli_no_docs netgo osusergo"
  if seccomp_lib; then tags="seccomp $tags"
  else log "libseccomp-dev missing: runc is built WITHOUT seccomp support"; fi
  go_build runc "$v" "$dir" github.com/opencontainers/runc \
    "-s -w -X main.version=${v#v} -X main.gitCommit=$(stable_commit github.com/opencontainers/runc "$v" | cut -c1-8) -extldflags -static" \
    "$tags" 1
}

build_cni() {
  local v; v=$(ev CNI_PLUGINS_VERSION)
  have cni-plugins && return 0
  local dir; dir=$(make_build_module github.com/containernetworking/plugins "$v")
  local dest="$CACHE/bin/cni-plugins/$v" pl pkg t0 t1 secs
  mkdir -p "$dest.tmp"
  t0=$(date +%s.%N)
  local pkgs=()
  for pl in "${CNI_PLUGINS[@]}"; do
    case "$pl" in
      bridge|ptp|loopback|host-device|ipvlan|macvlan|vlan|tap|dummy) pkg=plugins/main/$pl ;;
      host-local|static|dhcp) pkg=plugins/ipam/$pl ;;
      *) pkg=plugins/meta/$pl ;;
    esac
    pkgs+=("github.com/containernetworking/plugins/$pkg")
  done
  log "building cni-plugins $v (${CNI_PLUGINS[*]})"
  ( cd "$dir" && go build -trimpath -ldflags "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$v" \
      -o "$dest.tmp/" "${pkgs[@]}" ) || { rm -rf "$dest.tmp"; return 1; }
  touch "$dir/.complete"
  rm -rf "$dest"; mv "$dest.tmp" "$dest"
  t1=$(date +%s.%N); secs=$(python3 -c "print(round($t1-$t0,1))")
  printf '%s %s %s %ss nproc=%s\n' "$(date -u +%FT%TZ)" cni-plugins "$v" "$secs" "$(nproc)" >>"$CACHE/times.log"
  TIMES+=("cni-plugins $v ${secs}s")
  log "built cni-plugins $v in ${secs}s"
}

build_local_path() {
  have local-path-provisioner && return 0
  local v=$LOCAL_PATH_PROVISIONER_VERSION
  local dir; dir=$(make_build_module github.com/rancher/local-path-provisioner "$v")
  # As upstream's scripts/build: static, VERSION stamped into main.
  go_build local-path-provisioner "$v" "$dir" github.com/rancher/local-path-provisioner "-s -w -X main.VERSION=$v"
}

# ---- the third-party CNI tests' programs and files (versions: cni-versions.sh) --------------------------
build_helm() {
  have helm && return 0
  local dir; dir=$(make_build_module helm.sh/helm/v3 "$HELM_VERSION")
  go_build helm "$HELM_VERSION" "$dir" helm.sh/helm/v3/cmd/helm \
    "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
}

build_flanneld() {
  have flanneld && return 0
  # flannel v0.28.4 requires tencentcloud-sdk-go/tencentcloud/common v1.3.79 (its tencentvpc backend, unused
  # here), which the module proxy refuses (403); v1.3.103, the nearest newer one it serves, replaces it.
  local dir; dir=$(make_build_module github.com/flannel-io/flannel "$FLANNEL_VERSION" \
    "github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/common=github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/common@v1.3.103")
  # As upstream's Makefile on amd64: cgo on (the UDP backend is C), linked statically.
  go_build flanneld "$FLANNEL_VERSION" "$dir" github.com/flannel-io/flannel \
    "-s -w -X github.com/flannel-io/flannel/pkg/version.Version=$FLANNEL_VERSION -extldflags -static" "" 1
}

# The flannel CNI plugin (what the flannel-cni-plugin image's /flannel is): github.com/flannel-io/cni-plugin is
# not served by the module proxy, so it is the plugin it was split from, plugins/meta/flannel of
# github.com/containernetworking/plugins $FLANNEL_CNI_PLUGINS_VERSION (same subnet.env contract, delegates to bridge).
build_flannel_cni() {
  have flannel-cni && return 0
  local dir; dir=$(make_build_module github.com/containernetworking/plugins "$FLANNEL_CNI_PLUGINS_VERSION")
  go_build flannel-cni "$FLANNEL_CNI_PLUGINS_VERSION" "$dir" github.com/containernetworking/plugins/plugins/meta/flannel "-s -w"
}

module_dir() { go mod download -json "$1@$2" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["Dir"]) if not d.get("Error") else sys.exit(d["Error"])'; }

build_flannel_manifest() {
  have flannel-manifest && return 0
  local src dest="$CACHE/bin/flannel-manifest/$FLANNEL_VERSION"
  src=$(module_dir github.com/flannel-io/flannel "$FLANNEL_VERSION")/Documentation/kube-flannel.yml
  [ -f "$src" ] || die "no Documentation/kube-flannel.yml in github.com/flannel-io/flannel@$FLANNEL_VERSION"
  mkdir -p "$dest"; cp "$src" "$dest/.tmp"; chmod 0644 "$dest/.tmp"; mv -f "$dest/.tmp" "$dest/kube-flannel.yml"
  log "flannel-manifest $FLANNEL_VERSION: $(sha256sum "$dest/kube-flannel.yml" | cut -c1-64)"
}

build_cilium_chart() {
  have cilium-chart && return 0
  build_helm
  local src dest="$CACHE/bin/cilium-chart/$CILIUM_CHART_VERSION" tmp
  src=$(module_dir github.com/cilium/cilium "$CILIUM_CHART_VERSION")/install/kubernetes/cilium
  [ -f "$src/Chart.yaml" ] || die "no install/kubernetes/cilium in github.com/cilium/cilium@$CILIUM_CHART_VERSION"
  tmp=$(mktemp -d); cp -r "$src" "$tmp/cilium"; chmod -R u+w "$tmp"
  mkdir -p "$dest"
  "$CACHE/bin/helm/$HELM_VERSION/helm" package "$tmp/cilium" --destination "$tmp/out" >&2 || { rm -rf "$tmp"; return 1; }
  mv -f "$tmp/out/cilium-${CILIUM_CHART_VERSION#v}.tgz" "$dest/cilium.tgz"; rm -rf "$tmp"
  log "cilium-chart $CILIUM_CHART_VERSION: $(sha256sum "$dest/cilium.tgz" | cut -c1-64)"
}

build_kindnet_manifest() {
  have kindnet-manifest && return 0
  local src dest="$CACHE/bin/kindnet-manifest/$KIND_VERSION"
  src=$(module_dir sigs.k8s.io/kind "$KIND_VERSION")/pkg/build/nodeimage/const_cni.go
  [ -f "$src" ] || die "no pkg/build/nodeimage/const_cni.go in sigs.k8s.io/kind@$KIND_VERSION"
  mkdir -p "$dest"
  (cd "$dest" && go run "$here/kind-cni.go" < "$src" > "$dest/.tmp") || { rm -f "$dest/.tmp"; return 1; }
  chmod 0644 "$dest/.tmp"; mv -f "$dest/.tmp" "$dest/default-cni.yaml"
  log "kindnet-manifest (kind $KIND_VERSION): $(sha256sum "$dest/default-cni.yaml" | cut -c1-64)"
}

# ---- the scale benchmarks' kwok -----------------------------------------------------------------------
build_kwok() {
  have kwok && [ -f "$(dirname "$(path_of kwok)")/stages/node-initialize.yaml" ] && return 0
  local dir src dest="$CACHE/bin/kwok/$KWOK_VERSION" f
  dir=$(make_build_module sigs.k8s.io/kwok "$KWOK_VERSION")
  have kwok || go_build kwok "$KWOK_VERSION" "$dir" sigs.k8s.io/kwok/cmd/kwok \
    "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}"
  src=$(module_dir sigs.k8s.io/kwok "$KWOK_VERSION")/kustomize/stage
  mkdir -p "$dest/stages"
  for f in "$src"/node/fast/node-initialize.yaml "$src"/pod/fast/pod-*.yaml; do
    [ -f "$f" ] || die "no $f in sigs.k8s.io/kwok@$KWOK_VERSION"
    install -m 0644 "$f" "$dest/stages/$(basename "$f")"
  done
}

# ---- the NetworkPolicy benchmark's peer ----------------------------------------------------------------
build_kube_network_policies() {
  have kube-network-policies && return 0
  local dir
  dir=$(make_build_module sigs.k8s.io/kube-network-policies "$KUBE_NETWORK_POLICIES_VERSION") || return 1
  go_build kube-network-policies "$KUBE_NETWORK_POLICIES_VERSION" "$dir" sigs.k8s.io/kube-network-policies/cmd "-s -w"
}

# ---- main --------------------------------------------------------------------------------------------
[ -f "$envfile" ] || locked "k8s.io/kubernetes@$VERSION" resolve_versions
for p in "${wanted[@]}"; do
  case "$p" in
    helm) locked "helm.sh/helm/v3@$HELM_VERSION" build_helm ;;
    flanneld) locked "github.com/flannel-io/flannel@$FLANNEL_VERSION" build_flanneld ;;
    flannel-cni) locked "github.com/containernetworking/plugins@$FLANNEL_CNI_PLUGINS_VERSION" build_flannel_cni ;;
    flannel-manifest) locked "github.com/flannel-io/flannel@$FLANNEL_VERSION" build_flannel_manifest ;;
    cilium-chart) locked "github.com/cilium/cilium@$CILIUM_CHART_VERSION" build_cilium_chart ;;
    kindnet-manifest) locked "sigs.k8s.io/kind@$KIND_VERSION" build_kindnet_manifest ;;
    kubeadm|kubelet|kube-apiserver|kube-controller-manager|kube-scheduler|kube-proxy|kubectl)
      locked "k8s.io/kubernetes@$VERSION" build_k8s "$p" ;;
    etcd) locked "go.etcd.io/etcd/server/v3@$(ev ETCD_VERSION)" build_etcd "$p" ;;
    etcdctl) locked "go.etcd.io/etcd/etcdctl/v3@$(ev ETCD_VERSION)" build_etcd "$p" ;;
    etcdutl) locked "go.etcd.io/etcd/etcdutl/v3@$(ev ETCD_VERSION)" build_etcd "$p" ;;
    coredns) locked "github.com/coredns/coredns@$(ev COREDNS_VERSION)" build_coredns ;;
    crictl) locked "sigs.k8s.io/cri-tools@$(ev CRICTL_VERSION)" build_crictl ;;
    kube-vip) locked "github.com/kube-vip/kube-vip@$(ev KUBE_VIP_VERSION)" build_kube_vip ;;
    kube-vip-cloud-provider)
      locked "github.com/kube-vip/kube-vip-cloud-provider@$KUBE_VIP_CLOUD_PROVIDER_VERSION" build_kube_vip_cloud_provider ;;
    containerd|containerd-shim-runc-v2|ctr)
      locked "github.com/containerd/containerd/v2@$(ev CONTAINERD_VERSION)" build_containerd "$p" ;;
    runc) locked "github.com/opencontainers/runc@$(ev RUNC_VERSION)" build_runc ;;
    e2e.test|ginkgo|agnhost) locked "k8s.io/kubernetes-e2e@$VERSION" build_conformance "$p" ;;
    cni-plugins) locked "github.com/containernetworking/plugins@$(ev CNI_PLUGINS_VERSION)" build_cni ;;
    local-path-provisioner) locked "github.com/rancher/local-path-provisioner@$LOCAL_PATH_PROVISIONER_VERSION" build_local_path ;;
    kwok) locked "sigs.k8s.io/kwok@$KWOK_VERSION" build_kwok ;;
    kube-network-policies)
      locked "sigs.k8s.io/kube-network-policies@$KUBE_NETWORK_POLICIES_VERSION" build_kube_network_policies ;;
  esac
done

if [ ${#TIMES[@]} -gt 0 ]; then
  log "built in this run:"; printf '  %s\n' "${TIMES[@]}" >&2
fi
report
