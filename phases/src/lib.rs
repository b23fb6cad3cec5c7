//! The phase engine (order, per-node parallelism, dry-run, resume, skip/only), the phases of `up`,
//! `node join`, `upgrade`, `destroy`, `node remove`, `image load` and `certs`, and the one way commands reach
//! nodes and the API (`reach`).
//! Phases reach nodes only through `clusterctl_exec::Transport`, via a [`ctx::NodeCtx`] that separates
//! read-only checks from changes, so that `--dry-run` changes nothing and every phase checks whether its
//! work is done before changing anything. See `docs/phases.md`.

pub mod access;
pub mod certs;
pub mod connect;
pub(crate) mod ctx;
pub mod destroy;
pub(crate) mod diff;
pub mod engine;
pub mod error;
pub mod etcd;
pub mod export_logs;
pub mod fake;
pub mod get;
pub mod image_load;
pub(crate) mod kubeadm;
pub(crate) mod local;
pub mod lock;
pub mod node_containers;
pub mod node_join;
pub mod node_remove;
pub mod packages;
pub(crate) mod pki;
pub mod progress;
pub(crate) mod reach;
pub mod render_dir;
pub(crate) mod report;
pub mod state;
pub mod status;
pub mod steps;
pub mod undo;
pub mod up;
pub mod upgrade;
pub(crate) mod util;
pub mod version;

pub use ctx::{Mode, NodeCtx, PlanEntry, PlanKind, Secrets};
pub use engine::{Engine, Options, Phase, Summary, Targets};
pub use error::{PhaseError, RunError};
pub use report::{Outcome, PlainReporter, QuietReporter, Reporter};
