//! The phase engine (order, per-node parallelism, dry-run, resume, skip/only) and the phases of `up`,
//! `node join`, `upgrade` and `destroy`. Phases reach nodes only through `clusterctl_exec::Transport`.
