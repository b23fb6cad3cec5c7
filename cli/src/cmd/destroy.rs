//! `clusterctl destroy -f FILE|--profile NAME [--yes] [--purge]`: tears the cluster down, best effort per node, with a
//! summary.
//!
//! Docker provider: removes the cluster's labelled node containers (with their anonymous volumes) and
//! its network. SSH provider: workers first, then the other control planes, the first control plane
//! last; on each node, in order:
//! 1. `kubeadm reset -f --config /etc/kubernetes/kubeadm/reset.yaml` (the rendered v1beta4
//!    ResetConfiguration, uploaded first), when kubeadm is installed; a kubeadm that refuses to mix
//!    `--force` with `--config` is answered `y` on its prompt instead;
//! 2. the builtin CNI's agent unit stopped and disabled;
//! 3. network: the VXLAN device (`cc-vxlan`, `clusterctl.1`), the masquerade rule in either of its
//!    forms (nftables table `ip clusterctl-cni`; iptables jump tagged `clusterctl-cni` in `nat
//!    POSTROUTING` and the chain `CLUSTERCTL-CNI-MASQ`) and, on control planes, the kube-vip VIP
//!    wherever it is still assigned;
//! 4. restore (the undo record, `clusterctl_phases::undo`): runtime configuration files `up` replaced
//!    are copied back (and the runtime restarted), `/etc/fstab` and the swap devices `--fix` turned
//!    off are restored;
//! 5. every file clusterctl rendered for the node (the render plan; the runtime's own config only when
//!    recorded and not restored) or recorded as placed (`/var/lib/clusterctl/state.json`), the CNI
//!    config, plugin binary and IPAM state, the `--fix` module and sysctl files, removed;
//! 6. with `--purge` only: the Kubernetes packages (kubeadm, kubelet, kubectl, cri-tools,
//!    kubernetes-cni and the file's `airgap.packages`) purged (`dpkg --purge`, or `rpm -e`);
//! 7. `systemctl daemon-reload`.
//!
//! Then, on this machine, the kubeconfig context named after the cluster (with its cluster and user)
//! and the local state cache are removed. Asks for confirmation unless `--yes`.
//! Exit codes: 0 everything removed, 1 some step failed (each named), 2 invalid input or not confirmed.

use std::collections::BTreeSet;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clusterctl_exec::{Cmd, FileSpec, Transport};
use clusterctl_render::kubeadm::RESET_PATH;
use clusterctl_render::Purpose;
use clusterctl_spec::model::Provider;
use clusterctl_spec::{ValidCluster, ValidNode};

use super::lifecycle::{self, reach, sh_quote};

/// Arguments of `clusterctl destroy`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The cluster file (or `--profile`).
    #[command(flatten)]
    pub target: super::flags::Target,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// The kubeconfig to remove the cluster's context from (default: `$KUBECONFIG` or `~/.kube/config`).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
    /// Also purge the Kubernetes packages from every node (SSH provider).
    #[arg(long)]
    pub purge: bool,
}

/// Packages `--purge` removes (when installed), besides the cluster file's `airgap.packages`.
pub(crate) const K8S_PACKAGES: &[&str] = &[
    "kubeadm",
    "kubelet",
    "kubectl",
    "cri-tools",
    "kubernetes-cni",
];

/// What a node's teardown needs besides its transport and rendered files.
#[derive(Debug, Clone, Default)]
pub(crate) struct Teardown {
    /// The kube-vip VIP to take off the node's interfaces (control planes of a cluster with a VIP).
    pub vip: Option<String>,
    /// Packages to purge; empty: none (no `--purge`).
    pub purge: Vec<String>,
}

