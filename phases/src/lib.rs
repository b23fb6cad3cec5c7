//! The phase engine (order, per-node parallelism, dry-run, resume, skip/only) and the phases of `up`.
//! Phases reach nodes only through `clusterctl_exec::Transport`, via a [`ctx::NodeCtx`] that separates
//! read-only checks from changes, so that `--dry-run` changes nothing and every phase checks whether its
//! work is done before changing anything. See `docs/phases.md`.

pub mod ctx;
pub mod engine;
pub mod error;
pub mod fake;
pub mod kubeadm;
pub mod local;
pub mod model;
pub mod node_join;
pub mod packages;
pub mod progress;
pub mod report;
pub mod state;
pub mod undo;
pub mod up;
pub mod upgrade;
pub mod util;

pub use ctx::{Mode, NodeCtx, PlanEntry, PlanKind, Secrets};
pub use engine::{Engine, Options, Phase, Summary, Targets};
pub use error::{PhaseError, RunError};
pub use model::{CniChoice, FilePurpose, NodeFile, NodeInfo, Role, RuntimeKind};
pub use report::{Outcome, PlainReporter, QuietReporter, Reporter};
