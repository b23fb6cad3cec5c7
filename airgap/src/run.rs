//! The three `clusterctl airgap` operations end to end, for the CLI and the tests: list the images
//! of a cluster, write its bundle (pull into the cache next to the output, then write), and import
//! a bundle (verify every byte first, then push to the mirror and record what was pushed).

use crate::bundle::verify::{read_sums, sums_digest, MAX_LIST_BYTES};
use crate::bundle::{
    verify_bundle, write_bundle, BundleInput, BundleSummary, PreparedFile, VerifiedBundle,
    MANIFEST_ENTRY, OCI_DIR, SUMS_ENTRY, UPSTREAM_DIR,
};
use crate::digest::Digest;
use crate::error::{AirgapError, Result};
use crate::import::{
    import_to_registry, import_to_registry_with, precheck, target_ref, FileStamp, ImportReport,
    ImportState, RegistryImportOptions, VerifiedStamp,
};
use crate::oci::Platform;
use crate::packages::{agent_binary, prepare_packages, self_binary, PackageSource};
use crate::plan::{list_images, platforms, requests};
use crate::pull::{pull_images, PullOptions, PullStats};
use crate::reference;
use crate::registry::{ClientOptions, EnvCredentials, RegistryClient};
use crate::store::BlobStore;
use crate::upstream::{UpstreamCache, WantedFile};
use clusterctl_spec::ValidCluster;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Registry options for a cluster: the mirror's CA and the names of its credential variables. A
/// mirror given with a CA (`caFile`) is spoken to over HTTPS even on a loopback address.
pub fn client_options(cluster: &ValidCluster) -> ClientOptions {
    let mut o = ClientOptions::default();
    if let Some(m) = cluster.mirror() {
        o.ca_pem = m.ca_pem.clone();
        if m.ca_pem.is_some() {
            o.tls_hosts.push(m.host.clone());
        }
        if let (Some(u), Some(p)) = (&m.username_env, &m.password_env) {
            o.credentials.push(EnvCredentials {
                registry: m.host.clone(),
                username_var: u.clone(),
                password_var: p.clone(),
            });
        }
    }
    o
}

/// Registry options for `airgap bundle`: [`client_options`] plus every `airgap.sourceRegistries`
/// entry — its credential variable names (taking precedence over the mirror's for the same host)
/// and its CA, trusted for that host only; a source registry given with a CA is spoken to over
/// HTTPS even on a loopback address. The variables' values are read only when a request needs them.
pub fn source_client_options(cluster: &ValidCluster) -> ClientOptions {
    let mut o = client_options(cluster);
    let mut own = Vec::new();
    for s in cluster.source_auth() {
        if let Some((u, p)) = &s.credentials_env {
            own.push(EnvCredentials {
                registry: s.registry.clone(),
                username_var: u.clone(),
                password_var: p.clone(),
            });
        }
        if let Some(pem) = &s.ca_pem {
            o.host_cas.push((s.registry.clone(), pem.clone()));
            if !o.tls_hosts.contains(&s.registry) {
                o.tls_hosts.push(s.registry.clone());
            }
        }
    }
    own.append(&mut o.credentials);
    o.credentials = own;
    o
}

/// Refuses, before anything is pulled, a source registry whose credential variables are unset or
/// empty. Errors: `Auth` naming the registry and both variables (never a value).
fn check_source_credentials(cluster: &ValidCluster) -> Result<()> {
    for s in cluster.source_auth() {
        let Some((u, p)) = &s.credentials_env else {
            continue;
        };
        let unset: Vec<&str> = [u, p]
            .into_iter()
            .filter(|v| std::env::var_os(v).is_none_or(|x| x.is_empty()))
            .map(String::as_str)
            .collect();
        if !unset.is_empty() {
            return Err(AirgapError::Auth {
                registry: s.registry.clone(),
                reason: format!(
                    "airgap.sourceRegistries names ${u} and ${p} for its credentials, but ${} {} unset or empty: export {} before running `clusterctl airgap bundle`",
                    unset.join(" and $"),
                    if unset.len() == 1 { "is" } else { "are" },
                    if unset.len() == 1 { "it" } else { "them" },
                ),
            });
        }
    }
    Ok(())
}

