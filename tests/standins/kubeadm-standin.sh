#!/bin/sh
# STAND-IN for kubeadm (clusterctl test tree only; see README.md). Records argv and configs, writes
# the files the real kubeadm writes, prints what it prints. Not Kubernetes.
set -eu
LOG=/var/log/clusterctl-standin
mkdir -p "$LOG" /etc/kubernetes/pki /etc/kubernetes/manifests
echo "kubeadm $*" >> "$LOG/calls.log"
n=$(wc -l < "$LOG/calls.log")
cfg=""
prev=""
for a in "$@"; do
  [ "$prev" = "--config" ] && cfg="$a"
  case "$a" in --config=*) cfg="${a#--config=}";; esac
  prev="$a"
done
if [ -n "$cfg" ]; then cp "$cfg" "$LOG/$n-kubeadm.yaml"; fi

field() { # first value of a YAML key in the config (flat grep; enough for the stand-in)
  grep -E "^[[:space:]-]*$1:" "$cfg" | head -n1 | sed -E "s/^[^:]*:[[:space:]]*//; s/[\"']//g"
}

# The test's recording API server (tests/src/apiserver.rs), when the test gives one: ca.crt and token,
# and either url (admin.conf points there) or proxy (HOST:PORT; this control plane's port 6443
# forwards there, as if kube-apiserver listened on it, and admin.conf names the endpoint).
API=/var/lib/clusterctl-standin/api
kubeconfig() { # $1 path, $2 user, $3 server
  ca=$(base64 -w0 /etc/kubernetes/pki/ca.crt)
  if [ "$2" != "${2#kubernetes-}" ] && [ -f "$API/ca.crt" ]; then
    # admin.conf / super-admin.conf: for the recording API server, as the real ones are for the
    # real API server (its CA, a bearer token instead of a client certificate).
    ca=$(base64 -w0 "$API/ca.crt")
    server=$3
    [ -f "$API/url" ] && server=$(cat "$API/url")
    cat > "$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: kubernetes
  cluster:
    certificate-authority-data: $ca
    server: $server
users:
- name: $2
  user:
    token: $(cat "$API/token")
contexts:
- name: $2@kubernetes
  context: {cluster: kubernetes, user: $2}
current-context: $2@kubernetes
KC
    chmod 600 "$1"
    return 0
  fi
  cat > "$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: kubernetes
  cluster:
    certificate-authority-data: $ca
    server: $3
users:
- name: $2
  user:
    client-certificate-data: U1RBTkQtSU4gQ0VSVElGSUNBVEU=
    client-key-data: U1RBTkQtSU4gS0VZ
contexts:
- name: $2@kubernetes
  context: {cluster: kubernetes, user: $2}
current-context: $2@kubernetes
KC
  chmod 600 "$1"
}

register() { # the Node object the kubelet would register, with its node-labels (shared test store)
  name=$(awk '/^nodeRegistration:/{f=1;next} f&&/^[^ ]/{f=0} f&&/^  name:/{print $2; exit}' "$cfg")
  [ -n "$name" ] || name=$(hostname)
  d=/var/lib/clusterctl-standin/nodes/$name
  mkdir -p "$d"
  grep -A1 'name: node-labels' "$cfg" | sed -n 2p | sed -E "s/.*value:[[:space:]]*//; s/[\"']//g" \
    | tr ',' '\n' | grep = > "$d/labels" || true
  # A control plane is marked as kubeadm's mark-control-plane phase does.
  if grep -q 'certificateKey' "$cfg"; then echo "node-role.kubernetes.io/control-plane=" >> "$d/labels"; fi
}

api_port() { # port 6443 of this node forwards to the recording API server (systemd socket proxy)
  [ -f "$API/proxy" ] || return 0
  cat > /etc/systemd/system/kube-apiserver-standin.socket <<UNIT
[Unit]
Description=kube-apiserver STAND-IN port (clusterctl tests)
[Socket]
ListenStream=6443
[Install]
WantedBy=sockets.target
UNIT
  cat > /etc/systemd/system/kube-apiserver-standin.service <<UNIT
[Unit]
Description=kube-apiserver STAND-IN: forwards to the test's recording API server
[Service]
ExecStart=/lib/systemd/systemd-socket-proxyd $(cat "$API/proxy")
UNIT
  systemctl daemon-reload
  systemctl enable --now kube-apiserver-standin.socket >/dev/null 2>&1
}

static_pods() {
  for c in etcd kube-apiserver kube-controller-manager kube-scheduler; do
    control_plane_pod "$c" "$(field kubernetesVersion)"
  done
}

