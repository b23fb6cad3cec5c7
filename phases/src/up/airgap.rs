//! The air-gap phases of `up`, present when the cluster file names a bundle (`airgap.bundle`):
//! `airgap/verify` (once, on this machine: every byte of the bundle checked, and the bundle must have
//! been made for this cluster and Kubernetes version) → `airgap/packages` (per node, before
//! preflight: the node's packages and binaries streamed from the bundle to
//! `/var/lib/clusterctl/airgap/`, then `.deb`s installed with `dpkg -i`, `.rpm`s with `rpm -U`,
//! static binaries into `/usr/local/bin`) → … `runtime/<kind>` … → either `airgap/images` (per node,
//! no mirror: the images the node lacks cut out of the bundle and imported into its runtime with
//! `clusterctl_airgap::node::load_into_node`) or `airgap/mirror` (once, a mirror is set: the bundle
//! pushed to it with `clusterctl_airgap::run::import_verified`, recorded in `<bundle>.imported.json`).
//! Every step checks first (file sha256 and mode, `dpkg-query`/`rpm -q`, `ctr images ls` names and
//! manifest digests), so a second `up` changes nothing; the per-node phases are also recorded in the
//! state record with the content digests of what they placed as inputs.

use super::UpData;
use crate::ctx::{NodeCtx, PlanEntry, PlanKind};
use crate::engine::{Phase, Targets};
use crate::error::PhaseError;
use crate::model::{NodeInfo, RuntimeKind};
use clusterctl_airgap::bundle::{verify_bundle, VerifiedBundle};
use clusterctl_airgap::node::{
    files_for, install_script, install_step, load_into_node, oci_arch, os_family, parse_ctr_images,
    upload_file, InstallKind, NodeFile, NodeLoadOptions, Runtime,
};
use clusterctl_airgap::registry::ClientOptions;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// Directory on the nodes that receives the bundle's packages (`packages/`) and binaries (`bin/`).
pub const REMOTE_DIR: &str = "/var/lib/clusterctl/airgap";

/// The air-gap settings of one `up` (built by the CLI from `spec.airgap` and `spec.registry`).
/// Clones share the verified bundle.
#[derive(Clone)]
pub struct AirgapUp {
    /// The bundle file (`airgap.bundle`, resolved against the cluster file's directory).
    pub bundle: PathBuf,
    /// `Some` when a registry mirror is set: images are pushed there (with these client options:
    /// the mirror's CA, credential variable names) instead of into each node's runtime.
    pub mirror: Option<ClientOptions>,
    /// The import record for mirror pushes; default `<bundle>.imported.json`.
    pub record: PathBuf,
    verified: Arc<OnceLock<Arc<VerifiedBundle>>>,
}

impl std::fmt::Debug for AirgapUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AirgapUp")
            .field("bundle", &self.bundle)
            .field("mirror", &self.mirror.is_some())
            .field("record", &self.record)
            .field("verified", &self.verified.get().is_some())
            .finish()
    }
}

impl AirgapUp {
    /// Settings for `bundle`; `mirror` as in [`AirgapUp::mirror`].
    pub fn new(bundle: PathBuf, mirror: Option<ClientOptions>) -> Self {
        let record = clusterctl_airgap::import::ImportState::default_path(&bundle);
        AirgapUp {
            bundle,
            mirror,
            record,
            verified: Arc::new(OnceLock::new()),
        }
    }

    /// The bundle once `airgap/verify` checked it.
    pub fn verified(&self) -> Option<&Arc<VerifiedBundle>> {
        self.verified.get()
    }
}

fn no_inputs(_: &UpData, _: &NodeInfo) -> String {
    String::new()
}

/// The phases that run before preflight: `airgap/verify` (required: the others need it) and
/// `airgap/packages`. Empty without `airgap` settings.
pub fn early_phases(spec: &super::UpSpec) -> Vec<Phase<UpData>> {
    if spec.airgap.is_none() {
        return Vec::new();
    }
    vec![
        Phase {
            name: "airgap/verify",
            targets: Targets::Local,
            serial: false,
            record: false,
            required: true,
            inputs: no_inputs,
            run: verify,
        },
        Phase {
            name: "airgap/packages",
            targets: Targets::All,
            serial: false,
            record: true,
            required: false,
            inputs: package_inputs,
            run: packages,
        },
    ]
}

