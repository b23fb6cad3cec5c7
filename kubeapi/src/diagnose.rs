//! The diagnosis behind `clusterctl status`, pure (no I/O: events and the nodes holding an image are
//! asked through callbacks). A stuck pod is placed at the layer it is stuck at, the way one reads
//! `kubectl describe pod` top to bottom:
//! - **scheduling**: `Pending` with `PodScheduled=False` — the scheduler's message, and for a
//!   `nodeSelector` (or required node affinity) that no node matches, the missing label by name, and
//!   the taints the pod does not tolerate by name;
//! - **network**: scheduled, but the sandbox cannot be created (`FailedCreatePodSandBox`, usually the CNI;
//!   an image problem when the runtime cannot get the sandbox (pause) image);
//! - **image**: `ErrImagePull`/`ImagePullBackOff`/`ErrImageNeverPull`/`InvalidImageName` — the image, and
//!   which nodes' runtimes hold it (a Node's `status.images` lists at most 50, so the caller asks the
//!   runtimes);
//! - **container**: `CreateContainerConfigError`/`CreateContainerError`/`RunContainerError`;
//! - **application**: `CrashLoopBackOff` — the last termination's reason and exit code.
//!
//! Each stuck pod carries what to look at next. Shapes: core/v1 `Pod`, `PodCondition`, `ContainerStatus`,
//! `Event`, `Node` (Kubernetes API reference v1.34).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ContainerStatus, Event, Node, NodeSelectorRequirement, Pod};

use crate::node::{node_status, NodeStatus};

/// The layer a pod is stuck at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    /// Not placed on a node (scheduler).
    Scheduling,
    /// Placed, but its sandbox (network namespace, CNI ADD) cannot be created.
    Network,
    /// Its image cannot be pulled or found.
    Image,
    /// The container cannot be created or started (config, mounts, command).
    Container,
    /// The container starts and then exits, again and again.
    Application,
}

impl Layer {
    /// The lower-case name used in output (`scheduling`, `image`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Scheduling => "scheduling",
            Layer::Network => "network",
            Layer::Image => "image",
            Layer::Container => "container",
            Layer::Application => "application",
        }
    }
}

/// A container's last termination (`lastState.terminated`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Termination {
    /// Reason, e.g. `Error`, `OOMKilled`, `Completed`.
    pub reason: String,
    /// Exit code of the process.
    pub exit_code: i32,
    /// Message, if the runtime gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One stuck pod.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StuckPod {
    /// Namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// `spec.nodeName`, when scheduled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// `status.phase` (`Pending`, `Running`, …).
    pub phase: String,
    /// The layer it is stuck at.
    pub layer: Layer,
    /// The short reason: `Unschedulable`, `ImagePullBackOff`, `CrashLoopBackOff`, `FailedCreatePodSandBox`, ….
    pub reason: String,
    /// The container concerned (image, container and application layers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// The scheduler's, kubelet's or the latest warning event's message.
    pub message: String,
    /// Scheduling: `nodeSelector`/required node affinity terms that no node satisfies, as `key=value`
    /// (or `key in (a,b)`, `key exists`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_labels: Vec<String>,
    /// Scheduling: the `NoSchedule`/`NoExecute` taints of nodes that the pod does not tolerate, as
    /// `key=value:Effect on node1, node2` (`key:Effect` without a value), sorted. The scheduler's own
    /// message only says "untolerated taint(s)".
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub untolerated_taints: Vec<String>,
    /// Image layer: the image as the pod spec names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Image layer: the nodes whose runtime holds the image; `None` when the runtimes could not be
    /// asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes_with_image: Option<Vec<String>>,
    /// Image layer: the container's `imagePullPolicy` (`Always`, `IfNotPresent`, `Never`; the API's
    /// default when unset: `Always` for `:latest` or no tag, else `IfNotPresent`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_policy: Option<String>,
    /// Application layer: the last termination.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_termination: Option<Termination>,
    /// Restart count of the container concerned.
    pub restarts: i32,
    /// What to look at next, most useful first (commands to run, files to change).
    pub next: Vec<String>,
}

/// Nodes and stuck pods of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Diagnosis {
    /// Every node, sorted by name.
    pub nodes: Vec<NodeStatus>,
    /// Every stuck pod, sorted by namespace and name.
    pub stuck: Vec<StuckPod>,
}

const IMAGE_REASONS: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
    "RegistryUnavailable",
];
const CONTAINER_REASONS: &[&str] = &[
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "PreCreateHookError",
    "PostStartHookError",
];

