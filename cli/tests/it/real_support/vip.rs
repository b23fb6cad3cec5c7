//! kube-vip on the real HA cluster (issue 25 item 3, issue 26 item 2): a LoadBalancer Service for the
//! `web` pods gets an address from the file's `loadBalancerPool` (kube-vip-cloud-provider, installed by
//! `up`) and answers HTTP from this machine (on the test network); then the control plane holding the
//! VIP is stopped with `docker stop`: the VIP moves, the API through it answers again within a bound
//! from kube-vip's lease settings, the LoadBalancer address answers again, `clusterctl status` names the
//! node that is down; `docker start` brings it back (same address, sshd and kubelet by themselves),
//! Ready, and the next `up` changes nothing.

use std::process::Command;
use std::time::{Duration, Instant};

use clusterctl_testbed::docker::{docker, TestCluster, TestNode};

use super::{wait_for, RealCluster};

/// The longest the API may stay away through the VIP once the node holding it is gone: kube-vip's
/// `vip_leaseduration` 5 s (the other control planes wait that long after the last renewal) +
/// `vip_retryperiod` 1 s (how often they try to take the lease) + `vip_renewdeadline` 3 s of slack
/// (a renewal may have been late), then etcd electing a new leader if the stopped node led it
/// (kubeadm's etcd: 1 s election timeout) and the gratuitous ARP reaching this machine: 5 + 1 + 3 + 1
/// + 5 s of probe and ARP slack = 15 s.
pub(crate) const API_GAP_BOUND: Duration = Duration::from_secs(15);

/// The pool the test file gives LoadBalancer Services and the `vip` fields that carry it.
pub(crate) struct LbPool {
    /// `first-last`: `.240`–`.242` of the first node's /24 (Docker hands out addresses from the
    /// bottom of the network; the VIP is `.250`).
    pub(crate) range: String,
    /// `, loadBalancerServices: true, subnet: <network>, loadBalancerPool: {range: <range>}`.
    pub(crate) vip_fields: String,
}

/// The pool for `nodes`' network, with `vip.subnet` the network's IPv4 subnet so `validate` checks the
/// pool lies inside it.
pub(crate) fn pool(nodes: &TestCluster) -> LbPool {
    let subnets = docker(&[
        "network",
        "inspect",
        "-f",
        "{{range .IPAM.Config}}{{.Subnet}} {{end}}",
        &nodes.network,
    ])
    .expect("docker network inspect");
    let subnet = subnets
        .split_whitespace()
        .find(|s| s.contains('.'))
        .expect("an IPv4 subnet")
        .to_string();
    let prefix: Vec<&str> = nodes.nodes[0].address.split('.').take(3).collect();
    let p = prefix.join(".");
    let range = format!("{p}.240-{p}.242");
    LbPool {
        vip_fields: format!(
            ", loadBalancerServices: true, subnet: {subnet}, loadBalancerPool: {{range: {range}}}"
        ),
        range,
    }
}

/// `curl` from this machine: the body, or why not.
fn curl(args: &[&str]) -> Result<String, String> {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "1"])
        .args(args)
        .output()
        .map_err(|e| format!("curl: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

fn web_page(ip: &str) -> Result<String, String> {
    let page = curl(&[&format!("http://{ip}/index.html")])?;
    if page.starts_with("hello-from-web-") {
        Ok(page)
    } else {
        Err(format!("unexpected page {page:?}"))
    }
}

/// `/livez` through `vip` from this machine (anonymous, as kubeadm allows).
pub(crate) fn livez(vip: &str) -> Result<(), String> {
    match curl(&["-k", &format!("https://{vip}:6443/livez")])? {
        s if s == "ok" => Ok(()),
        s => Err(format!("livez: {s}")),
    }
}

fn in_range(ip: &str, range: &str) -> bool {
    let n = |s: &str| {
        s.trim()
            .parse::<std::net::Ipv4Addr>()
            .map(u32::from)
            .unwrap_or(0)
    };
    let (a, b) = range.split_once('-').expect("range");
    (n(a)..=n(b)).contains(&n(ip))
}

/// The control plane whose eth0 carries `ip` (kube-vip's leader for it).
pub(crate) fn holder<'a>(c: &'a RealCluster, ip: &str) -> Option<&'a TestNode> {
    c.control_planes().into_iter().find(|n| {
        n.sh("ip -4 -o addr show dev eth0")
            .is_ok_and(|s| s.contains(&format!(" {ip}/")))
    })
}

