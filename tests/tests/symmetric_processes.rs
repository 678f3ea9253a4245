//! Symmetric memory across processes: two processes (this test
//! binary again, as children) on one GPU are two ranks of a
//! `ProcessGroup`. They exchange their allocations' file descriptors at a
//! Unix-socket rendezvous.
//!
//! - Plain: the flag hand-off (rank 0 writes rank 1's buffer, then sets
//!   rank 1's flag with a system-scope release; rank 1 waits for it and
//!   reads) works, and a size mismatch fails on both ranks alike.
//! - Sanitized (one race detector across the two processes): the same
//!   hand-off through a relaxed flag is one read-after-write race, found
//!   by rank 1 and naming both ranks; through a system-scope
//!   release/acquire flag, the kernels' group barrier, or the host's
//!   group barrier, none.
//!
//! Skipped without a GPU; the refusals need none.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use vigil::unstable::testing::require_gpu;
use vigil::{
    Context, DeviceBuffer, Error, GroupProblem, KernelFn, LaunchConfig, Module, ProcessGroup,
    RaceReports, ReportKind, Stream,
};
use vigil_kernels::symmetric::{barrier_exchange, peer_flag_handoff, peer_put_get};
use vigil_tests::KERNELS_PTX;

mod common;

/// The child's rank and the group's socket path prefix.
const RANK: &str = "SYMMETRIC_TEST_RANK";
const SOCKET: &str = "SYMMETRIC_TEST_SOCKET";
/// Set (to anything) in a child whose rank runs on GPU `rank`, not GPU 0.
const SPREAD: &str = "SYMMETRIC_TEST_SPREAD";
const PLAIN_TEST: &str = "two_processes_on_one_gpu_hand_off_through_a_flag";
const SANITIZED_TEST: &str = "two_sanitized_processes_on_one_gpu_race_only_when_unordered";
const PLAIN_TWO_GPUS: &str = "two_processes_on_two_gpus_hand_off_through_a_flag";
const SANITIZED_TWO_GPUS: &str = "two_sanitized_processes_on_two_gpus_race_only_when_unordered";

/// Threads of each rank's block (elements handed off).
const THREADS: u32 = 32;
/// The system scope's code (`vigil_kernels::races::scope`).
const SYSTEM: u32 = 2;
/// `peer_flag_handoff`'s `ordered`: relaxed flag, release/acquire flag.
const RELAXED: u32 = 0;
const RELEASE_ACQUIRE: u32 = 1;
/// A rank no process has: `peer_put_get` then neither writes nor reads.
const NOBODY: u32 = 9;
/// The longest a whole two-process test may take.
const LIMIT: Duration = Duration::from_secs(300);

/// What rank 1 of the plain group prints when the hand-off worked.
const PLAIN_EXPECT: &[&str] = &["rank 1 read the hand-off"];
/// What rank 1 of the sanitized group prints when every case held.
const SANITIZED_EXPECT: &[&str] = &[
    "rank 1 found the relaxed flag's race",
    "rank 1: release/acquire flag race-free",
    "rank 1: kernel group barrier race-free",
    "rank 1: host group barrier race-free",
];

#[test]
fn two_processes_on_one_gpu_hand_off_through_a_flag() {
    run_group(PLAIN_TEST, "plain", plain_rank, PLAIN_EXPECT, false);
}

#[test]
fn two_sanitized_processes_on_one_gpu_race_only_when_unordered() {
    run_group(
        SANITIZED_TEST,
        "sanitized",
        sanitized_rank,
        SANITIZED_EXPECT,
        false,
    );
}

/// The same with rank r on GPU r (skipped, saying so, with fewer than
/// two GPUs).
#[test]
fn two_processes_on_two_gpus_hand_off_through_a_flag() {
    if two_gpus() {
        run_group(PLAIN_TWO_GPUS, "plain2", plain_rank, PLAIN_EXPECT, true);
    }
}

#[test]
fn two_sanitized_processes_on_two_gpus_race_only_when_unordered() {
    if two_gpus() {
        run_group(
            SANITIZED_TWO_GPUS,
            "sanitized2",
            sanitized_rank,
            SANITIZED_EXPECT,
            true,
        );
    }
}

/// True when two GPUs are there (in a child: always, the parent checked).
fn two_gpus() -> bool {
    std::env::var(RANK).is_ok() || common::two_gpus()
}

