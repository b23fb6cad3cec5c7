#!/usr/bin/env bash
# Kubernetes' own conformance tests (the `[Conformance]` specs of k8s.io/kubernetes/test/e2e) against a
# cluster, with the e2e.test and ginkgo that scripts/k8s/build.sh builds from the Go module (issue 24):
#
#   scripts/conformance.sh ci|full|netpol|netpol-ci [--kubeconfig FILE] [--junit-dir DIR] [--version vX.Y.Z] [--procs N]
#                                 [--focus REGEX] [--skip REGEX] [--dry-run]
#
# CONFIG chooses what runs:
#   ci    the fixed focus CI runs on the real HA cluster (CI_SPECS below: DNS, Services, pod-to-pod
#         networking, hostPort, the API server's proxy, and sig-node pod tests: logs and exec through the
#         kubelet, lifecycle hooks, downward API), in parallel
#   full  every `[Conformance]` spec: the parallel part, then the `[Serial]` part on one process (as
#         Sonobuoy's certified-conformance mode runs them)
#   netpol      every spec of test/e2e/network/netpol (`[sig-network] Netpol`: the `[Feature:NetworkPolicy]`
#               specs and two API specs; 50 in v1.34, of which NETPOL_CANNOT skips the 3 SCTP ones), in
#               parallel (issue 28)
#   netpol-ci   the fixed NetworkPolicy focus CI runs (NETPOL_CI_SPECS below), in parallel
# --focus/--skip add to CONFIG's (a user narrowing a run); NOT_BUILT below is always skipped: the specs
# that need an image the test bed cannot build, and NETPOL_CANNOT in the netpol configs: what this test
# bed cannot run (both listed with the reason, counted in the summary).
#
# The cluster must be able to pull the suite's images (registry.k8s.io/e2e-test-images/agnhost,
# jessie-dnsutils, busybox, registry.k8s.io/pause): the test bed serves them from its registry mirror
# (scripts/k8s/images.sh, push.sh); a user's cluster pulls them from registry.k8s.io or its own mirror
# (KUBE_TEST_REPO_LIST remaps them as upstream documents).
#
# Writes DIR/junit.xml and DIR/report.json (default DIR: $CLUSTERCTL_TESTBED_CACHE/conformance/<CONFIG>-<time>),
# prints one summary line
#   conformance CONFIG: P passed, F failed, S skipped (N skipped by name: …), T ran in Ms; junit DIR/junit.xml
# and exits non-zero when any spec failed (or none ran).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${CLUSTERCTL_TESTBED_CACHE:-/var/cache/clusterctl-testbed}
die() { echo "conformance: $*" >&2; exit 2; }

[ $# -ge 1 ] || die "usage: $0 ci|full|netpol|netpol-ci [--kubeconfig FILE] [--junit-dir DIR] [--version vX.Y.Z] [--procs N] [--focus RE] [--skip RE] [--dry-run]"
CONFIG=$1; shift
KUBECONFIG_FILE=${KUBECONFIG:-$HOME/.kube/config}
VERSION=v1.34.4
PROCS=2
JUNIT_DIR=""
EXTRA_FOCUS=""
EXTRA_SKIP=""
DRY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --kubeconfig) KUBECONFIG_FILE=$2; shift 2 ;;
    --junit-dir) JUNIT_DIR=$2; shift 2 ;;
    --version) VERSION=$2; shift 2 ;;
    --procs) PROCS=$2; shift 2 ;;
    --focus) EXTRA_FOCUS=$2; shift 2 ;;
    --skip) EXTRA_SKIP=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    *) die "unknown argument '$1'" ;;
  esac
done
[ -f "$KUBECONFIG_FILE" ] || die "no kubeconfig at $KUBECONFIG_FILE (--kubeconfig FILE)"