impl Teardown {
    /// The teardown of `node` of `cluster`; `purge`: with `--purge`.
    pub(crate) fn of(cluster: &ValidCluster, node: &ValidNode, purge: bool) -> Self {
        let mut packages: Vec<String> = Vec::new();
        if purge {
            packages.extend(K8S_PACKAGES.iter().map(|p| p.to_string()));
            if let Some(a) = &cluster.spec().airgap {
                for p in &a.packages {
                    if !packages.contains(&p.name) {
                        packages.push(p.name.clone());
                    }
                }
            }
        }
        Teardown {
            vip: node
                .is_control_plane()
                .then(|| cluster.vip().map(|v| v.to_string()))
                .flatten(),
            purge: packages,
        }
    }
}

/// VXLAN devices the builtin CNI creates (the agent's default name, and the documented `clusterctl.<VNI>`).
pub(crate) const VXLAN_DEVICES: &[&str] = &["cc-vxlan", "clusterctl.1"];

/// Paths clusterctl installs on every node besides the rendered files.
pub(crate) const INSTALLED_PATHS: &[&str] = &[
    "/etc/cni/net.d/10-clusterctl.conflist",
    "/opt/cni/bin/clusterctl-cni",
    "/usr/local/bin/clusterctl",
    "/etc/clusterctl",
    "/var/lib/clusterctl",
    "/var/lib/cni/clusterctl",
    "/run/clusterctl-cni",
    "/etc/kubernetes/kubeadm",
    "/etc/modules-load.d/clusterctl.conf",
    "/etc/sysctl.d/99-clusterctl.conf",
];

/// Rendered files removed only when the state record says clusterctl placed them (a runtime config may
/// have existed before).
pub(crate) const RUNTIME_CONFIG: &[Purpose] = &[
    Purpose::ContainerdConfig,
    Purpose::CrioConfig,
    Purpose::RegistriesConf,
];

/// The order nodes are torn down in: workers, then control planes other than the first, then the first.
pub(crate) fn teardown_order(cluster: &ValidCluster) -> Vec<&ValidNode> {
    let first = cluster.first_control_plane().name.clone();
    let mut out: Vec<&ValidNode> = cluster.workers().collect();
    out.extend(cluster.control_planes().filter(|n| n.name != first));
    out.extend(cluster.control_planes().filter(|n| n.name == first));
    out
}

/// Runs the command (exit codes in the module doc).
pub(crate) fn run(args: Args) -> miette::Result<ExitCode> {
    let cluster = match args.target.load(super::flags::Format::Text) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    if !args.yes && !confirm(&cluster) {
        eprintln!("destroy: not confirmed; nothing was changed");
        return Ok(ExitCode::from(crate::EXIT_INVALID));
    }
    let mut failures = 0usize;
    // Whether anything of the cluster was found and removed (an SSH node reset always is).
    let mut found = false;
    match cluster.provider() {
        Provider::Docker => {
            let (f, removed) = destroy_docker(&cluster);
            failures += f;
            found |= removed;
        }
        Provider::Ssh => {
            failures += destroy_ssh(&cluster, &args);
            found = true;
        }
    }
    let (f, removed) = cleanup_local(&cluster, &args);
    failures += f;
    found |= removed;
    if failures == 0 && !found {
        println!(
            "destroy: cluster {} not found (no node container, network, kubeconfig context or local state): nothing was removed",
            cluster.name()
        );
        Ok(ExitCode::SUCCESS)
    } else if failures == 0 {
        println!("destroy: cluster {} removed", cluster.name());
        Ok(ExitCode::SUCCESS)
    } else {
        println!("destroy: cluster {}: {failures} step(s) failed (see above); run destroy again after fixing them", cluster.name());
        Ok(ExitCode::FAILURE)
    }
}

