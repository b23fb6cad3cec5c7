//! The CNI plugin alone, as a small binary (`clusterctl-cni`): the same code path the `clusterctl`
//! multi-call binary runs when invoked under that name (`clusterctl_cni::plugin::main`). The
//! benchmark drives it; installs use the `clusterctl` binary symlinked as `clusterctl-cni`.

fn main() -> std::process::ExitCode {
    match clusterctl_cni::plugin::main() {
        0 => std::process::ExitCode::SUCCESS,
        _ => std::process::ExitCode::FAILURE,
    }
}
