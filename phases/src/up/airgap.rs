//! The air-gap phases of `up`, present when the cluster file names a bundle (`airgap.bundle`):
//! `airgap/verify` (once, on this machine: every byte of the bundle checked, and the bundle must have
//! been made for this cluster and carry this Kubernetes version) → `airgap/packages` (per node, before
//! preflight: the node's packages and binaries streamed from the bundle to
//! `/var/lib/clusterctl/airgap/`, then `.deb`s installed with `dpkg -i`, `.rpm`s with `rpm -U`,
//! static binaries into `/usr/local/bin`; with `packages.source: bundle` this is the `packages`
//! phase's work instead, [`packages`] called from there) → … `runtime/<kind>` … → either `airgap/images` (per node,
//! no mirror: the images of the current version the node's role needs ([`RoleImages`]) and its runtime
//! lacks, cut out of the bundle and imported with `clusterctl_airgap::node::load_into_node`) or
//! `airgap/mirror` (once, a mirror is set: the bundle pushed to it with
//! `clusterctl_airgap::run::import_verified`, recorded in `<bundle>.imported.json`).
//! Every step checks first (file sha256 and mode, `dpkg-query`/`rpm -q`, `ctr images ls` names and
//! manifest digests), so a second `up` changes nothing; the per-node phases are also recorded in the
//! state record with the content digests of what they placed as inputs. [`ensure_images`] and
//! [`push_to_mirror`] are shared with `upgrade`'s image steps.

use super::UpData;
use crate::ctx::{Change, NodeCtx, PlanKind};
use crate::error::PhaseError;
use clusterctl_airgap::bundle::{verify_bundle, BundleImage, VerifiedBundle};
use clusterctl_airgap::node::{
    crio, install_script, install_step, load_into_node, oci_arch, os_family, parse_ctr_images,
    upload_file, InstallKind, NodeFile, NodeLoadOptions, Runtime,
};
use clusterctl_airgap::registry::ClientOptions;
use clusterctl_spec::model::RuntimeKind;
use clusterctl_spec::ValidNode;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Directory on the nodes that receives the bundle's packages (`packages/`) and binaries (`bin/`).
pub(crate) const REMOTE_DIR: &str = "/var/lib/clusterctl/airgap";

/// The air-gap settings of one `up` (built by the CLI from `spec.airgap` and `spec.registry`).
/// Clones share the verified bundle.
#[derive(Clone)]
pub struct AirgapUp {
    /// The bundle file (`airgap.bundle`, resolved against the cluster file's directory).
    pub bundle: PathBuf,
    /// `Some` when a registry mirror is set: images are pushed there instead of into each node's
    /// runtime.
    pub mirror: Option<MirrorPush>,
    /// The import record for mirror pushes; default `<bundle>.imported.json`.
    pub record: PathBuf,
    /// The upstream references each role needs at the current version (from
    /// `clusterctl_airgap::plan::node_images`); `None`: every image of the bundle on every node.
    pub node_images: Option<RoleImages>,
    /// Where the cluster file unpacks each archive package: `(name, osFamily, arch)` → `extractTo`.
    /// `None`: not checked. A bundle entry whose `extractTo` differs from the file's is refused by
    /// `airgap/verify`, so a bundle cannot choose where archives land on the nodes.
    pub extract_to: Option<BTreeMap<(String, String, String), String>>,
    /// The reference the file's nodes pull each image by, keyed by normalised source
    /// (`clusterctl_airgap::plan::pull_names`); images are loaded under these names whatever
    /// mirror the bundle recorded. Empty: the bundle's names.
    pub pull_names: BTreeMap<String, String>,
    verified: Arc<OnceLock<Arc<VerifiedBundle>>>,
}

/// Where the bundle's images are pushed when the cluster file names a registry mirror.
#[derive(Debug, Clone)]
pub struct MirrorPush {
    /// Client options: the mirror's CA, the names of its credential variables.
    pub client: ClientOptions,
    /// The file's mirror prefix (`registry.mirror`, `host[:port][/path]`): every image is pushed
    /// under it (its upstream repository path kept), whatever mirror the bundle recorded when it was
    /// written, since that is where the nodes pull from.
    pub prefix: String,
}

/// The upstream image references (as `clusterctl airgap images` lists them) a node needs, per role.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleImages {
    /// What a control plane needs: every image of the current version.
    pub control_plane: Vec<String>,
    /// What a worker needs: no control-plane-only image (kube-apiserver, kube-controller-manager,
    /// kube-scheduler, etcd, kube-vip).
    pub worker: Vec<String>,
}