/// `clusterctl up --recreate`: destroys `cluster` as `destroy --yes` does (every node reset, the
/// kubeconfig context and the local state cache removed) before `up` builds it again, so that no
/// recorded phase is skipped. A dry run only says so. `None`: go on with `up`; `Some(code)`: stop
/// (exit code 1 when a teardown step failed; each is printed).
pub(crate) fn before_recreate(
    cluster: &ValidCluster,
    kubeconfig: Option<&PathBuf>,
    known_hosts: Option<&PathBuf>,
    dry_run: bool,
) -> Option<ExitCode> {
    if dry_run {
        println!(
            "--recreate: cluster {} would be destroyed first (as `clusterctl destroy --yes`)",
            cluster.name()
        );
        return None;
    }
    let args = Args {
        target: super::flags::Target {
            file: PathBuf::new(),
            profile: None,
        },
        yes: true,
        kubeconfig: kubeconfig.cloned(),
        known_hosts: known_hosts.cloned(),
        purge: false,
    };
    let mut failures = match cluster.provider() {
        Provider::Docker => destroy_docker(cluster).0,
        Provider::Ssh => destroy_ssh(cluster, &args),
    };
    failures += cleanup_local(cluster, &args).0;
    if failures == 0 {
        println!(
            "recreate: cluster {} destroyed; building it again",
            cluster.name()
        );
        None
    } else {
        eprintln!(
            "up --recreate: destroying cluster {} failed in {failures} step(s) (see above); not building it again",
            cluster.name()
        );
        Some(ExitCode::FAILURE)
    }
}

fn confirm(cluster: &ValidCluster) -> bool {
    let stdin = std::io::stdin();
    eprint!(
        "Destroy cluster {} ({} node(s), provider {:?})? This resets every node. Type yes: ",
        cluster.name(),
        cluster.nodes().len(),
        cluster.provider()
    );
    let _ = std::io::stderr().flush();
    if !stdin.is_terminal() {
        eprintln!();
    }
    let mut line = String::new();
    if stdin.lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim(), "yes" | "y")
}

/// Removes the cluster's node containers and network; returns (failures, whether anything was
/// removed). Prints only what it removed.
fn destroy_docker(cluster: &ValidCluster) -> (usize, bool) {
    let provider = match lifecycle::docker_provider(cluster) {
        Ok(p) => p,
        Err(e) => {
            println!("docker: FAILED: {e}");
            return (1, false);
        }
    };
    let listed = provider.list().unwrap_or_default();
    match provider.remove_all() {
        Ok(removed) => {
            for c in &removed.containers {
                let node = listed
                    .iter()
                    .find(|d| &d.container == c)
                    .map_or(c.as_str(), |d| d.name.as_str());
                println!("{node}: container {c} removed");
            }
            for n in &removed.networks {
                println!("docker: network {n} removed");
            }
            if removed.containers.is_empty() && removed.networks.is_empty() {
                println!(
                    "docker: no container or network of cluster {} on this engine",
                    cluster.name()
                );
            } else {
                println!(
                    "docker: {} container(s) and {} network(s) removed",
                    removed.containers.len(),
                    removed.networks.len()
                );
            }
            (
                0,
                !removed.containers.is_empty() || !removed.networks.is_empty(),
            )
        }
        Err(e) => {
            println!("docker: FAILED: {e}");
            (1, false)
        }
    }
}

fn destroy_ssh(cluster: &ValidCluster, args: &Args) -> usize {
    let rendered =
        clusterctl_render::render(cluster, &clusterctl_render::Facts::assumed(cluster)).ok();
    let order = teardown_order(cluster);
    let reached = reach(cluster, &order, args.known_hosts.as_ref());
    let mut failures = 0;
    for n in order {
        let Some(t) = reached.transports.get(&n.name) else {
            failures += 1;
            println!(
                "{}: FAILED: cannot reach: {}",
                n.name,
                reached.errors.get(&n.name).cloned().unwrap_or_default()
            );
            continue;
        };
        let files: Vec<&clusterctl_render::RenderedFile> = rendered
            .as_ref()
            .and_then(|r| r.per_node.get(&n.name))
            .map(|v| v.iter().collect())
            .unwrap_or_default();
        let teardown = Teardown::of(cluster, n, args.purge);
        let steps = reset_node(cluster.name(), &n.name, t.as_ref(), &files, &teardown);
        for (step, result) in steps {
            match result {
                Ok(done) => println!("{}: {step}: {done}", n.name),
                Err(e) => {
                    failures += 1;
                    println!("{}: {step}: FAILED: {e}", n.name);
                }
            }
        }
    }
    failures
}

