//! Shared by the day-2 commands (`status`, `image load`, `destroy`, `node`): loading the cluster file, reaching
//! its existing nodes (SSH hosts, or the Docker provider's labelled node containers — never creating
//! any), finding a kubeconfig for the API, and running one closure per node in parallel.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clusterctl_exec::{DockerNodeOptions, DockerProvider, Transport};
use clusterctl_kubeapi::KubeClusterApi;
use clusterctl_spec::model::Provider;
use clusterctl_spec::{ValidCluster, ValidNode};

/// Loads and validates `file`; on failure prints every diagnostic and returns exit code 2.
pub(crate) fn load_cluster(file: &std::path::Path) -> Result<ValidCluster, ExitCode> {
    match clusterctl_spec::load(file).and_then(|l| clusterctl_spec::validate(&l)) {
        Ok(v) => Ok(v.cluster),
        Err(d) => {
            eprintln!("{d}");
            Err(ExitCode::from(crate::EXIT_INVALID))
        }
    }
}

/// `~/x` with `$HOME` expanded.
pub(crate) fn expand_home(p: &str) -> PathBuf {
    match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(p),
    }
}

/// A connected transport, or why the node could not be reached.
type Connected = Result<Arc<dyn Transport>, String>;

/// Transports to nodes, and why the others could not be reached (node → reason).
pub(crate) struct Reached {
    /// Node name → transport.
    pub transports: BTreeMap<String, Arc<dyn Transport>>,
    /// Node name → why it could not be reached.
    pub errors: BTreeMap<String, String>,
}

/// The Docker provider of `cluster` (no container is created).
pub(crate) fn docker_provider(cluster: &ValidCluster) -> Result<DockerProvider, String> {
    let mut options = DockerNodeOptions::kind(&cluster.version_info().tag());
    options.image = cluster.docker_node_image();
    DockerProvider::new(cluster.name().to_string(), options).map_err(|e| e.to_string())
}

/// Reaches `nodes` of `cluster` (in parallel for SSH, checking host keys against `known_hosts`, default
/// `~/.ssh/known_hosts`). Docker provider: the running node containers labelled with the cluster name.
pub(crate) fn reach(
    cluster: &ValidCluster,
    nodes: &[&ValidNode],
    known_hosts: Option<&PathBuf>,
) -> Reached {
    let mut out = Reached {
        transports: BTreeMap::new(),
        errors: BTreeMap::new(),
    };
    match cluster.provider() {
        Provider::Docker => {
            let provider = match docker_provider(cluster) {
                Ok(p) => p,
                Err(e) => {
                    for n in nodes {
                        out.errors.insert(n.name.clone(), e.clone());
                    }
                    return out;
                }
            };
            let listed = provider.list().unwrap_or_default();
            for n in nodes {
                match listed.iter().find(|d| d.name == n.name) {
                    Some(d) if d.state == "running" => {
                        out.transports
                            .insert(n.name.clone(), Arc::new(provider.docker_transport(&n.name)));
                    }
                    Some(d) => {
                        out.errors.insert(
                            n.name.clone(),
                            format!("container {} is {}", d.container, d.state),
                        );
                    }
                    None => {
                        out.errors.insert(
                            n.name.clone(),
                            format!(
                                "no container {} (labelled for cluster {})",
                                provider.container_name(&n.name),
                                cluster.name()
                            ),
                        );
                    }
                }
            }
        }
        Provider::Ssh => {
            let known_hosts = known_hosts.cloned().or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".ssh/known_hosts"))
            });
            let results: Vec<(String, Connected)> = std::thread::scope(|s| {
                let handles: Vec<_> = nodes
                    .iter()
                    .map(|n| {
                        let kh = known_hosts.clone();
                        s.spawn(move || (n.name.clone(), ssh_connect(n, kh)))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            (String::new(), Err("connect thread panicked".into()))
                        })
                    })
                    .collect()
            });
            for (name, r) in results {
                match r {
                    Ok(t) => {
                        out.transports.insert(name, t);
                    }
                    Err(e) => {
                        out.errors.insert(name, e);
                    }
                }
            }
        }
    }
    out
}

