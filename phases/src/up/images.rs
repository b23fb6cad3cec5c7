//! `images`: the images of `images.preload` (built locally, like `kind load docker-image`) put into
//! every node's runtime when it does not have them (not with an air-gap bundle, which carries them): `docker save` on this machine, streamed to the node
//! with byte progress, then `ctr -n k8s.io images import` (containerd) or `skopeo copy
//! docker-archive:… containers-storage:…` (CRI-O). The reference must match exactly (seed 000: the tag
//! the Pod uses must equal the loaded one), so it is normalised as containerd stores it.

use super::UpData;
use crate::ctx::{Change, NodeCtx, PlanKind};
use crate::error::PhaseError;
use crate::util::sha256_hex;
use clusterctl_exec::shell::quote_word;
use clusterctl_spec::model::RuntimeKind;
use clusterctl_spec::ValidNode;

/// Digest material: the image references.
pub(crate) fn inputs(data: &UpData, _: &ValidNode) -> String {
    data.spec.preload_images.join("\n")
}

/// `reference` as containerd names it: `docker.io/library/` added to single names, `docker.io/` to
/// two-part names without a registry host, `:latest` when it has neither tag nor digest.
pub(crate) fn normalise(reference: &str) -> String {
    let first = reference.split('/').next().unwrap_or_default();
    let has_host = reference.contains('/')
        && (first.contains('.') || first.contains(':') || first == "localhost");
    let mut r = if has_host {
        reference.to_string()
    } else if reference.contains('/') {
        format!("docker.io/{reference}")
    } else {
        format!("docker.io/library/{reference}")
    };
    let last = r.rsplit('/').next().unwrap_or_default();
    if !last.contains(':') && !r.contains('@') {
        r.push_str(":latest");
    }
    r
}

/// The `images` phase. With an air-gap bundle it does nothing: the preload images travel in the
/// bundle like every other image (`airgap/images` loads them, or `airgap/mirror` pushes them where
/// the nodes pull from), and this machine may have no Docker image to save.
pub(crate) fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    if data.spec.airgap.is_some() {
        if !data.spec.preload_images.is_empty() {
            ctx.info(
                "preload images come from the air-gap bundle (airgap/images or airgap/mirror)",
            );
        }
        return Ok(());
    }
    for image in &data.spec.preload_images {
        let full = normalise(image);
        let present = match data.spec.runtime {
            RuntimeKind::Containerd => {
                format!(
                    "ctr -n k8s.io images ls -q | grep -Fqx {}",
                    quote_word(&full)
                )
            }
            RuntimeKind::Crio => format!("crictl inspecti {} >/dev/null 2>&1", quote_word(&full)),
        };
        if ctx.test(&present)? == Some(true) {
            continue;
        }
        let remote = format!(
            "/var/lib/clusterctl/images/{}.tar",
            &sha256_hex(full.as_bytes())[..16]
        );
        // The archive is saved on this machine and placed with `put_local_file`, which counts and
        // reports the write.
        let place = Change::new(
            PlanKind::Write,
            format!("write {remote} (image archive of {image})"),
        )
        .explained(format!("docker save {image} (on this machine)"))
        .reports_itself();
        ctx.change(place, |ctx| {
            let local = std::env::temp_dir().join(format!(
                "clusterctl-{}-{}.tar",
                std::process::id(),
                ctx.name()
            ));
            let st = std::process::Command::new("docker")
                .args(["save", "-o"])
                .arg(&local)
                .arg(image)
                .output()
                .map_err(|e| {
                    ctx.local_error_in(format_args!("running `docker save {image}`"), &e)
                })?;
            if !st.status.success() {
                let _ = std::fs::remove_file(&local);
                return Err(ctx.local_error(format!(
                    "`docker save {image}` failed: {}",
                    crate::util::tail(&st.stderr, 5)
                )));
            }
            let r = ctx.put_local_file(&local, &remote, 0o600);
            let _ = std::fs::remove_file(&local);
            r.map(|_| ())
        })?;
        let import = match data.spec.runtime {
            RuntimeKind::Containerd => {
                format!("ctr -n k8s.io images import {remote} && rm -f {remote}")
            }
            RuntimeKind::Crio => format!(
                "skopeo copy docker-archive:{remote} containers-storage:{} && rm -f {remote}",
                quote_word(&full)
            ),
        };
        ctx.run_script(&import)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::normalise;

    #[test]
    fn references_are_normalised_as_containerd_stores_them() {
        assert_eq!(normalise("cka-api:v4"), "docker.io/library/cka-api:v4");
        assert_eq!(normalise("nginx"), "docker.io/library/nginx:latest");
        assert_eq!(normalise("bitnami/redis:7"), "docker.io/bitnami/redis:7");
        assert_eq!(
            normalise("harbor.example.com/library/app:1"),
            "harbor.example.com/library/app:1"
        );
        assert_eq!(normalise("localhost:5000/app"), "localhost:5000/app:latest");
    }
}