/// The phase that runs once the runtime is configured: `airgap/mirror` when a mirror is set, else
/// `airgap/images`. Empty without `airgap` settings.
pub fn image_phases(spec: &super::UpSpec) -> Vec<Phase<UpData>> {
    match &spec.airgap {
        None => Vec::new(),
        Some(a) if a.mirror.is_some() => vec![Phase {
            name: "airgap/mirror",
            targets: Targets::Local,
            serial: false,
            record: false,
            required: false,
            inputs: no_inputs,
            run: mirror,
        }],
        Some(_) => vec![Phase {
            name: "airgap/images",
            targets: Targets::All,
            serial: false,
            record: true,
            required: false,
            inputs: image_inputs,
            run: images,
        }],
    }
}

fn tag(version: &str) -> String {
    format!("v{}", version.trim_start_matches('v'))
}

/// `airgap/verify`: checks every byte of the bundle once per run (also in a dry run: it only reads
/// the local file) and that it was made for this cluster and version. Errors: the first bad entry,
/// named; a bundle for another cluster; a missing bundle (a dry run notes it and goes on).
pub fn verify(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let Some(a) = &data.spec.airgap else {
        return Ok(());
    };
    if a.verified.get().is_some() {
        return Ok(());
    }
    if ctx.mode.dry_run && !a.bundle.exists() {
        ctx.info(&format!(
            "bundle {} not found (write it with `clusterctl airgap bundle`)",
            a.bundle.display()
        ));
        return Ok(());
    }
    let vb = verify_bundle(&a.bundle).map_err(|e| ctx.local_error(e))?;
    let want = (
        data.spec.cluster.clone(),
        tag(&data.spec.kubernetes_version),
    );
    if (
        vb.manifest.cluster.clone(),
        vb.manifest.kubernetes_version.clone(),
    ) != want
    {
        return Err(ctx.local_error(format!(
            "bundle {} was made for {} {}, not {} {}",
            a.bundle.display(),
            vb.manifest.cluster,
            vb.manifest.kubernetes_version,
            want.0,
            want.1
        )));
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
        None if ctx.mode.dry_run => Ok(None),
        None => Err(ctx.local_error("the bundle was not verified (phase airgap/verify)")),
    }
}

/// The node's files from the bundle, by its facts (OS family from `ID`/`ID_LIKE`, architecture).
fn node_files(vb: &VerifiedBundle, data: &UpData, node: &str) -> Vec<NodeFile> {
    let f = data.facts_of(node);
    files_for(
        vb,
        os_family(&f.os_id, &f.os_like),
        &oci_arch(&f.arch),
        REMOTE_DIR,
    )
}

/// Digest material of `airgap/packages`: each file's node path, mode and sha256.
pub fn package_inputs(data: &UpData, node: &NodeInfo) -> String {
    let Some(vb) = data.spec.airgap.as_ref().and_then(|a| a.verified.get()) else {
        return String::new();
    };
    node_files(vb, data, &node.name)
        .iter()
        .map(|f| format!("{} {:o} {}\n", f.remote, f.mode, f.file.sha256))
        .collect()
}

fn plan(ctx: &mut NodeCtx, kind: PlanKind, text: String) {
    ctx.plan.push(PlanEntry {
        node: ctx.name().to_string(),
        phase: ctx.phase.clone(),
        kind,
        text,
    });
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
    ctx.changes += 1;
    if ctx.mode.dry_run {
        plan(ctx, PlanKind::Write, what);
        return Ok(());
    }
    let Some(t) = ctx.transport().cloned() else {
        return Err(ctx.local_error(format!("no connection to {what}")));
    };
    ctx.reporter().change(&ctx.phase, ctx.name(), &what);
    let reporter = ctx.reporter().clone();
    let node = ctx.name().to_string();
    let total = f.file.size;
    upload_file(t.as_ref(), vb, f, &mut |done| {
        reporter.upload_progress(&node, &f.remote, done, total)
    })
    .map_err(|e| ctx.local_error(e))
}

