//! The OCI image-spec v1.1 and Docker schema 2 shapes this crate reads and writes: descriptors,
//! platforms, image manifests, image indexes (manifest lists) and the image layout files
//! (`oci-layout`, `index.json`). Unknown fields are kept (`extra`) so that re-serialising an index
//! after narrowing loses nothing but the dropped entries.

use crate::digest::Digest;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// OCI image manifest (image-spec "Image Manifest").
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI image index (image-spec "Image Index").
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// Docker image manifest, schema 2.
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Docker manifest list, schema 2.
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
/// The `Accept` header for manifest requests: every manifest type this crate understands.
pub const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";
/// Annotation naming an image in an OCI layout's `index.json` (image-spec "Pre-Defined Annotation Keys").
pub const ANNOTATION_REF_NAME: &str = "org.opencontainers.image.ref.name";
/// Annotation containerd's importer reads for the full image name.
pub const ANNOTATION_CONTAINERD_NAME: &str = "io.containerd.image.name";

/// True for an index or manifest list media type.
pub fn is_index(media_type: &str) -> bool {
    media_type == OCI_INDEX || media_type == DOCKER_LIST
}

/// True for a single-image manifest media type.
pub fn is_manifest(media_type: &str) -> bool {
    media_type == OCI_MANIFEST || media_type == DOCKER_MANIFEST
}

/// A platform (image-spec "Image Index", `platform`), e.g. `linux/amd64` or `linux/arm64/v8`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Platform {
    /// Operating system, e.g. `linux`.
    pub os: String,
    /// CPU architecture in GOARCH terms, e.g. `amd64`, `arm64`.
    pub architecture: String,
    /// CPU variant, e.g. `v8`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// Other fields (`os.version`, `os.features`, …), kept as given.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl Platform {
    /// Parses `os/arch[/variant]`; `None` when it has fewer than two parts.
    pub fn parse(s: &str) -> Option<Platform> {
        let mut it = s.split('/');
        let os = it.next().filter(|p| !p.is_empty())?.to_string();
        let architecture = it.next().filter(|p| !p.is_empty())?.to_string();
        let variant = it.next().map(str::to_string);
        Some(Platform {
            os,
            architecture,
            variant,
            extra: BTreeMap::new(),
        })
    }

    /// True when `self` (a wanted platform) accepts `other` (an index entry's): os and architecture
    /// equal, and the variant equal when the wanted one names a variant.
    pub fn accepts(&self, other: &Platform) -> bool {
        self.os == other.os
            && self.architecture == other.architecture
            && (self.variant.is_none() || self.variant == other.variant)
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

/// A content descriptor (image-spec "Descriptors").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Descriptor {
    /// Media type of the referenced content.
    #[serde(rename = "mediaType")]
    pub media_type: String,
    /// Digest of the referenced content.
    pub digest: Digest,
    /// Size in bytes.
    pub size: u64,
    /// Platform, for index entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    /// Annotations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Other fields (`urls`, `artifactType`, `data`), kept as given.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// An image manifest (OCI or Docker schema 2): only the fields needed to walk its blobs.
#[derive(Debug, Clone, Deserialize)]
pub struct ImageManifest {
    /// The image configuration blob.
    pub config: Descriptor,
    /// Layer blobs, base first.
    #[serde(default)]
    pub layers: Vec<Descriptor>,
}

/// An image index / manifest list. `extra` keeps every field but `manifests` as given.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ImageIndex {
    /// Always 2.
    #[serde(rename = "schemaVersion")]
    pub schema_version: u32,
    /// The index media type (absent in some OCI indexes).
    #[serde(rename = "mediaType", skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The referenced manifests.
    pub manifests: Vec<Descriptor>,
    /// Other fields (`annotations`, `subject`, `artifactType`).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The largest manifest or index read, in bytes (4 MiB: what distribution-spec v1.1 "Pushing
/// Manifests" says registries should at least accept, and what they commonly refuse above).
pub const MAX_MANIFEST: u64 = 4 << 20;

/// The media type of a manifest document: its `mediaType` field, or, when absent (allowed by the
/// OCI spec), guessed from its shape (`manifests` → index, else image manifest).
pub fn sniff_media_type(bytes: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    if let Some(m) = v.get("mediaType").and_then(Value::as_str) {
        return Some(m.to_string());
    }
    if v.get("manifests").is_some() {
        Some(OCI_INDEX.to_string())
    } else if v.get("config").is_some() {
        Some(OCI_MANIFEST.to_string())
    } else {
        None
    }
}

/// The `oci-layout` file's content (image-spec "OCI Layout").
pub const OCI_LAYOUT_FILE: &[u8] = br#"{"imageLayoutVersion":"1.0.0"}"#;
