//! The cluster-file fuzz target: structured mutations of valid cluster files (every profile, and a
//! generated ssh cluster with registry credentials) in the classes of issue 17 — columns past 65,535,
//! deep nesting of each kind, thousands of unknown or duplicate keys, many wrong values, control
//! characters and terminal escapes (raw and as YAML escapes), secrets of every YAML shape, anchors
//! and aliases, tags, byte-order marks, CRLF, multi-byte text — on top of byte-level noise.
//!
//! Every case is validated and its report rendered as the CLI renders it; the checks: no panic,
//! every span inside the source and every diagnostic with a help line, nothing unsafe for a terminal
//! in the output, a secret planted under a secret-bearing key never shown, and bounded CPU time.
//!
//! `cases_hold_the_invariants` runs a short proptest in this process. `cases_in_their_own_process`
//! writes generated cases to files and runs each through `validate -f` of the binary `FUZZ_BIN` (the
//! real `clusterctl`), or — unset, as in the suite — through this test binary itself in a child
//! process that validates and renders the report as the CLI does; it counts panics (exit 101), aborts
//! and other signals, secrets or escapes shown, and the slowest runs. The suite runs `FUZZ_CASES`
//! (default 200) of them; the measured 100,000 (docs/testing.md) are
//! `FUZZ_BIN=target/release/clusterctl FUZZ_CASES=100000 cargo test -p clusterctl-spec --test it -- fuzz::cases_in`.

use std::time::Duration;

use clusterctl_spec::{from_profile, profiles, validate, Diagnostics, Loaded};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// A generated ssh cluster with a mirror, credentials by variable name, a VIP and labelled nodes.
fn generated_base(nodes: usize) -> String {
    let mut s = String::from(
        "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: fuzz\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  controlPlane:\n    vip: {address: 10.0.0.100, interface: eth0}\n  registry:\n    mirror: harbor.example.com/library\n    usernameEnv: HARBOR_USER\n    passwordEnv: HARBOR_PASSWORD\n  nodes:\n    - {name: cp1, role: control-plane, address: 10.0.0.11/24}\n",
    );
    for i in 0..nodes {
        s.push_str(&format!(
            "    - name: w{i}\n      role: worker\n      address: 10.0.{}.{}\n      labels: {{zone: z{}}}\n",
            1 + i / 250,
            i % 250 + 1,
            i % 3
        ));
    }
    s
}

/// The texts mutations start from.
fn bases() -> Vec<String> {
    let mut out: Vec<String> = profiles()
        .iter()
        .filter_map(|(n, _)| from_profile(n).ok())
        .map(|l| l.source_text)
        .collect();
    out.push(generated_base(3));
    out.push(generated_base(40));
    out
}

