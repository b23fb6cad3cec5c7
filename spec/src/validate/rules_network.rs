//! Rules on networking: podSubnet and serviceSubnet parse, are network addresses of one family and do not
//! overlap each other, the node addresses, their subnets or the VIP; podSubnet has room for one node CIDR
//! per node; serviceSubnet is not larger than the apiserver allows; kube-proxy may be disabled only with a
//! CNI that replaces it; `kindnet` only with the docker provider; the CNI pool is never typed twice.

use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

use super::Ctx;
use crate::diag::Diagnostic;
use crate::model::{ClusterFile, CniPlugin, KubeProxyMode, Networking};
use crate::syntax;
use crate::valid::ValidNode;

/// Parsed networking facts.
pub(crate) struct Net {
    pub(crate) pod_subnet: IpNet,
    pub(crate) service_subnet: IpNet,
    pub(crate) node_cidr_mask_size: u8,
}

/// Parses a CIDR that must be a network address. Pushes an error at `path` otherwise.
pub(crate) fn cidr_at(ctx: &mut Ctx<'_>, text: &str, path: &str, what: &str) -> Option<IpNet> {
    let net = match IpNet::from_str(text.trim()) {
        Ok(n) => n,
        Err(_) => {
            let help = if IpAddr::from_str(text.trim()).is_ok() {
                format!("add the prefix length, e.g. `{}/16`", text.trim())
            } else {
                "write a CIDR such as `10.244.0.0/16` or `fd00:10:244::/56`".to_string()
            };
            ctx.push(
                Diagnostic::error("spec::cidr", format!("{what} {text:?} is not a CIDR"))
                    .help(help)
                    .at(path),
            );
            return None;
        }
    };
    if net.trunc() != net {
        ctx.push(
            Diagnostic::error("spec::cidr", format!("{what} {net} has host bits set"))
                .help(format!("use the network address: `{}`", net.trunc()))
                .at(path),
        );
        return None;
    }
    Some(net)
}

pub(crate) fn check(ctx: &mut Ctx<'_>, file: &ClusterFile) -> Option<Net> {
    let n = &file.spec.networking;
    let pod = cidr_at(ctx, &n.pod_subnet, "spec.networking.podSubnet", "podSubnet");
    let svc = cidr_at(
        ctx,
        &n.service_subnet,
        "spec.networking.serviceSubnet",
        "serviceSubnet",
    );
    if let Err(why) = syntax::dns1123_subdomain(&n.dns_domain) {
        ctx.push(
            Diagnostic::error(
                "spec::dns-domain",
                format!("dnsDomain {:?} {why}", n.dns_domain),
            )
            .help("use a DNS subdomain such as `cluster.local`")
            .at("spec.networking.dnsDomain"),
        );
    }
    check_cni(ctx, file);

    let (pod, svc) = (pod?, svc?);
    let pair_ok = subnets_fit(ctx, pod, svc);
    let (mask_ok, mask) = node_cidr_mask(ctx, file, pod);
    (pair_ok && mask_ok).then_some(Net {
        pod_subnet: pod,
        service_subnet: svc,
        node_cidr_mask_size: mask,
    })
}

