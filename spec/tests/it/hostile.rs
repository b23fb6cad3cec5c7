//! The hostile-input findings of issue 17 about the cluster file, one test each (`f01_…` for
//! finding 1): the reproducers from the issue, run through `load`/`validate` and rendered as the CLI
//! renders them (miette's graphical handler, the one-line form, the JSON fields).

use std::time::Duration;

use clusterctl_spec::{load, validate, Diagnostic, Diagnostics, Loaded};

/// A valid ssh cluster with one control plane; `{spec}` is appended under `spec:`.
fn cluster(spec: &str) -> String {
    format!(
        "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: lab\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  nodes:\n    - {{name: cp, role: control-plane, address: 10.0.0.1}}\n{spec}"
    )
}

fn report(loaded: &Loaded) -> Diagnostics {
    match validate(loaded) {
        Ok(v) => panic!(
            "{} validated ({} warnings)",
            loaded.source_name,
            v.warnings.len()
        ),
        Err(d) => d,
    }
}

fn report_of(text: &str) -> Diagnostics {
    report(&Loaded::from_text("cluster.yaml", text))
}

/// Everything a user can be shown of a report: each diagnostic through miette's graphical handler (as
/// `validate` prints it), the whole report (as the other commands print it), the one-line form and
/// the fields of `-o json`.
fn shown(d: &Diagnostics) -> String {
    let handler =
        miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
            .with_context_lines(1);
    let mut out = String::new();
    for item in &d.items {
        handler.render_report(&mut out, item).expect("renders");
        out.push_str(&item.to_line());
        out.push('\n');
        for f in [&item.message, &item.path, &item.label] {
            out.push_str(f);
            out.push('\n');
        }
        out.push_str(item.help.as_deref().unwrap_or(""));
        out.push('\n');
    }
    miette::GraphicalReportHandler::new()
        .render_report(&mut out, d)
        .expect("renders");
    out.push_str(&d.to_string());
    out
}

fn find<'a>(d: &'a Diagnostics, code: &str) -> &'a Diagnostic {
    d.items
        .iter()
        .find(|i| i.code == code)
        .unwrap_or_else(|| panic!("no {code} in:\n{d}"))
}

/// CPU time this thread has used (utime + stime of /proc/thread-self/stat), so that a loaded
/// machine does not make a linear run look slow.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("stat");
    let after = &stat[stat.rfind(')').expect(")") + 2..];
    let f: Vec<u64> = after.split(' ').map(|x| x.parse().unwrap_or(0)).collect();
    // Fields 14 and 15 of stat(5); `after` starts at field 3.
    Duration::from_millis((f[11] + f[12]) * 10)
}

fn cpu_of(f: impl FnOnce()) -> Duration {
    let t = cpu_time();
    f();
    cpu_time().saturating_sub(t)
}

/// Runs test `name` of this binary again in a child process with `CC_HOSTILE_CHILD` set, and returns
/// the child's peak resident memory in KiB (it prints `VMHWM=<kB>` when done).
fn child_peak_kb(test: &str) -> u64 {
    // Test names are module paths without the crate's name.
    let name = match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{test}"),
        None => test.to_string(),
    };
    let out = std::process::Command::new(std::env::current_exe().expect("exe"))
        .args(["--exact", &name, "--nocapture", "--test-threads=1"])
        .env("CC_HOSTILE_CHILD", "1")
        .output()
        .expect("child runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child failed ({}): {text}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .find_map(|l| l.split("VMHWM=").nth(1))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak in {text}"))
}

fn in_child() -> bool {
    std::env::var_os("CC_HOSTILE_CHILD").is_some()
}

fn print_peak() {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .map(|v| v.trim().trim_end_matches("kB").trim().to_string())
        .expect("VmHWM");
    println!("VMHWM={kb}");
}

#[test]
fn f01_an_error_past_column_65535_is_reported_not_a_panic() {
    // The minimal reproducer: miette's graphical handler panicked formatting the underline.
    let text = format!(
        "{{apiVersion: clusterctl.io/v1alpha1, kind: Cluster, {}x: 1}}\n",
        " ".repeat(65536)
    );
    let d = report_of(&text);
    let out = shown(&d);
    let unknown = d
        .items
        .iter()
        .find(|i| i.message.contains("unknown field `x`"))
        .unwrap_or_else(|| panic!("{d}"));
    assert_eq!((unknown.line, unknown.column), (1, 65589));
    assert!(out.contains("cluster.yaml:1:65589"), "{out}");
    // Nor anywhere on a long line, nor in a long span.
    for col in [65_530, 65_536, 70_000, 200_000] {
        let text = cluster(&format!(
            "  networking: {{{}podSubnet: nope}}\n",
            " ".repeat(col)
        ));
        shown(&report_of(&text));
    }
    shown(&report_of(&cluster(&format!(
        "  networking: {{podSubnet: {}}}\n",
        "x".repeat(100_000)
    ))));
}