# The CI focus: each line the start of a `[Conformance]` spec's full text (matched literally; each names
# exactly one spec), chosen to need only the images built here and to fit about five minutes on two cores.
CI_SPECS=(
  "[sig-network] DNS should provide DNS for the cluster"
  "[sig-network] DNS should provide DNS for services"
  "[sig-network] DNS should provide /etc/hosts entries for the cluster"
  "[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: http"
  "[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: udp"
  "[sig-network] Services should serve a basic endpoint from pods"
  "[sig-network] Services should serve multiport endpoints from pods"
  "[sig-network] HostPort validates that there is no conflict between pods with same hostPort but different hostIP and protocol"
  "[sig-network] Proxy version v1 A set of valid responses are returned for both pod and service ProxyWithPath"
  "[sig-node] Pods should support remote command execution over websockets"
  "[sig-node] Pods should support retrieving logs from the container over websockets"
  "[sig-node] Kubelet when scheduling a busybox command in a pod should print the output to logs"
  "[sig-node] Container Lifecycle Hook when create a pod with lifecycle hook should execute poststart http hook properly"
  "[sig-node] Downward API should provide pod name, namespace and IP address as env vars"
  "[sig-network] DNS should provide DNS for pods for Hostname"
  "[sig-network] DNS should provide DNS for pods for Subdomain"
  "[sig-network] DNS should provide DNS for ExternalName services"
  "[sig-network] DNS should resolve DNS of partial qualified names for services"
  "[sig-network] Services should be able to create a functioning NodePort service"
  "[sig-network] Services should have session affinity work for service with type clusterIP"
  "[sig-network] Services should have session affinity work for NodePort service"
  "[sig-network] Proxy version v1 should proxy through a service and a pod"
  "[sig-network] Networking Granular Checks: Pods should function for node-pod communication: http"
  "[sig-node] PreStop should call prestop when killing a pod"
  "[sig-node] Pods should contain environment variables for services"
)

# The NetworkPolicy CI focus: each line the start of a `[sig-network] Netpol` spec's text after "between server
# and client " (matched literally; each names exactly one spec), chosen to cover default deny, pod and namespace
# selectors together, egress with ipBlock and except, within about three minutes (a named port's spec took
# 244 s alone on the loaded machine: `netpol` runs it).
NETPOL_CI_SPECS=(
  "should support a 'default-deny-ingress' policy"
  "should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector"
  "should enforce except clause while egress access to server in CIDR block"
)

# Specs that need an image not built here (scripts/k8s/images.sh builds agnhost, jessie-dnsutils, busybox,
# pause): skipped by name in every CONFIG. "REGEX<TAB>reason" lines.
NOT_BUILT=(
  "should not allow privilege escalation when false"$'\t'"needs registry.k8s.io/e2e-test-images/nonewprivs:1.3 (not built here)"
)

# Specs of the netpol configs this test bed cannot run, skipped there: "REGEX<TAB>reason" lines.
NETPOL_CANNOT=(
  "\\[Feature:SCTPConnectivity\\]"$'\t'"the test bed's kernel has no SCTP: agnhost's SCTP servers exit with 'Failed to listen SCTP. error:protocol not supported' and the specs wait for pods that never become Ready"
)

# A literal spec text as a Go regexp (ginkgo matches --focus against the full text).
re_quote() { python3 -c 'import re,sys; print(re.escape(sys.argv[1]))' "$1"; }
join_re() { local IFS='|'; echo "$*"; }

skips=()
for l in "${NOT_BUILT[@]}"; do skips+=("${l%%$'\t'*}"); done
case "$CONFIG" in
  ci)
    focus_parts=()
    for s in "${CI_SPECS[@]}"; do focus_parts+=("$(re_quote "$s")"); done
    FOCUS="($(join_re "${focus_parts[@]}")).*\\[Conformance\\]"
    SKIP='\[Serial\]|\[Disruptive\]' ;;
  full) FOCUS='\[Conformance\]'; SKIP='' ;;
  netpol) FOCUS='\[sig-network\] Netpol '; SKIP='' ;;&
  netpol-ci)
    focus_parts=()
    for s in "${NETPOL_CI_SPECS[@]}"; do focus_parts+=("$(re_quote "$s")"); done
    FOCUS="\\[sig-network\\] Netpol NetworkPolicy between server and client ($(join_re "${focus_parts[@]}")) \\[Feature:NetworkPolicy\\]"
    SKIP='' ;;&
  netpol|netpol-ci)
    for l in "${NETPOL_CANNOT[@]}"; do skips+=("${l%%$'\t'*}"); done ;;
  *) die "CONFIG must be ci, full, netpol or netpol-ci, got '$CONFIG'" ;;
