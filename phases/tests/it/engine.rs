//! Engine tests over in-memory fake nodes: phase order and barriers, parallelism limits, serial phases,
//! `--skip-phases`/`--only`, dry-run (offline and probing) making no change, resume after an injected
//! failure, a second run changing nothing, and redaction of secrets in errors, output and state.

use clusterctl_exec::Transport;
use clusterctl_phases::fake::{Call, Concurrency, FakeNode};
use clusterctl_phases::state::STATE_PATH;
use clusterctl_phases::{
    Engine, Mode, NodeCtx, Options, Outcome, Phase, PhaseError, PlainReporter, Reporter, Secrets,
    Targets,
};
use clusterctl_spec::model::Role;
use clusterctl_spec::ValidNode;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Touches `/done/<phase>` unless it exists: the shape of every real phase (check, then change).
fn touch(ctx: &mut NodeCtx, _: &()) -> Result<(), PhaseError> {
    let path = format!("/done/{}", ctx.phase.replace('/', "_"));
    if ctx.test(&format!("test -f {path}"))? != Some(true) {
        ctx.run_script(&format!("touch {path}"))?;
    }
    Ok(())
}

fn phase(name: &'static str, targets: Targets, serial: bool) -> Phase<()> {
    Phase {
        name,
        targets,
        serial,
        record: true,
        required: false,
        inputs: |_, n| n.name.clone(),
        run: touch,
    }
}

struct Cluster {
    nodes: Vec<ValidNode>,
    fakes: BTreeMap<String, Arc<FakeNode>>,
    conc: Arc<Concurrency>,
}

fn cluster(cps: usize, workers: usize, delay_ms: u64) -> Cluster {
    let conc = Arc::new(Concurrency::default());
    let mut nodes = Vec::new();
    for i in 1..=cps {
        nodes.push(ValidNode::new(
            format!("c{i}"),
            Role::ControlPlane,
            format!("10.0.0.{i}").parse().ok(),
        ));
    }
    for i in 1..=workers {
        nodes.push(ValidNode::new(
            format!("w{i}"),
            Role::Worker,
            format!("10.0.1.{i}").parse().ok(),
        ));
    }
    let fakes = nodes
        .iter()
        .map(|n| {
            (
                n.name.clone(),
                Arc::new(FakeNode::new(
                    &n.name,
                    Duration::from_millis(delay_ms),
                    conc.clone(),
                )),
            )
        })
        .collect();
    Cluster { nodes, fakes, conc }
}

/// Records (phase, node, event) in one global order.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<(String, String, String)>>,
    lines: Mutex<Vec<String>>,
}

impl Reporter for Recorder {
    fn phase_start(&self, phase: &str, node: &str) {
        self.events
            .lock()
            .unwrap()
            .push((phase.into(), node.into(), "start".into()));
    }
    fn phase_end(&self, phase: &str, node: &str, o: &Outcome) {
        self.events
            .lock()
            .unwrap()
            .push((phase.into(), node.into(), format!("{o:?}")));
    }
    fn change(&self, phase: &str, node: &str, what: &str) {
        self.lines
            .lock()
            .unwrap()
            .push(format!("[{node}] {phase}: {what}"));
    }
    fn query(&self, _: &str, _: &str, _: &str) {}
    fn output(&self, _: &str, chunk: &[u8]) {
        self.lines
            .lock()
            .unwrap()
            .push(String::from_utf8_lossy(chunk).into_owned());
    }
    fn upload_progress(&self, _: &str, _: &str, _: u64, _: u64) {}
    fn note(&self, text: &str) {
        self.lines.lock().unwrap().push(text.into());
    }
}

fn opts(mode: Mode, parallel: usize) -> Options {
    Options {
        cluster: "test".into(),
        mode,
        parallel,
        skip: vec![],
        only: vec![],
        cache: None,
    }
}

fn engine(c: &Cluster, o: Options, rep: Arc<dyn Reporter>) -> Engine {
    let transports: BTreeMap<String, Arc<dyn Transport>> = c
        .fakes
        .iter()
        .map(|(k, v)| (k.clone(), v.clone() as Arc<dyn Transport>))
        .collect();
    Engine::new(c.nodes.clone(), transports, o, rep, Secrets::default())
}