# Upgrade and day-2 cases (`clusterctl upgrade`, `up`'s rollout): ----------------------------------
control_plane_pod() { # $1 component, $2 version (vX.Y.Z, may be empty): the static pod kubeadm writes
  printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: kube-system}\n# written by the kubeadm stand-in\n' "$1" \
    > /etc/kubernetes/manifests/$1.yaml
  [ -n "$2" ] && printf 'spec:\n  containers:\n  - name: %s\n    image: registry.k8s.io/%s:%s\n' "$1" "$1" "$2" \
    >> /etc/kubernetes/manifests/$1.yaml
  return 0
}
standin_phase() { # kubeadm init phase control-plane|upload-config|certs …, kubeadm certs renew …
  case "$1 $2" in
    "control-plane apiserver")
      v=$(sed -n 's#.*image: .*kube-apiserver:##p' /etc/kubernetes/manifests/kube-apiserver.yaml 2>/dev/null | head -n1)
      [ -n "$v" ] || v=$(field kubernetesVersion)
      control_plane_pod kube-apiserver "$v"
      echo "[control-plane] Creating static Pod manifest for \"kube-apiserver\"" ;;
    "upload-config kubeadm")
      echo "[upload-config] Storing the configuration used in ConfigMap \"kubeadm-config\" in the \"kube-system\" Namespace" ;;
    "upload-config kubelet")
      mkdir -p /var/lib/clusterctl-standin
      awk '/^kind: KubeletConfiguration/{f=1} /^---/{if(f)exit} f' "$cfg" > /var/lib/clusterctl-standin/kubelet-config.yaml
      echo "[kubelet] Creating a ConfigMap \"kubelet-config\" in namespace kube-system with the configuration for the kubelets in the cluster" ;;
    "certs apiserver")
      pki=$(awk '/^certificatesDir:/{print $2; exit}' "$cfg"); pki=${pki:-/etc/kubernetes/pki}
      if [ -f "$pki/apiserver.crt" ]; then
        echo "[certs] Using existing apiserver certificate and key on disk"; return 0
      fi
      sans=$(awk '/^  certSANs:/{f=1;next} f&&/^  - /{sub(/^  - /,"");gsub(/"/,"");print;next} f{exit}' "$cfg" \
        | sed -E 's/^([0-9.]+)$/IP:\1/; t; s/^/DNS:/' | paste -sd, -)
      openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=kube-apiserver \
        -addext "subjectAltName=DNS:kubernetes${sans:+,$sans}" \
        -keyout "$pki/apiserver.key" -out "$pki/apiserver.crt" 2>/dev/null
      echo "[certs] Generating \"apiserver\" certificate and key" ;;
    *) echo "kubeadm stand-in: unsupported phase: $*" >&2; exit 1 ;;
  esac
}

