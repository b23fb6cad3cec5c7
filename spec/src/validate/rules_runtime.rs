//! Rules on the runtime, kubelet, SSH, docker and air-gap settings: CRI-O only on ssh hosts; kubelet
//! reservations and eviction thresholds are quantities, durations are Go durations and consistent;
//! Kubernetes ≥ 1.35 on cgroup v1 hosts needs `failCgroupV1: false` and kubeadm's `SystemVerification`
//! preflight check ignored (warnings say so); SSH defaults are
//! usable; docker settings are used with the docker provider; air-gap packages name a file or a URL with
//! its sha256, `extractTo` is an absolute, normalized directory on archives only, and a package's
//! `kubernetesVersion` is the file's version or an `extraVersions` entry.

use std::collections::BTreeSet;

use super::Ctx;
use crate::diag::Diagnostic;
use crate::image::ImageRef;
use crate::model::{
    Airgap, AirgapPackage, CgroupVersion, ClusterFile, DockerProvider, HostKeyPolicy, Kubelet,
    NodeEnvironment, Provider, RuntimeKind,
};
use crate::syntax;
use crate::versions::{self, VersionInfo};

pub(crate) fn check(ctx: &mut Ctx<'_>, file: &ClusterFile, version: Option<&VersionInfo>) {
    let spec = &file.spec;
    if spec.runtime.kind == RuntimeKind::Crio && spec.provider == Provider::Docker {
        ctx.push(
            Diagnostic::error("spec::runtime", "the docker provider's node image runs containerd, not CRI-O")
                .help("use `runtime: {kind: containerd}` with the docker provider, or ssh hosts for CRI-O")
                .at("spec.runtime.kind"),
        );
    }
    check_node_environment(ctx, file);
    check_kubelet(ctx, file, version);
    check_ssh(ctx, file);
    check_docker(ctx, file);
    check_airgap(ctx, file);
}

/// `nodeEnvironment: unprivileged-container` is rendered for containerd only; docker-provider nodes
/// run unprivileged (`runOptions.privileged: false`) need it.
fn check_node_environment(ctx: &mut Ctx<'_>, file: &ClusterFile) {
    let spec = &file.spec;
    let unprivileged = spec.node_environment == NodeEnvironment::UnprivilegedContainer;
    if unprivileged && spec.runtime.kind == RuntimeKind::Crio {
        ctx.push(
            Diagnostic::error(
                "spec::node-environment",
                "nodeEnvironment unprivileged-container is supported with containerd only",
            )
            .help("use `runtime: {kind: containerd}`, or run CRI-O nodes on hosts or privileged containers")
            .at("spec.nodeEnvironment"),
        );
    }
    if !unprivileged
        && spec.provider == Provider::Docker
        && spec.docker.run_options.privileged == Some(false)
    {
        ctx.push(
            Diagnostic::warning(
                "spec::node-environment",
                "unprivileged docker nodes need containerd, kube-proxy and kubelet settings that `nodeEnvironment: host` does not render",
            )
            .help("set `nodeEnvironment: unprivileged-container` (docs/spec.md says what it changes)")
            .at("spec.docker.runOptions.privileged"),
        );
    }
}

fn check_kubelet(ctx: &mut Ctx<'_>, file: &ClusterFile, version: Option<&VersionInfo>) {
    let k = &file.spec.kubelet;
    kubelet_paths_and_sizes(ctx, k);
    kubelet_reserved(ctx, k);
    kubelet_eviction(ctx, k);
    kubelet_durations(ctx, k);
    kubelet_cgroup_v1(ctx, file, version);
}

/// `resolvConf` is an absolute path; `maxPods` is 1–5000.
fn kubelet_paths_and_sizes(ctx: &mut Ctx<'_>, k: &Kubelet) {
    if let Some(p) = &k.resolv_conf {
        let ok = p.starts_with('/')
            && p.len() > 1
            && !p.chars().any(|c| c.is_whitespace() || c.is_control());
        if !ok {
            ctx.push(
                Diagnostic::error(
                    "spec::kubelet",
                    format!("resolvConf {p:?} is not an absolute path"),
                )
                .help("write the absolute path of a resolv.conf file on every node, e.g. `/etc/kubernetes/resolv.conf`")
                .at("spec.kubelet.resolvConf"),
            );
        }
    }
    if let Some(m) = k.max_pods {
        if m == 0 || m > 5000 {
            ctx.push(
                Diagnostic::error("spec::kubelet", format!("maxPods {m} is out of range"))
                    .help("use 1–5000 (kubelet's default is 110)")
                    .at("spec.kubelet.maxPods"),
            );
        }
    }
}

