//! `clusterctl up`: build or converge the cluster described by a cluster file (or a built-in profile).
//! Loads and validates the file, maps it onto the phase engine's model (`clusterctl_phases::up`), gets
//! one transport per node from the provider (SSH hosts, or Docker node containers created first), and
//! runs the phases of `up`. `--dry-run` prints the plan per node and changes nothing; it is offline
//! unless `--probe` is given, so `clusterctl up --dry-run` with no file shows the embedded `lab` profile
//! on any machine. Exit codes: 0 done, 1 a phase failed, 2 invalid input.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clusterctl_exec::Transport;
use clusterctl_phases::engine::{check_selection, Engine, Options};
use clusterctl_phases::progress::TtyReporter;
use clusterctl_phases::up::{self, NodeFacts, UpData, UpSpec};
use clusterctl_phases::{
    CniChoice, FilePurpose, Mode, NodeFile, NodeInfo, PlainReporter, PlanEntry, QuietReporter,
    Reporter, Role, RuntimeKind, Secrets,
};
use clusterctl_render::Purpose;
use clusterctl_spec::model::{CniPlugin, Provider};
use clusterctl_spec::ValidCluster;

/// The options `up` and `node join` share: preflight fixes and ignores, output, parallelism, SSH host
/// keys and the Ready timeout.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct NodeRunArgs {
    /// Apply the fixes of the fixable preflight failures (swap, modules, sysctls, firewalld, SELinux).
    #[arg(long)]
    pub fix: bool,
    /// Preflight checks reported as warnings instead of failures (ids such as `time-sync`, `swap`,
    /// `module/br_netfilter`; an unknown id is refused, listing them all).
    #[arg(long, value_delimiter = ',')]
    pub ignore_preflight: Vec<String>,
    /// Show every check and the output of every command.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Nodes worked on at once (at least 1).
    #[arg(long, default_value_t = 16, value_parser = super::flags::at_least_one)]
    pub parallel: usize,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
    /// Seconds to wait for every node to be Ready.
    #[arg(long, default_value_t = 600)]
    pub ready_timeout: u64,
}

impl NodeRunArgs {
    /// Refuses `--ignore-preflight` entries that name no preflight check (exit 2, the valid ids
    /// listed): a typo would otherwise ignore nothing, silently. `None` when every entry is a check.
    pub(crate) fn refuse_unknown_checks(&self) -> Option<ExitCode> {
        let unknown = up::preflight::unknown_ids(&self.ignore_preflight);
        if unknown.is_empty() {
            return None;
        }
        eprintln!(
            "--ignore-preflight: unknown check(s) {}; the preflight checks are: {}",
            unknown
                .iter()
                .map(|u| format!("`{u}`"))
                .collect::<Vec<_>>()
                .join(", "),
            up::preflight::CHECK_IDS.join(", ")
        );
        Some(ExitCode::from(crate::EXIT_INVALID))
    }
}

/// Arguments of `clusterctl up`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The cluster file. Default: `cluster.yaml` when it exists; with `--dry-run` and no file, the
    /// built-in `lab` profile.
    #[arg(short = 'f', long = "file")]
    pub file: Option<PathBuf>,
    /// Use a built-in profile instead of a file (`clusterctl validate --list-profiles` lists them).
    #[arg(long, conflicts_with = "file")]
    pub profile: Option<String>,
    /// Print, per node, every command and file write `up` would make, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// With `--dry-run`: also query the nodes (read-only) to show what is already done.
    #[arg(long, requires = "dry_run")]
    pub probe: bool,
    /// With `--dry-run`: the plan as text, or as one document (`json`, `yaml`: `{cluster, changes,
    /// error, steps: [{node, phase, kind, text}]}`).
    #[arg(
        short = 'o',
        long = "output",
        value_enum,
        default_value = "text",
        requires = "dry_run"
    )]
    pub output: super::flags::Format,
    /// Phases not to run (paths or prefixes, e.g. `preflight,join/worker`).
    #[arg(long, value_delimiter = ',')]
    pub skip_phases: Vec<String>,
    /// Run only these phases (paths or prefixes); facts and render always run.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// How nodes are reached and checked (shared with `node join`).
    #[command(flatten)]
    pub nodes: NodeRunArgs,
    /// The kubeconfig to merge the cluster's admin context into (default: `$KUBECONFIG` or
    /// `~/.kube/config`).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Destroy the cluster first (as `clusterctl destroy --yes`), then build it again from the file.
    #[arg(long)]
    pub recreate: bool,
}