fn run_step(t: &dyn Transport, script: &str) -> Result<String, String> {
    let out = t.run(&Cmd::new(script).sudo()).map_err(|e| e.to_string())?;
    if out.success() {
        Ok(out.stdout_str())
    } else {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Err(format!(
            "exit {}: {}",
            out.status,
            if err.is_empty() {
                out.stdout_str()
            } else {
                err
            }
        ))
    }
}

/// Resets one node (steps in the module doc); every step is attempted and reported
/// as (step, Ok(what was done) | Err(why)).
pub(crate) fn reset_node(
    cluster: &str,
    node: &str,
    t: &dyn Transport,
    rendered: &[&clusterctl_render::RenderedFile],
    teardown: &Teardown,
) -> Vec<(&'static str, Result<String, String>)> {
    let mut steps = Vec::new();
    // 1. kubeadm reset.
    let has_kubeadm = run_step(
        t,
        "command -v kubeadm >/dev/null 2>&1 && echo yes || echo no",
    )
    .map(|s| s == "yes")
    .unwrap_or(false);
    if has_kubeadm {
        let mut r = Ok(String::new());
        if let Some(f) = rendered.iter().find(|f| f.path == RESET_PATH) {
            r = t
                .upload(
                    &f.content,
                    &FileSpec {
                        path: PathBuf::from(RESET_PATH),
                        mode: f.mode,
                        owner: None,
                    },
                )
                .map_err(|e| e.to_string())
                .map(|_| String::new());
        }
        let r = r.and_then(|_| {
            run_step(
                t,
                &format!(
                    "if [ -f {RESET_PATH} ]; then \
                     out=$(kubeadm reset -f --config {RESET_PATH} 2>&1) || case \"$out\" in \
                       *'can not mix'*) printf 'y\\n' | kubeadm reset --config {RESET_PATH} >/dev/null ;; \
                       *) printf '%s\\n' \"$out\" >&2; exit 1 ;; esac; \
                     else kubeadm reset -f >/dev/null; fi"
                ),
            )
        });
        steps.push(("kubeadm reset", r.map(|_| "done".to_string())));
    } else {
        steps.push((
            "kubeadm reset",
            Ok("skipped (kubeadm not installed)".to_string()),
        ));
    }
    // 2. clusterctl's own units (the CNI agent; the node environment of unprivileged-container nodes),
    // stopped and disabled before their files go, so no `*.wants/` link is left dangling.
    steps.push(("units", run_step(t, &units_script())));
    // 3. VXLAN device and masquerade table.
    let mut net = String::from("out=''; ");
    for d in VXLAN_DEVICES {
        net.push_str(&format!(
            "if ip link show dev {d} >/dev/null 2>&1; then ip link del dev {d} && out=\"$out link {d} deleted;\"; fi; "
        ));
    }
    net.push_str(&masquerade_script());
    if let Some(vip) = &teardown.vip {
        net.push_str(&vip_script(vip));
    }
    net.push_str("echo \"${out:-nothing to remove}\"");
    steps.push(("network", run_step(t, &net)));
    // 4. Restore what `up` replaced (undo record).
    let restore = run_step(
        t,
        &format!(
            "{}\n{}",
            clusterctl_phases::undo::RESTORE_SCRIPT,
            clusterctl_phases::undo::RESTORE_HOST_SCRIPT
        ),
    );
    let restored = restore
        .as_ref()
        .map(|o| clusterctl_phases::undo::restored_paths(o))
        .unwrap_or_default();
    let restore = restore.and_then(|o| {
        let runtime_restart = restart_runtime_script(&restored);
        let mut done: Vec<String> = o.lines().map(str::to_string).collect();
        if !runtime_restart.is_empty() {
            done.push(run_step(t, &runtime_restart)?);
        }
        Ok(if done.is_empty() {
            "nothing recorded".to_string()
        } else {
            done.join("; ")
        })
    });
    steps.push(("restore", restore));
    // 5. Files: rendered, recorded in the state, installed (not what was just restored).
    let recorded: BTreeSet<String> = match t.download(clusterctl_phases::state::STATE_PATH) {
        Ok(Some(bytes)) => clusterctl_phases::state::NodeState::parse(&bytes, cluster, node)
            .map(|s| s.files.keys().cloned().collect())
            .unwrap_or_default(),
        _ => BTreeSet::new(),
    };
    // The runtime's own config may have been there before clusterctl: removed only when recorded.
    let mut paths: BTreeSet<String> = rendered
        .iter()
        .filter(|f| !RUNTIME_CONFIG.contains(&f.purpose) || recorded.contains(&f.path))
        .map(|f| f.path.clone())
        .collect();
    paths.extend(recorded);
    paths.extend(INSTALLED_PATHS.iter().map(|s| s.to_string()));
    let paths: Vec<String> = paths
        .into_iter()
        .filter(|p| p.starts_with('/') && p.len() > 1 && !p.contains("/../"))
        .filter(|p| !restored.contains(p))
        .collect();
    let mut script = String::from("n=0; ");
    for p in &paths {
        let q = sh_quote(p);
        script.push_str(&format!(
            "if [ -e {q} ] || [ -L {q} ]; then rm -rf -- {q} && n=$((n+1)); fi; "
        ));
    }
    script.push_str("echo \"$n path(s) removed\"");
    steps.push(("files", run_step(t, &script)));
    // 6. Packages, only with --purge.
    if !teardown.purge.is_empty() {
        steps.push(("packages", run_step(t, &purge_script(&teardown.purge))));
    }
    // 7. systemd.
    steps.push((
        "systemd",
        run_step(t, "if command -v systemctl >/dev/null 2>&1; then systemctl daemon-reload && echo reloaded; else echo 'no systemd'; fi"),
    ));
    steps
}

