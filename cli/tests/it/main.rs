//! The integration tests of `clusterctl`, in one test binary (one link, not one per file): one module
//! per area (each a former `tests/*.rs` file) and the support modules they share.

mod airgap_support;
mod cni_support;
mod real_support;

mod airgap_calico;
mod airgap_cilium;
mod airgap_cli;
mod airgap_cni;
mod airgap_cni_each;
mod airgap_flannel;
mod airgap_up;
mod airgap_up_crio;
mod airgap_up_mirror;
mod bare_hosts;
mod cli_conventions;
mod cni_chain;
mod cni_concurrency;
mod cni_containerd2;
mod cni_ctr;
mod cni_overlay;
mod cni_plan;
mod cni_plugin;
mod destroy_docker;
mod destroy_rules;
mod destroy_ssh;
mod image_load;
mod node_join;
mod node_remove;
mod packages_apt;
mod preflight_node;
mod real_cilium;
mod real_cluster;
mod real_docker;
mod real_flannel;
mod real_lifecycle;
mod real_upgrade;
mod recreate_ssh;
mod rollout_system;
mod status_api;
mod up_docker;
mod up_dry_run;
mod up_system;
mod upgrade_system;
mod validate_cli;
mod validate_overlap;
