//! Targeted checks of what the files say: mirror image paths (incl. CoreDNS's `coredns/` path),
//! super-admin.conf vs admin.conf, OIDC never both ways and one username-prefix default, audit and every
//! flag path mounted, containerd schema by major version, the CNI pool equal to podSubnet, join secrets
//! as placeholders, the kind config, failCgroupV1 from facts, kubeadm timeouts from the file, audit to
//! the API server's standard output, kubeadm's ignored preflight checks in init, join and upgrade.

use crate::common;

use clusterctl_render::{images, placeholders, render, Facts, Purpose, Rendered};
use clusterctl_spec::ValidCluster;
use serde_yaml::Value;

fn fixture(name: &str) -> ValidCluster {
    common::valid(name, &common::fixture(name))
}

fn fixture_text(name: &str, edit: impl Fn(&str) -> String) -> ValidCluster {
    let mut l = common::fixture(name);
    l.source_text = edit(&l.source_text);
    common::valid(name, &l)
}

fn rendered(c: &ValidCluster) -> Rendered {
    render(c, &Facts::assumed(c)).expect("renders")
}

fn docs(r: &Rendered, node: &str, path: &str) -> Vec<Value> {
    let f = r
        .node_file(node, path)
        .unwrap_or_else(|| panic!("{node} has no {path}"));
    serde_yaml::Deserializer::from_str(&f.as_text())
        .map(|d| serde::Deserialize::deserialize(d).expect("yaml"))
        .collect()
}

fn kind<'a>(ds: &'a [Value], k: &str) -> &'a Value {
    ds.iter()
        .find(|d| d["kind"] == Value::String(k.into()))
        .unwrap_or_else(|| panic!("no {k}"))
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v:?}"))
}