#[test]
fn f02_deep_nesting_is_refused_at_the_depth_limit_without_recursion_or_memory() {
    if in_child() {
        let d = report_of(&format!("{}x\n", "- ".repeat(20_000)));
        assert_eq!(find(&d, "spec::limit").line, 1);
        print_peak();
        return;
    }
    // 60 KB that overflowed the main thread's stack: refused on a thread with a 256 KiB stack.
    let t = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            for text in [
                format!("{}x\n", "- ".repeat(30_000)),
                format!("x: {}\n", "[".repeat(80_000)),
                format!("x: {}\n", "{a: ".repeat(30_000)),
            ] {
                let d = report_of(&text);
                let limit = find(&d, "spec::limit");
                assert!(
                    limit.message.contains("limit of 32 levels"),
                    "{}",
                    limit.message
                );
                shown(&d);
            }
        })
        .expect("thread");
    t.join().expect("no stack overflow");
    // 40 KB that took 1.28 GB.
    let peak =
        child_peak_kb("f02_deep_nesting_is_refused_at_the_depth_limit_without_recursion_or_memory");
    assert!(peak < 100 * 1024, "peak {peak} kB");
}

/// A valid cluster of `n` workers (and one control plane), each with an address and a label.
fn nodes(n: usize) -> String {
    let mut s = String::from(
        "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: lab\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  networking:\n    podSubnet: 10.0.0.0/9\n    serviceSubnet: 10.200.0.0/16\n  nodes:\n    - {name: cp, role: control-plane, address: 172.31.255.1}\n",
    );
    for i in 0..n {
        s.push_str(&format!(
            "    - name: w{i}\n      role: worker\n      address: 172.{}.{}.{}\n      labels: {{zone: z{}}}\n",
            16 + i / 62_500,
            (i / 250) % 250,
            i % 250 + 1,
            i % 3
        ));
    }
    s
}

/// (what, the file of size n, n, whether it is valid).
type Case<'a> = (&'a str, &'a dyn Fn(usize) -> String, usize, bool);

#[test]
fn f03_validation_time_grows_linearly_with_the_file() {
    // 16,000 valid nodes took 55 s (4,000: 3 s): every shape of the issue, at n and 4n.
    let unknown = |n: usize| {
        cluster(
            &(0..n)
                .map(|i| format!("  unknown{i}: 1\n"))
                .collect::<String>(),
        )
    };
    let role5 = |n: usize| {
        let mut s = cluster("");
        for i in 0..n {
            s.push_str(&format!(
                "    - name: n{i}\n      role: 5\n      address: 10.1.{}.{}\n",
                i / 250,
                i % 250 + 1
            ));
        }
        s
    };
    let dup = |n: usize| cluster(&"  provider: ssh\n".repeat(n));
    let brackets = |n: usize| format!("x: {}\n", "[".repeat(n));
    let cases: [Case<'_>; 5] = [
        ("valid nodes", &nodes, 4_000, true),
        ("unknown keys under spec", &unknown, 2_000, false),
        ("nodes with role: 5", &role5, 250, false),
        ("duplicate provider keys", &dup, 2_000, false),
        ("nested brackets", &brackets, 20_000, false),
    ];
    for (what, make, n, valid) in cases {
        let (small, big) = (make(n), make(4 * n));
        let run = |text: &str| {
            let r = validate(&Loaded::from_text("cluster.yaml", text));
            assert_eq!(
                r.is_ok(),
                valid,
                "{what}: {:?}",
                r.err().map(|d| d.to_string())
            );
            if let Err(d) = r {
                shown(&d);
            }
        };
        let t1 = cpu_of(|| run(&small));
        let t4 = cpu_of(|| run(&big));
        eprintln!("{what}: {n}: {t1:?}, {}: {t4:?}", 4 * n);
        // Linear is 4 times; quadratic 16. Ticks are 10 ms, hence the allowance.
        assert!(
            t4 <= t1 * 8 + Duration::from_millis(300),
            "{what}: {n} took {t1:?}, {} took {t4:?}",
            4 * n
        );
        assert!(t4 < Duration::from_secs(10), "{what}: {t4:?}");
    }
}

/// Writes `files` into a new directory and loads `cluster.yaml` from it.
fn load_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Loaded) {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("write");
    }
    let loaded = load(&dir.path().join("cluster.yaml")).expect("loads");
    (dir, loaded)
}

