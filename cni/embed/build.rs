//! Builds the dedicated CNI plugin binary (`clusterctl-cni`: package `clusterctl-cni` of this
//! workspace, `--no-default-features`, i.e. without the agent) with a nested `cargo build --release`
//! and copies it to `$OUT_DIR/clusterctl-cni`, where `src/lib.rs` includes it with `include_bytes!`.
//!
//! The nested build has its own target directory, `<outer target dir>/embedded-cni-plugin`, shared by
//! every profile of the outer build (dev, test, release, check) so the plugin is compiled once; cargo's
//! lock on that directory serialises concurrent outer builds. It is always an optimised, stripped build:
//! this is the binary `up` installs on nodes and the benchmark times. The outer build's jobserver
//! (`CARGO_MAKEFLAGS`) is inherited, so `-j` bounds both; `--locked` keeps it on this workspace's lock file.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let cni_dir = manifest_dir
        .parent()
        .expect("cni/embed lives in cni/")
        .to_path_buf();
    let workspace = cni_dir
        .parent()
        .expect("cni/ lives in the workspace")
        .to_path_buf();
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    for p in [
        cni_dir.join("src"),
        cni_dir.join("Cargo.toml"),
        workspace.join("Cargo.lock"),
        workspace.join("Cargo.toml"),
    ] {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    println!("cargo:rerun-if-env-changed=RUSTFLAGS");

    let target_dir = outer_target_dir(&out_dir)
        .unwrap_or_else(|| out_dir.clone())
        .join("embedded-cni-plugin");
    let target = env::var("TARGET").expect("TARGET");
    let host = env::var("HOST").expect("HOST");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());

    let mut cmd = Command::new(cargo);
    cmd.current_dir(&workspace)
        .args([
            "build",
            "--release",
            "--locked",
            "--package",
            "clusterctl-cni",
        ])
        .args(["--no-default-features", "--bin", "clusterctl-cni"])
        .args(["--config", "profile.release.strip=true"])
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    if target != host {
        cmd.args(["--target", &target]);
    }
    // What the outer cargo sets for this build script or for a clippy/check run must not leak into
    // the nested build (it would build or lint something else); the jobserver and RUSTFLAGS stay.
    for (k, _) in env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        let drop = k.starts_with("CARGO_PKG_")
            || k.starts_with("CARGO_CFG_")
            || k.starts_with("CARGO_FEATURE_")
            || matches!(
                k.as_str(),
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_MANIFEST_LINKS"
                    | "CARGO_TARGET_DIR"
                    | "CARGO_BUILD_TARGET_DIR"
                    | "CARGO_ENCODED_RUSTFLAGS"
                    | "RUSTC_WORKSPACE_WRAPPER"
                    | "CLIPPY_ARGS"
                    | "CLIPPY_CONF_DIR"
                    | "OUT_DIR"
                    | "TARGET"
                    | "HOST"
                    | "PROFILE"
                    | "OPT_LEVEL"
                    | "DEBUG"
                    | "NUM_JOBS"
                    | "RUSTDOC"
            );
        if drop {
            cmd.env_remove(&k);
        }
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run the nested cargo build of clusterctl-cni: {e}"));
    assert!(
        status.success(),
        "the nested cargo build of the clusterctl-cni plugin failed ({status}); see its output above"
    );
    let mut built = target_dir.clone();
    if target != host {
        built.push(&target);
    }
    built.push("release/clusterctl-cni");
    let dest = out_dir.join("clusterctl-cni");
    std::fs::copy(&built, &dest)
        .unwrap_or_else(|e| panic!("copy {} to {}: {e}", built.display(), dest.display()));
}

/// The outer build's target directory: `OUT_DIR` is `<target dir>[/<triple>]/<profile>/build/<pkg>-<hash>/out`.
fn outer_target_dir(out_dir: &Path) -> Option<PathBuf> {
    let build = out_dir.parent()?.parent()?;
    if build.file_name()? != "build" {
        return None;
    }
    let profile_dir = build.parent()?;
    let above = profile_dir.parent()?;
    // With --target the profile directory sits under a directory named after the triple.
    let triple = env::var("TARGET").ok()?;
    if above
        .file_name()
        .is_some_and(|n| n.to_string_lossy() == triple)
    {
        above.parent().map(Path::to_path_buf)
    } else {
        Some(above.to_path_buf())
    }
}
