//! Loading images into a node's container runtime through `clusterctl_exec::Transport`: the images a
//! node needs are cut out of the verified bundle into an OCI archive (an OCI image layout in a tar,
//! the format `ctr images import` reads), streamed to the node with `upload_stream`, imported with
//! `ctr -n k8s.io images import` (containerd) or `skopeo copy oci-archive:… containers-storage:…`
//! (CRI-O), and removed again. The loaded digests are recorded per node so a second run skips them;
//! [`crio_images_present`] reads what a CRI-O node's containers-storage already holds. Package files
//! are streamed to the node and installed (`.deb`, `.rpm`, static binaries, archives unpacked into
//! their `extractTo` directory).

use crate::bundle::verify::blob_entry;
use crate::bundle::write::layout_index;
use crate::bundle::{BundleImage, VerifiedBundle};
use crate::digest::Digest;
use crate::error::{AirgapError, Result};
use crate::import::ImportState;
use crate::oci::OCI_LAYOUT_FILE;
use clusterctl_exec::shell::quote;
use clusterctl_exec::{Cmd, FileSpec, Transport};
use std::collections::BTreeSet;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

pub mod crio;
pub mod versions;

/// Which of a set of images a CRI-O node already holds under the right manifest digest (one remote
/// command for all): see [`crio::images_present`].
pub use crio::images_present as crio_images_present;

/// The node's container runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runtime {
    /// containerd: `ctr -n k8s.io images import`. `ctr` is the command prefix (e.g.
    /// `ctr --address /run/containerd/containerd.sock`).
    Containerd {
        /// The `ctr` command prefix.
        ctr: String,
    },
    /// CRI-O: `skopeo copy oci-archive:FILE:NAME containers-storage:NAME` per image.
    Crio,
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime::Containerd {
            ctr: "ctr".to_string(),
        }
    }
}

/// How to load images into one node.
#[derive(Debug, Clone)]
pub struct NodeLoadOptions {
    /// The runtime and its command.
    pub runtime: Runtime,
    /// Directory on the node for the temporary archive.
    pub remote_dir: String,
}

impl Default for NodeLoadOptions {
    fn default() -> Self {
        NodeLoadOptions {
            runtime: Runtime::default(),
            remote_dir: "/var/lib/clusterctl/airgap".to_string(),
        }
    }
}

/// What loading into one node did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeLoadReport {
    /// Images loaded now.
    pub loaded: usize,
    /// Images skipped (recorded as loaded before).
    pub skipped: usize,
    /// Bytes streamed to the node.
    pub bytes: u64,
}

/// Writes an OCI archive holding `images` (and every blob they need) from `bundle` to a temp file.
/// Deterministic like the bundle itself. Errors: a missing blob or I/O.
pub fn write_oci_archive(
    bundle: &VerifiedBundle,
    images: &[BundleImage],
) -> Result<tempfile::NamedTempFile> {
    let mut blobs = BTreeSet::new();
    for img in images {
        blobs.extend(bundle.blobs_of(&img.digest, &img.media_type)?);
    }
    let tmp =
        tempfile::NamedTempFile::new().map_err(|e| AirgapError::io(std::env::temp_dir(), e))?;
    let path = tmp.path().to_path_buf();
    let io = |e| AirgapError::io(&path, e);
    let mut tb = tar::Builder::new(std::io::BufWriter::new(tmp.reopen().map_err(io)?));
    let hdr = |size: u64| {
        let mut h = tar::Header::new_gnu();
        h.set_size(size);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_entry_type(tar::EntryType::Regular);
        h
    };
    tb.append_data(
        &mut hdr(OCI_LAYOUT_FILE.len() as u64),
        "oci-layout",
        OCI_LAYOUT_FILE,
    )
    .map_err(io)?;
    let index = layout_index(images)?;
    tb.append_data(&mut hdr(index.len() as u64), "index.json", index.as_slice())
        .map_err(io)?;
    for d in &blobs {
        let d: &Digest = d;
        let size = bundle.blob_size(d).ok_or_else(|| AirgapError::Entry {
            entry: blob_entry(d),
            reason: "missing".into(),
        })?;
        let reader = bundle.open(&blob_entry(d))?;
        tb.append_data(&mut hdr(size), format!("blobs/sha256/{}", d.hex()), reader)
            .map_err(io)?;
    }
    tb.into_inner().map_err(io)?.flush().map_err(io)?;
    Ok(tmp)
}