/// podSubnet and serviceSubnet: one IP family, disjoint, the service range no larger than
/// kube-apiserver allows. Returns whether they fit.
fn subnets_fit(ctx: &mut Ctx<'_>, pod: IpNet, svc: IpNet) -> bool {
    let mut ok = true;
    if matches!(pod, IpNet::V4(_)) != matches!(svc, IpNet::V4(_)) {
        ok = false;
        ctx.push(
            Diagnostic::error(
                "spec::cidr-family",
                format!("serviceSubnet {svc} and podSubnet {pod} are of different IP families"),
            )
            .help("use IPv4 for both or IPv6 for both (dual-stack is not supported yet)")
            .at("spec.networking.serviceSubnet"),
        );
    }
    if pod.contains(&svc.network()) || svc.contains(&pod.network()) {
        ok = false;
        ctx.push(
            Diagnostic::error("spec::cidr-overlap", format!("serviceSubnet {svc} overlaps podSubnet {pod}"))
                .help("choose disjoint ranges, e.g. podSubnet 10.244.0.0/16 and serviceSubnet 10.96.0.0/16")
                .at("spec.networking.serviceSubnet"),
        );
    }
    // kube-apiserver refuses service ranges with more than 2^20 addresses (IPv4 prefix < 12, IPv6 < 108).
    let svc_min = if matches!(svc, IpNet::V4(_)) { 12 } else { 108 };
    if svc.prefix_len() < svc_min {
        ok = false;
        ctx.push(
            Diagnostic::error(
                "spec::service-subnet-size",
                format!(
                    "serviceSubnet {svc} is larger than kube-apiserver allows (at most /{svc_min})"
                ),
            )
            .help(format!(
                "use a prefix of /{svc_min} or longer, e.g. /16 for IPv4"
            ))
            .at("spec.networking.serviceSubnet"),
        );
    }
    ok
}

/// The node CIDR mask (`nodeCidrMaskSize`, default /24 or /64) fits podSubnet, within
/// kube-controller-manager's 16-bit limit, with room for every node (and a warning when a node CIDR
/// holds fewer addresses than maxPods). Returns whether it fits, and the mask.
fn node_cidr_mask(ctx: &mut Ctx<'_>, file: &ClusterFile, pod: IpNet) -> (bool, u8) {
    let n = &file.spec.networking;
    let mut ok = true;
    let max_bits = pod.max_prefix_len();
    let mask = n
        .node_cidr_mask_size
        .unwrap_or(if matches!(pod, IpNet::V4(_)) { 24 } else { 64 });
    let mask_path = if n.node_cidr_mask_size.is_some() {
        "spec.networking.nodeCidrMaskSize"
    } else {
        "spec.networking.podSubnet"
    };
    if mask < pod.prefix_len() || mask > max_bits.saturating_sub(2) {
        ok = false;
        ctx.push(
            Diagnostic::error(
                "spec::node-cidr-mask",
                format!("nodeCidrMaskSize /{mask} does not fit podSubnet {pod}: it must be between /{} and /{}", pod.prefix_len(), max_bits.saturating_sub(2)),
            )
            .help("use a node CIDR mask at least as long as the podSubnet prefix, e.g. 24 for a /16 podSubnet")
            .at(mask_path),
        );
    } else if mask - pod.prefix_len() > 16 {
        ok = false;
        ctx.push(
            Diagnostic::error(
                "spec::node-cidr-mask",
                format!("nodeCidrMaskSize /{mask} is more than 16 bits longer than podSubnet {pod} (kube-controller-manager limit)"),
            )
            .help(format!("use a mask of at most /{}", pod.prefix_len() + 16))
            .at(mask_path),
        );
    } else {
        let room: u128 = 1u128 << (mask - pod.prefix_len());
        let count = file.spec.nodes.len() as u128;
        if room < count {
            ok = false;
            ctx.push(
                Diagnostic::error(
                    "spec::pod-subnet-room",
                    format!("podSubnet {pod} has room for {room} node CIDR{} of /{mask}, but the file has {count} nodes", if room == 1 { "" } else { "s" }),
                )
                .help("use a larger podSubnet (shorter prefix) or a longer nodeCidrMaskSize")
                .at("spec.networking.podSubnet"),
            );
        }
        let per_node: u128 = (1u128 << (max_bits - mask).min(127)).saturating_sub(2);
        let max_pods = u128::from(file.spec.kubelet.max_pods.unwrap_or(110));
        if per_node < max_pods {
            ctx.push(
                Diagnostic::warning(
                    "spec::node-cidr-small",
                    format!("a /{mask} node CIDR holds {per_node} pod addresses, fewer than maxPods {max_pods}"),
                )
                .help("shorten nodeCidrMaskSize or lower kubelet.maxPods")
                .at(mask_path),
            );
        }
    }
    (ok, mask)
}

