//! The command line a kind and kubectl user expects (issue 16): `-o/--output` is the output format in
//! every command (`json`, `yaml`), directories and files have their own long flags (`render
//! --output-dir`, `airgap bundle --bundle-file`) with `-o PATH` a deprecated alias that warns; the
//! commands addressing a cluster take `-f FILE` or `--profile NAME`; `profile print`, `version` and
//! `completion`; `render`'s listing (octal modes, purpose names, stale files removed); errors of a
//! `-o json` run are JSON; counts of 0 refused in words.

use std::path::Path;
use std::process::{Command, Stdio};

/// Runs clusterctl in `dir` with a private HOME and kubeconfig: (exit code, stdout, stderr).
fn run(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_clusterctl"))
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .env_remove("XDG_CACHE_HOME")
        .stdin(Stdio::null())
        .output()
        .expect("run clusterctl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn help(dir: &Path, args: &[&str]) -> String {
    let mut a = args.to_vec();
    a.push("--help");
    let (code, out, err) = run(dir, &a);
    assert_eq!(code, 0, "{args:?}: {err}");
    out
}

/// Runs clusterctl in `dir` with `stdin` fed in: (exit code, stdout, stderr).
fn run_with_stdin(dir: &Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    let r = clusterctl_testbed::cli::Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), dir)
        .run_with_stdin(args, stdin)
        .expect("run clusterctl");
    (r.code, r.stdout, r.stderr)
}

/// `out` parsed as the one JSON or YAML document `-o format` prints.
pub(crate) fn document(format: &str, out: &str) -> serde_json::Value {
    if format == "json" {
        serde_json::from_str(out).unwrap_or_else(|e| panic!("one JSON document: {e}:\n{out}"))
    } else {
        serde_yaml::from_str(out).unwrap_or_else(|e| panic!("one YAML document: {e}:\n{out}"))
    }
}

/// Writes `dir/cluster.yaml`: docker-provider cluster `name` with the nodes `cp1` (control plane) and
/// the workers `workers`.
fn docker_file(dir: &Path, name: &str, workers: &[&str]) {
    let mut nodes = String::from("    - {name: cp1, role: control-plane}\n");
    for w in workers {
        nodes.push_str(&format!("    - {{name: {w}, role: worker}}\n"));
    }
    std::fs::write(
        dir.join("cluster.yaml"),
        format!("apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: docker\n  nodes:\n{nodes}"),
    )
    .expect("write");
}

#[test]
fn help_texts_follow_the_conventions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // -o/--output is a format wherever it exists, with json and yaml.
    for cmd in [
        &["validate"][..],
        &["render"][..],
        &["up"][..],
        &["status"][..],
        &["airgap", "images"][..],
        &["version"][..],
        &["certs", "check-expiration"][..],
        &["export", "logs"][..],
    ] {
        let h = help(d, cmd);
        assert!(h.contains("-o, --output <OUTPUT>"), "{cmd:?}:\n{h}");
        assert!(h.contains("json") && h.contains("yaml"), "{cmd:?}:\n{h}");
    }
    // Paths have their own long flags, and no -o.
    let h = help(d, &["render"]);
    assert!(h.contains("--output-dir <DIR>"), "{h}");
    let h = help(d, &["airgap", "bundle"]);
    assert!(h.contains("--bundle-file <FILE>"), "{h}");
    assert!(!h.contains("-o, --output"), "{h}");
    // Every command that addresses a cluster takes -f and --profile (walkthrough: the day-2 commands
    // and `airgap bundle|import` took only -f).
    for cmd in [
        "validate",
        "render",
        "up",
        "destroy",
        "status",
        "airgap images",
        "airgap bundle",
        "airgap import",
        "get nodes",
        "get kubeconfig",
        "export kubeconfig",
        "node join",
        "node remove",
        "upgrade",
        "image load",
        "certs check-expiration",
        "certs renew",
        "etcd snapshot save",
        "etcd snapshot restore",
        "export logs",
    ] {
        let cmd: Vec<&str> = cmd.split(' ').collect();
        let h = help(d, &cmd);
        assert!(h.contains("-f, --file <FILE>"), "{cmd:?}:\n{h}");
        assert!(h.contains("--profile <PROFILE>"), "{cmd:?}:\n{h}");
    }
    // The new commands are listed.
    let h = help(d, &[]);
    for cmd in ["profile", "version", "completion"] {
        assert!(
            h.lines().any(|l| l.trim_start().starts_with(cmd)),
            "{cmd}:\n{h}"
        );
    }
}