/// The shell script importing archive `file` on the node for `images`.
pub fn import_script(runtime: &Runtime, file: &str, images: &[BundleImage]) -> String {
    let q = quote(file);
    match runtime {
        Runtime::Containerd { ctr } => {
            format!("{ctr} -n k8s.io images import --all-platforms {q}; rc=$?; rm -f {q}; exit $rc")
        }
        Runtime::Crio => {
            let mut s = String::from("set -e; ");
            for i in images {
                let name = crate::bundle::write::layout_name(i);
                let src = quote(&format!("oci-archive:{file}:{name}"));
                let dst = quote(&format!("containers-storage:{}", i.mirror));
                s.push_str(&format!("skopeo copy --quiet {src} {dst}; "));
            }
            s.push_str(&format!("rm -f {q}"));
            s
        }
    }
}

/// Loads `images` (those not yet recorded for this node in `state`) into the node behind `transport`.
/// Errors: upload or import failure (`AirgapError::NodeTransport`, or `NodeCommand` with the
/// command's output).
pub fn load_into_node(
    transport: &dyn Transport,
    bundle: &VerifiedBundle,
    images: &[BundleImage],
    opts: &NodeLoadOptions,
    state: &mut ImportState,
) -> Result<NodeLoadReport> {
    let node = transport.node().to_string();
    let done: BTreeSet<Digest> = state
        .nodes
        .get(&node)
        .map(|v| v.iter().cloned().collect())
        .unwrap_or_default();
    let todo: Vec<BundleImage> = images
        .iter()
        .filter(|i| !done.contains(&i.digest))
        .cloned()
        .collect();
    let mut report = NodeLoadReport {
        skipped: images.len() - todo.len(),
        ..Default::default()
    };
    if todo.is_empty() {
        return Ok(report);
    }
    let archive = write_oci_archive(bundle, &todo)?;
    let mut f = archive
        .reopen()
        .map_err(|e| AirgapError::io(archive.path(), e))?;
    let size = f
        .seek(SeekFrom::End(0))
        .and_then(|n| f.seek(SeekFrom::Start(0)).map(|_| n))
        .map_err(|e| AirgapError::io(archive.path(), e))?;
    let remote = format!(
        "{}/images-{}.tar",
        opts.remote_dir.trim_end_matches('/'),
        todo[0].digest.hex().get(..12).unwrap_or("x")
    );
    let spec = FileSpec {
        path: PathBuf::from(&remote),
        mode: 0o600,
        owner: None,
    };
    let node_err = |source| AirgapError::NodeTransport {
        node: node.clone(),
        what: None,
        source: Box::new(source),
    };
    transport
        .upload_stream(&mut f as &mut dyn Read, size, &spec, &mut |_| {})
        .map_err(node_err)?;
    let out = transport
        .run(&Cmd::new(import_script(&opts.runtime, &remote, &todo)).sudo())
        .map_err(node_err)?;
    if !out.success() {
        return Err(AirgapError::NodeCommand {
            node: node.clone(),
            what: "image import",
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    report.loaded = todo.len();
    report.bytes = size;
    let entry = state.nodes.entry(node).or_default();
    entry.extend(todo.iter().map(|i| i.digest.clone()));
    entry.sort();
    entry.dedup();
    Ok(report)
}

/// One bundle file a node needs: the entry, where it goes on the node and its mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFile {
    /// The bundle entry (path, size, sha256, OS family, arch).
    pub file: crate::bundle::BundleFile,
    /// Absolute path on the node: `<remote_dir>/packages/<file>` or `<remote_dir>/bin/<file>`.
    pub remote: String,
    /// File mode on the node: 0644 for packages, 0755 for binaries.
    pub mode: u32,
    /// True for `bin/…` entries (the clusterctl binary), false for `airgap.packages`.
    pub binary: bool,
}

/// The bundle's packages for a node (`os_family` and `arch` equal, or OS family `any`) and its
/// binaries (those without an architecture, and the agent of `arch`), in bundle order, with their paths under `remote_dir` on the node.
pub fn files_for(
    bundle: &VerifiedBundle,
    os_family: &str,
    arch: &str,
    remote_dir: &str,
) -> Vec<NodeFile> {
    let dir = remote_dir.trim_end_matches('/');
    bundle
        .manifest
        .packages
        .iter()
        .filter(|p| {
            p.os.as_deref().is_none_or(|o| o == os_family || o == "any")
                && p.arch.as_deref().is_none_or(|a| a == arch)
        })
        .map(|p| (p, false))
        // The binaries: clusterctl, and the CNI agent built for the node's architecture only.
        .chain(
            bundle
                .manifest
                .binaries
                .iter()
                .filter(|b| b.arch.as_deref().is_none_or(|a| a == arch))
                .map(|b| (b, true)),
        )
        .map(|(file, binary)| {
            let name = file.path.rsplit('/').next().unwrap_or(&file.name);
            let sub = if binary { "bin" } else { "packages" };
            NodeFile {
                file: file.clone(),
                remote: format!("{dir}/{sub}/{name}"),
                mode: if binary { 0o755 } else { 0o644 },
                binary,
            }
        })
        .collect()
}

/// Streams one bundle file to the node (`upload_stream`, `progress` gets bytes sent so far) and
/// checks its sha256 and size again on the way. Errors: upload failure (`AirgapError::NodeTransport`) or
/// the entry changed since verification (`AirgapError::Entry`).
pub fn upload_file(
    transport: &dyn Transport,
    bundle: &VerifiedBundle,
    f: &NodeFile,
    progress: &mut dyn FnMut(u64),
) -> Result<()> {
    let mut reader = crate::digest::Hashing::new(bundle.open(&f.file.path)?);
    let spec = FileSpec {
        path: PathBuf::from(&f.remote),
        mode: f.mode,
        owner: None,
    };
    transport
        .upload_stream(&mut reader, f.file.size, &spec, progress)
        .map_err(|source| AirgapError::NodeTransport {
            node: transport.node().to_string(),
            what: Some(format!("upload of {}", f.file.path)),
            source: Box::new(source),
        })?;
    let (got, n, _) = reader.finish();
    if got != f.file.sha256 || n != f.file.size {
        return Err(AirgapError::Entry {
            entry: f.file.path.clone(),
            reason: "changed since verification".into(),
        });
    }
    Ok(())
}

/// Streams the bundle's packages of Kubernetes `version` for a node (see
/// [`versions::files_for_version`]: untagged ones and those tagged `version`) to
/// `<remote_dir>/packages/<file>` and its binaries to `<remote_dir>/bin/<file>` (mode 0644, binaries
/// 0755), checking each again on the way. Returns the remote paths written, in bundle order;
/// installing them is [`install_step`]'s job (or the upgrade's install script). Errors: upload failures.
pub fn upload_packages(
    transport: &dyn Transport,
    bundle: &VerifiedBundle,
    os_family: &str,
    arch: &str,
    remote_dir: &str,
    version: &str,
) -> Result<Vec<String>> {
    let mut written = Vec::new();
    for f in versions::files_for_version(bundle, os_family, arch, remote_dir, version) {
        upload_file(transport, bundle, &f, &mut |_| {})?;
        written.push(f.remote);
    }
    Ok(written)
}

/// How a package file is installed on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum InstallKind {
    /// A `.deb`: `dpkg -i` (all of a node's at once, so they may depend on each other).
    Deb,
    /// An `.rpm`: `rpm -U --replacepkgs` (all at once).
    Rpm,
    /// A static binary of OS family `any`: copied to `/usr/local/bin/<name>` (mode 0755).
    Binary,
    /// An archive (`.tgz`, `.tar.gz`, `.tar`) with `extractTo`: unpacked there with GNU tar and
    /// recorded in its marker (see [`extract_marker`]).
    Extract,
}

/// File name endings of the archives [`InstallKind::Extract`] unpacks (the spec's `extractTo` rule).
const ARCHIVE_ENDINGS: &[&str] = &[".tgz", ".tar.gz", ".tar"];

/// True for an absolute, normalized directory: `/`, or `/`-separated components none of which is
/// empty, `.` or `..`, and no control characters (the spec's `extractTo` rule, checked again here
/// because the bundle's manifest is the input).
fn normalized_dir(dir: &str) -> bool {
    (dir == "/"
        || (dir.starts_with('/')
            && dir[1..]
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != "..")))
        && !dir.chars().any(char::is_control)
}

