//! The embedded text templates (`templates/*.j2`, minijinja) for the non-API formats: containerd and
//! CRI-O TOML, registries.conf, sysctl and modules-load files, the CNI agent's systemd unit, the
//! unprivileged-container node files (node environment unit and script, `/dev/kmsg` tmpfiles entry). One
//! environment is built once per process; the `q` filter writes a quoted TOML basic string (JSON string
//! escaping is a subset of TOML's).

use crate::output::RenderError;
use minijinja::Environment;
use std::sync::{Arc, OnceLock};

const TEMPLATES: &[(&str, &str)] = &[
    (
        "containerd-config-v2.toml.j2",
        include_str!("../../templates/containerd-config-v2.toml.j2"),
    ),
    (
        "containerd-config-v3.toml.j2",
        include_str!("../../templates/containerd-config-v3.toml.j2"),
    ),
    (
        "containerd-hosts.toml.j2",
        include_str!("../../templates/containerd-hosts.toml.j2"),
    ),
    ("crio.conf.j2", include_str!("../../templates/crio.conf.j2")),
    (
        "registries.conf.j2",
        include_str!("../../templates/registries.conf.j2"),
    ),
    (
        "sysctl.conf.j2",
        include_str!("../../templates/sysctl.conf.j2"),
    ),
    (
        "modules-load.conf.j2",
        include_str!("../../templates/modules-load.conf.j2"),
    ),
    (
        "clusterctl-cni-agent.service.j2",
        include_str!("../../templates/clusterctl-cni-agent.service.j2"),
    ),
    (
        "node-environment.sh.j2",
        include_str!("../../templates/node-environment.sh.j2"),
    ),
    (
        "clusterctl-node-environment.service.j2",
        include_str!("../../templates/clusterctl-node-environment.service.j2"),
    ),
    (
        "kmsg-tmpfiles.conf.j2",
        include_str!("../../templates/kmsg-tmpfiles.conf.j2"),
    ),
];

fn quote(s: String) -> String {
    serde_json::to_string(&s).unwrap_or_else(|_| "\"\"".to_string())
}

fn env() -> Result<&'static Environment<'static>, RenderError> {
    type Loaded = Result<Environment<'static>, (&'static str, Arc<minijinja::Error>)>;
    static ENV: OnceLock<Loaded> = OnceLock::new();
    let r = ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.set_keep_trailing_newline(true);
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        env.add_filter("q", quote);
        for (name, src) in TEMPLATES {
            env.add_template(name, src)
                .map_err(|e| (*name, Arc::new(e)))?;
        }
        Ok(env)
    });
    r.as_ref().map_err(|(name, e)| RenderError::TemplateLoad {
        name,
        source: Arc::clone(e),
    })
}

/// Renders template `name` with `ctx` (any serde value, usually `minijinja::context!`).
pub(crate) fn render<S: serde::Serialize>(
    name: &'static str,
    ctx: S,
) -> Result<String, RenderError> {
    let env = env()?;
    let t = env
        .get_template(name)
        .map_err(|source| RenderError::Template { name, source })?;
    t.render(ctx)
        .map_err(|source| RenderError::Template { name, source })
}