/// `airgap/packages`: places the node's packages and binaries, then installs what is not installed.
pub fn packages(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
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

/// Digest material of `airgap/images`: the runtime and every image's name and manifest digest.
pub fn image_inputs(data: &UpData, _: &NodeInfo) -> String {
    let Some(vb) = data.spec.airgap.as_ref().and_then(|a| a.verified.get()) else {
        return String::new();
    };
    let mut s = format!("{}\n", data.spec.runtime.unit());
    for i in &vb.manifest.images {
        s.push_str(&format!("{} {}\n", i.mirror, i.digest));
    }
    s
}

/// `airgap/images`: imports into the node's runtime every image of the bundle it does not hold
/// under the bundle's name and manifest digest (containerd: `ctr -n k8s.io images ls`; CRI-O:
/// `crictl inspecti`), in one archive streamed from the bundle.
pub fn images(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let Some(vb) = bundle_of(ctx, data)? else {
        ctx.info("images from the bundle into the runtime (once it is written and verified)");
        return Ok(());
    };
    let mut todo = Vec::new();
    let (runtime, present) = match data.spec.runtime {
        RuntimeKind::Containerd => {
            let listing = ctx.read_labelled(
                "ctr -n k8s.io images ls",
                Some("list the images in containerd"),
            )?;
            (
                Runtime::Containerd { ctr: "ctr".into() },
                listing.map(|l| parse_ctr_images(&l)),
            )
        }
        RuntimeKind::Crio => (Runtime::Crio, None),
    };
    for img in &vb.manifest.images {
        let have = match (&runtime, &present) {
            (Runtime::Containerd { .. }, Some(p)) => p.get(&img.mirror) == Some(&img.digest),
            (Runtime::Containerd { .. }, None) => false,
            (Runtime::Crio, _) => {
                ctx.test(&format!(
                    "crictl inspecti {} >/dev/null 2>&1",
                    crate::util::sh_quote(&img.mirror)
                ))? == Some(true)
            }
        };
        if !have {
            todo.push(img.clone());
        }
    }
    if todo.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = todo.iter().map(|i| i.mirror.as_str()).collect();
    let what = format!(
        "load {} image(s) from the bundle into {}: {}",
        todo.len(),
        data.spec.runtime.unit(),
        names.join(", ")
    );
    ctx.changes += 1;
    if ctx.mode.dry_run {
        plan(ctx, PlanKind::Run, what);
        return Ok(());
    }
    let Some(t) = ctx.transport().cloned() else {
        return Err(ctx.local_error(format!("no connection to {what}")));
    };
    ctx.reporter().change(&ctx.phase, ctx.name(), &what);
    let opts = NodeLoadOptions {
        runtime,
        remote_dir: REMOTE_DIR.to_string(),
    };
    let mut state = clusterctl_airgap::import::ImportState::default();
    load_into_node(t.as_ref(), vb, &todo, &opts, &mut state).map_err(|e| ctx.local_error(e))?;
    Ok(())
}

/// `airgap/mirror`: pushes the bundle's images to the registry mirror (blobs the registry has are
/// skipped; images the import record lists and the registry serves with the same digest cost one
/// `HEAD`). A dry run only plans it.
pub fn mirror(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let Some(a) = &data.spec.airgap else {
        return Ok(());
    };
    let Some(client) = &a.mirror else {
        return Ok(());
    };
    let Some(vb) = bundle_of(ctx, data)? else {
        ctx.info("push the bundle's images to the mirror (once it is written and verified)");
        return Ok(());
    };
    if ctx.mode.dry_run {
        ctx.changes += 1;
        plan(
            ctx,
            PlanKind::Local,
            format!(
                "push {} image(s) of {} to the mirror (skipping what {} records and the mirror serves)",
                vb.manifest.images.len(),
                a.bundle.display(),
                a.record.display()
            ),
        );
        return Ok(());
    }
    let opts = clusterctl_airgap::run::ImportOptions {
        client: client.clone(),
        state: Some(a.record.clone()),
        jobs: 4,
        ..Default::default()
    };
    let r = clusterctl_airgap::run::import_verified(vb, &opts).map_err(|e| ctx.local_error(e))?;
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
}