case "${1:-}" in
  version) echo 'kubeadm version: &version.Info{GitVersion:"v1.34.1-standin"}' ;;
  init)
    case "${2:-} ${3:-}" in
      "phase control-plane"|"phase upload-config"|"phase certs") shift 2; standin_phase "$@"; exit 0 ;;
    esac
    if [ "${2:-}" = phase ]; then
      # kubeadm init phase upload-certs --upload-certs --config F
      key=$(field certificateKey)
      echo "[upload-certs] Storing the certificates in Secret \"kubeadm-certs\" in the \"kube-system\" Namespace"
      echo "[upload-certs] Using certificate key:"
      echo "$key"
      exit 0
    fi
    if [ -f /etc/kubernetes/admin.conf ]; then
      echo "[preflight] /etc/kubernetes/admin.conf already exists" >&2; exit 1
    fi
    # kubeadm's preflight refuses the leftovers of an init that failed half-way.
    if [ -f /etc/kubernetes/manifests/kube-apiserver.yaml ]; then
      echo "[ERROR FileAvailable--etc-kubernetes-manifests-kube-apiserver.yaml]: /etc/kubernetes/manifests/kube-apiserver.yaml already exists" >&2
      exit 1
    fi
    endpoint=$(field controlPlaneEndpoint)
    [ -n "$endpoint" ] || endpoint="$(hostname -i | cut -d' ' -f1):6443"
    token=$(field token)
    key=$(field certificateKey)
    if [ ! -f /etc/kubernetes/pki/ca.crt ]; then
      openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=kubernetes \
        -keyout /etc/kubernetes/pki/ca.key -out /etc/kubernetes/pki/ca.crt 2>/dev/null
    fi
    # What kube-vip was configured with while init ran (the test checks super-admin.conf).
    [ -f /etc/kubernetes/manifests/kube-vip.yaml ] && cp /etc/kubernetes/manifests/kube-vip.yaml "$LOG/$n-kube-vip-at-init.yaml"
    # The test can make one init fail half-way, as a real one failing in wait-control-plane does:
    # certificates and static pods written, no admin.conf.
    if [ -f /var/lib/clusterctl-standin/fail-init-once ]; then
      rm -f /var/lib/clusterctl-standin/fail-init-once
      static_pods
      echo "[wait-control-plane] Waiting for the kubelet to boot up the control plane as static Pods" >&2
      echo "error execution phase wait-control-plane: timed out waiting for the condition (STAND-IN: failing once as asked)" >&2
      exit 1
    fi
    kubeconfig /etc/kubernetes/super-admin.conf kubernetes-super-admin "https://$endpoint"
    kubeconfig /etc/kubernetes/admin.conf kubernetes-admin "https://$endpoint"
    kubeconfig /etc/kubernetes/kubelet.conf "system:node:$(hostname)" "https://$endpoint"
    static_pods
    api_port
    register
    hash=$(openssl x509 -pubkey -noout -in /etc/kubernetes/pki/ca.crt | openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1)
    echo "[kubeconfig] Writing \"super-admin.conf\" kubeconfig file"
    echo "[upload-certs] Using certificate key:"
    echo "$key"
    echo "Your Kubernetes control-plane has initialized successfully!"
    echo "kubeadm join $endpoint --token $token \\"
    echo "	--discovery-token-ca-cert-hash sha256:$hash \\"
    echo "	--control-plane --certificate-key $key"
    ;;
  token)
    # kubeadm token create [--ttl D]: a fresh bootstrap token
    t1=$(head -c 1024 /dev/urandom | tr -dc 'a-z0-9' | head -c 6)
    t2=$(head -c 1024 /dev/urandom | tr -dc 'a-z0-9' | head -c 16)
    echo "$t1.$t2"
    ;;
  join)
    if [ -f /etc/kubernetes/kubelet.conf ]; then
      echo "[preflight] /etc/kubernetes/kubelet.conf already exists" >&2; exit 1
    fi
    endpoint=$(field apiServerEndpoint)
    token=$(field token)
    case "$token" in ??????.????????????????) ;; *) echo "invalid bootstrap token" >&2; exit 1;; esac
    grep -q 'sha256:[0-9a-f]\{64\}' "$cfg" || { echo "no discovery-token-ca-cert-hash" >&2; exit 1; }
    if grep -q 'certificateKey' "$cfg"; then
      grep -Eq 'certificateKey:[[:space:]]*["'"'"']?[0-9a-f]{64}' "$cfg" || { echo "invalid certificate key" >&2; exit 1; }
      openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=kubernetes \
        -keyout /etc/kubernetes/pki/ca.key -out /etc/kubernetes/pki/ca.crt 2>/dev/null
      kubeconfig /etc/kubernetes/admin.conf kubernetes-admin "https://$endpoint"
      static_pods
      echo "This node has joined the cluster and a new control plane instance was created"
    else
      openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=kubernetes \
        -keyout /etc/kubernetes/pki/ca.key -out /etc/kubernetes/pki/ca.crt 2>/dev/null
      echo "This node has joined the cluster"
    fi
    kubeconfig /etc/kubernetes/kubelet.conf "system:node:$(hostname)" "https://$endpoint"
    register
    ;;
  upgrade)
    case "${2:-}" in
      plan)
        v=$(field kubernetesVersion); [ -n "$v" ] || v="${3:-}"
        echo "[upgrade/versions] Target version: $v" ;;
      apply)
        [ -f /etc/kubernetes/admin.conf ] || { echo "[upgrade] no admin.conf: not a control plane" >&2; exit 1; }
        [ -f /etc/clusterctl-standin/fail-kubeadm-upgrade-apply ] && { echo "[upgrade/apply] FATAL: injected failure (stand-in)" >&2; exit 1; }
        v=$(field kubernetesVersion); [ -n "$v" ] || v="${3:-}"
        for c in etcd kube-apiserver kube-controller-manager kube-scheduler; do control_plane_pod "$c" "$v"; done
        echo "[upgrade] SUCCESS! A control plane node of your cluster was upgraded to \"$v\"." ;;
      node)
        if [ "${3:-} ${4:-}" = "phase kubelet-config" ]; then
          mkdir -p /var/lib/kubelet
          cp /var/lib/clusterctl-standin/kubelet-config.yaml /var/lib/kubelet/config.yaml
          echo "[upgrade] The configuration for this node was successfully upgraded!"; exit 0
        fi
        [ -f /etc/kubernetes/kubelet.conf ] || { echo "[upgrade] no kubelet.conf: not a node of the cluster" >&2; exit 1; }
        [ -f /etc/clusterctl-standin/fail-kubeadm-upgrade-node ] && { echo "[upgrade/node] FATAL: injected failure (stand-in)" >&2; exit 1; }
        echo "[upgrade] The configuration for this node was successfully upgraded!" ;;
      *) echo "kubeadm stand-in: unsupported: $*" >&2; exit 1 ;;
    esac ;;
  certs)
    [ "${2:-}" = renew ] || { echo "kubeadm stand-in: unsupported: $*" >&2; exit 1; }
    echo "[renew] certificate ${3:-} renewed" ;;
  reset)
    rm -rf /etc/kubernetes/*.conf /etc/kubernetes/manifests/* /etc/kubernetes/pki
    ;;
  *) echo "kubeadm stand-in: unsupported: $*" >&2; exit 1 ;;
esac
