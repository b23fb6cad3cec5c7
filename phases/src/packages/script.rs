//! The files and commands of the packages machinery, rendered as text (the phases place the files with
//! `NodeCtx::put_file` and run the commands with `NodeCtx::run`, so a dry run lists each). Debian and
//! Ubuntu: an apt source per repository with `signed-by=` its own keyring (the repository's key
//! downloaded over HTTPS and dearmored, as upstream documents), `apt-get update` of that source only
//! (the distribution's sources are not refreshed: a site may not reach them), `apt-get install` with
//! the pinned versions, `apt-mark hold`. EL 8/9: a yum repository file with `gpgcheck=1`, the
//! repository's `gpgkey` (imported by dnf) and `exclude=` of the held packages, `dnf install
//! --disableexcludes=<repo>`. The containerd and runc release archives are downloaded with their
//! published sha256 files and checked before anything is unpacked.

use std::fmt::Write as _;

use super::table::{self, host_of, locate};
use super::{
    Family, APT_KEYRING, APT_LIST, APT_MIRROR_CONF, ARCHIVE_FILES, CONTAINERD_ARCHIVE_UNIT,
    CRIO_APT_KEYRING, CRIO_APT_LIST, CRIO_YUM_REPO, EXTRAS, MIRROR_CA, PINNED, RECORD_DIR,
    YUM_REPO,
};
use clusterctl_exec::shell::quote_word;

/// The packages the record and `destroy --purge` consider.
const RECORDED: &str =
    "kubeadm kubelet kubectl cri-tools kubernetes-cni containerd containerd.io runc cri-o";

/// The files `up` may place for packages (each removed by `destroy --purge` unless it existed before).
pub fn managed_files() -> Vec<&'static str> {
    let mut v = vec![
        APT_LIST,
        APT_KEYRING,
        CRIO_APT_LIST,
        CRIO_APT_KEYRING,
        YUM_REPO,
        CRIO_YUM_REPO,
        APT_MIRROR_CONF,
        MIRROR_CA,
    ];
    v.extend_from_slice(ARCHIVE_FILES);
    v
}

/// Shell functions the download steps use: `fetch URL FILE` — curl when installed, else apt's own
/// downloader (`apt-helper download-file`, which follows apt's configuration, the mirror's CA
/// included), else wget — with `$CACERT` (the mirror's CA) when set; `dearmor IN OUT` — `gpg
/// --dearmor`, or without gpg the same by hand (the armor's base64 body, without its headers and
/// checksum line, decoded).
pub const FUNCTIONS: &str = r#"fetch() {
  if command -v curl >/dev/null 2>&1; then curl -fsSL --retry 3 ${CACERT:+--cacert "$CACERT"} -o "$2" "$1"
  elif [ -x /usr/lib/apt/apt-helper ]; then /usr/lib/apt/apt-helper -qq download-file "$1" "$2"
  elif command -v wget >/dev/null 2>&1; then wget -q ${CACERT:+--ca-certificate="$CACERT"} -O "$2" "$1"
  else echo "no curl, wget or apt-helper to download $1" >&2; return 1; fi
}
dearmor() {
  if command -v gpg >/dev/null 2>&1; then gpg --batch --yes --dearmor -o "$2" "$1"
  else sed -n '/^-----BEGIN PGP PUBLIC KEY BLOCK-----/,/^-----END PGP PUBLIC KEY BLOCK-----/p' "$1" \
    | sed '1d;$d' | sed '/^[A-Za-z-]*: /d;/^[[:space:]]*$/d;/^=/d' | base64 -d > "$2"; fi
}"#;

fn with_functions(ca: bool, body: &str) -> String {
    let mut s = String::from("set -eu\n");
    if ca {
        let _ = writeln!(s, "CACERT={MIRROR_CA}");
    }
    s.push_str(FUNCTIONS);
    s.push('\n');
    s.push_str(body);
    s
}

/// The apt source line of a flat repository at `repo`, signed by `keyring` (pkgs.k8s.io and CRI-O
/// repositories are flat: `deb [signed-by=…] URL /`).
pub fn apt_source(repo: &str, keyring: &str) -> String {
    format!("deb [signed-by={keyring}] {repo} /\n")
}

