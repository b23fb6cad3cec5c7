//! A table of invalid cluster files. Each row edits a valid base file (and may add referenced files),
//! loads it from a temporary directory like `clusterctl validate -f` does, and asserts that validation
//! reports a diagnostic whose message contains the expected text and that it points at the line and column
//! of the offending value (found in the edited text, not hard-coded).

use clusterctl_spec::{load, validate, Diagnostic, Severity};

const BASE: &str = "\
apiVersion: clusterctl.io/v1alpha1
kind: Cluster
metadata:
  name: demo
spec:
  kubernetesVersion: v1.34.1
  provider: ssh
  controlPlane:
    vip:
      address: 10.0.0.100
      interface: eth0
  networking:
    podSubnet: 10.244.0.0/16
    serviceSubnet: 10.96.0.0/16
  nodes:
    - name: cp1
      role: control-plane
      address: 10.0.0.11/24
    - name: w1
      role: worker
      address: 10.0.0.21/24
";

struct Row {
    name: &'static str,
    /// Text replacements applied to BASE in order (each must match).
    edits: &'static [(&'static str, &'static str)],
    /// Files written next to the cluster file.
    files: &'static [(&'static str, &'static str)],
    severity: Severity,
    /// Expected substring of the message.
    message: &'static str,
    /// The diagnostic must point at the first `needle` after the first `context` in the edited text.
    context: &'static str,
    needle: &'static str,
}

const fn err(
    name: &'static str,
    edits: &'static [(&'static str, &'static str)],
    message: &'static str,
    context: &'static str,
    needle: &'static str,
) -> Row {
    Row {
        name,
        edits,
        files: &[],
        severity: Severity::Error,
        message,
        context,
        needle,
    }
}