/// One structured change to a cluster file.
#[derive(Debug, Clone)]
enum Mutation {
    /// Delete up to `n` bytes at `at`.
    Delete(usize, usize),
    /// Insert text at `at`.
    Insert(usize, String),
    /// Repeat line `line` `times` times (duplicate keys, from 2 to thousands).
    DuplicateLine(usize, usize),
    /// Swap two lines.
    SwapLines(usize, usize),
    /// Replace the value of line `line` (after `: `).
    ReplaceValue(usize, String),
    /// Insert `width` spaces at `at` (columns past 65,535).
    Spaces(usize, usize),
    /// Replace the value of line `line` by `width` characters.
    LongValue(usize, usize),
    /// Nest `depth` levels of `- `, `[`, `{a: ` or block mappings at `at`.
    Deep(usize, u8, usize),
    /// `n` unknown keys under `spec`.
    UnknownKeys(usize),
    /// `n` nodes with a wrong role (`role: 5`).
    BadRoles(usize),
    /// `n` more valid nodes.
    Nodes(usize),
    /// A control character or terminal escape sequence, raw, at `at`.
    Control(usize, String),
    /// A key under `spec` whose name and value carry terminal escapes as YAML escapes.
    YamlEscapes,
    /// A YAML tag at `at`.
    Tag(usize, &'static str),
    /// An anchor at one value and aliases to it elsewhere.
    Anchors(usize, usize),
    /// Line ends as CRLF.
    Crlf,
    /// A byte-order mark first.
    Bom,
    /// Multi-byte text at `at`.
    Unicode(usize, String),
}

/// The secret shapes planted (the marker `SECRET` is replaced by the case's secret).
const SECRET_SHAPES: &[&str] = &[
    "password: SECRET",
    "password: \"SECRET\"",
    "password: 'SECRET'",
    "password: {x: SECRET}",
    "password: [SECRET]",
    "password:\n  - SECRET",
    "password: |\n  SECRET\n  SECRET",
    "password: >-\n  SECRET",
    "password: {SECRET: 1}",
    "username: SECRET",
    "passwordEnv: SECRET",
    "usernameEnv: \"SECRET!\"",
    "token: SECRET",
];

/// A generated case: the mutations, then optionally a secret planted in a `registry` (or a source
/// registry) entry of the given shape.
#[derive(Debug, Clone)]
struct Case {
    base: usize,
    mutations: Vec<Mutation>,
    secret: Option<(usize, bool, u32)>,
}

fn noise() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("-".to_string()),
        Just(": ".to_string()),
        Just("\n  ".to_string()),
        Just("[".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just("\"".to_string()),
        Just("&a ".to_string()),
        Just("*a".to_string()),
        Just("? ".to_string()),
        Just("\t".to_string()),
        Just("#".to_string()),
        Just("---\n".to_string()),
        "[ -~]{0,12}",
        "\\PC{0,4}",
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let big = prop_oneof![
        Just(1usize),
        Just(100),
        Just(65_534),
        Just(65_535),
        Just(65_536),
        Just(70_000),
        Just(200_000)
    ];
    let depth = prop_oneof![
        Just(8usize),
        Just(31),
        Just(32),
        Just(33),
        Just(300),
        Just(20_000),
        Just(80_000)
    ];
    let many = prop_oneof![Just(2usize), Just(50), Just(500), Just(2_000)];
    let control = prop_oneof![
        (0u32..32).prop_filter_map("not a line break", |c| {
            (c != 10 && c != 9)
                .then(|| char::from_u32(c).map(String::from))
                .flatten()
        }),
        Just("\u{7f}".to_string()),
        Just("\u{9b}".to_string()),
        Just("\u{85}".to_string()),
        Just("\u{202e}".to_string()),
        Just("\u{1b}]0;pwned\u{7}".to_string()),
        Just("\u{1b}[2J\u{1b}[8m".to_string()),
        Just("\r".to_string()),
    ];
    prop_oneof![
        (any::<usize>(), 0usize..40).prop_map(|(a, n)| Mutation::Delete(a, n)),
        (any::<usize>(), noise()).prop_map(|(a, s)| Mutation::Insert(a, s)),
        (any::<usize>(), many.clone()).prop_map(|(a, n)| Mutation::DuplicateLine(a, n)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        (
            any::<usize>(),
            prop_oneof![
                Just("~".to_string()),
                Just("-1".to_string()),
                Just("5".to_string()),
                Just("99999999999999999999".to_string()),
                Just("[]".to_string()),
                Just("{}".to_string()),
                Just("true".to_string()),
                Just("!!binary aGk=".to_string()),
                "[a-z0-9./:-]{0,20}"
            ]
        )
            .prop_map(|(a, s)| Mutation::ReplaceValue(a, s)),
        (any::<usize>(), big.clone()).prop_map(|(a, n)| Mutation::Spaces(a, n)),
        (any::<usize>(), big).prop_map(|(a, n)| Mutation::LongValue(a, n)),
        (any::<usize>(), 0u8..4, depth).prop_map(|(a, k, d)| Mutation::Deep(a, k, d)),
        many.clone().prop_map(Mutation::UnknownKeys),
        many.clone().prop_map(Mutation::BadRoles),
        prop_oneof![Just(10usize), Just(1_000)].prop_map(Mutation::Nodes),
        (any::<usize>(), control).prop_map(|(a, c)| Mutation::Control(a, c)),
        Just(Mutation::YamlEscapes),
        (
            any::<usize>(),
            prop_oneof![
                Just("!!str "),
                Just("!!binary "),
                Just("!custom "),
                Just("!!map ")
            ]
        )
            .prop_map(|(a, t)| Mutation::Tag(a, t)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Anchors(a, b)),
        Just(Mutation::Crlf),
        Just(Mutation::Bom),
        (any::<usize>(), "[é中🙂ß]{1,6}").prop_map(|(a, s)| Mutation::Unicode(a, s)),
    ]
}

/// The strategy of cases: a base, 1 to 6 mutations, and a planted secret in a third of them.
fn case() -> impl Strategy<Value = Case> {
    (
        any::<usize>(),
        proptest::collection::vec(mutation(), 1..6),
        proptest::option::weighted(0.35, (0..SECRET_SHAPES.len(), any::<bool>(), any::<u32>())),
    )
        .prop_map(|(base, mutations, secret)| Case {
            base,
            mutations,
            secret,
        })
}

/// Case `i` of the run seeded `seed`: the same case whatever thread or run generates it, so a case
/// named in a report can be generated again.
fn case_at(seed: u64, i: usize) -> Case {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&(i as u64).to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    );
    case().new_tree(&mut runner).expect("case").current()
}

/// The class of a case for reports: its mutations (sizes kept, inserted text left out) and the
/// shape of its planted secret, e.g. `BadRoles(2000) + Nodes(1000) + secret 3`.
fn describe(c: &Case) -> String {
    let mut parts: Vec<String> = c
        .mutations
        .iter()
        .map(|m| match m {
            Mutation::Insert(..) => "Insert".to_string(),
            Mutation::Control(..) => "Control".to_string(),
            Mutation::Unicode(..) => "Unicode".to_string(),
            Mutation::ReplaceValue(..) => "ReplaceValue".to_string(),
            Mutation::Delete(_, n) => format!("Delete({n})"),
            Mutation::DuplicateLine(_, n) => format!("DuplicateLine({n})"),
            Mutation::SwapLines(..) => "SwapLines".to_string(),
            Mutation::Spaces(_, n) => format!("Spaces({n})"),
            Mutation::LongValue(_, n) => format!("LongValue({n})"),
            Mutation::Deep(_, k, d) => format!("Deep({k}, {d})"),
            Mutation::UnknownKeys(n) => format!("UnknownKeys({n})"),
            Mutation::BadRoles(n) => format!("BadRoles({n})"),
            Mutation::Nodes(n) => format!("Nodes({n})"),
            Mutation::YamlEscapes => "YamlEscapes".to_string(),
            Mutation::Tag(_, t) => format!("Tag({})", t.trim()),
            Mutation::Anchors(..) => "Anchors".to_string(),
            Mutation::Crlf => "Crlf".to_string(),
            Mutation::Bom => "Bom".to_string(),
        })
        .collect();
    if let Some((shape, ..)) = c.secret {
        parts.push(format!("secret {shape}"));
    }
    parts.join(" + ")
}

/// The `n` slowest of some runs, slowest first: (CPU time, what identifies the run).
struct Slowest<T> {
    n: usize,
    runs: Vec<(Duration, T)>,
}

impl<T> Slowest<T> {
    fn new(n: usize) -> Self {
        Slowest {
            n,
            runs: Vec::new(),
        }
    }

