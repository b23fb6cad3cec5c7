//! The CNI plugin (CNI spec 1.1.0): what runs when the binary is invoked as `clusterctl-cni`.
//! [`run`] maps (environment, stdin) to (stdout, success) and is what the binary's plugin entry
//! point calls; it starts no async runtime and talks to no API server. Errors are the spec's JSON
//! error object on stdout; logs go to stderr only.

pub(crate) mod add;
pub(crate) mod check;
pub mod config;
pub(crate) mod del;
pub(crate) mod env;
pub(crate) mod error;
pub(crate) mod gc;
pub(crate) mod names;
pub(crate) mod result;
pub(crate) mod timing;

use config::NetConf;
use env::Command;
use error::{code, CniError};
use std::io::Read;

/// What one invocation prints and whether it succeeded (exit 0) or failed (exit 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Text for stdout (a result, a version object, an error object, or empty).
    pub stdout: String,
    /// True for exit status 0.
    pub ok: bool,
}

/// Runs one plugin invocation with parameters from `get_env` and the configuration `stdin`.
pub fn run(get_env: &dyn Fn(&str) -> Option<String>, stdin: &[u8]) -> Outcome {
    let version = config::sniff_version(stdin).unwrap_or_else(|| "1.1.0".to_string());
    match dispatch(get_env, stdin) {
        Ok(stdout) => Outcome { stdout, ok: true },
        Err(mut e) => {
            if e.cni_version.is_empty() {
                e.cni_version = version;
            }
            Outcome {
                stdout: e.to_json(),
                ok: false,
            }
        }
    }
}

fn dispatch(get_env: &dyn Fn(&str) -> Option<String>, stdin: &[u8]) -> Result<String, CniError> {
    let env = env::parse(get_env)?;
    if env.command == Command::Version {
        let v = config::sniff_version(stdin).unwrap_or_else(|| "1.1.0".to_string());
        return Ok(
            serde_json::json!({"cniVersion": v, "supportedVersions": config::SUPPORTED_VERSIONS})
                .to_string(),
        );
    }
    timing::mark("start");
    let conf: NetConf = config::parse(stdin)?;
    timing::mark("config");
    match env.command {
        Command::Add => add::add(&env, &conf).map(|v| v.to_string()),
        Command::Del => del::del(&env, &conf).map(|()| String::new()),
        Command::Check => {
            if conf.cni_version.starts_with("0.3.") {
                return Err(CniError::new(
                    code::INCOMPATIBLE_VERSION,
                    "config version does not allow CHECK",
                    format!(
                        "CHECK needs cniVersion 0.4.0 or later, the config has {}",
                        conf.cni_version
                    ),
                ));
            }
            check::check(&env, &conf).map(|()| String::new())
        }
        Command::Gc => {
            require_1_1(&conf, "GC")?;
            gc::gc(&conf).map(|()| String::new())
        }
        Command::Status => {
            require_1_1(&conf, "STATUS")?;
            gc::status(&conf).map(|()| String::new())
        }
        Command::Version => Ok(String::new()),
    }
}

fn require_1_1(conf: &NetConf, what: &str) -> Result<(), CniError> {
    if conf.at_least_1_1() {
        Ok(())
    } else {
        Err(CniError::new(
            code::INCOMPATIBLE_VERSION,
            format!("config version does not allow {what}"),
            format!(
                "{what} needs cniVersion 1.1.0, the config has {}",
                conf.cni_version
            ),
        ))
    }
}

/// The process entry point: reads stdin and the environment, prints the outcome on stdout, writes
/// the phase timings to stderr when `CLUSTERCTL_CNI_TIMING` is set, and returns the exit status.
pub fn main() -> i32 {
    let mut stdin = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut stdin) {
        let e = CniError {
            cni_version: "1.1.0".into(),
            ..CniError::new(code::IO_FAILURE, "cannot read stdin", e.to_string())
        };
        println!("{}", e.to_json());
        return 1;
    }
    let out = run(&|k| std::env::var(k).ok(), &stdin);
    if !out.stdout.is_empty() {
        println!("{}", out.stdout);
    }
    timing::report();
    if out.ok {
        0
    } else {
        1
    }
}
