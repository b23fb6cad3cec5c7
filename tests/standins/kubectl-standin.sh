#!/bin/sh
# STAND-IN for kubectl (clusterctl test tree only; see README.md). Nodes live in
# /var/lib/clusterctl-standin/nodes/<name>/{labels,taints} (one `k=v` / `k=v:Effect` per line); every
# Node there is Ready. The API server answers (`get --raw /readyz`) and holds what `kubeadm init` creates
# (`get configmap|deployment|daemonset NAME`) whenever the kubeconfig exists. Not Kubernetes.
set -eu
LOG=/var/log/clusterctl-standin
DB=/var/lib/clusterctl-standin/nodes
mkdir -p "$LOG" "$DB"
echo "kubectl $*" >> "$LOG/calls.log"
args=""
while [ $# -gt 0 ]; do
  case "$1" in
    --kubeconfig) [ -f "$2" ] || { echo "kubeconfig $2 not found" >&2; exit 1; }; shift 2 ;;
    --server|-n|--namespace) shift 2 ;;
    --request-timeout=*|--server=*|--namespace=*) shift ;;
    *) args="$args $1"; shift ;;
  esac
done
set -- $args

node_json() { # $1 name
  d="$DB/$1"
  printf '{"apiVersion":"v1","kind":"Node","metadata":{"name":"%s","labels":{' "$1"
  sep=""
  [ -f "$d/labels" ] && while IFS='=' read -r k v; do [ -n "$k" ] && printf '%s"%s":"%s"' "$sep" "$k" "$v" && sep=","; done < "$d/labels"
  printf '}},"spec":{"taints":['
  sep=""
  [ -f "$d/taints" ] && while IFS= read -r t; do
    [ -n "$t" ] || continue
    kv=${t%:*}; eff=${t##*:}; k=${kv%%=*}; v=""; case "$kv" in *=*) v=${kv#*=};; esac
    printf '%s{"key":"%s","value":"%s","effect":"%s"}' "$sep" "$k" "$v" "$eff"; sep=","
  done < "$d/taints"
  printf ']},"status":{"conditions":[{"type":"Ready","status":"True"}]}}'
}

case "${1:-} ${2:-}" in
  "get --raw")
    echo ok ;;
  "get configmap"|"get deployment"|"get daemonset")
    echo "$2/$3" ;;
  "get node")
    [ -d "$DB/$3" ] || { echo "Error from server (NotFound): nodes \"$3\" not found" >&2; exit 1; }
    node_json "$3"; echo ;;
  "get nodes")
    printf '{"apiVersion":"v1","kind":"NodeList","items":['
    sep=""
    for d in "$DB"/*; do [ -d "$d" ] || continue; printf '%s' "$sep"; node_json "${d##*/}"; sep=","; done
    printf ']}\n' ;;
  "label node")
    n=$3; shift 3
    for kv in "$@"; do
      [ "$kv" = --overwrite ] && continue
      k=${kv%%=*}
      touch "$DB/$n/labels"; grep -v "^$k=" "$DB/$n/labels" > "$DB/$n/labels.new" || true
      echo "$kv" >> "$DB/$n/labels.new"; mv "$DB/$n/labels.new" "$DB/$n/labels"
    done
    echo "node/$n labeled" ;;
  "taint node")
    n=$3; shift 3
    for t in "$@"; do
      [ "$t" = --overwrite ] && continue
      touch "$DB/$n/taints"; echo "$t" >> "$DB/$n/taints"
    done
    echo "node/$n modified" ;;
  "apply -f")
    cp "$3" "$LOG/applied-$(basename "$3")"; echo "applied $3" ;;
  *) echo "kubectl stand-in: unsupported:$args" >&2; exit 1 ;;
esac
