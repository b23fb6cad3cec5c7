//! Third-party CNIs (calico, cilium, flannel, kindnet): where their upstream files come from and how they
//! are installed.
//!
//! * `cni/sources` (on this machine, right after `render`, before any node is changed): every pinned
//!   upstream file ([`CniInstall::files`]; for Cilium also the Helm archive for the first control plane's
//!   architecture) is taken from the local cache or downloaded and checked against its sha256
//!   (`clusterctl_airgap::upstream`); a wrong digest stops `up` here, so nothing is applied. With an
//!   air-gap bundle nothing is downloaded: each file comes from the cache or from the bundle's
//!   `upstream/<name>` entry (verified by `airgap/verify`, which runs first), checked against the
//!   same digest.
//! * `cni` (first control plane): calico, flannel and kindnet objects
//!   (`clusterctl_render::cni::install`) are server-side applied through the Kubernetes API from this
//!   machine (field manager `clusterctl`), step by step; Calico's CRDs are waited for until Established
//!   before the operator and the custom resources. Each object is reported `created`, `configured` or
//!   `unchanged`, and only the first two count as changes ([`apply_steps`]). Cilium: the `helm` program and the chart are placed on
//!   the first control plane and `helm upgrade --install cilium … -f <values>` runs there with
//!   `admin.conf`, unless the release is already deployed with the same chart and values digests.
//! * `wait-ready` asks [`calico_not_available`] too: every TigeraStatus Available.

use super::{UpData, ADMIN_CONF};
use crate::ctx::{Change, NodeCtx, PlanKind};
use crate::error::PhaseError;
use crate::up::placed;
use clusterctl_airgap::upstream::{Trust, UpstreamCache, WantedFile};
use clusterctl_airgap::Digest;
use clusterctl_exec::shell::quote_word;
use clusterctl_render::cni::install::{self, ApplyStep, InstallInput, Wait};
use clusterctl_render::cni::versions::UpstreamFile;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where rendered cluster-wide CNI files are placed on the first control plane.
pub const RENDERED_DIR: &str = "/etc/clusterctl/cni";
/// Where the Cilium chart is placed on the first control plane.
pub const CHART_PATH: &str = "/etc/clusterctl/cni/cilium.tgz";
/// Where the rendered Cilium values are placed (by render's cluster files).
pub const VALUES_PATH: &str = "/etc/clusterctl/cni/cilium-values.yaml";
/// Where the `helm` program is placed on the first control plane.
pub const HELM_PATH: &str = "/var/lib/clusterctl/bin/helm";
/// Where the Helm archive is placed on the first control plane (unpacked into [`HELM_PATH`]).
pub const HELM_ARCHIVE_PATH: &str = "/var/lib/clusterctl/bin/helm-linux.tar.gz";
/// How long `cni` waits for CRDs to become Established.
pub const CRD_TIMEOUT: Duration = Duration::from_secs(120);

/// What `up` needs to install a third-party CNI.
#[derive(Debug, Clone)]
pub struct CniInstall {
    /// Plugin, mirror prefix, podSubnet, endpoint.
    pub input: InstallInput,
    /// The upstream files (after the cluster file's `sources`), in order.
    pub files: Vec<UpstreamFile>,
    /// Cilium: the Helm archive per node architecture (`amd64`, `arm64`).
    pub helm: Vec<(String, UpstreamFile)>,
    /// `cni.acceptUnverified`.
    pub accept_unverified: bool,
    /// The upstream cache directory (`<cache>/upstream`); `None`: no cache (no `$HOME`).
    pub cache: Option<PathBuf>,
    /// Registry client options for downloads (extra CAs, e.g. the mirror's).
    pub client: clusterctl_airgap::registry::ClientOptions,
    /// The files obtained by `cni/sources`: name → local path.
    pub fetched: Arc<Mutex<BTreeMap<String, PathBuf>>>,
}