/// Where the node records that archive `f` was unpacked: `<remote_dir>/extracted/<file name>`
/// (`/var/lib/clusterctl/airgap/extracted/cni-plugins-linux-amd64-v1.6.2.tgz`), holding one line
/// `sha256:<hex> <directory>`. `None` for files not under `<remote_dir>/packages/`.
pub fn extract_marker(f: &NodeFile) -> Option<String> {
    let (base, name) = f.remote.rsplit_once("/packages/")?;
    (!name.is_empty() && !name.contains('/')).then(|| format!("{base}/extracted/{name}"))
}

/// The marker line of archive `f` unpacked into `dir`: `sha256:<hex> <dir>`.
fn marker_line(f: &NodeFile, dir: &str) -> String {
    format!("{} {dir}", f.file.sha256)
}

/// The archive facts of `f` when it is to be unpacked: (directory, marker path, tar's
/// decompression flag). `None` unless `f` is a package with a safe `extract_to` and an archive name.
fn extraction(f: &NodeFile) -> Option<(&str, String, &'static str)> {
    let dir = f.file.extract_to.as_deref()?;
    if f.binary || !normalized_dir(dir) {
        return None;
    }
    let name = f.remote.rsplit('/').next()?;
    let ending = ARCHIVE_ENDINGS.iter().find(|e| name.ends_with(*e))?;
    let marker = extract_marker(f)?;
    Some((dir, marker, if *ending == ".tar" { "" } else { " -z" }))
}

