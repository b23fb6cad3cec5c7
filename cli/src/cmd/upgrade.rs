//! `clusterctl upgrade -f FILE --to VERSION`: upgrades the cluster's Kubernetes by one step (a higher
//! patch, or the next minor), the way the kubeadm upgrade guide does it, with the phases of
//! `clusterctl_phases::upgrade`: kubeadm on every node first, an etcd snapshot on the first control
//! plane, then one node at a time — drain through the API, `kubeadm upgrade apply` (first control plane)
//! or `kubeadm upgrade node`, kubelet and kubectl, uncordon, wait Ready.
//!
//! `--to` must be an exact version equal to the file's `spec.kubernetesVersion` (edit the file first:
//! the file stays the description of the cluster). The running versions — the control plane's from
//! the kube-apiserver static pod on the first control plane, each node's kubelet from the API — must be
//! at most one minor below and never above it. Kubeconfig: `--kubeconfig PATH` (its context named after
//! the cluster, else its current context), else `/etc/kubernetes/admin.conf` read from the first control
//! plane (kept 0600 in the local cache). Exit codes: 0 upgraded (or already at the version), 1 a step
//! failed (the node it failed on stays cordoned; running the same command again resumes) or the
//! air-gap bundle is refused, 2 invalid input or a refused version.
//!
//! `--dry-run` changes nothing: the same checks run (nodes and API read only), and every command,
//! file write and API change each step would make is printed per node, in upgrade order.
//!
//! When the file names an air-gap bundle (`airgap.bundle`), it is verified completely before any node
//! is reached, and it must be this cluster's and carry the images of `--to` (made with `--to` in
//! `airgap.extraVersions`, or for `--to` itself); otherwise nothing is touched. Without a registry
//! mirror each node then gets the images of `--to` its role needs from the bundle (`upgrade/images`,
//! before any node is drained); with a mirror the bundle is pushed to it first (`upgrade/mirror`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clusterctl_exec::{Cmd, Transport};
use clusterctl_kubeapi::drain::{drain, wait_ready};
use clusterctl_kubeapi::{ClusterApi, KubeClusterApi};
use clusterctl_phases::engine::{Engine, Options};
use clusterctl_phases::upgrade::images::{check_bundle, UpgradeImages};
use clusterctl_phases::upgrade::version::{self, Version};
use clusterctl_phases::upgrade::{self, BundlePackages, NodeApi, UpgradeData, UpgradeSpec};
use clusterctl_phases::{Mode, NodeInfo, PlainReporter, Reporter, Role, Secrets};
use clusterctl_render::Purpose;
use clusterctl_spec::ValidCluster;

use super::lifecycle::reach;

/// Arguments of `clusterctl upgrade`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The cluster file (its `spec.kubernetesVersion` must already say `--to`), or `--profile`.
    #[command(flatten)]
    pub target: super::flags::Target,
    /// The exact target version, e.g. `1.35.0`: a higher patch, or a patch of the next minor.
    #[arg(long = "to")]
    pub to: String,
    /// The kubeconfig to reach the API with (default: admin.conf of the first control plane).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
    /// Seconds to wait for a node's pods to be evicted.
    #[arg(long, default_value_t = 300)]
    pub drain_timeout: u64,
    /// Seconds to wait for a node to be Ready with the new kubelet.
    #[arg(long, default_value_t = 600)]
    pub ready_timeout: u64,
    /// Print every check and the output of every command.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Change nothing: reach the nodes and the API read-only (the version checks, the bundle check,
    /// each step's own checks) and print, per node in upgrade order, every command, file write and
    /// API change the upgrade would make.
    #[arg(long)]
    pub dry_run: bool,
    /// With `--dry-run`: the plan as text or one document.
    #[command(flatten)]
    pub output: super::flags::PlanOutput,
}