/// The units `up` installs and enables on a node, by name: the CNI agent (`phases`' `AGENT_UNIT`)
/// and the node environment of unprivileged-container nodes (the file name of render's
/// `NODE_ENV_UNIT`).
fn units() -> [&'static str; 2] {
    let node_env = clusterctl_render::host::NODE_ENV_UNIT;
    [
        clusterctl_phases::up::cni::AGENT_UNIT,
        node_env.rsplit('/').next().unwrap_or(node_env),
    ]
}

/// The shell script stopping and disabling each of [`units`] the node has, printing which
/// (`no unit` when none).
fn units_script() -> String {
    let mut script = String::from("out=''; if command -v systemctl >/dev/null 2>&1; then ");
    for u in units() {
        script.push_str(&format!(
            "if systemctl cat {u} >/dev/null 2>&1; then systemctl disable --now {u} >/dev/null 2>&1 || true; out=\"$out {u} disabled;\"; fi; "
        ));
    }
    script.push_str("fi; echo \"${out:-no unit}\"");
    script
}

/// The shell fragment removing the masquerade rule in both forms (see `clusterctl_cni::agent::masq`),
/// appending what it removed to `$out`.
pub(crate) fn masquerade_script() -> String {
    use clusterctl_cni::agent::masq::{CHAIN, COMMENT, TABLE};
    format!(
        "if command -v nft >/dev/null 2>&1 && nft list table ip {TABLE} >/dev/null 2>&1; then \
         nft delete table ip {TABLE} && out=\"$out nft table {TABLE} deleted;\"; fi; \
         if command -v iptables >/dev/null 2>&1; then \
         while iptables -w -t nat -D POSTROUTING -m comment --comment {COMMENT} -j {CHAIN} 2>/dev/null; do \
         out=\"$out iptables jump to {CHAIN} deleted;\"; done; \
         if iptables -w -t nat -F {CHAIN} 2>/dev/null; then iptables -w -t nat -X {CHAIN} && \
         out=\"$out iptables chain {CHAIN} deleted;\"; fi; fi; "
    )
}