    /// True when a run of `cpu` would be kept (so that costly details are made only for those).
    fn would_keep(&self, cpu: Duration) -> bool {
        self.runs.len() < self.n || self.runs.last().is_some_and(|(t, _)| cpu > *t)
    }

    fn offer(&mut self, cpu: Duration, what: T) {
        if !self.would_keep(cpu) {
            return;
        }
        let at = self.runs.partition_point(|(t, _)| *t >= cpu);
        self.runs.insert(at, (cpu, what));
        self.runs.truncate(self.n);
    }
}

/// How many of the slowest cases a run keeps: `FUZZ_SLOWEST`, default 10.
fn slowest_kept() -> usize {
    std::env::var("FUZZ_SLOWEST")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
}

/// The `q` quantile (0..=1) of `times`, sorted in place.
fn quantile(times: &mut [Duration], q: f64) -> Duration {
    if times.is_empty() {
        return Duration::ZERO;
    }
    times.sort_unstable();
    let i = ((times.len() - 1) as f64 * q).round() as usize;
    times[i.min(times.len() - 1)]
}

/// A char boundary of `text` from any number.
fn boundary(text: &str, n: usize) -> usize {
    let mut i = if text.is_empty() { 0 } else { n % text.len() };
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Inserts `add` after the line `spec:` (or at the end when there is none).
fn under_spec(text: &str, add: &str) -> String {
    match text.find("\nspec:\n") {
        Some(i) => format!("{}{add}{}", &text[..i + 7], &text[i + 7..]),
        None => format!("{text}{add}"),
    }
}

/// Inserts `add` after the line `  nodes:` (or at the end when there is none).
fn under_nodes(text: &str, add: &str) -> String {
    match text.find("\n  nodes:\n") {
        Some(i) => format!("{}{add}{}", &text[..i + 10], &text[i + 10..]),
        None => format!("{text}{add}"),
    }
}

fn apply(text: &str, m: &Mutation) -> String {
    let lines = || text.split('\n').map(str::to_string).collect::<Vec<_>>();
    match m {
        Mutation::Delete(a, n) => {
            let s = boundary(text, *a);
            let mut e = (s + n).min(text.len());
            while !text.is_char_boundary(e) {
                e -= 1;
            }
            format!("{}{}", &text[..s], &text[e..])
        }
        Mutation::Insert(a, s) | Mutation::Control(a, s) | Mutation::Unicode(a, s) => {
            let i = boundary(text, *a);
            format!("{}{s}{}", &text[..i], &text[i..])
        }
        Mutation::Tag(a, t) => {
            let i = boundary(text, *a);
            format!("{}{t}{}", &text[..i], &text[i..])
        }
        Mutation::Spaces(a, n) => {
            let i = boundary(text, *a);
            format!("{}{}{}", &text[..i], " ".repeat(*n), &text[i..])
        }
        Mutation::DuplicateLine(a, n) => {
            let mut l = lines();
            let i = a % l.len();
            let line = l[i].clone();
            for _ in 0..*n {
                l.insert(i, line.clone());
            }
            l.join("\n")
        }
        Mutation::SwapLines(a, b) => {
            let mut l = lines();
            let (i, j) = (a % l.len(), b % l.len());
            l.swap(i, j);
            l.join("\n")
        }
        Mutation::ReplaceValue(a, v) => {
            let mut l = lines();
            let i = a % l.len();
            if let Some(p) = l[i].find(": ") {
                l[i] = format!("{}: {v}", &l[i][..p]);
            }
            l.join("\n")
        }
        Mutation::LongValue(a, n) => {
            let mut l = lines();
            let i = a % l.len();
            if let Some(p) = l[i].find(": ") {
                l[i] = format!("{}: {}", &l[i][..p], "x".repeat(*n));
            }
            l.join("\n")
        }
        Mutation::Deep(a, kind, d) => {
            let i = boundary(text, *a);
            let nest = match kind {
                0 => "- ".repeat(*d),
                1 => "[".repeat(*d),
                2 => "{a: ".repeat(*d),
                _ => (0..*d.min(&400))
                    .map(|k| format!("\n{}k{k}:", " ".repeat(k)))
                    .collect(),
            };
            format!("{}{nest}{}", &text[..i], &text[i..])
        }
        Mutation::UnknownKeys(n) => under_spec(
            text,
            &(0..*n)
                .map(|i| format!("  unknown{i}: {i}\n"))
                .collect::<String>(),
        ),
        Mutation::BadRoles(n) => under_nodes(
            text,
            &(0..*n)
                .map(|i| {
                    format!(
                        "    - name: bad{i}\n      role: 5\n      address: 10.9.{}.{}\n",
                        i / 250,
                        i % 250 + 1
                    )
                })
                .collect::<String>(),
        ),
        Mutation::Nodes(n) => under_nodes(
            text,
            &(0..*n)
                .map(|i| {
                    format!(
                        "    - name: more{i}\n      role: worker\n      address: 10.8.{}.{}\n",
                        i / 250,
                        i % 250 + 1
                    )
                })
                .collect::<String>(),
        ),
        Mutation::YamlEscapes => under_spec(
            text,
            "  \"\\e]0;pwned\\a\\e[2J\": \"\\x9b31m\\u202e\\e[8m\"\n",
        ),
        Mutation::Anchors(a, b) => {
            let mut l = lines();
            let (i, j) = (a % l.len(), b % l.len());
            if let Some(p) = l[i].find(": ") {
                l[i] = format!("{}: &fz {}", &l[i][..p], &l[i][p + 2..]);
            }
            if let Some(p) = l[j].find(": ") {
                l[j] = format!("{}: *fz", &l[j][..p]);
            }
            l.join("\n")
        }
        Mutation::Crlf => text.replace('\n', "\r\n"),
        Mutation::Bom => format!("\u{feff}{text}"),
    }
}

/// The secret a case plants: letters and digits only, unlikely anywhere else.
fn secret_of(seed: u32) -> String {
    format!("Qz{seed:08x}Sx9")
}

/// The text of `c` (mutated base, then the planted secret) and the secret planted, if any.
fn text_of(c: &Case, bases: &[String]) -> (String, Option<String>) {
    let mut text = bases[c.base % bases.len()].clone();
    for m in &c.mutations {
        text = apply(&text, m);
    }
    let Some((shape, source, seed)) = c.secret else {
        return (text, None);
    };
    let secret = secret_of(seed);
    let shape = SECRET_SHAPES[shape].replace("SECRET", &secret);
    let (head, indent) = if source {
        (
            "  airgap:\n    bundle: site.tar\n    sourceRegistries:\n      - registry: vendor.example.com\n",
            "        ",
        )
    } else {
        (
            "  registry:\n    mirror: harbor.example.com/library\n",
            "    ",
        )
    };
    let block: String = shape.lines().map(|l| format!("{indent}{l}\n")).collect();
    // Planted as its own section at the end, so no mutation changes what holds it.
    let sep = if text.ends_with('\n') { "" } else { "\n" };
    (format!("{text}{sep}{head}{block}"), Some(secret))
}

/// Everything a user can be shown of a report (as in `hostile::shown`).
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
    }
    miette::GraphicalReportHandler::new()
        .render_report(&mut out, d)
        .expect("renders");
    out
}

