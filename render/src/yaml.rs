//! YAML/JSON serialization helpers: one document per serde value, multi-document files joined with
//! `---`, and errors mapped to [`RenderError::Serialize`].

use crate::output::RenderError;
use serde::Serialize;

/// One YAML document (ends with a newline).
pub(crate) fn doc<T: Serialize>(what: &str, value: &T) -> Result<String, RenderError> {
    serde_yaml::to_string(value).map_err(|e| RenderError::Serialize {
        what: what.to_string(),
        source: e.into(),
    })
}

/// Several documents joined by `---` lines.
pub(crate) fn docs(parts: &[String]) -> String {
    let mut out = String::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(p);
    }
    out
}

/// Pretty JSON with a trailing newline.
pub(crate) fn json<T: Serialize>(what: &str, value: &T) -> Result<String, RenderError> {
    serde_json::to_string_pretty(value)
        .map(|mut s| {
            s.push('\n');
            s
        })
        .map_err(|e| RenderError::Serialize {
            what: what.to_string(),
            source: e.into(),
        })
}