impl RoleImages {
    /// The list for a control plane (`control_plane` true) or a worker.
    pub fn for_role(&self, control_plane: bool) -> &[String] {
        if control_plane {
            &self.control_plane
        } else {
            &self.worker
        }
    }
}

impl std::fmt::Debug for AirgapUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AirgapUp")
            .field("bundle", &self.bundle)
            .field("mirror", &self.mirror.is_some())
            .field("record", &self.record)
            .field("node_images", &self.node_images)
            .field("verified", &self.verified.get().is_some())
            .finish()
    }
}

impl AirgapUp {
    /// Settings for `bundle`; `mirror` as in [`AirgapUp::mirror`].
    pub fn new(bundle: PathBuf, mirror: Option<MirrorPush>) -> Self {
        let record = clusterctl_airgap::import::ImportState::default_path(&bundle);
        AirgapUp {
            bundle,
            mirror,
            record,
            node_images: None,
            extract_to: None,
            pull_names: BTreeMap::new(),
            verified: Arc::new(OnceLock::new()),
        }
    }

    /// The same settings loading only `images` per role (see [`AirgapUp::node_images`]).
    pub fn with_node_images(mut self, images: RoleImages) -> Self {
        self.node_images = Some(images);
        self
    }

    /// The same settings with the file's `extractTo` values (see [`AirgapUp::extract_to`]).
    pub fn with_extract_to(
        mut self,
        extract_to: BTreeMap<(String, String, String), String>,
    ) -> Self {
        self.extract_to = Some(extract_to);
        self
    }

    /// The same settings loading images under `names` (see [`AirgapUp::pull_names`]).
    pub fn with_pull_names(mut self, names: BTreeMap<String, String>) -> Self {
        self.pull_names = names;
        self
    }

    /// What a node of the given role needs of `vb` — the entries [`AirgapUp::node_images`] names
    /// for that role (matched by normalised source reference), or every image of the bundle without
    /// that list — named as the file's nodes pull it ([`AirgapUp::pull_names`]). Errors:
    /// `Err(missing)`, the references the bundle does not carry.
    pub fn wanted(
        &self,
        vb: &VerifiedBundle,
        control_plane: bool,
    ) -> Result<Vec<BundleImage>, Vec<String>> {
        let list = match &self.node_images {
            Some(r) => clusterctl_airgap::plan::select(&vb.manifest, r.for_role(control_plane))?,
            None => vb.manifest.images.clone(),
        };
        Ok(clusterctl_airgap::plan::renamed(list, &self.pull_names))
    }

    /// The bundle once `airgap/verify` checked it.
    pub fn verified(&self) -> Option<&Arc<VerifiedBundle>> {
        self.verified.get()
    }
}

/// `airgap/verify`: checks every byte of the bundle once per run (also in a dry run: it only reads
/// the local file) and that it was made for this cluster and carries this version (its
/// `kubernetesVersion`, or one of its `extraVersions` once the file was moved on by an upgrade).
/// Errors: the first bad entry, named; a bundle for another cluster or version; a bundle lacking an
/// image the cluster pulls, or unpacking an archive elsewhere than the file says; a missing bundle (a
/// dry run notes it and goes on).
pub(crate) fn verify(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let Some(a) = &data.spec.airgap else {
        return Ok(());
    };
    if a.verified.get().is_some() {
        return Ok(());
    }
    // Not a change: a dry run notes a missing bundle and plans on (the bundle may be written later).
    if ctx.mode.dry_run && !a.bundle.exists() {
        ctx.info(&format!(
            "bundle {} not found (write it with `clusterctl airgap bundle`)",
            a.bundle.display()
        ));
        return Ok(());
    }
    let vb = verify_bundle(&a.bundle).map_err(|e| ctx.local_error_from(&e))?;
    let want = (
        data.spec.cluster.clone(),
        clusterctl_spec::versions::tag(&data.spec.kubernetes_version),
    );
    if vb.manifest.cluster != want.0 || !vb.manifest.carries_version(&want.1) {
        return Err(ctx.local_error(format!(
            // What the bundle says about itself is quoted ({:?}), never printed raw.
            "bundle {} was made for {:?} {:?} (extraVersions {:?}), not {} {}: add {} to \
             airgap.extraVersions (or make it the kubernetesVersion), write the bundle again with \
             `clusterctl airgap bundle` on a connected machine, and carry it here",
            a.bundle.display(),
            vb.manifest.cluster,
            vb.manifest.kubernetes_version,
            vb.manifest.extra_versions,
            want.0,
            want.1,
            want.1
        )));
    }
    if let Err(missing) = a.wanted(&vb, true) {
        return Err(ctx.local_error(format!(
            "bundle {} does not carry {} image(s) the cluster pulls: {} (the cluster file changed \
             since the bundle was written? write it again with `clusterctl airgap bundle`)",
            a.bundle.display(),
            missing.len(),
            missing.join(", ")
        )));
    }
    if let Some(want) = &a.extract_to {
        for p in &vb.manifest.packages {
            let key = (
                p.name.clone(),
                p.os.clone().unwrap_or_default(),
                p.arch.clone().unwrap_or_default(),
            );
            if p.extract_to.as_ref() != want.get(&key) {
                return Err(ctx.local_error(format!(
                    "bundle {} unpacks package {} into {}, the cluster file into {} (write the \
                     bundle again with `clusterctl airgap bundle`)",
                    a.bundle.display(),
                    p.path,
                    p.extract_to.as_deref().unwrap_or("nothing"),
                    want.get(&key).map(String::as_str).unwrap_or("nothing")
                )));
            }
        }
    }
    ctx.info(&format!(
        "bundle {} verified: {} entries, {} bytes, {} images, {} packages",
        a.bundle.display(),
        vb.entries.len(),
        vb.bytes_verified,
        vb.manifest.images.len(),
        vb.manifest.packages.len()
    ));
    let _ = a.verified.set(Arc::new(vb));
    Ok(())
}

