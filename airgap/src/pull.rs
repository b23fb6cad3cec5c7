//! Pulling images into the blob store: resolve each reference to its manifest or index, narrow an
//! index fetched by tag to the wanted platforms (an index pinned by digest is kept whole, since
//! narrowing would change its digest), then fetch every config and layer blob once, in parallel
//! with a bounded number of workers, with retries, skipping blobs already in the store (resume).

use crate::digest::Digest;
use crate::error::{AirgapError, Result};
use crate::oci::{
    is_index, is_manifest, Descriptor, ImageIndex, ImageManifest, Platform, OCI_INDEX,
};
use crate::reference::ImageRef;
use crate::registry::RegistryClient;
use crate::store::BlobStore;
use backon::{BlockingRetryable, ExponentialBuilder};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// One image to carry: where it comes from and the name it gets on the mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRequest {
    /// The upstream reference (as the cluster would pull it without a mirror).
    pub source: ImageRef,
    /// The reference on the site's mirror (equal to `source` when no mirror is configured).
    pub mirror: ImageRef,
}

/// How to pull.
#[derive(Debug, Clone)]
pub struct PullOptions {
    /// Platforms to keep when narrowing indexes fetched by tag (`airgap.platforms`); empty keeps all.
    pub platforms: Vec<Platform>,
    /// Parallel blob downloads (at least 1).
    pub jobs: usize,
    /// Attempts per request after the first, with exponential back-off.
    pub retries: usize,
    /// Registry host overrides `(from, to)`: images of `from` are fetched from `to` (their recorded
    /// source reference is unchanged). Used for pre-seeded local registries and tests.
    pub registry_overrides: Vec<(String, String)>,
    /// Draw an indicatif progress bar (bytes) on stderr.
    pub progress: bool,
}

impl Default for PullOptions {
    fn default() -> Self {
        PullOptions {
            platforms: Vec::new(),
            jobs: 4,
            retries: 3,
            registry_overrides: Vec::new(),
            progress: false,
        }
    }
}

/// An image now fully present in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PulledImage {
    /// Upstream reference.
    pub source: ImageRef,
    /// Mirror reference.
    pub mirror: ImageRef,
    /// Digest of the top-level manifest or index as carried in the bundle.
    pub digest: Digest,
    /// Digest the source registry served (differs from `digest` when the index was narrowed).
    pub source_digest: Digest,
    /// Media type of the top-level document.
    pub media_type: String,
    /// Size of the top-level document in bytes.
    pub size: u64,
    /// Platforms carried (empty for a single-platform manifest without platform information).
    pub platforms: Vec<String>,
    /// Every blob of the image, manifests included, sorted and unique.
    pub blobs: Vec<Digest>,
}

/// What a pull run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PullStats {
    /// Blobs downloaded in this run.
    pub blobs_fetched: usize,
    /// Blobs found already in the store (resume).
    pub blobs_cached: usize,
    /// Bytes downloaded in this run.
    pub bytes_fetched: u64,
}

fn retryable(e: &AirgapError) -> bool {
    match e {
        AirgapError::Transport { .. }
        | AirgapError::Request { .. }
        | AirgapError::DigestMismatch { .. } => true,
        AirgapError::Http { status, .. } => *status >= 500 || *status == 429,
        _ => false,
    }
}

fn backoff(retries: usize) -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(10))
        .with_max_times(retries)
}

struct Puller<'a> {
    client: &'a RegistryClient,
    store: &'a BlobStore,
    opts: &'a PullOptions,
}