/// What `up` needs for `cluster`'s CNI: `None` for builtin and none. The upstream files are the pinned
/// release's ([`clusterctl_render::cni::versions::Pins::files`]), each replaced by the cluster file's
/// `cni.sources` entry of the same name (its address, and its sha256 when given — else the pinned one);
/// `cache` is the shared cache of upstream files. Errors: a CNI version render cannot pin.
pub fn for_cluster(
    cluster: &clusterctl_spec::ValidCluster,
    cache: Option<PathBuf>,
) -> Result<Option<CniInstall>, clusterctl_render::RenderError> {
    use clusterctl_spec::model::CniPlugin;
    let cni = &cluster.spec().networking.cni;
    let plugin = match cni.plugin {
        CniPlugin::Builtin | CniPlugin::None => return Ok(None),
        CniPlugin::Calico => "calico",
        CniPlugin::Cilium => "cilium",
        CniPlugin::Flannel => "flannel",
        CniPlugin::Kindnet => "kindnet",
    };
    let pins = clusterctl_render::cni::versions::pins(cluster)?;
    let over = |f: UpstreamFile| clusterctl_render::cni::versions::with_sources(cluster, f);
    let files = pins
        .as_ref()
        .map(|p| p.files().into_iter().map(over).collect())
        .unwrap_or_default();
    let helm = if plugin == "cilium" {
        ["amd64", "arm64"]
            .iter()
            .map(|a| {
                (
                    a.to_string(),
                    over(clusterctl_render::cni::versions::helm_file(a)),
                )
            })
            .collect()
    } else {
        Vec::new()
    };
    let ep = cluster.endpoint();
    Ok(Some(CniInstall {
        input: InstallInput {
            plugin: plugin.to_string(),
            mirror_prefix: cluster.mirror_prefix().map(str::to_string),
            pod_subnet: cluster.spec().networking.pod_subnet.clone(),
            endpoint: format!("{}:{}", ep.host, ep.port),
        },
        files,
        helm,
        accept_unverified: cni.accept_unverified,
        cache,
        client: clusterctl_airgap::run::client_options(cluster),
        fetched: Arc::default(),
    }))
}

/// The shared cache of upstream files: `$XDG_CACHE_HOME/clusterctl/.upstream` or
/// `$HOME/.cache/clusterctl/.upstream` (a cluster name never starts with a dot).
pub fn default_cache() -> Option<PathBuf> {
    crate::local::cache_dir(".upstream")
}

/// The Debian-style architecture of `uname -m` (`x86_64` → `amd64`, `aarch64` → `arm64`).
pub fn deb_arch(uname: &str) -> &str {
    match uname {
        "x86_64" | "amd64" => "amd64",
        "aarch64" | "arm64" => "arm64",
        other => other,
    }
}

fn wanted(f: &UpstreamFile) -> WantedFile {
    WantedFile {
        name: f.name.clone(),
        url: f.url.clone(),
        sha256: f.sha256.as_deref().and_then(Digest::from_hex),
        digest_source: f.digest_source.clone(),
    }
}

/// The files `cni/sources` obtains for this run: the CNI's, and for Cilium the Helm archive of the
/// first control plane's architecture (amd64 when not known yet).
fn files_for_run(ci: &CniInstall, data: &UpData) -> Vec<UpstreamFile> {
    let mut v = ci.files.clone();
    if !ci.helm.is_empty() {
        let arch = data
            .first_cp()
            .map(|n| data.facts_of(&n.name).arch)
            .filter(|a| !a.is_empty())
            .map(|a| deb_arch(&a).to_string())
            .unwrap_or_else(|| "amd64".to_string());
        if let Some((_, f)) = ci.helm.iter().find(|(a, _)| *a == arch) {
            v.push(f.clone());
        }
    }
    v
}