/// Diagnoses `pods` against `nodes`. `events(pod)` returns the pod's events (oldest first); it is
/// called only for pods that look stuck. `image_nodes(image)` returns the nodes whose runtime holds
/// `image` (as the pod spec writes it), `None` when unknown; it is called once per image.
pub fn diagnose(
    nodes: &[Node],
    pods: &[Pod],
    events: &mut dyn FnMut(&Pod) -> Vec<Event>,
    image_nodes: &mut dyn FnMut(&str) -> Option<Vec<String>>,
) -> Diagnosis {
    let mut statuses: Vec<NodeStatus> = nodes.iter().map(node_status).collect();
    statuses.sort_by(|a, b| a.name.cmp(&b.name));
    let mut stuck = Vec::new();
    let mut image_cache: BTreeMap<String, Option<Vec<String>>> = BTreeMap::new();
    for pod in pods {
        if !looks_stuck(pod) {
            continue;
        }
        let evs = events(pod);
        if let Some(mut s) = diagnose_pod(pod, nodes, &evs) {
            if let Some(img) = s.image.clone() {
                let found = image_cache
                    .entry(img.clone())
                    .or_insert_with(|| image_nodes(&img))
                    .clone();
                s.nodes_with_image = found;
            }
            s.next = next_steps(&s);
            stuck.push(s);
        }
    }
    stuck.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Diagnosis {
        nodes: statuses,
        stuck,
    }
}

fn all_container_statuses(pod: &Pod) -> impl Iterator<Item = &ContainerStatus> {
    let st = pod.status.as_ref();
    st.and_then(|s| s.init_container_statuses.as_ref())
        .into_iter()
        .flatten()
        .chain(
            st.and_then(|s| s.container_statuses.as_ref())
                .into_iter()
                .flatten(),
        )
}

fn waiting_reason(cs: &ContainerStatus) -> Option<&str> {
    cs.state
        .as_ref()
        .and_then(|s| s.waiting.as_ref())
        .and_then(|w| w.reason.as_deref())
}

/// The kubelet's `CreateContainerConfigError` message while it has not yet listed the cluster's
/// Services (it builds each container's `*_SERVICE_HOST` variables from them): a kubelet that has just
/// started or re-registered says this for a few seconds and retries on its own, so it is not stuck.
/// Source: kubernetes `pkg/kubelet/kubelet_pods.go` (`getServiceEnvVarMap`).
const SERVICES_NOT_YET_READ: &str = "services have not yet been read at least once";

/// True for a wait the kubelet ends by itself within seconds (see [`SERVICES_NOT_YET_READ`]).
fn transient_wait(cs: &ContainerStatus) -> bool {
    let waiting = cs.state.as_ref().and_then(|s| s.waiting.as_ref());
    waiting.is_some_and(|w| {
        w.reason.as_deref() == Some("CreateContainerConfigError")
            && w.message
                .as_deref()
                .is_some_and(|m| m.contains(SERVICES_NOT_YET_READ))
    })
}

/// True for pods worth a closer look: `Pending`, or with a container waiting for a reason other than
/// `ContainerCreating`/`PodInitializing` or a transient kubelet start-up wait.
fn looks_stuck(pod: &Pod) -> bool {
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("");
    if phase == "Succeeded" || phase == "Failed" {
        return false;
    }
    let troubled = |cs: &ContainerStatus| {
        waiting_reason(cs).is_some_and(|r| r != "ContainerCreating" && r != "PodInitializing")
            && !transient_wait(cs)
    };
    if all_container_statuses(pod).any(troubled) {
        return true;
    }
    // A Pending pod whose only wait is the kubelet's start-up wait is not stuck.
    phase == "Pending" && !all_container_statuses(pod).any(transient_wait)
}

fn latest_warning<'a>(events: &'a [Event], reasons: &[&str]) -> Option<&'a Event> {
    events
        .iter()
        .rev()
        .find(|e| e.reason.as_deref().is_some_and(|r| reasons.contains(&r)))
}