/// Options of `airgap bundle`.
#[derive(Debug, Clone, Default)]
pub struct BundleOptions {
    /// Output file.
    pub out: PathBuf,
    /// Blob cache; default `<out>.cache` next to the output (kept, so a re-run resumes).
    pub cache: Option<PathBuf>,
    /// Pull options (platforms are taken from the cluster file when empty).
    pub pull: PullOptions,
    /// Registry options (CA, credentials, plain-HTTP hosts).
    pub client: ClientOptions,
    /// The clusterctl binary to carry (`bin/clusterctl`); `None` carries none.
    pub self_binary: Option<PathBuf>,
    /// CNI agents for other architectures: `(arch, clusterctl built for it)`, carried as
    /// `bin/clusterctl-linux-<arch>` ([`crate::packages::agent_binary`]).
    pub agents: Vec<(String, PathBuf)>,
    /// Directory that relative package paths are resolved against (the cluster file's).
    pub base_dir: PathBuf,
    /// The cache of the CNI's upstream files ([`crate::upstream::UpstreamCache`]); default
    /// `<cache>/upstream` inside the blob cache. The CLI passes the one `up` uses, so a file `up`
    /// already fetched is not downloaded again.
    pub upstream_cache: Option<PathBuf>,
}

/// The cache directory used for `out` when none is given: `<out>.cache`.
pub fn default_cache(out: &Path) -> PathBuf {
    let mut s = out.as_os_str().to_owned();
    s.push(".cache");
    PathBuf::from(s)
}

/// `airgap.packages[].kubernetesVersion` as the manifest records it: `vX.Y.Z` (so `1.34.2` and
/// `v1.34.2` read the same on the nodes); text that is not a version (refused by validation) is kept.
fn version_tag(text: &str) -> String {
    clusterctl_spec::versions::parse_version(text.trim())
        .map(|v| clusterctl_spec::versions::tag(&v))
        .unwrap_or_else(|| text.to_string())
}

/// An error about `path` that is not the operating system's (`what` says what is wrong and what to do).
fn refuse_path(path: &Path, what: &str) -> AirgapError {
    AirgapError::io(
        path,
        std::io::Error::new(std::io::ErrorKind::AlreadyExists, what.to_string()),
    )
}

/// Refuses an output that holds anything but an air-gap bundle (the cluster file, a package, the
/// binary…), so that `-o` naming an input never destroys it; an earlier bundle may be replaced.
/// Errors: `Io` naming the path.
fn check_output(out: &Path) -> Result<()> {
    match std::fs::metadata(out) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(AirgapError::io(out, e)),
        Ok(m) if m.is_file() && sums_digest(out).is_ok() => Ok(()),
        Ok(m) if m.is_dir() => Err(refuse_path(
            out,
            "is a directory; give the bundle's file name, e.g. -o site.tar",
        )),
        Ok(_) => Err(refuse_path(
            out,
            "exists and is not an air-gap bundle; refusing to overwrite it (is it an input? choose another output)",
        )),
    }
}