/// In the parent: runs this test as two child processes (ranks 0 and 1
/// of a group meeting at a socket named after `tag`, on GPU 0, or on
/// GPU `rank` when `spread`), and checks both succeeded and printed every
/// one of `expect`. In a child: runs `rank`.
fn run_group(test: &str, tag: &str, rank: fn(u32, &str), expect: &[&str], spread: bool) {
    if require_gpu().is_none() {
        return;
    }
    if let (Ok(r), Ok(socket)) = (std::env::var(RANK), std::env::var(SOCKET)) {
        rank(r.parse().expect("a rank"), &socket);
        return;
    }
    let socket = std::env::temp_dir().join(format!("vigil-{tag}-{}.sock", std::process::id()));
    let children: Vec<Child> = (0..2)
        .map(|r| {
            let mut child = Command::new(std::env::current_exe().unwrap());
            child
                .args(["--exact", test, "--nocapture", "--test-threads=1"])
                .env(RANK, r.to_string())
                .env(SOCKET, &socket)
                .env_remove(SPREAD)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            if spread {
                child.env(SPREAD, "1");
            }
            child.spawn().expect("a child test process")
        })
        .collect();
    let started = Instant::now();
    let outputs: Vec<(bool, String)> = children.into_iter().map(|c| finish(c, started)).collect();
    // Both ranks' output first: the one that failed first is not always
    // the one whose output says why.
    for (r, (_, out)) in outputs.iter().enumerate() {
        println!("rank {r}:\n{out}");
    }
    for (r, (ok, _)) in outputs.iter().enumerate() {
        assert!(ok, "rank {r} failed (its output is above)");
    }
    let all: String = outputs.iter().map(|(_, o)| o.as_str()).collect();
    for line in expect {
        assert!(all.contains(line), "no rank printed {line:?}:\n{all}");
    }
}

