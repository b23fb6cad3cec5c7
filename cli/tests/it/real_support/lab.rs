//! The lab's checks on a docker-provider cluster (issue 27): local-path-provisioner is the default
//! StorageClass (a claim without a class is Bound, one pod writes to it, a second pod reads the data
//! back), and the local registry (an image pushed from this machine to `localhost:<port>` runs as a
//! pod under that very name; the KEP-1755 ConfigMap names the registry).

use std::time::Duration;

use clusterctl_testbed::docker::docker;

use super::{wait_for, Kube};

/// A free TCP port on 127.0.0.1 (bound, read, released) for the local registry.
pub(crate) fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// `pod` in `ns` reached `phase` (`Running`, `Succeeded`).
fn pod_phase(c: &dyn Kube, ns: &str, pod: &str, phase: &str) -> Result<(), String> {
    let got = c.kubectl(&format!(
        "-n {ns} get pod {pod} -o jsonpath='{{.status.phase}}' --ignore-not-found"
    ));
    if got == phase {
        Ok(())
    } else {
        let events = c.kubectl(&format!(
            "-n {ns} get events --field-selector involvedObject.name={pod} -o jsonpath='{{range .items[*]}}{{.reason}}: {{.message}}{{\"\\n\"}}{{end}}'"
        ));
        Err(format!("{ns}/{pod}: {got:?}\n{events}"))
    }
}

/// The default StorageClass at work: a PVC with no class is provisioned by local-path-provisioner
/// once its first pod is scheduled (WaitForFirstConsumer), that pod writes a file, and a new pod
/// mounting the same claim reads it back.
pub(crate) fn check_storage(c: &dyn Kube, image: &str) {
    let classes = c.kubectl(
        "get storageclass -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.annotations.storageclass\\.kubernetes\\.io/is-default-class}{\"\\n\"}{end}'",
    );
    assert!(
        classes.lines().any(|l| l.trim() == "local-path true"),
        "{classes}"
    );
    let pod = |name: &str, script: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  restartPolicy: Never\n  tolerations: [{{operator: Exists}}]\n  containers:\n  - name: c\n    image: {image}\n    command: [\"sh\", \"-c\", \"{script}\"]\n    volumeMounts: [{{name: d, mountPath: /data}}]\n  volumes:\n  - name: d\n    persistentVolumeClaim: {{claimName: lab-data}}\n"
        )
    };
    c.apply(&format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: lab-data}}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 16Mi}}}}\n---\n{}",
        pod("pv-writer", "echo written-by-the-first-pod > /data/proof")
    ));
    wait_for(
        "the PVC's writer pod Succeeded",
        Duration::from_secs(180),
        || pod_phase(c, "default", "pv-writer", "Succeeded"),
    );
    let bound =
        c.kubectl("get pvc lab-data -o jsonpath='{.status.phase} {.spec.storageClassName}'");
    assert_eq!(bound, "Bound local-path", "the claim");
    c.kubectl("delete pod pv-writer --wait=true");
    c.apply(&pod("pv-reader", "cat /data/proof"));
    wait_for(
        "the PVC's reader pod Succeeded",
        Duration::from_secs(120),
        || pod_phase(c, "default", "pv-reader", "Succeeded"),
    );
    assert_eq!(c.kubectl("logs pv-reader"), "written-by-the-first-pod");
}

/// The local registry: `source` (an image in this machine's Docker) tagged and pushed as
/// `localhost:<port>/app:dev`, then run by a pod under that name (each node's containerd maps
/// `localhost:<port>` to the registry container); the KEP-1755 ConfigMap names the same host.
pub(crate) fn check_registry(c: &dyn Kube, port: u16, source: &str) {
    let name = format!("localhost:{port}/app:dev");
    docker(&["tag", source, &name]).expect("docker tag");
    let pushed = docker(&["push", &name]);
    let _ = docker(&["rmi", &name]);
    pushed.expect("docker push to the local registry");
    c.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: from-local-registry}}\nspec:\n  tolerations: [{{operator: Exists}}]\n  containers:\n  - name: app\n    image: {name}\n    command: [\"sleep\", \"3600\"]\n"
    ));
    wait_for(
        "the pod of the pushed image Running",
        Duration::from_secs(120),
        || pod_phase(c, "default", "from-local-registry", "Running"),
    );
    let hosting = c.kubectl(
        "-n kube-public get configmap local-registry-hosting -o jsonpath='{.data.localRegistryHosting\\.v1}'",
    );
    assert!(
        hosting.contains(&format!("host: \"localhost:{port}\"")),
        "{hosting}"
    );
}

/// Every regular file under `dir` (recursively) with its text.
fn files_under(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let text = String::from_utf8_lossy(&std::fs::read(&p).expect("read")).into_owned();
                out.push((
                    p.strip_prefix(dir).expect("prefix").display().to_string(),
                    text,
                ));
            }
        }
    }
    out
}

