//! The multi-process rendezvous (`vigil::ipc`): groups of 2 to 4 members
//! exchange real file descriptors (memfds each holding its owner's rank),
//! and every error path the issue names gives every member a clear error
//! and leaks no descriptor: a size or group mismatch, a member that never
//! arrives, a member or the leader killed mid-rendezvous (a real child
//! process, SIGKILLed), a stale socket path and a live one.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use vigil::ipc::{PeerShare, Rendezvous, RendezvousError};

/// A socket path of its own for each test.
fn socket_path(test: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("vigil-rv-{}-{test}.sock", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// A memfd named after `tag` holding `contents`.
fn memfd(tag: &str, contents: &[u8]) -> std::fs::File {
    let name = std::ffi::CString::new(format!("vigil-rv-{tag}")).unwrap();
    // SAFETY: `name` is a valid C string; returns a new descriptor or -1.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` is a fresh descriptor owned here.
    let mut f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    f.write_all(contents).unwrap();
    f
}

fn read_all(fd: &OwnedFd) -> Vec<u8> {
    let mut f = std::fs::File::from(fd.try_clone().unwrap());
    f.seek(SeekFrom::Start(0)).unwrap();
    let mut v = Vec::new();
    f.read_to_end(&mut v).unwrap();
    v
}

/// Descriptors of this process open on memfds named for `tag`.
fn open_memfds(tag: &str) -> usize {
    let needle = format!("memfd:vigil-rv-{tag}");
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| l.to_string_lossy().contains(&needle))
        .count()
}

/// The leader removes its socket file once every member has its verdict
/// (a moment after the last one returns).
fn gone_soon(path: &Path) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    while path.exists() && Instant::now() < until {
        thread::sleep(Duration::from_millis(10));
    }
    !path.exists()
}

/// Runs one member per `(rank, size, world)` on its own thread, each
/// sharing `fds_each` memfds that hold `"<rank>:<i>"`.
fn run_group(
    path: &Path,
    tag: &str,
    members: &[(u32, u64, u32)],
    fds_each: usize,
    timeout: Duration,
) -> Vec<(u32, Result<Vec<PeerShare>, RendezvousError>)> {
    run_group_agreeing(path, tag, members, fds_each, timeout, u64::MAX)
}