impl Puller<'_> {
    fn fetch_from(&self, r: &ImageRef) -> ImageRef {
        match self
            .opts
            .registry_overrides
            .iter()
            .find(|(from, _)| *from == r.registry)
        {
            Some((_, to)) => r.with_registry(to),
            None => r.clone(),
        }
    }

    /// A manifest by digest from the store, else from the registry (then stored).
    fn manifest_by_digest(&self, from: &ImageRef, d: &Digest) -> Result<(Vec<u8>, String)> {
        if self.store.has(d, None) {
            if let Ok(b) = self.store.read(d) {
                let mt = crate::oci::sniff_media_type(&b).unwrap_or_default();
                return Ok((b, mt));
            }
        }
        let f = (|| {
            self.client
                .get_manifest(&from.registry, &from.repository, &d.to_string())
        })
        .retry(backoff(self.opts.retries))
        .when(retryable)
        .call()?;
        self.store.put(&f.bytes)?;
        Ok((f.bytes, f.media_type))
    }

    fn resolve(
        &self,
        req: &ImageRequest,
        want: &mut BTreeMap<Digest, (u64, ImageRef)>,
    ) -> Result<PulledImage> {
        let from = self.fetch_from(&req.source);
        let what = req.source.to_string();
        let (bytes, media_type) = match &req.source.digest {
            Some(d) => self.manifest_by_digest(&from, &Digest::parse(d)?)?,
            None => {
                let f = (|| {
                    self.client.get_manifest(
                        &from.registry,
                        &from.repository,
                        &from.manifest_reference(),
                    )
                })
                .retry(backoff(self.opts.retries))
                .when(retryable)
                .call()?;
                self.store.put(&f.bytes)?;
                (f.bytes, f.media_type)
            }
        };
        let source_digest = Digest::of(&bytes);
        let mut blobs = vec![source_digest.clone()];
        let mut platforms = Vec::new();
        let bad = |reason: String| AirgapError::Manifest {
            what: what.clone(),
            reason,
        };
        let json = |source| AirgapError::ManifestJson {
            what: what.clone(),
            source,
        };
        let (digest, top_bytes) = if is_index(&media_type) {
            let mut index: ImageIndex = serde_json::from_slice(&bytes).map_err(json)?;
            let pinned = req.source.digest.is_some();
            let keep = |d: &Descriptor| {
                pinned
                    || self.opts.platforms.is_empty()
                    || d.platform
                        .as_ref()
                        .is_some_and(|p| self.opts.platforms.iter().any(|w| w.accepts(p)))
            };
            let kept: Vec<Descriptor> = index
                .manifests
                .iter()
                .filter(|d| keep(d))
                .cloned()
                .collect();
            if kept.is_empty() {
                let wanted: Vec<String> =
                    self.opts.platforms.iter().map(|p| p.to_string()).collect();
                return Err(bad(format!(
                    "no manifest for platforms {}",
                    wanted.join(", ")
                )));
            }
            let top = if kept.len() == index.manifests.len() {
                bytes.clone()
            } else {
                index.manifests = kept.clone();
                if index.media_type.is_none() {
                    index.media_type = Some(OCI_INDEX.to_string());
                }
                serde_json::to_vec(&index).map_err(json)?
            };
            let top_digest = self.store.put(&top)?;
            blobs.push(top_digest.clone());
            for child in &kept {
                if let Some(p) = &child.platform {
                    platforms.push(p.to_string());
                }
                blobs.push(child.digest.clone());
                let (cb, cmt) = self.manifest_by_digest(&from, &child.digest)?;
                if !is_manifest(&cmt) && !is_manifest(&child.media_type) {
                    return Err(bad(format!(
                        "index entry {} is not an image manifest",
                        child.digest
                    )));
                }
                self.walk_manifest(&from, &cb, &what, want, &mut blobs)?;
            }
            (top_digest, top)
        } else if is_manifest(&media_type) {
            self.walk_manifest(&from, &bytes, &what, want, &mut blobs)?;
            (source_digest.clone(), bytes)
        } else {
            return Err(bad(format!("unsupported media type {media_type:?}")));
        };
        if digest != source_digest && !blobs.contains(&digest) {
            blobs.push(digest.clone());
        }
        if digest != source_digest {
            blobs.retain(|b| *b != source_digest);
        }
        blobs.sort();
        blobs.dedup();
        platforms.sort();
        platforms.dedup();
        Ok(PulledImage {
            source: req.source.clone(),
            mirror: req.mirror.clone(),
            digest,
            source_digest,
            media_type,
            size: top_bytes.len() as u64,
            platforms,
            blobs,
        })
    }

    fn walk_manifest(
        &self,
        from: &ImageRef,
        bytes: &[u8],
        what: &str,
        want: &mut BTreeMap<Digest, (u64, ImageRef)>,
        blobs: &mut Vec<Digest>,
    ) -> Result<()> {
        let m: ImageManifest =
            serde_json::from_slice(bytes).map_err(|source| AirgapError::ManifestJson {
                what: what.to_string(),
                source,
            })?;
        for d in std::iter::once(&m.config).chain(m.layers.iter()) {
            blobs.push(d.digest.clone());
            want.entry(d.digest.clone())
                .or_insert((d.size, from.clone()));
        }
        Ok(())
    }
}