/// apt's setting trusting the mirror's CA for the mirror's host only.
pub fn apt_mirror_conf(mirror: &str) -> String {
    let host = host_of(mirror);
    let host = host.split(':').next().unwrap_or(host);
    format!(
        "// clusterctl: the package mirror's CA (packages.mirror.caFile)\nAcquire::https::{host}::CaInfo \"{MIRROR_CA}\";\n"
    )
}

/// A yum repository file: `[id]` at `repo` with `gpgcheck=1`, its key, `exclude=` of `held` (so an OS
/// update cannot move them; installs use `--disableexcludes=<id>`), and the mirror's CA when given.
pub fn yum_repo(id: &str, name: &str, repo: &str, held: &[&str], ca: bool) -> String {
    let mut s = format!(
        "[{id}]\nname={name}\nbaseurl={repo}\nenabled=1\ngpgcheck=1\nrepo_gpgcheck=1\ngpgkey={}\n",
        table::key_url(repo)
    );
    if !held.is_empty() {
        let _ = writeln!(s, "exclude={}", held.join(" "));
    }
    if ca {
        let _ = writeln!(s, "sslcacert={MIRROR_CA}");
    }
    s
}

/// The Kubernetes repository of `minor` for `family`, under the mirror when given.
pub fn kubernetes_repo(minor: (u64, u64), family: Family, mirror: Option<&str>) -> String {
    locate(&table::kubernetes_repo(minor, family.format()), mirror)
}

/// CRI-O's repository of `minor` for `family`, under the mirror when given.
pub fn crio_repo(minor: (u64, u64), family: Family, mirror: Option<&str>) -> Option<String> {
    let row = table::row(minor)?;
    Some(locate(
        &format!("{}{}/", row.crio_repo, family.format()),
        mirror,
    ))
}

/// The repository file (path, content) of Kubernetes `minor` for `family`.
pub fn kubernetes_repo_file(
    minor: (u64, u64),
    family: Family,
    mirror: Option<&str>,
    ca: bool,
) -> (&'static str, String) {
    let repo = kubernetes_repo(minor, family, mirror);
    match family {
        Family::Debian => (APT_LIST, apt_source(&repo, APT_KEYRING)),
        Family::El => {
            let mut held: Vec<&str> = PINNED.to_vec();
            held.extend(EXTRAS);
            (
                YUM_REPO,
                yum_repo("kubernetes", "Kubernetes", &repo, &held, ca),
            )
        }
    }
}

/// The repository file (path, content) of CRI-O for `minor`.
pub fn crio_repo_file(
    minor: (u64, u64),
    family: Family,
    mirror: Option<&str>,
    ca: bool,
) -> Option<(&'static str, String)> {
    let repo = crio_repo(minor, family, mirror)?;
    Some(match family {
        Family::Debian => (CRIO_APT_LIST, apt_source(&repo, CRIO_APT_KEYRING)),
        Family::El => (
            CRIO_YUM_REPO,
            yum_repo("cri-o", "CRI-O", &repo, &["cri-o"], ca),
        ),
    })
}

/// Downloads the repository key at `repo`'s key URL and installs it dearmored as `keyring` (0644,
/// directory `/etc/apt/keyrings` 0755), replacing it atomically.
pub fn apt_key(repo: &str, keyring: &str, ca: bool) -> String {
    let url = table::key_url(repo);
    with_functions(
        ca,
        &format!(
            "d=$(mktemp -d); trap 'rm -rf \"$d\"' EXIT\n\
             mkdir -p -m 755 /etc/apt/keyrings\n\
             fetch {url} \"$d/key\"\n\
             dearmor \"$d/key\" \"$d/keyring\"\n\
             install -m 0644 \"$d/keyring\" {keyring}.new && mv {keyring}.new {keyring}\n",
            url = quote_word(&url),
            keyring = quote_word(keyring)
        ),
    )
}