/// How `f` is installed, with a read-only shell check that exits 0 when it already is; `None` for
/// files that are only carried (the clusterctl binary, archives without `extract_to` or whose
/// `extract_to` is not an absolute, normalized directory). An archive with `extract_to` is
/// [`InstallKind::Extract`]; its check compares the marker ([`extract_marker`]) with the archive's
/// sha256 and directory, so a changed archive (or directory) is unpacked again.
pub fn install_step(f: &NodeFile) -> Option<(InstallKind, String)> {
    if f.binary {
        return None;
    }
    let q = quote(&f.remote);
    if let Some((dir, marker, _)) = extraction(f) {
        return Some((
            InstallKind::Extract,
            format!(
                "[ \"$(cat {} 2>/dev/null)\" = {} ] && [ -d {} ]",
                quote(&marker),
                quote(&marker_line(f, dir)),
                quote(dir)
            ),
        ));
    }
    if f.remote.ends_with(".deb") {
        Some((
            InstallKind::Deb,
            format!(
                "p=$(dpkg-deb -f {q} Package) && v=$(dpkg-deb -f {q} Version) && \
                 s=$(dpkg-query -W -f='${{Status}} ${{Version}}' \"$p\" 2>/dev/null) && \
                 [ \"${{s#* }}\" = \"ok installed $v\" ]"
            ),
        ))
    } else if f.remote.ends_with(".rpm") {
        Some((
            InstallKind::Rpm,
            format!("rpm -q \"$(rpm -qp --qf '%{{NAME}}-%{{VERSION}}-%{{RELEASE}}.%{{ARCH}}' {q})\" >/dev/null 2>&1"),
        ))
    } else if f.file.os.as_deref() == Some("any")
        && crate::bundle::verify::safe_path(&f.file.name)
        && !f.file.name.contains('/')
        && !f.remote.ends_with(".tgz")
        && !f.remote.ends_with(".gz")
        && !f.remote.ends_with(".tar")
    {
        let dest = quote(&format!("/usr/local/bin/{}", f.file.name));
        Some((
            InstallKind::Binary,
            format!("cmp -s {q} {dest} && [ \"$(stat -c %a {dest})\" = 755 ]"),
        ))
    } else {
        None
    }
}

