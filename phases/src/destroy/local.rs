//! `destroy`'s phases on this machine: the Docker provider's node containers and network, the
//! kubeconfig context named after the cluster, and the local state cache.

use std::sync::atomic::Ordering;

use super::Data;
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::steps::{reason, StepLine, StepOutcome};

fn say(data: &Data<'_>, subject: &str, outcome: StepOutcome) {
    data.steps.push(StepLine::new(subject, outcome));
}

/// `docker`: removes the cluster's node containers (with their anonymous volumes), its local registry
/// and API load balancer containers, and its network
/// (kept while other containers use it); says what it removed, or that there was nothing.
pub(super) fn docker(ctx: &mut NodeCtx, data: &Data<'_>) -> Result<(), PhaseError> {
    let name = data.cluster.name();
    let provider = match crate::reach::docker_provider(data.cluster) {
        Ok(p) => p,
        Err(e) => {
            say(data, "docker", StepOutcome::Failed(e.to_string()));
            return Ok(());
        }
    };
    let listed = provider.list().unwrap_or_default();
    // Each container and the network are planned as changes of their own (listed read-only); the
    // run removes them in one call (`remove_all`) and then says what it removed.
    if ctx.mode.dry_run {
        for d in &listed {
            ctx.local_change(
                &format!(
                    "remove container {} (node {}) with its anonymous volumes",
                    d.container, d.name
                ),
                || Ok::<(), String>(()),
            )?;
        }
        if let Ok(Some(lb)) = provider.load_balancer() {
            ctx.local_change(
                &format!("remove container {} (the API load balancer)", lb.name),
                || Ok::<(), String>(()),
            )?;
        }
        ctx.local_change(
            &format!(
                "remove network {} when it was created for the cluster and no other container uses it",
                provider.network_name()
            ),
            || Ok::<(), String>(()),
        )?;
        return Ok(());
    }
    let mut removed = None;
    let what = format!("remove the node containers and the network of cluster {name}");
    if let Err(e) = ctx.local_change(&what, || provider.remove_all().map(|r| removed = Some(r))) {
        say(data, "docker", StepOutcome::Failed(reason(&e)));
        return Ok(());
    }
    let removed = removed.unwrap_or_default();
    for c in &removed.containers {
        let node = listed
            .iter()
            .find(|d| &d.container == c)
            .map_or(c.as_str(), |d| d.name.as_str());
        say(
            data,
            node,
            StepOutcome::Done(format!("container {c} removed")),
        );
    }
    for n in &removed.networks {
        say(
            data,
            "docker",
            StepOutcome::Done(format!("network {n} removed")),
        );
    }
    if removed.containers.is_empty() && removed.networks.is_empty() {
        say(
            data,
            "docker",
            StepOutcome::Done(format!(
                "no container or network of cluster {name} on this engine"
            )),
        );
    } else {
        data.found.store(true, Ordering::SeqCst);
        say(
            data,
            "docker",
            StepOutcome::Done(format!(
                "{} container(s) and {} network(s) removed",
                removed.containers.len(),
                removed.networks.len()
            )),
        );
    }
    Ok(())
}

/// The subjects (nodes, `docker`) of the teardown steps that failed so far: while one is left, the cluster
/// may still run, and the kubeconfig context and the local state cache are what reach it.
fn not_torn_down(data: &Data<'_>) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for l in data.steps.lines() {
        let own = l.subject == "kubeconfig" || l.subject == "cache";
        if l.failed() && !own && !v.contains(&l.subject) {
            v.push(l.subject);
        }
    }
    v
}

/// Says that `what` is kept because `left` were not torn down; `true` when it is kept.
fn kept_for(data: &Data<'_>, subject: &str, what: &str) -> bool {
    let left = not_torn_down(data);
    if left.is_empty() {
        return false;
    }
    say(
        data,
        subject,
        StepOutcome::Done(format!(
            "{what} kept: {} not torn down (see above), so the cluster may still run; run destroy again once that is mended",
            left.join(", ")
        )),
    );
    true
}