/// Diagnoses one pod (events oldest first). `None` when it is not stuck.
pub fn diagnose_pod(pod: &Pod, nodes: &[Node], events: &[Event]) -> Option<StuckPod> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.clone()).unwrap_or_default();
    let node = spec
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty());
    let mut out = StuckPod {
        namespace,
        name,
        node: node.clone(),
        phase: phase.clone(),
        layer: Layer::Scheduling,
        reason: String::new(),
        container: None,
        message: String::new(),
        missing_labels: Vec::new(),
        untolerated_taints: Vec::new(),
        image: None,
        nodes_with_image: None,
        pull_policy: None,
        last_termination: None,
        restarts: 0,
        next: Vec::new(),
    };
    // Scheduling.
    let scheduled = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"));
    if node.is_none() && phase == "Pending" {
        let cond_false = scheduled.is_some_and(|c| c.status == "False");
        let ev = latest_warning(events, &["FailedScheduling"]);
        out.reason = scheduled
            .filter(|_| cond_false)
            .and_then(|c| c.reason.clone())
            .or_else(|| ev.and_then(|e| e.reason.clone()))
            .unwrap_or_else(|| "NotScheduled".to_string());
        out.message = scheduled
            .filter(|_| cond_false)
            .and_then(|c| c.message.clone())
            .filter(|m| !m.is_empty())
            .or_else(|| ev.and_then(|e| e.message.clone()))
            .unwrap_or_else(|| {
                "the scheduler has not placed it yet (is kube-scheduler running?)".into()
            });
        out.missing_labels = missing_labels(pod, nodes);
        out.untolerated_taints = untolerated_taints(pod, nodes);
        return Some(out);
    }
    // Container layers, the first container in trouble wins (init containers first).
    for cs in all_container_statuses(pod) {
        let Some(reason) = waiting_reason(cs) else {
            continue;
        };
        let waiting_msg = cs
            .state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.message.clone())
            .unwrap_or_default();
        out.container = Some(cs.name.clone());
        out.restarts = cs.restart_count;
        out.reason = reason.to_string();
        if IMAGE_REASONS.contains(&reason) {
            out.layer = Layer::Image;
            let spec_image = container_spec(pod, &cs.name).and_then(|c| c.image.clone());
            let image = spec_image.unwrap_or_else(|| cs.image.clone());
            out.pull_policy = Some(
                container_spec(pod, &cs.name)
                    .and_then(|c| c.image_pull_policy.clone())
                    .unwrap_or_else(|| default_pull_policy(&image).to_string()),
            );
            let ev = latest_warning(events, &["Failed", "ErrImageNeverPull", "InspectFailed"]);
            out.message = ev
                .and_then(|e| e.message.clone())
                .filter(|m| !m.is_empty())
                .unwrap_or(waiting_msg);
            out.image = Some(image);
            return Some(out);
        }
        if reason == "CrashLoopBackOff" {
            out.layer = Layer::Application;
            out.last_termination = cs
                .last_state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .map(|t| Termination {
                    reason: t.reason.clone().unwrap_or_else(|| "Error".into()),
                    exit_code: t.exit_code,
                    message: t.message.clone().filter(|m| !m.is_empty()),
                });
            out.message = waiting_msg;
            return Some(out);
        }
        if CONTAINER_REASONS.contains(&reason) {
            out.layer = Layer::Container;
            out.message = waiting_msg;
            return Some(out);
        }
    }
    // Sandbox (network) failures show only as events while containers sit in ContainerCreating.
    if let Some(ev) = latest_warning(events, &["FailedCreatePodSandBox", "NetworkNotReady"]) {
        out.layer = Layer::Network;
        out.container = None;
        out.reason = ev.reason.clone().unwrap_or_default();
        out.message = ev.message.clone().unwrap_or_default();
        // The runtime could not get the sandbox (pause) image: an image problem, not the CNI's.
        if let Some(image) = sandbox_image(&out.message) {
            out.layer = Layer::Image;
            out.image = Some(image);
        }
        return Some(out);
    }
    None
}

fn container_spec<'a>(
    pod: &'a Pod,
    name: &str,
) -> Option<&'a k8s_openapi::api::core::v1::Container> {
    let spec = pod.spec.as_ref()?;
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
}

/// The sandbox (pause) image a `FailedCreatePodSandBox` message says the runtime could not get or
/// pull (containerd: `failed to get sandbox image "registry.k8s.io/pause:3.10": failed to pull …`;
/// CRI-O: `… pause image "…"`), quotes escaped or not; `None` for other sandbox failures (the CNI's).
pub fn sandbox_image(message: &str) -> Option<String> {
    let plain = message.replace('\\', "");
    let lower = plain.to_ascii_lowercase();
    let at = ["sandbox image", "pause image"]
        .iter()
        .find_map(|k| lower.find(k).map(|i| i + k.len()))?;
    let rest = plain[at..].trim_start_matches([' ', '"', ':']);
    let image: String = rest
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '"' && *c != ',')
        .collect();
    let image = image.trim_end_matches(':').to_string();
    (!image.is_empty()).then_some(image)
}