/// The script installing `files` (all of one [`InstallKind`]) on a node. For
/// [`InstallKind::Extract`], per archive: `mkdir -p DIR`, then GNU tar `-x --no-same-owner
/// --no-overwrite-dir [-z] -f FILE -C DIR` (tar's defaults are kept: leading `/` is stripped from
/// member names, members containing `..` are skipped and tar exits 2, links are not followed out of
/// DIR), and only when tar succeeded the marker is written (atomically, by rename). Files that are
/// not extractable archives are left out.
pub fn install_script(kind: InstallKind, files: &[&NodeFile]) -> String {
    let list: Vec<String> = files.iter().map(|f| quote(&f.remote)).collect();
    match kind {
        InstallKind::Deb => format!("dpkg -i {}", list.join(" ")),
        InstallKind::Rpm => format!("rpm -U --replacepkgs {}", list.join(" ")),
        InstallKind::Binary => files
            .iter()
            .map(|f| {
                format!(
                    "install -m 0755 {} {}",
                    quote(&f.remote),
                    quote(&format!("/usr/local/bin/{}", f.file.name))
                )
            })
            .collect::<Vec<_>>()
            .join(" && "),
        InstallKind::Extract => files
            .iter()
            .filter_map(|f| {
                let (dir, marker, z) = extraction(f)?;
                let d = quote(dir);
                let m = quote(&marker);
                let tmp = quote(&format!("{marker}.tmp"));
                let parent = marker.rsplit_once('/').map(|p| p.0).unwrap_or(".");
                Some(format!(
                    "mkdir -p {d} && tar -x --no-same-owner --no-overwrite-dir{z} -f {} -C {d} && \
                     mkdir -p {} && printf '%s\\n' {} > {tmp} && mv -f {tmp} {m}",
                    quote(&f.remote),
                    quote(parent),
                    quote(&marker_line(f, dir)),
                ))
            })
            .collect::<Vec<_>>()
            .join(" && "),
    }
}

/// The OS family of a node from `/etc/os-release` `ID` and `ID_LIKE`: `debian` (Debian, Ubuntu and
/// derivatives), `rhel` (RHEL, CentOS, Rocky, Alma, Fedora and derivatives) or `other`.
pub fn os_family(os_id: &str, os_like: &str) -> &'static str {
    let words: Vec<&str> = std::iter::once(os_id)
        .chain(os_like.split_whitespace())
        .collect();
    if words.iter().any(|w| matches!(*w, "debian" | "ubuntu")) {
        "debian"
    } else if words
        .iter()
        .any(|w| matches!(*w, "rhel" | "centos" | "fedora" | "rocky" | "almalinux"))
    {
        "rhel"
    } else {
        "other"
    }
}

/// The OCI/Debian architecture name of `uname -m` output (or of Rust's `std::env::consts::ARCH`):
/// `x86_64` → `amd64`, `aarch64` → `arm64`, `i686`/`i386`/`x86` → `386`, `armv7l` → `arm`, anything
/// else unchanged.
pub fn oci_arch(uname_m: &str) -> String {
    match uname_m.trim() {
        "x86_64" => "amd64".into(),
        "i386" | "i486" | "i586" | "i686" | "x86" => "386".into(),
        "armv7l" | "armv7" | "arm" => "arm".into(),
        "aarch64" | "arm64" => "arm64".into(),
        "ppc64le" => "ppc64le".into(),
        "s390x" => "s390x".into(),
        other => other.into(),
    }
}