/// The `cni/sources` phase (this machine).
pub fn run_sources(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let Some(ci) = &data.spec.cni_install else {
        return Ok(());
    };
    let files = files_for_run(ci, data);
    if files.is_empty() {
        return Ok(());
    }
    let offline = data.spec.airgap.is_some();
    let Some(root) = &ci.cache else {
        return Err(ctx.local_error(
            "no cache directory for the CNI's upstream files ($XDG_CACHE_HOME and $HOME are unset)",
        ));
    };
    let cache = UpstreamCache::open(root).map_err(|e| ctx.local_error(e))?;
    let mut client = None;
    for f in &files {
        let want = wanted(f);
        let digest = match &f.sha256 {
            Some(d) => format!("sha256 {d} from {}", f.digest_source),
            None => "no pinned sha256".to_string(),
        };
        if let Some(c) = cache.cached(&want) {
            ctx.info(&format!(
                "{} from the cache ({}, {digest})",
                f.name,
                c.path.display()
            ));
            remember(ci, &f.name, c.path);
            continue;
        }
        if offline {
            from_bundle(ctx, data, ci, &cache, &want)?;
            continue;
        }
        // A download into this machine's cache: a plan note, not counted (the cache is not the
        // cluster); the run reports it once it knows the size and how the digest was trusted.
        let download = Change::new(
            PlanKind::Info,
            format!(
                "download {} from {} ({digest}) into {}",
                f.name,
                f.url,
                root.display()
            ),
        )
        .reports_itself()
        .uncounted();
        ctx.change(download, |ctx| {
            if client.is_none() {
                client = Some(
                    clusterctl_airgap::registry::RegistryClient::new(ci.client.clone())
                        .map_err(|e| ctx.local_error(e))?,
                );
            }
            let Some(c) = client.as_ref() else {
                return Ok(());
            };
            let got = cache
                .fetch(c, &want, ci.accept_unverified)
                .map_err(|e| ctx.local_error(format!("{}: {e}", f.name)))?;
            let how = match got.trust {
                Trust::Pinned => format!("sha256 {} as pinned ({})", got.sha256, f.digest_source),
                Trust::Accepted { first: true } => format!(
                    "UNVERIFIED: no pinned sha256; accepted (acceptUnverified) and recorded {} in {}",
                    got.sha256,
                    root.join("accepted.json").display()
                ),
                Trust::Accepted { first: false } => {
                    format!("unverified, the sha256 {} recorded earlier", got.sha256)
                }
            };
            data.reporter.note(&format!(
                "cni/sources: {} from {}: {} bytes, {how}",
                f.name, f.url, got.size
            ));
            remember(ci, &f.name, got.path);
            Ok(())
        })?;
    }
    Ok(())
}

/// Air-gapped (`airgap.bundle`): `want` from the bundle `airgap/verify` checked (its
/// `upstream/<name>` entry, with the digest `want` must have) into the cache; nothing is downloaded
/// and no address is contacted. A dry run only checks the entry. Errors: the bundle was not verified,
/// does not carry the file, or carries another digest.
fn from_bundle(
    ctx: &mut NodeCtx,
    data: &UpData,
    ci: &CniInstall,
    cache: &UpstreamCache,
    want: &WantedFile,
) -> Result<(), PhaseError> {
    let vb = data
        .spec
        .airgap
        .as_ref()
        .and_then(|a| a.verified().cloned());
    let Some(vb) = vb else {
        // Not a change: a dry run goes on without a verified bundle (airgap/verify noted why).
        if ctx.mode.dry_run {
            ctx.info(&format!(
                "take {} from the air-gap bundle (entry upstream/{})",
                want.name, want.name
            ));
            return Ok(());
        }
        return Err(ctx.local_error(format!(
            "{}: the air-gap bundle was not verified (airgap/verify), so the CNI's files cannot be taken from it",
            want.name
        )));
    };
    // Copying into this machine's cache is not counted (as a download is not); a dry run checks the
    // bundle entry only, for the plan's digest.
    if ctx.mode.dry_run {
        let e = cache
            .bundle_entry(&vb, want, ci.accept_unverified)
            .map_err(|e| ctx.local_error(e))?;
        ctx.info(&format!(
            "take {} from the air-gap bundle ({}, {})",
            want.name, e.path, e.sha256
        ));
        return Ok(());
    }
    let got = cache
        .from_bundle(&vb, want, ci.accept_unverified)
        .map_err(|e| ctx.local_error(e))?;
    data.reporter.note(&format!(
        "cni/sources: {} from the air-gap bundle {}: {} bytes, sha256 {}{}",
        want.name,
        vb.path.display(),
        got.size,
        got.sha256,
        match got.trust {
            Trust::Pinned => format!(" as pinned ({})", want.digest_source),
            Trust::Accepted { .. } => " (UNVERIFIED: no pinned sha256, accepted)".to_string(),
        }
    ));
    remember(ci, &want.name, got.path);
    Ok(())
}

