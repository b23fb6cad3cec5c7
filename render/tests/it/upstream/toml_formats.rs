//! TOML formats, subset transcribed with strict decoding: containerd's config (schema `version = 2` for
//! containerd 1.x — plugin `io.containerd.grpc.v1.cri`; `version = 3` for 2.x — plugins
//! `io.containerd.cri.v1.images` / `io.containerd.cri.v1.runtime`; containerd docs/cri/config.md),
//! containerd `hosts.toml` (docs/hosts.md), CRI-O's `crio.conf` drop-in (cri-o docs/crio.conf.5.md) and
//! containers-registries.conf v2 (containers/image docs/containers-registries.conf.5.md).

use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ContainerdV2 {
    pub version: i64,
    pub root: Option<String>,
    pub state: Option<String>,
    pub plugins: PluginsV2,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PluginsV2 {
    #[serde(rename = "io.containerd.grpc.v1.cri")]
    pub cri: CriV2,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CriV2 {
    pub sandbox_image: String,
    pub restrict_oom_score_adj: Option<bool>,
    pub enable_unprivileged_ports: Option<bool>,
    pub enable_unprivileged_icmp: Option<bool>,
    pub containerd: CriContainerd,
    pub registry: CriRegistry,
    pub cni: Option<CniDirsV2>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CriContainerd {
    pub snapshotter: Option<String>,
    pub default_runtime_name: Option<String>,
    pub runtimes: BTreeMap<String, Runtime>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Runtime {
    pub runtime_type: String,
    pub privileged_without_host_devices: Option<bool>,
    pub options: RuncOptions,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RuncOptions {
    #[serde(rename = "SystemdCgroup")]
    pub systemd_cgroup: bool,
    #[serde(rename = "BinaryName")]
    pub binary_name: Option<String>,
}

/// Only `config_path`: the legacy `mirrors`/`configs` tables are refused next to it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CriRegistry {
    pub config_path: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CniDirsV2 {
    pub bin_dir: Option<String>,
    pub conf_dir: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ContainerdV3 {
    pub version: i64,
    pub root: Option<String>,
    pub state: Option<String>,
    pub plugins: PluginsV3,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PluginsV3 {
    #[serde(rename = "io.containerd.cri.v1.images")]
    pub images: ImagesV3,
    #[serde(rename = "io.containerd.cri.v1.runtime")]
    pub runtime: RuntimeV3,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ImagesV3 {
    pub snapshotter: Option<String>,
    pub pinned_images: PinnedImages,
    pub registry: CriRegistry,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PinnedImages {
    pub sandbox: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RuntimeV3 {
    pub restrict_oom_score_adj: Option<bool>,
    pub enable_unprivileged_ports: Option<bool>,
    pub enable_unprivileged_icmp: Option<bool>,
    pub containerd: CriContainerdV3,
    pub cni: Option<CniDirsV3>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CriContainerdV3 {
    pub default_runtime_name: Option<String>,
    pub runtimes: BTreeMap<String, Runtime>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CniDirsV3 {
    pub bin_dirs: Option<Vec<String>>,
    pub conf_dir: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HostsToml {
    pub server: Option<String>,
    pub capabilities: Option<Vec<Capability>>,
    pub ca: Option<CaValue>,
    pub skip_verify: Option<bool>,
    pub override_path: Option<bool>,
    pub host: Option<BTreeMap<String, HostEntry>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HostEntry {
    pub capabilities: Option<Vec<Capability>>,
    pub ca: Option<CaValue>,
    pub client: Option<toml::Value>,
    pub skip_verify: Option<bool>,
    pub override_path: Option<bool>,
    pub header: Option<BTreeMap<String, toml::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum CaValue {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Capability {
    Pull,
    Resolve,
    Push,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CrioDropIn {
    pub crio: Crio,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Crio {
    pub runtime: Option<CrioRuntime>,
    pub image: Option<CrioImage>,
    pub network: Option<CrioNetwork>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CrioRuntime {
    pub cgroup_manager: Option<String>,
    pub conmon_cgroup: Option<String>,
    pub default_runtime: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CrioImage {
    pub pause_image: Option<String>,
    pub pause_image_auth_file: Option<String>,
    pub global_auth_file: Option<String>,
    pub signature_policy: Option<String>,
    pub pause_command: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CrioNetwork {
    pub network_dir: Option<String>,
    pub plugin_dirs: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RegistriesConf {
    #[serde(rename = "unqualified-search-registries")]
    pub unqualified_search_registries: Option<Vec<String>>,
    #[serde(rename = "short-name-mode")]
    pub short_name_mode: Option<String>,
    pub registry: Option<Vec<RegistryEntry>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RegistryEntry {
    pub prefix: Option<String>,
    pub location: String,
    pub insecure: Option<bool>,
    pub blocked: Option<bool>,
    #[serde(rename = "mirror-by-digest-only")]
    pub mirror_by_digest_only: Option<bool>,
    pub mirror: Option<Vec<MirrorEntry>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MirrorEntry {
    pub location: String,
    pub insecure: Option<bool>,
    #[serde(rename = "pull-from-mirror")]
    pub pull_from_mirror: Option<String>,
}