/// `systemReserved` and `kubeReserved`: reservable resources with quantities.
fn kubelet_reserved(ctx: &mut Ctx<'_>, k: &Kubelet) {
    for (field, map) in [
        ("systemReserved", &k.system_reserved),
        ("kubeReserved", &k.kube_reserved),
    ] {
        for (res, q) in map {
            let p = crate::position::join_key(&format!("spec.kubelet.{field}"), res);
            if !matches!(res.as_str(), "cpu" | "memory" | "ephemeral-storage" | "pid") {
                ctx.push(
                    Diagnostic::error(
                        "spec::kubelet",
                        format!("{field} resource {res:?} is not reservable"),
                    )
                    .help("reserve cpu, memory, ephemeral-storage or pid")
                    .at(format!("{p}#key")),
                );
            }
            if let Err(why) = syntax::quantity(q) {
                ctx.push(
                    Diagnostic::error(
                        "spec::quantity",
                        format!("{field}.{res} {q:?} is not a quantity: {why}"),
                    )
                    .help("write a Kubernetes quantity such as 500m (CPU) or 1Gi (memory)")
                    .at(p),
                );
            }
        }
    }
}

/// `evictionHard`: known signals, each a percentage or a quantity.
fn kubelet_eviction(ctx: &mut Ctx<'_>, k: &Kubelet) {
    for (signal, v) in &k.eviction_hard {
        let p = crate::position::join_key("spec.kubelet.evictionHard", signal);
        const SIGNALS: &[&str] = &[
            "memory.available",
            "nodefs.available",
            "nodefs.inodesFree",
            "imagefs.available",
            "imagefs.inodesFree",
            "containerfs.available",
            "containerfs.inodesFree",
            "pid.available",
        ];
        if !SIGNALS.contains(&signal.as_str()) {
            ctx.push(
                Diagnostic::error(
                    "spec::kubelet",
                    format!("evictionHard signal {signal:?} is not known"),
                )
                .help(format!("use one of {}", SIGNALS.join(", ")))
                .at(format!("{p}#key")),
            );
        }
        let pct_ok = v
            .strip_suffix('%')
            .is_some_and(|n| n.parse::<f64>().is_ok_and(|x| (0.0..=100.0).contains(&x)));
        if !pct_ok && syntax::quantity(v).is_err() {
            ctx.push(
                Diagnostic::error(
                    "spec::quantity",
                    format!("evictionHard {signal} {v:?} is neither a percentage nor a quantity"),
                )
                .help("write e.g. `10%` or `500Mi`")
                .at(p),
            );
        }
    }
}