fn remember(ci: &CniInstall, name: &str, path: PathBuf) {
    if let Ok(mut m) = ci.fetched.lock() {
        m.insert(name.to_string(), path);
    }
}

/// The third-party part of the `cni` phase's digest material ([`super::cni::inputs`] adds it after
/// the rendered CNI files): the plugin and the obtained upstream files' names and digests (so a new
/// release or a changed value runs the phase again).
pub(crate) fn inputs(ci: &CniInstall) -> String {
    let mut s = format!("plugin {}\n", ci.input.plugin);
    for f in &ci.files {
        s.push_str(&format!(
            "{} {} {}\n",
            f.name,
            f.url,
            f.sha256.as_deref().unwrap_or("-")
        ));
    }
    if let Ok(m) = ci.fetched.lock() {
        for (name, p) in m.iter() {
            s.push_str(&format!("fetched {name} {}\n", p.display()));
        }
    }
    s
}

/// The rendered cluster files of the CNI by file name (without the directory).
fn rendered(data: &UpData, node: &str) -> BTreeMap<String, Vec<u8>> {
    data.files_of(node, placed::CNI)
        .into_iter()
        .filter_map(|f| {
            f.path
                .strip_prefix(&format!("{RENDERED_DIR}/"))
                .map(|n| (n.to_string(), f.content.clone()))
        })
        .collect()
}