#[test]
fn render_output_dir_listing_and_the_deprecated_alias() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // The deprecated -o PATH still writes, and warns.
    let (code, out, err) = run(d, &["render", "--profile", "lab", "-o", "old"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("deprecated") && err.contains("--output-dir old"),
        "{err}"
    );
    assert!(d.join("old/cluster").is_dir(), "{out}");
    // The listing: octal modes with the leading 0, purposes by their kebab-case names.
    let (code, out, err) = run(d, &["render", "--profile", "lab", "--output-dir", "out"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.is_empty(), "{err}");
    let init = out
        .lines()
        .find(|l| l.contains("init.yaml"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        init.contains(" 0600 ") && init.ends_with("kubeadm-init"),
        "{init}"
    );
    assert!(
        !out.contains("KubeadmInit") && !out.contains("(644"),
        "{out}"
    );
    // A second render of another cluster into the same directory removes the files of the first.
    let (code, out, err) = run(
        d,
        &[
            "render",
            "--profile",
            "builtin",
            "--output-dir",
            "out",
            "-o",
            "json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert!(
        v["removed"].as_array().is_some_and(|r| !r.is_empty()),
        "{v}"
    );
    assert!(
        v["files"][0]["mode"]
            .as_str()
            .is_some_and(|m| m.starts_with('0')),
        "{v}"
    );
    for gone in ["control-plane", "worker", "worker2"] {
        assert!(!d.join("out").join(gone).exists(), "{gone} left behind");
    }
    assert!(d.join("out/cp1").is_dir());
    // A file of the user's own in the directory is left alone.
    std::fs::write(d.join("out/mine.txt"), "keep").expect("write");
    let (code, _, err) = run(d, &["render", "--profile", "lab", "--output-dir", "out"]);
    assert_eq!(code, 0, "{err}");
    assert!(d.join("out/mine.txt").is_file());
}

#[test]
fn yaml_and_json_outputs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let (code, out, err) = run(d, &["validate", "--profile", "lab", "-o", "yaml"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("valid: true") && out.contains("file: profile lab"),
        "{out}"
    );
    let (code, out, err) = run(d, &["airgap", "images", "--profile", "lab", "-o", "yaml"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("kindest/node") || out.contains("- component:"),
        "{out}"
    );
    std::fs::write(
        d.join("cluster.yaml"),
        run(d, &["profile", "print", "lab"]).1,
    )
    .expect("write");
    let (code, out, err) = run(d, &["airgap", "images", "-f", "cluster.yaml", "-o", "yaml"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("- component:") && out.contains("pull: "),
        "{out}"
    );
}

#[test]
fn refusals_and_failures_are_documents_too_with_o_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let lab = run(d, &["profile", "print", "lab"]).1;
    std::fs::write(d.join("ok.yaml"), &lab).expect("write");
    // An invalid file: `render` and `up --dry-run` answer with the `invalid` document and its line.
    let bad = lab.replacen(
        "plugin: builtin",
        "plugin: calico\n      version: v3.29.0",
        1,
    );
    assert_ne!(bad, lab, "the lab profile names the builtin CNI");
    std::fs::write(d.join("bad.yaml"), bad).expect("write");
    for args in [
        &[
            "render",
            "-f",
            "bad.yaml",
            "--output-dir",
            "out",
            "-o",
            "json",
        ][..],
        &["up", "-f", "bad.yaml", "--dry-run", "-o", "json"][..],
    ] {
        let (code, out, err) = run(d, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        let v = document("json", &out);
        assert_eq!(v["result"], "invalid", "{v}");
        assert_eq!(v["diagnostics"][0]["code"], "spec::cni-version", "{v}");
        assert!(v["diagnostics"][0]["line"].as_u64().is_some(), "{v}");
        assert!(err.contains("bad.yaml:"), "{err}");
    }
    assert!(
        !d.join("out").exists(),
        "nothing written for an invalid file"
    );
    // A refused flag value: still one document, naming the target.
    for args in [
        &[
            "up",
            "-f",
            "ok.yaml",
            "--dry-run",
            "--ignore-preflight",
            "bogus",
            "-o",
            "json",
        ][..],
        &[
            "up",
            "-f",
            "ok.yaml",
            "--dry-run",
            "--skip-phases",
            "bogus",
            "-o",
            "json",
        ][..],
        &[
            "node",
            "join",
            "-f",
            "ok.yaml",
            "--dry-run",
            "--ignore-preflight",
            "bogus",
            "-o",
            "json",
            "w1",
        ][..],
    ] {
        let (code, out, err) = run(d, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        let v = document("json", &out);
        assert_eq!(v["result"], "invalid", "{args:?}: {v}");
        assert!(
            v["error"].as_str().is_some_and(|e| e.contains("`bogus`")),
            "{v}"
        );
    }
    // A render that succeeds says so.
    let (code, out, err) = run(
        d,
        &[
            "render",
            "-f",
            "ok.yaml",
            "--output-dir",
            "out",
            "-o",
            "json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let v = document("json", &out);
    assert_eq!(v["result"], "ok", "{v}");
    assert!(v["files"].as_array().is_some_and(|f| !f.is_empty()), "{v}");
}

#[test]
fn dash_f_dash_reads_the_cluster_file_from_stdin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let lab = run(d, &["profile", "print", "lab"]).1;
    let (code, out, err) = run_with_stdin(d, &["validate", "-f", "-"], &lab);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("-: valid"), "{out}");
    let (code, out, err) = run_with_stdin(d, &["up", "-f", "-", "--dry-run", "-o", "json"], &lab);
    assert_eq!(code, 0, "{err}");
    plan_document("json", &out, "lab");
    let (code, out, err) = run_with_stdin(d, &["validate", "-f", "-", "-o", "json"], "kind: [\n");
    assert_eq!(code, 2, "{out}{err}");
    assert_eq!(document("json", &out)["diagnostics"][0]["line"], 2, "{out}");
}

/// The values a machine-readable plan's step `kind` takes (docs/commands.md, "Machine-readable
/// output").
const STEP_KINDS: &[&str] = &["check", "run", "write", "local", "api", "note", "phase"];

/// `out`, a dry run's `-o format` document of cluster `cluster`, checked for the shape every plan
/// document has (docs/commands.md, "Machine-readable output"): `result: ok`, no error and no failures,
/// changes counted, each step `{kind, node, phase, result: planned, text}` with a known kind. Returns
/// the document.
pub(crate) fn plan_document(format: &str, out: &str, cluster: &str) -> serde_json::Value {
    let v = document(format, out);
    assert_eq!(v["cluster"], cluster, "{format}: {v}");
    assert_eq!(v["result"], "ok", "{format}: {v}");
    assert!(v["error"].is_null(), "{v}");
    assert_eq!(v["failures"].as_array().map(Vec::len), Some(0), "{v}");
    assert!(v["changes"].as_u64().is_some_and(|c| c > 0), "{v}");
    for s in v["steps"].as_array().expect("steps") {
        let keys: Vec<&String> = s.as_object().expect("object").keys().collect();
        assert_eq!(keys, ["kind", "node", "phase", "result", "text"], "{s}");
        assert!(
            STEP_KINDS.contains(&s["kind"].as_str().unwrap_or("?")),
            "{s}"
        );
        assert_eq!(s["result"], "planned", "{s}");
    }
    v
}

/// Whether `v`'s steps include one of `kind` on `node` whose text contains `text`.
pub(crate) fn has_step(v: &serde_json::Value, node: &str, kind: &str, text: &str) -> bool {
    v["steps"].as_array().is_some_and(|steps| {
        steps.iter().any(|s| {
            s["node"] == node
                && s["kind"] == kind
                && s["text"].as_str().is_some_and(|t| t.contains(text))
        })
    })
}

#[test]
fn up_dry_run_prints_a_machine_readable_plan() {
    let dir = tempfile::tempdir().expect("tempdir");
    for format in ["json", "yaml"] {
        let (code, out, err) = run(
            dir.path(),
            &["up", "--dry-run", "--profile", "lab", "-o", format],
        );
        assert_eq!(code, 0, "{err}");
        let v = plan_document(format, &out, "lab");
        assert!(has_step(&v, "control-plane", "run", "kubeadm init"), "{v}");
        // The text plan's `provider docker:` section, first (README walkthrough finding, point 2).
        let steps = v["steps"].as_array().expect("steps");
        let provider: Vec<&str> = steps
            .iter()
            .take_while(|s| s["phase"] == "provider")
            .map(|s| {
                assert_eq!(
                    (s["node"].as_str(), s["kind"].as_str()),
                    (Some("local"), Some("local")),
                    "{s}"
                );
                s["text"].as_str().unwrap_or_default()
            })
            .collect();
        assert_eq!(provider.len(), 4, "{provider:?}");
        assert_eq!(provider[0], "create network clusterctl-lab (if missing)");
        for (line, node) in provider[1..]
            .iter()
            .zip(["control-plane", "worker", "worker2"])
        {
            assert!(
                line.starts_with(&format!("create container lab-{node} (")),
                "{line}"
            );
        }
        // The provider's steps are not counted, as in the text plan.
        let (_, text, _) = run(dir.path(), &["up", "--dry-run", "--profile", "lab"]);
        let counted = format!("{} change(s) planned", v["changes"]);
        assert!(text.contains(&counted), "{counted}: {text}");
    }
    // -o needs --dry-run.
    let (code, _, err) = run(dir.path(), &["up", "--profile", "lab", "-o", "json"]);
    assert_eq!(code, 2, "{err}");
}

/// Walkthrough finding (point 3's leftover): only `up --dry-run` printed a machine-readable plan.
/// The dry runs of `destroy`, `node remove`, `node join`, `upgrade` and `image load` take `-o
/// json|yaml` too (the plans with nodes to reach are checked on the test bed: node_join,
/// upgrade_system, image_load); where a run cannot plan — no node container of the cluster here — the
/// document is `{cluster, result: failed, error}` (exit 1), never text; `-o` needs `--dry-run`.
#[test]
fn the_dry_runs_print_machine_readable_plans() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let name = clusterctl_testbed::unique_name("dr");
    docker_file(d, &name, &["w1"]);
    for format in ["json", "yaml"] {
        let (code, out, err) = run(d, &["destroy", "--dry-run", "-o", format]);
        assert_eq!(code, 0, "{err}");
        let v = plan_document(format, &out, &name);
        let network = format!("remove network clusterctl-{name}");
        assert!(has_step(&v, "local", "local", &network), "{v}");
        let (code, out, err) = run(d, &["node", "remove", "--dry-run", "-o", format, "w1"]);
        assert_eq!(code, 0, "{err}");
        let v = plan_document(format, &out, &name);
        assert!(has_step(&v, "local", "api", "delete Node w1"), "{v}");
        assert!(has_step(&v, "w1", "run", "kubeadm reset -f"), "{v}");
        // These reach the nodes read-only even in a dry run: there are none (failed, exit 1). A
        // refused input is `invalid` (exit 2): a missing archive, a version other than the file's.
        for (args, want, result) in [
            (
                &["node", "join", "--dry-run", "-o", format, "w1"][..],
                1,
                "failed",
            ),
            (
                &["upgrade", "--to", "1.34.1", "--dry-run", "-o", format][..],
                1,
                "failed",
            ),
            (
                &[
                    "image",
                    "load",
                    "--dry-run",
                    "-o",
                    format,
                    "--archive",
                    "none.tar",
                ][..],
                2,
                "invalid",
            ),
            (
                &["upgrade", "--to", "1.34.2", "--dry-run", "-o", format][..],
                2,
                "invalid",
            ),
            (
                &["node", "join", "--dry-run", "-o", format, "w9"][..],
                2,
                "invalid",
            ),
        ] {
            let (code, out, err) = run(d, args);
            assert_eq!(code, want, "{args:?}: {out}{err}");
            let v = document(format, &out);
            assert_eq!(v["cluster"], name.as_str(), "{args:?}: {v}");
            assert_eq!(v["result"], result, "{args:?}: {v}");
            assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
        }
    }
    // An image the local engine does not have: the run stops at `archive` (exit 1), and that failed
    // step is a `failures` entry (README walkthrough finding, point 7: `failures` was empty).
    let absent = "clusterctl-test/absent:nope";
    let (code, out, err) = run(d, &["image", "load", "--dry-run", "-o", "json", absent]);
    assert_eq!(code, 1, "{out}{err}");
    let v = document("json", &out);
    assert_eq!(v["result"], "failed", "{v}");
    let failures = v["failures"].as_array().expect("failures");
    assert_eq!(failures.len(), 1, "{v}");
    assert_eq!(
        (failures[0]["node"].as_str(), failures[0]["phase"].as_str()),
        (Some("local"), Some("archive")),
        "{v}"
    );
    assert!(
        failures[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains(absent)),
        "{v}"
    );
    assert!(
        v["error"].as_str().is_some_and(|e| e.contains(absent)),
        "{v}"
    );
    // Nothing to load (no image, no archive): refused before the file is read, as a document too.
    let (code, out, err) = run(d, &["image", "load", "--dry-run", "-o", "json"]);
    assert_eq!(code, 2, "{out}{err}");
    let v = document("json", &out);
    assert_eq!(v["cluster"], "cluster.yaml", "{v}");
    assert_eq!(v["result"], "invalid", "{v}");
    // An archive that is not a regular file (a device would be read forever) is refused up front.
    let (code, out, err) = run(
        d,
        &[
            "image",
            "load",
            "--dry-run",
            "-o",
            "json",
            "--archive",
            "/dev/zero",
        ],
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("not a regular file"), "{err}");
    // -o is the dry run's.
    for args in [
        &["destroy", "--yes", "-o", "json"][..],
        &["node", "remove", "-o", "json", "w1"][..],
        &["node", "join", "-o", "json", "w1"][..],
        &["upgrade", "--to", "1.34.1", "-o", "json"][..],
        &["image", "load", "-o", "json", "x:1"][..],
    ] {
        let (code, _, err) = run(d, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("--dry-run"), "{args:?}: {err}");
    }
}

/// README walkthrough finding (point 5): a command line clap refuses (`-o` without `--dry-run`, a
/// command that takes no `-o`, an unknown flag) printed clap's text alone although it asked for `-o
/// json|yaml`. It is now the `invalid` document on stdout too (clap's message on stderr, exit 2);
/// `cluster` is the `-f`/`--profile` given, else null. Without `-o json|yaml`, only clap's text; help
/// is still help.
#[test]
fn a_refused_command_line_is_a_document_when_it_asks_for_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    for (args, cluster, said) in [
        (
            &["up", "-f", "x.yaml", "-o", "json"][..],
            Some("x.yaml"),
            "--dry-run",
        ),
        (&["destroy", "-o", "json"][..], None, "--dry-run"),
        (
            &["destroy", "--profile", "lab", "--output=yaml"][..],
            Some("lab"),
            "--dry-run",
        ),
        (&["profile", "list", "-o", "json"][..], None, "'-o'"),
        (
            &["status", "-f", "c.yaml", "--bogus", "-ojson"][..],
            Some("c.yaml"),
            "--bogus",
        ),
    ] {
        let (code, out, err) = run(d, args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(
            err.contains("error:") && err.contains(said),
            "{args:?}: {err}"
        );
        let format = if args.contains(&"--output=yaml") {
            "yaml"
        } else {
            "json"
        };
        let v = document(format, &out);
        assert_eq!(v["result"], "invalid", "{args:?}: {v}");
        assert_eq!(v["cluster"].as_str(), cluster, "{args:?}: {v}");
        assert_eq!(v["diagnostics"], serde_json::json!([]), "{args:?}: {v}");
        let error = v["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(said) && !error.starts_with("error:"),
            "{args:?}: {v}"
        );
        assert!(!error.contains("Usage:"), "{args:?}: {v}");
    }
    // No document asked for: clap's text alone. Help is help (stdout, exit 0).
    for args in [&["destroy", "-o", "text"][..], &["up", "-o", "xml"][..]] {
        let (code, out, err) = run(d, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(err.contains("error:"), "{args:?}: {err}");
    }
    let (code, out, _) = run(d, &["up", "-o", "json", "--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("Usage:"), "{out}");
}

/// Walkthrough finding: `upgrade --profile lab --to V` of a version other than the profile's said
/// "set spec.kubernetesVersion to V in the file first", but there is no file: it says how to write
/// the profile out and go on with that file. A file is named by its path.
#[test]
fn upgrades_version_hint_names_the_profile_or_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let (code, _, err) = run(d, &["upgrade", "--profile", "lab", "--to", "1.35.4"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("profile lab says kubernetesVersion")
            && err.contains("`clusterctl profile print lab --output-dir lab`")
            && err.contains("`clusterctl upgrade -f lab/cluster.yaml --to 1.35.4`"),
        "{err}"
    );
    assert!(!err.contains("in the file"), "{err}");
    // As the hint says: written out, the version edited, the file's own hint names it.
    let (code, _, err) = run(d, &["profile", "print", "lab", "--output-dir", "lab"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(d, &["upgrade", "-f", "lab/cluster.yaml", "--to", "1.35.4"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("but lab/cluster.yaml says kubernetesVersion") && err.contains("in it first"),
        "{err}"
    );
}

#[test]
fn status_with_no_cluster_and_json_output_prints_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let name = clusterctl_testbed::unique_name("st");
    docker_file(d, &name, &[]);
    for format in ["json", "yaml"] {
        let (code, out, err) = run(d, &["status", "-f", "cluster.yaml", "-o", format]);
        assert_eq!(code, 1, "{out}{err}");
        let v = document(format, &out);
        assert_eq!(v["cluster"], name.as_str(), "{out}");
        assert_eq!(v["result"], "failed", "{out}");
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{out}");
    }
    // An invalid file too: `result: invalid` and each problem as `validate -o json` gives it.
    std::fs::write(d.join("bad.yaml"), "kind: Cluster\n").expect("write");
    let (code, out, _) = run(d, &["status", "-f", "bad.yaml", "-o", "json"]);
    assert_eq!(code, 2);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["result"], "invalid", "{out}");
    assert!(
        v["error"]
            .as_str()
            .is_some_and(|e| e.contains("apiVersion")),
        "{out}"
    );
    let (_, validated, _) = run(d, &["validate", "-f", "bad.yaml", "-o", "json"]);
    let validated: serde_json::Value = serde_json::from_str(&validated).expect("json");
    assert_eq!(validated["result"], "invalid", "{validated}");
    assert_eq!(v["diagnostics"], validated["diagnostics"], "{out}");
    assert!(
        v["diagnostics"].as_array().is_some_and(|d| d
            .iter()
            .any(|d| d["code"] == "spec::api-version" && d["line"] == 1)),
        "{out}"
    );
}

#[test]
fn profiles_are_named_as_the_user_named_them_and_can_be_written_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let (code, out, err) = run(d, &["validate", "--profile", "lab"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("profile lab: valid"), "{out}");
    assert!(
        !out.contains("profiles/lab.yaml") && !err.contains("profiles/lab.yaml"),
        "{out}{err}"
    );
    // profile print writes a file that validates as it is.
    let (code, text, err) = run(d, &["profile", "print", "builtin"]);
    assert_eq!(code, 0, "{err}");
    std::fs::write(d.join("cluster.yaml"), &text).expect("write");
    let (code, out, err) = run(d, &["validate"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = run(d, &["profile", "list"]);
    assert_eq!(code, 0);
    assert!(
        out.lines()
            .any(|l| l.starts_with("lab") && l.ends_with("(default)")),
        "{out}"
    );
    let (code, _, err) = run(d, &["profile", "print", "no-such"]);
    assert_eq!(code, 2);
    assert!(err.contains("no profile named"), "{err}");
}

/// Walkthrough finding: `profile print ha-containerd > cluster.yaml` gave a file that does not
/// validate (it references `harbor-ca.crt`, embedded in the binary) and no way to get that file.
/// `--output-dir DIR` writes the profile with its sample files; it validates as it is, and nothing is
/// overwritten.
#[test]
fn a_profile_is_written_out_with_the_files_it_references() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    for (profile, files) in [
        ("ha-containerd", &["harbor-ca.crt"][..]),
        ("oidc-audit", &["keycloak-ca.crt", "audit-policy.yaml"][..]),
    ] {
        let (code, _, err) = run(d, &["profile", "print", profile]);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains("--output-dir"), "{err}");
        let (code, out, err) = run(d, &["profile", "print", profile, "--output-dir", profile]);
        assert_eq!(code, 0, "{out}{err}");
        for f in files.iter().chain(&["cluster.yaml"]) {
            assert!(d.join(profile).join(f).is_file(), "{f}: {out}");
        }
        let file = format!("{profile}/cluster.yaml");
        let (code, out, err) = run(d, &["validate", "-f", &file]);
        assert_eq!(code, 0, "{out}{err}");
        // Written once: a second time refuses and changes nothing.
        std::fs::write(d.join(profile).join(files[0]), "mine").expect("write");
        let (code, _, err) = run(d, &["profile", "print", profile, "--output-dir", profile]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("nothing was written"), "{err}");
        assert_eq!(
            std::fs::read_to_string(d.join(profile).join(files[0])).expect("read"),
            "mine"
        );
    }
}

#[test]
fn destroy_and_status_take_a_profile() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // Not confirmed (stdin is empty): the prompt names the profile's cluster, nothing is changed.
    let (code, out, err) = run(d, &["destroy", "--profile", "lab"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("Destroy cluster lab") && err.contains("nothing was changed"),
        "{err}"
    );
    // The provider as the file spells it (breaker finding C5: "provider Ssh").
    assert!(
        err.contains("provider ssh") || err.contains("provider docker"),
        "{err}"
    );
    // status --profile reads the profile (whether or not a `lab` cluster runs here, the input is
    // valid: not exit 2).
    let (code, out, err) = run(d, &["status", "--profile", "lab", "-o", "json"]);
    assert_ne!(code, 2, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["cluster"], "lab");
    // The day-2 commands too: node remove's plan for the profile's worker (contacting nothing).
    let (code, out, err) = run(
        d,
        &["node", "remove", "--profile", "lab", "--dry-run", "worker"],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("worker from cluster `lab`") && out.contains("delete Node worker"),
        "{out}"
    );
    // Walkthrough finding: its multi-line reset scripts broke out of the plan's columns (lines at
    // column 0). Every line is the header, a group title, an indented entry or the summary.
    let text_column = out
        .lines()
        .find(|l| l.contains("  api    drain node worker"))
        .and_then(|l| l.find("drain node"))
        .unwrap_or_else(|| panic!("{out}"));
    let mut in_script = false;
    for l in out.lines().skip(1).filter(|l| !l.is_empty()) {
        let title = !l.starts_with(' ') && l.ends_with(':');
        let summary = l.ends_with("nothing was changed (dry run).");
        assert!(title || summary || l.starts_with("  "), "{l:?} in:\n{out}");
        // A continuation line of a script starts at the text column.
        if l.starts_with(&" ".repeat(text_column)) {
            in_script = true;
        }
    }
    assert!(in_script, "the reset scripts have further lines:\n{out}");
}

#[test]
fn version_lists_supported_kubernetes_and_pinned_components() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, out, err) = run(dir.path(), &["version"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!("clusterctl {}", env!("CARGO_PKG_VERSION"))),
        "{out}"
    );
    assert!(
        out.contains("v1.34.1") && out.contains("kube-vip") && out.contains("kindest/node"),
        "{out}"
    );
    let (code, out, _) = run(dir.path(), &["version", "-o", "json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let k = v["kubernetes"].as_array().expect("kubernetes");
    assert!(k.iter().any(|r| r["first"] == "v1.34.0"), "{v}");
    assert!(
        k.iter().all(|r| r["etcd"]
            .as_str()
            .is_some_and(|e| e.starts_with("registry.k8s.io/etcd:"))),
        "{v}"
    );
    // --version still works.
    let (code, out, _) = run(dir.path(), &["--version"]);
    assert_eq!(code, 0);
    assert!(out.contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn completions_for_bash_zsh_and_fish() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (shell, marker) in [
        ("bash", "complete -F _clusterctl"),
        ("zsh", "#compdef clusterctl"),
        ("fish", "complete -c clusterctl"),
    ] {
        let (code, out, err) = run(dir.path(), &["completion", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(
            out.contains(marker),
            "{shell}: {}",
            &out[..out.len().min(400)]
        );
        assert!(
            out.contains("validate") && out.contains("output-dir") && out.contains("bundle-file"),
            "{shell}"
        );
    }
    // The bash script is valid bash.
    let (_, script, _) = run(dir.path(), &["completion", "bash"]);
    let path = dir.path().join("c.bash");
    std::fs::write(&path, script).expect("write");
    let st = Command::new("bash")
        .arg("-n")
        .arg(&path)
        .status()
        .expect("bash");
    assert!(st.success());
}

/// A kind config as kind's documentation writes them: a name, networking, a control plane with a port
/// mapping and a label, two workers (one with a mount clusterctl has no equivalent for).
const KIND_CONFIG: &str = "\
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
name: dev
networking:
  podSubnet: 10.250.0.0/16
  kubeProxyMode: ipvs
nodes:
- role: control-plane
  image: kindest/node:v1.34.0@sha256:7416a61b42b1662ca6ca89f02028ac133a309a2a30ba309614e8ec94d976dc5a
  extraPortMappings:
  - containerPort: 30080
    hostPort: 8080
    protocol: TCP
  labels:
    ingress-ready: \"true\"
- role: worker
  extraMounts:
  - hostPath: /tmp
    containerPath: /data
- role: worker
";

#[test]
fn a_kind_config_is_recognised_and_converted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(d.join("kind.yaml"), KIND_CONFIG).expect("write");
    // validate says what it is and how to convert it.
    let (code, _, err) = run(d, &["validate", "-f", "kind.yaml"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("this is a kind config") && err.contains("clusterctl convert -f kind.yaml"),
        "{err}"
    );
    // convert writes a cluster file that validates, keeping what has an equivalent.
    let (code, out, err) = run(d, &["convert", "-f", "kind.yaml"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("not converted: nodes[1].extraMounts"), "{err}");
    std::fs::write(d.join("cluster.yaml"), &out).expect("write");
    let (code, vout, verr) = run(d, &["validate", "-o", "json"]);
    assert_eq!(code, 0, "{out}\n{vout}{verr}");
    let (code, plan, err) = run(d, &["up", "--dry-run", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let plan: serde_json::Value = serde_json::from_str(&plan).expect("json");
    assert_eq!(plan["cluster"], "dev");
    for want in [
        "kubernetesVersion: v1.34.0",
        "provider: docker",
        "podSubnet: 10.250.0.0/16",
        "kubeProxy: ipvs",
        "plugin: kindnet",
        "- name: control-plane",
        "- name: worker2",
        "ingress-ready: \"true\"",
        "containerPort: 30080",
        "hostPort: 8080",
        "# not converted: nodes[1].extraMounts",
    ] {
        assert!(out.contains(want), "{want} missing:\n{out}");
    }
    // Not a kind config: refused, exit 2.
    let (code, _, err) = run(d, &["convert", "-f", "cluster.yaml"]);
    assert_eq!(code, 2);
    assert!(err.contains("not a kind Cluster config"), "{err}");
    // Walkthrough finding: `-f -` (kubectl's convention) reads the kind config from stdin.
    let (code, from_stdin, err) = run_with_stdin(d, &["convert", "-f", "-"], KIND_CONFIG);
    assert_eq!(code, 0, "{err}");
    assert_eq!(from_stdin, out);
    let (code, _, err) = run_with_stdin(d, &["convert", "-f", "-"], "kind: Cluster\n");
    assert_eq!(code, 2);
    assert!(err.contains("convert: stdin: "), "{err}");
    // README walkthrough finding (point 6): no node image, so the newest supported version, said as
    // a note (stderr and a comment); validation's warnings shown (the docker provider on a newest
    // Kubernetes that refuses cgroup v1 hosts); featureGates points at the field that takes them.
    let minimal = "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnetworking:\n  disableDefaultCNI: true\nfeatureGates:\n  Foo: true\n";
    let (code, out, err) = run_with_stdin(d, &["convert", "-f", "-"], minimal);
    assert_eq!(code, 0, "{err}");
    let newest = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("kubernetesVersion: "))
        .expect("kubernetesVersion")
        .to_string();
    let note = format!("note: kubernetesVersion {newest}: no node image names a version");
    assert!(err.contains(&note), "{err}");
    assert!(out.contains(&format!("# {note}")), "{out}");
    assert!(err.contains("warning: spec::cgroup-v1: "), "{err}");
    assert!(
        err.contains("help: set `kubelet: {failCgroupV1: false}`"),
        "{err}"
    );
    assert!(
        err.contains("featureGates (") && err.contains("spec.apiServer.extraArgs"),
        "{err}"
    );
    assert!(out.contains("plugin: none"), "{out}");
    // The wait of a file without a CNI, planned as the run does it (point 3): the control plane only.
    std::fs::write(d.join("none.yaml"), &out).expect("write");
    let (code, plan, err) = run(d, &["up", "-f", "none.yaml", "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    let wait = plan
        .lines()
        .find(|l| l.trim_start().starts_with("wait-ready"))
        .unwrap_or_else(|| panic!("{plan}"));
    assert!(
        wait.contains("wait until the control-plane components are Running and Ready")
            && wait.contains("cni: none")
            && !wait.contains("every node is Ready"),
        "{wait}"
    );
}

/// A kubeconfig as `up` leaves it after building cluster `lab` (entries `clusterctl-<lab>`) beside
/// the user's own cluster `other`, which is the current context.
fn two_contexts(lab: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: other\nclusters:\n- name: clusterctl-{lab}\n  cluster: {{server: 'https://127.0.0.1:40001', certificate-authority-data: TEFC}}\n- name: other\n  cluster: {{server: 'https://127.0.0.1:40002'}}\nusers:\n- name: clusterctl-{lab}\n  user: {{token: lab-token-1}}\n- name: other\n  user: {{token: other-secret-token}}\ncontexts:\n- name: clusterctl-{lab}\n  context: {{cluster: clusterctl-{lab}, user: clusterctl-{lab}}}\n- name: other\n  context: {{cluster: other, user: other}}\n"
    )
}

/// The names of a kubeconfig's `list` entries (`clusters`, `users`, `contexts`).
fn names(v: &serde_yaml::Value, list: &str) -> Vec<String> {
    v[list]
        .as_sequence()
        .map(|s| {
            s.iter()
                .filter_map(|e| e["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Asserts that `text`, a kubeconfig, has exactly the entries `want` in each of its clusters, users
/// and contexts; returns it parsed.
fn assert_entries(text: &str, want: &[&str]) -> serde_yaml::Value {
    let v: serde_yaml::Value = serde_yaml::from_str(text).expect("yaml");
    for list in ["clusters", "users", "contexts"] {
        assert_eq!(names(&v, list), want, "{list}: {text}");
    }
    v
}

#[test]
fn get_and_export_kubeconfig_carry_only_the_clusters_context() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let name = clusterctl_testbed::unique_name("gk");
    let entry = format!("clusterctl-{name}");
    std::fs::write(d.join("kubeconfig"), two_contexts(&name)).expect("write");
    docker_file(d, &name, &[]);
    // get kubeconfig (stdout is a pipe here): that context alone, every entry `clusterctl-<name>`.
    let (code, out, err) = run(d, &["get", "kubeconfig", "-f", "cluster.yaml"]);
    assert_eq!(code, 0, "{err}");
    let v = assert_entries(&out, &[&entry]);
    assert_eq!(v["current-context"].as_str(), Some(entry.as_str()));
    assert_eq!(
        v["clusters"][0]["cluster"]["server"].as_str(),
        Some("https://127.0.0.1:40001")
    );
    assert!(
        out.contains("lab-token-1") && !out.contains("other-secret-token"),
        "{out}"
    );
    // export kubeconfig into another file with the user's own current context: merged beside it,
    // made the current context (as kind's), 0600.
    let dest = d.join("merged");
    std::fs::write(
        &dest,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: mine\n  cluster: {server: 'https://10.1.1.1:6443'}\nusers:\n- name: mine\n  user: {token: my-token}\ncontexts:\n- name: mine\n  context: {cluster: mine, user: mine}\ncurrent-context: mine\n",
    )
    .expect("write");
    let dest_arg = dest.to_string_lossy().into_owned();
    let (code, out, err) = run(
        d,
        &[
            "export",
            "kubeconfig",
            "-f",
            "cluster.yaml",
            "--kubeconfig",
            &dest_arg,
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("context {entry} written")) && out.contains("current context"),
        "{out}"
    );
    let merged = std::fs::read_to_string(&dest).expect("read");
    let v = assert_entries(&merged, &["mine", &entry]);
    assert_eq!(
        v["current-context"].as_str(),
        Some(entry.as_str()),
        "{merged}"
    );
    assert!(
        merged.contains("https://127.0.0.1:40001")
            && merged.contains("lab-token-1")
            && merged.contains("my-token"),
        "{merged}"
    );
    assert!(!merged.contains("other-secret-token"), "{merged}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&dest).expect("meta").permissions().mode() & 0o777,
        0o600
    );
    // destroy removes exactly the cluster's entries and unsets the current context that named them.
    // (No node container of this cluster exists; without a Docker engine that step fails and the
    // context is kept, so this part needs the engine the suite starts.)
    let (_, out, err) = run(
        d,
        &[
            "destroy",
            "-f",
            "cluster.yaml",
            "--yes",
            "--kubeconfig",
            &dest_arg,
        ],
    );
    assert!(
        out.contains(&format!("context {entry} removed")),
        "{out}{err}"
    );
    let left = std::fs::read_to_string(&dest).expect("read");
    let v = assert_entries(&left, &["mine"]);
    assert_eq!(v["current-context"].as_str(), Some(""), "{left}");
    assert!(left.contains("my-token"), "{left}");
}

/// Breaker findings: a kubeconfig clusterctl cannot read (not YAML, a list that is not a list, not
/// UTF-8, a directory) is refused by `export kubeconfig` and left as it is — never replaced by a file
/// with only the cluster's entries; a kubeconfig reached through a symbolic link is written through it
/// (the link stays); `destroy` finds the cluster's context in any file of `KUBECONFIG=a:b`; a
/// kubeconfig that does not parse is refused by `status` without a line of it on the screen.
#[test]
fn kubeconfig_files_are_never_replaced_by_what_cannot_be_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let name = clusterctl_testbed::unique_name("kk");
    let entry = format!("clusterctl-{name}");
    std::fs::write(d.join("kubeconfig"), two_contexts(&name)).expect("write");
    docker_file(d, &name, &[]);
    let export = |dest: &std::path::Path| {
        run(
            d,
            &[
                "export",
                "kubeconfig",
                "-f",
                "cluster.yaml",
                "--kubeconfig",
                &dest.to_string_lossy(),
            ],
        )
    };
    for (file, bytes) in [
        (
            "notyaml",
            &b"apiVersion: v1\nusers: [\n  keep-me: {token: x}\n"[..],
        ),
        ("notalist", &b"apiVersion: v1\nusers: \"keep-me\"\n"[..]),
        ("latin1", &b"apiVersion: v1\n# caf\xe9 keep-me\n"[..]),
    ] {
        let dest = d.join(file);
        std::fs::write(&dest, bytes).expect("write");
        let (code, out, err) = export(&dest);
        assert_eq!(code, 1, "{file}: {out}{err}");
        assert_eq!(
            std::fs::read(&dest).expect("read"),
            bytes,
            "{file} left as it was"
        );
    }
    std::fs::create_dir(d.join("adir")).expect("mkdir");
    let (code, _, err) = export(&d.join("adir"));
    assert_eq!(code, 1, "{err}");
    // Through a link: the file it names is merged into, the link stays a link.
    std::fs::create_dir(d.join("dot")).expect("mkdir");
    std::fs::write(d.join("dot/real"), "apiVersion: v1\nkind: Config\n").expect("write");
    std::os::unix::fs::symlink("dot/real", d.join("linked")).expect("symlink");
    let (code, out, err) = export(&d.join("linked"));
    assert_eq!(code, 0, "{out}{err}");
    assert!(std::fs::symlink_metadata(d.join("linked"))
        .expect("meta")
        .file_type()
        .is_symlink());
    assert!(std::fs::read_to_string(d.join("dot/real"))
        .expect("read")
        .contains(&entry));
    // destroy: the context is in the second file of KUBECONFIG.
    std::fs::write(d.join("first"), "apiVersion: v1\nkind: Config\n").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_clusterctl"))
        .args(["destroy", "-f", "cluster.yaml", "--yes"])
        .current_dir(d)
        .env("HOME", d)
        .env(
            "KUBECONFIG",
            format!(
                "{}:{}",
                d.join("first").display(),
                d.join("dot/real").display()
            ),
        )
        .env_remove("XDG_CACHE_HOME")
        .stdin(Stdio::null())
        .output()
        .expect("destroy");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("context {entry} removed from")),
        "{text}"
    );
    assert!(!std::fs::read_to_string(d.join("dot/real"))
        .expect("read")
        .contains(&entry));
    // status on a kubeconfig that does not parse: refused, no line of it shown.
    std::fs::write(
        d.join("broken"),
        format!("apiVersion: v1\nkind: Config\nusers:\n- name: prod\n  user:\n    token: PROD-SECRET\n    password: [x]\ncontexts:\n- name: {entry}\n  context: {{cluster: {entry}, user: prod}}\ncurrent-context: {entry}\n"),
    )
    .expect("write");
    let (code, out, err) = run(
        d,
        &[
            "status",
            "-f",
            "cluster.yaml",
            "--kubeconfig",
            "broken",
            "-o",
            "json",
        ],
    );
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        !out.contains("PROD-SECRET") && !err.contains("PROD-SECRET"),
        "{out}{err}"
    );
}

/// Walkthrough finding: `get kubeconfig --kubeconfig FILE` of a file without the cluster's context
/// printed the whole file — every other cluster's credentials too. It takes the file's current
/// context alone (as `status --kubeconfig` does), named `clusterctl-<name>`.
#[test]
fn get_kubeconfig_from_a_file_without_the_clusters_context_takes_its_current_one_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let name = clusterctl_testbed::unique_name("gc");
    docker_file(d, &name, &[]);
    std::fs::write(
        d.join("two"),
        "apiVersion: v1\nkind: Config\nclusters:\n- name: mine\n  cluster: {server: 'https://10.1.1.1:6443'}\n- name: other\n  cluster: {server: 'https://10.2.2.2:6443'}\nusers:\n- name: mine\n  user: {token: my-token}\n- name: other\n  user: {token: other-secret-token}\ncontexts:\n- name: mine\n  context: {cluster: mine, user: mine}\n- name: other\n  context: {cluster: other, user: other}\ncurrent-context: mine\n",
    )
    .expect("write");
    let (code, out, err) = run(
        d,
        &[
            "get",
            "kubeconfig",
            "-f",
            "cluster.yaml",
            "--kubeconfig",
            "two",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("my-token") && out.contains("https://10.1.1.1:6443"),
        "{out}"
    );
    assert!(
        !out.contains("other-secret-token") && !out.contains("10.2.2.2"),
        "{out}"
    );
    assert_entries(&out, &[&format!("clusterctl-{name}")]);
    // Neither the cluster's context nor a current one: refused, nothing printed.
    std::fs::write(
        d.join("none"),
        "apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n",
    )
    .expect("write");
    let (code, out, err) = run(
        d,
        &[
            "get",
            "kubeconfig",
            "-f",
            "cluster.yaml",
            "--kubeconfig",
            "none",
        ],
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.is_empty() && err.contains("no current context"),
        "{err}"
    );
}

#[test]
fn an_earlier_releases_kubeconfig_entries_are_found_and_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let name = clusterctl_testbed::unique_name("gl");
    // As up merged it before the entries were named `clusterctl-<name>`.
    std::fs::write(
        d.join("kubeconfig"),
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster: {{server: 'https://127.0.0.1:40003'}}\nusers:\n- name: {name}-admin\n  user: {{token: old-token}}\ncontexts:\n- name: {name}\n  context: {{cluster: {name}, user: {name}-admin}}\ncurrent-context: {name}\n"),
    )
    .expect("write");
    docker_file(d, &name, &[]);
    let (code, out, err) = run(d, &["get", "kubeconfig", "-f", "cluster.yaml"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_yaml::Value = serde_yaml::from_str(&out).expect("yaml");
    assert_eq!(
        v["current-context"].as_str(),
        Some(format!("clusterctl-{name}").as_str()),
        "{out}"
    );
    assert!(out.contains("old-token"), "{out}");
    let (_, out, err) = run(d, &["destroy", "-f", "cluster.yaml", "--yes"]);
    assert!(
        out.contains(&format!("context {name} removed")),
        "{out}{err}"
    );
    let left = std::fs::read_to_string(d.join("kubeconfig")).expect("read");
    assert!(
        !left.contains("old-token") && !left.contains(&name),
        "{left}"
    );
}

#[test]
fn get_nodes_of_ssh_hosts_shows_the_files_addresses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, out, err) = run(dir.path(), &["get", "nodes", "--profile", "builtin"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            ["cp1", "control-plane", "10.10.0.11"],
            ["node1", "worker", "10.10.0.21"],
            ["node2", "worker", "10.10.0.22"]
        ],
        "{out}"
    );
}

/// README walkthrough finding (point 8): `get nodes -o json` of a docker node without a container
/// said `"container": "(none)"`, a placeholder, where commands.md promises null for `<none>`.
#[test]
fn get_nodes_json_has_null_for_what_a_node_does_not_have() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    docker_file(d, &clusterctl_testbed::unique_name("gn"), &["w1"]);
    let (code, out, err) = run(d, &["get", "nodes", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let rows = v.as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{v}");
    for r in rows {
        for key in ["address", "container", "state"] {
            assert!(
                r.get(key).is_some_and(serde_json::Value::is_null),
                "{key}: {r}"
            );
        }
    }
    let (code, out, err) = run(d, &["get", "nodes", "-o", "wide"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("(none)"), "{out}");
    let w1: Vec<&str> = out
        .lines()
        .find(|l| l.starts_with("w1"))
        .expect("w1")
        .split_whitespace()
        .collect();
    assert_eq!(w1, ["w1", "worker", "<none>", "<none>", "-"], "{out}");
    // SSH nodes: their address, no container (null).
    let (code, out, err) = run(d, &["get", "nodes", "--profile", "builtin", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert!(
        v[0]["address"].is_string() && v[0]["container"].is_null(),
        "{v}"
    );
}

#[test]
fn get_clusters_and_nodes_list_the_docker_nodes() {
    use clusterctl_testbed::docker::docker;
    let Some(image) = docker_node_image() else {
        return;
    };
    let name = clusterctl_testbed::unique_name("gc");
    let container = format!("{name}-cp1");
    // On the cluster network, as the docker provider makes it.
    let network = format!("clusterctl-{name}");
    struct Rm(String, String);
    impl Drop for Rm {
        fn drop(&mut self) {
            let _ = docker(&["rm", "-f", "-v", &self.0]);
            let _ = docker(&["network", "rm", &self.1]);
        }
    }
    let _rm = Rm(container.clone(), network.clone());
    docker(&["network", "create", &network]).expect("network");
    docker(&[
        "run",
        "-d",
        "--name",
        &container,
        "--network",
        &network,
        "--label",
        &format!("io.clusterctl.cluster={name}"),
        "--label",
        "io.clusterctl.node=cp1",
        "--label",
        "io.clusterctl.role=control-plane",
        // Only a process that stays up: the node image's own entrypoint (systemd) is not needed here.
        "--entrypoint",
        "sleep",
        &image.tag,
        "300",
    ])
    .expect("container");
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // Walkthrough finding: the download cache of upstream files (`~/.cache/clusterctl/.upstream`,
    // beside each cluster's state cache) was listed as a cluster named `.upstream`.
    // A cluster with only a state cache here is listed.
    let cached = format!("{name}c");
    std::fs::create_dir_all(d.join(".cache/clusterctl/.upstream")).expect("cache");
    std::fs::create_dir_all(d.join(".cache/clusterctl").join(&cached)).expect("cache");
    // Directories that cannot be a cluster's name (breaker finding) are not listed either.
    for other in ["Bad Name", "under_score", "with\nnewline"] {
        std::fs::create_dir_all(d.join(".cache/clusterctl").join(other)).expect("cache");
    }
    let (code, out, err) = run(d, &["get", "clusters"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().any(|l| l == name), "{out}");
    assert!(out.lines().any(|l| l == cached), "{out}");
    for not in [".upstream", "Bad Name", "under_score", "newline"] {
        assert!(!out.contains(not), "{not}: {out}");
    }
    let (code, out, _) = run(d, &["get", "clusters", "-o", "json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert!(
        v.as_array().is_some_and(|a| a
            .iter()
            .any(|c| c["name"] == name.as_str() && c["containers"] == 1)),
        "{v}"
    );
    docker_file(d, &name, &["w1"]);
    // ADDRESS: the container's address on the cluster network; `<none>` (kubectl's placeholder, not
    // an empty cell) for a node without a running container.
    let ip = docker(&[
        "inspect",
        "-f",
        &format!("{{{{(index .NetworkSettings.Networks \"{network}\").IPAddress}}}}"),
        &container,
    ])
    .expect("inspect");
    let ip = ip.trim();
    assert!(ip.parse::<std::net::Ipv4Addr>().is_ok(), "{ip}");
    for format in ["text", "wide"] {
        let (code, out, err) = run(d, &["get", "nodes", "-o", format]);
        assert_eq!(code, 0, "{err}");
        let row = |node: &str| -> Vec<String> {
            out.lines()
                .find(|l| l.starts_with(node))
                .unwrap_or_else(|| panic!("{node}: {out}"))
                .split_whitespace()
                .map(str::to_string)
                .collect()
        };
        assert_eq!(row("cp1")[..3], ["cp1", "control-plane", ip], "{out}");
        assert_eq!(row("w1")[..3], ["w1", "worker", "<none>"], "{out}");
        if format == "wide" {
            assert_eq!(row("cp1")[3..], [container.as_str(), "running"], "{out}");
            assert_eq!(row("w1")[3..], ["<none>", "-"], "{out}");
        }
    }
    let (_, out, _) = run(d, &["get", "nodes", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v[0]["address"], ip, "{v}");
    assert_eq!(v[0]["container"], container.as_str(), "{v}");
    assert_eq!(v[0]["state"], "running", "{v}");
    assert!(v[1]["address"].is_null(), "{v}");
    assert!(
        v[1]["container"].is_null() && v[1]["state"].is_null(),
        "{v}"
    );
    let (code, out, _) = run(d, &["get", "nodes", "-o", "name"]);
    assert_eq!(code, 0);
    assert_eq!(out, "cp1\nw1\n");
}

#[test]
fn a_failed_node_creation_removes_what_it_created() {
    let Some(image) = docker_node_image() else {
        return;
    };
    let name = clusterctl_testbed::unique_name("fc");
    let label = format!("label=io.clusterctl.cluster={name}");
    let _cleanup = LabelCleanup(label.clone());
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // 1k of memory: the engine refuses the container (its minimum is 6 MB) after the network exists.
    std::fs::write(
        d.join("cluster.yaml"),
        format!("apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: docker\n  docker:\n    nodeImage: {}\n    runOptions: {{memory: 1k}}\n  nodes:\n    - {{name: cp1, role: control-plane}}\n    - {{name: w1, role: worker}}\n", image.tag),
    )
    .expect("write");
    let (code, out, err) = run(d, &["up", "-f", "cluster.yaml"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("creating the node containers failed"), "{err}");
    assert!(
        err.contains("removed what this attempt created")
            && err.contains(&format!("network clusterctl-{name}")),
        "{err}"
    );
    assert_nothing_left(&label);
}

/// Removes, when dropped, every container and network carrying the label filter it holds
/// (`label=io.clusterctl.cluster=NAME`): whatever a test's `up` did, nothing of its cluster stays.
struct LabelCleanup(String);

/// For the tests that need the Docker engine: the test bed's node image when the engine is there
/// (`None` outside CI without it; in CI its absence fails the test).
fn docker_node_image() -> Option<clusterctl_testbed::docker::NodeImage> {
    use clusterctl_testbed::docker::{docker_available, NodeImage};
    if !clusterctl_testbed::require("a Docker engine", docker_available()) {
        return None;
    }
    Some(NodeImage::ensure().expect("node image"))
}

/// Asserts that no container and no network carries `label` (a `label=…` filter).
fn assert_nothing_left(label: &str) {
    use clusterctl_testbed::docker::docker;
    let left = docker(&["ps", "-aq", "--filter", label]).expect("ps");
    assert!(left.trim().is_empty(), "containers left: {left}");
    let nets = docker(&["network", "ls", "-q", "--filter", label]).expect("ls");
    assert!(nets.trim().is_empty(), "network left: {nets}");
}

impl Drop for LabelCleanup {
    fn drop(&mut self) {
        use clusterctl_testbed::docker::docker;
        if let Ok(ids) = docker(&["ps", "-aq", "--filter", &self.0]) {
            for id in ids.split_whitespace() {
                let _ = docker(&["rm", "-f", "-v", id]);
            }
        }
        if let Ok(nets) = docker(&["network", "ls", "-q", "--filter", &self.0]) {
            for n in nets.split_whitespace() {
                let _ = docker(&["network", "rm", n]);
            }
        }
    }
}

/// Issue 16, point 6, on the real engine: this test bed's Docker refuses privileged containers (its
/// daemon lacks CAP_SYS_RESOURCE: `unable to apply caps: operation not permitted`, TESTBED.md), so
/// `up` of a file with the default (privileged, kind's) node options fails; it removes the container
/// and network it made and names the whole set of unprivileged node settings; the same file with
/// exactly those settings then gets its node containers created and booted by the same engine.
#[test]
fn a_refused_privileged_node_names_the_unprivileged_settings_that_work() {
    use clusterctl_testbed::docker::docker;
    let Some(image) = docker_node_image() else {
        return;
    };
    let probe = docker(&[
        "run",
        "--rm",
        "--privileged",
        "--entrypoint",
        "true",
        &image.tag,
    ]);
    let refuses = probe
        .as_ref()
        .is_err_and(|e| e.to_string().contains("unable to apply caps"));
    if !clusterctl_testbed::require(
        &format!(
            "a Docker engine that refuses privileged containers, as TESTBED.md's does ({probe:?})"
        ),
        refuses,
    ) {
        return;
    }
    let name = clusterctl_testbed::unique_name("priv");
    let label = format!("label=io.clusterctl.cluster={name}");
    let _cleanup = LabelCleanup(label.clone());
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let file = |extra: &str| {
        format!("apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: docker\n{extra}  docker:\n    nodeImage: {}\n{}  nodes:\n    - {{name: cp1, role: control-plane}}\n", image.tag, if extra.is_empty() { "" } else { "    runOptions: {privileged: false, capAdd: [SYS_ADMIN, NET_ADMIN, SYS_PTRACE], tmpfs: [\"/run:exec\", /run/lock, \"/tmp:exec\", \"/var/lib/containerd:exec\"], cgroupns: private}\n" })
    };
    std::fs::write(d.join("cluster.yaml"), file("")).expect("write");
    let (code, out, err) = run(d, &["up", "-f", "cluster.yaml"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("unable to apply caps"), "{err}");
    assert!(
        err.contains("hint: this Docker engine refuses privileged containers"),
        "{err}"
    );
    for setting in [
        "spec.nodeEnvironment: unprivileged-container",
        "privileged: false",
        "capAdd: [SYS_ADMIN, NET_ADMIN, SYS_PTRACE]",
        "tmpfs: [\"/run:exec\", /run/lock, \"/tmp:exec\", \"/var/lib/containerd:exec\"]",
        "cgroupns: private",
    ] {
        assert!(err.contains(setting), "{setting} not named: {err}");
    }
    assert!(
        err.contains(&format!("container {name}-cp1"))
            && err.contains(&format!("network clusterctl-{name}")),
        "{err}"
    );
    assert_nothing_left(&label);

    // The named settings, as the hint gives them: the engine creates and boots the node.
    std::fs::write(
        d.join("cluster.yaml"),
        file("  nodeEnvironment: unprivileged-container\n"),
    )
    .expect("write");
    let (code, out, err) = run(d, &["up", "-f", "cluster.yaml", "--only", "facts"]);
    assert!(
        !err.contains("creating the node containers failed"),
        "{err}"
    );
    assert_eq!(code, 0, "{out}{err}");
    let running =
        docker(&["ps", "-q", "--filter", &label, "--filter", "status=running"]).expect("ps");
    assert_eq!(running.split_whitespace().count(), 1, "{running}");
}

/// Issue 16, point 11: `airgap images` lists the node image the docker provider runs the nodes from
/// (`kindest/node:<version>` by default, `docker.nodeImage` when set) and every reference fully
/// qualified, a preload given as `cka-api:v4` too (`docker.io/library/cka-api:v4`, as the bundle
/// stores it), and local-path-provisioner's image (the docker lab's default StorageClass); an SSH
/// cluster has neither. With `docker.loadBalancer` the API load balancer's pinned image is listed too
/// (issue 27 item 4).
#[test]
fn airgap_images_lists_the_node_image_and_qualified_preloads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let file = |provider: &str| {
        format!("apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: imgs}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: {provider}\n  images:\n    preload: [cka-api:v4, ghcr.io/acme/tool:1.0]\n  nodes:\n    - {{name: cp1, role: control-plane, address: 10.9.0.11}}\n")
    };
    std::fs::write(d.join("docker.yaml"), file("docker")).expect("write");
    let (code, out, err) = run(d, &["airgap", "images", "-f", "docker.yaml"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.contains(&"docker.io/library/cka-api:v4"), "{out}");
    assert!(lines.contains(&"ghcr.io/acme/tool:1.0"), "{out}");
    assert!(lines.contains(&"docker.io/kindest/node:v1.34.1"), "{out}");
    // The docker lab's default StorageClass (issue 27): local-path-provisioner's pinned image.
    assert!(
        lines.contains(&"docker.io/rancher/local-path-provisioner:v0.0.30"),
        "{out}"
    );
    assert!(!lines.contains(&"cka-api:v4"), "{out}");
    // Every line is registry/repository:tag.
    for l in &lines {
        let host = l.split('/').next().unwrap_or_default();
        assert!(host.contains('.') && l.contains(':'), "not qualified: {l}");
    }
    let (code, out, err) = run(d, &["airgap", "images", "-f", "docker.yaml", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert!(
        v.as_array().is_some_and(|a| a.iter().any(
            |i| i["component"] == "node-image" && i["pull"] == "docker.io/kindest/node:v1.34.1"
        )),
        "{v}"
    );
    assert!(
        v.as_array().is_some_and(|a| a
            .iter()
            .any(|i| i["component"] == "preload" && i["source"] == "docker.io/library/cka-api:v4")),
        "{v}"
    );
    // One control plane: no API load balancer (issue 27 item 4); written, its pinned image is listed.
    assert!(!out.contains("load-balancer"), "{out}");
    let lb = file("docker").replace("  images:\n", "  docker: {loadBalancer: {}}\n  images:\n");
    std::fs::write(d.join("lb.yaml"), lb).expect("write");
    let (code, out, err) = run(d, &["airgap", "images", "-f", "lb.yaml", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert!(
        v.as_array()
            .is_some_and(|a| a.iter().any(|i| i["component"] == "load-balancer"
                && i["pull"] == clusterctl_spec::lab::DEFAULT_LOAD_BALANCER_IMAGE)),
        "{v}"
    );
    std::fs::write(d.join("ssh.yaml"), file("ssh")).expect("write");
    let (code, out, err) = run(d, &["airgap", "images", "-f", "ssh.yaml"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("kindest/node"), "{out}");
    assert!(!out.contains("local-path-provisioner"), "{out}");
    assert!(out.contains("docker.io/library/cka-api:v4"), "{out}");
}

/// Walkthrough finding: `install.sh` installed `target/release/clusterctl` even when cargo had built
/// into `$CARGO_TARGET_DIR`. A `cargo` stand-in on PATH (a release build of the workspace costs
/// minutes) writes the binary where real cargo would — `$CARGO_TARGET_DIR/release/clusterctl` — and
/// install.sh must install that one.
#[test]
fn install_sh_installs_from_cargo_target_dir() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let bin = d.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    let cargo = bin.join("cargo");
    std::fs::write(
        &cargo,
        "#!/bin/sh\n# cargo stand-in: `cargo build --release …` writes the binary where cargo would\nout=\"${CARGO_TARGET_DIR:-target}/release\"\nmkdir -p \"$out\"\nprintf '#!/bin/sh\\necho clusterctl from the target dir\\n' > \"$out/clusterctl\"\nchmod 755 \"$out/clusterctl\"\n",
    )
    .expect("cargo stand-in");
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let target = d.join("t");
    let prefix = d.join("prefix");
    let out = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../install.sh"))
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("CARGO_TARGET_DIR", &target)
        .env("PREFIX", &prefix)
        .output()
        .expect("install.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    let installed = std::fs::read_to_string(prefix.join("bin/clusterctl")).expect("installed");
    assert!(installed.contains("from the target dir"), "{installed}");
    assert!(text.contains("clusterctl from the target dir"), "{text}");
}

/// Walkthrough finding: `clusterctl version | head -3` panicked ("failed printing to stdout: Broken
/// pipe") once `head` had closed the pipe. Output into a pipe closed before clusterctl writes ends
/// quietly (SIGPIPE, as other Unix tools), never with a panic.
#[test]
fn output_into_a_closed_pipe_does_not_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    for args in [&["version"][..], &["up", "--dry-run"][..]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_clusterctl"))
            .args(args)
            .current_dir(dir.path())
            .env("HOME", dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// Breaker finding W3: `profile print --output-dir DIR` with `DIR/harbor-ca.crt` a dangling link to a
/// path outside DIR wrote through the link (creating its target). It is refused as `render` refuses
/// it: exit 2, nothing written. U6: an `--output-dir` that is an existing regular file is named and
/// said not to be a directory (it was a bare "File exists (os error 17)").
#[test]
fn output_dirs_with_links_or_files_in_the_way_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::create_dir(d.join("pp")).expect("mkdir");
    let victim = d.join("victim/new.crt");
    std::os::unix::fs::symlink(&victim, d.join("pp/harbor-ca.crt")).expect("symlink");
    let (code, out, err) = run(
        d,
        &["profile", "print", "ha-containerd", "--output-dir", "pp"],
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("symbolic link") && err.contains("nothing was written"),
        "{err}"
    );
    assert!(!victim.exists() && !d.join("victim").exists(), "{err}");
    assert!(
        !d.join("pp/cluster.yaml").exists(),
        "nothing written: {out}"
    );
    std::fs::write(d.join("afile"), "mine").expect("write");
    for args in [
        &["profile", "print", "lab", "--output-dir", "afile"][..],
        &["render", "--profile", "lab", "--output-dir", "afile"][..],
    ] {
        let (code, out, err) = run(d, args);
        assert_ne!(code, 0, "{args:?}: {out}{err}");
        assert!(
            err.contains("afile") && err.contains("not a directory"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("os error 17"), "{err}");
    }
    assert_eq!(
        std::fs::read_to_string(d.join("afile")).expect("read"),
        "mine"
    );
}

/// Breaker findings W4: with `-o json|yaml` stdout is exactly one document. `up --dry-run --recreate`
/// said "--recreate: … would be destroyed first" on stdout before it (now on stderr); `get nodes -f
/// <empty, binary, missing or invalid file>` printed nothing (now the `invalid` document);
/// `validate --list-profiles` printed the text table (now a list).
#[test]
fn structured_output_is_one_document_in_the_corners_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(d.join("empty.yaml"), "").expect("write");
    std::fs::write(d.join("binary.yaml"), [0u8, 159, 146, 150, 255]).expect("write");
    std::fs::write(
        d.join("bad.yaml"),
        "apiVersion: clusterctl.io/v1alpha1\nkind: Nope\n",
    )
    .expect("write");
    for format in ["json", "yaml"] {
        let (code, out, err) = run(
            d,
            &[
                "up",
                "--dry-run",
                "--recreate",
                "--profile",
                "lab",
                "-o",
                format,
            ],
        );
        assert_eq!(code, 0, "{err}");
        let v = plan_document(format, &out, "lab");
        assert!(v.is_object(), "{v}");
        assert!(
            err.contains("--recreate: cluster lab would be destroyed first"),
            "{err}"
        );
        for file in ["empty.yaml", "binary.yaml", "missing.yaml", "bad.yaml"] {
            let (code, out, err) = run(d, &["get", "nodes", "-f", file, "-o", format]);
            assert_eq!(code, 2, "{file}: {out}{err}");
            let v = document(format, &out);
            assert_eq!(v["result"], "invalid", "{file}: {v}");
            assert!(
                v["diagnostics"].as_array().is_some_and(|a| !a.is_empty()),
                "{v}"
            );
        }
        let (code, out, err) = run(d, &["validate", "--list-profiles", "-o", format]);
        assert_eq!(code, 0, "{err}");
        let v = document(format, &out);
        let list = v.as_array().unwrap_or_else(|| panic!("a list: {v}"));
        assert!(
            list.iter()
                .any(|p| p["name"] == "lab" && p["description"].is_string()),
            "{v}"
        );
        assert_eq!(
            list.iter().filter(|p| p["default"] == true).count(),
            1,
            "{v}"
        );
    }
    // Text is unchanged: the recreate line on stdout, the table.
    let (code, out, err) = run(d, &["up", "--dry-run", "--recreate", "--profile", "lab"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("--recreate: cluster lab would be destroyed first"),
        "{out}"
    );
    let (code, out, _) = run(d, &["validate", "--list-profiles"]);
    assert_eq!(code, 0);
    assert!(out.lines().any(|l| l.starts_with("lab ")), "{out}");
}

/// Breaker finding U5: `--ignore-preflight ,` was refused as "unknown check(s) ``, ``" and
/// `--ready-timeout 0s` as "invalid digit found in string". An empty check id is named as such; a
/// timeout takes seconds or a unit (`600`, `600s`, `10m`), and a bad one says so.
#[test]
fn empty_check_ids_and_timeouts_with_units() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    for list in [",", "swap,,time-sync"] {
        let (code, out, err) = run(
            d,
            &[
                "up",
                "--dry-run",
                "--profile",
                "lab",
                "--ignore-preflight",
                list,
            ],
        );
        assert_eq!(code, 2, "{out}{err}");
        assert!(
            err.contains("empty check id") && !err.contains("``"),
            "{err}"
        );
    }
    for t in ["0s", "10m", "600"] {
        let (code, _, err) = run(
            d,
            &["up", "--dry-run", "--profile", "lab", "--ready-timeout", t],
        );
        assert_eq!(code, 0, "{t}: {err}");
    }
    let (code, _, err) = run(
        d,
        &[
            "up",
            "--dry-run",
            "--profile",
            "lab",
            "--ready-timeout",
            "1.5m",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("whole seconds") && !err.contains("invalid digit"),
        "{err}"
    );
}

/// Breaker finding C11: a converted file that does not validate had each error printed twice (the
/// report's text, then every item again).
#[test]
fn convert_prints_each_error_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(
        d.join("kind.yaml"),
        "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnetworking:\n  podSubnet: banana\n",
    )
    .expect("write");
    let (code, out, err) = run(d, &["convert", "-f", "kind.yaml"]);
    assert_eq!(code, 2, "{out}{err}");
    assert_eq!(err.matches("is not a CIDR").count(), 1, "{err}");
    assert!(err.contains("1 error"), "{err}");
}