/// The shutdown and image GC durations: Go durations, the critical-pod period within the whole one,
/// the image GC maximum above the minimum.
fn kubelet_durations(ctx: &mut Ctx<'_>, k: &Kubelet) {
    let mut durations = std::collections::BTreeMap::new();
    for (field, v) in [
        ("shutdownGracePeriod", &k.shutdown_grace_period),
        (
            "shutdownGracePeriodCriticalPods",
            &k.shutdown_grace_period_critical_pods,
        ),
        ("imageMinimumGCAge", &k.image_minimum_gc_age),
        ("imageMaximumGCAge", &k.image_maximum_gc_age),
    ] {
        if let Some(text) = v {
            match syntax::go_duration(text) {
                Ok(ns) => {
                    durations.insert(field, ns);
                }
                Err(why) => ctx.push(
                    Diagnostic::error(
                        "spec::duration",
                        format!("{field} {text:?} is not a duration: {why}"),
                    )
                    .help("write a Go duration such as 30s, 5m or 1h30m")
                    .at(format!("spec.kubelet.{field}")),
                ),
            }
        }
    }
    if let (Some(crit), Some(total)) = (
        durations.get("shutdownGracePeriodCriticalPods"),
        durations.get("shutdownGracePeriod"),
    ) {
        if crit > total {
            ctx.push(
                Diagnostic::error(
                    "spec::kubelet",
                    "shutdownGracePeriodCriticalPods is longer than shutdownGracePeriod",
                )
                .help(
                    "the critical-pod period is part of the whole period: make it shorter or equal",
                )
                .at("spec.kubelet.shutdownGracePeriodCriticalPods"),
            );
        }
    } else if durations.contains_key("shutdownGracePeriodCriticalPods") {
        ctx.push(
            Diagnostic::error("spec::kubelet", "shutdownGracePeriodCriticalPods needs shutdownGracePeriod")
                .help("set shutdownGracePeriod too (e.g. 30s), of which the critical-pod period is a part")
                .at("spec.kubelet.shutdownGracePeriodCriticalPods"),
        );
    }
    if let (Some(min), Some(max)) = (
        durations.get("imageMinimumGCAge"),
        durations.get("imageMaximumGCAge"),
    ) {
        if *max != 0 && max < min {
            ctx.push(
                Diagnostic::error(
                    "spec::kubelet",
                    "imageMaximumGCAge is shorter than imageMinimumGCAge",
                )
                .help("make imageMaximumGCAge longer than imageMinimumGCAge, or 0 to turn it off")
                .at("spec.kubelet.imageMaximumGCAge"),
            );
        }
    }
}

/// Kubernetes ≥ 1.35 on cgroup v1 hosts: `failCgroupV1: false` and kubeadm's SystemVerification
/// check ignored, as kubeadm documents (warnings).
fn kubelet_cgroup_v1(ctx: &mut Ctx<'_>, file: &ClusterFile, version: Option<&VersionInfo>) {
    let k = &file.spec.kubelet;
    // Kubernetes 1.35 kubelets refuse cgroup v1 hosts unless failCgroupV1 is false.
    if let Some(v) = version {
        if v.version.minor >= 35 && k.fail_cgroup_v1 != Some(false) {
            let target = match (spec_cgroup(file), file.spec.provider) {
                (Some(CgroupVersion::V1), _) => Some("runtime.hostCgroupVersion says the hosts use cgroup v1"),
                (None, Provider::Docker) => Some("docker-provider nodes inherit the host's cgroup version, and many Docker hosts still use cgroup v1"),
                _ => None,
            };
            if let Some(why) = target {
                let at = if k.fail_cgroup_v1.is_some() {
                    "spec.kubelet.failCgroupV1"
                } else {
                    "spec.kubernetesVersion"
                };
                ctx.push(
                    Diagnostic::warning("spec::cgroup-v1", format!("Kubernetes {} kubelets refuse to start on cgroup v1 hosts unless failCgroupV1 is false; {why}", v.tag()))
                        .help("set `kubelet: {failCgroupV1: false}` (or move the hosts to cgroup v2)")
                        .at(at),
                );
            }
        }
        // kubeadm ≥ 1.35's SystemVerification refuses cgroup v1 even then: kubeadm documents that
        // the check must also be skipped (system-validators' cgroup validator, KEP 5573).
        let skipped = file
            .spec
            .kubeadm
            .ignore_preflight_errors
            .iter()
            .any(|i| i.check == "SystemVerification");
        if v.version.minor >= 35 && k.fail_cgroup_v1 == Some(false) && !skipped {
            ctx.push(
                Diagnostic::warning(
                    "spec::cgroup-v1",
                    format!("kubeadm v{} refuses cgroup v1 hosts in its SystemVerification preflight check (kubeadm init, join and upgrade stop there) even with failCgroupV1 false", v.version),
                )
                .help("on cgroup v1 hosts add `kubeadm: {ignorePreflightErrors: [{check: SystemVerification, reason: \"cgroup v1 hosts, failCgroupV1 false\"}]}`, as kubeadm documents")
                .at("spec.kubelet.failCgroupV1"),
            );
        }
    }
}

fn spec_cgroup(file: &ClusterFile) -> Option<CgroupVersion> {
    file.spec.runtime.host_cgroup_version
}