/// [`run_group`] whose members agree only on the size bits `agreed`.
fn run_group_agreeing(
    path: &Path,
    tag: &str,
    members: &[(u32, u64, u32)],
    fds_each: usize,
    timeout: Duration,
    agreed: u64,
) -> Vec<(u32, Result<Vec<PeerShare>, RendezvousError>)> {
    let handles: Vec<_> = members
        .iter()
        .map(|&(rank, size, world)| {
            let (path, tag) = (path.to_owned(), tag.to_owned());
            thread::spawn(move || {
                let files: Vec<_> = (0..fds_each)
                    .map(|i| memfd(&tag, format!("{rank}:{i}").as_bytes()))
                    .collect();
                let fds: Vec<BorrowedFd<'_>> = files.iter().map(|f| f.as_fd()).collect();
                let out = Rendezvous::new(&path, rank, world)
                    .timeout(timeout)
                    .agreed_size_bits(agreed)
                    .exchange(size, &fds);
                (rank, out)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn every_member_gets_every_other_members_descriptors() {
    for world in [2u32, 3, 4] {
        let tag = format!("ok{world}");
        let path = socket_path(&tag);
        let members: Vec<_> = (0..world).rev().map(|r| (r, 4096, world)).collect();
        for (rank, out) in run_group(&path, &tag, &members, 2, Duration::from_secs(20)) {
            let peers = out.unwrap_or_else(|e| panic!("world {world} rank {rank}: {e}"));
            let ranks: Vec<u32> = peers.iter().map(|p| p.rank).collect();
            let expected: Vec<u32> = (0..world).filter(|&r| r != rank).collect();
            assert_eq!(ranks, expected, "world {world} rank {rank}");
            for p in &peers {
                assert_eq!(p.size, 4096);
                let contents: Vec<Vec<u8>> = p.fds.iter().map(read_all).collect();
                let want: Vec<Vec<u8>> = (0..2)
                    .map(|i| format!("{}:{i}", p.rank).into_bytes())
                    .collect();
                assert_eq!(
                    contents, want,
                    "rank {rank} reading rank {}'s memfds",
                    p.rank
                );
            }
        }
        assert!(!path.exists(), "the leader removes its socket file");
        assert_eq!(
            open_memfds(&tag),
            0,
            "every descriptor was closed with its share"
        );
    }
}

/// Runs a group expected to fail and returns each member's error.
fn failing_group(
    tag: &str,
    members: &[(u32, u64, u32)],
    timeout: Duration,
) -> Vec<RendezvousError> {
    let path = socket_path(tag);
    let errors = run_group(&path, tag, members, 1, timeout)
        .into_iter()
        .map(|(rank, out)| match out {
            Ok(_) => panic!("{tag}: rank {rank} succeeded"),
            Err(e) => e,
        })
        .collect();
    assert!(
        gone_soon(&path),
        "{tag}: the socket file is removed once every member was told"
    );
    assert_eq!(open_memfds(tag), 0, "{tag}: no descriptor leaked");
    errors
}

#[test]
fn a_size_mismatch_fails_every_member_with_the_same_verdict() {
    let errors = failing_group(
        "size",
        &[(0, 4096, 3), (1, 4096, 3), (2, 8192, 3)],
        Duration::from_secs(20),
    );
    for e in errors {
        assert_eq!(
            e,
            RendezvousError::SizeMismatch {
                rank: 2,
                size: 8192,
                expected: 4096
            }
        );
        assert!(e.to_string().contains("rank 2 asked for 8192 bytes"), "{e}");
    }
}

/// A collective call whose members each share a region of their own
/// size (a sanitized join: only rank 0's region holds the engine's
/// tables) agrees only on the bit that names the call: every member gets
/// every other's own size, and a member of another call (without the
/// bit) fails the group alike.
#[test]
fn members_may_share_sizes_of_their_own_in_the_bits_not_agreed_on() {
    const CALL: u64 = 1 << 63;
    let tag = "own-sizes";
    let path = socket_path(tag);
    let size = |rank: u32| CALL | if rank == 0 { 126 << 20 } else { 2 << 20 };
    let members: Vec<_> = (0..3).map(|r| (r, size(r), 3)).collect();
    let outs = run_group_agreeing(&path, tag, &members, 1, Duration::from_secs(20), CALL);
    for (rank, out) in outs {
        let peers = out.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
        let got: Vec<(u32, u64)> = peers.iter().map(|p| (p.rank, p.size)).collect();
        let want: Vec<(u32, u64)> = (0..3)
            .filter(|&r| r != rank)
            .map(|r| (r, size(r)))
            .collect();
        assert_eq!(got, want, "rank {rank}");
    }
    assert!(gone_soon(&path));
    assert_eq!(open_memfds(tag), 0);

    let tag = "own-sizes-other-call";
    let path = socket_path(tag);
    let members = [(0, size(0), 3), (1, size(1), 3), (2, 4096, 3)];
    for (rank, out) in run_group_agreeing(&path, tag, &members, 1, Duration::from_secs(20), CALL) {
        let e = out.expect_err("a member of another call");
        assert_eq!(
            e,
            RendezvousError::SizeMismatch {
                rank: 2,
                size: 4096,
                expected: size(0)
            },
            "rank {rank}"
        );
    }
    assert!(gone_soon(&path));
    assert_eq!(open_memfds(tag), 0);
}

#[test]
fn a_group_size_mismatch_is_named() {
    let errors = failing_group("world", &[(0, 64, 2), (1, 64, 3)], Duration::from_secs(20));
    for e in errors {
        assert_eq!(
            e,
            RendezvousError::WorldMismatch {
                rank: 1,
                world: 3,
                expected: 2
            }
        );
    }
}

#[test]
fn a_missing_member_times_out_naming_it() {
    let t0 = Instant::now();
    let errors = failing_group(
        "timeout",
        &[(0, 64, 4), (2, 64, 4)],
        Duration::from_millis(500),
    );
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "bounded by the timeout"
    );
    for e in errors {
        match e {
            RendezvousError::Timeout { missing, .. } => assert_eq!(missing, vec![1, 3]),
            other => panic!("expected a timeout, got {other}"),
        }
    }
}

#[test]
fn a_follower_without_a_leader_says_so() {
    let path = socket_path("noleader");
    let e = Rendezvous::new(&path, 1, 2)
        .timeout(Duration::from_millis(200))
        .exchange(8, &[])
        .unwrap_err();
    assert!(
        matches!(e, RendezvousError::LeaderNotFound { stale: false, .. }),
        "{e}"
    );
}

/// Leaves a socket file nobody listens on, as a crashed run does.
fn stale_socket(path: &Path) {
    drop(std::os::unix::net::UnixListener::bind(path).unwrap());
    assert!(path.exists());
}

#[test]
fn a_stale_socket_path_is_named_then_replaced_by_the_leader() {
    let path = socket_path("stale");
    stale_socket(&path);
    let e = Rendezvous::new(&path, 1, 2)
        .timeout(Duration::from_millis(200))
        .exchange(8, &[])
        .unwrap_err();
    assert!(
        matches!(e, RendezvousError::LeaderNotFound { stale: true, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("stale"), "{e}");
    // A leader replaces it (nobody listens there) and the group meets.
    for (rank, out) in run_group(
        &path,
        "stale",
        &[(1, 8, 2), (0, 8, 2)],
        1,
        Duration::from_secs(20),
    ) {
        assert_eq!(out.unwrap_or_else(|e| panic!("rank {rank}: {e}")).len(), 1);
    }
}

#[test]
fn a_live_rendezvous_is_never_hijacked() {
    let path = socket_path("live");
    let first = {
        let path = path.clone();
        thread::spawn(move || {
            Rendezvous::new(&path, 0, 2)
                .timeout(Duration::from_secs(20))
                .exchange(8, &[])
        })
    };
    while !path.exists() {
        thread::sleep(Duration::from_millis(5));
    }
    let e = Rendezvous::new(&path, 0, 2).exchange(8, &[]).unwrap_err();
    assert_eq!(e, RendezvousError::AddressInUse { path: path.clone() });
    // A file that is not a socket is refused, never removed.
    let file = socket_path("notasocket");
    std::fs::write(&file, b"keep me").unwrap();
    let e = Rendezvous::new(&file, 0, 2).exchange(8, &[]).unwrap_err();
    assert!(matches!(e, RendezvousError::InvalidRequest { .. }), "{e}");
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
    std::fs::remove_file(&file).unwrap();
    // The probe did not disturb the first group, which still meets.
    let follower = Rendezvous::new(&path, 1, 2).exchange(8, &[]).unwrap();
    assert_eq!(follower[0].rank, 0);
    assert!(first.join().unwrap().unwrap()[0].rank == 1);
}

const CHILD_ENV: &str = "RENDEZVOUS_TEST_CHILD";

/// Not a test of its own: the body of the child process the two
/// killed-member tests start (`CHILD_ENV` = "path rank world"). It joins
/// the group on a thread, says "joined" once its hello is out, and then
/// waits to be killed.
#[test]
#[ignore = "run only as a child process by the killed-member tests"]
fn child_member() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split(' ').collect();
    let (path, rank, world) = (
        PathBuf::from(parts[0]),
        parts[1].parse::<u32>().unwrap(),
        parts[2].parse::<u32>().unwrap(),
    );
    let file = memfd("child", b"child");
    let fd = file.as_fd().try_clone_to_owned().unwrap();
    thread::spawn(move || {
        let _ = Rendezvous::new(&path, rank, world)
            .timeout(Duration::from_secs(60))
            .exchange(64, &[fd.as_fd()]);
    });
    // The hello (or the leader's bind) goes out within milliseconds.
    thread::sleep(Duration::from_millis(300));
    println!("joined");
    std::io::stdout().flush().unwrap();
    thread::sleep(Duration::from_secs(60));
}

/// Starts `child_member` as `rank` of `world` at `path`, returning once it
/// has joined.
fn spawn_member(path: &Path, rank: u32, world: u32) -> Child {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_member",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, format!("{} {rank} {world}", path.display()))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    while !line.contains("joined") {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the child ended before joining"
        );
    }
    child
}

fn kill(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_follower_killed_mid_rendezvous_fails_the_group_at_once() {
    let path = socket_path("killedfollower");
    let t0 = Instant::now();
    let group: Vec<_> = [0u32, 2]
        .into_iter()
        .map(|rank| {
            let path = path.clone();
            thread::spawn(move || {
                let f = memfd("killedfollower", b"x");
                Rendezvous::new(&path, rank, 4)
                    .timeout(Duration::from_secs(30))
                    .exchange(64, &[f.as_fd()])
            })
        })
        .collect();
    while !path.exists() {
        thread::sleep(Duration::from_millis(5));
    }
    kill(spawn_member(&path, 1, 4));
    for member in group {
        let e = member.join().unwrap().unwrap_err();
        assert_eq!(e, RendezvousError::MemberLost { rank: Some(1) });
        assert!(e.to_string().contains("rank 1 hung up"), "{e}");
    }
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "not left to the 30 s timeout"
    );
    assert_eq!(open_memfds("killedfollower"), 0);
    // The leader keeps the socket until its deadline for rank 3, which has
    // not arrived: it would be told the verdict too.
    let late = Rendezvous::new(&path, 3, 4)
        .timeout(Duration::from_secs(5))
        .exchange(64, &[])
        .unwrap_err();
    assert_eq!(late, RendezvousError::MemberLost { rank: Some(1) });
    assert!(gone_soon(&path), "removed once every member was told");
}

#[test]
fn a_killed_leader_fails_its_followers_at_once() {
    let path = socket_path("killedleader");
    let leader = spawn_member(&path, 0, 3);
    let t0 = Instant::now();
    let follower = {
        let path = path.clone();
        thread::spawn(move || {
            let f = memfd("killedleader", b"x");
            Rendezvous::new(&path, 1, 3)
                .timeout(Duration::from_secs(30))
                .exchange(64, &[f.as_fd()])
        })
    };
    thread::sleep(Duration::from_millis(200));
    kill(leader);
    let e = follower.join().unwrap().unwrap_err();
    assert_eq!(e, RendezvousError::MemberLost { rank: Some(0) });
    assert!(e.to_string().contains("the leader (rank 0)"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(15));
    assert_eq!(open_memfds("killedleader"), 0);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_member_arriving_after_the_verdict_still_gets_it() {
    let path = socket_path("late");
    // Ranks 0 and 2 meet first; rank 2's size ends the rendezvous.
    for (rank, out) in run_group(
        &path,
        "late",
        &[(0, 64, 3), (2, 128, 3)],
        0,
        Duration::from_secs(10),
    ) {
        let e = out.expect_err("a mismatch");
        assert!(
            matches!(e, RendezvousError::SizeMismatch { rank: 2, .. }),
            "rank {rank}: {e}"
        );
    }
    // Rank 1 comes later, within the deadline: the same verdict, not "no leader".
    let e = Rendezvous::new(&path, 1, 3)
        .timeout(Duration::from_secs(10))
        .exchange(64, &[])
        .unwrap_err();
    assert_eq!(
        e,
        RendezvousError::SizeMismatch {
            rank: 2,
            size: 128,
            expected: 64
        }
    );
    assert!(gone_soon(&path));
}