/// The CNI choice and kube-proxy mode.
fn check_cni(ctx: &mut Ctx<'_>, file: &ClusterFile) {
    let n = &file.spec.networking;
    let cni = &n.cni;
    if cni.plugin == CniPlugin::Kindnet && !file.spec.provider.node_containers() {
        ctx.push(
            Diagnostic::error(
                "spec::cni-kindnet",
                "the kindnet CNI is only available with the docker provider",
            )
            .help("choose `builtin`, `calico`, `cilium` or `flannel` for ssh hosts")
            .at("spec.networking.cni.plugin"),
        );
    }
    kube_proxy_mode(ctx, n);
    cni_mtu_version_values(ctx, n);
    check_cni_sources(ctx, cni);
    check_cni_pinned(ctx, cni);
    cni_owned_values(ctx, n);
}

/// kubeProxyReplacement only with Cilium; kube-proxy disabled only when Cilium replaces it (a warning
/// when it is kept beside a replacement).
fn kube_proxy_mode(ctx: &mut Ctx<'_>, n: &Networking) {
    let cni = &n.cni;
    if cni.kube_proxy_replacement && cni.plugin != CniPlugin::Cilium {
        ctx.push(
            Diagnostic::error(
                "spec::kube-proxy-replacement",
                format!(
                    "kubeProxyReplacement is a Cilium setting, but the CNI is {}",
                    cni.plugin.name()
                ),
            )
            .help("remove kubeProxyReplacement, or use `plugin: cilium`")
            .at("spec.networking.cni.kubeProxyReplacement"),
        );
    }
    if n.kube_proxy == KubeProxyMode::Disabled
        && !(cni.plugin == CniPlugin::Cilium && cni.kube_proxy_replacement)
    {
        let why = match cni.plugin {
            CniPlugin::Cilium => {
                "Cilium without kubeProxyReplacement does not replace it".to_string()
            }
            p => format!("the {} CNI does not replace it", p.name()),
        };
        ctx.push(
            Diagnostic::error("spec::kube-proxy-disabled", format!("kubeProxy is disabled, but {why}: Services would not work"))
                .help("use `cni: {plugin: cilium, kubeProxyReplacement: true}`, or set kubeProxy to iptables, ipvs or nftables")
                .at("spec.networking.kubeProxy"),
        );
    }
    if cni.plugin == CniPlugin::Cilium
        && cni.kube_proxy_replacement
        && n.kube_proxy != KubeProxyMode::Disabled
    {
        ctx.push(
            Diagnostic::warning(
                "spec::kube-proxy-redundant",
                "Cilium replaces kube-proxy, but kube-proxy is still installed",
            )
            .help("set `networking.kubeProxy: disabled`")
            .at("spec.networking.kubeProxy"),
        );
    }
}