fn check_ssh(ctx: &mut Ctx<'_>, file: &ClusterFile) {
    let s = &file.spec.ssh;
    if s.user.trim().is_empty() {
        ctx.push(
            Diagnostic::error("spec::ssh", "ssh user is empty")
                .help("give a login user, e.g. `root`")
                .at("spec.ssh.user"),
        );
    }
    if s.port == 0 {
        ctx.push(
            Diagnostic::error("spec::ssh", "ssh port 0 is not valid")
                .help("use 1–65535 (usually 22)")
                .at("spec.ssh.port"),
        );
    }
    if s.key_file.as_deref().is_some_and(|k| k.trim().is_empty()) {
        ctx.push(
            Diagnostic::error("spec::ssh", "ssh keyFile is empty")
                .help("give a key file path or remove the field")
                .at("spec.ssh.keyFile"),
        );
    }
    if s.host_key_policy == HostKeyPolicy::Insecure {
        ctx.push(insecure_host_keys("spec.ssh.hostKeyPolicy"));
    }
    if !(1..=20).contains(&s.connect_attempts) {
        ctx.push(
            Diagnostic::error(
                "spec::ssh",
                format!("ssh connectAttempts {} is out of range", s.connect_attempts),
            )
            .help("use 1–20 (1 = no retry; default 4)")
            .at("spec.ssh.connectAttempts"),
        );
    }
}

/// `hostKeyPolicy: insecure` is refused: clusterctl never connects to a host whose key differs from
/// the one recorded (that is what a man-in-the-middle looks like), and it never runs commands as root
/// on a host it has not identified. `accept-new` records unknown hosts and refuses changed keys.
pub(crate) fn insecure_host_keys(path: &str) -> Diagnostic {
    Diagnostic::error(
        "spec::host-key-policy",
        "hostKeyPolicy `insecure` is not supported: clusterctl always checks host keys and never connects to a host whose key differs from known_hosts",
    )
    .help("use `accept-new` (unknown hosts are recorded on first contact, changed keys refused) or `strict`; after re-installing a host, remove its old key with `ssh-keygen -R HOST`")
    .at(path)
}

fn check_docker(ctx: &mut Ctx<'_>, file: &ClusterFile) {
    let d = &file.spec.docker;
    if file.spec.provider == Provider::Ssh && *d != DockerProvider::default() {
        ctx.push(
            Diagnostic::warning(
                "spec::docker-ignored",
                "docker settings are ignored by the ssh provider",
            )
            .help("remove spec.docker, or use `provider: docker`")
            .at("spec.docker#key"),
        );
    }
    if let Some(img) = &d.node_image {
        if ImageRef::parse(img).is_err() {
            ctx.push(
                Diagnostic::error("spec::image", format!("{img:?} is not an image reference"))
                    .help("write e.g. `kindest/node:v1.34.0`")
                    .at("spec.docker.nodeImage"),
            );
        }
    }
    if let Some(net) = &d.network {
        if net.is_empty()
            || !net
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            ctx.push(
                Diagnostic::error(
                    "spec::docker",
                    format!("docker network name {net:?} is not valid"),
                )
                .help("use letters, digits, '-', '_' and '.', e.g. `kind`")
                .at("spec.docker.network"),
            );
        }
    }
    if let Some(m) = &d.run_options.memory {
        let ok = m
            .trim_end_matches(['b', 'k', 'm', 'g', 'B', 'K', 'M', 'G'])
            .parse::<u64>()
            .is_ok_and(|n| n > 0);
        if !ok {
            ctx.push(
                Diagnostic::error(
                    "spec::docker",
                    format!("memory {m:?} is not a docker memory size"),
                )
                .help("write e.g. `4g` or `512m`")
                .at("spec.docker.runOptions.memory"),
            );
        }
    }
    if let Some(c) = &d.run_options.cpus {
        if !c.parse::<f64>().is_ok_and(|n| n > 0.0) {
            ctx.push(
                Diagnostic::error(
                    "spec::docker",
                    format!("cpus {c:?} is not a positive number"),
                )
                .help("write e.g. `2` or `1.5`")
                .at("spec.docker.runOptions.cpus"),
            );
        }
    }
    if let Some(c) = &d.run_options.cgroupns {
        if c != "private" && c != "host" {
            ctx.push(
                Diagnostic::error(
                    "spec::docker",
                    format!("cgroupns {c:?} is not `private` or `host`"),
                )
                .help("write `private` (kind's default) or `host`")
                .at("spec.docker.runOptions.cgroupns"),
            );
        }
    }
    for (i, m) in d.run_options.extra_mounts.iter().enumerate() {
        for (field, v) in [
            ("hostPath", &m.host_path),
            ("containerPath", &m.container_path),
        ] {
            if !v.starts_with('/') {
                ctx.push(
                    Diagnostic::error(
                        "spec::docker",
                        format!("{field} {v:?} is not an absolute path"),
                    )
                    .help("mount paths must be absolute")
                    .at(format!("spec.docker.runOptions.extraMounts[{i}].{field}")),
                );
            }
        }
    }
}

