//! A throw-away containerd on the host for tests: root, state, sockets and config under a temp dir,
//! the CRI plugin disabled; stopped and removed by a drop guard.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) struct Containerd {
    child: Child,
    dir: tempfile::TempDir,
}

pub(crate) fn available() -> bool {
    Path::new("/usr/bin/containerd").exists()
        && Path::new("/usr/bin/ctr").exists()
        && clusterctl_testbed::is_root()
}

impl Containerd {
    pub(crate) fn start() -> Containerd {
        let dir = tempfile::Builder::new()
            .prefix("cc-ctrd-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let d = dir.path();
        let cfg = format!(
            "version = 2\nroot = \"{0}/root\"\nstate = \"{0}/state\"\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n[grpc]\n  address = \"{0}/c.sock\"\n[ttrpc]\n  address = \"{0}/c.sock.ttrpc\"\n",
            d.display()
        );
        std::fs::write(d.join("config.toml"), cfg).expect("config");
        let log = std::fs::File::create(d.join("containerd.log")).expect("log");
        let child = Command::new("containerd")
            .arg("--config")
            .arg(d.join("config.toml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("spawn containerd");
        let c = Containerd { child, dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if Command::new("ctr")
                .args(["--address", &c.socket(), "version"])
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
            {
                return c;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "containerd did not start: {}",
            std::fs::read_to_string(c.dir.path().join("containerd.log")).unwrap_or_default()
        );
    }

    pub(crate) fn socket(&self) -> String {
        self.dir.path().join("c.sock").display().to_string()
    }

    pub(crate) fn ctr(&self) -> String {
        format!("ctr --address {}", self.socket())
    }

    pub(crate) fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Unmount anything left under the root before the temp dir is removed.
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "grep -o ' {}[^ ]*' /proc/mounts | xargs -r -n1 umount -l",
                self.dir.path().display()
            ))
            .status();
    }
}