/// The CNI's MTU (576–9216, and the underlay's), its version (a version, only for third-party CNIs)
/// and its pass-through values (only for third-party CNIs).
fn cni_mtu_version_values(ctx: &mut Ctx<'_>, n: &Networking) {
    let cni = &n.cni;
    if let Some(mtu) = cni.mtu {
        if !(576..=9216).contains(&mtu) {
            ctx.push(
                Diagnostic::error("spec::mtu", format!("mtu {mtu} is out of range"))
                    .help("use a value between 576 and 9216 (typically the underlay MTU minus 50 for VXLAN)")
                    .at("spec.networking.cni.mtu"),
            );
        }
    }
    check_underlay_mtu(ctx, n);
    if let Some(v) = &cni.version {
        if crate::versions::parse_version(v).is_none() {
            ctx.push(
                Diagnostic::error(
                    "spec::cni-version",
                    format!("CNI version {v:?} is not a version"),
                )
                .help("write MAJOR.MINOR.PATCH, e.g. `v3.29.1`")
                .at("spec.networking.cni.version"),
            );
        }
        if matches!(
            cni.plugin,
            CniPlugin::Builtin | CniPlugin::Kindnet | CniPlugin::None
        ) {
            ctx.push(
                Diagnostic::error(
                    "spec::cni-version",
                    format!("the {} CNI takes no version", cni.plugin.name()),
                )
                .help("remove `version`")
                .at("spec.networking.cni.version"),
            );
        }
    }
    if !cni.values.is_empty()
        && matches!(
            cni.plugin,
            CniPlugin::Builtin | CniPlugin::Kindnet | CniPlugin::None
        )
    {
        ctx.push(
            Diagnostic::error(
                "spec::cni-values",
                format!("the {} CNI takes no pass-through values", cni.plugin.name()),
            )
            .help("remove `values` (they are for calico, cilium and flannel)")
            .at("spec.networking.cni.values"),
        );
    }
}