/// `apt-get update` of one source file only (its lists refreshed; other sources left as they are).
/// apt reports a repository whose signature does not verify (a tampered `InRelease`, another key) or
/// that cannot be fetched only as a warning and keeps the previous lists, exiting 0: such a warning
/// fails the step here, with apt's words, so `up` says which node and why instead of installing from
/// stale lists or failing later with "Unable to locate package".
pub fn apt_update(list: &str) -> String {
    [
        format!("out=$(apt-get update -q -o Dir::Etc::sourcelist={list} -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 2>&1); rc=$?"),
        "printf '%s\\n' \"$out\"".to_string(),
        "if [ $rc -ne 0 ] || printf '%s\\n' \"$out\" | grep -qE '^(W: (GPG error|An error occurred during the signature verification|Failed to fetch)|E: )'; then".to_string(),
        format!("  echo \"apt could not refresh {list} from a repository with a valid signature (apt's messages above)\" >&2; exit 1"),
        "fi".to_string(),
    ]
    .join("\n")
}

fn spec(family: Family, name: &str, version: Option<&str>) -> String {
    match (family, version) {
        (_, None) => name.to_string(),
        (Family::Debian, Some(v)) => format!("{name}='{v}-*'"),
        (Family::El, Some(v)) => format!("{name}-'{v}-*'"),
    }
}