/// The shell fragment taking the address `vip` off every interface that still holds it (kube-vip
/// assigns it as `<vip>/32` in ARP mode), appending what it removed to `$out`.
pub(crate) fn vip_script(vip: &str) -> String {
    let v = sh_quote(vip);
    format!(
        "for a in $(ip -o addr show | awk -v v={v} '{{split($4, x, \"/\"); if (x[1] == v) print $2 \"|\" $4}}'); do \
         ip addr del \"${{a#*|}}\" dev \"${{a%%|*}}\" && out=\"$out address ${{a#*|}} removed from ${{a%%|*}};\"; done; "
    )
}

/// Restarts the container runtime whose configuration was among `restored`, when it is running.
fn restart_runtime_script(restored: &[String]) -> String {
    let unit = if restored.iter().any(|p| p.starts_with("/etc/containerd/")) {
        "containerd"
    } else if restored
        .iter()
        .any(|p| p.starts_with("/etc/crio/") || p.starts_with("/etc/containers/"))
    {
        "crio"
    } else {
        return String::new();
    };
    format!(
        "if systemctl is-active --quiet {unit}; then systemctl restart {unit} && echo '{unit} restarted'; else echo '{unit} not running'; fi"
    )
}

/// Purges the installed ones of `packages` (Debian family: `dpkg --purge`, all at once so that they
/// may depend on each other; EL: `rpm -e`); prints what it purged.
pub(crate) fn purge_script(packages: &[String]) -> String {
    let list: Vec<String> = packages.iter().map(|p| sh_quote(p)).collect();
    format!(
        "pk=''; for p in {list}; do \
         if command -v dpkg-query >/dev/null 2>&1; then \
           dpkg-query -W -f='${{Status}}' \"$p\" 2>/dev/null | grep -q 'install ok installed' && pk=\"$pk $p\"; \
         elif command -v rpm >/dev/null 2>&1; then rpm -q \"$p\" >/dev/null 2>&1 && pk=\"$pk $p\"; fi; done; \
         if [ -z \"$pk\" ]; then echo 'none installed'; \
         elif command -v dpkg >/dev/null 2>&1; then apt-mark unhold $pk >/dev/null 2>&1 || true; \
           dpkg --purge $pk >/dev/null && echo \"purged:$pk\"; \
         else rpm -e $pk && echo \"removed:$pk\"; fi",
        list = list.join(" ")
    )
}

/// Removes the kubeconfig context and the local cache; returns (the number of failures, whether
/// anything was removed).
fn cleanup_local(cluster: &ValidCluster, args: &Args) -> (usize, bool) {
    let mut failures = 0;
    let mut removed = false;
    let name = cluster.name();
    if let Some(path) = clusterctl_phases::up::kubeconfig::target(args.kubeconfig.as_ref()) {
        if let Ok(text) = std::fs::read_to_string(&path) {
            match clusterctl_kubeapi::kubeconfig::remove_context(&text, name) {
                Ok((new, true)) => {
                    match clusterctl_phases::local::write_private(&path, 0o600, new.as_bytes()) {
                        Ok(()) => {
                            removed = true;
                            println!("kubeconfig: context {name} removed from {}", path.display())
                        }
                        Err(e) => {
                            failures += 1;
                            println!("kubeconfig: FAILED: writing {}: {e}", path.display());
                        }
                    }
                }
                Ok((_, false)) => println!("kubeconfig: no context {name} in {}", path.display()),
                Err(e) => {
                    failures += 1;
                    println!("kubeconfig: FAILED: {e}");
                }
            }
        }
    }
    if let Some(dir) = clusterctl_phases::local::cache_dir(name) {
        if dir.exists() {
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => {
                    removed = true;
                    println!("cache: {} removed", dir.display())
                }
                Err(e) => {
                    failures += 1;
                    println!("cache: FAILED: removing {}: {e}", dir.display());
                }
            }
        }
    }
    (failures, removed)
}