/// Waits for `child` until `started + LIMIT` (then kills it); returns
/// whether it succeeded and its output.
fn finish(mut child: Child, started: Instant) -> (bool, String) {
    let ok = loop {
        match child.try_wait().expect("wait for the child") {
            Some(status) => break status.success(),
            None if started.elapsed() > LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                break false;
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let mut out = String::new();
    for pipe in [
        child.stdout.take().map(|p| Box::new(p) as Box<dyn Read>),
        child.stderr.take().map(|p| Box::new(p) as Box<dyn Read>),
    ]
    .into_iter()
    .flatten()
    {
        let mut pipe = pipe;
        let _ = pipe.read_to_string(&mut out);
    }
    (ok, out)
}

/// Rank `rank`'s group on GPU 0 (GPU `rank` when the parent spread the
/// ranks), sanitized or not.
fn join(rank: u32, socket: &str, sanitize: bool) -> ProcessGroup {
    let gpu = if std::env::var(SPREAD).is_ok() {
        rank
    } else {
        0
    };
    let ctx = Context::builder()
        .gpu(gpu as usize)
        .sanitize(sanitize)
        .launch_timeout(Some(Duration::from_secs(60)))
        .build()
        .expect("a context on the rank's GPU");
    ProcessGroup::join(ctx, socket, rank, 2)
        .expect("join")
        .timeout(Duration::from_secs(60))
}

/// The flag hand-off from rank 0 to rank 1 through a system-scope flag,
/// release/acquire unless `ordered` is [`RELAXED`], then the group
/// barrier; checks what rank 1 read and returns this rank's races.
fn flag_handoff(
    group: &ProcessGroup,
    kernel: &KernelFn<peer_flag_handoff>,
    ordered: u32,
) -> RaceReports {
    let data = group.alloc::<u32>(THREADS as usize).expect("data");
    let flag = group.alloc::<u32>(1).expect("flag");
    let stream = group.stream();
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(stream, THREADS as usize).unwrap();
    let args = (
        data.peers(),
        flag.peers(),
        &mut out,
        SYSTEM,
        ordered,
        0u32,
        1u32,
    );
    stream
        .launch(kernel, LaunchConfig::new(1, THREADS), args)
        .expect("launch");
    // No rank unmaps while the other still runs; reports are in.
    group.barrier().expect("the barrier after the hand-off");
    if group.rank() == 1 {
        let want: Vec<u32> = (1..=THREADS).collect();
        assert_eq!(out.to_vec(stream).unwrap(), want, "rank 1's read");
    }
    group.context().take_reports()
}

/// One rank's side, plain.
fn plain_rank(rank: u32, socket: &str) {
    let group = join(rank, socket, false);
    // Ranks asking for different sizes both fail, and nothing stays mapped.
    let mismatch = group.alloc::<u32>(if rank == 0 { 64 } else { 128 });
    assert!(
        matches!(mismatch, Err(Error::Rendezvous(_))),
        "a size mismatch: {mismatch:?}"
    );
    let kernel = Module::from_ptx(group.context(), KERNELS_PTX)
        .and_then(|m| m.kernel::<peer_flag_handoff>())
        .expect("the kernel");
    assert!(flag_handoff(&group, &kernel, RELEASE_ACQUIRE).is_empty());
    if rank == 1 {
        println!("rank 1 read the hand-off");
    }
}

/// The line of `symmetric.rs` that carries `// @marker`.
fn line_of(marker: &str) -> u32 {
    common::marker_line(
        include_str!("../kernels/src/symmetric.rs"),
        "symmetric.rs",
        marker,
    )
}

/// Asserts `races` is empty, naming the case; prints that it was.
fn race_free(rank: u32, case: &str, races: &RaceReports) {
    assert!(races.is_empty(), "rank {rank}, {case}: {races}");
    println!("rank {rank}: {case} race-free");
}

/// One rank's side, sanitized: one race detector across both processes.
fn sanitized_rank(rank: u32, socket: &str) {
    let group = join(rank, socket, true);
    let module = Module::from_ptx(group.context(), KERNELS_PTX).expect("the module");
    let handoff = module.kernel::<peer_flag_handoff>().expect("handoff");
    let put_get = module.kernel::<peer_put_get>().expect("put_get");
    let exchange = module.kernel::<barrier_exchange>().expect("exchange");
    let stream = group.stream();

    // A relaxed flag: rank 1 reads after rank 0 wrote, unordered. Rank 1
    // finds it (its read is second) on the ranks' one race engine, naming
    // both ranks; the earlier access's kernel and line are in rank 0's
    // process, so it is named by its rank.
    let races = flag_handoff(&group, &handoff, RELAXED);
    if rank == 1 {
        let got: Vec<_> = races
            .iter()
            .map(|r| {
                (
                    r.kind,
                    r.current.location.as_ref().map(|l| l.line),
                    r.current.device,
                    r.prior.device,
                )
            })
            .collect();
        let want = (
            ReportKind::ReadAfterWrite,
            Some(line_of("handoff_get")),
            1,
            0,
        );
        assert_eq!(got, vec![want], "rank 1's races:\n{races}");
        let text = races.to_string();
        assert!(
            text.contains("device 1") && text.contains("device 0"),
            "{text}"
        );
        println!("{races}");
        println!("rank 1 found the relaxed flag's race");
    } else {
        race_free(rank, "relaxed flag (the writer)", &races);
    }

    // The same through a system-scope release/acquire flag.
    let races = flag_handoff(&group, &handoff, RELEASE_ACQUIRE);
    race_free(rank, "release/acquire flag", &races);

    // The kernels' group barrier: each rank writes the next rank's
    // buffer, passes the barrier (one flag per rank), reads its own.
    let data = group.alloc::<u32>(2).expect("data");
    let flags = group.alloc::<u32>(2).expect("flags");
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(stream, 2).unwrap();
    stream
        .launch(
            &exchange,
            LaunchConfig::new(1, THREADS),
            (data.peers(), flags.peers(), &mut out),
        )
        .expect("launch the exchange");
    group.barrier().expect("the barrier after the exchange");
    let prev = 1 - rank;
    assert_eq!(out.to_vec(stream).unwrap()[prev as usize], prev + 100);
    race_free(
        rank,
        "kernel group barrier",
        &group.context().take_reports(),
    );

    // The host's group barrier between rank 0's write and rank 1's read.
    let data = group.alloc::<u32>(THREADS as usize).expect("data");
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(stream, THREADS as usize).unwrap();
    let config = LaunchConfig::new(1, THREADS);
    if rank == 0 {
        stream
            .launch(&put_get, config, (data.peers(), &mut out, 0u32, 1u32))
            .expect("launch the write");
    }
    group.barrier().expect("the barrier between write and read");
    if rank == 1 {
        stream
            .launch(&put_get, config, (data.peers(), &mut out, NOBODY, 1u32))
            .expect("launch the read");
    }
    group.barrier().expect("the barrier after the read");
    if rank == 1 {
        let want: Vec<u32> = (1..=THREADS).collect();
        assert_eq!(out.to_vec(stream).unwrap(), want, "rank 1's read");
    }
    race_free(rank, "host group barrier", &group.context().take_reports());
}

/// A sanitized context whose sanitizer has started (its runtime state
/// exists, made for one process) can no longer join a group: a typed
/// refusal before any rendezvous, not a hang.
#[test]
fn a_sanitized_context_joins_before_its_first_allocation() {
    if require_gpu().is_none() {
        return;
    }
    let ctx = Context::builder()
        .gpu(0)
        .sanitize(true)
        .build()
        .expect("a sanitized context");
    let stream = Stream::new(&ctx).unwrap();
    let first = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1).unwrap();
    let e = ProcessGroup::join(ctx.clone(), "/tmp/vigil-never-met.sock", 0, 2).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Group(GroupProblem::SanitizerStarted { rank: 0, .. })
        ),
        "{e:?}"
    );
    drop(first);
}

#[test]
fn process_groups_refuse_what_they_cannot_run() {
    let cpu = || Context::cpu().unwrap();
    let e = ProcessGroup::join(cpu(), "/tmp/unused", 0, 2).unwrap_err();
    assert!(
        matches!(e, Error::Group(GroupProblem::NotCuda { rank: 0, .. })),
        "{e:?}"
    );
    let e = ProcessGroup::join(cpu(), "/tmp/unused", 2, 2).unwrap_err();
    assert!(
        matches!(e, Error::Group(GroupProblem::Rank { rank: 2, world: 2 })),
        "{e:?}"
    );
    let e = ProcessGroup::join(cpu(), "/tmp/unused", 0, 9).unwrap_err();
    assert!(
        matches!(e, Error::Group(GroupProblem::Size { world: 9, .. })),
        "{e:?}"
    );
}