/// Installs `packages` (name, exact upstream version for the pinned ones: any package revision of
/// it, e.g. `1.34.4-1.1`) from the Kubernetes repository. apt: held packages may change, and with
/// `downgrade` go down; dnf: `--disableexcludes=kubernetes`, and `dnf downgrade` for the pinned ones
/// when `downgrade`.
pub fn install(family: Family, packages: &[(String, Option<String>)], downgrade: bool) -> String {
    let specs: Vec<String> = packages
        .iter()
        .map(|(n, v)| spec(family, n, v.as_deref()))
        .collect();
    match family {
        Family::Debian => format!(
            "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-change-held-packages{} {}",
            if downgrade { " --allow-downgrades" } else { "" },
            specs.join(" ")
        ),
        Family::El if downgrade => {
            let (pinned, other): (Vec<_>, Vec<_>) =
                packages.iter().partition(|(_, v)| v.is_some());
            let mut s = format!(
                "dnf downgrade -y --disableexcludes=kubernetes {}",
                pinned
                    .iter()
                    .map(|(n, v)| spec(family, n, v.as_deref()))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            if !other.is_empty() {
                let _ = write!(
                    s,
                    " && dnf install -y --disableexcludes=kubernetes {}",
                    other
                        .iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join(" ")
                );
            }
            s
        }
        Family::El => format!(
            "dnf install -y --disableexcludes=kubernetes {}",
            specs.join(" ")
        ),
    }
}

/// Holds `names` so that an OS update cannot move them. apt: `apt-mark hold`; EL: the repository
/// file's `exclude=` already does (`None`).
pub fn hold(family: Family, names: &[String]) -> Option<String> {
    match family {
        Family::Debian if !names.is_empty() => Some(format!("apt-mark hold {}", names.join(" "))),
        _ => None,
    }
}

/// For `upgrade` with `packages.source: preinstalled` (packages the user installed from the
/// Kubernetes repository, as the kubeadm upgrade guide has it): the node's own Kubernetes repository
/// switched in place to `minor`'s (`/vX.Y/deb/` or `/vX.Y/rpm/` in its apt source or yum repository
/// file, whichever exists), then apt's lists refreshed (all sources: the file is the user's).
pub fn switch_repository(family: Family, minor: (u64, u64)) -> String {
    let v = clusterctl_spec::versions::minor_tag(minor.0, minor.1);
    match family {
        Family::Debian => [
            format!("for f in {APT_LIST} /etc/apt/sources.list.d/kubernetes.sources; do"),
            format!(
                "  if [ -f \"$f\" ]; then sed -i -E 's#/v1\\.[0-9]+/deb/#/{v}/deb/#' \"$f\"; fi"
            ),
            "done".to_string(),
            "apt-get update -q".to_string(),
        ]
        .join("\n"),
        Family::El => format!(
            "if [ -f {YUM_REPO} ]; then sed -i -E 's#/v1\\.[0-9]+/rpm/#/{v}/rpm/#' {YUM_REPO}; fi"
        ),
    }
}

/// For `upgrade` from the air-gap bundle: `names` at exactly `version` from the package files the
/// bundle placed under `dir` (`dir/<name>_<version>-*.deb` with `dpkg -i`, the holds moved with them;
/// `dir/<name>-<version>-*.rpm` with `rpm -U --oldpackage --replacepkgs`). Fails, in words, when the
/// bundle has no such file for the node.
pub fn bundle_install(family: Family, dir: &str, names: &[&str], version: &str) -> String {
    let joined = names.join(" ");
    let (files, format) = match family {
        Family::Debian => (
            names
                .iter()
                .map(|p| format!("{dir}/{p}_{version}-*.deb"))
                .collect::<Vec<_>>(),
            "deb",
        ),
        Family::El => (
            names
                .iter()
                .map(|p| format!("{dir}/{p}-{version}-*.rpm"))
                .collect::<Vec<_>>(),
            "rpm",
        ),
    };
    let files = files.join(" ");
    let mut lines = vec![format!(
        "ls {files} >/dev/null 2>&1 || {{ echo 'the bundle has no {joined} {version} .{format} for this node' >&2; exit 1; }}"
    )];
    match family {
        Family::Debian => {
            lines.push(format!("apt-mark unhold {joined} >/dev/null 2>&1 || true"));
            lines.push(format!("dpkg -i {files}"));
            lines.push(format!("apt-mark hold {joined}"));
        }
        Family::El => lines.push(format!("rpm -U --oldpackage --replacepkgs {files}")),
    }
    lines.join("\n")
}

/// `systemctl enable kubelet` (kubeadm starts it; until then it would only restart in a loop).
pub const ENABLE_KUBELET: &str = "systemctl enable kubelet";

/// The distribution's containerd at its candidate `version`, held.
pub fn distro_containerd(version: &str) -> String {
    format!(
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q containerd={} && apt-mark hold containerd",
        quote_word(version)
    )
}

/// The containerd unit for the release archive (written by clusterctl; the settings are those of
/// containerd's own `containerd.service`).
pub const CONTAINERD_UNIT: &str = "[Unit]
Description=containerd container runtime (release archive, placed by clusterctl)
Documentation=https://containerd.io
After=network.target local-fs.target

[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/local/bin/containerd
Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=5
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
OOMScoreAdjust=-999

[Install]
WantedBy=multi-user.target
";

/// Installs the containerd `containerd` and runc `runc` release archives for `arch`: each downloaded
/// with its published sha256 file and checked (`sha256sum -c`) before it is used; containerd
/// unpacked into `/usr/local` (`bin/…`), runc installed as `/usr/local/sbin/runc`, the unit placed
/// and enabled (the runtime phase starts it with its configuration). `remove`: packages removed
/// first (an older containerd being replaced).
pub fn containerd_archive(
    containerd: &str,
    runc: &str,
    arch: &str,
    mirror: Option<&str>,
    ca: bool,
    family: Family,
    remove: &[String],
) -> String {
    let (tgz, tgz_sum) = table::containerd_archive(containerd, arch);
    let (runc_url, runc_sum) = table::runc_binary(runc, arch);
    let (tgz, tgz_sum) = (locate(&tgz, mirror), locate(&tgz_sum, mirror));
    let (runc_url, runc_sum) = (locate(&runc_url, mirror), locate(&runc_sum, mirror));
    let file = format!("containerd-{containerd}-linux-{arch}.tar.gz");
    let mut body = String::new();
    if !remove.is_empty() {
        let _ = writeln!(
            body,
            "systemctl stop containerd 2>/dev/null || true\n{}",
            match family {
                Family::Debian => format!(
                    "apt-mark unhold {r} >/dev/null 2>&1 || true\nDEBIAN_FRONTEND=noninteractive apt-get remove -y -q {r}",
                    r = remove.join(" ")
                ),
                Family::El => format!("dnf remove -y {}", remove.join(" ")),
            }
        );
    }
    let _ = write!(
        body,
        "d=$(mktemp -d); trap 'rm -rf \"$d\"' EXIT\n\
         cd \"$d\"\n\
         fetch {tgz} {file}\n\
         fetch {tgz_sum} {file}.sha256sum\n\
         sha256sum -c --strict {file}.sha256sum\n\
         fetch {runc_url} runc.{arch}\n\
         fetch {runc_sum} runc.sha256sum\n\
         grep -E '[ *]runc\\.{arch}$' runc.sha256sum | sed 's/ \\*/  /' > runc.{arch}.sha256sum\n\
         [ -s runc.{arch}.sha256sum ] || {{ echo 'runc.sha256sum lists no runc.{arch}' >&2; exit 1; }}\n\
         sha256sum -c --strict runc.{arch}.sha256sum\n\
         tar -C /usr/local -xzf {file} --no-same-owner\n\
         install -m 0755 runc.{arch} /usr/local/sbin/runc\n\
         mkdir -p /usr/local/lib/systemd/system {RECORD_DIR}\n\
         cat > {CONTAINERD_ARCHIVE_UNIT}.new <<'UNIT'\n{CONTAINERD_UNIT}UNIT\n\
         mv {CONTAINERD_ARCHIVE_UNIT}.new {CONTAINERD_ARCHIVE_UNIT}\n\
         echo 'containerd {containerd} runc {runc}' > {RECORD_DIR}/containerd-archive\n\
         systemctl daemon-reload\n\
         systemctl enable containerd\n",
        tgz = quote_word(&tgz),
        tgz_sum = quote_word(&tgz_sum),
        runc_url = quote_word(&runc_url),
        runc_sum = quote_word(&runc_sum),
    );
    with_functions(ca, &body)
}

/// Installs CRI-O from its repository (the repository file placed before; apt: its source refreshed,
/// `apt-mark hold cri-o`), enabled.
pub fn crio_install(family: Family, downgrade: bool) -> String {
    match family {
        Family::Debian => format!(
            "{}\nDEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-change-held-packages{} cri-o && apt-mark hold cri-o && systemctl enable crio",
            apt_update(CRIO_APT_LIST),
            if downgrade { " --allow-downgrades" } else { "" }
        ),
        Family::El => "dnf install -y --disableexcludes=cri-o cri-o && systemctl enable crio".into(),
    }
}

/// Writes, once (never overwritten), what the node had before `up` changed its packages:
/// `installed NAME VERSION`, `held NAME` and `existed PATH` lines in `RECORD_DIR/before` (0600,
/// directory 0700). `destroy --purge` puts the node back to it ([`purge`]).
pub fn record() -> String {
    let files = managed_files().join(" ");
    format!(
        "d={RECORD_DIR}\n\
         if [ ! -f \"$d/before\" ]; then\n\
         \x20 mkdir -p \"$d\" && chmod 700 \"$d\"\n\
         \x20 {{\n\
         \x20   P=\"{RECORDED}\"\n\
         \x20   if command -v dpkg-query >/dev/null 2>&1; then\n\
         \x20     dpkg-query -W -f='${{db:Status-Abbrev}}|${{Package}} ${{Version}}\\n' $P 2>/dev/null | sed -n 's/^[hi]i *|/installed /p'\n\
         \x20     apt-mark showhold 2>/dev/null | sed 's/^/held /'\n\
         \x20   elif command -v rpm >/dev/null 2>&1; then\n\
         \x20     for p in $P; do rpm -q --qf 'installed %{{NAME}} %{{VERSION}}-%{{RELEASE}}\\n' \"$p\" 2>/dev/null | grep '^installed ' || true; done\n\
         \x20   fi\n\
         \x20   for f in {files}; do if [ -e \"$f\" ]; then echo \"existed $f\"; fi; done\n\
         \x20 }} > \"$d/before.tmp\"\n\
         \x20 chmod 600 \"$d/before.tmp\" && mv \"$d/before.tmp\" \"$d/before\"\n\
         fi"
    )
}

/// `destroy --purge`: with the record `up` wrote ([`record`]), puts the node's packages back as they
/// were before `up` — the packages `up` installed purged (`dpkg --purge` / `dnf remove`), holds it
/// added released, the containerd and runc it unpacked and every repository file, keyring and CA it
/// placed removed, with apt's lists of the repositories those apt sources named
/// (`/var/lib/apt/lists/<URL without scheme, `/` as `_`>_*`; paths that existed before are kept) —
/// and prints what it did. Without a record (packages installed by hand, `source: preinstalled`),
/// purges the installed ones of `legacy` as before this record existed.
pub fn purge(legacy: &[String]) -> String {
    let files = managed_files().join(" ");
    let legacy: Vec<String> = legacy.iter().map(|p| quote_word(p)).collect();
    format!(
        "d={RECORD_DIR}; out=''\n\
         is_installed() {{ if command -v dpkg-query >/dev/null 2>&1; then dpkg-query -W -f='${{Status}}' \"$1\" 2>/dev/null | grep -q ' ok installed'; else rpm -q \"$1\" >/dev/null 2>&1; fi; }}\n\
         if [ -f \"$d/before\" ]; then\n\
         \x20 rm_list=''\n\
         \x20 for p in {RECORDED}; do\n\
         \x20   if is_installed \"$p\" && ! grep -q \"^installed $p \" \"$d/before\"; then rm_list=\"$rm_list $p\"; fi\n\
         \x20 done\n\
         \x20 case \" $rm_list \" in *' containerd '*|*' containerd.io '*|*' cri-o '*) systemctl disable --now containerd crio >/dev/null 2>&1 || true ;; esac\n\
         \x20 if [ -n \"$rm_list\" ]; then\n\
         \x20   if command -v dpkg >/dev/null 2>&1; then apt-mark unhold $rm_list >/dev/null 2>&1 || true; dpkg --purge $rm_list >/dev/null; else rpm -e $rm_list; fi\n\
         \x20   out=\"$out purged:$rm_list;\"\n\
         \x20 fi\n\
         \x20 if command -v apt-mark >/dev/null 2>&1; then\n\
         \x20   for p in $(apt-mark showhold 2>/dev/null); do\n\
         \x20     case \" {RECORDED} \" in *\" $p \"*) grep -qx \"held $p\" \"$d/before\" || {{ apt-mark unhold \"$p\" >/dev/null && out=\"$out unheld $p;\"; }} ;; esac\n\
         \x20   done\n\
         \x20 fi\n\
         \x20 if [ -f \"$d/containerd-archive\" ]; then\n\
         \x20   grep -qx 'existed {CONTAINERD_ARCHIVE_UNIT}' \"$d/before\" || systemctl disable --now containerd >/dev/null 2>&1 || true\n\
         \x20 fi\n\
         \x20 for f in {files}; do\n\
         \x20   if [ -e \"$f\" ] && ! grep -qx \"existed $f\" \"$d/before\"; then\n\
         \x20     case \"$f\" in /etc/apt/sources.list.d/*.list) for u in $(grep -o 'https\\?://[^ ]*' \"$f\"); do\n\
         \x20       p=$(printf %s \"$u\" | sed -e 's|^[a-z]*://||' -e 's|/*$||' -e 's|/|_|g')\n\
         \x20       set -- /var/lib/apt/lists/\"$p\"_*; if [ -e \"$1\" ]; then rm -f -- \"$@\" && out=\"$out removed apt's lists of $u;\"; fi\n\
         \x20     done ;; esac\n\
         \x20     rm -f -- \"$f\" && out=\"$out removed $f;\"\n\
         \x20   fi\n\
         \x20 done\n\
         \x20 rm -rf -- \"$d\" /etc/clusterctl-packages\n\
         \x20 echo \"as before up:${{out:- nothing to undo}}\"\n\
         else\n\
         \x20 pk=''\n\
         \x20 for p in {legacy}; do is_installed \"$p\" && pk=\"$pk $p\"; done\n\
         \x20 if [ -z \"$pk\" ]; then echo 'none installed'\n\
         \x20 elif command -v dpkg >/dev/null 2>&1; then apt-mark unhold $pk >/dev/null 2>&1 || true; dpkg --purge $pk >/dev/null && echo \"purged:$pk\"\n\
         \x20 else rpm -e $pk && echo \"removed:$pk\"; fi\n\
         fi",
        legacy = legacy.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apt_source_and_key_as_upstream_documents() {
        let (path, text) = kubernetes_repo_file((1, 34), Family::Debian, None, false);
        assert_eq!(path, "/etc/apt/sources.list.d/kubernetes.list");
        assert_eq!(
            text,
            "deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] https://pkgs.k8s.io/core:/stable:/v1.34/deb/ /\n"
        );
        let k = apt_key(
            &kubernetes_repo((1, 34), Family::Debian, None),
            APT_KEYRING,
            false,
        );
        assert!(
            k.contains("fetch https://pkgs.k8s.io/core:/stable:/v1.34/deb/Release.key \"$d/key\""),
            "{k}"
        );
        assert!(k.contains("dearmor \"$d/key\" \"$d/keyring\""), "{k}");
        assert!(
            k.contains("/etc/apt/keyrings/kubernetes-apt-keyring.gpg.new"),
            "{k}"
        );
        assert!(!k.contains("CACERT="), "{k}");
        let u = apt_update(APT_LIST);
        assert!(
            u.starts_with("out=$(apt-get update -q -o Dir::Etc::sourcelist=/etc/apt/sources.list.d/kubernetes.list -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 2>&1); rc=$?\n"),
            "{u}"
        );
        assert!(u.contains("W: (GPG error|An error occurred during the signature verification|Failed to fetch)"), "{u}");
    }

    #[test]
    fn apt_install_pins_and_holds() {
        let pk = vec![
            ("kubeadm".to_string(), Some("1.34.4".to_string())),
            ("kubelet".to_string(), Some("1.34.4".to_string())),
            ("cri-tools".to_string(), None),
        ];
        assert_eq!(
            install(Family::Debian, &pk, false),
            "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-change-held-packages kubeadm='1.34.4-*' kubelet='1.34.4-*' cri-tools"
        );
        assert!(install(Family::Debian, &pk, true).contains("--allow-downgrades"));
        assert_eq!(
            hold(Family::Debian, &["kubeadm".into(), "kubelet".into()]).unwrap(),
            "apt-mark hold kubeadm kubelet"
        );
    }

    /// The EL path is covered here (no EL host runs on the test bed): each file and command line.
    #[test]
    fn el_repository_install_hold_and_downgrade_command_lines() {
        let (path, text) = kubernetes_repo_file((1, 34), Family::El, None, false);
        assert_eq!(path, "/etc/yum.repos.d/kubernetes.repo");
        assert_eq!(
            text,
            "[kubernetes]\nname=Kubernetes\nbaseurl=https://pkgs.k8s.io/core:/stable:/v1.34/rpm/\nenabled=1\ngpgcheck=1\nrepo_gpgcheck=1\ngpgkey=https://pkgs.k8s.io/core:/stable:/v1.34/rpm/repodata/repomd.xml.key\nexclude=kubeadm kubelet kubectl cri-tools kubernetes-cni\n"
        );
        let (_, mirrored) =
            kubernetes_repo_file((1, 35), Family::El, Some("https://repo.site/k8s"), true);
        assert!(
            mirrored.contains("baseurl=https://repo.site/k8s/core:/stable:/v1.35/rpm/\n"),
            "{mirrored}"
        );
        assert!(
            mirrored.contains(
                "gpgkey=https://repo.site/k8s/core:/stable:/v1.35/rpm/repodata/repomd.xml.key\n"
            ),
            "{mirrored}"
        );
        assert!(
            mirrored.ends_with("sslcacert=/etc/clusterctl-packages/mirror-ca.crt\n"),
            "{mirrored}"
        );
        let pk = vec![
            ("kubeadm".to_string(), Some("1.34.4".to_string())),
            ("kubelet".to_string(), Some("1.34.4".to_string())),
            ("kubectl".to_string(), Some("1.34.4".to_string())),
            ("cri-tools".to_string(), None),
            ("kubernetes-cni".to_string(), None),
        ];
        assert_eq!(
            install(Family::El, &pk, false),
            "dnf install -y --disableexcludes=kubernetes kubeadm-'1.34.4-*' kubelet-'1.34.4-*' kubectl-'1.34.4-*' cri-tools kubernetes-cni"
        );
        assert_eq!(
            install(Family::El, &pk, true),
            "dnf downgrade -y --disableexcludes=kubernetes kubeadm-'1.34.4-*' kubelet-'1.34.4-*' kubectl-'1.34.4-*' && dnf install -y --disableexcludes=kubernetes cri-tools kubernetes-cni"
        );
        assert_eq!(
            hold(Family::El, &["kubeadm".into()]),
            None,
            "exclude= holds them"
        );
        let (cpath, crio) = crio_repo_file((1, 34), Family::El, None, false).unwrap();
        assert_eq!(cpath, "/etc/yum.repos.d/cri-o.repo");
        assert!(crio.contains("baseurl=https://download.opensuse.org/repositories/isv:/cri-o:/stable:/v1.34/rpm/\n"), "{crio}");
        assert!(crio.contains("gpgkey=https://download.opensuse.org/repositories/isv:/cri-o:/stable:/v1.34/rpm/repodata/repomd.xml.key\n"), "{crio}");
        assert!(crio.contains("exclude=cri-o\n"), "{crio}");
        assert_eq!(
            crio_install(Family::El, false),
            "dnf install -y --disableexcludes=cri-o cri-o && systemctl enable crio"
        );
        let a = containerd_archive(
            "2.2.1",
            "1.3.3",
            "arm64",
            None,
            false,
            Family::El,
            &["containerd.io".into()],
        );
        assert!(a.contains("dnf remove -y containerd.io"), "{a}");
        assert!(a.contains("containerd-2.2.1-linux-arm64.tar.gz"), "{a}");
    }

    #[test]
    fn the_archive_is_checked_before_it_is_unpacked() {
        let a = containerd_archive(
            "2.2.1",
            "1.3.3",
            "amd64",
            Some("https://m.site/up"),
            true,
            Family::Debian,
            &[],
        );
        let at = |s: &str| a.find(s).unwrap_or_else(|| panic!("{s} not in {a}"));
        assert!(a.contains("CACERT=/etc/clusterctl-packages/mirror-ca.crt"));
        assert!(a.contains("fetch https://m.site/up/containerd/containerd/releases/download/v2.2.1/containerd-2.2.1-linux-amd64.tar.gz containerd-2.2.1-linux-amd64.tar.gz\n"), "{a}");
        assert!(
            at("sha256sum -c --strict containerd-2.2.1-linux-amd64.tar.gz.sha256sum")
                < at("tar -C /usr/local")
        );
        assert!(
            at("sha256sum -c --strict runc.amd64.sha256sum")
                < at("install -m 0755 runc.amd64 /usr/local/sbin/runc")
        );
        assert!(a.contains(
            "https://m.site/up/opencontainers/runc/releases/download/v1.3.3/runc.sha256sum"
        ));
        assert!(a.contains("systemctl enable containerd"));
    }

    #[test]
    fn mirror_ca_for_apt_is_per_host() {
        assert_eq!(
            apt_mirror_conf("https://repo.site:8443/k8s"),
            "// clusterctl: the package mirror's CA (packages.mirror.caFile)\nAcquire::https::repo.site::CaInfo \"/etc/clusterctl-packages/mirror-ca.crt\";\n"
        );
    }

    #[test]
    fn purge_undoes_the_record_else_purges_the_list() {
        let p = purge(&["kubeadm".into(), "x-tool".into()]);
        assert!(
            p.contains("grep -q \"^installed $p \" \"$d/before\""),
            "{p}"
        );
        assert!(p.contains("for p in kubeadm x-tool; do"), "{p}");
        // An apt source it placed goes with apt's lists of its repository.
        assert!(
            p.contains("-e 's|/|_|g')") && p.contains("/var/lib/apt/lists/\"$p\"_*"),
            "{p}"
        );
        let r = record();
        assert!(r.contains("existed $f"), "{r}");
        assert!(
            r.contains("/etc/apt/keyrings/kubernetes-apt-keyring.gpg"),
            "{r}"
        );
    }
}