#[test]
fn f04_a_referenced_files_content_never_appears_in_a_report() {
    let audit = "  apiServer:\n    audit:\n      policy: other\n      logPath: /var/log/kubernetes/audit/audit.log\n";
    for (content, secrets) in [
        (
            "root:$6$Zsalt$hashedhashedhashed:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n",
            &["Zsalt", "hashedhashed", "daemon", "root:"][..],
        ),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n-----END OPENSSH PRIVATE KEY-----\n",
            &["b3BlbnNzaC1rZXkt", "OPENSSH"],
        ),
        (
            "AWS_ACCESS_KEY_ID=AKIAEXAMPLEKEYID\nAWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIsecretEXAMPLEKEY\n",
            &["AKIAEXAMPLE", "wJalrXUtnFEMI", "AWS_SECRET"],
        ),
        (
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  db_password: wJalrXUtnFEMIsecret\n",
            &["db_password", "wJalrXUtnFEMI"],
        ),
    ] {
        let (_dir, loaded) = load_with(&[("cluster.yaml", &cluster(audit)), ("other", content)]);
        let d = report(&loaded);
        let out = shown(&d);
        assert!(find(&d, "spec::audit-policy").message.contains("\"other\""), "{out}");
        for s in secrets {
            assert!(!out.contains(s), "{s:?} shown:\n{out}");
        }
    }
}

#[test]
fn f05_a_ca_file_holding_a_private_key_is_refused_naming_the_file() {
    let cert = clusterctl_spec::profiles::profile_file("harbor-ca.crt").expect("cert");
    let key = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n";
    let both = format!("{cert}{key}");
    for spec in [
        "  registry:\n    mirror: harbor.example.com/library\n    caFile: both.pem\n",
        "  apiServer:\n    oidc:\n      issuerURL: https://sso.example.com/realms/k8s\n      clientID: kube-apiserver\n      usernameClaim: sub\n      caFile: both.pem\n",
        "  airgap:\n    bundle: site.tar\n    sourceRegistries:\n      - registry: vendor.example.com\n        caFile: both.pem\n",
    ] {
        let (_dir, loaded) = load_with(&[("cluster.yaml", &cluster(spec)), ("both.pem", &both)]);
        let d = report(&loaded);
        let ca = find(&d, "spec::ca-file");
        assert!(
            ca.message.contains("\"both.pem\"") && ca.message.contains("private key"),
            "{}",
            ca.message
        );
        assert!(!shown(&d).contains("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"));
    }
    // The certificate alone is still accepted, and only its blocks are passed on.
    let (_dir, loaded) = load_with(&[
        (
            "cluster.yaml",
            &cluster("  registry:\n    mirror: harbor.example.com/library\n    caFile: ca.pem\n"),
        ),
        ("ca.pem", &format!("# the site's CA\n{cert}")),
    ]);
    let v = validate(&loaded).unwrap_or_else(|d| panic!("{d}"));
    let pem = v
        .cluster
        .mirror()
        .and_then(|m| m.ca_pem.clone())
        .expect("ca");
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----") && !pem.contains('#'));
}