fn up_phases() -> Vec<Phase<()>> {
    vec![
        phase("prepare", Targets::All, false),
        phase("init", Targets::FirstControlPlane, false),
        phase("join/control-plane", Targets::OtherControlPlanes, true),
        phase("join/worker", Targets::Workers, false),
    ]
}

fn mutating(c: &Cluster) -> Vec<(String, Call)> {
    let mut v = Vec::new();
    for (n, f) in &c.fakes {
        for call in f.calls() {
            if call.is_mutating() {
                v.push((n.clone(), call));
            }
        }
    }
    v
}

#[test]
fn phases_run_in_order_on_their_nodes_with_a_barrier_between_phases() {
    let c = cluster(3, 2, 0);
    let rec = Arc::new(Recorder::default());
    let (summary, result) =
        engine(&c, opts(Mode::default(), 4), rec.clone()).run(&up_phases(), &());
    result.expect("run");
    let ends: Vec<(String, String)> = rec
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, _, e)| e != "start")
        .map(|(p, n, _)| (p.clone(), n.clone()))
        .collect();
    let phase_seq: Vec<&str> = ends.iter().map(|(p, _)| p.as_str()).collect();
    let mut sorted = phase_seq.clone();
    let rank = |p: &str| {
        ["prepare", "init", "join/control-plane", "join/worker"]
            .iter()
            .position(|x| *x == p)
    };
    sorted.sort_by_key(|p| rank(p));
    assert_eq!(
        phase_seq, sorted,
        "every phase ends on all its nodes before the next starts"
    );
    // Nodes of one phase run in parallel, so their order within the phase is free.
    let on = |p: &str| -> Vec<String> {
        let mut v: Vec<String> = ends
            .iter()
            .filter(|(q, _)| q == p)
            .map(|(_, n)| n.clone())
            .collect();
        v.sort();
        v
    };
    assert_eq!(on("prepare"), ["c1", "c2", "c3", "w1", "w2"]);
    assert_eq!(on("init"), ["c1"]);
    assert_eq!(on("join/control-plane"), ["c2", "c3"]);
    assert_eq!(on("join/worker"), ["w1", "w2"]);
    assert_eq!(c.fakes["c1"].file("/done/init").map(|f| f.1), Some(0o644));
    assert!(c.fakes["w1"].file("/done/init").is_none());
    assert_eq!(summary.total_changes(), 5 + 1 + 2 + 2);
    // The state record is on each node, 0600, and names the phases done there.
    let (state, mode) = c.fakes["c2"].file(STATE_PATH).expect("state on node");
    assert_eq!(mode, 0o600);
    let s = String::from_utf8(state).unwrap();
    assert!(
        s.contains("\"prepare\"")
            && s.contains("\"join/control-plane\"")
            && !s.contains("\"init\"")
    );
}

#[test]
fn parallelism_is_bounded_and_control_planes_join_one_at_a_time() {
    let c = cluster(1, 8, 30);
    let phases = vec![phase("prepare", Targets::All, false)];
    engine(&c, opts(Mode::default(), 3), Arc::new(Recorder::default()))
        .run(&phases, &())
        .1
        .expect("run");
    let max = c.conc.max();
    assert!(max <= 3, "at most 3 nodes at once, saw {max}");
    assert!(max >= 2, "nodes did run in parallel, saw {max}");

    let c = cluster(4, 0, 30);
    let phases = vec![phase(
        "join/control-plane",
        Targets::OtherControlPlanes,
        true,
    )];
    let rec = Arc::new(Recorder::default());
    engine(&c, opts(Mode::default(), 8), rec.clone())
        .run(&phases, &())
        .1
        .expect("run");
    // Each join ends before the next starts (the state records before them are read in parallel).
    let events: Vec<(String, String)> = rec
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|(p, _, _)| p == "join/control-plane")
        .map(|(_, n, e)| {
            (
                n.clone(),
                if e == "start" {
                    e.clone()
                } else {
                    "end".into()
                },
            )
        })
        .collect();
    let one_at_a_time: Vec<(String, String)> = ["c2", "c3", "c4"]
        .iter()
        .flat_map(|n| {
            [
                (n.to_string(), "start".into()),
                (n.to_string(), "end".into()),
            ]
        })
        .collect();
    assert_eq!(events, one_at_a_time, "control planes join one at a time");
    assert!(c.fakes["c4"].file("/done/join_control-plane").is_some());
}