fn fetched_bytes(
    ctx: &NodeCtx,
    ci: &CniInstall,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, PhaseError> {
    let m = ci.fetched.lock().map(|m| m.clone()).unwrap_or_default();
    let mut out = BTreeMap::new();
    for f in &ci.files {
        let Some(p) = m.get(&f.name) else {
            return Ok(None);
        };
        let b = std::fs::read(p)
            .map_err(|e| ctx.local_error(format!("reading {}: {e}", p.display())))?;
        out.insert(f.name.clone(), b);
    }
    Ok(Some(out))
}

/// The `cni` phase for a third-party CNI (first control plane).
pub fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let Some(ci) = data.spec.cni_install.clone() else {
        return Ok(());
    };
    // The rendered files stay on the node for reference (`/etc/clusterctl/cni/…`).
    let files = data.files_of(ctx.name(), placed::CNI);
    super::files::place(ctx, &files)?;
    // The phase is recorded once done, so it never passes without the upstream files: when
    // `cni/sources` did not run (a phase selection without it), they are obtained here.
    let missing = ci
        .fetched
        .lock()
        .map(|m| ci.files.iter().any(|f| !m.contains_key(&f.name)))
        .unwrap_or(true);
    // Not a change here: a dry run's `cni/sources` already planned the downloads.
    if missing && !ctx.mode.dry_run && !ci.files.is_empty() {
        run_sources(ctx, data)?;
    }
    match ci.input.plugin.as_str() {
        "cilium" => run_helm(ctx, data, &ci),
        "kindnet" => {
            let template = match ctx.read_file(install::KINDNET_MANIFEST)? {
                None => {
                    ctx.info(&format!(
                        "read {} (kind's default CNI manifest) and apply it with podSubnet {}",
                        install::KINDNET_MANIFEST,
                        ci.input.pod_subnet
                    ));
                    return Ok(());
                }
                Some(None) => {
                    return Err(ctx.local_error(format!(
                        "{} does not exist on the first control plane: kindnet is installed from the kind node image's default CNI manifest, and this node image has none (use a kind node image, or another CNI)",
                        install::KINDNET_MANIFEST
                    )))
                }
                Some(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
            };
            let steps =
                install::kindnet_steps(&ci.input, &template).map_err(|e| ctx.local_error(e))?;
            let api = data.api.get(ctx)?;
            apply_steps(ctx, api.as_deref(), &steps)
        }
        _ => {
            let Some(upstream) = fetched_bytes(ctx, &ci)? else {
                // A dry run downloaded nothing, so it plans by file name instead of by object.
                if !ctx.mode.dry_run {
                    return Err(
                        ctx.local_error("the CNI's upstream files were not obtained (cni/sources)")
                    );
                }
                for f in &ci.files {
                    ctx.info(&format!(
                        "server-side apply the objects of {} (field manager clusterctl){}",
                        f.name,
                        if f.name == "operator-crds.yaml" {
                            ", then wait until every CRD is Established"
                        } else {
                            ""
                        }
                    ));
                }
                let own = if ci.input.plugin == "calico" {
                    "server-side apply the Installation and APIServer of calico-installation.yaml; wait-ready waits for every TigeraStatus Available"
                } else {
                    "with the ConfigMap kube-flannel-cfg's net-conf.json replaced by flannel-net-conf.json"
                };
                ctx.info(own);
                return Ok(());
            };
            let steps = install::manifest_steps(&ci.input, &upstream, &rendered(data, ctx.name()))
                .map_err(|e| ctx.local_error(e))?;
            let api = data.api.get(ctx)?;
            apply_steps(ctx, api.as_deref(), &steps)
        }
    }
}

/// Applies each step's objects through the API (server-side apply) and waits as the step says. `api`
/// is `None` only offline (a dry run without `--probe`, or before `init`).
///
/// A dry run plans each object as `server-side apply KIND NAME` (one change each) and applies
/// nothing. A real run reports each object as `api: server-side apply KIND NAME: created`,
/// `…: configured` or `…: unchanged` ([`clusterctl_kubeapi::Applied`], as the server answered) and
/// counts only the created and configured ones, so a re-run over objects that are already as applied
/// is `done, nothing to change`.
///
/// Errors: the first object the server refuses, named with the server's message; no API client in a
/// run that changes things; CRDs not Established within [`CRD_TIMEOUT`], named.
pub fn apply_steps(
    ctx: &mut NodeCtx,
    api: Option<&dyn clusterctl_kubeapi::ClusterApi>,
    steps: &[ApplyStep],
) -> Result<(), PhaseError> {
    for step in steps {
        ctx.info(&format!("{}: {} object(s)", step.what, step.objects.len()));
        for o in &step.objects {
            let what = format!("server-side apply {}", install::object_name(o));
            // The perform reports and counts what the server did (nothing for an unchanged object).
            let apply = Change::new(PlanKind::Api, &what).reports_itself();
            ctx.change(apply, |ctx| {
                let Some(api) = api else {
                    return Err(ctx.local_error(format!(
                        "{what}: no client for the Kubernetes API of the first control plane"
                    )));
                };
                let applied = api
                    .apply(o)
                    .map_err(|e| ctx.local_error_in(format_args!("Kubernetes API: {what}"), &e))?;
                if applied.changed() {
                    ctx.changes += 1;
                }
                // One line per object, as `kubectl apply` prints one; an unchanged object's line
                // says so and is not counted.
                ctx.reporter()
                    .change(&ctx.phase, ctx.name(), &format!("api: {what}: {applied}"));
                Ok(())
            })?;
        }
        if step.wait == Wait::CrdsEstablished {
            let names: Vec<String> = step
                .objects
                .iter()
                .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
                .collect();
            let Some(api) = api else {
                ctx.info(&format!(
                    "wait until {} CRD(s) are Established",
                    names.len()
                ));
                continue;
            };
            // A probing dry run applied nothing, so there is nothing to wait for.
            if ctx.mode.dry_run {
                continue;
            }
            wait_established(ctx, api, &names)?;
        }
    }
    Ok(())
}

/// True when `crd` reports the `Established` condition `True`.
pub fn established(crd: &serde_json::Value) -> bool {
    crd["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Established" && c["status"] == "True")
}

fn wait_established(
    ctx: &mut NodeCtx,
    api: &dyn clusterctl_kubeapi::ClusterApi,
    names: &[String],
) -> Result<(), PhaseError> {
    let start = Instant::now();
    loop {
        ctx.api_query("get customresourcedefinitions (Established)");
        let mut pending = Vec::new();
        for n in names {
            match api.get_object(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                None,
                n,
            ) {
                Ok(Some(crd)) if established(&crd) => {}
                Ok(_) => pending.push(n.clone()),
                Err(e) => return Err(super::api::api_error(ctx, e)),
            }
        }
        if pending.is_empty() {
            return Ok(());
        }
        if start.elapsed() >= CRD_TIMEOUT {
            return Err(ctx.check_error(vec![format!(
                "CRDs not Established after {}s: {}",
                CRD_TIMEOUT.as_secs(),
                pending.join(", ")
            )]));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Cilium with Helm on the first control plane.
fn run_helm(ctx: &mut NodeCtx, data: &UpData, ci: &CniInstall) -> Result<(), PhaseError> {
    let fetched = ci.fetched.lock().map(|m| m.clone()).unwrap_or_default();
    let arch = deb_arch(&data.facts_of(ctx.name()).arch).to_string();
    let helm_name = clusterctl_render::cni::versions::helm_file_name(if arch.is_empty() {
        "amd64"
    } else {
        &arch
    });
    let (Some(chart), Some(archive)) = (fetched.get("cilium.tgz"), fetched.get(&helm_name)) else {
        // A dry run downloaded nothing, so it plans the install in one line.
        if !ctx.mode.dry_run {
            return Err(ctx.local_error(format!(
                "cilium.tgz and {helm_name} were not obtained (cni/sources)"
            )));
        }
        ctx.info(&format!(
            "place helm ({helm_name}) at {HELM_PATH} and the chart at {CHART_PATH}; helm upgrade --install cilium {CHART_PATH} --namespace kube-system -f {VALUES_PATH} (skipped when the release has the same chart and values digests)"
        ));
        return Ok(());
    };
    // The archive goes to the node and is unpacked there (`tar`, as any host has), once per archive.
    let placed = ctx.put_local_file(archive, HELM_ARCHIVE_PATH, 0o644)?;
    let member = format!(
        "linux-{}/helm",
        if arch.is_empty() { "amd64" } else { &arch }
    );
    if placed || ctx.test(&format!("test -x {HELM_PATH}"))? != Some(true) {
        ctx.run_script(&format!(
            "tar -xzf {HELM_ARCHIVE_PATH} -O {} > {HELM_PATH}.tmp && chmod 0755 {HELM_PATH}.tmp && mv -f {HELM_PATH}.tmp {HELM_PATH}",
            quote_word(&member)
        ))?;
    }
    ctx.put_local_file(chart, CHART_PATH, 0o644)?;
    let chart_sha = crate::util::file_sha256(chart)
        .map_err(|e| ctx.local_error(format!("reading {}: {e}", chart.display())))?;
    let values = data
        .files_of(ctx.name(), placed::CNI)
        .into_iter()
        .find(|f| f.path == VALUES_PATH)
        .ok_or_else(|| ctx.local_error(format!("no rendered Cilium values ({VALUES_PATH})")))?;
    let values_sha = crate::util::sha256_hex(&values.content);
    let status = ctx.read(&format!(
        "{HELM_PATH} status {} --namespace kube-system --kubeconfig {ADMIN_CONF} -o json 2>/dev/null || true",
        install::CILIUM_RELEASE
    ))?;
    if let Some(s) = &status {
        if install::helm_release_current(s, &chart_sha, &values_sha) {
            ctx.info(
                "the cilium release is deployed with this chart and these values; nothing to do",
            );
            return Ok(());
        }
    }
    let args =
        install::helm_upgrade_args(CHART_PATH, VALUES_PATH, ADMIN_CONF, &chart_sha, &values_sha);
    let script = std::iter::once(HELM_PATH.to_string())
        .chain(args.iter().map(|a| quote_word(a)))
        .collect::<Vec<_>>()
        .join(" ");
    ctx.run_script(&script)?;
    Ok(())
}

/// TigeraStatus objects (`operator.tigera.io/v1`) not `Available`, each as `name (Progressing:
/// message)` or `name (Degraded: message)`; `["no TigeraStatus yet"]` when the operator reported none.
pub fn calico_not_available(statuses: &[serde_json::Value]) -> Vec<String> {
    if statuses.is_empty() {
        return vec!["tigera-operator has reported no TigeraStatus yet".to_string()];
    }
    let mut out = Vec::new();
    for s in statuses {
        let name = s["metadata"]["name"].as_str().unwrap_or("?");
        let conds: Vec<&serde_json::Value> = s["status"]["conditions"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let is = |t: &str| {
            conds
                .iter()
                .find(|c| c["type"] == t && c["status"] == "True")
                .copied()
        };
        if is("Available").is_some() && is("Degraded").is_none() {
            continue;
        }
        let why = ["Degraded", "Progressing"]
            .iter()
            .find_map(|t| {
                is(t).map(|c| format!("{t}: {}", c["message"].as_str().unwrap_or_default()))
            })
            .unwrap_or_else(|| "not Available".to_string());
        out.push(format!("TigeraStatus {name} ({why})"));
    }
    out
}

/// The control-plane components of `nodes` not Running and Ready, from kube-system's static pods
/// (`<component>-<node>`), for a cluster whose nodes stay NotReady (`cni: none`).
pub fn control_plane_not_ready(pods: &[clusterctl_kubeapi::Pod], nodes: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for n in nodes {
        for c in [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
        ] {
            let name = format!("{c}-{n}");
            let pod = pods.iter().find(|p| {
                p.metadata.name.as_deref() == Some(&name)
                    && p.metadata.namespace.as_deref() == Some("kube-system")
            });
            let ready = pod.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                s.phase.as_deref() == Some("Running")
                    && s.conditions
                        .iter()
                        .flatten()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
            });
            if !ready {
                out.push(format!(
                    "{name} ({})",
                    if pod.is_some() {
                        "not Ready"
                    } else {
                        "no pod yet"
                    }
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tigera_statuses_name_what_is_still_progressing() {
        assert_eq!(calico_not_available(&[]).len(), 1);
        let s = vec![
            json!({"metadata":{"name":"calico"},"status":{"conditions":[{"type":"Available","status":"False"},{"type":"Progressing","status":"True","message":"Waiting for calico-node"}]}}),
            json!({"metadata":{"name":"apiserver"},"status":{"conditions":[{"type":"Available","status":"True"}]}}),
        ];
        assert_eq!(
            calico_not_available(&s),
            ["TigeraStatus calico (Progressing: Waiting for calico-node)"]
        );
    }

    #[test]
    fn crds_are_established_by_their_condition() {
        assert!(established(
            &json!({"status":{"conditions":[{"type":"Established","status":"True"}]}})
        ));
        assert!(!established(
            &json!({"status":{"conditions":[{"type":"NamesAccepted","status":"True"}]}})
        ));
        assert_eq!(deb_arch("x86_64"), "amd64");
        assert_eq!(deb_arch("aarch64"), "arm64");
    }
}
