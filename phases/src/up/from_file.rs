//! The phases' view of a validated cluster file: [`spec`] maps a `ValidCluster` onto [`UpSpec`] (nodes,
//! endpoint, runtime, CNI, preloads, packages, air gap), [`renderer`] wraps `clusterctl_render::render`
//! for the `render` phase (per-node files mapped to the engine's purposes, cluster-wide manifests on the
//! first control plane), and the air-gap settings `up` and `upgrade` share ([`airgap`],
//! [`mirror_push`], [`role_images`]). `up`, `node join` and `upgrade` all start here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clusterctl_render::{Purpose, RenderError};
use clusterctl_spec::ValidCluster;

use super::airgap::{AirgapUp, MirrorPush, RoleImages};
use super::{cni_install, NodeFacts, UpSpec};
use clusterctl_render::RenderedFile;
use clusterctl_spec::model::Role;
use clusterctl_spec::ValidNode;

/// What the command line adds to the cluster file for [`spec`].
#[derive(Debug, Clone, Default)]
pub struct SpecOptions {
    /// The cluster file (`None`: a built-in profile; the bundle path is then relative to the working
    /// directory).
    pub file: Option<PathBuf>,
    /// The kubeconfig to merge the admin context into (`None`: `$KUBECONFIG` or `~/.kube/config`).
    pub kubeconfig: Option<PathBuf>,
    /// How long `wait-ready` waits for every node.
    pub ready_timeout: Duration,
    /// Preflight check ids reported as warnings.
    pub ignore_preflight: Vec<String>,
}

/// What the phases of `up` need of `cluster` (its nodes as validated, endpoint, runtime, CNI plugin
/// and its install, preloads, packages, air gap) with the command line's `options`.
pub fn spec(cluster: &ValidCluster, options: &SpecOptions) -> UpSpec {
    let s = cluster.spec();
    let ep = cluster.endpoint();
    UpSpec {
        cluster: cluster.name().to_string(),
        kubernetes_version: cluster.kubernetes_version().clone(),
        nodes: cluster.nodes().to_vec(),
        endpoint: format!("{}:{}", ep.host, ep.port),
        vip: cluster.vip().map(|v| v.to_string()),
        runtime: cluster.spec().runtime.kind,
        cni: s.networking.cni.plugin,
        // An unpinnable CNI version is refused by render before any node is touched.
        cni_install: cni_install::for_cluster(cluster, cni_install::default_cache())
            .ok()
            .flatten(),
        preload_images: s.images.preload.clone(),
        kubeconfig: options.kubeconfig.clone(),
        binary: std::env::current_exe().ok(),
        ready_timeout: options.ready_timeout,
        ignore_preflight: options.ignore_preflight.clone(),
        airgap: airgap(cluster, options.file.as_deref()),
        packages: package_settings(cluster),
        proxy: clusterctl_spec::ProxyEnv::of(cluster)
            .map(|p| p.both_cases())
            .unwrap_or_default(),
        addons: clusterctl_render::addons::steps(cluster),
        encryption: s.api_server.encryption.clone(),
        lb_objects: clusterctl_render::lb_pool::objects(cluster),
    }
}

/// `spec.packages` as the `packages` phase needs it (the mirror's CA read by validation).
pub fn package_settings(cluster: &ValidCluster) -> crate::packages::Settings {
    use crate::packages::{Settings, Source};
    use clusterctl_spec::model::PackageSource;
    let s = cluster.spec();
    let source = match s.package_source() {
        PackageSource::Upstream => Source::Upstream,
        PackageSource::Mirror => Source::Mirror {
            url: s
                .packages
                .mirror
                .as_ref()
                .map(|m| m.url.clone())
                .unwrap_or_default(),
            ca_pem: cluster.packages_mirror_ca_pem().map(String::from),
        },
        PackageSource::Bundle => Source::Bundle,
        PackageSource::Preinstalled => Source::Preinstalled,
    };
    Settings {
        source,
        replace: s.packages.replace_installed,
        runtime: cluster.spec().runtime.kind,
    }
}

