//! The Kubernetes API as the phases of `up` reach it: from the machine running clusterctl, through the
//! `kube` client (`clusterctl_kubeapi::KubeClusterApi`), with the admin kubeconfig that `kubeadm init`
//! wrote on the first control plane (`/etc/kubernetes/admin.conf`, read there read-only and kept in
//! memory only: it holds the cluster-admin credentials). The server is the one `admin.conf` names: the
//! `controlPlaneEndpoint` (the VIP with kube-vip), whose certificate the API server holds (certSANs),
//! and which the user's kubeconfig will use too. One client per run, built at first use by `labels`
//! or `wait-ready`.

use super::ADMIN_CONF;
use crate::access::kubeconfig::{via_local, LocalApi};
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use clusterctl_kubeapi::{ApiError, ClusterApi, KubeClusterApi};
use std::sync::{Arc, Mutex};

/// Makes a client from an admin kubeconfig's text (YAML). Errors: kubeapi's (never holding a
/// credential).
pub type ApiFactory = dyn Fn(&str) -> Result<Arc<dyn ClusterApi>, ApiError> + Send + Sync;

/// The run's Kubernetes API client, built once from the first control plane's `admin.conf`.
pub struct ApiAccess {
    make: Box<ApiFactory>,
    local: Option<LocalApi>,
    cached: Mutex<Option<Arc<dyn ClusterApi>>>,
}

impl std::fmt::Debug for ApiAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiAccess").finish_non_exhaustive()
    }
}

impl Default for ApiAccess {
    fn default() -> Self {
        Self::kube()
    }
}

impl ApiAccess {
    /// Clients through the `kube` crate ([`KubeClusterApi::from_kubeconfig_text`]), to the server
    /// `admin.conf` names.
    pub fn kube() -> Self {
        Self::kube_via(None)
    }

    /// Clients through the `kube` crate reaching the API server through `local` when given.
    pub fn kube_via(local: Option<LocalApi>) -> Self {
        let mut a = Self::with(Box::new(|text: &str| {
            KubeClusterApi::from_kubeconfig_text(text, "admin.conf of the first control plane")
                .map(|a| Arc::new(a) as Arc<dyn ClusterApi>)
        }));
        a.local = local;
        a
    }

    /// How this machine reaches the API server, when not through the endpoint.
    pub fn local(&self) -> Option<&LocalApi> {
        self.local.as_ref()
    }

    /// Clients made by `make` (tests use an in-memory [`ClusterApi`]).
    pub fn with(make: Box<ApiFactory>) -> Self {
        ApiAccess {
            make,
            local: None,
            cached: Mutex::new(None),
        }
    }

    /// The client, built at first use from `admin.conf` read through `ctx` (which must be the first
    /// control plane's). `Ok(None)` when the nodes are not queried (offline dry run). Errors:
    /// `admin.conf` missing or unreadable, or no client could be made from it.
    pub fn get(&self, ctx: &mut NodeCtx) -> Result<Option<Arc<dyn ClusterApi>>, PhaseError> {
        if let Some(api) = self.cached.lock().ok().and_then(|c| c.clone()) {
            return Ok(Some(api));
        }
        if !ctx.can_query() {
            return Ok(None);
        }
        let text = match ctx.read_file(ADMIN_CONF)? {
            None => return Ok(None),
            // A probing dry run before `init`: nothing to ask yet.
            Some(None) if ctx.mode.dry_run => return Ok(None),
            Some(None) => {
                return Err(ctx.local_error(format!(
                    "{ADMIN_CONF} does not exist on the first control plane (did `init` run?)"
                )))
            }
            Some(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
        };
        let text = match &self.local {
            Some(l) => via_local(&text, l).map_err(|e| ctx.local_error_from(&e))?,
            None => text,
        };
        let api = (self.make)(&text).map_err(|e| ctx.local_error_from(&e))?;
        if let Ok(mut c) = self.cached.lock() {
            *c = Some(api.clone());
        }
        Ok(Some(api))
    }
}

/// An API error as the phase's error (the call and the server's answer, never a credential).
pub fn api_error(ctx: &NodeCtx, e: ApiError) -> PhaseError {
    ctx.local_error_in("Kubernetes API", &e)
}
