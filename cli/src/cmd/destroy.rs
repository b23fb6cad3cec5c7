//! `clusterctl destroy -f FILE [--yes]`: tears the cluster down, best effort per node, with a summary.
//!
//! Docker provider: removes the cluster's labelled node containers (with their anonymous volumes) and
//! its network. SSH provider: workers first, then the other control planes, the first control plane
//! last; on each node, in order:
//! 1. `kubeadm reset -f --config /etc/kubernetes/kubeadm/reset.yaml` (the rendered v1beta4
//!    ResetConfiguration, uploaded first), when kubeadm is installed; a kubeadm that refuses to mix
//!    `--force` with `--config` is answered `y` on its prompt instead;
//! 2. the builtin CNI's agent unit stopped and disabled;
//! 3. the VXLAN device (`cc-vxlan`, `clusterctl.1`) and the masquerade nftables table
//!    (`clusterctl-cni`) deleted;
//! 4. every file clusterctl rendered for the node (the render plan; the runtime's own config only when
//!    recorded) or recorded as placed (`/var/lib/clusterctl/state.json`), the CNI config, plugin
//!    binary and IPAM state, removed;
//! 5. `systemctl daemon-reload`.
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
pub struct Args {
    /// The cluster file.
    #[arg(short = 'f', long = "file", default_value = "cluster.yaml")]
    pub file: PathBuf,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// The kubeconfig to remove the cluster's context from (default: `$KUBECONFIG` or `~/.kube/config`).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
}

/// VXLAN devices the builtin CNI creates (the agent's default name, and the documented `clusterctl.<VNI>`).
pub const VXLAN_DEVICES: &[&str] = &["cc-vxlan", "clusterctl.1"];

/// Paths clusterctl installs on every node besides the rendered files.
pub const INSTALLED_PATHS: &[&str] = &[
    "/etc/cni/net.d/10-clusterctl.conflist",
    "/opt/cni/bin/clusterctl-cni",
    "/usr/local/bin/clusterctl",
    "/etc/clusterctl",
    "/var/lib/clusterctl",
    "/var/lib/cni/clusterctl",
    "/run/clusterctl-cni",
    "/etc/kubernetes/kubeadm",
];

/// Rendered files removed only when the state record says clusterctl placed them (a runtime config may
/// have existed before).
pub const RUNTIME_CONFIG: &[Purpose] = &[
    Purpose::ContainerdConfig,
    Purpose::CrioConfig,
    Purpose::RegistriesConf,
];

/// The order nodes are torn down in: workers, then control planes other than the first, then the first.
pub fn teardown_order(cluster: &ValidCluster) -> Vec<&ValidNode> {
    let first = cluster.first_control_plane().name.clone();
    let mut out: Vec<&ValidNode> = cluster.workers().collect();
    out.extend(cluster.control_planes().filter(|n| n.name != first));
    out.extend(cluster.control_planes().filter(|n| n.name == first));
    out
}

/// Runs the command (exit codes in the module doc).
pub fn run(args: Args) -> miette::Result<ExitCode> {
    let cluster = match lifecycle::load_cluster(&args.file) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    if !args.yes && !confirm(&cluster) {
        eprintln!("destroy: not confirmed; nothing was changed");
        return Ok(ExitCode::from(crate::EXIT_INVALID));
    }
    let mut failures = 0usize;
    match cluster.provider() {
        Provider::Docker => failures += destroy_docker(&cluster),
        Provider::Ssh => failures += destroy_ssh(&cluster, &args),
    }
    failures += cleanup_local(&cluster, &args);
    if failures == 0 {
        println!("destroy: cluster {} removed", cluster.name());
        Ok(ExitCode::SUCCESS)
    } else {
        println!("destroy: cluster {}: {failures} step(s) failed (see above); run destroy again after fixing them", cluster.name());
        Ok(ExitCode::FAILURE)
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

fn destroy_docker(cluster: &ValidCluster) -> usize {
    let provider = match lifecycle::docker_provider(cluster) {
        Ok(p) => p,
        Err(e) => {
            println!("docker: FAILED: {e}");
            return 1;
        }
    };
    let listed = provider.list().unwrap_or_default();
    match provider.remove() {
        Ok(n) => {
            for d in &listed {
                println!("{}: container {} removed", d.name, d.container);
            }
            println!(
                "docker: {n} container(s) and network {} removed",
                provider.network_name()
            );
            0
        }
        Err(e) => {
            println!("docker: FAILED: {e}");
            1
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
        let steps = reset_node(cluster.name(), &n.name, t.as_ref(), &files);
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
pub fn reset_node(
    cluster: &str,
    node: &str,
    t: &dyn Transport,
    rendered: &[&clusterctl_render::RenderedFile],
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
    // 2. CNI agent unit.
    steps.push((
        "cni agent",
        run_step(
            t,
            "if command -v systemctl >/dev/null 2>&1 && systemctl cat clusterctl-cni-agent.service >/dev/null 2>&1; then \
             systemctl disable --now clusterctl-cni-agent.service >/dev/null 2>&1 || true; echo stopped; else echo 'no unit'; fi",
        ),
    ));
    // 3. VXLAN device and masquerade table.
    let mut net = String::from("out=''; ");
    for d in VXLAN_DEVICES {
        net.push_str(&format!(
            "if ip link show dev {d} >/dev/null 2>&1; then ip link del dev {d} && out=\"$out link {d} deleted;\"; fi; "
        ));
    }
    net.push_str(
        "if command -v nft >/dev/null 2>&1 && nft list table ip clusterctl-cni >/dev/null 2>&1; then \
         nft delete table ip clusterctl-cni && out=\"$out nft table clusterctl-cni deleted;\"; fi; \
         echo \"${out:-nothing to remove}\"",
    );
    steps.push(("network", run_step(t, &net)));
    // 4. Files: rendered, recorded in the state, installed.
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
    // 5. systemd.
    steps.push((
        "systemd",
        run_step(t, "if command -v systemctl >/dev/null 2>&1; then systemctl daemon-reload && echo reloaded; else echo 'no systemd'; fi"),
    ));
    steps
}

/// Removes the kubeconfig context and the local cache; returns the number of failures.
fn cleanup_local(cluster: &ValidCluster, args: &Args) -> usize {
    let mut failures = 0;
    let name = cluster.name();
    if let Some(path) = clusterctl_phases::up::kubeconfig::target(args.kubeconfig.as_ref()) {
        if let Ok(text) = std::fs::read_to_string(&path) {
            match clusterctl_kubeapi::kubeconfig::remove_context(&text, name) {
                Ok((new, true)) => {
                    match clusterctl_phases::local::write_private(&path, 0o600, new.as_bytes()) {
                        Ok(()) => {
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
                Ok(()) => println!("cache: {} removed", dir.display()),
                Err(e) => {
                    failures += 1;
                    println!("cache: FAILED: removing {}: {e}", dir.display());
                }
            }
        }
    }
    failures
}
