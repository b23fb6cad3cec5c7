//! The load balancer container in front of the control planes' API servers (kind's
//! `<cluster>-external-load-balancer`, kind `pkg/cluster/internal/loadbalancer` and its `loadbalancer`
//! create action): an HAProxy container on the cluster network, its listen port published on
//! 127.0.0.1, labelled [`LOAD_BALANCER_LABEL`] (not the node label: it is never taken for a node).
//! Its configuration ([`haproxy_config`]) lists the backends by container name, resolved by Docker's
//! DNS, each checked with an HTTPS GET of a health path. [`DockerProvider::ensure_load_balancer`]
//! creates it with its configuration before starting it; [`DockerProvider::configure_load_balancer`]
//! replaces the configuration through the archive API and reloads HAProxy with `SIGHUP` (kind's node
//! contract: `haproxy -W -db -f CONFIG`, no shell needed in the image), only when the text changed,
//! and confirms the reload by HAProxy's new worker (`lb_reload.rs`).

use std::io::Read;

use bollard::query_parameters::{
    CreateContainerOptionsBuilder, DownloadFromContainerOptionsBuilder,
    UploadToContainerOptionsBuilder,
};
use bytes::Bytes;
use futures_util::StreamExt;

use super::side::{side_body, Side};
use super::DockerProvider;
use crate::transport::ExecError;

/// Label holding the cluster name on the cluster's load balancer container.
pub const LOAD_BALANCER_LABEL: &str = "io.clusterctl.loadbalancer";

/// Where the image reads its configuration (kind's `loadbalancer.ConfigPath`).
pub const HAPROXY_CONFIG_PATH: &str = "/usr/local/etc/haproxy/haproxy.cfg";

/// A load balancer container in front of some backends (the control planes' API servers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancerContainer {
    /// Container name, which the nodes resolve on the cluster network.
    pub name: String,
    /// Image reference (pulled when missing); HAProxy reading [`HAPROXY_CONFIG_PATH`].
    pub image: String,
    /// Port on 127.0.0.1; 0: the engine chooses.
    pub host_port: u16,
    /// Port it listens on inside the container.
    pub port: u16,
    /// The backends: (server name, `host:port`), the host a container name on the network.
    pub backends: Vec<(String, String)>,
    /// The HTTPS path each backend is checked with (`GET`, certificate not verified), e.g. `/healthz`.
    pub health_path: String,
}

/// The load balancer as found on the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancerState {
    /// Container name.
    pub name: String,
    /// The port published on 127.0.0.1, when running.
    pub host_port: Option<u16>,
    /// Engine state (`running`, `exited`, …).
    pub state: String,
    /// Its image.
    pub image: String,
}

/// HAProxy's configuration for `lb`: TCP on `*:<port>`, every backend resolved through Docker's DNS
/// (`127.0.0.11`; a stopped container's name stops resolving), checked every 2 s with an HTTPS `GET`
/// of the health path, a failed connection retried on another backend (`option redispatch`). kind's
/// template, with the retries and shorter timeouts added and `maxconn` 4000 instead of 100000: HAProxy
/// refuses to start when it cannot raise its file limit to twice `maxconn` (Debian 12's haproxy 2.6
/// under a limit of 20000: `Cannot raise FD limit to 200030`), and a lab's API needs few connections.
pub fn haproxy_config(lb: &LoadBalancerContainer) -> String {
    let mut out = format!(
        "# written by clusterctl: {name}\n\
         global\n  maxconn 4000\n\n\
         resolvers docker\n  nameserver dns 127.0.0.11:53\n  hold valid 2s\n\n\
         defaults\n  mode tcp\n  option dontlognull\n  option redispatch\n  retries 3\n  \
         timeout connect 3s\n  timeout client 50s\n  timeout server 50s\n  timeout check 2s\n  \
         # start even when a backend does not resolve yet\n  \
         default-server init-addr none inter 2s fall 2 rise 2\n\n\
         frontend control-plane\n  bind *:{port}\n  default_backend kube-apiservers\n\n\
         backend kube-apiservers\n  option httpchk GET {path}\n",
        name = lb.name,
        port = lb.port,
        path = lb.health_path,
    );
    for (server, address) in &lb.backends {
        out += &format!(
            "  server {server} {address} check check-ssl verify none resolvers docker resolve-prefer ipv4\n"
        );
    }
    out
}