fn check_airgap(ctx: &mut Ctx<'_>, file: &ClusterFile) {
    let Some(a) = &file.spec.airgap else { return };
    airgap_bundle_and_platforms(ctx, a);
    let mut seen = BTreeSet::new();
    for (i, pkg) in a.packages.iter().enumerate() {
        airgap_package(
            ctx,
            file,
            a,
            pkg,
            &format!("spec.airgap.packages[{i}]"),
            &mut seen,
        );
    }
}

/// The bundle path is set; the platforms are `linux/<arch>[/<variant>]`, at least one.
fn airgap_bundle_and_platforms(ctx: &mut Ctx<'_>, a: &Airgap) {
    if a.bundle.trim().is_empty() {
        ctx.push(
            Diagnostic::error("spec::airgap", "airgap bundle path is empty")
                .help("give a file name such as `site.tar`")
                .at("spec.airgap.bundle"),
        );
    }
    if a.platforms.is_empty() {
        ctx.push(
            Diagnostic::error("spec::airgap", "airgap platforms is empty")
                .help("list at least one platform, e.g. `linux/amd64`")
                .at("spec.airgap.platforms"),
        );
    }
    for (i, p) in a.platforms.iter().enumerate() {
        let parts: Vec<&str> = p.split('/').collect();
        let ok = (2..=3).contains(&parts.len())
            && parts[0] == "linux"
            && ARCHES.contains(&parts[1])
            && parts.iter().all(|s| !s.is_empty());
        if !ok {
            ctx.push(
                Diagnostic::error(
                    "spec::airgap-platform",
                    format!("platform {p:?} is not `linux/<arch>[/<variant>]`"),
                )
                .help(format!(
                    "use e.g. linux/amd64 or linux/arm64 (architectures: {})",
                    ARCHES.join(", ")
                ))
                .at(format!("spec.airgap.platforms[{i}]")),
            );
        }
    }
}

/// One of `airgap.packages` at path `p`: its name, OS family and architecture, its source, its
/// extraction directory and version, and not listed twice (`seen`: name, OS family, arch, version).
fn airgap_package(
    ctx: &mut Ctx<'_>,
    file: &ClusterFile,
    a: &Airgap,
    pkg: &AirgapPackage,
    p: &str,
    seen: &mut BTreeSet<(String, String, String, Option<String>)>,
) {
    package_kind(ctx, pkg, p);
    package_source(ctx, pkg, p);
    if let Some(dir) = &pkg.extract_to {
        check_extract_to(ctx, pkg, dir, &format!("{p}.extractTo"));
    }
    let version = match &pkg.kubernetes_version {
        Some(v) => check_package_version(ctx, file, a, v, &format!("{p}.kubernetesVersion")),
        None => None,
    };
    let key = (
        pkg.name.clone(),
        pkg.os_family.clone(),
        pkg.arch.clone(),
        version.as_ref().map(ToString::to_string),
    );
    // A package whose kubernetesVersion was refused above is not compared again.
    let refused = pkg.kubernetes_version.is_some() && version.is_none();
    if !refused && !seen.insert(key) {
        let of = version
            .as_ref()
            .map(|v| format!(" and Kubernetes {}", crate::versions::tag(v)))
            .unwrap_or_default();
        ctx.push(
            Diagnostic::error(
                "spec::airgap-package",
                format!(
                    "package {:?} for {}/{}{of} is listed twice",
                    pkg.name, pkg.os_family, pkg.arch
                ),
            )
            .help(
                "list each package once per OS family, architecture and Kubernetes version; \
                 packages of another version (an upgrade target) need `kubernetesVersion: vX.Y.Z`",
            )
            .at(format!("{p}.name")),
        );
    }
}

