//! One module per subcommand. Each exposes its clap `Args` (or `Command`) and a
//! `run(..) -> miette::Result<ExitCode>`.

pub(crate) mod airgap;
pub(crate) mod certs;
pub(crate) mod cni;
pub(crate) mod completion;
pub(crate) mod convert;
pub(crate) mod destroy;
pub(crate) mod diagnostics;
pub(crate) mod escape;
pub(crate) mod etcd;
pub(crate) mod export_logs;
pub(crate) mod flags;
pub(crate) mod get;
pub(crate) mod image;
pub(crate) mod node;
pub(crate) mod plan;
pub(crate) mod profile;
pub(crate) mod render;
pub(crate) mod status;
pub(crate) mod up;
pub(crate) mod upgrade;
pub(crate) mod validate;
pub(crate) mod version;
