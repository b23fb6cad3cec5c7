//! `clusterctl airgap …`: `images` lists every image the cluster pulls (from the same render plan
//! `up` uses), `bundle` pulls them with the packages and this binary into one verified tar, and
//! `import` verifies a bundle completely and then pushes it to the registry mirror. Progress and
//! summaries go to stderr; `images -o json|yaml` prints one document on stdout; `bundle --bundle-file FILE`
//! names the bundle (`-o FILE` is a deprecated alias that warns).

use clusterctl_airgap::bundle::BundleSummary;
use clusterctl_airgap::pull::PullStats;
use clusterctl_airgap::registry::ClientOptions;
use clusterctl_airgap::run::{
    bundle_cluster, check_matches, client_options, import_bundle_for_cluster,
    source_client_options, BundleOptions, ImportOptions,
};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::flags::{at_least_one, Format};
use clusterctl_spec::ValidCluster;

/// Subcommands of `clusterctl airgap`.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum Command {
    /// List every image the cluster will pull, fully qualified (`docker.io/library/app:v1`, as a
    /// bundle stores it); with the docker provider also the node image this machine's Docker engine
    /// runs the nodes from (`node-image`).
    Images {
        /// The cluster file (or `--profile`).
        #[command(flatten)]
        target: super::flags::Target,
        /// Output format: one pull reference per line (`text`), or `[{component, source, pull,
        /// controlPlaneOnly}]` (`json`, `yaml`).
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        output: Format,
    },
    /// Pull images, packages and this binary into one bundle (resumable; same inputs, same bytes).
    Bundle {
        /// The cluster file (or `--profile`).
        #[command(flatten)]
        target: super::flags::Target,
        /// The bundle file to write (default: `airgap.bundle` of the cluster file).
        #[arg(long = "bundle-file", value_name = "FILE")]
        output: Option<PathBuf>,
        /// Fetch images of registry FROM from registry TO instead (`FROM=TO`, repeatable), e.g. a
        /// pre-seeded local registry. The bundle still records the upstream references.
        #[arg(long = "source-registry-override", value_name = "FROM=TO")]
        overrides: Vec<String>,
        /// Blob cache directory (default `<bundle file>.cache`, kept so a re-run resumes).
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Parallel downloads.
        #[arg(long, default_value_t = 4, value_parser = at_least_one)]
        jobs: usize,
        /// Registries reached over plain HTTP (loopback always is); repeatable.
        #[arg(long = "plain-http", value_name = "HOST[:PORT]")]
        plain_http: Vec<String>,
        /// Do not carry the clusterctl binary.
        #[arg(long)]
        no_self: bool,
        /// Also carry a clusterctl built for another architecture the file's nodes have (`ARCH=PATH`,
        /// e.g. `arm64=dist/clusterctl-linux-arm64`; repeatable): `up` places it as the builtin CNI's
        /// agent on the nodes of that architecture (`uname -m`).
        #[arg(long = "agent", value_name = "ARCH=PATH", value_parser = agent_arg)]
        agents: Vec<(String, PathBuf)>,
    },
    /// Verify a bundle completely, then push its images to the registry mirror.
    Import {
        /// The bundle.
        bundle: PathBuf,
        /// The cluster file (or `--profile`).
        #[command(flatten)]
        target: super::flags::Target,
        /// Push under this prefix (`host[:port][/path]`) instead of the cluster file's
        /// `registry.mirror` (the default; a file without a mirror needs this flag).
        #[arg(long)]
        mirror: Option<String>,
        /// Import record (default `<bundle>.imported.json`).
        #[arg(long)]
        state: Option<PathBuf>,
        /// Parallel uploads.
        #[arg(long, default_value_t = 4, value_parser = at_least_one)]
        jobs: usize,
        /// Only verify; change nothing.
        #[arg(long)]
        verify_only: bool,
    },
}

/// The binaries `airgap bundle` carries besides images and packages.
struct Carry {
    /// `--no-self`: not this binary.
    no_self: bool,
    /// `--agent ARCH=PATH`: the agents for other architectures.
    agents: Vec<(String, PathBuf)>,
}

/// Parses `--agent ARCH=PATH`: the architecture as OCI names it (`aarch64` is taken as `arm64`), and
/// a regular file.
fn agent_arg(s: &str) -> Result<(String, PathBuf), String> {
    let (arch, path) = s
        .split_once('=')
        .filter(|(a, p)| !a.is_empty() && !p.is_empty())
        .ok_or_else(|| {
            format!("`{s}`: expected ARCH=PATH, e.g. arm64=dist/clusterctl-linux-arm64")
        })?;
    let path = PathBuf::from(path);
    if !path.is_file() {
        return Err(format!("{}: no such file", path.display()));
    }
    Ok((clusterctl_airgap::node::oci_arch(arch), path))
}

fn fail(e: clusterctl_airgap::AirgapError) -> miette::Report {
    miette::miette!("{e}")
}