fn bundle_of<'a>(
    ctx: &NodeCtx,
    data: &'a UpData,
) -> Result<Option<&'a Arc<VerifiedBundle>>, PhaseError> {
    let Some(a) = &data.spec.airgap else {
        return Ok(None);
    };
    match a.verified.get() {
        Some(vb) => Ok(Some(vb)),
        // Not a change: a dry run plans without a verified bundle (airgap/verify noted why).
        None if ctx.mode.dry_run => Ok(None),
        None => Err(ctx.local_error("the bundle was not verified (phase airgap/verify)")),
    }
}

/// The architectures (OCI names) the verified bundle carries a CNI agent for (`bin/clusterctl-linux-<arch>`
/// entries, `airgap bundle --agent ARCH=PATH`); empty without a bundle or before it is verified.
pub(crate) fn agent_archs(data: &UpData) -> Vec<String> {
    let Some(vb) = data.spec.airgap.as_ref().and_then(|a| a.verified.get()) else {
        return Vec::new();
    };
    vb.manifest
        .binaries
        .iter()
        .filter(|b| {
            b.name
                .starts_with(clusterctl_airgap::packages::AGENT_PREFIX)
        })
        .filter_map(|b| b.arch.clone())
        .collect()
}

/// Where `airgap/packages` placed the bundle's CNI agent for `arch` on the node (under
/// [`REMOTE_DIR`]`/bin/`), when the verified bundle carries one.
pub(crate) fn agent_on_node(data: &UpData, arch: &str) -> Option<String> {
    let vb = data.spec.airgap.as_ref().and_then(|a| a.verified.get())?;
    vb.manifest
        .binaries
        .iter()
        .find(|b| {
            b.name
                .starts_with(clusterctl_airgap::packages::AGENT_PREFIX)
                && b.arch.as_deref() == Some(arch)
        })
        .and_then(|b| b.path.rsplit('/').next())
        .map(|name| format!("{REMOTE_DIR}/bin/{name}"))
}

/// The node's files from the bundle, by its facts (OS family from `ID`/`ID_LIKE`, architecture),
/// without the packages tagged with another Kubernetes version than the cluster's.
fn node_files(vb: &VerifiedBundle, data: &UpData, node: &str) -> Vec<NodeFile> {
    let f = data.facts_of(node);
    // Packages tagged with another Kubernetes version (an upgrade target's) stay in the bundle.
    clusterctl_airgap::node::versions::files_at_version(
        vb,
        os_family(&f.os_id, &f.os_like),
        &oci_arch(&f.arch),
        REMOTE_DIR,
        &data.spec.kubernetes_version.to_string(),
    )
}

/// Digest material of `airgap/packages`: each file's node path, mode and sha256, plus `extractTo` for
/// archives unpacked on the node (a new directory must unpack again).
pub(crate) fn package_inputs(data: &UpData, node: &ValidNode) -> String {
    let Some(vb) = data.spec.airgap.as_ref().and_then(|a| a.verified.get()) else {
        return String::new();
    };
    node_files(vb, data, &node.name)
        .iter()
        .map(|f| match &f.file.extract_to {
            // Unchanged without extractTo, so records written before the field keep matching.
            None => format!("{} {:o} {}\n", f.remote, f.mode, f.file.sha256),
            Some(d) => format!(
                "{} {:o} {} extractTo={d}\n",
                f.remote, f.mode, f.file.sha256
            ),
        })
        .collect()
}