/// Runs the command (see the module documentation for exit codes).
pub(crate) fn run(args: Args) -> miette::Result<ExitCode> {
    let invalid = || Ok(ExitCode::from(crate::EXIT_INVALID));
    let out = args.output.output;
    let cluster = match args.target.load(out) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    // An error as text on stderr, and as the document `-o json|yaml` asks for.
    macro_rules! fail {
        ($($t:tt)*) => {
            super::flags::print_error(out, cluster.name(), &format!($($t)*))
        };
    }
    // The same for a refused input (exit 2).
    macro_rules! refuse {
        ($($t:tt)*) => {
            super::flags::print_refusal(out, cluster.name(), &format!($($t)*))
        };
    }
    let to = match version::parse(&args.to) {
        Ok(v) => v,
        Err(e) => {
            refuse!("upgrade: --to {e}");
            return invalid();
        }
    };
    let file_version = cluster.kubernetes_version().clone();
    let file_core = Version::new(file_version.major, file_version.minor, file_version.patch);
    if file_core != to {
        refuse!("{}", version_mismatch(&args.target, &to, &file_core));
        return invalid();
    }
    // The air-gap bundle, checked before any node is reached.
    let airgap = match airgap_bundle(&cluster, args.target.path().unwrap_or(Path::new(".")), &to) {
        Ok(a) => a,
        Err(e) => {
            fail!("upgrade: refused: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let nodes = node_infos(&cluster);
    let all: Vec<_> = cluster.nodes().iter().collect();
    let reached = reach(&cluster, &all, args.known_hosts.as_ref());
    if !reached.errors.is_empty() {
        let each: Vec<String> = reached
            .errors
            .iter()
            .map(|(n, e)| format!("upgrade: node {n}: {e}"))
            .collect();
        fail!("{}", each.join("\n"));
        return Ok(ExitCode::FAILURE);
    }
    let transports = reached.transports;
    let first = cluster.first_control_plane().name.clone();
    let Some(first_t) = transports.get(&first).cloned() else {
        fail!("upgrade: no connection to the first control plane {first}");
        return Ok(ExitCode::FAILURE);
    };

    // The running versions: the control plane's, then every registered node's kubelet.
    match control_plane_version(first_t.as_ref()) {
        Ok(Some(cp)) => {
            if let Err(e) = version::check_step("the control plane", &cp, &to) {
                refuse!("upgrade: refused: {e}");
                return invalid();
            }
        }
        Ok(None) => {
            fail!(
                "upgrade: {first} has no kube-apiserver static pod naming its version: is the cluster up? (run `clusterctl up {}`)",
                args.target.flag()
            );
            return Ok(ExitCode::FAILURE);
        }
        Err(e) => {
            fail!("upgrade: reading the control plane's version on {first}: {e}");
            return Ok(ExitCode::FAILURE);
        }
    }
    let api = match api_for(&cluster, args.kubeconfig.as_deref(), first_t.as_ref()) {
        Ok(a) => Arc::new(a),
        Err(e) => {
            fail!("upgrade: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    match api.nodes() {
        Ok(list) => {
            for n in &list {
                let status = clusterctl_kubeapi::node_status(n);
                if !nodes.iter().any(|x| x.name == status.name) {
                    continue;
                }
                let Ok(v) = version::parse(&status.version) else {
                    continue;
                };
                if let Err(e) = version::check_step(&format!("node {}", status.name), &v, &to) {
                    refuse!("upgrade: refused: {e}");
                    return invalid();
                }
            }
        }
        Err(e) => {
            fail!("upgrade: reading the Nodes: {e}");
            return Ok(ExitCode::FAILURE);
        }
    }

    let upgrade_config = match rendered_upgrade_config(&cluster) {
        Ok(c) => c,
        Err(e) => {
            fail!("upgrade: rendering: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let (bundle, images) = match airgap {
        Some((packages, images)) => (
            Some(Arc::new(packages) as Arc<dyn BundlePackages>),
            Some(images),
        ),
        None => (None, None),
    };
    let data = UpgradeData {
        spec: UpgradeSpec {
            cluster: cluster.name().to_string(),
            to: to.clone(),
            nodes: nodes.clone(),
            upgrade_config,
            packages: clusterctl_phases::up::from_file::package_settings(&cluster),
            ignore_preflight_errors: cluster.spec().kubeadm.ignored_checks(),
        },
        api: Arc::new(ApiSteps {
            api: api.clone(),
            drain_timeout: Duration::from_secs(args.drain_timeout),
            ready_timeout: Duration::from_secs(args.ready_timeout),
        }),
        bundle,
        images,
    };
    // A dry run prints its plan, not per-step progress (unless --verbose).
    let reporter: Arc<dyn Reporter> = if args.dry_run && !args.verbose {
        Arc::new(clusterctl_phases::QuietReporter)
    } else {
        Arc::new(PlainReporter::stderr(args.verbose))
    };
    let opts = Options {
        cluster: cluster.name().to_string(),
        mode: Mode {
            verbose: args.verbose,
            dry_run: args.dry_run,
            // The nodes are reached anyway (version checks): show what is already done.
            probe: args.dry_run,
            ..Mode::default()
        },
        parallel: 16,
        skip: vec![],
        only: vec![],
        cache: clusterctl_phases::local::cache_dir(cluster.name())
            .map(clusterctl_phases::state::LocalCache::new),
    };
    let secrets = Secrets::default();
    reporter.note(&format!(
        "upgrade: cluster `{}` to v{to}: kubeadm on every node, etcd snapshot on {first}, then one node at a time: {}",
        cluster.name(),
        ordered(&nodes, &first)
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
            .join(" → ")
    ));
    for i in &cluster.spec().kubeadm.ignore_preflight_errors {
        reporter.note(&format!(
            "upgrade: kubeadm's preflight check {} is ignored (spec.kubeadm.ignorePreflightErrors): {}",
            i.check, i.reason
        ));
    }
    let engine = Engine::new(
        nodes.clone(),
        transports.clone(),
        opts.clone(),
        reporter.clone(),
        secrets.clone(),
    );
    let prepare = upgrade::prepare_phases(data.images.as_ref());
    let mut plan = Vec::new();
    let (mut total, result) = {
        let (s, r) = engine.run(&prepare, &data);
        plan.extend(s.plan.iter().cloned());
        (s.total_changes(), r)
    };
    if let Err(e) = result {
        if out.is_structured() {
            let error = Some(format!("upgrade failed: {e}"));
            return super::plan::print_document(out, cluster.name(), &plan, total, error);
        }
        fail!("upgrade failed:\n{e}");
        eprintln!("{}", resume_hint(&args, &to, None));
        return Ok(ExitCode::FAILURE);
    }
    for node in ordered(&nodes, &first) {
        let mut one = BTreeMap::new();
        if let Some(t) = transports.get(&node.name) {
            one.insert(node.name.clone(), t.clone());
        }
        let engine = Engine::new(
            vec![node.clone()],
            one,
            opts.clone(),
            reporter.clone(),
            secrets.clone(),
        );
        let (s, r) = engine.run(&upgrade::node_phases(node.name == first), &data);
        total += s.total_changes();
        plan.extend(s.plan.iter().cloned());
        if let Err(e) = r {
            if out.is_structured() {
                let error = Some(format!("upgrade failed: {e}"));
                return super::plan::print_document(out, cluster.name(), &plan, total, error);
            }
            fail!("upgrade failed:\n{e}");
            eprintln!("{}", resume_hint(&args, &to, Some(&node.name)));
            return Ok(ExitCode::FAILURE);
        }
    }
    if out.is_structured() {
        return super::plan::print_document(out, cluster.name(), &plan, total, None);
    }
    if args.dry_run {
        let order = ordered(&nodes, &first);
        println!(
            "clusterctl upgrade --dry-run: cluster `{}` to v{to}: nothing is changed (nodes and API read only)",
            cluster.name()
        );
        let width = plan.iter().map(|e| e.phase.len()).max().unwrap_or(10);
        super::plan::print_entries(&super::plan::groups(&order), &plan, width);
        println!("{total} change(s) planned; nothing was changed (dry run).");
        return Ok(ExitCode::SUCCESS);
    }
    if total == 0 {
        reporter.note(&format!(
            "upgrade: cluster `{}` is already at v{to}; nothing changed",
            cluster.name()
        ));
    } else {
        reporter.note(&format!(
            "upgrade: cluster `{}` upgraded to v{to} ({} node(s), {total} change(s))",
            cluster.name(),
            nodes.len()
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// The refusal of a `--to` that is not the cluster file's version, with how to change that version:
/// edit the file, or — a built-in profile cannot be edited — write the profile out and go on with
/// that file.
fn version_mismatch(target: &super::flags::Target, to: &Version, file: &Version) -> String {
    match &target.profile {
        Some(p) => format!(
            "upgrade: --to {to} but profile {p} says kubernetesVersion {file}, and a built-in profile \
             cannot be edited: write it out (`clusterctl profile print {p} --output-dir {p}`), set \
             spec.kubernetesVersion to {to} in {p}/cluster.yaml, then run `clusterctl upgrade -f \
             {p}/cluster.yaml --to {to}` (and name this cluster with that file from now on)"
        ),
        None => format!(
            "upgrade: --to {to} but {} says kubernetesVersion {file}: set spec.kubernetesVersion to \
             {to} in it first (the file describes the cluster), then run this again",
            target.file.display()
        ),
    }
}

/// What to do after a failure: the node left cordoned and the command to resume.
fn resume_hint(args: &Args, to: &Version, node: Option<&str>) -> String {
    let cordoned = node
        .map(|n| {
            format!(
                "Node {n} is left cordoned (drained) so that nothing is scheduled on a half-upgraded node. "
            )
        })
        .unwrap_or_default();
    format!(
        "{cordoned}Fix the cause and run `clusterctl upgrade {} --to {to}` again: it resumes at the \
         step that failed (finished steps are recorded on each node and skipped).",
        args.target.flag()
    )
}

/// The nodes in upgrade order: the first control plane, the other control planes, the workers.
fn ordered(nodes: &[NodeInfo], first: &str) -> Vec<NodeInfo> {
    let mut v: Vec<NodeInfo> = nodes.iter().filter(|n| n.name == first).cloned().collect();
    v.extend(
        nodes
            .iter()
            .filter(|n| n.is_control_plane() && n.name != first)
            .cloned(),
    );
    v.extend(nodes.iter().filter(|n| !n.is_control_plane()).cloned());
    v
}

fn node_infos(cluster: &ValidCluster) -> Vec<NodeInfo> {
    cluster
        .nodes()
        .iter()
        .map(|n| {
            NodeInfo::new(
                n.name.clone(),
                if n.is_control_plane() {
                    Role::ControlPlane
                } else {
                    Role::Worker
                },
                n.address.map(|a| a.to_string()).unwrap_or_default(),
            )
        })
        .collect()
}

/// The control plane's running version: the kube-apiserver image tag in its static pod manifest.
/// `Ok(None)` when there is no manifest or it names no version.
fn control_plane_version(t: &dyn Transport) -> Result<Option<Version>, String> {
    let bytes = t
        .download("/etc/kubernetes/manifests/kube-apiserver.yaml")
        .map_err(|e| e.to_string())?;
    Ok(bytes.and_then(|b| version::apiserver_manifest_version(&String::from_utf8_lossy(&b))))
}

/// The rendered UpgradeConfiguration (any node's copy: it is the same for all), `None` when the
/// kubeadm API version has none (v1beta3).
fn rendered_upgrade_config(cluster: &ValidCluster) -> Result<Option<Vec<u8>>, String> {
    let rendered = clusterctl_render::render(cluster, &clusterctl_render::Facts::assumed(cluster))
        .map_err(|e| e.to_string())?;
    Ok(rendered
        .per_node
        .values()
        .flatten()
        .find(|f| f.purpose == Purpose::KubeadmUpgrade)
        .map(|f| f.content.clone()))
}

/// The API client: `--kubeconfig` (the cluster's context `clusterctl-<name>` when it has one), else admin.conf
/// from the first control plane, written 0600 to the local cache.
fn api_for(
    cluster: &ValidCluster,
    kubeconfig: Option<&Path>,
    first: &dyn Transport,
) -> Result<KubeClusterApi, String> {
    let name = cluster.name();
    if let Some(p) = kubeconfig {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        let ctx = clusterctl_kubeapi::kubeconfig::cluster_context(&text, name);
        return KubeClusterApi::from_kubeconfig(p, ctx.as_deref()).map_err(|e| e.to_string());
    }
    let path = super::lifecycle::cache_admin_conf(cluster, first)?;
    KubeClusterApi::from_kubeconfig(&path, None).map_err(|e| e.to_string())
}

/// [`NodeApi`] over the `kube` client: drain, uncordon, wait Ready (polling every second).
struct ApiSteps {
    api: Arc<KubeClusterApi>,
    drain_timeout: Duration,
    ready_timeout: Duration,
}

const POLL: Duration = Duration::from_secs(1);

impl NodeApi for ApiSteps {
    fn drain(&self, node: &str) -> Result<String, String> {
        let r =
            drain(self.api.as_ref(), node, self.drain_timeout, POLL).map_err(|e| e.to_string())?;
        Ok(format!(
            "node {node} cordoned, {} pod(s) evicted{}",
            r.evicted.len(),
            if r.kept.is_empty() {
                String::new()
            } else {
                format!(" ({} mirror/DaemonSet pod(s) left)", r.kept.len())
            }
        ))
    }
    fn uncordon(&self, node: &str) -> Result<(), String> {
        self.api
            .set_unschedulable(node, false)
            .map_err(|e| e.to_string())
    }
    fn wait_ready(&self, node: &str, version: &str) -> Result<(), String> {
        wait_ready(
            self.api.as_ref(),
            node,
            Some(version),
            self.ready_timeout,
            POLL,
        )
        .map_err(|e| e.to_string())
    }
}

/// The air-gap bundle of `cluster` (`airgap.bundle`, relative to `file`), verified completely, with
/// the images of `to` each role needs ([`clusterctl_phases::up::from_file::role_images`] of the
/// file, which already says `to`): where the packages come from, and where the images do (pushed to the mirror
/// when one is set, else loaded into each node). `Ok(None)` without a bundle. Errors, in words: a bad
/// entry (named), another cluster's bundle, a bundle without the images of `to`, or one carrying
/// packages but no kubeadm package for `to`.
fn airgap_bundle(
    cluster: &ValidCluster,
    file: &Path,
    to: &Version,
) -> Result<Option<(Bundle, UpgradeImages)>, String> {
    let Some(a) = cluster.spec().airgap.as_ref() else {
        return Ok(None);
    };
    let path = file.parent().unwrap_or(Path::new(".")).join(&a.bundle);
    if !path.exists() {
        return Err(format!(
            "bundle {} not found: write it with `clusterctl airgap bundle` on a connected machine \
             (it must carry v{to}: as kubernetesVersion or in airgap.extraVersions) and put it where \
             airgap.bundle points",
            path.display()
        ));
    }
    let vb = Arc::new(
        clusterctl_airgap::bundle::verify_bundle(&path).map_err(|e| match e {
            clusterctl_airgap::AirgapError::Io { source, .. } => {
                format!("bundle {}: {source}", path.display())
            }
            e => format!("bundle {}: {e}", path.display()),
        })?,
    );
    let wanted = clusterctl_phases::up::from_file::role_images(cluster);
    let (control_plane, worker) = check_bundle(&vb.manifest, &path, cluster.name(), to, &wanted)
        .map_err(|e| e.to_string())?;
    // Loaded under the names the file's nodes pull, whatever mirror the bundle recorded.
    let names = clusterctl_airgap::plan::pull_names(cluster);
    let (control_plane, worker) = (
        clusterctl_airgap::plan::renamed(control_plane, &names),
        clusterctl_airgap::plan::renamed(worker, &names),
    );
    let images = if let Some(mirror) = clusterctl_phases::up::from_file::mirror_push(cluster) {
        UpgradeImages::Mirror {
            bundle: vb.clone(),
            mirror,
            record: clusterctl_airgap::import::ImportState::default_path(&path),
        }
    } else {
        UpgradeImages::Nodes {
            bundle: vb.clone(),
            runtime: match cluster.spec().runtime.kind {
                clusterctl_spec::model::RuntimeKind::Containerd => {
                    clusterctl_phases::RuntimeKind::Containerd
                }
                clusterctl_spec::model::RuntimeKind::Crio => clusterctl_phases::RuntimeKind::Crio,
            },
            control_plane,
            worker,
        }
    };
    let packages = Bundle {
        bundle: vb,
        version: format!("v{to}"),
    };
    Ok(Some((packages, images)))
}

/// The air-gap bundle's packages of the target version (the bundle verified before the upgrade
/// started), uploaded per node.
struct Bundle {
    bundle: Arc<clusterctl_airgap::bundle::VerifiedBundle>,
    /// The target version, `vX.Y.Z`: untagged packages and those tagged with it are uploaded.
    version: String,
}

impl BundlePackages for Bundle {
    fn upload(&self, transport: &dyn Transport) -> Result<(), String> {
        let bundle = &self.bundle;
        let out = transport
            .run(&Cmd::new(
                ". /etc/os-release; echo \"$ID\"; echo \"$ID_LIKE\"; uname -m",
            ))
            .map_err(|e| e.to_string())?;
        let text = out.stdout_str();
        let lines: Vec<&str> = text.lines().collect();
        let line = |i: usize| lines.get(i).copied().unwrap_or_default();
        let family = clusterctl_airgap::node::os_family(line(0), line(1));
        let arch = clusterctl_airgap::node::oci_arch(line(2));
        clusterctl_airgap::node::upload_packages(
            transport,
            bundle,
            family,
            &arch,
            upgrade::packages::BUNDLE_DIR,
            &self.version,
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
    }
}
