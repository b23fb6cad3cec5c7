//! Local file helpers: atomic writes with a given mode (files holding credentials are created 0600 from
//! the start, never widened), the cache directory `~/.cache/clusterctl/<cluster>/`, and the writer of
//! an output tree (`render -o DIR`) that never writes outside its directory ([`write_tree`]).

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::io::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Writes `data` to `path` atomically (temp file in the same directory, then rename) with `mode`;
/// creates parent directories (0700). Errors: any I/O error.
pub(crate) fn write_private(path: &Path, mode: u32, data: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(data)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// `path` with its symbolic links followed to the file they name (a dangling link's target too), so
/// that writing a user's file (the kubeconfig) through a link updates the file the link names rather
/// than replacing the link with a copy. Gives up after 40 links (a loop), returning the last path.
pub(crate) fn follow_links(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        let is_link = std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink());
        let Some(target) = is_link.then(|| std::fs::read_link(&p).ok()).flatten() else {
            return p;
        };
        p = match p.parent() {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target,
        };
    }
    p
}

/// The text of `path`, empty when it does not exist. Errors: any other I/O error, including a file
/// that is not UTF-8 or a directory — so that a caller merging into the file never replaces what it
/// could not read.
pub(crate) fn read_if_exists(path: &Path) -> std::io::Result<String> {
    match std::fs::read_to_string(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        other => other,
    }
}

/// The cache directory of `cluster`: `$XDG_CACHE_HOME/clusterctl/<cluster>` or
/// `$HOME/.cache/clusterctl/<cluster>`; `None` when neither variable is set.
pub(crate) fn cache_dir(cluster: &str) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("clusterctl").join(cluster))
}

/// Why a file could not be written into an output directory ([`write_tree`]).
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The path would leave the output directory (`..`).
    #[error("refusing to write {path:?}: it would leave the output directory")]
    Escapes {
        /// The path as given.
        path: String,
    },
    /// The path names nothing below the output directory.
    #[error("refusing to write {path:?}: it names no file")]
    Empty {
        /// The path as given.
        path: String,
    },
    /// A component inside the output directory is a symbolic link: nothing is written through it.
    #[error("refusing to write {}: {} is a symbolic link (nothing is written through a link inside the output directory; remove it)", .path.display(), .link.display())]
    Link {
        /// The file that was to be written.
        path: PathBuf,
        /// The link.
        link: PathBuf,
    },
    /// A component that must be a directory is something else, or the file is a directory.
    #[error("refusing to write {}: {} is not a {want}", .path.display(), .at.display())]
    WrongType {
        /// The file that was to be written.
        path: PathBuf,
        /// The component in the way.
        at: PathBuf,
        /// What it had to be: `directory` or `regular file`.
        want: &'static str,
    },
    /// The output directory exists and is not a directory (or a path above it is not one).
    #[error("output directory {}: exists and is not a directory (choose a directory, or a path that does not exist yet)", .dir.display())]
    NotADirectory {
        /// The output directory as given.
        dir: PathBuf,
    },
    /// The operating system refused.
    #[error("writing {}: {source}", .path.display())]
    Io {
        /// The file (or directory) concerned.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// The components of `rel` below an output directory: a leading `/` and `.` are ignored (rendered
/// paths are absolute paths on the node), `..` is refused, and at least one component is required.
/// Errors: [`OutputError::Escapes`] or [`OutputError::Empty`].
pub(crate) fn output_components(rel: &str) -> Result<Vec<std::ffi::CString>, OutputError> {
    use std::os::unix::ffi::OsStrExt;
    use std::path::Component;
    let mut out = Vec::new();
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(p) => {
                out.push(std::ffi::CString::new(p.as_bytes()).map_err(|_| {
                    OutputError::Escapes {
                        path: rel.to_string(),
                    }
                })?)
            }
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => {
                return Err(OutputError::Escapes {
                    path: rel.to_string(),
                })
            }
        }
    }
    if out.is_empty() {
        return Err(OutputError::Empty {
            path: rel.to_string(),
        });
    }
    Ok(out)
}