fn ssh_connect(n: &ValidNode, known_hosts: Option<PathBuf>) -> Result<Arc<dyn Transport>, String> {
    let Some(address) = n.address else {
        return Err("no address in the cluster file".into());
    };
    let auth = match &n.ssh.key_file {
        Some(k) => clusterctl_exec::SshAuth::KeyFile {
            path: expand_home(k),
            passphrase: None,
        },
        None => clusterctl_exec::SshAuth::Agent,
    };
    let mut options = clusterctl_exec::SshOptions::new(auth);
    options.connect_retry.attempts = n.ssh.connect_attempts;
    if let Some(k) = known_hosts {
        options.known_hosts = k;
    }
    options.host_key_policy = match n.ssh.host_key_policy {
        clusterctl_spec::model::HostKeyPolicy::Strict => clusterctl_exec::HostKeyPolicy::Strict,
        _ => clusterctl_exec::HostKeyPolicy::TrustOnFirstUse,
    };
    let target = clusterctl_exec::SshTarget {
        node: n.name.clone(),
        host: address.to_string(),
        port: n.ssh.port,
        user: n.ssh.user.clone(),
    };
    clusterctl_exec::SshTransport::connect(target, options)
        .map(|t| Arc::new(t) as Arc<dyn Transport>)
        .map_err(|e| e.to_string())
}