/// A package's name (plain), OS family and architecture.
fn package_kind(ctx: &mut Ctx<'_>, pkg: &AirgapPackage, p: &str) {
    if pkg.name.trim().is_empty() {
        ctx.push(
            Diagnostic::error("spec::airgap-package", "package name is empty")
                .help("give the package name, e.g. `kubeadm`")
                .at(format!("{p}.name")),
        );
    } else if !is_plain_package_name(&pkg.name) {
        ctx.push(
            Diagnostic::error(
                "spec::airgap-package",
                format!("package name {:?} is not a plain name", pkg.name),
            )
            .help(
                "use letters, digits and `._+-`, not starting with `.` or `-` (the name is a \
                 file name on the nodes: `any` binaries go to /usr/local/bin/<name>)",
            )
            .at(format!("{p}.name")),
        );
    }
    if !matches!(pkg.os_family.as_str(), "debian" | "rhel" | "any") {
        ctx.push(
            Diagnostic::error(
                "spec::airgap-package",
                format!("osFamily {:?} is not known", pkg.os_family),
            )
            .help("use `debian` (.deb), `rhel` (.rpm) or `any` (static binaries)")
            .at(format!("{p}.osFamily")),
        );
    }
    if !ARCHES.contains(&pkg.arch.as_str()) {
        ctx.push(
            Diagnostic::error(
                "spec::airgap-package",
                format!("arch {:?} is not known", pkg.arch),
            )
            .help(format!("use one of {}", ARCHES.join(", ")))
            .at(format!("{p}.arch")),
        );
    }
}

/// A package's source: a local `path` or a `url` with its `sha256` (64 lower-case hex digits).
fn package_source(ctx: &mut Ctx<'_>, pkg: &AirgapPackage, p: &str) {
    match (&pkg.path, &pkg.url) {
        (Some(_), Some(_)) => ctx.push(
            Diagnostic::error(
                "spec::airgap-package",
                "a package has both `path` and `url`",
            )
            .help("give either a local `path`, or a `url` with its `sha256`")
            .at(format!("{p}.url")),
        ),
        (None, None) => ctx.push(
            Diagnostic::error(
                "spec::airgap-package",
                format!("package {:?} has neither `path` nor `url`", pkg.name),
            )
            .help("give a local `path`, or a `url` with its `sha256`")
            .at(p),
        ),
        (Some(path), None) => {
            if path.trim().is_empty() {
                ctx.push(
                    Diagnostic::error("spec::airgap-package", "package path is empty")
                        .help("give the file's path, relative to the cluster file")
                        .at(format!("{p}.path")),
                );
            }
        }
        (None, Some(url)) => {
            if !(url.starts_with("https://") || url.starts_with("http://"))
                || url.contains(char::is_whitespace)
            {
                ctx.push(
                    Diagnostic::error(
                        "spec::airgap-package",
                        format!("url {url:?} is not an http(s) URL"),
                    )
                    .help("write e.g. `https://dl.k8s.io/release/v1.34.1/bin/linux/amd64/kubeadm`")
                    .at(format!("{p}.url")),
                );
            }
            if pkg.sha256.is_none() {
                ctx.push(
                    Diagnostic::error(
                        "spec::airgap-package",
                        format!("package {:?} is downloaded but has no sha256", pkg.name),
                    )
                    .help("add `sha256: <64 hex digits>` so the bundle can be verified")
                    .at(format!("{p}.url")),
                );
            }
        }
    }
    if let Some(h) = &pkg.sha256 {
        if h.len() != 64
            || !h
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        {
            ctx.push(
                Diagnostic::error(
                    "spec::airgap-package",
                    format!("sha256 {h:?} is not 64 lower-case hex digits"),
                )
                .help("paste the output of `sha256sum FILE`")
                .at(format!("{p}.sha256")),
            );
        }
    }
}