#[test]
fn f07_terminal_escapes_in_the_file_never_reach_the_terminal() {
    let evil = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[8mhidden\u{1b}[0m\u{9b}31m\u{202e}";
    for text in [
        // Raw on the first line (the reproducer), on a later line, and in a value.
        format!("{evil}{}", cluster("")),
        format!("{}  {evil}: 1\n", cluster("")),
        cluster(&format!("  networking: {{podSubnet: \"{evil}\"}}\n")),
        // Written as YAML escapes: valid YAML whose decoded key and value carry them.
        cluster("  \"\\e]0;pwned\\a\\e[2J\": 1\n  networking: {podSubnet: \"\\e[2J\\x9b\"}\n"),
    ] {
        let d = report_of(&text);
        let out = shown(&d);
        for c in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'] {
            assert!(!out.contains(c), "{c:?} shown:\n{out:?}");
        }
    }
    // Names of files too.
    let dir = tempfile::tempdir().expect("tempdir");
    let name = dir.path().join("evil\u{1b}[2J.yaml");
    std::fs::write(&name, "kind: x\n").expect("write");
    let d = report(&load(&name).expect("loads"));
    assert!(!shown(&d).contains('\u{1b}'));
}

#[test]
fn f08_inline_secrets_are_hidden_whatever_their_yaml_shape() {
    const S: &str = "Sup3rS3cret-XYZ";
    let registry =
        |cred: &str| format!("  registry:\n    mirror: harbor.example.com/library\n{cred}");
    let source = |cred: &str| {
        format!("  airgap:\n    bundle: site.tar\n    sourceRegistries:\n      - registry: vendor.example.com\n{cred}")
    };
    let shapes = [
        format!("    password: {S}\n"),
        format!("    password: {{x: \"{S}\"}}\n"),
        format!("    password: [{S}]\n"),
        format!("    password:\n      - {S}\n"),
        format!("    password: |\n      {S}\n      and more\n"),
        format!("    password: >-\n      {S}\n"),
        format!("    password: \"{S}\"\n"),
        format!("    password: '{S}'\n"),
        format!("    password: {{{S}: 1}}\n"),
        format!("    username: {S}\n"),
        format!("    usernameEnv: HARBOR_USER\n    passwordEnv: {S}\n"),
        format!("    usernameEnv: HARBOR_USER\n    passwordEnv: \"{S}!\"\n"),
        "    password: 31415926535897\n".to_string(),
    ];
    let mut texts = Vec::new();
    for shape in &shapes {
        texts.push(cluster(&registry(shape)));
        texts.push(cluster(&source(
            &shape
                .replace("\n    ", "\n        ")
                .replacen("    ", "        ", 1),
        )));
    }
    // An alias reusing a value anchored elsewhere, and the anchor under the key.
    texts.push(cluster(&format!(
        "  images:\n    preload: [&pw {S}]\n{}",
        registry("    password: *pw\n")
    )));
    texts.push(cluster(&format!(
        "{}  images:\n    preload: [*pw]\n",
        registry(&format!("    password: &pw {S}\n"))
    )));
    for text in texts {
        let d = report_of(&text);
        let out = shown(&d);
        for secret in [S, "Sup3r", "3cret-X", "and more", "31415926535897"] {
            assert!(!out.contains(secret), "{secret} shown for\n{text}\n{out}");
        }
    }
}

#[test]
fn f10_control_characters_are_reported_at_their_line_and_column() {
    let base = nodes(3);
    let lines: Vec<&str> = base.lines().collect();
    let mut checked = 0;
    for (i, line) in lines.iter().enumerate() {
        for col in [0, line.len() / 2, line.len()] {
            if !line.is_char_boundary(col) {
                continue;
            }
            for c in ['\u{1}', '\u{1b}', '\u{7f}', '\u{84}'] {
                let mut text = lines[..i].join("\n");
                if i > 0 {
                    text.push('\n');
                }
                text.push_str(&line[..col]);
                text.push(c);
                text.push_str(&line[col..]);
                text.push('\n');
                text.push_str(&lines[i + 1..].join("\n"));
                let d = report_of(&text);
                let first = &d.items[0];
                assert_eq!(
                    (first.line, first.column),
                    (i + 1, line[..col].chars().count() + 1),
                    "{c:?} at line {}: {}",
                    i + 1,
                    first.message
                );
                assert!(
                    first.message.contains("control character"),
                    "{}",
                    first.message
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 100);
}

#[test]
fn f13_host_key_policy_insecure_is_refused() {
    for spec in [
        "  ssh:\n    hostKeyPolicy: insecure\n",
        "  ssh:\n    user: root\n",
    ] {
        let text = cluster(spec).replace(
            "    - {name: cp, role: control-plane, address: 10.0.0.1}\n",
            "    - {name: cp, role: control-plane, address: 10.0.0.1, ssh: {hostKeyPolicy: insecure}}\n",
        );
        let d = report_of(&text);
        let e = find(&d, "spec::host-key-policy");
        assert!(e.message.contains("insecure"), "{}", e.message);
        assert!(e.help.as_deref().unwrap_or("").contains("accept-new"));
    }
    let d = report_of(&cluster("  ssh:\n    hostKeyPolicy: insecure\n"));
    assert_eq!(find(&d, "spec::host-key-policy").line, 11);
    for ok in ["strict", "accept-new"] {
        let text = cluster(&format!("  ssh:\n    hostKeyPolicy: {ok}\n"));
        validate(&Loaded::from_text("cluster.yaml", text)).unwrap_or_else(|d| panic!("{d}"));
    }
}

#[test]
fn referenced_special_files_are_refused_without_blocking() {
    // The cluster file itself, and a CA file, naming a FIFO or a directory: refused at once.
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("fifo");
    let st = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(st.success());
    let e = load(&fifo).expect_err("a FIFO").to_string();
    assert!(e.contains("FIFO"), "{e}");
    let e = load(dir.path()).expect_err("a directory").to_string();
    assert!(e.contains("directory"), "{e}");
    std::fs::write(
        dir.path().join("cluster.yaml"),
        cluster("  registry:\n    mirror: harbor.example.com/library\n    caFile: fifo\n"),
    )
    .expect("write");
    let loaded = load(&dir.path().join("cluster.yaml")).expect("loads");
    let d = report(&loaded);
    assert!(find(&d, "spec::ca-file").message.contains("FIFO"));
    let zero =
        cluster("  registry:\n    mirror: harbor.example.com/library\n    caFile: /dev/zero\n");
    std::fs::write(dir.path().join("cluster.yaml"), zero).expect("write");
    let d = report(&load(&dir.path().join("cluster.yaml")).expect("loads"));
    assert!(find(&d, "spec::ca-file").message.contains("device"));
}
