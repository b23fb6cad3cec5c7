//! `clusterctl version [-o json|yaml]`: this binary's version, the Kubernetes versions it supports
//! (patch ranges per minor, with the etcd, CoreDNS and pause images kubeadm pairs with each) and the
//! components it pins (kube-vip, the docker provider's node image).

use std::process::ExitCode;

use super::flags::Format;

/// Arguments of `clusterctl version`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: Format,
}

/// One supported patch range.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Range {
    /// `v1.34.2`.
    first: String,
    /// `v1.34.10`.
    last: String,
    etcd: String,
    coredns: String,
    pause: String,
}

/// The whole document.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Version {
    clusterctl: String,
    kubernetes: Vec<Range>,
    kube_vip_image: String,
    kube_vip_cloud_provider_image: String,
    docker_node_image: String,
}

/// Prints the version document. Always exit 0.
pub(crate) fn run(args: Args) -> miette::Result<ExitCode> {
    let v = Version {
        clusterctl: env!("CARGO_PKG_VERSION").to_string(),
        kubernetes: clusterctl_spec::versions::SUPPORTED
            .iter()
            .map(|r| Range {
                first: format!("v1.{}.{}", r.minor, r.first_patch),
                last: format!("v1.{}.{}", r.minor, r.last_patch),
                etcd: format!("registry.k8s.io/etcd:{}", r.etcd),
                coredns: format!("registry.k8s.io/coredns/coredns:{}", r.coredns),
                pause: format!("registry.k8s.io/pause:{}", r.pause),
            })
            .collect(),
        kube_vip_image: clusterctl_spec::validate::DEFAULT_KUBE_VIP_IMAGE.to_string(),
        kube_vip_cloud_provider_image:
            clusterctl_spec::validate::DEFAULT_KUBE_VIP_CLOUD_PROVIDER_IMAGE.to_string(),
        docker_node_image: clusterctl_exec::DockerNodeOptions::kind("<kubernetesVersion>").image,
    };
    if args.output.print(&v)? {
        return Ok(ExitCode::SUCCESS);
    }
    println!("clusterctl {}", v.clusterctl);
    println!("\nsupported Kubernetes versions (kubernetesVersion) and the images kubeadm pairs with them:");
    println!(
        "  {:<19}  {:<10}  {:<8}  pause",
        "versions", "etcd", "coredns"
    );
    for r in clusterctl_spec::versions::SUPPORTED {
        let range = if r.first_patch == r.last_patch {
            format!("v1.{}.{}", r.minor, r.first_patch)
        } else {
            format!(
                "v1.{}.{} - v1.{}.{}",
                r.minor, r.first_patch, r.minor, r.last_patch
            )
        };
        println!(
            "  {range:<19}  {:<10}  {:<8}  {}",
            r.etcd, r.coredns, r.pause
        );
    }
    println!("\npinned components:");
    println!("  kube-vip             {}", v.kube_vip_image);
    println!(
        "  kube-vip-cloud-provider {} (with vip.loadBalancerPool)",
        v.kube_vip_cloud_provider_image
    );
    println!("  docker node image    {}", v.docker_node_image);
    Ok(ExitCode::SUCCESS)
}