/// A one-file tar archive holding `text` at `path` (relative to `/`), mode 0644, root.
fn archive(path: &str, text: &str) -> Result<Vec<u8>, std::io::Error> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(text.len() as u64);
    h.set_mode(0o644);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_entry_type(tar::EntryType::Regular);
    b.append_data(&mut h, path.trim_start_matches('/'), text.as_bytes())?;
    b.into_inner()
}

impl DockerProvider {
    /// The cluster's load balancer container (by [`LOAD_BALANCER_LABEL`]), if there is one.
    pub fn load_balancer(&self) -> Result<Option<LoadBalancerState>, ExecError> {
        let summaries = self.labelled(LOAD_BALANCER_LABEL)?;
        Ok(summaries.into_iter().find_map(|c| {
            let name = c.names?.first()?.trim_start_matches('/').to_string();
            let host_port = c
                .ports
                .unwrap_or_default()
                .iter()
                .find_map(|p| p.public_port.filter(|_| p.ip.as_deref() != Some("::")));
            Some(LoadBalancerState {
                name,
                host_port,
                state: c.state.map(|s| s.to_string()).unwrap_or_default(),
                image: c.image.unwrap_or_default(),
            })
        }))
    }

    /// Creates the options' load balancer on `network` with its configuration and starts it, unless it
    /// exists: then its configuration is brought up to date ([`DockerProvider::configure_load_balancer`])
    /// and a stopped one started. Returns whether anything was created or changed. Errors: the
    /// engine's, naming the container (a host port in use among them).
    pub fn ensure_load_balancer(&self, network: &str) -> Result<bool, ExecError> {
        let Some(lb) = self.options.load_balancer.clone() else {
            return Ok(false);
        };
        if let Some(found) = self.load_balancer()? {
            let changed = self.configure_load_balancer(&lb.backends)?;
            if found.state != "running" {
                self.start(&found.name)?;
                return Ok(true);
            }
            return Ok(changed);
        }
        self.ensure(&lb.image)?;
        let body = side_body(
            &Side {
                image: &lb.image,
                label: LOAD_BALANCER_LABEL,
                network,
                container_port: lb.port,
                host_port: lb.host_port,
            },
            &self.cluster,
        );
        self.client.block_on(async {
            self.client
                .docker()
                .create_container(
                    Some(
                        CreateContainerOptionsBuilder::default()
                            .name(&lb.name)
                            .build(),
                    ),
                    body,
                )
                .await
                .map_err(|e| self.err(format!("creating load balancer container {}: {e}", lb.name)))
        })?;
        self.write_config(&lb.name, &haproxy_config(&lb))?;
        self.start(&lb.name)?;
        Ok(true)
    }

    /// Writes the load balancer's configuration with `backends` (the options' other settings) and
    /// reloads HAProxy (`SIGHUP`, confirmed by a new worker) when the text differs from the container's.
    /// Returns whether it changed; `Ok(false)` without a load balancer in the options or on the engine.
    pub fn configure_load_balancer(
        &self,
        backends: &[(String, String)],
    ) -> Result<bool, ExecError> {
        let (Some(mut lb), Some(found)) =
            (self.options.load_balancer.clone(), self.load_balancer()?)
        else {
            return Ok(false);
        };
        lb.backends = backends.to_vec();
        lb.name = found.name;
        let text = haproxy_config(&lb);
        if self.read_config(&lb.name)?.as_deref() == Some(text.as_str()) {
            return Ok(false);
        }
        self.write_config(&lb.name, &text)?;
        if found.state == "running" {
            self.reload_haproxy(&lb.name)?;
        }
        Ok(true)
    }