/// The CNI values set nothing clusterctl sets itself (`crate::cni_values`, the one list).
fn cni_owned_values(ctx: &mut Ctx<'_>, n: &Networking) {
    let cni = &n.cni;
    // Settings clusterctl sets itself (crate::cni_values, the one list): typing them again is how the
    // seed's pool mismatch happened, and a value typed there would be overwritten silently.
    let owned = crate::cni_values::owned_keys(cni.plugin);
    let anywhere: Vec<(&str, &'static str)> = owned
        .iter()
        .filter(|o| o.anywhere)
        .map(|o| (o.path, o.reason))
        .collect();
    let mut found = Vec::new();
    owned_keys(
        &cni.values,
        "spec.networking.cni.values",
        &anywhere,
        0,
        &mut found,
    );
    for (key, path, why) in found {
        ctx.push(
            Diagnostic::error(
                "spec::cni-pool-twice",
                format!("`{key}` may not be set in the CNI values: {why}"),
            )
            .help(format!(
                "remove `{key}`; clusterctl sets it from spec.networking (podSubnet {})",
                n.pod_subnet
            ))
            .at(format!("{path}#key")),
        );
    }
    let mut reported = std::collections::BTreeSet::new();
    for o in owned.iter().filter(|o| !o.anywhere) {
        if let Some((path, replaced)) =
            owned_path(&cni.values, "spec.networking.cni.values", o.path)
        {
            // `image: quay.io/…` stands in the way of image.repository, .tag and .useDigest: once.
            if !reported.insert(path.clone()) {
                continue;
            }
            let what = if replaced {
                format!(
                    "`{}` is set by clusterctl, so this value would be replaced",
                    o.path
                )
            } else {
                format!("`{}` may not be set in the CNI values", o.path)
            };
            ctx.push(
                Diagnostic::error("spec::cni-owned-value", format!("{what}: {}", o.reason))
                    .help(format!(
                        "remove it from networking.cni.values ({} sets `{}` itself)",
                        cni.plugin.name(),
                        o.path
                    ))
                    .at(format!("{path}#key")),
            );
        }
    }
}

/// Where the user's values meet the owned key `dotted` (`image.repository`): the key itself, or an
/// ancestor on its way that is not a mapping (clusterctl would replace it with one). `(path, true)` for
/// such an ancestor; `None` when the values leave the key alone.
fn owned_path(map: &serde_yaml::Mapping, base: &str, dotted: &str) -> Option<(String, bool)> {
    let mut cur = map;
    let mut path = base.to_string();
    let keys: Vec<&str> = dotted.split('.').collect();
    for (i, k) in keys.iter().enumerate() {
        let v = cur.get(*k)?;
        path = crate::position::join_key(&path, k);
        if i + 1 == keys.len() {
            return Some((path, false));
        }
        match v {
            serde_yaml::Value::Mapping(m) => cur = m,
            _ => return Some((path, true)),
        }
    }
    None
}

/// `networking.underlayMTU`: room for the smallest overlay MTU (576) plus the VXLAN overhead, and a
/// `cni.mtu` that fits under it — with the 50-byte VXLAN overhead for the CNIs that encapsulate
/// (builtin, calico, cilium, flannel). The other CNIs derive their MTU from the interfaces, so a
/// smaller path MTU needs `cni.mtu` for them (a warning).
fn check_underlay_mtu(ctx: &mut Ctx<'_>, n: &crate::model::Networking) {
    use crate::model::VXLAN_OVERHEAD;
    let Some(underlay) = n.underlay_mtu else {
        return;
    };
    let min = 576 + VXLAN_OVERHEAD;
    if !(min..=65535).contains(&underlay) {
        ctx.push(
            Diagnostic::error(
                "spec::underlay-mtu",
                format!("underlayMTU {underlay} is out of range"),
            )
            .help(format!("give the network's path MTU in bytes, between {min} (576 for pods plus the VXLAN overhead) and 65535, e.g. 1500 or 9000"))
            .at("spec.networking.underlayMTU"),
        );
        return;
    }
    let cni = &n.cni;
    let overhead = match cni.plugin {
        CniPlugin::Builtin | CniPlugin::Calico | CniPlugin::Cilium | CniPlugin::Flannel => {
            VXLAN_OVERHEAD
        }
        CniPlugin::Kindnet | CniPlugin::None => 0,
    };
    match cni.mtu {
        Some(mtu) if mtu + overhead > underlay => {
            let fits = underlay - overhead;
            let why = if overhead > 0 {
                format!(" plus the {overhead}-byte VXLAN overhead")
            } else {
                String::new()
            };
            ctx.push(
                Diagnostic::error(
                    "spec::mtu",
                    format!("cni.mtu {mtu}{why} does not fit under underlayMTU {underlay}: packets between nodes would be dropped"),
                )
                .help(format!("set `cni.mtu: {fits}` or less (or remove it: the builtin CNI derives it)"))
                .at("spec.networking.cni.mtu"),
            );
        }
        None if matches!(
            cni.plugin,
            CniPlugin::Calico | CniPlugin::Cilium | CniPlugin::Flannel
        ) =>
        {
            ctx.push(
                Diagnostic::warning(
                    "spec::underlay-mtu",
                    format!(
                        "the {} CNI derives its MTU from the node interfaces, not from underlayMTU {underlay}",
                        cni.plugin.name()
                    ),
                )
                .help(format!("set `cni.mtu: {}` (underlayMTU minus the VXLAN overhead)", underlay - VXLAN_OVERHEAD))
                .at("spec.networking.underlayMTU"),
            );
        }
        _ => {}
    }
}

/// The upstream files each CNI takes from `cni.sources` (the names `docs/cni.md` lists).
fn source_names(p: CniPlugin) -> &'static [&'static str] {
    match p {
        CniPlugin::Calico => &["operator-crds.yaml", "tigera-operator.yaml"],
        CniPlugin::Cilium => &[
            "cilium.tgz",
            "helm-linux-amd64.tar.gz",
            "helm-linux-arm64.tar.gz",
        ],
        CniPlugin::Flannel => &["kube-flannel.yml"],
        _ => &[],
    }
}

/// `cni.sources`: a known file name of this CNI, once; an http(s) address; a sha256 of 64 hex digits.
/// `acceptUnverified` is reported as a warning so it is never silent.
/// Whether an http(s) `url` names a user (and password) before its host: `https://user:pw@host/…`.
fn url_has_credentials(url: &str) -> bool {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority.contains('@')
}

