//! The effective proxy environment of a cluster with `spec.proxy` ([`ProxyEnv`]): the file's
//! `noProxy` is always completed ([`ProxyEnv::of`]) with what must never go through a proxy: the
//! node addresses and names, podSubnet, serviceSubnet, the VIP and the endpoint host, loopback,
//! `.svc` and the cluster's DNS domain, so that node-to-node and in-cluster traffic stays direct.

use crate::valid::ValidCluster;

/// The effective proxy environment of a cluster with `spec.proxy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyEnv {
    /// `HTTP_PROXY`, if given.
    pub http: Option<String>,
    /// `HTTPS_PROXY`, if given.
    pub https: Option<String>,
    /// `NO_PROXY`: the file's entries, then the cluster's own, without duplicates, in that order.
    pub no_proxy: Vec<String>,
}

impl ProxyEnv {
    /// The proxy environment of `cluster`, `None` without `spec.proxy`. `NO_PROXY` holds the file's
    /// `noProxy`, then `localhost`, `127.0.0.1`, `::1`, every node's name and address, podSubnet,
    /// serviceSubnet, the VIP, the endpoint's host, `.svc`, `.cluster.local` and `.<dnsDomain>`.
    pub fn of(cluster: &ValidCluster) -> Option<ProxyEnv> {
        let p = cluster.spec().proxy.as_ref()?;
        let mut list: Vec<String> = p.no_proxy.iter().map(|e| e.trim().to_string()).collect();
        list.extend(["localhost", "127.0.0.1", "::1"].map(String::from));
        for n in cluster.nodes() {
            list.push(n.name.clone());
            if let Some(a) = n.address {
                list.push(a.to_string());
            }
        }
        list.push(cluster.pod_subnet().to_string());
        list.push(cluster.service_subnet().to_string());
        if let Some(v) = cluster.vip() {
            list.push(v.to_string());
        }
        list.push(cluster.endpoint().host.clone());
        list.push(".svc".into());
        list.push(".cluster.local".into());
        list.push(format!(
            ".{}",
            cluster.spec().networking.dns_domain.trim_matches('.')
        ));
        let mut seen = std::collections::HashSet::new();
        list.retain(|e| !e.is_empty() && seen.insert(e.clone()));
        Some(ProxyEnv {
            http: p.http.clone(),
            https: p.https.clone(),
            no_proxy: list,
        })
    }

    /// `NO_PROXY`'s value: the entries joined by commas.
    pub fn no_proxy_value(&self) -> String {
        self.no_proxy.join(",")
    }

    /// The variables as Go programs (containerd, the kubelet) read them: `HTTP_PROXY`,
    /// `HTTPS_PROXY` (each when given) and `NO_PROXY`.
    pub fn upper(&self) -> Vec<(&'static str, String)> {
        let mut v = Vec::new();
        if let Some(h) = &self.http {
            v.push(("HTTP_PROXY", h.clone()));
        }
        if let Some(h) = &self.https {
            v.push(("HTTPS_PROXY", h.clone()));
        }
        v.push(("NO_PROXY", self.no_proxy_value()));
        v
    }

    /// [`Self::upper`] and the same in lower case (`http_proxy`, `https_proxy`, `no_proxy`), which
    /// apt, curl and wget read.
    pub fn both_cases(&self) -> Vec<(String, String)> {
        self.upper()
            .into_iter()
            .flat_map(|(k, v)| [(k.to_string(), v.clone()), (k.to_ascii_lowercase(), v)])
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::ProxyEnv;
    use crate::load::Loaded;

    fn cluster(proxy: &str) -> crate::ValidCluster {
        let text = format!("apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: px}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n{proxy}  controlPlane:\n    vip: {{address: 10.0.0.100, interface: eth0}}\n  networking: {{podSubnet: 10.244.0.0/16, serviceSubnet: 10.96.0.0/16, dnsDomain: lab.internal}}\n  nodes:\n    - {{name: cp1, role: control-plane, address: 10.0.0.11/24}}\n    - {{name: w1, role: worker, address: 10.0.0.21/24}}\n");
        crate::validate(&Loaded::from_text("cluster.yaml", text))
            .expect("valid")
            .cluster
    }

    #[test]
    fn no_proxy_always_holds_the_clusters_own_addresses_after_the_files() {
        assert_eq!(ProxyEnv::of(&cluster("")), None);
        let env = ProxyEnv::of(&cluster(
            "  proxy: {http: \"http://p:3128\", noProxy: [.corp.example, 10.0.0.11]}\n",
        ))
        .expect("proxy");
        assert_eq!(env.http.as_deref(), Some("http://p:3128"));
        assert_eq!(env.https, None);
        assert_eq!(
            env.no_proxy_value(),
            ".corp.example,10.0.0.11,localhost,127.0.0.1,::1,cp1,w1,10.0.0.21,10.244.0.0/16,10.96.0.0/16,10.0.0.100,.svc,.cluster.local,.lab.internal"
        );
        let vars = env.both_cases();
        let names: Vec<&str> = vars.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"]);
    }
}