/// Refuses, before any registry is asked, an import record path that would replace something else
/// (an existing file must be an import record) or that cannot be written (its directory must take
/// a new file), so that a record that cannot be saved is found before the push, not after it.
/// Errors: `Io` naming the path.
fn check_state_path(path: &Path) -> Result<()> {
    if std::fs::symlink_metadata(path).is_ok() {
        // Read without blocking (a FIFO is not a record) and within a size limit.
        if ImportState::read(path).is_none() {
            return Err(refuse_path(
                path,
                "exists and is not an import record; refusing to overwrite it (choose another --state or remove it)",
            ));
        }
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    tempfile::NamedTempFile::new_in(dir).map_err(|e| {
        AirgapError::io(
            path,
            std::io::Error::new(
                e.kind(),
                format!("the import record cannot be written there ({e}); give a writable path (`airgap import --state`), e.g. when the bundle is on read-only media"),
            ),
        )
    })?;
    Ok(())
}

/// Pulls everything `cluster` needs and writes the bundle (`opts.client` usually from
/// [`source_client_options`]). Errors: an output that exists and is not a bundle (checked first), a
/// source registry whose credential variables are unset, then any pull, package or write error.
pub fn bundle_cluster(
    cluster: &ValidCluster,
    opts: &BundleOptions,
) -> Result<(BundleSummary, PullStats)> {
    check_output(&opts.out)?;
    check_source_credentials(cluster)?;
    let cache = opts
        .cache
        .clone()
        .unwrap_or_else(|| default_cache(&opts.out));
    let store = BlobStore::open(&cache)?;
    let client = RegistryClient::new(opts.client.clone())?;
    let mut pull = opts.pull.clone();
    let plats = platforms(cluster)?;
    if pull.platforms.is_empty() {
        pull.platforms = plats;
    }
    let sources: Vec<PackageSource> = cluster
        .spec()
        .airgap
        .as_ref()
        .map(|a| {
            a.packages
                .iter()
                .map(|p| PackageSource {
                    name: p.name.clone(),
                    os_family: p.os_family.clone(),
                    arch: p.arch.clone(),
                    path: p.path.as_ref().map(|x| opts.base_dir.join(x)),
                    url: p.url.clone(),
                    sha256: p.sha256.clone(),
                    extract_to: p.extract_to.clone(),
                    kubernetes_version: p.kubernetes_version.as_deref().map(version_tag),
                })
                .collect()
        })
        .unwrap_or_default();
    // Local package files are checked before any image is fetched, all of them at once.
    let missing: Vec<String> = sources
        .iter()
        .filter_map(|s| {
            let p = s.path.as_ref()?;
            (!p.is_file()).then(|| format!("{} ({})", s.name, p.display()))
        })
        .collect();
    if !missing.is_empty() {
        return Err(AirgapError::Package {
            name: "files".into(),
            reason: format!(
                "{} not found, nothing was fetched: {} (paths are relative to the cluster file)",
                missing.len(),
                missing.join(", ")
            ),
        });
    }
    let reqs = requests(&list_images(cluster))?;
    let (images, stats) = pull_images(&client, &store, &reqs, &pull)?;
    let packages = prepare_packages(&client, &store, &sources)?;
    let upstream_root = opts
        .upstream_cache
        .clone()
        .unwrap_or_else(|| cache.join("upstream"));
    let upstream = prepare_upstream(
        &client,
        &UpstreamCache::open(&upstream_root)?,
        &upstream_files(cluster, &pull.platforms)?,
        cluster.spec().networking.cni.accept_unverified,
    )?;
    let mut binaries = match &opts.self_binary {
        Some(p) => vec![self_binary(p)?],
        None => Vec::new(),
    };
    for (arch, path) in &opts.agents {
        binaries.push(agent_binary(arch, path)?);
    }
    let input = BundleInput {
        cluster: cluster.name().to_string(),
        kubernetes_version: cluster.version_info().tag(),
        extra_versions: cluster.extra_versions().iter().map(|v| v.tag()).collect(),
        platforms: pull.platforms.iter().map(|p| p.to_string()).collect(),
        images,
        packages,
        binaries,
        upstream,
    };
    let summary = write_bundle(&opts.out, &store, &input)?;
    Ok((summary, stats))
}

/// The CNI's pinned upstream files for nodes of `platforms` (Cilium: one Helm archive per
/// architecture), as `up` wants them: address, and the pinned sha256 or the one the file's
/// `cni.sources` gives (`clusterctl_render::cni::versions::cluster_files`). Errors: a CNI version
/// render cannot pin (`Manifest`).
pub fn upstream_files(cluster: &ValidCluster, platforms: &[Platform]) -> Result<Vec<WantedFile>> {
    let mut arches: Vec<&str> = platforms.iter().map(|p| p.architecture.as_str()).collect();
    if arches.is_empty() {
        arches.push("amd64");
    }
    let files = clusterctl_render::cni::versions::cluster_files(cluster, &arches)
        .map_err(AirgapError::CniFiles)?;
    Ok(files.iter().map(wanted_file).collect())
}

/// `f` as the fetcher wants it.
pub fn wanted_file(f: &clusterctl_render::cni::versions::UpstreamFile) -> WantedFile {
    WantedFile {
        name: f.name.clone(),
        url: f.url.clone(),
        sha256: f.sha256.as_deref().and_then(Digest::from_hex),
        digest_source: f.digest_source.clone(),
    }
}

/// Obtains every file of `files` through `cache` (from the cache, else downloaded and checked
/// against its sha256, see [`UpstreamCache::fetch`]) and describes it as bundle entry
/// `upstream/<name>`. Errors: the first file that cannot be had or has another sha256 (nothing is
/// written then), an unpinned file the cluster file does not accept.
pub fn prepare_upstream(
    client: &RegistryClient,
    cache: &UpstreamCache,
    files: &[WantedFile],
    accept_unverified: bool,
) -> Result<Vec<PreparedFile>> {
    files
        .iter()
        .map(|w| {
            let got = cache.fetch(client, w, accept_unverified)?;
            PreparedFile::from_path(
                &w.name,
                &format!("{UPSTREAM_DIR}/{}", w.name),
                &got.path,
                0o644,
                None,
                None,
            )
        })
        .collect()
}

/// Options of `airgap import`.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Registry options.
    pub client: ClientOptions,
    /// Mirror prefix override (default: the mirror references recorded in the bundle).
    pub mirror_prefix: Option<String>,
    /// State file; default `<bundle>.imported.json`.
    pub state: Option<PathBuf>,
    /// Parallel uploads.
    pub jobs: usize,
    /// Refuse a bundle not made for this (cluster name, Kubernetes version).
    pub expect: Option<(String, String)>,
}