/// The air-gap settings of `up` for `cluster` loaded from `file` (`None`: a built-in profile, paths
/// relative to the working directory): `Some` when the file names a bundle (`airgap.bundle`); images
/// go to the mirror (with its CA and credential variable names) when one is set, else each node gets
/// the images of the current version its role needs (`clusterctl_airgap::plan::node_images`).
pub fn airgap(cluster: &ValidCluster, file: Option<&Path>) -> Option<AirgapUp> {
    let a = cluster.spec().airgap.as_ref()?;
    let base = file.and_then(Path::parent).unwrap_or(Path::new(""));
    Some(
        AirgapUp::new(base.join(&a.bundle), mirror_push(cluster))
            .with_node_images(role_images(cluster))
            .with_pull_names(clusterctl_airgap::plan::pull_names(cluster))
            .with_extract_to(
                a.packages
                    .iter()
                    .filter_map(|p| {
                        let dir = p.extract_to.clone()?;
                        Some(((p.name.clone(), p.os_family.clone(), p.arch.clone()), dir))
                    })
                    .collect(),
            ),
    )
}

/// Where `up` and `upgrade` push a bundle's images: the file's registry mirror (prefix, CA,
/// credential variable names), `None` without one.
pub fn mirror_push(cluster: &ValidCluster) -> Option<MirrorPush> {
    cluster.mirror_prefix().map(|prefix| MirrorPush {
        client: clusterctl_airgap::run::client_options(cluster),
        prefix: prefix.to_string(),
    })
}

/// The upstream references of the images each role needs at the file's `kubernetesVersion`
/// (`clusterctl_airgap::plan::node_images`), as `up` and `upgrade` load them from a bundle.
pub fn role_images(cluster: &ValidCluster) -> RoleImages {
    let sources = |control_plane: bool| -> Vec<String> {
        clusterctl_airgap::plan::node_images(cluster, control_plane)
            .into_iter()
            .map(|i| i.source)
            .collect()
    };
    RoleImages {
        control_plane: sources(true),
        worker: sources(false),
    }
}

/// Render facts from the gathered ones (assumed facts for nodes not reached).
fn render_facts(
    cluster: &ValidCluster,
    nodes: &[ValidNode],
    facts: &BTreeMap<String, NodeFacts>,
) -> clusterctl_render::Facts {
    let mut out = clusterctl_render::Facts::assumed(cluster);
    for (name, f) in facts.iter().filter(|(_, f)| f.known) {
        let entry = out.nodes.entry(name.clone()).or_default();
        if let Some(major) = f
            .containerd_for_render()
            .trim_start_matches('v')
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
        {
            entry.containerd_major = major;
        }
        entry.cgroup = if f.cgroup_version == 1 {
            clusterctl_render::CgroupVersion::V1
        } else {
            clusterctl_render::CgroupVersion::V2
        };
        let address = nodes
            .iter()
            .find(|n| &n.name == name)
            .map(crate::reach::address_text)
            .unwrap_or_default();
        entry.vip_interface = f.interface_of(&address).map(String::from);
        entry.underlay = entry
            .vip_interface
            .as_deref()
            .and_then(|i| f.link(i))
            .filter(|l| l.mtu > 0)
            .map(|l| (l.name.clone(), l.mtu));
        entry.installed_overlay_mtu = f.cni_mtu;
    }
    out
}