/// Writes `files` (path relative to `root`, content, mode) under the directory `root` (created if
/// missing; it may itself be a link, as the user chose it), never following a link inside it: every
/// path is checked before anything is written ([`output_components`]); then each directory below
/// `root` is created and opened relative to its parent's descriptor with `O_NOFOLLOW` (a symbolic
/// link there is refused, so no later swap can redirect the walk), and each file is written to a new
/// temporary file created `O_EXCL|O_NOFOLLOW` mode 0600 in its directory, set to its mode with
/// `fchmod`, and renamed over the name (a link or any other existing non-regular file at the name
/// is refused; an existing file is replaced, never written through, so a hard link to a file
/// outside is left alone). A link or a wrong type already in the way of any path is refused before
/// anything is written; `root` existing as something other than a directory is
/// [`OutputError::NotADirectory`]. Returns the paths written, in order. Errors: the first refused or
/// failed path; files before it are written only when the refusal came from a change made during
/// the write.
pub(crate) fn write_tree<'a>(
    root: &Path,
    files: impl IntoIterator<Item = (&'a str, &'a [u8], u32)>,
) -> Result<Vec<PathBuf>, OutputError> {
    let files: Vec<(&str, &[u8], u32)> = files.into_iter().collect();
    let mut plan = Vec::with_capacity(files.len());
    for (rel, content, mode) in &files {
        plan.push((output_components(rel)?, *content, *mode));
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| OutputError::Io { path, source }
    };
    if let Some(kind) = root_kind(root) {
        if !kind.is_dir() {
            return Err(OutputError::NotADirectory {
                dir: root.to_path_buf(),
            });
        }
    }
    std::fs::create_dir_all(root).map_err(|source| match source.kind() {
        std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::NotADirectory => {
            OutputError::NotADirectory {
                dir: root.to_path_buf(),
            }
        }
        _ => OutputError::Io {
            path: root.to_path_buf(),
            source,
        },
    })?;
    for (comps, _, _) in &plan {
        precheck(root, comps)?;
    }
    let root_fd = open_dir_at(None, &path_cstring(root)?).map_err(io(root))?;
    let mut written = Vec::with_capacity(plan.len());
    for (comps, content, mode) in plan {
        let mut full = root.to_path_buf();
        let target = {
            let mut p = root.to_path_buf();
            for c in &comps {
                p.push(std::ffi::OsStr::from_bytes(c.as_bytes()));
            }
            p
        };
        let (last, dirs) = comps.split_last().ok_or(OutputError::Empty {
            path: target.display().to_string(),
        })?;
        let mut dir = root_fd.try_clone().map_err(io(root))?;
        for c in dirs {
            full.push(std::ffi::OsStr::from_bytes(c.as_bytes()));
            dir = enter_dir(&dir, c, &target, &full)?;
        }
        full.push(std::ffi::OsStr::from_bytes(last.as_bytes()));
        replace_file(&dir, last, content, mode, &target)?;
        written.push(target);
    }
    Ok(written)
}

/// Refuses, before anything is written, a path whose existing components below `root` include a
/// link, a non-directory where a directory must be, or a non-regular file at the name (the walk that
/// writes checks again, relative to descriptors).
fn precheck(root: &Path, comps: &[std::ffi::CString]) -> Result<(), OutputError> {
    let mut target = root.to_path_buf();
    for c in comps {
        target.push(std::ffi::OsStr::from_bytes(c.as_bytes()));
    }
    let mut full = root.to_path_buf();
    for (i, c) in comps.iter().enumerate() {
        full.push(std::ffi::OsStr::from_bytes(c.as_bytes()));
        let Ok(meta) = std::fs::symlink_metadata(&full) else {
            return Ok(());
        };
        let last = i + 1 == comps.len();
        let ty = meta.file_type();
        if ty.is_symlink() {
            return Err(OutputError::Link {
                path: target,
                link: full,
            });
        }
        let (ok, want) = if last {
            (ty.is_file(), "regular file")
        } else {
            (ty.is_dir(), "directory")
        };
        if !ok {
            return Err(OutputError::WrongType {
                path: target,
                at: full,
                want,
            });
        }
    }
    Ok(())
}

/// What `root` is, following links (the user chose it, and it may be a link to a directory); `None`
/// when it does not exist (or cannot be examined: creating it then says why).
fn root_kind(root: &Path) -> Option<std::fs::FileType> {
    std::fs::metadata(root).ok().map(|m| m.file_type())
}

fn path_cstring(p: &Path) -> Result<std::ffi::CString, OutputError> {
    std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(|_| OutputError::Escapes {
        path: p.display().to_string(),
    })
}

