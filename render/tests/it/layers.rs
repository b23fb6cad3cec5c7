//! render's internal layering (docs/architecture.md, "Inside render"): every `crate::`/`super::` path
//! of `render/src` (tests left out) points to a lower layer — tables, then the image catalogue, then
//! `ctx`, then the renderers, then `lib.rs` — or, among tables or among renderers, along a graph
//! without cycles. Read from the sources, so a new import that closes a circle fails here.

use std::path::Path;

use clusterctl_testbed::shape::{cycles, import_edges, modules};

/// The layer of module `m` (`::`-joined path under the crate root; `""` is `lib.rs`).
fn layer(m: &str) -> u8 {
    match m {
        "output" | "facts" | "placeholders" | "yaml" | "templates" | "cni::versions"
        | "cni::install" => 1,
        "images" => 2,
        "ctx" => 3,
        "" => 5,
        _ => 4,
    }
}

#[test]
fn render_modules_import_only_downward() {
    let mods = modules(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(
        mods.contains_key("ctx") && mods.contains_key("cni::versions"),
        "{:?}",
        mods.keys()
    );
    let edges = import_edges(&mods);
    let mut wrong = Vec::new();
    for (m, ts) in &edges {
        for t in ts {
            let (lm, lt) = (layer(m), layer(t));
            if lt > lm || (lt == lm && !matches!(lm, 1 | 4)) {
                wrong.push(format!("{m} (layer {lm}) imports {t} (layer {lt})"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
    // No cycle (within a layer).
    let circles = cycles(&edges);
    assert!(circles.is_empty(), "import cycles: {circles:?}");
    // The circle this replaced: ctx read the source registries from runtime, which reads ctx.
    let ctx = edges.get("ctx").cloned().unwrap_or_default();
    assert!(
        ctx.contains("images") && !ctx.contains("runtime"),
        "{ctx:?}"
    );
}
