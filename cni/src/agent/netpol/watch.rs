//! Keeps the node's policy table in line with the API: lists NetworkPolicies, Pods and Namespaces,
//! compiles and applies, then watches the three from the lists' resourceVersions and, after each
//! burst of events (settled for [`SETTLE`]), compiles again and applies what changed (the applier
//! sends only the difference from the table it applied last; nothing for no change).
//! A failed or ended watch (the server's timeout, `resyncSeconds`, is the periodic resync) lists
//! again; a failed list is retried after [`BACKOFF`]. Nothing is removed while the API cannot be
//! reached: the table installed last keeps enforcing (also across an agent restart).

use super::apply::Applier;
use super::cache::Cache;
use super::nft::Nft;
use crate::agent::kube::{connect, KubeError};
use futures::stream::{self, LocalBoxStream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::Resource;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long the watch must be quiet after an event before the agent compiles and applies.
pub const SETTLE: Duration = Duration::from_millis(20);
/// Pause after a failed list before the next.
pub const BACKOFF: Duration = Duration::from_secs(2);

/// One watch event of one of the three kinds; `None` asks for a new list.
enum Ev {
    Policy(WatchEvent<NetworkPolicy>),
    Pod(Box<WatchEvent<Pod>>),
    Namespace(WatchEvent<Namespace>),
}

fn key<K: Resource>(o: &K) -> String {
    let m = o.meta();
    format!(
        "{}/{}",
        m.namespace.as_deref().unwrap_or_default(),
        m.name.as_deref().unwrap_or_default()
    )
}

/// Applies `ev` to `map`; false when the event asks for a new list (an error event).
fn update<K: Resource + Clone>(map: &mut BTreeMap<String, K>, ev: WatchEvent<K>) -> bool {
    match ev {
        WatchEvent::Added(o) | WatchEvent::Modified(o) => {
            map.insert(key(&o), o);
        }
        WatchEvent::Deleted(o) => {
            map.remove(&key(&o));
        }
        WatchEvent::Bookmark(_) => {}
        WatchEvent::Error(_) => return false,
    }
    true
}

/// The agent's policy loop for node `node`, with the credentials of `kubeconfig` (`None`: the
/// in-cluster/default configuration): runs until `stop` is set (checked at least every 250 ms).
/// `resync` bounds each watch. Errors: the async runtime failing to start, the client
/// configuration; API and nft failures are logged and retried.
pub fn run(
    node: &str,
    kubeconfig: Option<PathBuf>,
    nft: &Nft,
    resync: Duration,
    stop: &AtomicBool,
) -> Result<(), KubeError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(KubeError::Runtime)?;
    let client = rt.block_on(connect(kubeconfig))?;
    rt.block_on(async {
        let mut applier = Applier::new(node, nft);
        while !stop.load(Ordering::Relaxed) {
            let mut cache = Cache::default();
            match list(&client, &mut cache).await {
                Ok(rvs) => {
                    applier.sync(&client, &cache).await;
                    watch(&client, &mut cache, &rvs, resync, stop, &mut applier).await;
                }
                Err(e) => {
                    eprintln!("clusterctl cni agent: network policy: {e}; listing again in 2 s");
                    let end = Instant::now() + BACKOFF;
                    while Instant::now() < end && !stop.load(Ordering::Relaxed) {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        }
    });
    Ok(())
}

/// Lists the three kinds into `cache`; their resourceVersions. Errors: the failed list.
async fn list(client: &kube::Client, cache: &mut Cache) -> Result<[String; 3], KubeError> {
    let lp = ListParams::default();
    let p = Api::<NetworkPolicy>::all(client.clone())
        .list(&lp)
        .await
        .map_err(KubeError::ListPolicyInputs)?;
    let o = Api::<Pod>::all(client.clone())
        .list(&lp)
        .await
        .map_err(KubeError::ListPolicyInputs)?;
    let n = Api::<Namespace>::all(client.clone())
        .list(&lp)
        .await
        .map_err(KubeError::ListPolicyInputs)?;
    let rv = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta| {
        m.resource_version.clone().unwrap_or_default()
    };
    let rvs = [rv(&p.metadata), rv(&o.metadata), rv(&n.metadata)];
    cache.policies = p.items.into_iter().map(|x| (key(&x), x)).collect();
    cache.pods = o.items.into_iter().map(|x| (key(&x), x)).collect();
    cache.namespaces = n.items.into_iter().map(|x| (key(&x), x)).collect();
    Ok(rvs)
}

/// One kind's watch as a stream of [`Ev`], `None` at its end or failure.
async fn watch_any<K, F>(
    api: Api<K>,
    rv: &str,
    secs: u32,
    wrap: F,
) -> LocalBoxStream<'static, Option<Ev>>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
    F: Fn(WatchEvent<K>) -> Ev + Send + 'static,
{
    let wp = WatchParams::default().timeout(secs);
    match api.watch(&wp, rv).await {
        Ok(s) => s
            .map(move |e| e.ok().map(&wrap))
            .chain(stream::once(async { None }))
            .boxed_local(),
        Err(e) => {
            eprintln!("clusterctl cni agent: network policy: watch: {e}");
            stream::once(async { None }).boxed_local()
        }
    }
}

/// Watches until a stream ends or fails, or `stop`; applies after each settled burst.
async fn watch(
    client: &kube::Client,
    cache: &mut Cache,
    rvs: &[String; 3],
    resync: Duration,
    stop: &AtomicBool,
    applier: &mut Applier<'_>,
) {
    let secs = u32::try_from(resync.as_secs()).unwrap_or(290).clamp(1, 290);
    let streams = vec![
        watch_any(
            Api::<NetworkPolicy>::all(client.clone()),
            &rvs[0],
            secs,
            Ev::Policy,
        )
        .await,
        watch_any(Api::<Pod>::all(client.clone()), &rvs[1], secs, |e| {
            Ev::Pod(Box::new(e))
        })
        .await,
        watch_any(
            Api::<Namespace>::all(client.clone()),
            &rvs[2],
            secs,
            Ev::Namespace,
        )
        .await,
    ];
    let mut all = stream::select_all(streams);
    let mut dirty = false;
    while !stop.load(Ordering::Relaxed) {
        let wait = if dirty {
            SETTLE
        } else {
            Duration::from_millis(250)
        };
        match tokio::time::timeout(wait, all.next()).await {
            Err(_) if dirty => {
                applier.sync(client, cache).await;
                dirty = false;
            }
            Err(_) => {}
            Ok(Some(Some(ev))) => {
                let ok = match ev {
                    Ev::Policy(e) => update(&mut cache.policies, e),
                    Ev::Pod(e) => update(&mut cache.pods, *e),
                    Ev::Namespace(e) => update(&mut cache.namespaces, e),
                };
                if !ok {
                    break;
                }
                dirty = true;
            }
            Ok(_) => break,
        }
    }
    if dirty && !stop.load(Ordering::Relaxed) {
        applier.sync(client, cache).await;
    }
}