/// Whether `tol` tolerates `taint` (core/v1 `Toleration`: an empty key with `Exists` tolerates
/// everything; `Exists` ignores the value; an empty effect matches every effect).
fn tolerates(
    tol: &k8s_openapi::api::core::v1::Toleration,
    taint: &k8s_openapi::api::core::v1::Taint,
) -> bool {
    let effect_ok = tol
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == taint.effect);
    let key = tol.key.as_deref().unwrap_or("");
    let exists = tol.operator.as_deref() == Some("Exists");
    if key.is_empty() {
        return exists && effect_ok;
    }
    effect_ok
        && key == taint.key
        && (exists || tol.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""))
}

/// The `NoSchedule`/`NoExecute` taints of `nodes` that `pod` does not tolerate, as `key=value:Effect
/// on node1, node2` (`key:Effect` without a value), sorted.
pub fn untolerated_taints(pod: &Pod, nodes: &[Node]) -> Vec<String> {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    let mut by_taint: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for n in nodes {
        let name = n.metadata.name.clone().unwrap_or_default();
        for t in n
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
        {
            if t.effect == "PreferNoSchedule" || tolerations.iter().any(|tol| tolerates(tol, t)) {
                continue;
            }
            let shown = match t.value.as_deref().filter(|v| !v.is_empty()) {
                Some(v) => format!("{}={v}:{}", t.key, t.effect),
                None => format!("{}:{}", t.key, t.effect),
            };
            by_taint.entry(shown).or_default().push(name.clone());
        }
    }
    by_taint
        .into_iter()
        .map(|(t, ns)| format!("{t} on {}", ns.join(", ")))
        .collect()
}

/// The API's default `imagePullPolicy`: `Always` when the tag is `latest` or missing (and no digest),
/// else `IfNotPresent` (core/v1 `Container.imagePullPolicy`).
pub fn default_pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn node_labels(n: &Node) -> BTreeMap<String, String> {
    n.metadata.labels.clone().unwrap_or_default()
}

fn requirement_matches(req: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let values = req.values.clone().unwrap_or_default();
    let v = labels.get(&req.key);
    match req.operator.as_str() {
        "In" => v.is_some_and(|v| values.contains(v)),
        "NotIn" => v.is_none_or(|v| !values.contains(v)),
        "Exists" => v.is_some(),
        "DoesNotExist" => v.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), Some(want)) = (
                v.and_then(|v| v.parse::<i64>().ok()),
                values.first().and_then(|w| w.parse::<i64>().ok()),
            ) else {
                return false;
            };
            if req.operator == "Gt" {
                have > want
            } else {
                have < want
            }
        }
        _ => false,
    }
}

fn describe_requirement(req: &NodeSelectorRequirement) -> String {
    let values = req.values.clone().unwrap_or_default();
    match (req.operator.as_str(), values.as_slice()) {
        ("In", [one]) => format!("{}={one}", req.key),
        ("In", _) => format!("{} in ({})", req.key, values.join(",")),
        ("NotIn", _) => format!("{} notin ({})", req.key, values.join(",")),
        ("Exists", _) => format!("{} exists", req.key),
        ("DoesNotExist", _) => format!("{} does not exist", req.key),
        (op, _) => format!("{} {op} {}", req.key, values.join(",")),
    }
}

/// The pod's `nodeSelector` entries and required node-affinity requirements that no node satisfies,
/// as `key=value` (or `key in (a,b)`, `key exists`, …), sorted and without duplicates.
pub fn missing_labels(pod: &Pod, nodes: &[Node]) -> Vec<String> {
    let labels: Vec<BTreeMap<String, String>> = nodes.iter().map(node_labels).collect();
    let mut missing = BTreeSet::new();
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    for (k, v) in spec.node_selector.iter().flatten() {
        if !labels.iter().any(|l| l.get(k) == Some(v)) {
            missing.insert(format!("{k}={v}"));
        }
    }
    let terms = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.clone())
        .unwrap_or_default();
    let term_matches = |t: &k8s_openapi::api::core::v1::NodeSelectorTerm,
                        l: &BTreeMap<String, String>| {
        t.match_expressions
            .iter()
            .flatten()
            .all(|r| requirement_matches(r, l))
    };
    if !terms.is_empty()
        && !terms
            .iter()
            .any(|t| labels.iter().any(|l| term_matches(t, l)))
    {
        for t in &terms {
            for r in t.match_expressions.iter().flatten() {
                if !labels.iter().any(|l| requirement_matches(r, l)) {
                    missing.insert(describe_requirement(r));
                }
            }
        }
    }
    missing.into_iter().collect()
}