/// `kubeconfig`: removes exactly the cluster's entries (context, cluster and user
/// `clusterctl-<cluster>`, or an earlier release's; `current-context` unset when it named them) from
/// every kubeconfig file kubectl would read (`--kubeconfig`, each file of `$KUBECONFIG`, or
/// `~/.kube/config`), through links to the file they name — kept while a node's reset (or the docker
/// removal) failed. A file that cannot be read or is not a kubeconfig is a failed step, left as it is.
pub(super) fn kubeconfig(ctx: &mut NodeCtx, data: &Data<'_>) -> Result<(), PhaseError> {
    let name = clusterctl_kubeapi::kubeconfig::entry_name(data.cluster.name());
    let paths = crate::access::kubeconfig::candidates(data.opts.kubeconfig.as_ref());
    let (mut had, mut read) = (false, false);
    for path in &paths {
        let path = crate::local::follow_links(path);
        let text = match crate::local::read_if_exists(&path) {
            Ok(t) => t,
            Err(e) => {
                let why = format!("cannot read {}: {e}; left as it is", path.display());
                say(data, "kubeconfig", StepOutcome::Failed(why));
                continue;
            }
        };
        read |= !text.is_empty();
        if text.is_empty() {
            continue;
        }
        let outcome =
            match clusterctl_kubeapi::kubeconfig::remove_cluster(&text, data.cluster.name()) {
                Ok((new, removed)) if !removed.is_empty() => {
                    had = true;
                    let name = removed.join(", ");
                    if kept_for(
                        data,
                        "kubeconfig",
                        &format!("context {name} in {}", path.display()),
                    ) {
                        continue;
                    }
                    let what = format!("remove context {name} from {}", path.display());
                    match ctx.local_change(&what, || {
                        crate::local::write_private(&path, 0o600, new.as_bytes())
                    }) {
                        Ok(()) => {
                            data.found.store(true, Ordering::SeqCst);
                            StepOutcome::Done(format!(
                                "context {name} removed from {}",
                                path.display()
                            ))
                        }
                        Err(e) => StepOutcome::Failed(reason(&e)),
                    }
                }
                Ok(_) => continue,
                Err(e) => StepOutcome::Failed(format!("{}: {e}; left as it is", path.display())),
            };
        say(data, "kubeconfig", outcome);
    }
    if read && !had {
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        say(
            data,
            "kubeconfig",
            StepOutcome::Done(format!("no context {name} in {}", shown.join(", "))),
        );
    }
    Ok(())
}

/// What the cache directory holds besides the cluster lock (which `destroy` itself holds: it stays,
/// empty once released, so that no second clusterctl locks a new file meanwhile).
fn cache_entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|r| {
            r.filter_map(Result::ok)
                .filter(|e| e.file_name() != crate::lock::LOCK_FILE)
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Removes everything in the cache directory but the lock.
fn remove_cache(dir: &std::path::Path) -> std::io::Result<()> {
    for p in cache_entries(dir) {
        if p.is_dir() && !p.is_symlink() {
            std::fs::remove_dir_all(&p)?;
        } else {
            std::fs::remove_file(&p)?;
        }
    }
    Ok(())
}

/// `cache`: removes the cluster's local state cache (`~/.cache/clusterctl/<cluster>`) — kept while a
/// node's reset (or the docker removal) failed.
pub(super) fn cache(ctx: &mut NodeCtx, data: &Data<'_>) -> Result<(), PhaseError> {
    let Some(dir) = crate::local::cache_dir(data.cluster.name()) else {
        return Ok(());
    };
    if cache_entries(&dir).is_empty() || kept_for(data, "cache", "the local state cache") {
        return Ok(());
    }
    let what = format!("remove the local cache {}", dir.display());
    let outcome = match ctx.local_change(&what, || remove_cache(&dir)) {
        Ok(()) => {
            data.found.store(true, Ordering::SeqCst);
            StepOutcome::Done(format!("{} removed", dir.display()))
        }
        Err(e) => StepOutcome::Failed(reason(&e)),
    };
    say(data, "cache", outcome);
    Ok(())
}