/// Streams `f` to the node unless it already has it (sha256 and mode compared first).
fn place(ctx: &mut NodeCtx, vb: &VerifiedBundle, f: &NodeFile) -> Result<(), PhaseError> {
    if let Some(Some((sha, mode))) = ctx.file_digest(&f.remote)? {
        if sha == f.file.sha256.hex() && mode == f.mode {
            return Ok(());
        }
    }
    let what = format!(
        "write {} ({} bytes, mode {:04o}, from bundle entry {})",
        f.remote, f.file.size, f.mode, f.file.path
    );
    ctx.change(Change::new(PlanKind::Write, &what), |ctx| {
        let t = ctx.connection(&what)?;
        let reporter = ctx.reporter().clone();
        let node = ctx.name().to_string();
        let total = f.file.size;
        upload_file(t.as_ref(), vb, f, &mut |done| {
            reporter.upload_progress(&node, &f.remote, done, total)
        })
        .map_err(|e| ctx.local_error_from(&e))
    })?;
    Ok(())
}

/// `airgap/packages`: places the node's packages and binaries, then installs what is not installed.
pub(crate) fn packages(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let Some(vb) = bundle_of(ctx, data)? else {
        ctx.info("packages and binaries from the bundle (once it is written and verified)");
        return Ok(());
    };
    let files = node_files(vb, data, ctx.name());
    for f in &files {
        place(ctx, vb, f)?;
    }
    let mut todo: BTreeMap<InstallKind, Vec<&NodeFile>> = BTreeMap::new();
    for f in &files {
        let Some((kind, check)) = install_step(f) else {
            continue;
        };
        if ctx.test(&check)? != Some(true) {
            todo.entry(kind).or_default().push(f);
        }
    }
    for (kind, list) in todo {
        ctx.run_script(&install_script(kind, &list))?;
    }
    Ok(())
}

/// Digest material of the image steps: the runtime and every image's name and manifest digest.
pub(crate) fn image_digests(runtime: RuntimeKind, images: &[BundleImage]) -> String {
    let mut s = format!("{}\n", runtime.unit());
    for i in images {
        s.push_str(&format!("{} {}\n", i.mirror, i.digest));
    }
    s
}

/// Digest material of `airgap/images`: the runtime and the name and manifest digest of every image
/// the node's role needs (missing ones by source, so the phase runs and reports them).
pub(crate) fn image_inputs(data: &UpData, node: &ValidNode) -> String {
    let Some(a) = data.spec.airgap.as_ref() else {
        return String::new();
    };
    let Some(vb) = a.verified.get() else {
        return String::new();
    };
    match a.wanted(vb, node.is_control_plane()) {
        Ok(list) => image_digests(data.spec.runtime, &list),
        Err(missing) => format!("missing {}", missing.join(" ")),
    }
}

/// `airgap/images`: imports into the node's runtime the images of the current version its role needs
/// ([`AirgapUp::node_images`]: a worker gets no control-plane-only image) that it does not hold
/// under the name the file's nodes pull it by ([`AirgapUp::pull_names`]) and the bundle's manifest
/// digest ([`ensure_images`]). Errors: an image the bundle does
/// not carry (the cluster file changed since the bundle was written), or the load failed.
pub(crate) fn images(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let Some(vb) = bundle_of(ctx, data)? else {
        ctx.info("images from the bundle into the runtime (once it is written and verified)");
        return Ok(());
    };
    let Some(a) = data.spec.airgap.as_ref() else {
        return Ok(());
    };
    let wanted = a.wanted(vb, ctx.node.is_control_plane()).map_err(|missing| {
        ctx.local_error(format!(
            "the bundle does not carry {} image(s) this node needs: {} (the cluster file changed since \
             the bundle was written? write it again with `clusterctl airgap bundle`)",
            missing.len(),
            missing.join(", ")
        ))
    })?;
    ensure_images(ctx, vb, data.spec.runtime, &wanted)
}

