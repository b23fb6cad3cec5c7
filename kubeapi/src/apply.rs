//! Objects of any kind through the `kube` client: server-side apply (field manager `clusterctl`,
//! conflicts forced, as `kubectl apply --server-side --force-conflicts`), and reads by
//! `apiVersion`/`kind`, each kind's resource found through discovery (cached per client). An apply
//! tells whether it created, changed or left the object as it was ([`Applied`]). This is how
//! `up` installs a third-party CNI's manifests and waits for their CRDs and status objects.

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{self, ApiCapabilities, Scope};
use serde_json::Value;

use crate::api::{ApiError, Applied};
use crate::kube_impl::{KubeClusterApi, FIELD_MANAGER};

/// `kind namespace/name` or `kind name`, for messages.
fn describe(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// `o` as JSON without what the server changes on every write (`metadata.resourceVersion`), its
/// field-ownership bookkeeping (`metadata.managedFields`) and the `status` controllers write: what an
/// apply may have configured.
fn content(o: &DynamicObject) -> Option<Value> {
    let mut v = serde_json::to_value(o).ok()?;
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
    }
    Some(v)
}

fn gvk(api_version: &str, kind: &str) -> GroupVersionKind {
    match api_version.split_once('/') {
        Some((g, v)) => GroupVersionKind::gvk(g, v, kind),
        None => GroupVersionKind::gvk("", api_version, kind),
    }
}

impl KubeClusterApi {
    /// The resource serving `kind` in `api_version`. Errors: discovery failed, or the server has no
    /// such kind (e.g. its CRD is not established yet): [`ApiError::Status`] with code 404.
    fn resource(
        &self,
        call: &str,
        api_version: &str,
        kind: &str,
    ) -> Result<(ApiResource, ApiCapabilities), ApiError> {
        let key = format!("{api_version} {kind}");
        if let Some(r) = self
            .resources
            .lock()
            .ok()
            .and_then(|m| m.get(&key).cloned())
        {
            return Ok(r);
        }
        let found = self.rt.block_on(discovery::pinned_kind(
            &self.client,
            &gvk(api_version, kind),
        ));
        let r = match found {
            Ok(r) => r,
            Err(kube::Error::Api(s)) if s.code == 404 => {
                return Err(ApiError::Status {
                    call: call.to_string(),
                    code: 404,
                    reason: "NotFound".into(),
                    message: format!("the server has no resource for {kind} in {api_version}"),
                })
            }
            Err(kube::Error::Discovery(e)) => {
                return Err(ApiError::Status {
                    call: call.to_string(),
                    code: 404,
                    reason: "NotFound".into(),
                    message: format!("the server has no resource for {kind} in {api_version}: {e}"),
                })
            }
            Err(e) => return Err(self.map_err(call, e)),
        };
        if let Ok(mut m) = self.resources.lock() {
            m.insert(key, r.clone());
        }
        Ok(r)
    }

    fn dynamic_api(
        &self,
        ar: &ApiResource,
        caps: &ApiCapabilities,
        namespace: Option<&str>,
    ) -> Api<DynamicObject> {
        match (&caps.scope, namespace) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, ar),
            (Scope::Namespaced, None) => Api::default_namespaced_with(self.client.clone(), ar),
            (Scope::Cluster, _) => Api::all_with(self.client.clone(), ar),
        }
    }

    /// Server-side applies `object` (a whole object with `apiVersion`, `kind`, `metadata.name`) with
    /// strict field validation (`fieldValidation=Strict`: an undeclared or duplicate field is an
    /// error) and tells what it did: the object is read first (absent: [`Applied::Created`]), and its
    /// resourceVersion compared with the one the apply returns (equal: [`Applied::Unchanged`], as a
    /// server-side apply that changes nothing writes nothing). A moved resourceVersion is
    /// [`Applied::Configured`] unless the object is otherwise the same apart from its
    /// `managedFields` and `status`: the API server (v1.34) writes once, on the second apply, to an
    /// object whose applied configuration owns no field (e.g. a Namespace with only a name), only to
    /// record a `before-first-apply` field manager; and a controller may write the status between
    /// the read and the apply.
    pub(crate) fn apply_object(&self, object: &Value) -> Result<Applied, ApiError> {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let ns = object["metadata"]["namespace"].as_str();
        let call = format!("apply {}", describe(kind, ns, name));
        if api_version.is_empty() || kind.is_empty() || name.is_empty() {
            return Err(ApiError::Transport {
                call,
                reason: "the object has no apiVersion, kind or metadata.name".into(),
            });
        }
        let (ar, caps) = self.resource(&call, api_version, kind)?;
        let api = self.dynamic_api(&ar, &caps, ns);
        // Strict field validation: a field the kind's schema does not declare (a misspelled value
        // passed through from the cluster file) fails the apply instead of being dropped.
        let pp = PatchParams::apply(FIELD_MANAGER)
            .force()
            .validation_strict();
        let (before, after) = self
            .rt
            .block_on(async {
                let before = api.get_opt(name).await?;
                let after = api.patch(name, &pp, &Patch::Apply(object)).await?;
                Ok::<_, kube::Error>((before, after))
            })
            .map_err(|e| self.map_err(&call, e))?;
        Ok(match before {
            None => Applied::Created,
            Some(b) if b.metadata.resource_version == after.metadata.resource_version => {
                Applied::Unchanged
            }
            Some(b) if content(&b).is_some_and(|c| Some(c) == content(&after)) => {
                Applied::Unchanged
            }
            Some(_) => Applied::Configured,
        })
    }

    /// The object `kind` `name` (in `namespace` for namespaced kinds) as JSON; `None` when it or its
    /// kind does not exist.
    pub(crate) fn get_object(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, ApiError> {
        let call = format!("get {}", describe(kind, namespace, name));
        let (ar, caps) = match self.resource(&call, api_version, kind) {
            Ok(r) => r,
            Err(ApiError::Status { code: 404, .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let api = self.dynamic_api(&ar, &caps, namespace);
        match self.rt.block_on(async { api.get_opt(name).await }) {
            Ok(Some(o)) => serde_json::to_value(o)
                .map(Some)
                .map_err(|e| ApiError::Transport {
                    call,
                    reason: e.to_string(),
                }),
            Ok(None) => Ok(None),
            Err(e) => Err(self.map_err(&call, e)),
        }
    }

    /// Every object of `kind` (all namespaces); empty when the kind does not exist.
    pub(crate) fn list_objects(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Vec<Value>, ApiError> {
        let call = format!("list {kind} ({api_version})");
        let (ar, _) = match self.resource(&call, api_version, kind) {
            Ok(r) => r,
            Err(ApiError::Status { code: 404, .. }) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
        let list = self
            .rt
            .block_on(async { api.list(&ListParams::default()).await })
            .map_err(|e| self.map_err(&call, e))?;
        list.items
            .into_iter()
            .map(|o| {
                serde_json::to_value(o).map_err(|e| ApiError::Transport {
                    call: call.clone(),
                    reason: e.to_string(),
                })
            })
            .collect()
    }
}