#[test]
fn state_records_are_read_parallel_nodes_at_a_time() {
    let c = cluster(1, 8, 30);
    engine(&c, opts(Mode::default(), 3), Arc::new(Recorder::default()))
        .run(&[], &())
        .1
        .expect("run");
    let max = c.conc.max();
    assert!(
        (2..=3).contains(&max),
        "3 reads at most at once, and more than one: saw {max}"
    );
}

#[test]
fn skip_phases_and_only_select_by_path_prefix() {
    let c = cluster(2, 1, 0);
    let mut o = opts(Mode::default(), 4);
    o.skip = vec!["join".into()];
    engine(&c, o, Arc::new(Recorder::default()))
        .run(&up_phases(), &())
        .1
        .expect("run");
    assert!(c.fakes["c1"].file("/done/init").is_some());
    assert!(c.fakes["c2"].file("/done/join_control-plane").is_none());
    assert!(c.fakes["w1"].file("/done/join_worker").is_none());

    let c = cluster(2, 1, 0);
    let mut o = opts(Mode::default(), 4);
    o.only = vec!["join/worker".into()];
    engine(&c, o, Arc::new(Recorder::default()))
        .run(&up_phases(), &())
        .1
        .expect("run");
    assert!(c.fakes["w1"].file("/done/join_worker").is_some());
    assert!(
        c.fakes["c1"].file("/done/init").is_none() && c.fakes["w1"].file("/done/prepare").is_none()
    );

    let err = clusterctl_phases::engine::check_selection(&up_phases(), &["joins".into()])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unknown phase `joins`") && err.contains("join/worker"),
        "{err}"
    );
}

#[test]
fn dry_run_changes_nothing_offline_or_probing() {
    let c = cluster(2, 2, 0);
    let offline = Mode {
        dry_run: true,
        ..Default::default()
    };
    let eng = Engine::new(
        c.nodes.clone(),
        BTreeMap::new(),
        opts(offline, 4),
        Arc::new(Recorder::default()),
        Secrets::default(),
    );
    let (summary, r) = eng.run(&up_phases(), &());
    r.expect("offline dry run");
    let planned: Vec<String> = summary
        .plan
        .iter()
        .filter(|e| e.node == "c2")
        .map(|e| format!("{}: {}", e.phase, e.text))
        .collect();
    assert!(
        planned.contains(&"join/control-plane: touch /done/join_control-plane".to_string()),
        "{planned:?}"
    );
    assert!(
        c.fakes.values().all(|f| f.calls().is_empty()),
        "offline: no call at all"
    );

    let probing = Mode {
        dry_run: true,
        probe: true,
        ..Default::default()
    };
    let (summary, r) =
        engine(&c, opts(probing, 4), Arc::new(Recorder::default())).run(&up_phases(), &());
    r.expect("probing dry run");
    assert!(
        c.fakes.values().any(|f| !f.calls().is_empty()),
        "probing queries the nodes"
    );
    assert_eq!(mutating(&c), vec![], "dry run makes no mutating call");
    assert_eq!(summary.total_changes(), 4 + 1 + 1 + 2);
}