/// Parses `ctr images ls` output (columns `REF TYPE DIGEST SIZE PLATFORMS LABELS`, one header
/// line) into image name → manifest digest. Lines that do not parse are left out.
pub fn parse_ctr_images(out: &str) -> std::collections::BTreeMap<String, Digest> {
    out.lines()
        .filter(|l| !l.starts_with("REF "))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next()?;
            let _kind = w.next()?;
            let d = Digest::parse(w.next()?).ok()?;
            Some((name.to_string(), d))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img(mirror: &str) -> BundleImage {
        BundleImage {
            source: "registry.k8s.io/pause:3.10.1".into(),
            mirror: mirror.into(),
            digest: Digest::of(b"x"),
            source_digest: Digest::of(b"x"),
            media_type: crate::oci::OCI_MANIFEST.into(),
            size: 1,
            platforms: vec![],
        }
    }

    #[test]
    fn import_scripts_per_runtime() {
        let images = [img("harbor.example.com/library/pause:3.10.1")];
        let c = import_script(
            &Runtime::default(),
            "/var/lib/clusterctl/airgap/images-a.tar",
            &images,
        );
        assert_eq!(
            c,
            "ctr -n k8s.io images import --all-platforms '/var/lib/clusterctl/airgap/images-a.tar'; rc=$?; rm -f '/var/lib/clusterctl/airgap/images-a.tar'; exit $rc"
        );
        let o = import_script(&Runtime::Crio, "/tmp/i.tar", &images);
        assert_eq!(
            o,
            "set -e; skopeo copy --quiet 'oci-archive:/tmp/i.tar:harbor.example.com/library/pause:3.10.1' 'containers-storage:harbor.example.com/library/pause:3.10.1'; rm -f '/tmp/i.tar'"
        );
        assert_eq!(quote("a'b"), "'a'\\''b'");
    }

    fn file(name: &str, path: &str, os: &str, binary: bool) -> NodeFile {
        NodeFile {
            file: crate::bundle::BundleFile {
                name: name.into(),
                path: path.into(),
                os: Some(os.into()),
                arch: Some("amd64".into()),
                size: 1,
                sha256: Digest::of(b"x"),
                extract_to: None,
                kubernetes_version: None,
            },
            remote: format!("/r/{}", path.rsplit('/').next().unwrap_or_default()),
            mode: 0o644,
            binary,
        }
    }

    /// A `.deb` counts as installed whether it is held or not (`apt-mark hold` turns dpkg's
    /// `install ok installed` into `hold ok installed`; the packages phase holds the Kubernetes
    /// packages it installs from a bundle, and the next `up` must not install them again).
    #[test]
    fn a_held_deb_of_the_same_version_is_installed() {
        let deb = file(
            "kubeadm",
            "packages/debian-amd64/kubeadm_1.deb",
            "debian",
            false,
        );
        let (_, check) = install_step(&deb).expect("a deb step");
        let run = |status: &str| {
            let stubs = format!(
                "dpkg-deb() {{ case \"$3\" in Package) echo kubeadm;; Version) echo 1.34.4-1.1;; esac; }}\n\
                 dpkg-query() {{ echo '{status}'; }}\n"
            );
            std::process::Command::new("bash")
                .arg("-c")
                .arg(format!("{stubs}{check}"))
                .status()
                .expect("bash")
                .success()
        };
        assert!(run("install ok installed 1.34.4-1.1"));
        assert!(run("hold ok installed 1.34.4-1.1"));
        assert!(!run("hold ok installed 1.33.13-1.1"));
        assert!(!run("deinstall ok config-files 1.34.4-1.1"));
    }

    #[test]
    fn install_steps_per_kind() {
        let deb = file(
            "kubeadm",
            "packages/debian-amd64/kubeadm_1.deb",
            "debian",
            false,
        );
        let rpm = file(
            "kubeadm",
            "packages/rhel-amd64/kubeadm-1.rpm",
            "rhel",
            false,
        );
        let bin = file("crictl", "packages/any-amd64/crictl", "any", false);
        let evil = file("../../etc/x", "packages/any-amd64/x", "any", false);
        let tgz = file("cni", "packages/any-amd64/cni.tgz", "any", false);
        let me = file("clusterctl", "bin/clusterctl", "any", true);
        assert_eq!(install_step(&deb).map(|s| s.0), Some(InstallKind::Deb));
        assert!(install_step(&deb)
            .map(|s| s.1)
            .unwrap_or_default()
            .contains("dpkg-deb -f '/r/kubeadm_1.deb' Package"));
        assert_eq!(install_step(&rpm).map(|s| s.0), Some(InstallKind::Rpm));
        assert_eq!(install_step(&bin).map(|s| s.0), Some(InstallKind::Binary));
        assert_eq!(install_step(&evil), None);
        assert_eq!(install_step(&tgz), None);
        assert_eq!(install_step(&me), None);
        assert_eq!(
            install_script(InstallKind::Deb, &[&deb]),
            "dpkg -i '/r/kubeadm_1.deb'"
        );
        assert_eq!(
            install_script(InstallKind::Binary, &[&bin]),
            "install -m 0755 '/r/crictl' '/usr/local/bin/crictl'"
        );
    }

    #[test]
    fn archives_with_extract_to_are_unpacked_and_marked() {
        let mut tgz = file("cni", "packages/any-amd64/cni.tgz", "any", false);
        tgz.remote = "/var/lib/clusterctl/airgap/packages/cni.tgz".into();
        assert_eq!(install_step(&tgz), None, "carried only without extractTo");
        tgz.file.extract_to = Some("/opt/cni/bin".into());
        let sha = tgz.file.sha256.to_string();
        assert_eq!(
            extract_marker(&tgz).as_deref(),
            Some("/var/lib/clusterctl/airgap/extracted/cni.tgz")
        );
        let (kind, check) = install_step(&tgz).unwrap_or((InstallKind::Deb, String::new()));
        assert_eq!(kind, InstallKind::Extract);
        assert_eq!(
            check,
            format!("[ \"$(cat '/var/lib/clusterctl/airgap/extracted/cni.tgz' 2>/dev/null)\" = '{sha} /opt/cni/bin' ] && [ -d '/opt/cni/bin' ]")
        );
        let mut tar = file("x", "packages/any-amd64/x.tar", "any", false);
        tar.remote = "/r/packages/x.tar".into();
        tar.file.extract_to = Some("/".into());
        assert_eq!(
            install_script(InstallKind::Extract, &[&tgz, &tar]),
            format!(
                "mkdir -p '/opt/cni/bin' && tar -x --no-same-owner --no-overwrite-dir -z -f '/var/lib/clusterctl/airgap/packages/cni.tgz' -C '/opt/cni/bin' && \
                 mkdir -p '/var/lib/clusterctl/airgap/extracted' && printf '%s\\n' '{sha} /opt/cni/bin' > '/var/lib/clusterctl/airgap/extracted/cni.tgz.tmp' && mv -f '/var/lib/clusterctl/airgap/extracted/cni.tgz.tmp' '/var/lib/clusterctl/airgap/extracted/cni.tgz' && \
                 mkdir -p '/' && tar -x --no-same-owner --no-overwrite-dir -f '/r/packages/x.tar' -C '/' && \
                 mkdir -p '/r/extracted' && printf '%s\\n' '{sha} /' > '/r/extracted/x.tar.tmp' && mv -f '/r/extracted/x.tar.tmp' '/r/extracted/x.tar'"
            )
        );
        // Not an archive, or an unsafe directory from a hand-made manifest: only carried.
        for (remote, dir) in [
            ("/r/packages/kubeadm", "/usr/local/bin"),
            ("/r/packages/cni.tgz", "opt/cni"),
            ("/r/packages/cni.tgz", "/opt/../etc"),
            ("/r/packages/cni.tgz", "/opt//cni"),
            ("/r/packages/cni.tgz", "/opt/cni/"),
            ("/r/packages/cni.tgz", "/opt/\ncni"),
        ] {
            let mut f = file("cni", "packages/any-amd64/cni.tgz", "debian", false);
            f.remote = remote.into();
            f.file.extract_to = Some(dir.into());
            assert_eq!(install_step(&f), None, "{remote} {dir:?}");
            assert_eq!(install_script(InstallKind::Extract, &[&f]), "");
        }
    }

    #[test]
    fn os_families_arches_and_ctr_listing() {
        assert_eq!(os_family("debian", ""), "debian");
        assert_eq!(os_family("linuxmint", "ubuntu debian"), "debian");
        assert_eq!(os_family("rocky", "rhel centos fedora"), "rhel");
        assert_eq!(os_family("alpine", ""), "other");
        assert_eq!(oci_arch("x86_64\n"), "amd64");
        assert_eq!(oci_arch("aarch64"), "arm64");
        assert_eq!(oci_arch("i686"), "386");
        let d = Digest::of(b"m");
        let out = format!(
            "REF TYPE DIGEST SIZE PLATFORMS LABELS\nregistry.k8s.io/pause:3.10.1 application/vnd.oci.image.manifest.v1+json {d} 1.2 KiB linux/amd64 -\nbroken line\n"
        );
        let m = parse_ctr_images(&out);
        assert_eq!(m.len(), 1);
        assert_eq!(m.get("registry.k8s.io/pause:3.10.1"), Some(&d));
    }
}