/// CPU time of this thread (see `hostile::cpu_time`).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("stat");
    let after = &stat[stat.rfind(')').expect(")") + 2..];
    let f: Vec<u64> = after.split(' ').map(|x| x.parse().unwrap_or(0)).collect();
    Duration::from_millis((f[11] + f[12]) * 10)
}

/// Validates `text` in this process and checks the invariants. Returns the CPU time taken.
fn check(text: &str, secret: Option<&str>) -> Duration {
    let start = cpu_time();
    let loaded = Loaded::from_text("fuzz.yaml", text);
    let (items, out) = match validate(&loaded) {
        Ok(v) => (v.warnings, String::new()),
        Err(d) => {
            let out = shown(&d);
            (d.items, out)
        }
    };
    let took = cpu_time().saturating_sub(start);
    for d in &items {
        if let Some(span) = d.span {
            assert!(
                span.offset() + span.len() <= text.len(),
                "span out of range: {d}"
            );
        }
        assert!(d.help.is_some(), "no help: {d}");
    }
    if let Some(c) = out
        .chars()
        .find(|c| clusterctl_spec::limits::is_unsafe_char(*c))
    {
        panic!("{c:?} shown:\n{out}");
    }
    if let Some(s) = secret {
        assert!(!out.contains(s), "the planted secret is shown:\n{out}");
    }
    took
}