fn last_os_error() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// Opens directory `name` relative to `dir` (or the current directory) without following a link.
fn open_dir_at(dir: Option<&OwnedFd>, name: &std::ffi::CStr) -> std::io::Result<OwnedFd> {
    let at = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    let nofollow = if dir.is_some() { libc::O_NOFOLLOW } else { 0 };
    // SAFETY: openat with a valid descriptor and a NUL-terminated name; the result is owned below.
    let fd = unsafe {
        libc::openat(
            at,
            name.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC | nofollow,
        )
    };
    if fd < 0 {
        return Err(last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What `name` in `dir` is, without following a link: `Some(st_mode & S_IFMT)`, `None` if absent.
fn kind_at(dir: &OwnedFd, name: &std::ffi::CStr) -> std::io::Result<Option<libc::mode_t>> {
    // SAFETY: a zeroed stat buffer filled by fstatat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if r == 0 {
        return Ok(Some(st.st_mode & libc::S_IFMT));
    }
    let e = last_os_error();
    if e.kind() == std::io::ErrorKind::NotFound {
        Ok(None)
    } else {
        Err(e)
    }
}

/// Creates (if missing) and opens directory `name` in `dir`, refusing a link or a non-directory.
fn enter_dir(
    dir: &OwnedFd,
    name: &std::ffi::CStr,
    target: &Path,
    full: &Path,
) -> Result<OwnedFd, OutputError> {
    let io = |source| OutputError::Io {
        path: full.to_path_buf(),
        source,
    };
    // SAFETY: mkdirat with a valid descriptor and a NUL-terminated name.
    if unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o755) } != 0 {
        let e = last_os_error();
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(io(e));
        }
    }
    match open_dir_at(Some(dir), name) {
        Ok(fd) => Ok(fd),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
            Err(match kind_at(dir, name).map_err(io)? {
                Some(libc::S_IFLNK) => OutputError::Link {
                    path: target.to_path_buf(),
                    link: full.to_path_buf(),
                },
                _ => OutputError::WrongType {
                    path: target.to_path_buf(),
                    at: full.to_path_buf(),
                    want: "directory",
                },
            })
        }
        Err(e) => Err(io(e)),
    }
}