/// Runs `f` on every transport in parallel; results keyed by node name.
pub(crate) fn on_each<T: Send>(
    transports: &BTreeMap<String, Arc<dyn Transport>>,
    f: impl Fn(&str, &dyn Transport) -> T + Sync,
) -> BTreeMap<String, T> {
    std::thread::scope(|s| {
        let handles: Vec<_> = transports
            .iter()
            .map(|(name, t)| {
                let f = &f;
                (name.clone(), s.spawn(move || f(name, t.as_ref())))
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|(n, h)| h.join().ok().map(|r| (n, r)))
            .collect()
    })
}

/// The kubeconfig path and context for the cluster's API: `kubeconfig` (its context named after the
/// cluster, else its current context); else the context named after the cluster in
/// `$KUBECONFIG`/`~/.kube/config` (the one `up` merges); else `/etc/kubernetes/admin.conf` fetched from
/// the first control plane over its transport and kept 0600 in the local cache
/// (`~/.cache/clusterctl/<cluster>/admin.conf`). Errors: a message naming what is missing.
pub(crate) fn kubeconfig_for(
    cluster: &ValidCluster,
    kubeconfig: Option<&PathBuf>,
    known_hosts: Option<&PathBuf>,
) -> Result<(PathBuf, Option<String>), String> {
    let name = cluster.name().to_string();
    let with_context = |p: &PathBuf| -> Option<String> {
        let text = std::fs::read_to_string(p).ok()?;
        clusterctl_kubeapi::kubeconfig::has_context(&text, &name).then(|| name.clone())
    };
    if let Some(p) = kubeconfig {
        return Ok((p.clone(), with_context(p)));
    }
    if let Some(p) = clusterctl_phases::up::kubeconfig::target(None) {
        if let Some(ctx) = with_context(&p) {
            return Ok((p, Some(ctx)));
        }
    }
    // Fetch admin.conf from the first control plane.
    let first = cluster.first_control_plane();
    let reached = reach(cluster, &[first], known_hosts);
    let Some(t) = reached.transports.get(&first.name) else {
        return Err(format!(
            "no kubeconfig context `{name}` and the first control plane {} cannot be reached: {}",
            first.name,
            reached.errors.get(&first.name).cloned().unwrap_or_default()
        ));
    };
    Ok((cache_admin_conf(cluster, t.as_ref())?, None))
}

/// Downloads `/etc/kubernetes/admin.conf` from the first control plane (`first`) and writes it 0600 to
/// the cluster's local cache directory (`~/.cache/clusterctl/<cluster>/admin.conf`); returns that path.
/// Errors: the download failed, the file is missing, or the cache is not writable (as text).
pub(crate) fn cache_admin_conf(
    cluster: &ValidCluster,
    first: &dyn Transport,
) -> Result<PathBuf, String> {
    let name = cluster.name();
    let admin = first
        .download(clusterctl_phases::up::ADMIN_CONF)
        .map_err(|e| format!("reading admin.conf on {}: {e}", first.node()))?
        .ok_or_else(|| {
            format!(
                "no context `{name}` in the kubeconfig and no {} on {}",
                clusterctl_phases::up::ADMIN_CONF,
                first.node()
            )
        })?;
    let dir = clusterctl_phases::local::cache_dir(name).ok_or("no cache directory: set HOME")?;
    let path = dir.join("admin.conf");
    clusterctl_phases::local::write_private(&path, 0o600, &admin)
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(path)
}

/// The cluster's API client: [`kubeconfig_for`], then the `kube` client for that file and context.
/// Errors: as [`kubeconfig_for`], or the kubeconfig does not give a usable client (as text).
pub(crate) fn cluster_api(
    cluster: &ValidCluster,
    kubeconfig: Option<&PathBuf>,
    known_hosts: Option<&PathBuf>,
) -> Result<KubeClusterApi, String> {
    let (path, context) = kubeconfig_for(cluster, kubeconfig, known_hosts)?;
    KubeClusterApi::from_kubeconfig(&path, context.as_deref()).map_err(|e| e.to_string())
}

/// The message for node containers that could not be created or did not boot (`error`): when the
/// cluster had no container before (`existed` false), what the attempt made is removed first (as
/// `destroy` would) and said so; when the engine refused a privileged container (rootless Docker, a
/// policy: `unable to apply caps: operation not permitted`), the settings for unprivileged nodes are
/// named.
pub(crate) fn failed_create(provider: &DockerProvider, existed: bool, error: &str) -> String {
    let mut msg = format!("creating the node containers failed: {error}");
    if !existed {
        match provider.remove_all() {
            Ok(r) if !r.containers.is_empty() || !r.networks.is_empty() => msg.push_str(&format!(
                "\n  removed what this attempt created: {}",
                r.containers
                    .iter()
                    .map(|c| format!("container {c}"))
                    .chain(r.networks.iter().map(|n| format!("network {n}")))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Ok(_) => {}
            Err(e) => msg.push_str(&format!(
                "\n  removing what this attempt created failed too ({e}): run `clusterctl destroy`"
            )),
        }
    }
    if let Some(hint) = privileged_hint(error) {
        msg.push_str("\n  hint: ");
        msg.push_str(hint);
    }
    msg
}

/// The hint for an engine that refuses privileged containers, when `error` is its refusal.
pub(crate) fn privileged_hint(error: &str) -> Option<&'static str> {
    let e = error.to_ascii_lowercase();
    let refused = e.contains("unable to apply caps")
        || (e.contains("privileged") && (e.contains("not permitted") || e.contains("not allowed")))
        || (e.contains("operation not permitted") && e.contains("cap"));
    refused.then_some(
        "this Docker engine refuses privileged containers (rootless Docker, or a policy): run the nodes unprivileged with `docker.runOptions.privileged: false` and `nodeEnvironment: unprivileged-container` (docs/spec.md, `spec.nodeEnvironment`)",
    )
}

/// Single-quotes `s` for `sh`.
pub(crate) fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::privileged_hint;

    #[test]
    fn the_engines_refusal_of_privileged_containers_gets_the_hint() {
        let raw = "Docker responded with status code 500: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: unable to apply caps: operation not permitted: unknown";
        assert!(privileged_hint(raw)
            .is_some_and(|h| h.contains("nodeEnvironment: unprivileged-container")));
        assert!(privileged_hint("no such image kindest/node:v1.34.1").is_none());
    }
}