fn check_expected(vb: &VerifiedBundle, opts: &ImportOptions) -> Result<()> {
    if let Some((cluster, version)) = &opts.expect {
        if &vb.manifest.cluster != cluster || &vb.manifest.kubernetes_version != version {
            return Err(AirgapError::Bundle {
                path: vb.path.clone(),
                reason: format!(
                    "made for {:?} {:?}, not {cluster} {version}",
                    vb.manifest.cluster, vb.manifest.kubernetes_version
                ),
            });
        }
    }
    Ok(())
}

/// A registry client with the registry's answers for every recorded reference.
type Prechecked = (RegistryClient, HashMap<String, Option<Digest>>);

/// Client setup (TLS roots) and the read-only `HEAD`s of every recorded reference on one of
/// `registries`, run beside `work` (which reads the bundle).
fn with_prechecked<T: Send>(
    opts: &ImportOptions,
    state: &ImportState,
    registries: &[String],
    work: impl FnOnce() -> T + Send,
) -> (T, Result<Prechecked>) {
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            RegistryClient::new(opts.client.clone()).map(|c| {
                let heads = precheck(&c, state, registries);
                (c, heads)
            })
        });
        let t = work();
        let prepared = h.join().unwrap_or_else(|_| {
            Err(AirgapError::Transport {
                url: "registry client".into(),
                reason: "setup thread panicked".into(),
            })
        });
        (t, prepared)
    })
}