    /// The configuration file's text in container `name`; `None` when it has none.
    fn read_config(&self, name: &str) -> Result<Option<String>, ExecError> {
        let bytes = self.client.block_on(async {
            let mut s = self.client.docker().download_from_container(
                name,
                Some(
                    DownloadFromContainerOptionsBuilder::default()
                        .path(HAPROXY_CONFIG_PATH)
                        .build(),
                ),
            );
            let mut all = Vec::new();
            while let Some(chunk) = s.next().await {
                match chunk {
                    Ok(b) => all.extend_from_slice(&b),
                    // A missing file: the engine answers 404.
                    Err(_) => return None,
                }
            }
            Some(all)
        });
        let Some(bytes) = bytes else {
            return Ok(None);
        };
        let mut ar = tar::Archive::new(bytes.as_slice());
        let mut entries = ar
            .entries()
            .map_err(|e| self.err(format!("reading {HAPROXY_CONFIG_PATH} of {name}: {e}")))?;
        let Some(entry) = entries.next() else {
            return Ok(None);
        };
        let mut text = String::new();
        entry
            .and_then(|mut e| e.read_to_string(&mut text))
            .map_err(|e| self.err(format!("reading {HAPROXY_CONFIG_PATH} of {name}: {e}")))?;
        Ok(Some(text))
    }

    /// Puts `text` at [`HAPROXY_CONFIG_PATH`] in container `name` (created or stopped too).
    fn write_config(&self, name: &str, text: &str) -> Result<(), ExecError> {
        let tar = archive(HAPROXY_CONFIG_PATH, text)
            .map_err(|e| self.err(format!("archiving the load balancer configuration: {e}")))?;
        self.client.block_on(async {
            self.client
                .docker()
                .upload_to_container(
                    name,
                    Some(UploadToContainerOptionsBuilder::default().path("/").build()),
                    bollard::body_full(Bytes::from(tar)),
                )
                .await
                .map_err(|e| self.err(format!("writing {HAPROXY_CONFIG_PATH} in {name}: {e}")))
        })
    }

    /// Starts container `name`.
    fn start(&self, name: &str) -> Result<(), ExecError> {
        self.client.block_on(async {
            self.client
                .docker()
                .start_container(
                    name,
                    None::<bollard::query_parameters::StartContainerOptions>,
                )
                .await
                .map_err(|e| self.err(format!("starting container {name}: {e}")))
        })
    }

    /// Removes the cluster's load balancer container; returns its name (`None`: there was none).
    pub fn remove_load_balancer(&self) -> Result<Option<String>, ExecError> {
        let Some(found) = self.load_balancer()? else {
            return Ok(None);
        };
        self.force_remove(&found.name)?;
        Ok(Some(found.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_lists_every_backend_checked_by_its_health_path() {
        let lb = LoadBalancerContainer {
            name: "lab-external-load-balancer".into(),
            image: "kindest/haproxy".into(),
            host_port: 0,
            port: 6443,
            backends: vec![
                ("c1".into(), "lab-c1:6443".into()),
                ("c2".into(), "lab-c2:6443".into()),
            ],
            health_path: "/healthz".into(),
        };
        let text = haproxy_config(&lb);
        assert!(text.contains("bind *:6443\n"), "{text}");
        assert!(text.contains("option httpchk GET /healthz\n"), "{text}");
        assert!(text.contains("nameserver dns 127.0.0.11:53"), "{text}");
        for s in [
            "server c1 lab-c1:6443 check check-ssl",
            "server c2 lab-c2:6443 check",
        ] {
            assert!(text.contains(s), "{s}: {text}");
        }
    }

    #[test]
    fn the_archive_holds_the_file_at_its_path() {
        let tar = archive(HAPROXY_CONFIG_PATH, "x\n").expect("tar");
        let mut ar = tar::Archive::new(tar.as_slice());
        let e = ar
            .entries()
            .expect("entries")
            .next()
            .expect("one")
            .expect("entry");
        assert_eq!(
            e.path().expect("path").to_string_lossy(),
            "usr/local/etc/haproxy/haproxy.cfg"
        );
    }
}
