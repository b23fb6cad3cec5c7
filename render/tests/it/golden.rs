//! Golden files: for every profile and fixture (at its own kubernetesVersion, assumed facts) the whole
//! rendering is compared byte for byte with tests/golden/<kind>-<name>.txt. Regenerate with
//! `CLUSTERCTL_UPDATE_GOLDEN=1 cargo test -p clusterctl-render --test golden` and review the diff.
//! Also checks determinism: two renders of one input are byte-identical.

use crate::common;

use clusterctl_render::{render, Facts, Rendered};
use std::path::Path;

fn dump(r: &Rendered) -> String {
    let mut s = String::new();
    for (node, f) in r.all() {
        s.push_str(&format!(
            "===== {} {} (mode {:o}, {:?}) =====\n",
            node.unwrap_or("<cluster>"),
            f.path,
            f.mode,
            f.purpose
        ));
        s.push_str(&f.as_text());
        if !f.content.ends_with(b"\n") {
            s.push_str("\n<no newline at end>\n");
        }
    }
    s
}

#[test]
fn renders_match_golden_files() {
    let update = std::env::var_os("CLUSTERCTL_UPDATE_GOLDEN").is_some();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut mismatches = Vec::new();
    let mut compared = 0;
    for (label, loaded) in common::inputs() {
        let c = common::valid(&label, &loaded);
        let r1 = render(&c, &Facts::assumed(&c)).expect("renders");
        let r2 = render(&c, &Facts::assumed(&c)).expect("renders");
        assert_eq!(r1, r2, "{label}: two renders differ");
        let text = dump(&r1);
        let file = dir.join(format!("{}.txt", label.replace(':', "-")));
        if update {
            std::fs::write(&file, &text).expect("write golden");
            continue;
        }
        match std::fs::read_to_string(&file) {
            Ok(want) if want == text => compared += 1,
            Ok(want) => {
                let line = want
                    .lines()
                    .zip(text.lines())
                    .position(|(a, b)| a != b)
                    .map(|i| i + 1)
                    .unwrap_or_else(|| want.lines().count().min(text.lines().count()) + 1);
                mismatches.push(format!(
                    "{label}: differs from {} at line {line}",
                    file.display()
                ));
            }
            Err(e) => mismatches.push(format!("{label}: no golden file {} ({e})", file.display())),
        }
    }
    assert!(
        mismatches.is_empty(),
        "golden mismatches (set CLUSTERCTL_UPDATE_GOLDEN=1 to regenerate, then review):\n{}",
        mismatches.join("\n")
    );
    if !update {
        assert!(compared >= 5, "compared only {compared} golden files");
    }
}
