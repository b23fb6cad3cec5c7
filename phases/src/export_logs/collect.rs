//! What `export logs` gathers on one node: a shell script ([`script`]) run through the node's
//! `Transport` that writes a tar of the node's diagnostics to standard output — the kubelet's and
//! the runtime's journals (or their log files where a node container has no journald), `crictl ps
//! -a` and `crictl pods`, every container log under `/var/log/pods` (static pods included), the
//! files clusterctl and kubeadm placed (kubeadm configs, static-pod manifests, the runtime's and the
//! kubelet's configuration, CNI configuration; never a kubeconfig, a key or `pki/`) and clusterctl's
//! state record — each file cut to its last [`FILE_CAP`] bytes. [`entries`] reads that tar back,
//! every text masked ([`super::mask`]).

use std::io::Read;

use super::mask::mask;

/// The most bytes kept of one file (its end: the newest lines of a log).
pub const FILE_CAP: u64 = 2 * 1024 * 1024;

/// The node's collection script for `runtime_unit` (`containerd` or `crio`).
pub fn script(runtime_unit: &str) -> String {
    format!(
        r#"set -u
cap={FILE_CAP}
d=$(mktemp -d /tmp/clusterctl-logs.XXXXXX) || exit 1
trap 'rm -rf "$d"' EXIT
journal() {{
  if command -v journalctl >/dev/null 2>&1 && [ -n "$(journalctl -u "$1" --no-pager -q -n 1 2>/dev/null)" ]; then
    journalctl -u "$1" --no-pager -q 2>&1 | tail -c "$cap" >"$d/$1.log"
  elif [ -f "/var/log/$1.log" ]; then
    tail -c "$cap" "/var/log/$1.log" >"$d/$1.log"
  else
    echo "no journal of $1 and no /var/log/$1.log on this node" >"$d/$1.log"
  fi
}}
journal kubelet
journal {runtime_unit}
crictl ps -a >"$d/crictl-ps.txt" 2>&1 || true
crictl pods >"$d/crictl-pods.txt" 2>&1 || true
for f in /var/log/pods/*/*/*.log; do
  [ -f "$f" ] || continue
  rel=${{f#/var/log/pods/}}
  mkdir -p "$d/pods/$(dirname "$rel")"
  tail -c "$cap" "$f" >"$d/pods/$rel"
done
for f in /etc/kubernetes/kubeadm/*.yaml /etc/kubernetes/manifests/*.yaml /etc/kubernetes/enc/*.yaml \
         /etc/kubernetes/audit/*.yaml /etc/kubernetes/authn/*.yaml /var/lib/kubelet/config.yaml \
         /var/lib/kubelet/kubeadm-flags.env /etc/containerd/config.toml /etc/containerd/certs.d/*/hosts.toml \
         /etc/crio/crio.conf /etc/cni/net.d/* /etc/sysctl.d/*.conf /etc/modules-load.d/*.conf \
         /etc/systemd/system/kubelet.service.d/*.conf /etc/systemd/system/containerd.service.d/*.conf; do
  [ -f "$f" ] || continue
  mkdir -p "$d/files$(dirname "$f")"
  tail -c "$cap" "$f" >"$d/files$f"
done
[ -f /var/lib/clusterctl/state.json ] && tail -c "$cap" /var/lib/clusterctl/state.json >"$d/state.json"
tar -C "$d" -cf - .
"#
    )
}

/// One file of a node's collection: its path below the node's folder and its (masked) bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative path, e.g. `kubelet.log`, `pods/default_x_uid/c/0.log`.
    pub path: String,
    /// The content, masked.
    pub data: Vec<u8>,
}

/// The regular files of the tar the script wrote, each masked. Errors: the bytes are no tar.
pub fn entries(tar_bytes: &[u8]) -> std::io::Result<Vec<Entry>> {
    let mut archive = tar::Archive::new(tar_bytes);
    let mut out = Vec::new();
    for e in archive.entries()? {
        let mut e = e?;
        if !e.header().entry_type().is_file() {
            continue;
        }
        let path = e
            .path()?
            .to_string_lossy()
            .trim_start_matches("./")
            .to_string();
        let mut raw = Vec::new();
        e.by_ref().take(FILE_CAP).read_to_end(&mut raw)?;
        out.push(Entry {
            path,
            data: mask(&String::from_utf8_lossy(&raw)).into_bytes(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_runs_here_and_its_tar_reads_back_masked() {
        // Run where this test runs: no kubelet, no crictl; the script still writes its tar.
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(script("containerd"))
            .output()
            .expect("sh");
        let got = entries(&out.stdout).expect("tar");
        let names: Vec<&str> = got.iter().map(|e| e.path.as_str()).collect();
        for want in [
            "kubelet.log",
            "containerd.log",
            "crictl-ps.txt",
            "crictl-pods.txt",
        ] {
            assert!(names.contains(&want), "{names:?}");
        }
    }

    #[test]
    fn entries_are_masked() {
        let mut b = tar::Builder::new(Vec::new());
        let data = b"token: abcdef.0123456789abcdef\n";
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o600);
        h.set_cksum();
        b.append_data(
            &mut h,
            "./files/etc/kubernetes/kubeadm/join.yaml",
            &data[..],
        )
        .expect("append");
        let bytes = b.into_inner().expect("tar");
        let got = entries(&bytes).expect("entries");
        assert_eq!(got[0].path, "files/etc/kubernetes/kubeadm/join.yaml");
        assert_eq!(got[0].data, b"token: <masked>\n");
    }
}