/// Runs the command. Exit code 2 for an invalid cluster file (its diagnostics printed). Errors (exit
/// code 1): the first air-gap error, naming the image, blob or bundle entry (a refused bundle).
pub(crate) fn run(cmd: Command) -> miette::Result<ExitCode> {
    match cmd {
        Command::Images { target, output } => images(&target, output),
        Command::Bundle {
            target,
            output,
            overrides,
            cache,
            jobs,
            plain_http,
            no_self,
            agents,
        } => bundle(
            &target,
            output,
            &overrides,
            cache,
            jobs,
            plain_http,
            Carry { no_self, agents },
        ),
        Command::Import {
            bundle,
            target,
            mirror,
            state,
            jobs,
            verify_only,
        } => import(&bundle, &target, mirror, state, jobs, verify_only),
    }
}

/// `airgap images`: the list on stdout.
fn images(target: &super::flags::Target, output: Format) -> miette::Result<ExitCode> {
    let cluster = match target.load(output) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let list = clusterctl_airgap::plan::listed_images(&cluster);
    if !output.print(&list)? {
        list.iter().for_each(|i| println!("{}", i.pull));
    }
    Ok(ExitCode::SUCCESS)
}

/// `airgap bundle`: pulls and writes the bundle, then the summary on stderr.
fn bundle(
    target: &super::flags::Target,
    output: Option<PathBuf>,
    overrides: &[String],
    cache: Option<PathBuf>,
    jobs: usize,
    plain_http: Vec<String>,
    carry: Carry,
) -> miette::Result<ExitCode> {
    let cluster = match target.load(Format::Text) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let base_dir = target
        .path()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let out = bundle_file(&cluster, output, &base_dir)?;
    let registry_overrides = match clusterctl_airgap::plan::source_overrides(&cluster, overrides) {
        Ok(o) => o,
        Err(e) => {
            eprintln!(
                "airgap bundle: --source-registry-override {:?}: {e}",
                e.given()
            );
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        }
    };
    let mut client: ClientOptions = source_client_options(&cluster);
    client.plain_http = plain_http;
    let mut opts = BundleOptions {
        out: out.clone(),
        cache,
        client,
        base_dir,
        // The cache `up` fills too: a CNI file `up` fetched is not downloaded again.
        upstream_cache: clusterctl_phases::up::cni_install::default_cache(),
        ..Default::default()
    };
    opts.pull.jobs = jobs.max(1);
    opts.pull.registry_overrides = registry_overrides;
    opts.pull.progress = std::io::stderr().is_terminal();
    if !carry.no_self {
        opts.self_binary = std::env::current_exe().ok();
    }
    opts.agents = carry.agents;
    let (summary, stats) = bundle_cluster(&cluster, &opts).map_err(fail)?;
    print_bundle_summary(&out, &summary, &stats);
    Ok(ExitCode::SUCCESS)
}

/// Where the bundle goes: `--bundle-file`, else the file's `airgap.bundle` relative to the file's
/// directory `base_dir`. Errors: neither given.
fn bundle_file(
    cluster: &ValidCluster,
    output: Option<PathBuf>,
    base_dir: &Path,
) -> miette::Result<PathBuf> {
    output
        .or_else(|| {
            cluster
                .spec()
                .airgap
                .as_ref()
                .map(|a| base_dir.join(&a.bundle))
        })
        .ok_or_else(|| {
            miette::miette!(
                "no bundle file: give --bundle-file FILE or set airgap.bundle in the cluster file"
            )
        })
}

/// The summary line of a written bundle, on stderr.
fn print_bundle_summary(out: &Path, summary: &BundleSummary, stats: &PullStats) {
    eprintln!(
        "wrote {}: {} image(s), {} distinct blob(s) ({} bytes), {} package(s), {} bytes in all; layers and configs this run: {} fetched ({} bytes), {} from the cache",
        out.display(),
        summary.manifest.images.len(),
        summary.blobs,
        summary.blob_bytes,
        summary.manifest.packages.len(),
        summary.bytes,
        stats.blobs_fetched,
        stats.bytes_fetched,
        stats.blobs_cached
    );
}

/// `airgap import`: verifies the bundle, then (unless `verify_only`) pushes it to the mirror.
fn import(
    bundle: &Path,
    target: &super::flags::Target,
    mirror: Option<String>,
    state: Option<PathBuf>,
    jobs: usize,
    verify_only: bool,
) -> miette::Result<ExitCode> {
    let cluster = match target.load(Format::Text) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    if verify_only {
        let vb = clusterctl_airgap::bundle::verify_bundle(bundle).map_err(fail)?;
        check_matches(&vb, &cluster).map_err(fail)?;
        eprintln!(
            "{}: verified {} entries, {} bytes",
            bundle.display(),
            vb.entries.len(),
            vb.bytes_verified
        );
        return Ok(ExitCode::SUCCESS);
    }
    let opts = ImportOptions {
        client: client_options(&cluster),
        mirror_prefix: mirror,
        state,
        jobs: jobs.max(1),
        expect: Some((cluster.name().to_string(), cluster.version_info().tag())),
    };
    let (vb, r) = import_bundle_for_cluster(bundle, &cluster, &opts).map_err(fail)?;
    eprintln!(
        "{}: {} images pushed, {} already there; blobs: {} uploaded ({} bytes), {} mounted, {} present",
        vb.path.display(),
        r.images_pushed,
        r.images_skipped,
        r.blobs_uploaded,
        r.bytes_uploaded,
        r.blobs_mounted,
        r.blobs_present
    );
    Ok(ExitCode::SUCCESS)
}