esac
[ -z "$EXTRA_FOCUS" ] || FOCUS="($FOCUS).*($EXTRA_FOCUS)|($EXTRA_FOCUS).*($FOCUS)"
[ -z "$EXTRA_SKIP" ] || skips+=("$EXTRA_SKIP")
[ ${#skips[@]} -eq 0 ] || SKIP=$(join_re ${SKIP:+"$SKIP"} "${skips[@]}")

e2e=$("$here/k8s/paths.sh" "$VERSION" e2e.test) || die "no e2e.test for $VERSION: run scripts/k8s/build.sh $VERSION conformance"
ginkgo=$("$here/k8s/paths.sh" "$VERSION" ginkgo) || die "no ginkgo for $VERSION: run scripts/k8s/build.sh $VERSION conformance"
# The specs run kubectl: the one of VERSION when built here, else the first on PATH (a host's may be another
# version, e.g. a cloud SDK's dispatcher).
kubectl=$("$here/k8s/paths.sh" "$VERSION" kubectl 2>/dev/null) || kubectl=$(command -v kubectl) || die "no kubectl"
JUNIT_DIR=${JUNIT_DIR:-$CACHE/conformance/$CONFIG-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$JUNIT_DIR"
JUNIT_DIR=$(cd "$JUNIT_DIR" && pwd)

# run NAME PROCS FOCUS SKIP [LABEL_FILTER]: one ginkgo run of e2e.test; its reports under $JUNIT_DIR/NAME.
run() {
  local name=$1 procs=$2 focus=$3 skip=$4 labels=${5:-} out="$JUNIT_DIR/$1"
  mkdir -p "$out"
  local args=(--procs="$procs" --timeout=24h --no-color --silence-skips --output-dir="$out"
              --junit-report=junit.xml --json-report=report.json --focus="$focus")
  [ -z "$skip" ] || args+=(--skip="$skip")
  [ -z "$labels" ] || args+=(--label-filter="$labels")
  [ -z "$DRY" ] || args=(--procs=1 "${args[@]:1}" --dry-run)  # ginkgo dry-runs only in series
  # As kind's and Sonobuoy's runs: the skeleton provider, no log dump, the e2e framework's own reports off.
  "$ginkgo" "${args[@]}" "$e2e" -- --kubeconfig="$KUBECONFIG_FILE" --provider=skeleton --kubectl-path="$kubectl" \
    --disable-log-dump=true --report-dir="$out" >"$out/ginkgo.log" 2>&1 || return 1
}

t0=$SECONDS
rc=0
if [ "$CONFIG" = full ]; then
  # The framework labels [Serial] specs "Serial": the parallel part without them, then they on one process.
  run parallel "$PROCS" "$FOCUS" "$SKIP" '!Serial' || rc=1
  run serial 1 "$FOCUS" "$SKIP" 'Serial' || rc=1
else
  run "$CONFIG" "$PROCS" "$FOCUS" "$SKIP" || rc=1
fi
secs=$((SECONDS - t0))

# The summary from ginkgo's JSON reports (specs filtered out by focus/skip are not counted).
# For ci (netpol-ci), every line of CI_SPECS (NETPOL_CI_SPECS) must have matched exactly one spec (a renamed spec is an error, not a gap).
expect=0
if [ -z "$EXTRA_FOCUS$EXTRA_SKIP" ]; then
  case "$CONFIG" in ci) expect=${#CI_SPECS[@]} ;; netpol-ci) expect=${#NETPOL_CI_SPECS[@]} ;; esac
fi
cannot=${#NOT_BUILT[@]}
case "$CONFIG" in netpol|netpol-ci) cannot=$((cannot + ${#NETPOL_CANNOT[@]})) ;; esac
python3 - "$JUNIT_DIR" "$CONFIG" "$secs" "$cannot" "$rc" "$expect" <<'PY'
import glob, json, os, sys
d, config, secs, not_built, rc, expect = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
passed = failed = skipped = 0
failures = []
for f in sorted(glob.glob(os.path.join(d, "*", "report.json"))):
    for suite in json.load(open(f)):
        for s in suite.get("SpecReports") or []:
            if s.get("LeafNodeType") != "It":
                if s.get("State") in ("failed", "panicked", "interrupted", "aborted", "timedout"):
                    failed += 1
                    failures.append("%s %s" % (s.get("LeafNodeType"), (s.get("Failure") or {}).get("Message", "")[:200]))
                continue
            name = " ".join(s.get("ContainerHierarchyTexts") or []) + " " + s.get("LeafNodeText", "")
            st = s.get("State")
            if st == "passed":
                passed += 1
            elif st == "skipped":
                # a spec Skip()ped at run time carries a message; one filtered out by focus/skip has none
                if (s.get("Failure") or {}).get("Message"):
                    skipped += 1
            elif st == "pending":
                pass
            else:
                failed += 1
                failures.append("%s: %s" % (name, ((s.get("Failure") or {}).get("Message") or st).splitlines()[0][:300]))
junits = sorted(glob.glob(os.path.join(d, "*", "junit.xml")))
print("conformance %s: %d passed, %d failed, %d skipped (%d skipped by name: not built or not runnable here), %d ran in %ds; junit %s"
      % (config, passed, failed, skipped, not_built, passed + failed, secs, " ".join(junits)))
for f in failures:
    print("  FAILED " + f)
if expect and passed + failed + skipped != expect:
    print("  the focus matched %d specs, the CONFIG lists %d" % (passed + failed + skipped, expect))
    sys.exit(1)
sys.exit(1 if failed or rc or passed == 0 else 0)
PY