/// `cni.version` against the pinned tables (`crate::cni_versions`): Calico and flannel only at a
/// version of the table (their operator / CNI-plugin image tags are known only there); Cilium at a
/// version without a pinned chart digest only when the file pins the chart itself
/// (`sources[name: cilium.tgz].sha256`) or accepts it unverified (`acceptUnverified`) — else `up`
/// would refuse the download after the cluster is half built.
fn check_cni_pinned(ctx: &mut Ctx<'_>, cni: &crate::model::Cni) {
    use crate::cni_versions::{CALICO, CILIUM, FLANNEL};
    let Some(v) = cni.version.as_deref() else {
        return;
    };
    if crate::versions::parse_version(v).is_none() {
        return;
    }
    let v = crate::cni_versions::tagged(v);
    let at = "spec.networking.cni.version";
    let table: Vec<&str> = match cni.plugin {
        CniPlugin::Calico => CALICO.iter().map(|r| r.version).collect(),
        CniPlugin::Flannel => FLANNEL.iter().map(|r| r.version).collect(),
        CniPlugin::Cilium => {
            let pinned = CILIUM.iter().any(|c| c.version == v)
                || cni.accept_unverified
                || cni
                    .sources
                    .iter()
                    .any(|s| s.name == "cilium.tgz" && s.sha256.is_some());
            if !pinned {
                let list: Vec<&str> = CILIUM.iter().map(|c| c.version).collect();
                ctx.push(
                    Diagnostic::error(
                        "spec::cni-version",
                        format!("no sha256 is pinned for the Cilium chart {v}"),
                    )
                    .help(format!(
                        "use a pinned version ({}), or pin the chart yourself with a `sources` entry `name: cilium.tgz` with its `sha256`, or set `acceptUnverified: true`",
                        list.join(", ")
                    ))
                    .at(at),
                );
            }
            return;
        }
        CniPlugin::Builtin | CniPlugin::Kindnet | CniPlugin::None => return,
    };
    if !table.contains(&v.as_str()) {
        ctx.push(
            Diagnostic::error(
                "spec::cni-version",
                format!(
                    "{} {v} is not a version clusterctl has pinned",
                    cni.plugin.name()
                ),
            )
            .help(if cni.accept_unverified {
                format!(
                    "use one of {} (acceptUnverified does not apply to {} versions: only pinned versions are installed)",
                    table.join(", "),
                    cni.plugin.name()
                )
            } else {
                format!("use one of {}", table.join(", "))
            })
            .at(at),
        );
    }
}