#[test]
fn a_failed_run_resumes_and_a_second_run_changes_nothing() {
    let c = cluster(3, 2, 0);
    c.fakes["c3"].fail_once_on("touch /done/join_control-plane");
    let rec = Arc::new(Recorder::default());
    let (_, r) = engine(&c, opts(Mode::default(), 4), rec.clone()).run(&up_phases(), &());
    let err = r.expect_err("injected failure");
    let msg = err.to_string();
    assert!(
        msg.contains("phase `join/control-plane` failed on node `c3`"),
        "{msg}"
    );
    assert!(
        msg.contains("command `touch /done/join_control-plane` exited with status 1")
            && msg.contains("injected failure"),
        "{msg}"
    );
    assert!(
        c.fakes["w1"].file("/done/join_worker").is_none(),
        "later phases did not start"
    );
    assert!(c.fakes["c2"].file("/done/join_control-plane").is_some());

    for f in c.fakes.values() {
        f.clear_calls();
    }
    engine(&c, opts(Mode::default(), 4), rec.clone())
        .run(&up_phases(), &())
        .1
        .expect("resumed run");
    // Only c3's join and the workers' joins changed anything: recorded phases were skipped.
    let changed: Vec<(String, Call)> = mutating(&c)
        .into_iter()
        .filter(|(_, call)| !matches!(call, Call::Upload { path, .. } if path == STATE_PATH))
        .collect();
    let names: Vec<&str> = changed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["c3", "w1", "w2"], "{changed:?}");
    assert!(
        c.fakes["c1"]
            .calls()
            .iter()
            .all(|call| matches!(call, Call::Run { script, .. } if script.contains(STATE_PATH))),
        "c1 only had its state record read: {:?}",
        c.fakes["c1"].calls()
    );

    for f in c.fakes.values() {
        f.clear_calls();
    }
    let (summary, r) = engine(&c, opts(Mode::default(), 4), rec).run(&up_phases(), &());
    r.expect("second run");
    assert_eq!(mutating(&c), vec![], "a second run makes no mutating call");
    assert_eq!(summary.total_changes(), 0);
    assert!(summary
        .outcomes
        .iter()
        .all(|(_, _, o)| matches!(o, Outcome::Skipped(_))));
}

#[test]
fn work_already_done_is_recorded_without_changes() {
    // No state record, but the work is there (e.g. the record was lost): checks prevent any change.
    let c = cluster(1, 1, 0);
    engine(&c, opts(Mode::default(), 2), Arc::new(Recorder::default()))
        .run(&up_phases(), &())
        .1
        .expect("run");
    for f in c.fakes.values() {
        f.clear_calls();
    }
    let o = Options {
        cluster: "renamed".into(),
        ..opts(Mode::default(), 2)
    };
    let (summary, r) = engine(&c, o, Arc::new(Recorder::default())).run(&up_phases(), &());
    r.expect("run");
    assert_eq!(summary.total_changes(), 0);
    let non_state: Vec<(String, Call)> = mutating(&c)
        .into_iter()
        .filter(|(_, call)| !matches!(call, Call::Upload { path, .. } if path == STATE_PATH))
        .collect();
    assert_eq!(non_state, vec![]);
}

fn leaky(ctx: &mut NodeCtx, secret: &String) -> Result<(), PhaseError> {
    ctx.secrets().add(secret);
    ctx.run_script(&format!("echo token {secret}"))?;
    ctx.run_script(&format!("login --password {secret}"))?;
    Ok(())
}

#[test]
fn secrets_are_redacted_in_output_errors_and_state() {
    let c = cluster(1, 0, 0);
    let secret = "abcdef.0123456789abcdef".to_string();
    let out = Arc::new(Mutex::new(Vec::<u8>::new()));
    struct W(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for W {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let rep: Arc<dyn Reporter> = Arc::new(PlainReporter::to(Box::new(W(out.clone())), true));
    let phases = vec![Phase::<String> {
        name: "secret",
        targets: Targets::All,
        serial: false,
        record: true,
        required: false,
        inputs: |_, _| String::new(),
        run: leaky,
    }];
    let mode = Mode {
        verbose: true,
        ..Default::default()
    };
    let transports: BTreeMap<String, Arc<dyn Transport>> = c
        .fakes
        .iter()
        .map(|(k, v)| (k.clone(), v.clone() as Arc<dyn Transport>))
        .collect();
    let eng = Engine::new(
        c.nodes.clone(),
        transports,
        opts(mode, 1),
        rep,
        Secrets::default(),
    );
    let (_, r) = eng.run(&phases, &secret);
    let msg = r.expect_err("unknown command fails").to_string();
    assert!(
        msg.contains("login --password <redacted>") && msg.contains("status 127"),
        "{msg}"
    );
    assert!(!msg.contains(&secret));
    let shown = String::from_utf8(out.lock().unwrap().clone()).unwrap();
    assert!(
        shown.contains("echo token <redacted>") && shown.contains("| token <redacted>"),
        "{shown}"
    );
    assert!(!shown.contains(&secret), "{shown}");
    for p in c.fakes["c1"].paths() {
        let (data, _) = c.fakes["c1"].file(&p).unwrap();
        assert!(!String::from_utf8_lossy(&data).contains(&secret), "{p}");
    }
}