/// Pulls every image of `requests` into `store`. Errors: the first image or blob that cannot be
/// fetched after retries; the other blobs are still fetched and stay in the store, so a re-run
/// fetches only what failed.
pub fn pull_images(
    client: &RegistryClient,
    store: &BlobStore,
    requests: &[ImageRequest],
    opts: &PullOptions,
) -> Result<(Vec<PulledImage>, PullStats)> {
    let p = Puller {
        client,
        store,
        opts,
    };
    let mut want = BTreeMap::new();
    let mut images = Vec::new();
    let mut failed = Vec::new();
    for r in requests {
        match p.resolve(r, &mut want) {
            Ok(i) => images.push(i),
            Err(e) => {
                let from = p.fetch_from(&r.source);
                let via = if from.registry == r.source.registry {
                    String::new()
                } else {
                    format!(" (from {} by --source-registry-override)", from.registry)
                };
                failed.push(format!("{}{via}: {e}", r.source));
            }
        }
    }
    if !failed.is_empty() {
        return Err(AirgapError::Images(failed));
    }
    let mut stats = PullStats::default();
    let mut jobs = Vec::new();
    for (d, (size, from)) in want {
        if store.has(&d, Some(size)) {
            stats.blobs_cached += 1;
        } else {
            jobs.push((d, size, from));
        }
    }
    // Sizes come from the registry: add without overflowing on absurd ones.
    let total = jobs.iter().fold(0u64, |t, j| t.saturating_add(j.1));
    let bar = if opts.progress {
        let b = indicatif::ProgressBar::new(total);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        ) {
            b.set_style(style);
        }
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let fetched = AtomicUsize::new(0);
    let bytes = AtomicU64::new(0);
    let workers = crate::import::workers(opts.jobs, jobs.len());
    let queue = Mutex::new(jobs);
    let first_err: Mutex<Option<AirgapError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let job = queue.lock().ok().and_then(|mut q| q.pop());
                let Some((d, size, from)) = job else { return };
                let dest = store.path(&d);
                let res = (|| {
                    client.get_blob_to_file(
                        &from.registry,
                        &from.repository,
                        &d,
                        Some(size),
                        &dest,
                        &|n| bar.inc(n),
                    )
                })
                .retry(backoff(opts.retries))
                .when(retryable)
                .call();
                match res {
                    Ok(n) => {
                        fetched.fetch_add(1, Ordering::Relaxed);
                        bytes.fetch_add(n, Ordering::Relaxed);
                    }
                    Err(e) => {
                        // Keep fetching the others: whatever is fetched stays in the
                        // store, so the next run has only the failed blobs left to fetch.
                        if let Ok(mut slot) = first_err.lock() {
                            slot.get_or_insert(e);
                        }
                    }
                }
            });
        }
    });
    bar.finish_and_clear();
    if let Some(e) = first_err.into_inner().ok().flatten() {
        return Err(e);
    }
    stats.blobs_fetched = fetched.into_inner();
    stats.bytes_fetched = bytes.into_inner();
    Ok((images, stats))
}