/// Where failing and slowest cases are kept unless `FUZZ_KEEP` says otherwise: `fuzz-failures` in
/// the scratch directory cargo gives integration tests (`CARGO_TARGET_TMPDIR`, under the target
/// directory), never in the source tree.
fn default_keep() -> String {
    concat!(env!("CARGO_TARGET_TMPDIR"), "/fuzz-failures").to_string()
}

/// Counts the cases of [`cases_hold_the_invariants`] and their CPU time, keeps the
/// [`slowest_kept`] slowest (their class, and their text when it is within the size budget), and once
/// the last case has run prints the totals, the mean, the 99th percentile and the slowest, and writes
/// the slowest texts to `FUZZ_KEEP` (default [`default_keep`])`/slowest-in-process/` so that
/// each can be run again with `clusterctl validate -f` (the measured run of docs/testing.md).
fn measured(took: Duration, text: &str, class: String) {
    use std::sync::Mutex;
    struct Totals {
        times: Vec<Duration>,
        max_bytes: usize,
        slowest: Slowest<(String, Option<String>)>,
    }
    static TOTALS: Mutex<Option<Totals>> = Mutex::new(None);
    let mut guard = TOTALS.lock().unwrap_or_else(|e| e.into_inner());
    let t = guard.get_or_insert_with(|| Totals {
        times: Vec::new(),
        max_bytes: 0,
        slowest: Slowest::new(slowest_kept()),
    });
    t.times.push(took);
    t.max_bytes = t.max_bytes.max(text.len());
    if t.slowest.would_keep(took) {
        let within = text.len() as u64 <= clusterctl_spec::limits::CLUSTER_FILE.max_bytes;
        t.slowest
            .offer(took, (class, within.then(|| text.to_string())));
    }
    let n = t.times.len();
    if n != suite_cases() as usize {
        return;
    }
    let total: Duration = t.times.iter().sum();
    let keep =
        std::path::PathBuf::from(std::env::var("FUZZ_KEEP").unwrap_or_else(|_| default_keep()))
            .join("slowest-in-process");
    let _ = std::fs::create_dir_all(&keep);
    let mut lines = String::new();
    for (k, (cpu, (class, text))) in t.slowest.runs.iter().enumerate() {
        let kept = match text {
            Some(text) => {
                let f = keep.join(format!("slow-{k}.yaml"));
                let _ = std::fs::write(&f, text);
                f.display().to_string()
            }
            None => "over the size budget, not kept".to_string(),
        };
        lines.push_str(&format!("  {cpu:?}: {class}: {kept}\n"));
    }
    println!(
        "fuzz in process: {n} cases, CPU total {total:?}, mean {:?}, p99 {:?}, slowest {:?}; largest file {} bytes\nslowest:\n{lines}",
        total / n as u32,
        quantile(&mut t.times, 0.99),
        quantile(&mut t.times, 1.0),
        t.max_bytes,
    );
}