/// `packages[].kubernetesVersion`: an exact version equal to `spec.kubernetesVersion` or to one of
/// `airgap.extraVersions` (compared as versions, so `1.34.2` matches `v1.34.2`). Returns the parsed
/// version, or `None` (with a diagnostic) when it is not one of those.
fn check_package_version(
    ctx: &mut Ctx<'_>,
    file: &ClusterFile,
    a: &Airgap,
    text: &str,
    at: &str,
) -> Option<semver::Version> {
    let Some(v) = versions::parse_version(text.trim()) else {
        ctx.push(
            Diagnostic::error(
                "spec::airgap-package",
                format!("kubernetesVersion {text:?} is not an exact Kubernetes patch version"),
            )
            .help("write MAJOR.MINOR.PATCH such as `v1.34.2`")
            .at(at),
        );
        return None;
    };
    let known = std::iter::once(&file.spec.kubernetes_version)
        .chain(a.extra_versions.iter())
        .filter_map(|k| versions::parse_version(k.trim()))
        .any(|k| k == v);
    if !known {
        let mut listed: Vec<String> = Vec::new();
        for k in std::iter::once(&file.spec.kubernetes_version).chain(a.extra_versions.iter()) {
            if !listed.contains(k) {
                listed.push(k.clone());
            }
        }
        ctx.push(
            Diagnostic::error(
                "spec::airgap-package",
                format!(
                    "kubernetesVersion {text:?} is neither spec.kubernetesVersion nor an airgap.extraVersions entry"
                ),
            )
            .help(format!(
                "use one of {}, add {} to `airgap.extraVersions` (its images go into the bundle \
                 too), or remove the entry (e.g. the old version's packages after an upgrade)",
                listed.join(", "),
                crate::versions::tag(&v)
            ))
            .at(at),
        );
        return None;
    }
    Some(v)
}

/// A package name usable as a file name and a dpkg/rpm name: ASCII letters, digits and `._+-`, not
/// starting with `.` or `-` (so never `..`, a path or an option).
fn is_plain_package_name(name: &str) -> bool {
    !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'-'))
}

/// The file name a package is carried under: the last component of `path`, or of `url` without its
/// query and fragment.
fn package_file_name(pkg: &AirgapPackage) -> Option<&str> {
    match (&pkg.path, &pkg.url) {
        (Some(p), _) => p.rsplit('/').next(),
        (None, Some(u)) => u
            .split(['?', '#'])
            .next()
            .and_then(|u| u.rsplit('/').next()),
        (None, None) => None,
    }
}

/// File name endings `extractTo` accepts (archives GNU tar unpacks).
const ARCHIVE_ENDINGS: &[&str] = &[".tgz", ".tar.gz", ".tar"];

/// `extractTo`: only for archives, and an absolute, normalized directory (no `.`, `..` or empty
/// components, no control characters).
fn check_extract_to(ctx: &mut Ctx<'_>, pkg: &AirgapPackage, dir: &str, at: &str) {
    if let Some(name) = package_file_name(pkg) {
        if !ARCHIVE_ENDINGS.iter().any(|e| name.ends_with(e)) {
            ctx.push(
                Diagnostic::error(
                    "spec::airgap-package",
                    format!(
                        "extractTo is set, but {name:?} is not a .tgz, .tar.gz or .tar archive"
                    ),
                )
                .help("extractTo unpacks archives only; remove it for packages and plain binaries")
                .at(at),
            );
        }
    }
    let normalized = dir == "/"
        || (dir.starts_with('/')
            && dir[1..]
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != ".."));
    if !normalized || dir.chars().any(char::is_control) {
        ctx.push(
            Diagnostic::error(
                "spec::airgap-package",
                format!("extractTo {dir:?} is not an absolute, normalized directory"),
            )
            .help("write an absolute path without `.`, `..`, `//` or a trailing `/`, e.g. `/opt/cni/bin`")
            .at(at),
        );
    }
}

/// Architectures accepted for platforms and packages (OCI `architecture` names).
const ARCHES: &[&str] = &["amd64", "arm64", "arm", "ppc64le", "s390x", "riscv64"];
