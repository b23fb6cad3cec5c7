//! crictl's configuration file (`/etc/crictl.yaml`), as cri-tools v1.34 reads it
//! (kubernetes-sigs/cri-tools `pkg/common/config.go`: the keys of `ServerConfiguration` written to
//! YAML). Every key is optional; an unknown key is an error here, as a typo would silently be ignored
//! by crictl.

use serde::Deserialize;

/// The keys crictl reads from its configuration file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub(crate) struct CrictlConfig {
    /// The CRI runtime service socket, e.g. `unix:///run/containerd/containerd.sock`.
    #[serde(rename = "runtime-endpoint")]
    runtime_endpoint: Option<String>,
    /// The CRI image service socket.
    #[serde(rename = "image-endpoint")]
    image_endpoint: Option<String>,
    /// Connection timeout in seconds.
    timeout: Option<u32>,
    /// Debug output.
    debug: Option<bool>,
    /// Pull the image on `crictl create`.
    #[serde(rename = "pull-image-on-create")]
    pull_image_on_create: Option<bool>,
    /// Do not pull the image on `crictl run`.
    #[serde(rename = "disable-pull-on-run")]
    disable_pull_on_run: Option<bool>,
}