/// Cases of the in-suite run: 96, or `FUZZ_SUITE_CASES`.
fn suite_cases() -> u32 {
    std::env::var("FUZZ_SUITE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(96)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: suite_cases(), ..ProptestConfig::default() })]

    #[test]
    fn cases_hold_the_invariants(c in case()) {
        let bases = bases();
        let (text, secret) = text_of(&c, &bases);
        let took = check(&text, secret.as_deref());
        measured(took, &text, describe(&c));
        // Debug build, loaded machine: generous; the release run bounds it at 2 s wall.
        prop_assert!(took < Duration::from_secs(20), "{took:?}");
    }
}

/// `FUZZ_CASES` cases (default 200; 100,000 for the measured run) from case `FUZZ_FIRST` (default
/// 0) of seed `FUZZ_SEED` (default 17) through `FUZZ_BIN`'s `validate -f`
/// (text output) or, unset, through this binary as a child ([`child_validates`]), `FUZZ_JOBS`
/// (default 2) at a time; prints and writes to `FUZZ_REPORT` (if set) the exit codes seen, the
/// panics, aborts and other signals, a planted secret or a terminal escape shown, the mean, 99th
/// percentile and slowest CPU time (the process's own, from `wait4`) and the slowest wall time
/// (which a shared, loaded machine inflates); keeps each failing case in `FUZZ_KEEP` (default
/// [`default_keep`]), and the `FUZZ_SLOWEST` (default 10) slowest by CPU time, with their
/// class, in `FUZZ_KEEP/slowest-seed<seed>-from<first>/case-<index>.yaml`. Fails
/// on any exit but 0 and 2, any signal, anything shown that must not be, or a run over
/// `FUZZ_MAX_CPU_MS` of CPU (default 2,000 for `FUZZ_BIN`, 20,000 for this unoptimised child; one
/// over 60 s of wall time is killed and fails too).
#[test]
fn cases_in_their_own_process() {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    use std::time::Instant;

    if let Some(file) = std::env::var_os(CHILD_FILE) {
        child_validates(std::path::Path::new(&file));
    }
    let real_bin = std::env::var("FUZZ_BIN").ok();
    let (bin, child_args): (String, Vec<String>) = match &real_bin {
        Some(b) => (b.clone(), vec!["validate".into(), "-f".into()]),
        None => (
            std::env::current_exe()
                .expect("exe")
                .to_string_lossy()
                .into_owned(),
            vec![
                "--exact".into(),
                this_test("cases_in_their_own_process"),
                "--nocapture".into(),
                "--test-threads=1".into(),
            ],
        ),
    };
    let max_cpu = Duration::from_millis(
        std::env::var("FUZZ_MAX_CPU_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(if real_bin.is_some() { 2_000 } else { 20_000 }),
    );
    let cases: usize = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let first: usize = std::env::var("FUZZ_FIRST")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(17);
    let jobs: usize = std::env::var("FUZZ_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let keep =
        std::path::PathBuf::from(std::env::var("FUZZ_KEEP").unwrap_or_else(|_| default_keep()));
    let bases = bases();
    let work = tempfile::tempdir().expect("tempdir");
    let next = AtomicUsize::new(0);
    #[derive(Default)]
    struct Tally {
        exits: BTreeMap<String, usize>,
        failures: Vec<String>,
        slow: Vec<(Duration, usize)>,
        max: (Duration, usize),
        cpus: Vec<Duration>,
        slowest: Option<Slowest<(usize, String)>>,
        leaks: usize,
        total: Duration,
    }
    let tally = Mutex::new(Tally {
        slowest: Some(Slowest::new(slowest_kept())),
        ..Tally::default()
    });
    let started = Instant::now();
    std::thread::scope(|s| {
        for w in 0..jobs {
            let (bases, work, next, tally, keep, bin) = (&bases, &work, &next, &tally, &keep, &bin);
            let (real_bin, child_args) = (&real_bin, &child_args);
            s.spawn(move || {
                // Each case i comes from its own seed, whatever thread runs it.
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= cases {
                        return;
                    }
                    let i = first + i;
                    let c = case_at(seed, i);
                    let (text, secret) = text_of(&c, bases);
                    let file = work.path().join(format!("w{w}.yaml"));
                    std::fs::write(&file, &text).expect("write");
                    let t = Instant::now();
                    let mut cmd = std::process::Command::new(bin);
                    if real_bin.is_some() {
                        cmd.args(child_args).arg(&file);
                    } else {
                        cmd.args(child_args).env(CHILD_FILE, &file);
                    }
                    // Reaped below with wait4 (for its own CPU time), which clippy cannot see.
                    #[allow(clippy::zombie_processes)]
                    let mut child = cmd
                        .env("NO_COLOR", "1")
                        .stdin(std::process::Stdio::null())
                        .stdout(std::process::Stdio::piped())
                        .stderr(std::process::Stdio::piped())
                        .spawn()
                        .expect("spawn");
                    let read = |mut r: Box<dyn std::io::Read + Send>| {
                        std::thread::spawn(move || {
                            let mut buf = Vec::new();
                            let _ = r.read_to_end(&mut buf);
                            buf
                        })
                    };
                    let out = read(Box::new(child.stdout.take().expect("stdout")));
                    let err = read(Box::new(child.stderr.take().expect("stderr")));
                    // Reaped with wait4 for its own CPU time; a run over 60 s is killed.
                    let pid = child.id() as libc::pid_t;
                    let mut status = 0;
                    // SAFETY: a zeroed rusage filled by wait4.
                    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
                    loop {
                        // SAFETY: waiting for our own child.
                        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
                        if r == pid {
                            break;
                        }
                        assert!(r == 0, "wait4: {}", std::io::Error::last_os_error());
                        if t.elapsed() > Duration::from_secs(60) {
                            // SAFETY: signalling our own child.
                            unsafe { libc::kill(pid, libc::SIGKILL) };
                        }
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    let took = t.elapsed();
                    let tv = |t: libc::timeval| {
                        Duration::from_secs(t.tv_sec as u64)
                            + Duration::from_micros(t.tv_usec as u64)
                    };
                    let cpu = tv(ru.ru_utime) + tv(ru.ru_stime);
                    let (out, err) = (
                        out.join().unwrap_or_default(),
                        err.join().unwrap_or_default(),
                    );
                    let kind = if libc::WIFEXITED(status) {
                        format!("exit {}", libc::WEXITSTATUS(status))
                    } else if libc::WIFSIGNALED(status) {
                        format!("signal {}", libc::WTERMSIG(status))
                    } else {
                        "unknown".to_string()
                    };
                    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
                    let text_out =
                        String::from_utf8_lossy(&err).into_owned() + &String::from_utf8_lossy(&out);
                    let leaked = secret.as_deref().is_some_and(|s| text_out.contains(s))
                        || text_out
                            .chars()
                            .any(|c| c == '\u{1b}' || c == '\u{9b}' || c == '\u{7}');
                    let bad = !matches!(code, Some(0 | 2)) || leaked;
                    let slow = cpu > max_cpu;
                    let mut t = tally.lock().expect("tally");
                    *t.exits.entry(kind.clone()).or_default() += 1;
                    t.total += took;
                    t.cpus.push(cpu);
                    if took > t.max.0 {
                        t.max = (took, i);
                    }
                    if let Some(slowest) = t.slowest.as_mut() {
                        slowest.offer(cpu, (i, kind.clone()));
                    }
                    if slow {
                        t.slow.push((cpu, i));
                    }
                    if leaked {
                        t.leaks += 1;
                    }
                    if bad || slow {
                        let _ = std::fs::create_dir_all(keep);
                        let name = keep.join(format!("case-{i}.yaml"));
                        let _ = std::fs::write(&name, &text);
                        t.failures.push(format!(
                            "case {i} ({kind}, {cpu:?} CPU, {took:?} wall{}): {}",
                            if leaked {
                                ", shown a secret or an escape"
                            } else {
                                ""
                            },
                            name.display()
                        ));
                    }
                }
            });
        }
    });
    let mut t = tally.into_inner().expect("tally");
    let slowest = write_slowest(
        &keep.join(format!("slowest-seed{seed}-from{first}")),
        seed,
        &bases,
        t.slowest.take().map(|s| s.runs).unwrap_or_default(),
    );
    let total_cpu: Duration = t.cpus.iter().sum();
    let report = format!(
        "fuzz: {cases} cluster files through {bin} (seed {seed}, cases {first}..{}, {jobs} at a time) in {:?}\n\
         exit codes: {:?}\n\
         panics (exit 101): {}\n\
         aborts and other signals: {}\n\
         secrets or escapes shown: {}\n\
         CPU time: mean {:?}, p99 {:?}, slowest {:?}; over {max_cpu:?}: {}\n\
         wall time ({jobs} at a time on a shared machine): slowest {:?} (case {}), mean {:?}\n\
         slowest by CPU time (kept to run again with `validate -f`):\n{slowest}\
         failures kept: {}\n{}",
        first + cases,
        started.elapsed(),
        t.exits,
        t.exits.get("exit 101").copied().unwrap_or(0),
        t.exits
            .iter()
            .filter(|(k, _)| k.starts_with("signal") || *k == "exit 134")
            .map(|(_, n)| n)
            .sum::<usize>(),
        t.leaks,
        total_cpu / cases.max(1) as u32,
        quantile(&mut t.cpus, 0.99),
        quantile(&mut t.cpus, 1.0),
        t.slow.len(),
        t.max.0,
        t.max.1,
        t.total / cases.max(1) as u32,
        t.failures.len(),
        t.failures
            .iter()
            .take(50)
            .map(|f| format!("  {f}\n"))
            .collect::<String>()
    );
    println!("{report}");
    if let Ok(p) = std::env::var("FUZZ_REPORT") {
        std::fs::write(p, &report).expect("report");
    }
    assert!(t.failures.is_empty(), "{report}");
}

/// Generates the `runs` again (CPU time, case index, how it ended), writes each text within the
/// cluster file's size budget to `dir/case-<index>.yaml` (one over it is refused before it is read,
/// and can be generated again from the seed and index) and returns one line per run for the report:
/// time, case, size, exit, the case's class and where it was kept.
fn write_slowest(
    dir: &std::path::Path,
    seed: u64,
    bases: &[String],
    runs: Vec<(Duration, (usize, String))>,
) -> String {
    let _ = std::fs::create_dir_all(dir);
    let mut lines = String::new();
    for (cpu, (i, kind)) in runs {
        let c = case_at(seed, i);
        let (text, _) = text_of(&c, bases);
        let kept = if text.len() as u64 <= clusterctl_spec::limits::CLUSTER_FILE.max_bytes {
            let f = dir.join(format!("case-{i}.yaml"));
            match std::fs::write(&f, &text) {
                Ok(()) => f.display().to_string(),
                Err(e) => format!("not kept: {e}"),
            }
        } else {
            "over the size budget, not kept".to_string()
        };
        lines.push_str(&format!(
            "  {cpu:?}: case {i} ({} bytes, {kind}): {}: {kept}\n",
            text.len(),
            describe(&c)
        ));
    }
    lines
}

/// The variable naming the file a child run of [`cases_in_their_own_process`] validates.
const CHILD_FILE: &str = "CC_FUZZ_CHILD_FILE";

/// This module's test `name` as the test harness names it (module path without the crate).
fn this_test(name: &str) -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_string(),
    }
}

/// The child side: validates `file` as `clusterctl validate -f` does, writes the report as the CLI
/// renders it (miette's graphical handler, no colour) to stderr, and exits 0 when valid, 2 when not.
/// A panic ends the process with 101, a stack overflow with SIGABRT.
fn child_validates(file: &std::path::Path) -> ! {
    use std::io::Write;
    let result = clusterctl_spec::load(file).and_then(|l| validate(&l).map(|v| v.warnings));
    let (items, code) = match result {
        Ok(warnings) => (warnings, 0),
        Err(d) => (d.items, 2),
    };
    let handler =
        miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
            .with_context_lines(1);
    let mut out = String::new();
    for item in &items {
        out.push_str(&item.location());
        out.push_str(": ");
        if handler.render_report(&mut out, item).is_err() {
            out.push_str(&item.to_line());
            out.push('\n');
        }
    }
    let _ = std::io::stderr().write_all(out.as_bytes());
    std::process::exit(code);
}