/// Runs the command. Returns exit code 0 when every phase succeeded (or the dry run was printed),
/// 1 when a phase failed (every failure printed, naming phase, node, command, status and output),
/// 2 for an invalid cluster file or phase name.
pub(crate) fn run(args: Args) -> miette::Result<ExitCode> {
    if let Some(code) = args.nodes.refuse_unknown_checks() {
        return Ok(code);
    }
    let loaded = match (&args.profile, &args.file) {
        (Some(p), _) => clusterctl_spec::from_profile(p),
        (None, Some(f)) => clusterctl_spec::load(f),
        (None, None) if Path::new("cluster.yaml").exists() => {
            clusterctl_spec::load(Path::new("cluster.yaml"))
        }
        (None, None) if args.dry_run => {
            clusterctl_spec::from_profile(clusterctl_spec::DEFAULT_PROFILE)
        }
        (None, None) => {
            eprintln!("no cluster file: pass -f FILE or --profile NAME (or --dry-run to see the `lab` profile's plan)");
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        }
    };
    let validated = match loaded.and_then(|l| clusterctl_spec::validate(&l)) {
        Ok(v) => v,
        Err(d) => {
            eprintln!("{d}");
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        }
    };
    let cluster = validated.cluster;
    if args.recreate {
        let (kubeconfig, known_hosts) = (args.kubeconfig.as_ref(), args.nodes.known_hosts.as_ref());
        if let Some(code) =
            super::destroy::before_recreate(&cluster, kubeconfig, known_hosts, args.dry_run)
        {
            return Ok(code);
        }
    }
    let mut spec = up_spec(&cluster, &args);
    let phases = up::phases(&spec);
    for pats in [&args.skip_phases, &args.only] {
        if let Err(e) = check_selection(&phases, pats) {
            eprintln!("{e}");
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        }
    }
    let mode = Mode {
        dry_run: args.dry_run,
        probe: args.probe,
        fix: args.nodes.fix,
        verbose: args.nodes.verbose,
    };
    let names: Vec<String> = spec.nodes.iter().map(|n| n.name.clone()).collect();
    let tty = std::io::stderr().is_terminal() && !args.dry_run;
    let tty_reporter = tty.then(|| Arc::new(TtyReporter::new(&names, args.nodes.verbose)));
    let reporter: Arc<dyn Reporter> = match &tty_reporter {
        Some(t) => t.clone(),
        // A dry run's output is the plan on stdout; per-phase progress would only repeat it.
        None if args.dry_run && !args.nodes.verbose => Arc::new(QuietReporter),
        None => Arc::new(PlainReporter::stderr(args.nodes.verbose)),
    };

    let mut provider_plan = Vec::new();
    let transports = match connect(&cluster, &mut spec, &args, &mut provider_plan) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("up: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let secrets = Secrets::default();
    let first_cp = spec
        .nodes
        .iter()
        .find(|n| n.is_control_plane())
        .map(|n| n.name.clone())
        .unwrap_or_default();
    let data = UpData {
        renderer: Box::new(renderer(cluster.clone(), spec.nodes.clone())),
        facts: Default::default(),
        files: Default::default(),
        join: Default::default(),
        first_cp_transport: transports.get(&first_cp).cloned(),
        mode,
        reporter: reporter.clone(),
        secrets: secrets.clone(),
        api: clusterctl_phases::up::api::ApiAccess::kube_via(local_api(&cluster, &spec, &args)),
        spec: spec.clone(),
    };
    let opts = Options {
        cluster: spec.cluster.clone(),
        mode,
        parallel: args.nodes.parallel,
        skip: args.skip_phases.clone(),
        only: args.only.clone(),
        cache: clusterctl_phases::local::cache_dir(&spec.cluster)
            .map(clusterctl_phases::state::LocalCache::new),
    };
    let engine = Engine::new(
        spec.nodes.clone(),
        transports,
        opts,
        reporter.clone(),
        secrets,
    );
    let (summary, result) = engine.run(&phases, &data);
    if let Some(t) = &tty_reporter {
        t.finish();
    }
    if args.dry_run && args.output.is_structured() {
        let error = result.as_ref().err().map(|e| e.to_string());
        return super::plan::print_document(
            args.output,
            &spec.cluster,
            &summary.plan,
            summary.total_changes(),
            error,
        );
    }
    if args.dry_run {
        print_plan(
            &cluster,
            &spec,
            &phases,
            &provider_plan,
            &summary.plan,
            args.probe,
        );
    }
    match result {
        Ok(()) => {
            if args.dry_run {
                println!(
                    "{} change(s) planned; nothing was changed (dry run).",
                    summary.total_changes()
                );
            } else if summary.total_changes() == 0 {
                reporter.note(&format!(
                    "up: cluster `{}` is up to date; nothing changed",
                    spec.cluster
                ));
            } else {
                reporter.note(&format!(
                    "up: cluster `{}` converged: {} change(s) on {} node(s); kubectl context `{}`",
                    spec.cluster,
                    summary.total_changes(),
                    summary.changes.values().filter(|c| **c > 0).count(),
                    clusterctl_kubeapi::kubeconfig::entry_name(&spec.cluster)
                ));
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("up failed:\n{e}");
            let again = match &args.file {
                Some(f) => format!("clusterctl up -f {}", f.display()),
                None => "clusterctl up".to_string(),
            };
            if args.dry_run {
                eprintln!("Fix the cause and run `{again} --dry-run` again (nothing was changed).");
            } else {
                eprintln!(
                    "Fix the cause and run `{again}` again: finished phases are recorded and skipped."
                );
            }
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The engine's model of `cluster` (nodes, endpoint, runtime, CNI, preloads, options).
pub(crate) fn up_spec(cluster: &ValidCluster, args: &Args) -> UpSpec {
    let nodes = cluster
        .nodes()
        .iter()
        .map(|n| NodeInfo {
            name: n.name.clone(),
            role: if n.is_control_plane() {
                Role::ControlPlane
            } else {
                Role::Worker
            },
            address: n.address.map(|a| a.to_string()).unwrap_or_default(),
            labels: n.labels.clone(),
            taints: n
                .taints
                .iter()
                .map(|t| match &t.value {
                    Some(v) if !v.is_empty() => format!("{}={v}:{:?}", t.key, t.effect),
                    _ => format!("{}:{:?}", t.key, t.effect),
                })
                .collect(),
        })
        .collect();
    let s = cluster.spec();
    let cni = match s.networking.cni.plugin {
        CniPlugin::Builtin => CniChoice::Builtin,
        CniPlugin::None => CniChoice::None,
        other => CniChoice::Manifests(format!("{other:?}").to_lowercase()),
    };
    let ep = cluster.endpoint();
    UpSpec {
        cluster: cluster.name().to_string(),
        kubernetes_version: cluster.kubernetes_version().to_string(),
        nodes,
        endpoint: format!("{}:{}", ep.host, ep.port),
        vip: cluster.vip().map(|v| v.to_string()),
        runtime: match s.runtime.kind {
            clusterctl_spec::model::RuntimeKind::Containerd => RuntimeKind::Containerd,
            clusterctl_spec::model::RuntimeKind::Crio => RuntimeKind::Crio,
        },
        cni,
        // An unpinnable CNI version is refused by render before any node is touched.
        cni_install: up::cni_install::for_cluster(cluster, up::cni_install::default_cache())
            .ok()
            .flatten(),
        preload_images: s.images.preload.clone(),
        kubeconfig: args.kubeconfig.clone(),
        binary: std::env::current_exe().ok(),
        ready_timeout: Duration::from_secs(args.nodes.ready_timeout),
        ignore_preflight: args.nodes.ignore_preflight.clone(),
        airgap: super::airgap::for_up(cluster, args.file.as_deref()),
        packages: package_settings(cluster),
    }
}

/// `spec.packages` as the `packages` phase needs it (the mirror's CA read by validation).
pub(crate) fn package_settings(cluster: &ValidCluster) -> clusterctl_phases::packages::Settings {
    use clusterctl_phases::packages::{Settings, Source};
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
        runtime: match s.runtime.kind {
            clusterctl_spec::model::RuntimeKind::Containerd => RuntimeKind::Containerd,
            clusterctl_spec::model::RuntimeKind::Crio => RuntimeKind::Crio,
        },
    }
}

/// The engine's purpose for a rendered file; `None` for files `up` does not place (upgrade, kind
/// configuration).
fn purpose(p: Purpose) -> Option<FilePurpose> {
    Some(match p {
        Purpose::KubeadmInit => FilePurpose::KubeadmInit,
        Purpose::KubeadmJoin => FilePurpose::KubeadmJoin,
        Purpose::KubeVip => FilePurpose::KubeVip,
        Purpose::AuditPolicy
        | Purpose::AuthenticationConfig
        | Purpose::OidcCa
        | Purpose::CrictlConfig => FilePurpose::Other,
        Purpose::ContainerdConfig
        | Purpose::ContainerdHosts
        | Purpose::RegistryCa
        | Purpose::CrioConfig
        | Purpose::RegistriesConf => FilePurpose::Runtime,
        Purpose::Sysctl | Purpose::KernelModules | Purpose::NodeEnvironment => FilePurpose::Host,
        Purpose::CniConfig
        | Purpose::CniAgentConfig
        | Purpose::CniAgentUnit
        | Purpose::ClusterManifest
        | Purpose::HelmValues => FilePurpose::Cni,
        Purpose::KubeadmReset => FilePurpose::KubeadmReset,
        Purpose::KubeadmUpgrade | Purpose::KindConfig => return None,
    })
}

/// Render facts from the gathered ones (assumed facts for nodes not reached).
fn render_facts(
    cluster: &ValidCluster,
    nodes: &[NodeInfo],
    facts: &BTreeMap<String, NodeFacts>,
) -> clusterctl_render::Facts {
    let mut out = clusterctl_render::Facts::assumed(cluster);
    for (name, f) in facts.iter().filter(|(_, f)| f.known) {
        let entry = out.nodes.entry(name.clone()).or_default();
        if let Some(major) = f
            .containerd_version
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
            .map(|n| n.address.clone())
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

/// The renderer handed to the engine: `clusterctl_render::render` with the gathered facts, per-node
/// files mapped to the engine's purposes, cluster-wide manifests placed on the first control plane
/// under `/etc/clusterctl/`.
pub(crate) fn renderer(
    cluster: ValidCluster,
    nodes: Vec<NodeInfo>,
) -> impl Fn(&BTreeMap<String, NodeFacts>) -> Result<BTreeMap<String, Vec<NodeFile>>, String> + Send + Sync
{
    move |facts| {
        let rendered = clusterctl_render::render(&cluster, &render_facts(&cluster, &nodes, facts))
            .map_err(|e| e.to_string())?;
        let mut out: BTreeMap<String, Vec<NodeFile>> = BTreeMap::new();
        for (node, files) in &rendered.per_node {
            let list = out.entry(node.clone()).or_default();
            for f in files {
                if let Some(p) = purpose(f.purpose) {
                    list.push(NodeFile {
                        path: f.path.clone(),
                        mode: f.mode,
                        content: f.content.clone(),
                        purpose: p,
                    });
                }
            }
        }
        if let Some(first) = nodes.iter().find(|n| n.is_control_plane()) {
            let list = out.entry(first.name.clone()).or_default();
            for f in rendered
                .cluster
                .iter()
                .filter(|f| matches!(f.purpose, Purpose::ClusterManifest | Purpose::HelmValues))
            {
                list.push(NodeFile {
                    path: format!("/etc/clusterctl/{}", f.path.trim_start_matches('/')),
                    mode: f.mode,
                    content: f.content.clone(),
                    purpose: FilePurpose::Cni,
                });
            }
        }
        Ok(out)
    }
}

/// One transport per node. Offline dry-run: none. Docker provider: creates the node containers first
/// (or, when probing, uses those that exist) and fills in their addresses. SSH: connects to every node,
/// checking host keys. `plan` receives the provider steps for the dry-run output.
pub(crate) fn connect(
    cluster: &ValidCluster,
    spec: &mut UpSpec,
    args: &Args,
    plan: &mut Vec<String>,
) -> Result<BTreeMap<String, Arc<dyn Transport>>, String> {
    let mut out: BTreeMap<String, Arc<dyn Transport>> = BTreeMap::new();
    match cluster.provider() {
        Provider::Docker => {
            let options = docker_options(cluster, &spec.kubernetes_version);
            plan.push(format!(
                "create network {} (if missing)",
                cluster
                    .spec()
                    .docker
                    .network
                    .clone()
                    .unwrap_or_else(|| format!("clusterctl-{}", spec.cluster))
            ));
            for n in &spec.nodes {
                plan.push(
                    format!(
                        "create container {}-{} ({}, image {}){}",
                        spec.cluster,
                        n.name,
                        if n.is_control_plane() {
                            "control-plane"
                        } else {
                            "worker"
                        },
                        options.image,
                        if spec
                            .nodes
                            .iter()
                            .find(|m| m.is_control_plane())
                            .map(|m| &m.name)
                            == Some(&n.name)
                        {
                            ", API server published on 127.0.0.1"
                        } else {
                            ""
                        }
                    ) + &docker_plan_extras(&options, &n.name),
                );
            }
            if args.dry_run && !args.probe {
                return Ok(out);
            }
            let provider = clusterctl_exec::DockerProvider::new(spec.cluster.clone(), options)
                .map_err(|e| e.to_string())?;
            let specs: Vec<clusterctl_exec::NodeSpec> = spec
                .nodes
                .iter()
                .map(|n| {
                    clusterctl_exec::NodeSpec::new(
                        n.name.clone(),
                        exec_role(n.role),
                        n.address.clone(),
                    )
                })
                .collect();
            // A failed creation removes what it made when the cluster had no container before.
            let existed = args.dry_run || provider.list().map_or(true, |l| !l.is_empty());
            let nodes = if args.dry_run {
                provider.list()
            } else {
                provider
                    .create(&specs)
                    .and_then(|n| provider.wait_ready(NODE_BOOT_TIMEOUT).map(|_| n))
            }
            .map_err(|e| super::lifecycle::failed_create(&provider, existed, &e.to_string()))?;
            for dn in nodes {
                if let Some(n) = spec.nodes.iter_mut().find(|n| n.name == dn.name) {
                    n.address = dn.address.clone().unwrap_or_default();
                    out.insert(
                        dn.name.clone(),
                        Arc::new(provider.docker_transport(&dn.name)),
                    );
                }
            }
        }
        Provider::Ssh => {
            if args.dry_run && !args.probe {
                return Ok(out);
            }
            let mut errors = Vec::new();
            for (vn, n) in cluster.nodes().iter().zip(spec.nodes.iter()) {
                let known_hosts = args.nodes.known_hosts.as_deref();
                // Connecting may take minutes (retries with backoff): say which node is being
                // reached and how it went, one line each, on stderr.
                eprintln!(
                    "connecting to node {} ({}@{}:{}, up to {} attempt(s))…",
                    n.name, vn.ssh.user, n.address, vn.ssh.port, vn.ssh.connect_attempts
                );
                let started = std::time::Instant::now();
                let secs = || started.elapsed().as_secs_f64();
                match clusterctl_phases::reach::ssh_transport(vn, &n.address, known_hosts) {
                    Ok(t) => {
                        eprintln!("  node {}: connected ({:.1} s)", n.name, secs());
                        out.insert(n.name.clone(), Arc::new(t));
                    }
                    Err(e) => {
                        eprintln!("  node {}: not reached after {:.1} s", n.name, secs());
                        errors.push(format!("node {}: {e}", n.name));
                    }
                }
            }
            if !errors.is_empty() {
                return Err(format!(
                    "cannot reach every node:\n  {}",
                    errors.join("\n  ")
                ));
            }
        }
    }
    Ok(out)
}

/// How long node containers may take to boot (systemd `running` or `degraded`).
const NODE_BOOT_TIMEOUT: Duration = Duration::from_secs(120);

/// The docker provider's node options for Kubernetes `version` (`clusterctl_phases::reach::docker_options`).
fn docker_options(cluster: &ValidCluster, version: &str) -> clusterctl_exec::DockerNodeOptions {
    clusterctl_phases::reach::docker_options(cluster, &format!("v{version}"))
}

/// What `options` adds to node `node`'s container, for the dry-run plan: its published ports and the
/// memory and CPU limits (empty when none).
fn docker_plan_extras(options: &clusterctl_exec::DockerNodeOptions, node: &str) -> String {
    let mut out = String::new();
    for m in options.port_mappings.get(node).into_iter().flatten() {
        out += &format!(
            ", port {}:{}->{}/{}",
            m.listen_address, m.host_port, m.container_port, m.protocol
        );
    }
    if let Some(b) = options.memory {
        out += &format!(", memory {b} bytes");
    }
    if let Some(c) = options.nano_cpus {
        out += &format!(", cpus {}", c as f64 / 1e9);
    }
    out
}

/// For the docker provider: the API server as this machine reaches it, the first control plane's
/// 6443 published on 127.0.0.1 (the certificate checked against the endpoint host). An offline dry
/// run names the port `<port Docker assigns>` (the plan's kubeconfig line shows what `up` writes).
/// `None` for SSH nodes or when nothing is published.
pub(crate) fn local_api(
    cluster: &ValidCluster,
    spec: &UpSpec,
    args: &Args,
) -> Option<clusterctl_phases::up::api::LocalApi> {
    if cluster.provider() != Provider::Docker {
        return None;
    }
    if args.dry_run && !args.probe {
        return Some(clusterctl_phases::up::api::LocalApi {
            server: "https://127.0.0.1:<port Docker assigns>".into(),
            tls_server_name: cluster.endpoint().host.clone(),
        });
    }
    let provider = clusterctl_exec::DockerProvider::new(
        spec.cluster.clone(),
        docker_options(cluster, &spec.kubernetes_version),
    )
    .ok()?;
    let first = spec.nodes.iter().find(|n| n.is_control_plane())?;
    let port = provider
        .list()
        .ok()?
        .into_iter()
        .find(|n| n.name == first.name)?
        .api_server_port?;
    Some(clusterctl_phases::up::api::LocalApi {
        server: format!("https://127.0.0.1:{port}"),
        tls_server_name: cluster.endpoint().host.clone(),
    })
}

fn exec_role(r: Role) -> clusterctl_exec::Role {
    match r {
        Role::ControlPlane => clusterctl_exec::Role::ControlPlane,
        Role::Worker => clusterctl_exec::Role::Worker,
    }
}

/// Prints the dry-run plan: provider steps, then per node every check, command and file write.
fn print_plan(
    cluster: &ValidCluster,
    spec: &UpSpec,
    phases: &[clusterctl_phases::Phase<UpData>],
    provider_plan: &[String],
    plan: &[PlanEntry],
    probe: bool,
) {
    let cps = spec.nodes.iter().filter(|n| n.is_control_plane()).count();
    println!(
        "clusterctl up --dry-run: {} ({}): nothing is changed",
        spec.cluster,
        if probe {
            "probing the nodes read-only"
        } else {
            "offline: no node is contacted"
        }
    );
    println!(
        "cluster {}: Kubernetes v{}, provider {}, {} control plane(s) + {} worker(s), endpoint {}, runtime {}, CNI {}",
        spec.cluster,
        spec.kubernetes_version,
        format!("{:?}", cluster.provider()).to_lowercase(),
        cps,
        spec.nodes.len() - cps,
        spec.endpoint,
        spec.runtime.unit(),
        match &spec.cni {
            CniChoice::Builtin => "builtin".to_string(),
            CniChoice::Manifests(n) => n.clone(),
            CniChoice::None => "none".to_string(),
        }
    );
    println!(
        "phases: {}",
        phases
            .iter()
            .map(|p| p.name)
            .collect::<Vec<_>>()
            .join(" → ")
    );
    if !provider_plan.is_empty() {
        println!(
            "\nprovider {}:",
            format!("{:?}", cluster.provider()).to_lowercase()
        );
        for p in provider_plan {
            println!("  {p}");
        }
    }
    let width = phases.iter().map(|p| p.name.len()).max().unwrap_or(10);
    super::plan::print_entries(&super::plan::groups(&spec.nodes), plan, width);
}