/// The LoadBalancer Service `web-lb` in front of the `web` pods gets an address of the pool
/// (annotation and status) and answers HTTP from this machine. Returns the address.
pub(crate) fn load_balancer_service(c: &RealCluster) -> String {
    let t = Instant::now();
    let range = c.lb_range.clone().expect("the file has a loadBalancerPool");
    c.apply("apiVersion: v1\nkind: Service\nmetadata: {name: web-lb}\nspec:\n  type: LoadBalancer\n  selector: {app: web}\n  ports: [{port: 80, targetPort: 8080}]\n");
    let ip = wait_for(
        "the LoadBalancer Service's address",
        Duration::from_secs(120),
        || {
            let ip =
                c.kubectl("get service web-lb -o jsonpath='{.status.loadBalancer.ingress[0].ip}'");
            if ip.is_empty() {
                Err(c.kubectl("-n kube-system get deploy,pods -l app=kube-vip -o wide; kubectl --kubeconfig /etc/kubernetes/admin.conf describe service web-lb | tail -5"))
            } else {
                Ok(ip)
            }
        },
    );
    assert!(in_range(&ip, &range), "{ip} is not in the pool {range}");
    let annotated = c.kubectl(
        "get service web-lb -o jsonpath='{.metadata.annotations.kube-vip\\.io/loadbalancerIPs}'",
    );
    assert_eq!(annotated, ip, "kube-vip-cloud-provider's annotation");
    let page = wait_for(
        "HTTP on the LoadBalancer address",
        Duration::from_secs(60),
        || web_page(&ip),
    );
    eprintln!(
        "[real] LoadBalancer web-lb: {ip} (pool {range}) answered {page:?} from this machine, {:.1}s after the Service was made",
        t.elapsed().as_secs_f64()
    );
    ip
}

/// Stops the control plane holding the VIP (`docker stop`), measures the API's and the LoadBalancer
/// address's gaps, waits for `status` to name the node, starts it again, waits for it Ready, then
/// runs `up`, which must change nothing.
pub(crate) fn vip_failover(c: &RealCluster, lb_ip: &str) {
    let vip = c.vip.clone().expect("vip");
    let down = holder(c, &vip)
        .expect("a control plane holds the VIP")
        .clone();
    let lb_holder = holder(c, lb_ip).map(|n| n.name.clone());
    let alive = c
        .control_planes()
        .into_iter()
        .find(|n| n.name != down.name)
        .expect("another control plane")
        .clone();
    eprintln!(
        "[real] the VIP {vip} is on {}, the LoadBalancer address {lb_ip} on {}",
        down.name,
        lb_holder.as_deref().unwrap_or("no control plane")
    );
    livez(&vip).expect("the API through the VIP before the stop");
    let t = Instant::now();
    docker(&["stop", &down.name]).expect("docker stop");
    let stopped = t.elapsed();
    let gone = Instant::now();
    wait_for("the API through the VIP", API_GAP_BOUND * 2, || livez(&vip));
    let api_gap = gone.elapsed();
    let now_on = holder(c, &vip).map(|n| n.name.clone());
    let lb = wait_for("the LoadBalancer address", Duration::from_secs(60), || {
        web_page(lb_ip)
    });
    let lb_gap = gone.elapsed();
    eprintln!(
        "[real] docker stop {} took {:.1}s; then the API through the VIP answered after {:.1}s (VIP now on {}), the LoadBalancer address after {:.1}s ({lb:?})",
        down.name,
        stopped.as_secs_f64(),
        api_gap.as_secs_f64(),
        now_on.as_deref().unwrap_or("?"),
        lb_gap.as_secs_f64()
    );
    assert!(
        now_on.as_deref().is_some_and(|n| n != down.name),
        "the VIP moved"
    );
    assert!(
        api_gap <= API_GAP_BOUND,
        "the API through the VIP was away {api_gap:?}, more than {API_GAP_BOUND:?}"
    );
    status_names(c, &down.name, gone);
    restart(c, &down, &alive);
}

/// `clusterctl status` (through the VIP) reports `node` not Ready.
fn status_names(c: &RealCluster, node: &str, since: Instant) {
    let f = c.file.to_string_lossy().into_owned();
    let s = wait_for(
        "status naming the stopped node",
        Duration::from_secs(120),
        || {
            let r = c.clusterctl(&["status", "-f", &f]);
            let all = r.all();
            let row = all
                .lines()
                .find(|l| l.starts_with(&format!("{node} ")))
                .unwrap_or("");
            // A node not Ready is `degraded`, which exits 0 (docs/commands.md).
            if r.code == 0 && row.split_whitespace().nth(3) == Some("False") {
                Ok(all)
            } else {
                Err(all)
            }
        },
    );
    eprintln!(
        "[real] status names {node} not Ready {:.1}s after it stopped:\n{s}",
        since.elapsed().as_secs_f64()
    );
}

/// `docker start` of `node`: same address, Ready again (asked on `alive`), then `up` changes nothing.
fn restart(c: &RealCluster, node: &TestNode, alive: &TestNode) {
    let t = Instant::now();
    docker(&["start", &node.name]).expect("docker start");
    let address = docker(&[
        "inspect",
        "-f",
        &format!(
            "{{{{(index .NetworkSettings.Networks \"{}\").IPAddress}}}}",
            c.nodes.network
        ),
        &node.name,
    ])
    .expect("docker inspect");
    assert_eq!(
        address.trim(),
        node.address,
        "the node's address after docker start"
    );
    wait_for("the restarted node Ready", Duration::from_secs(240), || {
        let out = c.kubectl_on(
            alive,
            &format!(
                "get node {} -o jsonpath='{{.status.conditions[?(@.type==\"Ready\")].status}}'",
                node.name
            ),
        );
        if out == "True" {
            Ok(())
        } else {
            Err(format!("Ready={out}"))
        }
    });
    eprintln!(
        "[real] {} Ready {:.1}s after docker start",
        node.name,
        t.elapsed().as_secs_f64()
    );
    let again = c.up(&[]);
    assert!(
        again.all().contains("is up to date; nothing changed"),
        "up after the node came back:\n{}",
        again.all()
    );
}