const ROWS: &[Row] = &[
    err("pod subnet not a CIDR", &[("10.244.0.0/16", "10.244.0.0/33")], "podSubnet \"10.244.0.0/33\" is not a CIDR", "", "10.244.0.0/33"),
    err("pod subnet host bits", &[("10.244.0.0/16", "10.244.1.0/16")], "podSubnet 10.244.1.0/16 has host bits set", "", "10.244.1.0/16"),
    err("service subnet bare address", &[("10.96.0.0/16", "10.96.0.0")], "serviceSubnet \"10.96.0.0\" is not a CIDR", "", "10.96.0.0"),
    err("families differ", &[("10.96.0.0/16", "fd00:10:96::/112")], "are of different IP families", "", "fd00:10:96::/112"),
    err("service overlaps pod", &[("10.96.0.0/16", "10.244.128.0/20")], "serviceSubnet 10.244.128.0/20 overlaps podSubnet 10.244.0.0/16", "", "10.244.128.0/20"),
    err("service subnet too large", &[("10.0.0.", "172.16.0."), ("10.0.0.", "172.16.0."), ("10.0.0.", "172.16.0."), ("10.96.0.0/16", "10.0.0.0/8")], "larger than kube-apiserver allows", "serviceSubnet", "10.0.0.0/8"),
    err("node address in pod subnet", &[("10.0.0.21/24", "10.244.5.5")], "node w1 address 10.244.5.5 lies in podSubnet 10.244.0.0/16", "", "10.244.5.5"),
    err("pod subnet overlaps node network", &[("10.244.0.0/16", "10.0.0.0/16")], "podSubnet 10.0.0.0/16 overlaps the nodes' network: 10.0.0.0/24 of nodes cp1, w1", "", "10.0.0.0/16"),
    err("no room for node CIDRs", &[("10.244.0.0/16", "10.244.0.0/24")], "has room for 1 node CIDR of /24, but the file has 2 nodes", "", "10.244.0.0/24"),
    err("node mask shorter than pod prefix", &[("    serviceSubnet: 10.96.0.0/16\n", "    serviceSubnet: 10.96.0.0/16\n    nodeCidrMaskSize: 12\n")], "nodeCidrMaskSize /12 does not fit podSubnet", "nodeCidrMaskSize", "12"),
    err("kube-proxy disabled with builtin", &[("    serviceSubnet: 10.96.0.0/16\n", "    serviceSubnet: 10.96.0.0/16\n    kubeProxy: disabled\n")], "kubeProxy is disabled, but the builtin CNI does not replace it", "", "disabled"),
    err("kube-proxy disabled, cilium without replacement", &[("    serviceSubnet: 10.96.0.0/16\n", "    serviceSubnet: 10.96.0.0/16\n    kubeProxy: disabled\n    cni: {plugin: cilium}\n")], "Cilium without kubeProxyReplacement does not replace it", "kubeProxy", "disabled"),
    err("kindnet on ssh", &[("    serviceSubnet: 10.96.0.0/16\n", "    serviceSubnet: 10.96.0.0/16\n    cni:\n      plugin: kindnet\n")], "kindnet CNI is only available with the docker provider", "", "kindnet"),
    err("calico pool typed twice", &[("    serviceSubnet: 10.96.0.0/16\n", "    serviceSubnet: 10.96.0.0/16\n    cni:\n      plugin: calico\n      values:\n        ipPools: [{cidr: 192.168.0.0/16}]\n")], "`ipPools` may not be set in the CNI values", "values", "ipPools"),
    err("cilium pool nested in values", &[("    serviceSubnet: 10.96.0.0/16\n", "    serviceSubnet: 10.96.0.0/16\n    cni:\n      plugin: cilium\n      values:\n        ipam:\n          operator:\n            clusterPoolIPv4PodCIDRList: [10.0.0.0/8]\n")], "`clusterPoolIPv4PodCIDRList` may not be set in the CNI values", "operator", "clusterPoolIPv4PodCIDRList"),
    err("cilium image tag is clusterctl's", &[("    serviceSubnet: 10.96.0.0/16\n", "    serviceSubnet: 10.96.0.0/16\n    cni:\n      plugin: cilium\n      values:\n        image:\n          pullPolicy: Always\n          tag: v1.99.0\n")], "`image.tag` may not be set in the CNI values: clusterctl pins the image", "pullPolicy", "tag"),
    err("cilium ipam mode is clusterctl's", &[("    serviceSubnet: 10.96.0.0/16\n", "    serviceSubnet: 10.96.0.0/16\n    cni:\n      plugin: cilium\n      values:\n        ipam: {mode: cluster-pool}\n")], "`ipam.mode` may not be set in the CNI values", "ipam", "mode"),
    err("cilium envoy is inside the agent", &[("    serviceSubnet: 10.96.0.0/16\n", "    serviceSubnet: 10.96.0.0/16\n    cni:\n      plugin: cilium\n      values:\n        envoy:\n          enabled: true\n")], "`envoy.enabled` may not be set in the CNI values", "envoy", "enabled"),
    err("cilium image as a string would be replaced", &[("    serviceSubnet: 10.96.0.0/16\n", "    serviceSubnet: 10.96.0.0/16\n    cni:\n      plugin: cilium\n      values:\n        image: quay.io/cilium/cilium:v1.18.0\n")], "`image.repository` is set by clusterctl, so this value would be replaced", "values", "image"),
    err("cilium operator image", &[("    serviceSubnet: 10.96.0.0/16\n", "    serviceSubnet: 10.96.0.0/16\n    cni:\n      plugin: cilium\n      values:\n        operator: {replicas: 1, image: {repository: my/op}}\n")], "`operator.image.repository` may not be set", "image", "repository"),
    err("flannel address family", &[("    serviceSubnet: 10.96.0.0/16\n", "    serviceSubnet: 10.96.0.0/16\n    cni:\n      plugin: flannel\n      values:\n        EnableIPv6: true\n")], "`EnableIPv6` may not be set in the CNI values: it follows podSubnet", "values", "EnableIPv6"),
    err("flannel backend mtu", &[("    serviceSubnet: 10.96.0.0/16\n", "    serviceSubnet: 10.96.0.0/16\n    cni:\n      plugin: flannel\n      values:\n        Backend: {Type: vxlan, mtu: 1400}\n")], "`Backend.mtu` may not be set in the CNI values: use networking.cni.mtu", "Backend", "mtu"),
    err("calico registry is the mirror's", &[("    serviceSubnet: 10.96.0.0/16\n", "    serviceSubnet: 10.96.0.0/16\n    cni:\n      plugin: calico\n      values:\n        registry: quay.io/\n")], "`registry` may not be set in the CNI values", "values", "registry"),
    err("kubeProxyReplacement with calico", &[("    serviceSubnet: 10.96.0.0/16\n", "    serviceSubnet: 10.96.0.0/16\n    cni:\n      plugin: calico\n      kubeProxyReplacement: true\n")], "kubeProxyReplacement is a Cilium setting", "kubeProxyReplacement", "true"),
    err("VIP outside control-plane subnet", &[("10.0.0.100", "10.1.0.100")], "the ARP VIP 10.1.0.100 is not in the control planes' subnet 10.0.0.0/24", "", "10.1.0.100"),
    err("VIP is a node address", &[("address: 10.0.0.100", "address: 10.0.0.21")], "the VIP 10.0.0.21 is also the address of node w1", "vip", "10.0.0.21"),
    err("VIP not an address", &[("10.0.0.100", "10.0.0.300")], "VIP \"10.0.0.300\" is not an IP address", "", "10.0.0.300"),
    err("VIP without interface", &[("      interface: eth0\n", "")], "no VIP interface for control plane cp1", "vip:", "address"),
    err("bgp mode without bgp block", &[("      interface: eth0\n", "      interface: eth0\n      mode: bgp\n")], "VIP mode is bgp but no `bgp` settings are given", "mode", "bgp"),
    err("endpoint with scheme", &[("  controlPlane:\n", "  controlPlane:\n    endpoint: https://10.0.0.100:6443\n")], "must not have a scheme", "", "https://10.0.0.100:6443"),
    err("node name not DNS-1123", &[("name: w1", "name: W_1")], "node name \"W_1\"", "", "W_1"),
    err("node name duplicate", &[("name: w1", "name: cp1")], "node name \"cp1\" is already used by spec.nodes[0]", "role: control-plane", "cp1"),
    err("node address duplicate", &[("10.0.0.21/24", "10.0.0.11/24")], "address 10.0.0.11 is already used by spec.nodes[0]", "role: worker", "10.0.0.11/24"),
    err("ssh connect attempts out of range", &[("  provider: ssh\n", "  provider: ssh\n  ssh:\n    connectAttempts: 0\n")], "ssh connectAttempts 0 is out of range", "connectAttempts", "0"),
    err("bastion without address", &[("  provider: ssh\n", "  provider: ssh\n  ssh:\n    bastion: {address: \"\", user: jump}\n")], "the bastion has no address", "bastion", "\"\""),
    err("bastion address with a user", &[("  provider: ssh\n", "  provider: ssh\n  ssh:\n    bastion: {address: root@jump}\n")], "bastion address \"root@jump\" is not a host name or IP address", "bastion", "root@jump"),
    err("bastion port 0", &[("  provider: ssh\n", "  provider: ssh\n  ssh:\n    bastion:\n      address: jump.example.com\n      port: 0\n")], "bastion port 0 is not valid", "port", "0"),
    err("bastion insecure host keys", &[("  provider: ssh\n", "  provider: ssh\n  ssh:\n    bastion: {address: 192.0.2.1, hostKeyPolicy: insecure}\n")], "hostKeyPolicy `insecure` is not supported", "bastion", "insecure"),
    err("bastion empty key file", &[("  provider: ssh\n", "  provider: ssh\n  ssh:\n    bastion: {address: 192.0.2.1, keyFile: \"\"}\n")], "bastion keyFile is empty", "keyFile", "\"\""),
    err("bastion with docker", &[("  provider: ssh\n", "  provider: docker\n  ssh:\n    bastion: {address: 192.0.2.1}\n")], "a bastion is used only by the ssh provider", "ssh:", "bastion"),
    err("proxy without a proxy", &[("  provider: ssh\n", "  provider: ssh\n  proxy:\n    noProxy: [corp.example]\n")], "spec.proxy names no proxy", "", "proxy"),
    err("proxy URL with credentials", &[("  provider: ssh\n", "  provider: ssh\n  proxy: {http: \"http://u:pw@p:3128\"}\n")], "credentials in the URL are not supported", "proxy", "\"http://u:pw@p:3128\""),
    err("proxy URL without scheme", &[("  provider: ssh\n", "  provider: ssh\n  proxy: {https: p.example:3128}\n")], "it must start with http:// or https://", "proxy", "p.example:3128"),
    err("noProxy entry with a space", &[("  provider: ssh\n", "  provider: ssh\n  proxy:\n    http: http://p:3128\n    noProxy: [ok.example, \"a b\"]\n")], "noProxy entry \"a b\" is not valid", "noProxy", "\"a b\""),
    err("ssh node without address", &[("      address: 10.0.0.21/24\n", "")], "node \"w1\" has no address", "", "name: w1"),
    err("loopback node address", &[("10.0.0.21/24", "127.0.0.1")], "node address 127.0.0.1 is a loopback address", "", "127.0.0.1"),
    err("bad label key", &[("      role: worker\n", "      role: worker\n      labels:\n        -disk: ssd\n")], "label key \"-disk\"", "labels", "-disk"),
    err("bad label value", &[("      role: worker\n", "      role: worker\n      labels:\n        disktype: \"fast ssd\"\n")], "label value \"fast ssd\"", "labels", "\"fast ssd\""),
    err("bad taint effect", &[("      role: worker\n", "      role: worker\n      taints: [{key: gpu, effect: Sometimes}]\n")], "unknown value `Sometimes`", "taints", "Sometimes"),
    err("vipInterface on a worker", &[("      role: worker\n", "      role: worker\n      vipInterface: eth1\n")], "node \"w1\" is a worker; only control planes carry the VIP", "", "eth1"),
    err("unknown field", &[("  provider: ssh\n", "  provider: ssh\n  colour: blue\n")], "unknown field `colour`", "", "colour"),
    err("unknown role", &[("role: worker", "role: minion")], "unknown value `minion`", "", "minion"),
    err("wrong type", &[("  provider: ssh\n", "  provider: ssh\n  kubelet:\n    maxPods: lots\n")], "invalid type: string \"lots\", expected u32", "", "lots"),
    err("version not a patch", &[("v1.34.1", "v1.34")], "\"v1.34\" is not an exact Kubernetes patch version", "", "v1.34"),
    err("version unknown", &[("v1.34.1", "v1.29.4")], "Kubernetes v1.29.4 is not in the supported version table", "", "v1.29.4"),
    err("wrong apiVersion", &[("clusterctl.io/v1alpha1", "kubeadm.k8s.io/v1beta4")], "apiVersion is \"kubeadm.k8s.io/v1beta4\", expected clusterctl.io/v1alpha1", "", "kubeadm.k8s.io/v1beta4"),
    err("wrong kind", &[("kind: Cluster", "kind: ClusterConfiguration")], "kind is \"ClusterConfiguration\", expected Cluster", "", "ClusterConfiguration"),
    err("duplicate key", &[("  provider: ssh\n", "  provider: ssh\n  provider: docker\n")], "duplicate key `provider`", "", "provider: docker"),
    err("inline password", &[("  provider: ssh\n", "  provider: ssh\n  registry:\n    mirror: harbor.example.com/library\n    password: hunter2\n")], "registry password written inline", "registry", "password"),
    err("credentials env not a name", &[("  provider: ssh\n", "  provider: ssh\n  registry:\n    mirror: harbor.example.com/library\n    usernameEnv: HARBOR_USER\n    passwordEnv: my password\n")], "passwordEnv is not an environment variable name", "", "my password"),
    err("mirror with scheme", &[("  provider: ssh\n", "  provider: ssh\n  registry:\n    mirror: https://harbor.example.com/library\n")], "must not have a scheme", "", "https://harbor.example.com/library"),
    err("mirror collision", &[("  provider: ssh\n", "  provider: ssh\n  registry:\n    mirror: harbor.example.com/library\n  images:\n    preload: [quay.io/kube-apiserver:v1.34.1]\n")], "would both be stored as harbor.example.com/library/kube-apiserver:v1.34.1", "", "harbor.example.com/library"),
    err("bad preload image", &[("  provider: ssh\n", "  provider: ssh\n  images:\n    preload: [\"Cka-Api:v4\"]\n")], "\"Cka-Api:v4\" is not an image reference", "preload", "\"Cka-Api:v4\""),
    err("oidc http issuer", &[("  networking:\n", "  apiServer:\n    oidc:\n      issuerURL: http://sso.example.com/realms/k8s\n      clientID: kube\n  networking:\n")], "is not an https URL", "", "http://sso.example.com/realms/k8s"),
    err("oidc CA file missing", &[("  networking:\n", "  apiServer:\n    oidc:\n      issuerURL: https://sso.example.com/realms/k8s\n      clientID: kube\n      caFile: missing-ca.crt\n  networking:\n")], "cannot read OIDC CA file \"missing-ca.crt\"", "", "missing-ca.crt"),
    Row {
        name: "oidc CA file not PEM",
        edits: &[("  networking:\n", "  apiServer:\n    oidc:\n      issuerURL: https://sso.example.com/realms/k8s\n      clientID: kube\n      caFile: ca.crt\n  networking:\n")],
        files: &[("ca.crt", "not a certificate\n")],
        severity: Severity::Error,
        message: "OIDC CA file \"ca.crt\" holds no PEM certificate",
        context: "caFile",
        needle: "ca.crt",
    },
    Row {
        name: "audit policy invalid",
        edits: &[("  networking:\n", "  apiServer:\n    audit:\n      policy: policy.yaml\n  networking:\n")],
        files: &[("policy.yaml", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n  - level: Everything\n")],
        severity: Severity::Error,
        message: "audit policy file \"policy.yaml\" is not a valid audit.k8s.io/v1 Policy",
        context: "",
        needle: "policy.yaml",
    },
    err("audit log path relative", &[("  networking:\n", "  apiServer:\n    audit:\n      logPath: audit.log\n  networking:\n")], "audit logPath \"audit.log\" is not an absolute file path", "", "audit.log"),
    err("extraArgs with dashes", &[("  networking:\n", "  apiServer:\n    extraArgs:\n      --profiling: \"false\"\n  networking:\n")], "extraArgs key \"--profiling\" starts with '-'", "", "--profiling"),
    err("certSAN invalid", &[("  networking:\n", "  apiServer:\n    certSANs: [\"bad_name!\"]\n  networking:\n")], "certSAN \"bad_name!\" is neither an IP address nor a DNS name", "", "\"bad_name!\""),
    err("duration invalid", &[("  provider: ssh\n", "  provider: ssh\n  kubelet:\n    shutdownGracePeriod: \"30\"\n")], "shutdownGracePeriod \"30\" is not a duration", "", "\"30\""),
    err("quantity invalid", &[("  provider: ssh\n", "  provider: ssh\n  kubelet:\n    systemReserved:\n      memory: 1GB\n")], "systemReserved.memory \"1GB\" is not a quantity", "", "1GB"),
    err("crio on docker", &[("provider: ssh", "provider: docker"), ("  networking:\n", "  runtime: {kind: crio}\n  networking:\n")], "the docker provider's node image runs containerd", "runtime", "crio"),
    err("docker container name over 63", &[("provider: ssh", "provider: docker"), ("    - name: w1\n", "    - name: nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n"), ("  controlPlane:\n    vip:\n      address: 10.0.0.100\n      interface: eth0\n", "")], "container name `demo-nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx` would be 68 characters", "", "nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
    err("host port mapped by two docker nodes", &[("provider: ssh", "provider: docker"), ("      address: 10.0.0.11/24\n", "      portMappings: [{containerPort: 80, hostPort: 8080}]\n"), ("      address: 10.0.0.21/24\n", "      portMappings: [{containerPort: 443, hostPort: 8080}]\n"), ("  controlPlane:\n    vip:\n      address: 10.0.0.100\n      interface: eth0\n", "")], "host port 8080 is already mapped", "containerPort: 443", "8080"),
    err("airgap url without sha256", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    packages:\n      - {name: kubeadm, osFamily: debian, arch: amd64, url: \"https://dl.example.com/kubeadm\"}\n")], "package \"kubeadm\" is downloaded but has no sha256", "", "\"https://dl.example.com/kubeadm\""),
    err("airgap extractTo on a non-archive", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    packages:\n      - {name: kubeadm, osFamily: debian, arch: amd64, path: kubeadm.deb, extractTo: /usr/local/bin}\n")], "\"kubeadm.deb\" is not a .tgz, .tar.gz or .tar archive", "extractTo", "/usr/local/bin"),
    err("airgap extractTo relative", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    packages:\n      - {name: cni-plugins, osFamily: any, arch: amd64, path: cni-plugins-linux-amd64-v1.6.2.tgz, extractTo: opt/cni/bin}\n")], "extractTo \"opt/cni/bin\" is not an absolute, normalized directory", "extractTo", "opt/cni/bin"),
    err("airgap extractTo with ..", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    packages:\n      - {name: crictl, osFamily: any, arch: amd64, url: \"https://dl.example.com/crictl-v1.34.0-linux-amd64.tar.gz\", sha256: 0000000000000000000000000000000000000000000000000000000000000000, extractTo: \"/usr/local/../../etc\"}\n")], "extractTo \"/usr/local/../../etc\" is not an absolute, normalized directory", "extractTo", "\"/usr/local/../../etc\""),
    err("airgap package name is a path", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    packages:\n      - {name: ../../etc/cron.d/evil, osFamily: any, arch: amd64, path: tool}\n")], "package name \"../../etc/cron.d/evil\" is not a plain name", "name", "../../etc/cron.d/evil"),
    err("airgap package name is an option", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    packages:\n      - {name: \"-rf\", osFamily: any, arch: amd64, path: tool}\n")], "package name \"-rf\" is not a plain name", "name", "\"-rf\""),
    err("airgap extractTo trailing slash", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    packages:\n      - {name: cni-plugins, osFamily: any, arch: amd64, path: cni.tar, extractTo: /opt/cni/bin/}\n")], "extractTo \"/opt/cni/bin/\" is not an absolute, normalized directory", "extractTo", "/opt/cni/bin/"),
    err("airgap package version not in the file", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    extraVersions: [v1.34.2]\n    packages:\n      - {name: kubeadm, osFamily: rhel, arch: amd64, path: kubeadm-1.34.0-150500.1.1.x86_64.rpm, kubernetesVersion: v1.34.0}\n")], "kubernetesVersion \"v1.34.0\" is neither spec.kubernetesVersion nor an airgap.extraVersions entry", "kubernetesVersion", "v1.34.0"),
    err("airgap package version not a version", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    packages:\n      - {name: kubeadm, osFamily: rhel, arch: amd64, path: kubeadm.rpm, kubernetesVersion: latest}\n")], "kubernetesVersion \"latest\" is not an exact Kubernetes patch version", "kubernetesVersion", "latest"),
    err("airgap package twice for one version", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    extraVersions: [v1.34.2]\n    packages:\n      - {name: kubeadm, osFamily: rhel, arch: amd64, path: kubeadm-1.34.2-a.rpm, kubernetesVersion: v1.34.2}\n      - {name: kubeadm, osFamily: rhel, arch: amd64, path: kubeadm-1.34.2-b.rpm, kubernetesVersion: \"1.34.2\"}\n")], "package \"kubeadm\" for rhel/amd64 and Kubernetes v1.34.2 is listed twice", "kubernetesVersion: v1.34.2}", "kubeadm"),
    err("airgap package twice untagged", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    packages:\n      - {name: kubelet, osFamily: debian, arch: amd64, path: kubelet-a.deb}\n      - {name: kubelet, osFamily: debian, arch: amd64, path: kubelet-b.deb}\n")], "package \"kubelet\" for debian/amd64 is listed twice", "a.deb}", "kubelet"),
    err("airgap extra version unknown", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    extraVersions: [v1.20.0]\n")], "Kubernetes v1.20.0 is not in the supported version table", "", "v1.20.0"),
    err("source registry listed twice", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    sourceRegistries:\n      - {registry: harbor.corp.example:8443}\n      - {registry: Harbor.corp.example:8443}\n")], "source registry \"harbor.corp.example:8443\" is listed twice", "", "Harbor.corp.example:8443"),
    err("source registry with scheme", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    sourceRegistries:\n      - {registry: \"https://harbor.corp.example\"}\n")], "source registry \"https://harbor.corp.example\" must not have a scheme", "", "\"https://harbor.corp.example\""),
    err("source registry with path", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    sourceRegistries:\n      - {registry: harbor.corp.example/library}\n")], "source registry \"harbor.corp.example/library\" must not have a path", "", "harbor.corp.example/library"),
    err("source registry bad port", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    sourceRegistries:\n      - {registry: \"harbor.corp.example:https\"}\n")], "port \"https\" is not a number", "", "\"harbor.corp.example:https\""),
    err("source registry username without password", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    sourceRegistries:\n      - registry: vendor.example.com\n        usernameEnv: VENDOR_USER\n")], "usernameEnv is set but passwordEnv is not", "", "VENDOR_USER"),
    err("source registry password without username", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    sourceRegistries:\n      - registry: vendor.example.com\n        passwordEnv: VENDOR_TOKEN\n")], "passwordEnv is set but usernameEnv is not", "", "VENDOR_TOKEN"),
    err("source registry env not a name", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    sourceRegistries:\n      - registry: vendor.example.com\n        usernameEnv: VENDOR_USER\n        passwordEnv: \"s3cr3t!\"\n")], "passwordEnv is not an environment variable name", "", "\"s3cr3t!\""),
    err("source registry inline password", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    sourceRegistries:\n      - registry: vendor.example.com\n        password: hunter2\n")], "source registry password written inline", "sourceRegistries", "password"),
    err("source registry CA file missing", &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    sourceRegistries:\n      - {registry: harbor.corp.example, caFile: missing-ca.crt}\n")], "cannot read source registry CA file \"missing-ca.crt\"", "", "missing-ca.crt"),
    Row {
        name: "source registry CA file not PEM",
        edits: &[("  provider: ssh\n", "  provider: ssh\n  airgap:\n    bundle: site.tar\n    sourceRegistries:\n      - {registry: harbor.corp.example, caFile: src-ca.crt}\n")],
        files: &[("src-ca.crt", "not a certificate\n")],
        severity: Severity::Error,
        message: "source registry CA file \"src-ca.crt\" holds no PEM certificate",
        context: "caFile",
        needle: "src-ca.crt",
    },
    Row {
        name: "cgroup v1 on 1.35",
        edits: &[("v1.34.1", "v1.35.0"), ("  networking:\n", "  runtime: {hostCgroupVersion: v1}\n  networking:\n")],
        files: &[],
        severity: Severity::Warning,
        message: "refuse to start on cgroup v1 hosts unless failCgroupV1 is false",
        context: "",
        needle: "v1.35.0",
    },
    err("kubeadm ignores all preflight checks", &[("  networking:\n", "  kubeadm:\n    ignorePreflightErrors:\n      - {check: all, reason: fast}\n  networking:\n")], "`all` would turn every kubeadm preflight failure into a warning", "check:", "all"),
    err("kubeadm ignored check without reason", &[("  networking:\n", "  kubeadm:\n    ignorePreflightErrors:\n      - {check: Swap, reason: \" \"}\n  networking:\n")], "ignored kubeadm preflight check \"Swap\" has no reason", "reason:", "\" \""),
    err("kubeadm ignored check named twice", &[("  networking:\n", "  kubeadm:\n    ignorePreflightErrors:\n      - {check: Swap, reason: a}\n      - {check: swap, reason: b}\n  networking:\n")], "\"swap\": named twice", "reason: a", "swap"),
    Row {
        name: "cgroup v1 on 1.35 without skipping kubeadm's SystemVerification",
        edits: &[("v1.34.1", "v1.35.0"), ("  networking:\n", "  kubelet: {failCgroupV1: false}\n  networking:\n")],
        files: &[],
        severity: Severity::Warning,
        message: "refuses cgroup v1 hosts in its SystemVerification preflight check",
        context: "failCgroupV1",
        needle: "false",
    },
    Row {
        name: "even control planes",
        edits: &[("role: worker", "role: control-plane")],
        files: &[],
        severity: Severity::Warning,
        message: "2 control planes with stacked etcd",
        context: "name: w1",
        needle: "control-plane",
    },
];