/// The renderer the `render` phase calls: `clusterctl_render::render` with the gathered facts,
/// per-node files mapped to the engine's purposes, cluster-wide manifests placed on the first control
/// plane under `/etc/clusterctl/`. `nodes`: the engine's nodes (their addresses as `connect` filled
/// them in). Errors: render's.
pub fn renderer(
    cluster: ValidCluster,
    nodes: Vec<ValidNode>,
) -> impl Fn(&BTreeMap<String, NodeFacts>) -> Result<BTreeMap<String, Vec<RenderedFile>>, RenderError>
       + Send
       + Sync {
    move |facts| {
        let rendered = clusterctl_render::render(&cluster, &render_facts(&cluster, &nodes, facts))?;
        let mut out: BTreeMap<String, Vec<RenderedFile>> = BTreeMap::new();
        for (node, files) in &rendered.per_node {
            let list = out.entry(node.clone()).or_default();
            for f in files {
                // The upgrade's configuration and kind's are not placed by `up`.
                if !matches!(f.purpose, Purpose::KubeadmUpgrade | Purpose::KindConfig) {
                    list.push(f.clone());
                }
            }
        }
        if let Some(first) = nodes.iter().find(|n| n.role == Role::ControlPlane) {
            let list = out.entry(first.name.clone()).or_default();
            for f in rendered
                .cluster
                .iter()
                .filter(|f| matches!(f.purpose, Purpose::ClusterManifest | Purpose::HelmValues))
            {
                list.push(RenderedFile {
                    path: format!("/etc/clusterctl/{}", f.path.trim_start_matches('/')),
                    mode: f.mode,
                    content: f.content.clone(),
                    purpose: f.purpose,
                });
            }
        }
        Ok(out)
    }
}

/// A cluster file's text as a validated cluster; panics on an invalid file (unit tests of phases).
#[cfg(test)]
pub(crate) fn test_cluster(yaml: &str) -> ValidCluster {
    let loaded = clusterctl_spec::Loaded::from_text("cluster.yaml", yaml);
    clusterctl_spec::validate(&loaded).expect("valid").cluster
}

#[cfg(test)]
mod tests {
    use super::*;
    use clusterctl_spec::model::CniPlugin;

    #[test]
    fn taints_labels_and_the_endpoint_come_from_the_file() {
        let c = test_cluster(
            "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {name: fs}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: docker\n  nodes:\n    - {name: cp1, role: control-plane, labels: {disk: ssd}, taints: [{key: dedicated, value: batch, effect: NoSchedule}, {key: gpu, effect: NoExecute}]}\n    - {name: w1, role: worker}\n",
        );
        let s = spec(&c, &SpecOptions::default());
        assert_eq!(s.cluster, "fs");
        assert_eq!(s.nodes.len(), 2);
        assert_eq!(s.nodes[0].role, Role::ControlPlane);
        assert_eq!(
            s.nodes[0]
                .taints
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["dedicated=batch:NoSchedule", "gpu:NoExecute"]
        );
        assert_eq!(
            s.nodes[0].labels.get("disk").map(String::as_str),
            Some("ssd")
        );
        assert_eq!(s.nodes[1].role, Role::Worker);
        assert!(s.airgap.is_none());
        assert_eq!(s.cni, CniPlugin::Builtin);
    }

    #[test]
    fn cluster_manifests_go_to_the_first_control_plane() {
        let c = test_cluster(
            "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {name: fr}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: docker\n  nodes:\n    - {name: cp1, role: control-plane}\n    - {name: w1, role: worker}\n",
        );
        let s = spec(&c, &SpecOptions::default());
        let files = renderer(c.clone(), s.nodes.clone())(&BTreeMap::new()).expect("render");
        assert!(files["cp1"]
            .iter()
            .any(|f| f.purpose == Purpose::KubeadmInit));
        assert!(files["w1"]
            .iter()
            .any(|f| f.purpose == Purpose::KubeadmJoin));
        let rendered =
            clusterctl_render::render(&c, &clusterctl_render::Facts::assumed(&c)).expect("render");
        let manifests: Vec<String> = rendered
            .cluster
            .iter()
            .filter(|f| f.purpose == Purpose::ClusterManifest)
            .map(|f| format!("/etc/clusterctl/{}", f.path.trim_start_matches('/')))
            .collect();
        assert!(!manifests.is_empty());
        for m in &manifests {
            assert!(files["cp1"].iter().any(|f| &f.path == m), "{m} not on cp1");
            assert!(!files["w1"].iter().any(|f| &f.path == m), "{m} on w1");
        }
    }
}