/// Writes `content` as `name` in `dir` with `mode`: a new temporary file, then a rename over the name.
fn replace_file(
    dir: &OwnedFd,
    name: &std::ffi::CStr,
    content: &[u8],
    mode: u32,
    target: &Path,
) -> Result<(), OutputError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let io = |source| OutputError::Io {
        path: target.to_path_buf(),
        source,
    };
    match kind_at(dir, name).map_err(io)? {
        None | Some(libc::S_IFREG) => {}
        Some(libc::S_IFLNK) => {
            return Err(OutputError::Link {
                path: target.to_path_buf(),
                link: target.to_path_buf(),
            })
        }
        Some(_) => {
            return Err(OutputError::WrongType {
                path: target.to_path_buf(),
                at: target.to_path_buf(),
                want: "regular file",
            })
        }
    }
    let tmp = std::ffi::CString::new(format!(
        ".clusterctl-tmp.{}.{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ))
    .map_err(|e| io(std::io::Error::other(e)))?;
    // SAFETY: openat with a valid descriptor and a NUL-terminated name; the result is owned below.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            tmp.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io(last_os_error()));
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let written = file
        .write_all(content)
        .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(mode)))
        .and_then(|()| {
            // SAFETY: renameat within one directory descriptor, NUL-terminated names.
            let r = unsafe {
                libc::renameat(
                    dir.as_raw_fd(),
                    tmp.as_ptr(),
                    dir.as_raw_fd(),
                    name.as_ptr(),
                )
            };
            if r == 0 {
                Ok(())
            } else {
                Err(last_os_error())
            }
        });
    if let Err(e) = written {
        // SAFETY: unlinkat of the temporary name in the same directory.
        unsafe { libc::unlinkat(dir.as_raw_fd(), tmp.as_ptr(), 0) };
        return Err(io(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_followed_to_their_file_and_unreadable_files_are_errors() {
        let d = tempfile::tempdir().expect("tempdir");
        let real = d.path().join("dot/kubeconfig");
        std::fs::create_dir_all(real.parent().expect("parent")).expect("mkdir");
        std::fs::create_dir_all(d.path().join(".kube")).expect("mkdir");
        let link = d.path().join(".kube/config");
        std::os::unix::fs::symlink("../dot/kubeconfig", &link).expect("symlink");
        // Dangling first, then existing: both lead to the file the link names.
        assert_eq!(
            follow_links(&link),
            d.path().join(".kube/../dot/kubeconfig")
        );
        std::fs::write(&real, "x").expect("write");
        write_private(&follow_links(&link), 0o600, b"y").expect("write through");
        assert!(std::fs::symlink_metadata(&link)
            .expect("meta")
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).expect("read"), "y");
        let plain = d.path().join("plain");
        assert_eq!(follow_links(&plain), plain);
        // A loop ends.
        std::os::unix::fs::symlink("loop", d.path().join("loop")).expect("symlink");
        let _ = follow_links(&d.path().join("loop"));
        assert_eq!(
            read_if_exists(&d.path().join("missing")).expect("missing"),
            ""
        );
        assert!(read_if_exists(d.path()).is_err(), "a directory");
        std::fs::write(d.path().join("latin1"), b"caf\xe9").expect("write");
        assert!(
            read_if_exists(&d.path().join("latin1")).is_err(),
            "not UTF-8"
        );
    }

    fn mode_of(p: &Path) -> u32 {
        std::fs::metadata(p).expect("meta").permissions().mode() & 0o777
    }

    #[test]
    fn paths_that_leave_the_directory_or_name_nothing_are_refused() {
        assert_eq!(
            output_components("/etc/x.conf").expect("ok").len(),
            2,
            "a leading / is the node's root"
        );
        assert!(output_components("cni/./a.yaml").is_ok());
        for bad in ["/etc/../../x", "../x", "a/../../b", ".."] {
            assert!(
                matches!(output_components(bad), Err(OutputError::Escapes { .. })),
                "{bad}"
            );
        }
        for bad in ["", "/", "./."] {
            assert!(
                matches!(output_components(bad), Err(OutputError::Empty { .. })),
                "{bad}"
            );
        }
        // Nothing is written when any path is refused.
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("out");
        let err = write_tree(
            &out,
            [
                ("a/ok.txt", &b"ok"[..], 0o644),
                ("a/../../evil", &b"x"[..], 0o644),
            ],
        )
        .expect_err("refused");
        assert!(matches!(err, OutputError::Escapes { .. }), "{err}");
        assert!(!out.join("a/ok.txt").exists());
    }

    #[test]
    fn files_get_exactly_their_modes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("out");
        let written = write_tree(
            &out,
            [
                ("n1/etc/kubernetes/admin.conf", &b"secret"[..], 0o600),
                ("n1//etc/sysctl.d/99.conf", &b"a=1"[..], 0o644),
                ("cluster/values.yaml", &b"v"[..], 0o640),
            ],
        )
        .expect("written");
        assert_eq!(written[0], out.join("n1/etc/kubernetes/admin.conf"));
        assert_eq!(mode_of(&written[0]), 0o600);
        assert_eq!(mode_of(&written[1]), 0o644);
        assert_eq!(mode_of(&written[2]), 0o640);
        assert_eq!(std::fs::read(&written[1]).expect("read"), b"a=1");
        // A second run replaces the files; no temporary file is left behind.
        write_tree(&out, [("n1/etc/sysctl.d/99.conf", &b"a=2"[..], 0o644)]).expect("again");
        assert_eq!(std::fs::read(&written[1]).expect("read"), b"a=2");
        let names: Vec<_> = std::fs::read_dir(out.join("n1/etc/sysctl.d"))
            .expect("dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("99.conf")]);
    }

    #[test]
    fn a_link_inside_the_output_directory_is_never_followed() {
        // Issue 17, finding 6: `out/cp/etc -> elsewhere` made render overwrite
        // `elsewhere/containerd/config.toml`.
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("out");
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir_all(elsewhere.join("containerd")).expect("mkdir");
        std::fs::write(elsewhere.join("containerd/config.toml"), "mine").expect("write");
        std::fs::create_dir_all(out.join("cp")).expect("mkdir");
        std::os::unix::fs::symlink(&elsewhere, out.join("cp/etc")).expect("symlink");
        let err = write_tree(
            &out,
            [("cp/etc/containerd/config.toml", &b"rendered"[..], 0o644)],
        )
        .expect_err("a symlinked directory");
        assert!(
            matches!(&err, OutputError::Link { link, .. } if *link == out.join("cp/etc")),
            "{err}"
        );
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(
            std::fs::read_to_string(elsewhere.join("containerd/config.toml")).expect("read"),
            "mine"
        );
        // A link deeper in the tree, and a link as the file itself.
        std::fs::remove_file(out.join("cp/etc")).expect("rm");
        std::fs::create_dir_all(out.join("cp/etc")).expect("mkdir");
        std::os::unix::fs::symlink(elsewhere.join("containerd"), out.join("cp/etc/containerd"))
            .expect("symlink");
        assert!(matches!(
            write_tree(&out, [("cp/etc/containerd/config.toml", &b"r"[..], 0o644)]),
            Err(OutputError::Link { .. })
        ));
        std::fs::remove_file(out.join("cp/etc/containerd")).expect("rm");
        std::fs::create_dir_all(out.join("cp/etc/containerd")).expect("mkdir");
        std::os::unix::fs::symlink(
            elsewhere.join("containerd/config.toml"),
            out.join("cp/etc/containerd/config.toml"),
        )
        .expect("symlink");
        assert!(matches!(
            write_tree(&out, [("cp/etc/containerd/config.toml", &b"r"[..], 0o644)]),
            Err(OutputError::Link { .. })
        ));
        assert_eq!(
            std::fs::read_to_string(elsewhere.join("containerd/config.toml")).expect("read"),
            "mine"
        );
        // A hard link to a file outside is replaced, not written through.
        std::fs::remove_file(out.join("cp/etc/containerd/config.toml")).expect("rm");
        std::fs::hard_link(
            elsewhere.join("containerd/config.toml"),
            out.join("cp/etc/containerd/config.toml"),
        )
        .expect("hard link");
        write_tree(
            &out,
            [("cp/etc/containerd/config.toml", &b"rendered"[..], 0o644)],
        )
        .expect("written");
        assert_eq!(
            std::fs::read_to_string(elsewhere.join("containerd/config.toml")).expect("read"),
            "mine"
        );
        assert_eq!(
            std::fs::read_to_string(out.join("cp/etc/containerd/config.toml")).expect("read"),
            "rendered"
        );
    }

    #[test]
    fn a_link_in_the_way_of_a_later_file_stops_the_write_before_anything_is_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("out");
        std::fs::create_dir(&out).expect("mkdir");
        let victim = dir.path().join("victim/new.crt");
        std::os::unix::fs::symlink(&victim, out.join("ca.crt")).expect("symlink");
        let err = write_tree(
            &out,
            [
                ("cluster.yaml", &b"c"[..], 0o644),
                ("ca.crt", &b"x"[..], 0o644),
            ],
        )
        .expect_err("a dangling link in the way");
        assert!(matches!(err, OutputError::Link { .. }), "{err}");
        assert!(!out.join("cluster.yaml").exists(), "nothing written");
        assert!(!victim.exists() && !victim.parent().expect("dir").exists());
    }

    #[test]
    fn an_output_directory_that_is_a_file_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("afile");
        std::fs::write(&file, "mine").expect("write");
        for root in [file.clone(), file.join("sub")] {
            let err = write_tree(&root, [("a.txt", &b"x"[..], 0o644)]).expect_err("a file");
            assert!(matches!(err, OutputError::NotADirectory { .. }), "{err}");
            let text = err.to_string();
            assert!(
                text.contains(&root.display().to_string()) && text.contains("not a directory"),
                "{text}"
            );
        }
        assert_eq!(std::fs::read_to_string(&file).expect("read"), "mine");
    }

    #[test]
    fn special_files_in_the_way_are_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("out");
        std::fs::create_dir_all(out.join("n/etc")).expect("mkdir");
        let st = std::process::Command::new("mkfifo")
            .arg(out.join("n/etc/fifo"))
            .status()
            .expect("mkfifo");
        assert!(st.success());
        assert!(matches!(
            write_tree(&out, [("n/etc/fifo", &b"x"[..], 0o644)]),
            Err(OutputError::WrongType {
                want: "regular file",
                ..
            })
        ));
        assert!(matches!(
            write_tree(&out, [("n/etc/fifo/x", &b"x"[..], 0o644)]),
            Err(OutputError::WrongType {
                want: "directory",
                ..
            })
        ));
        assert!(matches!(
            write_tree(&out, [("n/etc", &b"x"[..], 0o644)]),
            Err(OutputError::WrongType {
                want: "regular file",
                ..
            })
        ));
        // The output directory itself may be a link the user chose.
        let real = dir.path().join("real");
        std::fs::create_dir(&real).expect("mkdir");
        let chosen = dir.path().join("chosen");
        std::os::unix::fs::symlink(&real, &chosen).expect("symlink");
        write_tree(&chosen, [("a.txt", &b"x"[..], 0o644)]).expect("written");
        assert!(real.join("a.txt").is_file());
    }
}