/// 1-based (line, column in characters) of the first `needle` after the first `context`.
fn anchor(text: &str, context: &str, needle: &str) -> (usize, usize) {
    let start = text
        .find(context)
        .unwrap_or_else(|| panic!("context {context:?} not in text"));
    let off = start
        + text[start..]
            .find(needle)
            .unwrap_or_else(|| panic!("needle {needle:?} not after {context:?}"));
    let before = &text[..off];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, col)
}

fn run(row: &Row) -> (String, Vec<Diagnostic>) {
    let mut text = BASE.to_string();
    for (from, to) in row.edits {
        assert!(
            text.contains(from),
            "{}: edit {from:?} does not match",
            row.name
        );
        text = text.replacen(from, to, 1);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, content) in row.files {
        std::fs::write(dir.path().join(name), content).expect("write referenced file");
    }
    let path = dir.path().join("cluster.yaml");
    std::fs::write(&path, &text).expect("write cluster file");
    let loaded = load(&path).unwrap_or_else(|d| panic!("{}: load failed: {d}", row.name));
    let diags = match validate(&loaded) {
        Ok(v) => v.warnings,
        Err(d) => d.items,
    };
    (text, diags)
}

#[test]
fn table_of_invalid_files() {
    assert!(ROWS.len() >= 30);
    let mut failures = Vec::new();
    for row in ROWS {
        let (text, diags) = run(row);
        let (line, col) = anchor(&text, row.context, row.needle);
        let found = diags.iter().find(|d| d.message.contains(row.message));
        match found {
            None => failures.push(format!(
                "{}: no diagnostic containing {:?}; got:\n  {}",
                row.name,
                row.message,
                diags
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join("\n  ")
            )),
            Some(d) => {
                if d.severity != row.severity {
                    failures.push(format!(
                        "{}: severity {:?}, expected {:?}",
                        row.name, d.severity, row.severity
                    ));
                }
                if (d.line, d.column) != (line, col) {
                    failures.push(format!(
                        "{}: points at {}:{}, expected {line}:{col} ({:?}) — {d}",
                        row.name, d.line, d.column, row.needle
                    ));
                }
                if d.help.as_deref().unwrap_or("").is_empty() {
                    failures.push(format!("{}: no help line", row.name));
                }
                if !d
                    .location()
                    .ends_with(&format!("cluster.yaml:{line}:{col}"))
                {
                    failures.push(format!(
                        "{}: location {} does not name the file and position",
                        row.name,
                        d.location()
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        ROWS.len(),
        failures.join("\n")
    );
}

#[test]
fn inline_password_is_never_echoed() {
    let row = ROWS
        .iter()
        .find(|r| r.name == "inline password")
        .expect("row");
    let (_, diags) = run(row);
    for d in &diags {
        let shown = format!("{d} {:?} {}", d.help, d.label);
        assert!(!shown.contains("hunter2"), "secret printed: {shown}");
    }
    assert!(diags
        .iter()
        .any(|d| d.help.as_deref().unwrap_or("").contains("passwordEnv")));
}

#[test]
fn every_problem_is_reported_in_one_run() {
    let text = BASE
        .replacen("name: demo", "name: Demo_Cluster", 1)
        .replacen(
            "  provider: ssh\n",
            "  provider: ssh\n  colour: blue\n  kubelet: {maxPods: 0}\n",
            1,
        )
        .replacen("10.96.0.0/16", "10.244.0.0/20", 1)
        .replacen("name: w1", "name: cp1", 1)
        .replacen(
            "      role: worker\n",
            "      role: worker\n      shape: round\n",
            1,
        );
    let loaded = clusterctl_spec::Loaded::from_text("many.yaml", text.clone());
    let report = validate(&loaded).expect_err("invalid");
    let want = [
        ("unknown field `colour`", anchor(&text, "", "colour")),
        ("unknown field `shape`", anchor(&text, "", "shape")),
    ];
    for (msg, (line, col)) in want {
        let d = report
            .items
            .iter()
            .find(|d| d.message.contains(msg))
            .unwrap_or_else(|| panic!("missing {msg}: {report}"));
        assert_eq!((d.line, d.column), (line, col), "{msg}");
    }
    // Schema errors stop the semantic rules only for what did not decode; the summary counts them all.
    assert!(report.error_count() >= 2, "{report}");
    assert!(report.to_string().contains("many.yaml:"), "{report}");
}

/// Breaker finding U2: one integer too large for 64 bits stopped the whole decode ("invalid type:
/// integer … as u128, expected any YAML value") and hid every other error. It is reported at its line
/// as out of range, once, and the other errors still are.
#[test]
fn an_integer_too_large_is_out_of_range_at_its_line_and_hides_nothing() {
    let text = BASE
        .replacen(
            "  provider: ssh\n",
            "  provider: ssh\n  ssh: {port: 18446744073709551616}\n  colour: blue\n",
            1,
        )
        .replacen(
            "      role: worker\n",
            "      role: worker\n      labels: {size: -99999999999999999999}\n",
            1,
        );
    let loaded = clusterctl_spec::Loaded::from_text("big.yaml", text.clone());
    let report = validate(&loaded).expect_err("invalid");
    for (needle, path) in [
        ("18446744073709551616", "spec.ssh.port"),
        ("-99999999999999999999", "spec.nodes[1].labels.size"),
    ] {
        let found: Vec<_> = report.items.iter().filter(|d| d.path == path).collect();
        assert_eq!(found.len(), 1, "{path} reported once: {report}");
        let d = found[0];
        assert!(
            d.message.contains(needle) && d.message.contains("out of range"),
            "{d}"
        );
        assert_eq!((d.line, d.column), anchor(&text, "", needle), "{d}");
    }
    assert!(
        report
            .items
            .iter()
            .any(|d| d.message.contains("unknown field `colour`")),
        "{report}"
    );
    assert!(!report.to_string().contains("u128"), "{report}");
}

/// Breaker finding U7: `acceptUnverified: true` with a CNI that installs no upstream files warned
/// about upstream files; with an unpinned Calico version it reads as if it could help.
#[test]
fn accept_unverified_says_where_it_has_no_effect() {
    for plugin in ["builtin", "none"] {
        let text = BASE.replacen(
            "    serviceSubnet: 10.96.0.0/16\n",
            &format!("    serviceSubnet: 10.96.0.0/16\n    cni: {{plugin: {plugin}, acceptUnverified: true}}\n"),
            1,
        );
        let loaded = clusterctl_spec::Loaded::from_text("u.yaml", text);
        let items = match validate(&loaded) {
            Ok(v) => v.warnings,
            Err(d) => d.items,
        };
        let d = items
            .iter()
            .find(|d| d.path == "spec.networking.cni.acceptUnverified")
            .unwrap_or_else(|| panic!("{plugin}: {items:?}"));
        assert_eq!(d.severity, Severity::Warning);
        assert!(
            d.message
                .contains(&format!("acceptUnverified has no effect for {plugin}")),
            "{d}"
        );
        assert!(!d.message.contains("installed as downloaded"), "{d}");
    }
    let text = BASE.replacen(
        "    serviceSubnet: 10.96.0.0/16\n",
        "    serviceSubnet: 10.96.0.0/16\n    cni: {plugin: calico, version: v3.0.0, acceptUnverified: true}\n",
        1,
    );
    let report =
        validate(&clusterctl_spec::Loaded::from_text("c.yaml", text)).expect_err("unpinned");
    let d = report
        .items
        .iter()
        .find(|d| d.message.contains("is not a version clusterctl has pinned"))
        .unwrap_or_else(|| panic!("{report}"));
    let help = d.help.as_deref().unwrap_or_default();
    assert!(help.contains("acceptUnverified does not apply"), "{help}");
}

#[test]
fn every_semantic_problem_is_reported_in_one_run() {
    let text = BASE
        .replacen("name: demo", "name: Demo_Cluster", 1)
        .replacen(
            "  provider: ssh\n",
            "  provider: ssh\n  kubelet: {maxPods: 0}\n",
            1,
        )
        .replacen("10.96.0.0/16", "10.244.0.0/20", 1)
        .replacen("name: w1", "name: cp1", 1)
        .replacen("10.0.0.100", "10.9.9.9", 1);
    let loaded = clusterctl_spec::Loaded::from_text("many.yaml", text.clone());
    let report = validate(&loaded).expect_err("invalid");
    for msg in [
        "cluster name \"Demo_Cluster\"",
        "maxPods 0 is out of range",
        "serviceSubnet 10.244.0.0/20 overlaps podSubnet 10.244.0.0/16",
        "node name \"cp1\" is already used",
        "the ARP VIP 10.9.9.9 is not in the control planes' subnet",
    ] {
        assert!(
            report.items.iter().any(|d| d.message.contains(msg)),
            "missing {msg:?} in:\n{report}"
        );
    }
    assert_eq!(report.error_count(), 5, "{report}");
}

#[test]
fn empty_and_non_yaml_inputs() {
    for (text, msg) in [
        ("", "the cluster file is empty"),
        ("# only a comment\n\n", "the cluster file is empty"),
        ("a: [1, 2\nb: 3\n", "not valid YAML"),
        ("just a string", "must be a mapping"),
        ("- 1\n- 2\n", "must be a mapping"),
    ] {
        let report =
            validate(&clusterctl_spec::Loaded::from_text("x.yaml", text)).expect_err("invalid");
        assert!(
            report
                .items
                .iter()
                .any(|d| d.message.contains(msg) && d.help.is_some()),
            "{text:?}: {report}"
        );
    }
    let report = validate(&clusterctl_spec::Loaded::from_text(
        "x.yaml",
        "a: [1, 2\nb: 3\n",
    ))
    .expect_err("invalid");
    let d = &report.items[0];
    assert!(
        d.line >= 1 && d.column >= 1,
        "YAML error has a position: {d}"
    );
    let two = format!("{BASE}---\n{BASE}");
    let report = validate(&clusterctl_spec::Loaded::from_text("x.yaml", two)).expect_err("invalid");
    assert!(
        report.to_string().contains("more than one document"),
        "{report}"
    );
}

#[test]
fn extract_to_on_archives_is_valid_and_kept() {
    let text = BASE.replacen(
        "  provider: ssh\n",
        "  provider: ssh\n  airgap:\n    bundle: site.tar\n    packages:\n      - {name: cni-plugins, osFamily: any, arch: amd64, path: cni-plugins-linux-amd64-v1.6.2.tgz, extractTo: /opt/cni/bin}\n      - {name: crictl, osFamily: any, arch: amd64, path: crictl-v1.34.0-linux-amd64.tar.gz, extractTo: /usr/local/bin}\n      - {name: extras, osFamily: any, arch: amd64, path: extras.tar, extractTo: /}\n      - {name: kubeadm, osFamily: debian, arch: amd64, path: kubeadm.deb}\n      - {name: kubelet, osFamily: debian, arch: amd64, path: kubelet.deb}\n      - {name: kubectl, osFamily: debian, arch: amd64, path: kubectl.deb}\n",
        1,
    );
    let loaded = clusterctl_spec::Loaded::from_text("ok.yaml", text);
    let valid = validate(&loaded).unwrap_or_else(|r| panic!("valid file refused: {r}"));
    assert!(
        valid
            .warnings
            .iter()
            .all(|d| !d.message.contains("extractTo")),
        "{:?}",
        valid.warnings
    );
    let dirs: Vec<Option<&str>> = valid
        .cluster
        .spec()
        .airgap
        .as_ref()
        .map(|a| a.packages.iter().map(|p| p.extract_to.as_deref()).collect())
        .unwrap_or_default();
    assert_eq!(
        dirs,
        [
            Some("/opt/cni/bin"),
            Some("/usr/local/bin"),
            Some("/"),
            None,
            None,
            None
        ]
    );
}

#[test]
fn packages_of_each_kubernetes_version_are_valid_and_kept() {
    let text = BASE.replacen(
        "  provider: ssh\n",
        "  provider: ssh\n  airgap:\n    bundle: site.tar\n    extraVersions: [v1.34.2]\n    packages:\n      - {name: kubeadm, osFamily: rhel, arch: amd64, path: kubeadm-1.34.1-150500.1.1.x86_64.rpm, kubernetesVersion: v1.34.1}\n      - {name: kubelet, osFamily: rhel, arch: amd64, path: kubelet-1.34.1-150500.1.1.x86_64.rpm, kubernetesVersion: v1.34.1}\n      - {name: kubectl, osFamily: rhel, arch: amd64, path: kubectl-1.34.1-150500.1.1.x86_64.rpm, kubernetesVersion: v1.34.1}\n      - {name: kubeadm, osFamily: rhel, arch: amd64, path: kubeadm-1.34.2-150500.1.1.x86_64.rpm, kubernetesVersion: \"1.34.2\"}\n      - {name: kubelet, osFamily: rhel, arch: amd64, path: kubelet-1.34.2-150500.1.1.x86_64.rpm, kubernetesVersion: \"1.34.2\"}\n      - {name: kubectl, osFamily: rhel, arch: amd64, path: kubectl-1.34.2-150500.1.1.x86_64.rpm, kubernetesVersion: v1.34.2}\n      - {name: cri-tools, osFamily: rhel, arch: amd64, path: cri-tools.rpm}\n",
        1,
    );
    let loaded = clusterctl_spec::Loaded::from_text("ok.yaml", text);
    let valid = validate(&loaded).unwrap_or_else(|r| panic!("valid file refused: {r}"));
    let tags: Vec<Option<&str>> = valid
        .cluster
        .spec()
        .airgap
        .as_ref()
        .map(|a| {
            a.packages
                .iter()
                .map(|p| p.kubernetes_version.as_deref())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        tags,
        [
            Some("v1.34.1"),
            Some("v1.34.1"),
            Some("v1.34.1"),
            Some("1.34.2"),
            Some("1.34.2"),
            Some("v1.34.2"),
            None
        ]
    );
}

#[test]
fn source_registries_resolve_with_their_ca_and_variable_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    std::fs::write(dir.path().join("harbor-ca.crt"), pem).expect("ca");
    let text = BASE.replacen(
        "  provider: ssh\n",
        "  provider: ssh\n  airgap:\n    bundle: site.tar\n    sourceRegistries:\n      - {registry: harbor.corp.example:8443, usernameEnv: HARBOR_USER, passwordEnv: HARBOR_PASSWORD, caFile: harbor-ca.crt}\n      - {registry: 127.0.0.1:5000}\n",
        1,
    );
    let file = dir.path().join("cluster.yaml");
    std::fs::write(&file, &text).expect("file");
    let loaded = load(&file).expect("load");
    let valid = validate(&loaded).unwrap_or_else(|r| panic!("valid file refused: {r}"));
    let got = valid.cluster.source_auth();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].registry, "harbor.corp.example:8443");
    assert_eq!(
        got[0].credentials_env,
        Some(("HARBOR_USER".to_string(), "HARBOR_PASSWORD".to_string()))
    );
    assert_eq!(got[0].ca_pem.as_deref(), Some(pem));
    assert_eq!(
        (
            got[1].registry.as_str(),
            &got[1].credentials_env,
            &got[1].ca_pem
        ),
        ("127.0.0.1:5000", &None, &None)
    );
}

#[test]
fn source_registry_inline_password_is_never_echoed() {
    let row = ROWS
        .iter()
        .find(|r| r.name == "source registry inline password")
        .expect("row");
    let (_, diags) = run(row);
    for d in &diags {
        let shown = format!("{d} {:?} {}", d.help, d.label);
        assert!(!shown.contains("hunter2"), "secret printed: {shown}");
    }
    assert!(diags
        .iter()
        .any(|d| d.help.as_deref().unwrap_or("").contains("passwordEnv")));
}