/// Loads into the node's runtime those of `images` it does not hold under the bundle's name and
/// manifest digest, in one OCI archive cut out of `vb`, streamed and imported
/// (`node::load_into_node`). The check is one read-only command either way: containerd, `ctr -n
/// k8s.io images ls` (name → manifest digest); CRI-O, `uname -m` and `skopeo inspect --raw
/// containers-storage:NAME` per image, hashed (`node::crio`: for a tagged index the node's platform
/// child is what containers-storage stores). A dry run only plans the load. Errors: the check or
/// the load failed.
pub(crate) fn ensure_images(
    ctx: &mut NodeCtx,
    vb: &VerifiedBundle,
    runtime_kind: RuntimeKind,
    images: &[BundleImage],
) -> Result<(), PhaseError> {
    if images.is_empty() {
        return Ok(());
    }
    let (runtime, present): (Runtime, Option<BTreeSet<String>>) = match runtime_kind {
        RuntimeKind::Containerd => {
            let listing = ctx.read_labelled(
                "ctr -n k8s.io images ls",
                Some("list the images in containerd"),
            )?;
            let present = listing.map(|l| {
                let have = parse_ctr_images(&l);
                images
                    .iter()
                    .filter(|i| have.get(&i.mirror) == Some(&i.digest))
                    .map(|i| i.mirror.clone())
                    .collect()
            });
            (Runtime::Containerd { ctr: "ctr".into() }, present)
        }
        RuntimeKind::Crio => {
            let script = format!("uname -m; {}", crio::check_script(images));
            let listing = ctx.read_labelled(
                &script,
                Some("list the images in containers-storage (skopeo inspect)"),
            )?;
            let present = match listing {
                Some(out) => {
                    let (arch, rest) = out.split_once('\n').unwrap_or((out.as_str(), ""));
                    let have = crio::parse_check(rest);
                    Some(
                        crio::present_in(vb, images, &oci_arch(arch), &have)
                            .map_err(|e| ctx.local_error_from(&e))?,
                    )
                }
                None => None,
            };
            (Runtime::Crio, present)
        }
    };
    let todo: Vec<BundleImage> = images
        .iter()
        .filter(|i| !present.as_ref().is_some_and(|p| p.contains(&i.mirror)))
        .cloned()
        .collect();
    if todo.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = todo.iter().map(|i| i.mirror.as_str()).collect();
    let what = format!(
        "load {} image(s) from the bundle into {}: {}",
        todo.len(),
        runtime_kind.unit(),
        names.join(", ")
    );
    ctx.change(
        Change::new(PlanKind::Run, &what).reported_as(&what),
        |ctx| {
            let t = ctx.connection(&what)?;
            let opts = NodeLoadOptions {
                runtime,
                remote_dir: REMOTE_DIR.to_string(),
            };
            let mut state = clusterctl_airgap::import::ImportState::default();
            load_into_node(t.as_ref(), vb, &todo, &opts, &mut state)
                .map_err(|e| ctx.local_error_from(&e))
        },
    )?;
    Ok(())
}

/// `airgap/mirror`: pushes the bundle's images to the registry mirror ([`push_to_mirror`]).
pub(crate) fn mirror(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let Some(a) = &data.spec.airgap else {
        return Ok(());
    };
    let Some(m) = &a.mirror else {
        return Ok(());
    };
    let Some(vb) = bundle_of(ctx, data)? else {
        ctx.info("push the bundle's images to the mirror (once it is written and verified)");
        return Ok(());
    };
    push_to_mirror(ctx, vb, m, &a.record)
}

/// Pushes every image of `vb` to the registry mirror `m`, under its prefix (blobs the registry has
/// are skipped; images the import record `record` lists and the registry serves with the same digest
/// cost one `HEAD`). A dry run only plans it. Errors: the first push error, naming the image.
pub(crate) fn push_to_mirror(
    ctx: &mut NodeCtx,
    vb: &VerifiedBundle,
    m: &MirrorPush,
    record: &Path,
) -> Result<(), PhaseError> {
    let push = Change::new(
        PlanKind::Local,
        format!(
            "push {} image(s) of {} to the mirror {} (skipping what {} records and the mirror serves)",
            vb.manifest.images.len(),
            vb.path.display(),
            m.prefix,
            record.display()
        ),
    )
    // The run counts and reports the images it actually pushed (none when the mirror has them).
    .reports_itself();
    ctx.change(push, |ctx| {
        let opts = clusterctl_airgap::run::ImportOptions {
            client: m.client.clone(),
            mirror_prefix: Some(m.prefix.clone()),
            state: Some(record.to_path_buf()),
            jobs: 4,
            ..Default::default()
        };
        let r = clusterctl_airgap::run::import_verified(vb, &opts)
            .map_err(|e| ctx.local_error_from(&e))?;
        if r.images_pushed > 0 {
            ctx.changes += r.images_pushed;
            ctx.reporter().change(
                &ctx.phase,
                ctx.name(),
                &format!(
                    "pushed {} image(s) to the mirror ({} blobs, {} bytes uploaded)",
                    r.images_pushed, r.blobs_uploaded, r.bytes_uploaded
                ),
            );
        }
        Ok(())
    })?;
    Ok(())
}