fn args_of(cc: &Value) -> Vec<(String, String)> {
    cc["apiServer"]["extraArgs"]
        .as_sequence()
        .map(|a| {
            a.iter()
                .map(|x| (s(&x["name"]).to_string(), s(&x["value"]).to_string()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn mirror_image_paths_match_what_import_stores_including_coredns() {
    let c = fixture("ha-crio-mirror");
    let prefix = c.mirror_prefix().expect("mirror").to_string();
    let list = images(&c);
    assert!(!list.is_empty());
    for i in &list {
        assert_eq!(
            i.mirror.as_deref(),
            Some(c.image(&i.source).as_str()),
            "{i:?}"
        );
        assert!(i.pull_ref().starts_with(&format!("{prefix}/")), "{i:?}");
    }
    let v = c.version_info();
    let coredns = list
        .iter()
        .find(|i| i.component == "coredns")
        .expect("coredns");
    assert_eq!(
        coredns.source,
        format!("registry.k8s.io/coredns/coredns:{}", v.coredns)
    );
    assert_eq!(
        coredns.pull_ref(),
        format!("{prefix}/coredns/coredns:{}", v.coredns)
    );
    assert!(
        !list.iter().any(|i| i.component == "kube-proxy"),
        "kube-proxy is disabled"
    );
    assert!(list.iter().any(|i| i.component == "kube-vip"));
    assert!(list
        .iter()
        .any(|i| i.source.starts_with("quay.io/cilium/cilium:")));

    let r = rendered(&c);
    let first = c.first_control_plane().name.clone();
    let ds = docs(&r, &first, "/etc/kubernetes/kubeadm/init.yaml");
    let cc = kind(&ds, "ClusterConfiguration");
    assert_eq!(s(&cc["imageRepository"]), prefix);
    assert_eq!(
        s(&cc["dns"]["imageRepository"]),
        format!("{prefix}/coredns")
    );
    assert_eq!(s(&cc["dns"]["imageTag"]), v.coredns);
    assert_eq!(s(&cc["etcd"]["local"]["imageTag"]), v.etcd);
    // kubeadm's own rule applied to these values gives the pull references of the list.
    let dns_pull = format!(
        "{}/coredns:{}",
        s(&cc["dns"]["imageRepository"]),
        s(&cc["dns"]["imageTag"])
    );
    assert_eq!(dns_pull, coredns.pull_ref());
    let etcd = list.iter().find(|i| i.component == "etcd").expect("etcd");
    assert_eq!(
        format!(
            "{}/etcd:{}",
            s(&cc["imageRepository"]),
            s(&cc["etcd"]["local"]["imageTag"])
        ),
        etcd.pull_ref()
    );
    assert!(cc["proxy"]["disabled"].as_bool().unwrap_or(false));
    // kube-vip from the mirror; CRI-O pause from the mirror.
    let kv = docs(&r, &first, "/etc/kubernetes/manifests/kube-vip.yaml");
    let kvi = list
        .iter()
        .find(|i| i.component == "kube-vip")
        .expect("kube-vip");
    assert_eq!(s(&kv[0]["spec"]["containers"][0]["image"]), kvi.pull_ref());
    let pause = list.iter().find(|i| i.component == "pause").expect("pause");
    let crio = r
        .node_file(&first, "/etc/crio/crio.conf.d/10-clusterctl.conf")
        .expect("crio")
        .as_text()
        .to_string();
    assert!(
        crio.contains(&format!("pause_image = \"{}\"", pause.pull_ref())),
        "{crio}"
    );
    assert!(crio.contains("global_auth_file = \"/etc/crio/auth.json\""));
    let regs = r
        .node_file(
            &first,
            "/etc/containers/registries.conf.d/10-clusterctl.conf",
        )
        .expect("registries")
        .as_text()
        .to_string();
    for host in ["registry.k8s.io", "quay.io", "ghcr.io", "docker.io"] {
        assert!(
            regs.contains(&format!("prefix = \"{host}\"")),
            "{host} not mirrored"
        );
    }
    assert!(regs.contains(&format!("location = \"{prefix}\"")));
    assert!(r
        .node_file(&first, "/etc/containers/certs.d/harbor.example.com/ca.crt")
        .is_some());
    // Cilium values: repositories under the mirror compose to the listed pull references.
    let cv: Value = serde_yaml::from_str(
        &r.cluster_file("cni/cilium-values.yaml")
            .expect("values")
            .as_text(),
    )
    .expect("yaml");
    let agent = format!(
        "{}:{}",
        s(&cv["image"]["repository"]),
        s(&cv["image"]["tag"])
    );
    let op = format!(
        "{}-generic:{}",
        s(&cv["operator"]["image"]["repository"]),
        s(&cv["operator"]["image"]["tag"])
    );
    for want in [agent, op] {
        assert!(
            list.iter().any(|i| i.pull_ref() == want),
            "{want} not in the image list"
        );
    }
}

#[test]
fn calico_registry_and_image_path_compose_to_mirror_references() {
    let c = fixture("oidc-flags-audit");
    let r = rendered(&c);
    let inst: Value = serde_yaml::from_str(
        &r.cluster_file("cni/calico-installation.yaml")
            .expect("inst")
            .as_text(),
    )
    .expect("yaml");
    let node = format!(
        "{}{}/node",
        s(&inst["spec"]["registry"]),
        s(&inst["spec"]["imagePath"])
    );
    let listed = images(&c)
        .into_iter()
        .find(|i| i.component == "cni:calico/node")
        .expect("calico/node");
    assert_eq!(listed.pull_ref().split(':').next(), Some(node.as_str()));
}

#[test]
fn first_control_plane_mounts_super_admin_conf_the_others_admin_conf() {
    let c = fixture("ha-crio-mirror");
    let r = rendered(&c);
    let first = c.first_control_plane().name.clone();
    let mut cps = 0;
    for n in c.nodes() {
        let f = r.node_file(&n.name, "/etc/kubernetes/manifests/kube-vip.yaml");
        if !n.is_control_plane() {
            assert!(f.is_none(), "worker {} got kube-vip", n.name);
            continue;
        }
        cps += 1;
        let d = &docs(&r, &n.name, "/etc/kubernetes/manifests/kube-vip.yaml")[0];
        let want = if n.name == first {
            "/etc/kubernetes/super-admin.conf"
        } else {
            "/etc/kubernetes/admin.conf"
        };
        assert_eq!(
            s(&d["spec"]["volumes"][0]["hostPath"]["path"]),
            want,
            "{}",
            n.name
        );
        assert_eq!(
            s(&d["spec"]["containers"][0]["volumeMounts"][0]["mountPath"]),
            "/etc/kubernetes/admin.conf"
        );
        let env = d["spec"]["containers"][0]["env"]
            .as_sequence()
            .expect("env");
        let get = |k: &str| {
            env.iter()
                .find(|e| e["name"] == Value::String(k.into()))
                .map(|e| s(&e["value"]).to_string())
        };
        assert_eq!(get("address").as_deref(), Some("172.20.6.110"));
        let iface = if n.name == "topgun-c2" {
            "eth1"
        } else {
            "ens18"
        };
        assert_eq!(get("vip_interface").as_deref(), Some(iface), "{}", n.name);
        assert_eq!(get("svc_enable").as_deref(), Some("true"));
    }
    assert_eq!(cps, 3);
    let ds = docs(&r, &first, "/etc/kubernetes/kubeadm/init.yaml");
    let cc = kind(&ds, "ClusterConfiguration");
    assert_eq!(s(&cc["controlPlaneEndpoint"]), "172.20.6.110:6443");
    let sans: Vec<&str> = cc["apiServer"]["certSANs"]
        .as_sequence()
        .expect("sans")
        .iter()
        .map(s)
        .collect();
    assert!(
        sans.contains(&"172.20.6.110") && sans.contains(&"127.0.0.1"),
        "{sans:?}"
    );
}

#[test]
fn oidc_is_flags_or_structured_never_both_with_one_prefix_default() {
    let flags = fixture("oidc-flags-audit");
    let structured = fixture_text("oidc-flags-audit", |t| {
        t.replace(
            "      caFile: sso-ca.crt\n",
            "      caFile: sso-ca.crt\n      mode: structured\n",
        )
    });
    for (c, is_structured) in [(&flags, false), (&structured, true)] {
        let r = rendered(c);
        let first = c.first_control_plane().name.clone();
        let ds = docs(&r, &first, "/etc/kubernetes/kubeadm/init.yaml");
        let args = args_of(kind(&ds, "ClusterConfiguration"));
        let has_oidc = args.iter().any(|(k, _)| k.starts_with("oidc-"));
        let has_authn = args.iter().any(|(k, _)| k == "authentication-config");
        assert!(has_oidc != has_authn, "exactly one mode expected: {args:?}");
        assert_eq!(has_authn, is_structured);
        let authn = r.node_file(&first, "/etc/kubernetes/authn/authentication-config.yaml");
        assert_eq!(authn.is_some(), is_structured);
        assert_eq!(
            r.node_file(&first, "/etc/kubernetes/oidc/ca.crt").is_some(),
            !is_structured
        );
        let prefix = if is_structured {
            let d: Value = serde_yaml::from_str(&authn.expect("authn").as_text()).expect("yaml");
            assert_eq!(
                s(&d["apiVersion"]),
                "apiserver.config.k8s.io/v1beta1",
                "1.33 uses v1beta1"
            );
            let ca = s(&d["jwt"][0]["issuer"]["certificateAuthority"]);
            assert!(ca.contains("BEGIN CERTIFICATE"), "CA inline");
            assert_eq!(
                s(&d["jwt"][0]["claimMappings"]["groups"]["prefix"]),
                "oidc:"
            );
            s(&d["jwt"][0]["claimMappings"]["username"]["prefix"]).to_string()
        } else {
            args.iter()
                .find(|(k, _)| k == "oidc-username-prefix")
                .map(|(_, v)| v.clone())
                .expect("prefix flag")
        };
        assert_eq!(prefix, "https://sso.example.com/realms/k8s#");
    }
    // v1 from 1.34.
    let v134 = fixture_text("oidc-structured", |t| t.replace("v1.32.5", "v1.34.1"));
    let r = rendered(&v134);
    let d: Value = serde_yaml::from_str(
        &r.node_file("c1", "/etc/kubernetes/authn/authentication-config.yaml")
            .expect("authn")
            .as_text(),
    )
    .expect("yaml");
    assert_eq!(s(&d["apiVersion"]), "apiserver.config.k8s.io/v1");
    // email claim: no prefix in both modes ("-" is the legacy flag's "none").
    assert_eq!(s(&d["jwt"][0]["claimMappings"]["username"]["prefix"]), "");
    let flags_email = fixture_text("oidc-structured", |t| {
        t.replace("      mode: structured\n", "")
    });
    let r = rendered(&flags_email);
    let args = args_of(kind(
        &docs(&r, "c1", "/etc/kubernetes/kubeadm/init.yaml"),
        "ClusterConfiguration",
    ));
    assert!(
        args.contains(&("oidc-username-prefix".to_string(), "-".to_string())),
        "{args:?}"
    );
}

#[test]
fn every_path_an_apiserver_flag_names_is_mounted_and_audit_is_complete() {
    for name in ["oidc-flags-audit", "oidc-structured"] {
        let c = fixture(name);
        let r = rendered(&c);
        let first = c.first_control_plane().name.clone();
        let cc = kind(
            &docs(&r, &first, "/etc/kubernetes/kubeadm/init.yaml"),
            "ClusterConfiguration",
        )
        .clone();
        let args = args_of(&cc);
        let vols = cc["apiServer"]["extraVolumes"]
            .as_sequence()
            .expect("volumes")
            .clone();
        for (k, v) in &args {
            if !v.starts_with('/') {
                continue;
            }
            let under = |d: &str| v == d || v.starts_with(&format!("{}/", d.trim_end_matches('/')));
            let covered = vols.iter().any(|m| under(s(&m["mountPath"])))
                || clusterctl_render::apiserver::KUBEADM_MOUNTED_DIRS
                    .iter()
                    .any(|d| under(d));
            assert!(
                covered,
                "{name}: --{k}={v} is not mounted; volumes {vols:?}"
            );
        }
        for flag in [
            "audit-policy-file",
            "audit-log-path",
            "audit-log-maxage",
            "audit-log-maxbackup",
            "audit-log-maxsize",
        ] {
            assert!(
                args.iter().any(|(k, _)| k == flag),
                "{name}: missing --{flag}"
            );
        }
        let log = vols
            .iter()
            .find(|m| s(&m["name"]) == "audit-log")
            .expect("audit-log volume");
        assert_eq!(s(&log["hostPath"]), "/var/log/kubernetes/audit");
        assert!(
            !log["readOnly"].as_bool().unwrap_or(false),
            "log dir must be writable"
        );
        let policy = r
            .node_file(&first, "/etc/kubernetes/audit/policy.yaml")
            .expect("policy file");
        assert!(policy.as_text().contains("audit.k8s.io/v1"));
        // Control planes only.
        for w in c.workers() {
            assert!(r
                .node_file(&w.name, "/etc/kubernetes/audit/policy.yaml")
                .is_none());
        }
        for cp in c.control_planes() {
            assert!(r
                .node_file(&cp.name, "/etc/kubernetes/audit/policy.yaml")
                .is_some());
        }
    }
}

#[test]
fn containerd_schema_follows_the_node_major_version() {
    let c = fixture("oidc-flags-audit");
    let mut facts = Facts::assumed(&c);
    facts.nodes.get_mut("w1").expect("w1").containerd_major = 2;
    let r = render(&c, &facts).expect("renders");
    let pause = images(&c)
        .into_iter()
        .find(|i| i.component == "pause")
        .expect("pause");
    let v2 = r
        .node_file("c1", "/etc/containerd/config.toml")
        .expect("c1")
        .as_text()
        .to_string();
    let v3 = r
        .node_file("w1", "/etc/containerd/config.toml")
        .expect("w1")
        .as_text()
        .to_string();
    assert!(
        v2.contains("version = 2") && v2.contains("io.containerd.grpc.v1.cri"),
        "{v2}"
    );
    assert!(v2.contains(&format!("sandbox_image = \"{}\"", pause.pull_ref())));
    assert!(
        v3.contains("version = 3")
            && v3.contains("io.containerd.cri.v1.images")
            && !v3.contains("grpc.v1.cri"),
        "{v3}"
    );
    assert!(v3.contains(&format!("sandbox = \"{}\"", pause.pull_ref())));
    for t in [&v2, &v3] {
        assert!(t.contains("SystemdCgroup = true"));
        assert!(t.contains("config_path = \"/etc/containerd/certs.d\""));
        assert!(!t.contains("mirrors"));
    }
    let hosts = r
        .node_file("w1", "/etc/containerd/certs.d/registry.k8s.io/hosts.toml")
        .expect("hosts.toml")
        .as_text()
        .to_string();
    assert!(hosts.contains("server = \"https://registry.k8s.io\""));
    assert!(
        hosts.contains("[host.\"https://harbor.example.com/v2/library\"]"),
        "{hosts}"
    );
    assert!(hosts.contains("ca = \"/etc/containerd/certs.d/harbor.example.com/ca.crt\""));
    assert!(hosts.contains("override_path = true"));
    let dh = r
        .node_file("w1", "/etc/containerd/certs.d/docker.io/hosts.toml")
        .expect("docker.io")
        .as_text()
        .to_string();
    assert!(dh.contains("server = \"https://registry-1.docker.io\""));
    assert!(r
        .node_file("w1", "/etc/containerd/certs.d/harbor.example.com/ca.crt")
        .is_some());
    // cgroupfs → SystemdCgroup = false and kubelet cgroupfs.
    let cg = fixture("bgp-builtin");
    let r = rendered(&cg);
    assert!(r
        .node_file("gpu1", "/etc/containerd/config.toml")
        .expect("cfg")
        .as_text()
        .contains("SystemdCgroup = false"));
    let kc = kind(
        &docs(&r, "cp1", "/etc/kubernetes/kubeadm/init.yaml"),
        "KubeletConfiguration",
    )
    .clone();
    assert_eq!(s(&kc["cgroupDriver"]), "cgroupfs");
}

#[test]
fn every_cni_pool_is_pod_subnet() {
    let mut checked = 0;
    for name in common::fixture_names() {
        let c = fixture(&name);
        let pod = c.pod_subnet().to_string();
        let r = rendered(&c);
        if let Some(f) = r.cluster_file("cni/calico-installation.yaml") {
            let v: Value = serde_yaml::from_str(&f.as_text()).expect("yaml");
            let pools = v["spec"]["calicoNetwork"]["ipPools"]
                .as_sequence()
                .expect("pools");
            assert_eq!(pools.len(), 1);
            assert_eq!(s(&pools[0]["cidr"]), pod, "{name}");
            checked += 1;
        }
        if let Some(f) = r.cluster_file("cni/cilium-values.yaml") {
            let v: Value = serde_yaml::from_str(&f.as_text()).expect("yaml");
            assert_eq!(s(&v["ipv4NativeRoutingCIDR"]), pod, "{name}");
            assert_eq!(s(&v["ipam"]["mode"]), "kubernetes");
            assert_eq!(s(&v["k8sServiceHost"]), c.endpoint().host);
            assert_eq!(
                v["k8sServicePort"].as_u64(),
                Some(u64::from(c.endpoint().port))
            );
            assert_eq!(v["kubeProxyReplacement"].as_bool(), Some(true));
            assert_eq!(
                v["bpf"]["masquerade"].as_bool(),
                Some(true),
                "pass-through values kept"
            );
            checked += 1;
        }
        if let Some(f) = r.cluster_file("cni/flannel-net-conf.json") {
            let v: serde_json::Value = serde_json::from_str(&f.as_text()).expect("json");
            assert_eq!(v["Network"].as_str(), Some(pod.as_str()), "{name}");
            checked += 1;
        }
        for n in c.nodes() {
            if let Some(f) = r.node_file(&n.name, "/etc/clusterctl/cni/agent.json") {
                let v: clusterctl_render::cni::builtin::AgentConfig =
                    serde_json::from_str(&f.as_text()).expect("agent.json");
                assert_eq!(v.pod_subnet.map(|p| p.to_string()), Some(pod.clone()));
                // On disk the CIDR stays a JSON string.
                let raw: serde_json::Value = serde_json::from_str(&f.as_text()).expect("json");
                assert_eq!(raw["podSubnet"].as_str(), Some(pod.as_str()));
                assert_eq!(v.node_name, n.name);
                checked += 1;
            }
        }
        if let Some(first) = r.node_file(
            &c.first_control_plane().name,
            "/etc/kubernetes/kubeadm/init.yaml",
        ) {
            let ds: Vec<Value> = serde_yaml::Deserializer::from_str(&first.as_text())
                .map(|d| serde::Deserialize::deserialize(d).expect("yaml"))
                .collect();
            assert_eq!(
                s(&kind(&ds, "ClusterConfiguration")["networking"]["podSubnet"]),
                pod
            );
            if let Some(kp) = ds
                .iter()
                .find(|d| d["kind"] == Value::String("KubeProxyConfiguration".into()))
            {
                assert_eq!(s(&kp["clusterCIDR"]), pod);
            }
        }
    }
    assert!(checked >= 4, "too few CNI files checked: {checked}");
}

#[test]
fn join_secrets_are_placeholders_and_no_secret_is_rendered() {
    // The env vars the file names hold values render must never read.
    std::env::set_var("HARBOR_USER", "user-value-never-rendered");
    std::env::set_var("HARBOR_PASSWORD", "password-value-never-rendered");
    let c = fixture("ha-crio-mirror");
    let r = rendered(&c);
    for (node, f) in r.all() {
        let t = f.as_text();
        assert!(!t.contains("never-rendered"), "{node:?} {}", f.path);
        if f.purpose == Purpose::KubeadmJoin {
            assert_eq!(f.mode, 0o600);
            assert!(t.contains(placeholders::JOIN_TOKEN) && t.contains(placeholders::CA_CERT_HASH));
        }
    }
    let cp2 = docs(&r, "topgun-c2", "/etc/kubernetes/kubeadm/join.yaml");
    assert_eq!(
        s(&cp2[0]["controlPlane"]["certificateKey"]),
        placeholders::CERTIFICATE_KEY
    );
    assert_eq!(
        s(&cp2[0]["controlPlane"]["localAPIEndpoint"]["advertiseAddress"]),
        "172.20.6.112"
    );
    assert_eq!(
        s(&cp2[0]["discovery"]["bootstrapToken"]["apiServerEndpoint"]),
        "172.20.6.110:6443"
    );
    let w1 = docs(&r, "topgun-w1", "/etc/kubernetes/kubeadm/join.yaml");
    assert!(w1[0].get("controlPlane").is_none());
    // criSocket explicit everywhere.
    for n in c.nodes() {
        let path = if n.name == "topgun-c1" {
            "/etc/kubernetes/kubeadm/init.yaml"
        } else {
            "/etc/kubernetes/kubeadm/join.yaml"
        };
        let d = &docs(&r, &n.name, path)[0];
        assert_eq!(
            s(&d["nodeRegistration"]["criSocket"]),
            "unix:///var/run/crio/crio.sock"
        );
        assert_eq!(s(&d["nodeRegistration"]["name"]), n.name);
    }
}

#[test]
fn kind_config_for_the_docker_provider() {
    let c = fixture("docker-calico");
    let r = rendered(&c);
    let k: Value =
        serde_yaml::from_str(&r.cluster_file("kind-config.yaml").expect("kind").as_text())
            .expect("yaml");
    assert_eq!(s(&k["apiVersion"]), "kind.x-k8s.io/v1alpha4");
    assert_eq!(k["networking"]["disableDefaultCNI"].as_bool(), Some(true));
    assert_eq!(s(&k["networking"]["podSubnet"]), "192.168.0.0/16");
    assert_eq!(s(&k["networking"]["kubeProxyMode"]), "iptables");
    assert_eq!(s(&k["nodes"][1]["labels"]["disktype"]), "ssd");
    assert_eq!(
        k["nodes"][0]["extraPortMappings"][0]["hostPort"].as_u64(),
        Some(8080)
    );
    assert!(s(&k["containerdConfigPatches"][0]).contains("config_path"));
    // kindnet keeps kind's default CNI.
    let kn = fixture_text("docker-calico", |t| {
        t.replace("plugin: calico", "plugin: kindnet")
    });
    let r = rendered(&kn);
    let k: Value =
        serde_yaml::from_str(&r.cluster_file("kind-config.yaml").expect("kind").as_text())
            .expect("yaml");
    assert_eq!(k["networking"]["disableDefaultCNI"].as_bool(), Some(false));
    assert!(r.cluster_file("cni/calico-installation.yaml").is_none());
    // ssh provider: no kind config.
    assert!(rendered(&fixture("oidc-structured"))
        .cluster_file("kind-config.yaml")
        .is_none());
}

#[test]
fn fail_cgroup_v1_follows_file_then_facts() {
    let c = fixture("bgp-builtin"); // 1.36, hostCgroupVersion v1
    let r = rendered(&c);
    let kc = kind(
        &docs(&r, "cp1", "/etc/kubernetes/kubeadm/init.yaml"),
        "KubeletConfiguration",
    )
    .clone();
    assert_eq!(kc["failCgroupV1"].as_bool(), Some(false));
    let v2 = fixture_text("bgp-builtin", |t| {
        t.replace("    hostCgroupVersion: v1\n", "")
    });
    let r = rendered(&v2);
    let kc = kind(
        &docs(&r, "cp1", "/etc/kubernetes/kubeadm/init.yaml"),
        "KubeletConfiguration",
    )
    .clone();
    assert!(kc.get("failCgroupV1").is_none(), "{kc:?}");
}

#[test]
fn builtin_cni_files_and_rbac() {
    let c = fixture("bgp-builtin");
    let r = rendered(&c);
    for n in c.nodes() {
        for p in [
            "/etc/clusterctl/cni/agent.json",
            "/etc/clusterctl/cni/10-clusterctl.conflist",
            "/etc/systemd/system/clusterctl-cni-agent.service",
        ] {
            assert!(r.node_file(&n.name, p).is_some(), "{} lacks {p}", n.name);
        }
    }
    let rbac = r
        .cluster_file("cni/clusterctl-cni-rbac.yaml")
        .expect("rbac")
        .as_text()
        .to_string();
    assert!(
        rbac.contains("- nodes")
            && rbac.contains("- watch")
            && rbac.contains("kind: ClusterRoleBinding")
    );
    let mods = r
        .node_file("cp1", "/etc/modules-load.d/kubernetes.conf")
        .expect("mods")
        .as_text()
        .to_string();
    assert!(mods.contains("br_netfilter") && mods.contains("vxlan"));
    // Taints reach nodeRegistration; BGP env reaches kube-vip.
    let j = docs(&r, "gpu1", "/etc/kubernetes/kubeadm/join.yaml");
    assert_eq!(
        s(&j[0]["nodeRegistration"]["taints"][0]["key"]),
        "nvidia.com/gpu"
    );
    let kv = r
        .node_file("cp1", "/etc/kubernetes/manifests/kube-vip.yaml")
        .expect("kube-vip")
        .as_text()
        .to_string();
    assert!(
        kv.contains("bgp_enable") && kv.contains("10.10.0.1:65000::false"),
        "{kv}"
    );
}

/// `nodeEnvironment: unprivileged-container` renders, on every containerd major: containerd's
/// `restrict_oom_score_adj` in the CRI (runtime) plugin table and `privileged_without_host_devices` on
/// the runc runtime; kube-proxy `conntrack.maxPerCore: 0`; the `/dev/kmsg` tmpfiles entry and the node
/// environment unit and script (`/proc/sys/net` writable, kubelet sysctls) on every node; `nodeEnvironment: host` (the default) renders none of it.
/// `kubelet.resolvConf` lands in the KubeletConfiguration.
#[test]
fn unprivileged_container_settings_and_resolv_conf() {
    let c = fixture("unprivileged-container");
    let mut facts = Facts::assumed(&c);
    for major in [1u32, 2] {
        for nf in facts.nodes.values_mut() {
            nf.containerd_major = major;
        }
        let r = render(&c, &facts).expect("renders");
        let cfg: toml::Value = toml::from_str(
            &r.node_file("w1", "/etc/containerd/config.toml")
                .expect("config.toml")
                .as_text(),
        )
        .expect("toml");
        let (cri, runc) = if major == 1 {
            let cri = &cfg["plugins"]["io.containerd.grpc.v1.cri"];
            (cri, &cri["containerd"]["runtimes"]["runc"])
        } else {
            let rt = &cfg["plugins"]["io.containerd.cri.v1.runtime"];
            (rt, &rt["containerd"]["runtimes"]["runc"])
        };
        assert_eq!(cri["restrict_oom_score_adj"].as_bool(), Some(true), "{cfg}");
        assert_eq!(
            runc["privileged_without_host_devices"].as_bool(),
            Some(true),
            "{cfg}"
        );
        for node in ["cp1", "w1"] {
            for (path, purpose) in [
                (
                    clusterctl_render::host::KMSG_TMPFILES_PATH,
                    Purpose::NodeEnvironment,
                ),
                (
                    clusterctl_render::host::NODE_ENV_UNIT,
                    Purpose::NodeEnvironment,
                ),
                (
                    clusterctl_render::host::NODE_ENV_SCRIPT,
                    Purpose::NodeEnvironment,
                ),
            ] {
                let f = r
                    .node_file(node, path)
                    .unwrap_or_else(|| panic!("{node} has no {path}"));
                assert_eq!(f.purpose, purpose);
            }
            let script = r
                .node_file(node, clusterctl_render::host::NODE_ENV_SCRIPT)
                .expect("script");
            assert_eq!(script.mode, 0o755);
            let text = script.as_text();
            assert!(
                text.contains("vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1")
                    && text.contains("mount -o remount,bind,rw /proc/sys/net"),
                "{text}"
            );
            let unit = r
                .node_file(node, clusterctl_render::host::NODE_ENV_UNIT)
                .expect("unit")
                .as_text()
                .into_owned();
            assert!(
                unit.contains("Before=containerd.service kubelet.service")
                    && unit.contains(&format!(
                        "ExecStart={}",
                        clusterctl_render::host::NODE_ENV_SCRIPT
                    )),
                "{unit}"
            );
        }
    }
    let r = rendered(&c);
    let init = docs(&r, "cp1", "/etc/kubernetes/kubeadm/init.yaml");
    assert_eq!(
        kind(&init, "KubeProxyConfiguration")["conntrack"]["maxPerCore"].as_i64(),
        Some(0)
    );
    assert_eq!(
        s(&kind(&init, "KubeletConfiguration")["resolvConf"]),
        "/etc/kubernetes/resolv.conf"
    );

    let host = fixture_text("unprivileged-container", |t| {
        t.replace("  nodeEnvironment: unprivileged-container\n", "")
            .replace(
                "  kubelet:\n    resolvConf: /etc/kubernetes/resolv.conf\n",
                "",
            )
    });
    let r = rendered(&host);
    let text = r
        .node_file("w1", "/etc/containerd/config.toml")
        .expect("config.toml")
        .as_text()
        .into_owned();
    assert!(
        !text.contains("restrict_oom_score_adj")
            && !text.contains("privileged_without_host_devices"),
        "{text}"
    );
    assert!(r
        .per_node
        .values()
        .flatten()
        .all(|f| f.purpose != Purpose::NodeEnvironment));
    let init = docs(&r, "cp1", "/etc/kubernetes/kubeadm/init.yaml");
    assert!(kind(&init, "KubeProxyConfiguration")
        .get("conntrack")
        .is_none());
    assert!(kind(&init, "KubeletConfiguration")
        .get("resolvConf")
        .is_none());
}

#[test]
fn kubeadm_timeouts_from_the_file_in_every_configuration() {
    // Issue 15 item 4: the file's timeouts, kubeadm's defaults for the rest, in every v1beta4
    // configuration kubeadm reads (init, join of a control plane and of a worker, reset, upgrade).
    let c = fixture("docker-kind-settings");
    let r = rendered(&c);
    let want: Vec<(&str, &str)> = vec![
        ("controlPlaneComponentHealthCheck", "10m0s"),
        ("kubeletHealthCheck", "5m0s"),
        ("kubernetesAPICall", "1m0s"),
        ("etcdAPICall", "2m0s"),
        ("tlsBootstrap", "6m0s"),
        ("discovery", "7m0s"),
        ("upgradeManifests", "5m0s"),
    ];
    let timeouts_of = |d: &Value| -> Vec<(String, String)> {
        d["timeouts"]
            .as_mapping()
            .unwrap_or_else(|| panic!("no timeouts in {d:?}"))
            .iter()
            .map(|(k, v)| (s(k).to_string(), s(v).to_string()))
            .collect()
    };
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for (node, path, k) in [
        (
            "cp1",
            "/etc/kubernetes/kubeadm/init.yaml",
            "InitConfiguration",
        ),
        (
            "cp2",
            "/etc/kubernetes/kubeadm/join.yaml",
            "JoinConfiguration",
        ),
        (
            "w1",
            "/etc/kubernetes/kubeadm/join.yaml",
            "JoinConfiguration",
        ),
        (
            "w1",
            "/etc/kubernetes/kubeadm/reset.yaml",
            "ResetConfiguration",
        ),
        (
            "cp1",
            "/etc/kubernetes/kubeadm/upgrade.yaml",
            "UpgradeConfiguration",
        ),
    ] {
        assert_eq!(
            timeouts_of(kind(&docs(&r, node, path), k)),
            want,
            "{node} {path}"
        );
    }
    // Without timeouts in the file: kubeadm's defaults.
    let plain = rendered(&fixture("docker-calico"));
    let first = fixture("docker-calico").first_control_plane().name.clone();
    let d = docs(&plain, &first, "/etc/kubernetes/kubeadm/init.yaml");
    let t = timeouts_of(kind(&d, "InitConfiguration"));
    assert_eq!(
        t.iter().map(|(_, v)| v.as_str()).collect::<Vec<_>>(),
        ["4m0s", "4m0s", "1m0s", "2m0s", "5m0s", "5m0s", "5m0s"]
    );
}

#[test]
fn ignored_preflight_checks_in_every_kubeadm_configuration_that_runs_preflight() {
    // Issue 11 (upgrade for real on cgroup v1): kubeadm.ignorePreflightErrors reaches the
    // nodeRegistration of init and join and the apply, node and plan of the UpgradeConfiguration.
    let c = fixture("docker-calico");
    let r = rendered(&c);
    let cp = c.first_control_plane().name.clone();
    let want = Value::Sequence(vec![Value::String("SystemVerification".into())]);
    let init = docs(&r, &cp, "/etc/kubernetes/kubeadm/init.yaml");
    assert_eq!(
        kind(&init, "InitConfiguration")["nodeRegistration"]["ignorePreflightErrors"],
        want
    );
    let join = docs(&r, "worker", "/etc/kubernetes/kubeadm/join.yaml");
    assert_eq!(
        kind(&join, "JoinConfiguration")["nodeRegistration"]["ignorePreflightErrors"],
        want
    );
    let up = docs(&r, &cp, "/etc/kubernetes/kubeadm/upgrade.yaml");
    let up = kind(&up, "UpgradeConfiguration");
    for part in ["apply", "node", "plan"] {
        assert_eq!(up[part]["ignorePreflightErrors"], want, "{part}");
    }
    // Without the setting: no such field anywhere.
    let plain = fixture_text("docker-calico", |t| {
        let start = t.find("  kubeadm:\n").expect("kubeadm block");
        let end = t[start..].find("  nodes:").expect("nodes") + start;
        format!("{}{}", &t[..start], &t[end..])
    });
    let r = rendered(&plain);
    for (node, path) in [
        (cp.as_str(), "/etc/kubernetes/kubeadm/init.yaml"),
        ("worker", "/etc/kubernetes/kubeadm/join.yaml"),
        (cp.as_str(), "/etc/kubernetes/kubeadm/upgrade.yaml"),
    ] {
        let text = r.node_file(node, path).expect(path).as_text();
        assert!(!text.contains("ignorePreflightErrors"), "{path}: {text}");
    }
}

#[test]
fn audit_to_stdout_has_no_log_mount_and_no_rotation() {
    // Issue 15 item 8: `logPath: "-"` is the API server's standard output: no directory to mount,
    // nothing to rotate; the policy is still mounted.
    let c = fixture("docker-kind-settings");
    let r = rendered(&c);
    {
        let first = c.first_control_plane().name.clone();
        let cc = kind(
            &docs(&r, &first, "/etc/kubernetes/kubeadm/init.yaml"),
            "ClusterConfiguration",
        )
        .clone();
        let args = args_of(&cc);
        assert!(
            args.contains(&("audit-log-path".to_string(), "-".to_string())),
            "{args:?}"
        );
        assert!(
            args.iter().any(|(k, _)| k == "audit-policy-file"),
            "{args:?}"
        );
        for flag in [
            "audit-log-maxage",
            "audit-log-maxbackup",
            "audit-log-maxsize",
        ] {
            assert!(!args.iter().any(|(k, _)| k == flag), "--{flag}: {args:?}");
        }
        let vols = cc["apiServer"]["extraVolumes"]
            .as_sequence()
            .expect("volumes");
        let names: Vec<&str> = vols.iter().map(|m| s(&m["name"])).collect();
        assert!(names.contains(&"audit-policy"), "{names:?}");
        assert!(!names.contains(&"audit-log"), "{names:?}");
        assert!(vols.iter().all(|m| s(&m["hostPath"]) != "-"), "{vols:?}");
    }
    // A file path keeps its mount and rotation (the other fixture).
    let f = fixture("oidc-flags-audit");
    let cc = kind(
        &docs(
            &rendered(&f),
            &f.first_control_plane().name,
            "/etc/kubernetes/kubeadm/init.yaml",
        ),
        "ClusterConfiguration",
    )
    .clone();
    assert!(args_of(&cc).iter().any(|(k, _)| k == "audit-log-maxage"));
}

#[test]
fn crictl_config_names_the_runtime_kubeadm_uses_and_real_crictl_reads_it() {
    // Issue 15 item 7: every node gets /etc/crictl.yaml naming the file's runtime, the same socket as
    // kubeadm's criSocket; the real crictl (cri-tools, built from its Go module) loads it — it
    // refuses any key it does not know — and reads back that endpoint.
    let Some(bins) = clusterctl_testbed::k8sbin::require_programs("v1.34.4", &["crictl"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut seen = std::collections::BTreeSet::new();
    for (label, loaded) in common::inputs() {
        let c = common::valid(&label, &loaded);
        let r = rendered(&c);
        for n in c.nodes() {
            let f = r
                .node_file(&n.name, "/etc/crictl.yaml")
                .unwrap_or_else(|| panic!("{label}: {} has no /etc/crictl.yaml", n.name));
            assert_eq!(f.mode, 0o644);
            let kubeadm_path = if n.name == c.first_control_plane().name {
                "/etc/kubernetes/kubeadm/init.yaml"
            } else {
                "/etc/kubernetes/kubeadm/join.yaml"
            };
            let ds = docs(&r, &n.name, kubeadm_path);
            let k = if kubeadm_path.ends_with("init.yaml") {
                "InitConfiguration"
            } else {
                "JoinConfiguration"
            };
            let socket = s(&kind(&ds, k)["nodeRegistration"]["criSocket"]).to_string();
            let text = f.as_text().into_owned();
            if !seen.insert(text.clone()) {
                continue;
            }
            let path = dir.path().join(format!("crictl-{}.yaml", seen.len()));
            std::fs::write(&path, &text).expect("write");
            for key in ["runtime-endpoint", "image-endpoint"] {
                let out = std::process::Command::new(bins.path("crictl"))
                    .arg("--config")
                    .arg(&path)
                    .args(["config", "--get", key])
                    .output()
                    .expect("crictl runs");
                assert!(
                    out.status.success(),
                    "{label}: crictl refused {text}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                assert_eq!(
                    String::from_utf8_lossy(&out.stdout).trim(),
                    socket,
                    "{label} {key}"
                );
            }
        }
    }
    // Both runtimes' sockets were seen (containerd and CRI-O inputs).
    assert!(seen.len() >= 2, "{seen:?}");
}

/// A cluster without workers registers its control plane without any taint (`taints: []`, as kind
/// does), else CoreDNS and every pod stay Pending on "untolerated taint"; once the file has a worker,
/// kubeadm's default (`null`: the control-plane NoSchedule taint) comes back, and a control plane's own
/// taints are always rendered as given.
#[test]
fn a_control_plane_without_workers_is_not_tainted() {
    let solo = fixture("single-node");
    let init = docs(&rendered(&solo), "cp1", "/etc/kubernetes/kubeadm/init.yaml");
    let reg = &kind(&init, "InitConfiguration")["nodeRegistration"];
    assert_eq!(reg["taints"], Value::Sequence(vec![]), "{reg:?}");

    let with_worker = fixture_text("single-node", |t| {
        format!("{t}    - {{name: w1, role: worker, address: 172.30.0.21/24}}\n")
    });
    let init = docs(
        &rendered(&with_worker),
        "cp1",
        "/etc/kubernetes/kubeadm/init.yaml",
    );
    let reg = &kind(&init, "InitConfiguration")["nodeRegistration"];
    assert_eq!(reg["taints"], Value::Null, "{reg:?}");

    let own = fixture_text("single-node", |t| {
        t.replace(
            "role: control-plane,",
            "role: control-plane, taints: [{key: dedicated, value: infra, effect: NoSchedule}],",
        )
    });
    let init = docs(&rendered(&own), "cp1", "/etc/kubernetes/kubeadm/init.yaml");
    let reg = &kind(&init, "InitConfiguration")["nodeRegistration"];
    assert_eq!(reg["taints"][0]["key"], Value::String("dedicated".into()));
}

/// Walkthrough finding: `taints: []` and no `taints` were the same thing. Now `taints: []` on a control
/// plane of a cluster with workers means "no taint at all" (rendered `taints: []`, which kubeadm
/// registers as none), while leaving `taints` out keeps the role's default (`null`: kubeadm's
/// control-plane NoSchedule taint); on a worker `taints: []` renders as an explicit empty list too.
#[test]
fn explicit_empty_taints_differ_from_unset() {
    let with_worker = |cp_extra: &str, w_extra: &str| {
        fixture_text("single-node", |t| {
            format!(
                "{}    - {{name: w1, role: worker, address: 172.30.0.21/24{w_extra}}}\n",
                t.replace(
                    "role: control-plane,",
                    &format!("role: control-plane,{cp_extra}")
                )
            )
        })
    };
    let reg_of = |c: &ValidCluster, node: &str, file: &str, kind_name: &str| {
        let d = docs(&rendered(c), node, file);
        kind(&d, kind_name)["nodeRegistration"]["taints"].clone()
    };
    let unset = with_worker("", "");
    assert_eq!(
        reg_of(
            &unset,
            "cp1",
            "/etc/kubernetes/kubeadm/init.yaml",
            "InitConfiguration"
        ),
        Value::Null
    );
    let empty = with_worker(" taints: [],", ", taints: []");
    assert_eq!(
        reg_of(
            &empty,
            "cp1",
            "/etc/kubernetes/kubeadm/init.yaml",
            "InitConfiguration"
        ),
        Value::Sequence(vec![])
    );
    assert_eq!(
        reg_of(
            &empty,
            "w1",
            "/etc/kubernetes/kubeadm/join.yaml",
            "JoinConfiguration"
        ),
        Value::Sequence(vec![])
    );
}

/// The dotted paths of the leaves of `v` (a sequence is a leaf).
fn leaves(v: &Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        Value::Mapping(m) if !m.is_empty() => {
            for (k, child) in m {
                let k = k.as_str().expect("string keys");
                let p = if prefix.is_empty() {
                    k.to_string()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(child, &p, out);
            }
        }
        _ => out.push(prefix.to_string()),
    }
}

/// Breaker finding W5: `cni.values` keys clusterctl sets itself were overwritten silently. Every key
/// the renderer sets in a third-party CNI's configuration (with an MTU and a mirror, so that the
/// conditional ones are set too) is in spec's list (`clusterctl_spec::cni_values`): refused by
/// validation, or a default that the user's value overrides (which the last check shows).
#[test]
fn every_cni_key_the_renderer_sets_is_owned_in_spec() {
    use clusterctl_spec::cni_values::{defaulted_keys, owned_keys};
    let cilium = |t: &str| t.replacen("plugin: cilium", "plugin: cilium\n      mtu: 1400", 1);
    let flannel = |t: &str| {
        t.replacen("    kubeProxy: disabled\n", "", 1)
            .replacen("      kubeProxyReplacement: true\n", "", 1)
            .replacen("plugin: cilium", "plugin: flannel\n      mtu: 1400", 1)
    };
    let calico = |t: &str| t.replacen("plugin: calico", "plugin: calico\n      mtu: 1400", 1);
    type Edit<'a> = &'a dyn Fn(&str) -> String;
    let cases: [(&str, Edit<'_>, &str); 3] = [
        ("ha-crio-mirror", &cilium, "cni/cilium-values.yaml"),
        ("ha-crio-mirror", &flannel, "cni/flannel-net-conf.json"),
        ("oidc-flags-audit", &calico, "cni/calico-installation.yaml"),
    ];
    for (name, edit, file) in cases {
        let c = fixture_text(name, edit);
        let cni = &c.spec().networking.cni;
        let r = rendered(&c);
        let text = r
            .cluster_file(file)
            .unwrap_or_else(|| panic!("{name}: no {file}"))
            .as_text();
        let doc: Value = serde_yaml::from_str(&text).expect("yaml or json");
        // Calico's values are the Installation's spec.
        let values = if file.contains("calico") {
            doc["spec"].clone()
        } else {
            doc
        };
        let mut set = Vec::new();
        leaves(&values, "", &mut set);
        let mut given = Vec::new();
        leaves(&Value::Mapping(cni.values.clone()), "", &mut given);
        let owned = owned_keys(cni.plugin);
        let defaulted = defaulted_keys(cni.plugin);
        let mut unlisted = Vec::new();
        for leaf in set.iter().filter(|l| !given.contains(l)) {
            let segs: Vec<&str> = leaf.split('.').collect();
            let listed = owned.iter().any(|o| {
                if o.anywhere {
                    segs.contains(&o.path)
                } else {
                    leaf == o.path || leaf.starts_with(&format!("{}.", o.path))
                }
            }) || defaulted.contains(&leaf.as_str());
            if !listed {
                unlisted.push(leaf.clone());
            }
        }
        assert!(
            unlisted.is_empty(),
            "{name} ({}): the renderer sets {unlisted:?}, which clusterctl_spec::cni_values does not list",
            cni.plugin.name()
        );
        assert!(set.len() > given.len(), "{name}: nothing set?");
    }
    // A defaulted key is the user's when given.
    let c = fixture_text("ha-crio-mirror", |t| {
        flannel(t).replacen(
            "        bpf:\n          masquerade: true\n",
            "        Backend: {Type: host-gw}\n",
            1,
        )
    });
    let r = rendered(&c);
    let v: serde_json::Value = serde_json::from_str(
        &r.cluster_file("cni/flannel-net-conf.json")
            .expect("net-conf")
            .as_text(),
    )
    .expect("json");
    assert_eq!(v["Backend"]["Type"], "host-gw", "{v}");
}