fn check_cni_sources(ctx: &mut Ctx<'_>, cni: &crate::model::Cni) {
    let names = source_names(cni.plugin);
    let mut seen = std::collections::BTreeSet::new();
    for (i, src) in cni.sources.iter().enumerate() {
        let p = format!("spec.networking.cni.sources[{i}]");
        if names.is_empty() {
            ctx.push(
                Diagnostic::error(
                    "spec::cni-source",
                    format!("the {} CNI takes no upstream files", cni.plugin.name()),
                )
                .help("remove `sources` (they are for calico, cilium and flannel)")
                .at(p.clone()),
            );
            break;
        }
        if !names.contains(&src.name.as_str()) {
            ctx.push(
                Diagnostic::error(
                    "spec::cni-source",
                    format!(
                        "{:?} is not a file of the {} CNI",
                        src.name,
                        cni.plugin.name()
                    ),
                )
                .help(format!("use one of {}", names.join(", ")))
                .at(format!("{p}.name")),
            );
        } else if !seen.insert(src.name.as_str()) {
            ctx.push(
                Diagnostic::error("spec::cni-source", format!("{:?} is named twice", src.name))
                    .help("give one source per file")
                    .at(format!("{p}.name")),
            );
        }
        let url_ok = (src.url.starts_with("https://") || src.url.starts_with("http://"))
            && src.url.len() > "https://".len()
            && !src.url.chars().any(|c| c.is_whitespace() || c.is_control());
        if !url_ok {
            ctx.push(
                Diagnostic::error("spec::cni-source", "url is not an http(s) address")
                    .help("write the file's address, e.g. `https://mirror.example.com/calico/v3.32.1/tigera-operator.yaml`")
                    .at(format!("{p}.url")),
            );
        } else if url_has_credentials(&src.url) {
            ctx.push(
                Diagnostic::error("spec::cni-source", "url carries credentials (user:password@)")
                    .help("serve the file without a login (its sha256 is what makes it trusted); a password in the address would be printed in messages and kept in the cache record")
                    .at(format!("{p}.url")),
            );
        }
        if let Some(h) = &src.sha256 {
            if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                ctx.push(
                    Diagnostic::error("spec::cni-source", "sha256 is not 64 hex digits")
                        .help("give the file's sha256 as printed by `sha256sum`")
                        .at(format!("{p}.sha256")),
                );
            }
        }
    }
    if cni.accept_unverified
        && matches!(
            cni.plugin,
            CniPlugin::Builtin | CniPlugin::Kindnet | CniPlugin::None
        )
    {
        ctx.push(
            Diagnostic::warning(
                "spec::cni-unverified",
                format!(
                    "acceptUnverified has no effect for {}: it installs no upstream files",
                    cni.plugin.name()
                ),
            )
            .help("remove `acceptUnverified` (it is for the upstream files of calico, cilium and flannel)")
            .at("spec.networking.cni.acceptUnverified"),
        );
    } else if cni.accept_unverified {
        ctx.push(
            Diagnostic::warning(
                "spec::cni-unverified",
                "acceptUnverified: upstream files without a pinned sha256 are installed as downloaded",
            )
            .help("give each file's sha256 in `sources` instead; the digest seen first is recorded and required afterwards")
            .at("spec.networking.cni.acceptUnverified"),
        );
    }
}