/// Runs `export logs -f file DIR` and unpacks the archive it names into a fresh directory: (the run's
/// output, the unpacked `clusterctl-logs/` files).
fn export(
    cc: &clusterctl_testbed::cli::Clusterctl,
    file: &str,
    dir: &std::path::Path,
) -> (String, Vec<(String, String)>) {
    let run = cc
        .run(&["export", "logs", "-f", file, &dir.to_string_lossy()])
        .expect("export logs");
    assert_eq!(run.code, 0, "export logs:\n{}", run.all());
    let archive = std::fs::read_dir(dir)
        .expect("dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".tar.gz"))
        .unwrap_or_else(|| panic!("no archive in {}: {}", dir.display(), run.all()));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&archive)
        .expect("archive")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the archive's mode");
    let out = dir.join("unpacked");
    std::fs::create_dir_all(&out).expect("mkdir");
    let st = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(&out)
        .status()
        .expect("tar");
    assert!(st.success(), "tar -xzf {}", archive.display());
    (run.all(), files_under(&out.join("clusterctl-logs")))
}

/// `export logs` on the running cluster: a crash-looping pod's log is in the archive, with the
/// kubelet's and the runtime's logs, `crictl ps -a`, the placed files, the state record, `status` and
/// the events; no join token, certificate key or encryption key is in any file. With `pause` stopping a
/// node (`pause(true)`, `pause(false)` to resume), the export still writes the rest and says which node
/// is missing.
pub(crate) fn check_export_logs(
    c: &dyn Kube,
    cc: &clusterctl_testbed::cli::Clusterctl,
    file: &str,
    image: &str,
    pause: &dyn Fn(bool),
) {
    c.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: crashy}}\nspec:\n  tolerations: [{{operator: Exists}}]\n  containers:\n  - name: c\n    image: {image}\n    command: [\"sh\", \"-c\", \"echo crash-marker-of-the-lab-test; exit 3\"]\n"
    ));
    wait_for(
        "the crash-looping pod restarted",
        Duration::from_secs(120),
        || {
            let n = c.kubectl(
                "get pod crashy -o jsonpath='{.status.containerStatuses[0].restartCount}'",
            );
            match n.parse::<u32>() {
                Ok(n) if n >= 1 => Ok(()),
                _ => Err(format!("restarts: {n:?}")),
            }
        },
    );
    let first = &c.node_names()[0];
    // The secrets the archive must not hold: every bootstrap token, and the encryption key.
    let tokens = c.node_sh(
        first,
        "kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system get secrets --field-selector type=bootstrap.kubernetes.io/token -o jsonpath='{range .items[*]}{.data.token-id} {.data.token-secret}{\"\\n\"}{end}' | while read -r i s; do [ -n \"$i\" ] && echo \"$(echo \"$i\" | base64 -d).$(echo \"$s\" | base64 -d)\"; done; true",
    );
    let enc_key = c.node_sh(
        first,
        "sed -n 's/^ *secret: *//p' /etc/kubernetes/enc/encryption.yaml | tr -d '\"' | head -n 1",
    );
    assert!(!enc_key.is_empty(), "no encryption key on {first}");
    let mut secrets: Vec<String> = tokens.lines().map(str::to_string).collect();
    secrets.push(enc_key);
    let dir = tempfile::tempdir().expect("tempdir");
    let (said, files) = export(cc, file, dir.path());
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    let crash_log = files
        .iter()
        .find(|(n, t)| n.contains("default_crashy_") && t.contains("crash-marker-of-the-lab-test"));
    assert!(crash_log.is_some(), "no crash log in {names:?}\n{said}");
    for want in [
        format!("nodes/{first}/kubelet.log"),
        format!("nodes/{first}/containerd.log"),
        format!("nodes/{first}/crictl-ps.txt"),
        format!("nodes/{first}/state.json"),
        format!("nodes/{first}/files/etc/kubernetes/enc/encryption.yaml"),
        "cluster/status.yaml".to_string(),
        "cluster/events.yaml".to_string(),
    ] {
        assert!(names.contains(&want.as_str()), "{want} missing: {names:?}");
    }
    for (n, t) in &files {
        for s in &secrets {
            assert!(!t.contains(s.as_str()), "{n} holds a secret");
        }
        for l in t
            .lines()
            .filter(|l| l.contains("certificateKey") || l.contains("certificate-key"))
        {
            assert!(l.contains('<'), "{n}: a certificate key is not masked: {l}");
        }
    }
    assert!(!said.contains("PARTIAL"), "{said}");
    // One node stopped: the rest is exported, the missing node said.
    let gone = c.node_names().last().cloned().expect("a node");
    pause(true);
    let dir2 = tempfile::tempdir().expect("tempdir");
    let partial = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        export(cc, file, dir2.path())
    }));
    pause(false);
    let (said, files) = partial.unwrap_or_else(|e| std::panic::resume_unwind(e));
    assert!(
        said.contains(&format!("{gone}: 0 file(s), PARTIAL")),
        "{said}"
    );
    assert!(
        files
            .iter()
            .any(|(n, _)| n == &format!("nodes/{gone}/UNREACHABLE.txt")),
        "{said}"
    );
    assert!(
        files
            .iter()
            .any(|(n, _)| n == &format!("nodes/{first}/kubelet.log")),
        "{said}"
    );
    c.kubectl("delete pod crashy --wait=true");
}