/// True when the record and the registry agree that every image of `vb` is at its target.
fn all_served(
    vb: &VerifiedBundle,
    opts: &ImportOptions,
    state: &ImportState,
    heads: &HashMap<String, Option<Digest>>,
) -> Result<bool> {
    for img in &vb.manifest.images {
        let key = target_ref(&img.source, &img.mirror, opts.mirror_prefix.as_deref())?.to_string();
        if state.registry.get(&key) != Some(&img.digest)
            || heads.get(&key) != Some(&Some(img.digest.clone()))
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Verifies `bundle` completely, then pushes it to the mirror and saves the state. Nothing is sent
/// to any registry but read-only `HEAD`s for references recorded by an earlier import (run while
/// verifying, so a repeated import costs little more than the verification) unless verification
/// passed and, when `opts.expect` is set, the bundle was made for that cluster and version.
///
/// A repeated import of the same unchanged file is quicker still: when the record holds a full
/// verification of this very file ([`FileStamp`]: same path, device, inode, size, mtime and ctime —
/// any write changes the ctime) and its `SHA256SUMS` entry still hashes the same, and the registry
/// serves every image with the recorded digest, nothing needs to be read or written and the blobs
/// are not hashed again. Anything else (a changed or copied file, an image missing from the
/// registry) takes the full verification before any write.
/// Errors: verification (naming the entry), a bundle for another cluster, then push errors.
pub fn import_bundle(
    bundle: &Path,
    opts: &ImportOptions,
) -> Result<(VerifiedBundle, ImportReport)> {
    import_checked(bundle, opts, &|vb| check_expected(vb, opts))
}

/// As [`import_bundle`], for `cluster`: the bundle must have been made for its name and Kubernetes
/// version ([`check_matches`]), and the images go to the cluster file's registry mirror — under
/// `opts.mirror_prefix` when given, else under `registry.mirror`'s prefix (the references nodes pull,
/// whatever mirror the bundle recorded when it was made) — never to a registry the file does not
/// name. `opts.expect` is not used. Errors: as [`import_bundle`]; the file names no mirror and none
/// is given (nowhere to push); a bundle for another cluster (before any write).
pub fn import_bundle_for_cluster(
    bundle: &Path,
    cluster: &ValidCluster,
    opts: &ImportOptions,
) -> Result<(VerifiedBundle, ImportReport)> {
    let mut opts = opts.clone();
    if opts.mirror_prefix.is_none() {
        let prefix = cluster.mirror_prefix().ok_or_else(|| AirgapError::Mismatch {
            path: bundle.to_path_buf(),
            reason: "the cluster file names no registry mirror (registry.mirror): nowhere to push; set one or give --mirror".into(),
        })?;
        opts.mirror_prefix = Some(prefix.to_string());
    }
    import_checked(bundle, &opts, &|vb| check_matches(vb, cluster))
}

/// The registry (`host[:port]`) of a mirror prefix `host[:port][/path]`.
fn prefix_registry(prefix: &str) -> String {
    prefix
        .trim()
        .split('/')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// A verification remembered in an import record, bound to the bundle at `path`: its manifest and
/// `index.json` are read again from the bundle, at the offsets the record gives, and must hash to
/// what the bundle's `SHA256SUMS` (`listed`, hashed already) lists for them; they replace the
/// record's own copies, so a record cannot make the bundle say anything it does not. Errors: any
/// difference (the caller then verifies the whole bundle).
fn rebind(
    mut vb: VerifiedBundle,
    path: &Path,
    listed: &BTreeMap<String, Digest>,
) -> Result<VerifiedBundle> {
    use std::io::Read;
    vb.path = path.to_path_buf();
    let read = |name: &str| -> Result<Vec<u8>> {
        let want = listed.get(name).ok_or_else(|| AirgapError::Bundle {
            path: path.to_path_buf(),
            reason: format!("{name} is not listed in SHA256SUMS"),
        })?;
        let loc = vb.entries.get(name).filter(|l| l.size <= MAX_LIST_BYTES);
        if loc.is_none_or(|l| &l.digest != want) {
            return Err(AirgapError::Bundle {
                path: path.to_path_buf(),
                reason: format!("the import record's {name} is not the bundle's"),
            });
        }
        let mut buf = Vec::new();
        vb.open(name)?
            .read_to_end(&mut buf)
            .map_err(|e| AirgapError::io(path, e))?;
        want.verify(&buf, name)?;
        Ok(buf)
    };
    let manifest = read(MANIFEST_ENTRY)?;
    let index = read(&format!("{OCI_DIR}/index.json"))?;
    let bad = |name: &str, source| AirgapError::EntryJson {
        entry: name.to_string(),
        source,
    };
    vb.manifest = serde_json::from_slice(&manifest).map_err(|e| bad(MANIFEST_ENTRY, e))?;
    vb.index = serde_json::from_slice(&index).map_err(|e| bad("oci/index.json", e))?;
    Ok(vb)
}

/// [`import_bundle`] with `check` run on the verified bundle before anything is written.
///
/// The import record is trusted only for this bundle ([`ImportState::load_for`], by the digest of
/// its `SHA256SUMS`), and before verification only the registry this import pushes to (the host of
/// `opts.mirror_prefix`, when given) is asked anything: a record placed beside a bundle, listing
/// other registries, makes no request to them.
fn import_checked(
    bundle: &Path,
    opts: &ImportOptions,
    check: &dyn Fn(&VerifiedBundle) -> Result<()>,
) -> Result<(VerifiedBundle, ImportReport)> {
    let state_path = opts
        .state
        .clone()
        .unwrap_or_else(|| ImportState::default_path(bundle));
    check_state_path(&state_path)?;
    // Import reads entries at their offsets after verifying: a pipe cannot be read twice.
    if std::fs::metadata(bundle).is_ok_and(|m| !m.is_file()) {
        return Err(AirgapError::Bundle {
            path: bundle.to_path_buf(),
            reason: "not a regular file (a pipe or device cannot be read again after verification): copy it to a file first".into(),
        });
    }
    // A bundle whose SHA256SUMS cannot be read gets no record and no request: verification will
    // refuse it.
    let sums = read_sums(bundle).ok();
    let mut state = match &sums {
        Some((d, _)) => ImportState::load_for(&state_path, d),
        None => ImportState::default(),
    };
    let early: Vec<String> = opts
        .mirror_prefix
        .as_deref()
        .map(prefix_registry)
        .into_iter()
        .collect();
    let stamp = FileStamp::of(bundle).ok();
    let cached = match (&stamp, &state.verified, &sums) {
        (Some(s), Some(v), Some((d, listed))) if &v.file == s && &v.sums == d => {
            rebind(v.bundle.clone(), bundle, listed).ok()
        }
        _ => None,
    };
    let mut prepared = None;
    if let Some(c) = cached {
        check(&c)?;
        // The bundle's own targets (its manifest is bound to its SHA256SUMS now) may be asked.
        let mut hosts = early.clone();
        if opts.mirror_prefix.is_none() {
            hosts.extend(
                c.manifest
                    .images
                    .iter()
                    .filter_map(|i| reference::parse(&i.mirror).ok())
                    .map(|r| r.registry),
            );
        }
        let ((), ready) = with_prechecked(opts, &state, &hosts, || ());
        let (client, heads) = ready?;
        if all_served(&c, opts, &state, &heads)? {
            let report = ImportReport {
                images_skipped: c.manifest.images.len(),
                ..Default::default()
            };
            return Ok((c, report));
        }
        prepared = Some(Ok((client, heads)));
    }
    let (vb, prepared) = match prepared {
        Some(p) => (verify_bundle(bundle), p),
        None => with_prechecked(opts, &state, &early, || verify_bundle(bundle)),
    };
    let vb = vb?;
    let (client, heads) = prepared?;
    check(&vb)?;
    let verified_sums = vb.entries.get(SUMS_ENTRY).map(|l| l.digest.clone());
    if state.bundle != verified_sums {
        // The file changed since its SHA256SUMS was read: the record describes another bundle.
        state = ImportState {
            bundle: verified_sums.clone(),
            ..Default::default()
        };
    }
    let ropts = RegistryImportOptions {
        mirror_prefix: opts.mirror_prefix.clone(),
        jobs: opts.jobs.max(1),
    };
    let result = import_to_registry_with(&client, &vb, &ropts, &mut state, &heads);
    if result.is_ok() {
        if let (Some(file), Some(sums)) = (stamp, verified_sums) {
            state.verified = Some(VerifiedStamp {
                file,
                sums,
                bundle: vb.clone(),
            });
        }
    }
    state.save(&state_path)?;
    Ok((vb, result?))
}

/// Pushes an already verified bundle to the mirror and saves the state. Errors: the first push error
/// (the state still records the images pushed before it).
pub fn import_verified(vb: &VerifiedBundle, opts: &ImportOptions) -> Result<ImportReport> {
    let client = RegistryClient::new(opts.client.clone())?;
    let state_path = opts
        .state
        .clone()
        .unwrap_or_else(|| ImportState::default_path(&vb.path));
    check_state_path(&state_path)?;
    let mut state = match vb.entries.get(SUMS_ENTRY) {
        Some(l) => ImportState::load_for(&state_path, &l.digest),
        None => ImportState::default(),
    };
    let ropts = RegistryImportOptions {
        mirror_prefix: opts.mirror_prefix.clone(),
        jobs: opts.jobs.max(1),
    };
    let result = import_to_registry(&client, vb, &ropts, &mut state);
    state.save(&state_path)?;
    result
}

/// Checks that a bundle was made for `cluster`: same name, and it carries the file's Kubernetes
/// version (as its `kubernetesVersion`, or among its `extraVersions` once an upgrade moved the file
/// on, as `up` accepts it). Errors: `Mismatch`.
pub fn check_matches(vb: &VerifiedBundle, cluster: &ValidCluster) -> Result<()> {
    let want = cluster.version_info().tag();
    if vb.manifest.cluster != cluster.name() || !vb.manifest.carries_version(&want) {
        return Err(AirgapError::Mismatch {
            path: vb.path.clone(),
            reason: format!(
                "it was made for cluster {:?} {:?} (extraVersions {:?}), the file is {} {want}; write \
                 a bundle for this file with `clusterctl airgap bundle` (for another version: add it \
                 to airgap.extraVersions first)",
                vb.manifest.cluster,
                vb.manifest.kubernetes_version,
                vb.manifest.extra_versions,
                cluster.name()
            ),
        });
    }
    Ok(())
}