/// Finds keys clusterctl owns anywhere in the pass-through values (e.g. Helm's
/// `ipam.operator.clusterPoolIPv4PodCIDRList`), as (key, path, reason). Depth-limited.
fn owned_keys(
    map: &serde_yaml::Mapping,
    path: &str,
    owned: &[(&str, &'static str)],
    depth: usize,
    out: &mut Vec<(String, String, &'static str)>,
) {
    if depth > 16 {
        return;
    }
    for (k, v) in map {
        let Some(key) = k.as_str() else { continue };
        let p = crate::position::join_key(path, key);
        if let Some((_, why)) = owned.iter().find(|(o, _)| *o == key) {
            out.push((key.to_string(), p, why));
            continue;
        }
        match v {
            serde_yaml::Value::Mapping(m) => owned_keys(m, &p, owned, depth + 1, out),
            serde_yaml::Value::Sequence(items) => {
                for (i, item) in items.iter().enumerate() {
                    if let serde_yaml::Value::Mapping(m) = item {
                        owned_keys(
                            m,
                            &crate::position::join_index(&p, i),
                            owned,
                            depth + 1,
                            out,
                        );
                    }
                }
            }
            _ => {}
        }
    }
}

/// Checks involving node addresses and the VIP: none may lie in podSubnet or serviceSubnet, and node
/// subnets must not overlap them (the seed's LAN clash). Each range that parses is checked, whatever else
/// is wrong with the networking section. One diagnostic per range: at the range's line when it is written
/// and several nodes (or every node) are in it — that is the line to edit — else at the one node's address.
pub(crate) fn check_with_nodes(
    ctx: &mut Ctx<'_>,
    file: &ClusterFile,
    nodes: &[ValidNode],
    vip: Option<IpAddr>,
) {
    let n = &file.spec.networking;
    let ranges = [
        (
            "podSubnet",
            "spec.networking.podSubnet",
            quiet_cidr(&n.pod_subnet),
        ),
        (
            "serviceSubnet",
            "spec.networking.serviceSubnet",
            quiet_cidr(&n.service_subnet),
        ),
    ];
    let addressed = nodes
        .iter()
        .filter(|n| n.address.is_some() || n.subnet.is_some())
        .count();
    for (name, range_path, r) in ranges {
        let Some(r) = r else { continue };
        // (node, its network or None when only its address is in the range)
        let mut hit: Vec<(&ValidNode, Option<IpNet>)> = Vec::new();
        for node in nodes {
            match (node.subnet, node.address) {
                (Some(subnet), _) if overlaps(&r, &subnet) => hit.push((node, Some(subnet))),
                (_, Some(addr)) if r.contains(&addr) => hit.push((node, None)),
                _ => {}
            }
        }
        let Some((first, first_net)) = hit.first().copied() else {
            continue;
        };
        let node_path = format!("spec.nodes[{}].address", first.index);
        if hit.len() == 1 && (addressed > 1 || ctx.index.value(range_path).is_none()) {
            let msg = match (first_net, first.address) {
                (Some(subnet), _) => format!(
                    "{name} {r} overlaps the network {subnet} of node {}",
                    first.name
                ),
                (None, Some(addr)) => {
                    format!("node {} address {addr} lies in {name} {r}", first.name)
                }
                (None, None) => continue,
            };
            ctx.push(
                Diagnostic::error("spec::cidr-overlap", msg)
                    .help(format!("give node {} an address outside {name} {r}, or choose a {name} outside the hosts' network (e.g. 10.244.0.0/16 for pods, 10.96.0.0/16 for services)", first.name))
                    .at(node_path),
            );
            continue;
        }
        let at = if ctx.index.value(range_path).is_some() {
            range_path.to_string()
        } else {
            node_path
        };
        ctx.push(
            Diagnostic::error(
                "spec::cidr-overlap",
                format!("{name} {r} overlaps the nodes' network: {}", describe_hits(&hit)),
            )
            .help(format!("choose a {name} outside the hosts' network (e.g. 10.244.0.0/16 for pods, 10.96.0.0/16 for services)"))
            .at(at),
        );
    }
    if let Some(v) = vip {
        let found = ranges
            .iter()
            .find_map(|(name, _, r)| r.filter(|r| r.contains(&v)).map(|r| (name, r)));
        if let Some((name, r)) = found {
            ctx.push(
                Diagnostic::error(
                    "spec::cidr-overlap",
                    format!("the VIP {v} lies in {name} {r}"),
                )
                .help(format!(
                    "choose a VIP on the control planes' network, outside {name}"
                ))
                .at("spec.controlPlane.vip.address"),
            );
        }
    }
}

/// A range as [`cidr_at`] accepts it, without reporting anything (`check` reports the bad ones).
fn quiet_cidr(text: &str) -> Option<IpNet> {
    IpNet::from_str(text.trim())
        .ok()
        .filter(|n| n.trunc() == *n)
}

/// `10.0.0.0/24 of nodes cp1, cp2; address 10.1.0.5 of node w1`: the nodes in a range, grouped by their
/// network (at most eight names per group, then a count).
fn describe_hits(hit: &[(&ValidNode, Option<IpNet>)]) -> String {
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for (node, net) in hit {
        let what = match (net, node.address) {
            (Some(net), _) => net.to_string(),
            (None, Some(a)) => format!("address {a}"),
            (None, None) => continue,
        };
        match groups.iter_mut().find(|(w, _)| *w == what) {
            Some((_, names)) => names.push(&node.name),
            None => groups.push((what, vec![&node.name])),
        }
    }
    groups
        .iter()
        .map(|(what, names)| {
            let shown: Vec<&str> = names.iter().take(8).copied().collect();
            let more = match names.len().saturating_sub(8) {
                0 => String::new(),
                k => format!(" and {k} more"),
            };
            let s = if names.len() == 1 { "" } else { "s" };
            format!("{what} of node{s} {}{more}", shown.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn overlaps(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}
