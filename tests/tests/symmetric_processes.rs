//! Symmetric memory across processes (issue 13): two processes (this test
//! binary again, as children) on one GPU are two ranks of a
//! `ProcessGroup`. They exchange their allocations' file descriptors at a
//! Unix-socket rendezvous and run the flag hand-off (rank 0 writes rank
//! 1's buffer, then sets rank 1's flag with a system-scope release; rank
//! 1 waits for it and reads), plain: the GPU sanitizer does not share its
//! shadow across processes yet. A size mismatch fails on both ranks
//! alike, and the ranks go on. Skipped without a GPU; the refusals need
//! none.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use vigil::unstable::testing::require_gpu;
use vigil::{Context, DeviceBuffer, Error, GroupProblem, LaunchConfig, Module, ProcessGroup};
use vigil_kernels::symmetric::peer_flag_handoff;
use vigil_tests::KERNELS_PTX;

/// The child's rank and the group's socket path prefix.
const RANK: &str = "SYMMETRIC_TEST_RANK";
const SOCKET: &str = "SYMMETRIC_TEST_SOCKET";
const TEST: &str = "two_processes_on_one_gpu_hand_off_through_a_flag";

/// Threads of each rank's block (elements handed off).
const THREADS: u32 = 32;
/// The system scope's code (`vigil_kernels::races::scope`).
const SYSTEM: u32 = 2;
/// The longest the whole test may take.
const LIMIT: Duration = Duration::from_secs(240);

#[test]
fn two_processes_on_one_gpu_hand_off_through_a_flag() {
    if require_gpu().is_none() {
        return;
    }
    if let (Ok(rank), Ok(socket)) = (std::env::var(RANK), std::env::var(SOCKET)) {
        run_rank(rank.parse().expect("a rank"), &socket);
        return;
    }
    let socket = std::env::temp_dir().join(format!("vigil-symmetric-{}.sock", std::process::id()));
    let children: Vec<Child> = (0..2)
        .map(|rank| {
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
                .env(RANK, rank.to_string())
                .env(SOCKET, &socket)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("a child test process")
        })
        .collect();
    let started = Instant::now();
    let outputs: Vec<(bool, String)> = children.into_iter().map(|c| finish(c, started)).collect();
    for (rank, (ok, out)) in outputs.iter().enumerate() {
        println!("rank {rank}:\n{out}");
        assert!(ok, "rank {rank} failed:\n{out}");
    }
    assert!(
        outputs[1].1.contains("rank 1 read the hand-off"),
        "rank 1 did not read the hand-off:\n{}",
        outputs[1].1
    );
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

/// One rank's side.
fn run_rank(rank: u32, socket: &str) {
    let ctx = Context::builder()
        .gpu(0)
        .launch_timeout(Some(Duration::from_secs(60)))
        .build()
        .expect("a plain context on GPU 0");
    let group = ProcessGroup::join(ctx, socket, rank, 2)
        .expect("join")
        .timeout(Duration::from_secs(60));

    // Ranks asking for different sizes both fail, and nothing stays mapped.
    let mismatch = group.alloc::<u32>(if rank == 0 { 64 } else { 128 });
    assert!(
        matches!(mismatch, Err(Error::Rendezvous(_))),
        "a size mismatch: {mismatch:?}"
    );

    let data = group.alloc::<u32>(THREADS as usize).expect("data");
    let flag = group.alloc::<u32>(1).expect("flag");
    let stream = group.stream();
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(stream, THREADS as usize).unwrap();
    let kernel = Module::from_ptx(group.context(), KERNELS_PTX)
        .and_then(|m| m.kernel::<peer_flag_handoff>())
        .expect("the kernel");
    stream
        .launch(
            &kernel,
            LaunchConfig::new(1, THREADS),
            (data.peers(), flag.peers(), &mut out, SYSTEM, 0u32, 1u32),
        )
        .expect("launch");
    stream.synchronize().expect("the hand-off finishes");
    if rank == 1 {
        let want: Vec<u32> = (1..=THREADS).collect();
        assert_eq!(out.to_vec(stream).unwrap(), want);
        println!("rank 1 read the hand-off");
    }
    // The host's group barrier: no rank unmaps while the other still runs.
    group.barrier().expect("the closing barrier");
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
