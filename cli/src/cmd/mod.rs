//! One module per subcommand. Each exposes its clap `Args` (or `Command`) and a
//! `run(..) -> miette::Result<ExitCode>`.

pub mod airgap;
pub mod cni;
pub mod destroy;
pub mod image;
pub mod lifecycle;
pub mod node;
pub mod plan;
pub mod render;
pub mod status;
pub mod up;
pub mod upgrade;
pub mod validate;
