//! The workspace's countable shape (issue 30 item 7 and the "Done when" of its checks): per crate, the
//! import cycles between its modules, the functions over 100 lines (over 60 in the CLI), the source
//! files over 600 lines, and the places that match on a provider variant. The report is printed every
//! run (`cargo test -p clusterctl-testbed --test it shape -- --nocapture`); the counts are held to the
//! budgets below, which may only go down: a change that adds a cycle, a long function, a long file or a
//! provider match fails here, and one that removes some lowers the budget in the same commit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clusterctl_testbed::shape::{self, Function};

/// The workspace's library and binary crates (folder, source directory).
const CRATES: &[&str] = &[
    "cli",
    "spec",
    "render",
    "exec",
    "phases",
    "airgap",
    "cni",
    "cni/embed",
    "kubeapi",
    "tests",
];

/// A function longer than this many lines is long (the CLI's limit is [`CLI_FN_LIMIT`]).
const FN_LIMIT: usize = 100;
/// The CLI only parses, calls one entry point and prints: its functions stay under this.
const CLI_FN_LIMIT: usize = 60;
/// A source file longer than this many lines is long.
const FILE_LIMIT: usize = 600;

/// The budgets, as measured when this check landed (issue 30 asks for zero of each but provider
/// matches with a reason): each may only go down.
struct Budget {
    cycles: usize,
    long_functions: usize,
    long_cli_functions: usize,
    long_files: usize,
    provider_matches: usize,
}

const BUDGET: Budget = Budget {
    cycles: 0,
    long_functions: 19,
    long_cli_functions: 0,
    long_files: 21,
    provider_matches: 41,
};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The counts of one crate.
#[derive(Default)]
struct Counts {
    cycles: Vec<Vec<String>>,
    long_functions: Vec<(String, Function)>,
    long_files: Vec<(String, usize)>,
    provider_matches: Vec<(String, usize)>,
}

fn measure(krate: &str) -> Counts {
    let src = root().join(krate).join("src");
    let mods = shape::modules(&src);
    let limit = if krate == "cli" {
        CLI_FN_LIMIT
    } else {
        FN_LIMIT
    };
    let mut c = Counts {
        cycles: shape::cycles(&shape::import_edges(&mods)),
        ..Counts::default()
    };
    for (m, text) in &mods {
        let n = text.lines().count();
        if n > FILE_LIMIT {
            c.long_files.push((m.clone(), n));
        }
        for f in shape::functions(&shape::code(text)) {
            if f.lines > limit {
                c.long_functions.push((m.clone(), f));
            }
        }
        let p = shape::provider_matches(text);
        if p > 0 {
            c.provider_matches.push((m.clone(), p));
        }
    }
    c
}

fn report(all: &BTreeMap<&str, Counts>) -> String {
    let mut out = String::from("crate       cycles  long fns  long files  provider matches\n");
    for (k, c) in all {
        out.push_str(&format!(
            "{k:<11} {:>6}  {:>8}  {:>10}  {:>16}\n",
            c.cycles.len(),
            c.long_functions.len(),
            c.long_files.len(),
            c.provider_matches.iter().map(|p| p.1).sum::<usize>()
        ));
    }
    for (k, c) in all {
        for cy in &c.cycles {
            out.push_str(&format!("cycle in {k}: {}\n", cy.join(" <-> ")));
        }
        for (m, f) in &c.long_functions {
            out.push_str(&format!(
                "long fn {k}::{m}::{} ({} lines, line {})\n",
                f.name, f.lines, f.line
            ));
        }
        for (m, n) in &c.long_files {
            out.push_str(&format!("long file {k}::{m} ({n} lines)\n"));
        }
        for (m, n) in &c.provider_matches {
            out.push_str(&format!("provider match {k}::{m} ({n})\n"));
        }
    }
    out
}

#[test]
fn the_workspace_keeps_within_its_shape_budgets() {
    let all: BTreeMap<&str, Counts> = CRATES.iter().map(|k| (*k, measure(k))).collect();
    let text = report(&all);
    println!("{text}");
    let sum = |f: &dyn Fn(&Counts) -> usize| all.values().map(f).sum::<usize>();
    let got = Budget {
        cycles: sum(&|c| c.cycles.len()),
        long_functions: sum(&|c| c.long_functions.len()) - all["cli"].long_functions.len(),
        long_cli_functions: all["cli"].long_functions.len(),
        long_files: sum(&|c| c.long_files.len()),
        provider_matches: sum(&|c| c.provider_matches.iter().map(|p| p.1).sum()),
    };
    let checks = [
        ("import cycles", got.cycles, BUDGET.cycles),
        (
            "functions over 100 lines (not cli)",
            got.long_functions,
            BUDGET.long_functions,
        ),
        (
            "cli functions over 60 lines",
            got.long_cli_functions,
            BUDGET.long_cli_functions,
        ),
        ("files over 600 lines", got.long_files, BUDGET.long_files),
        (
            "provider matches",
            got.provider_matches,
            BUDGET.provider_matches,
        ),
    ];
    let over: Vec<String> = checks
        .iter()
        .filter(|(_, n, b)| n > b)
        .map(|(what, n, b)| format!("{what}: {n}, budget {b}"))
        .collect();
    assert!(
        over.is_empty(),
        "over budget:\n{}\n\n{text}",
        over.join("\n")
    );
}