/// What to look at next for `s` (commands and file changes), most useful first.
pub fn next_steps(s: &StuckPod) -> Vec<String> {
    let describe = format!(
        "kubectl describe pod -n {} {}  (read Events at the bottom)",
        s.namespace, s.name
    );
    let mut out = Vec::new();
    match s.layer {
        Layer::Scheduling => {
            for m in &s.missing_labels {
                if let Some((k, v)) = m.split_once('=') {
                    out.push(format!(
                        "no node has label {m}: add `labels: {{{k}: {v}}}` to a node in the cluster file and run `clusterctl up` (or `kubectl label node NODE {m}`)"
                    ));
                } else {
                    out.push(format!("no node satisfies `{m}`: label a node to match, or relax the pod's node affinity"));
                }
            }
            for t in &s.untolerated_taints {
                out.push(format!(
                    "taint {t} is not tolerated by the pod: remove it from the node's `taints` in the cluster file and run `clusterctl up` (or `kubectl taint node NODE {}-`), or give the pod a toleration",
                    t.split(" on ").next().unwrap_or_default()
                ));
            }
            if s.untolerated_taints.is_empty() && s.message.contains("taint") {
                out.push("a taint is not tolerated: compare `kubectl describe nodes | grep Taints` with the pod's tolerations".into());
            }
            if s.message.contains("Insufficient") {
                out.push("not enough resources: compare the pod's requests with `kubectl describe nodes` (Allocated resources)".into());
            }
            out.push("kubectl get nodes --show-labels".into());
            out.push(describe);
        }
        Layer::Network => {
            out.push("the sandbox could not be created: check the nodes are Ready (`clusterctl status`) and the CNI config in /etc/cni/net.d on the node".into());
            out.push(describe);
        }
        Layer::Image => {
            let image = s.image.clone().unwrap_or_default();
            if s.reason == "FailedCreatePodSandBox" {
                out.push(format!(
                    "the node's runtime cannot get the pod sandbox (pause) image {image}: check the node reaches its registry (or mirror: spec.registry), or load it with `clusterctl image load -f cluster.yaml {image}`"
                ));
            }
            match &s.nodes_with_image {
                Some(ns) if ns.is_empty() => out.push(format!(
                    "no node has {image}: load it with `clusterctl image load -f cluster.yaml {image}` (the tag must match the pod spec exactly) or push it to the registry"
                )),
                Some(ns) => {
                    let on_node = s.node.as_ref().is_some_and(|n| ns.contains(n));
                    if !on_node {
                        out.push(format!(
                            "{image} is on {} but not on {}: `clusterctl image load -f cluster.yaml {image}` loads it on every node",
                            ns.join(", "),
                            s.node.as_deref().unwrap_or("the pod's node")
                        ));
                    }
                    if s.pull_policy.as_deref() == Some("Always") {
                        out.push(format!(
                            "imagePullPolicy is Always, so kubelet pulls even when the image is loaded: set `imagePullPolicy: IfNotPresent` (or a non-latest tag) for {image}"
                        ));
                    }
                }
                None => out.push(format!(
                    "could not ask the node runtimes for {image}: run `ctr -n k8s.io images ls | grep` on the node"
                )),
            }
            out.push("check the image: line of the manifest and the tag you built/loaded: all three must be the same".into());
            out.push(describe);
        }
        Layer::Container => {
            out.push("the container could not be created: a missing ConfigMap/Secret, a bad command or mount; the message names it".into());
            out.push(describe);
        }
        Layer::Application => {
            let c = s.container.clone().unwrap_or_default();
            if let Some(t) = &s.last_termination {
                if t.reason == "OOMKilled" || t.exit_code == 137 {
                    out.push("killed for memory (OOMKilled / exit 137): raise the container's memory limit or fix the leak".into());
                }
            }
            out.push(format!(
                "kubectl logs -n {} {} -c {c} --previous",
                s.namespace, s.name
            ));
            out.push(describe);
        }
    }
    out
}
