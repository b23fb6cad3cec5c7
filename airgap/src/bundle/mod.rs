//! The air-gap bundle: one deterministic tar holding `SHA256SUMS` (first), `manifest.json`, an OCI
//! image layout under `oci/` (each blob once), `packages/…`, `bin/…` and the CNI's
//! pinned upstream files under `upstream/`. `write` builds it from the
//! blob store, `verify` checks every byte of it before anything is imported.

pub(crate) mod manifest;
pub mod verify;
pub mod write;

pub use manifest::{BundleFile, BundleImage, BundleManifest, BUNDLE_FORMAT};
pub use verify::{verify_bundle, EntryLoc, VerifiedBundle};
pub use write::{write_bundle, BundleInput, BundleSummary, PreparedFile};

/// Entry holding the checksum list, in `sha256sum` format (`<hex>  <path>`), always first.
pub const SUMS_ENTRY: &str = "SHA256SUMS";
/// Entry holding the bundle manifest (JSON).
pub const MANIFEST_ENTRY: &str = "manifest.json";
/// Directory of the OCI image layout inside the bundle.
pub const OCI_DIR: &str = "oci";
/// Directory of the CNI's pinned upstream files inside the bundle (`upstream/<name>`).
pub const UPSTREAM_DIR: &str = "upstream";
