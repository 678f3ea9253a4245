//! [`Rendezvous`]: every member of a group of processes learns every
//! other member's file descriptors, over one Unix-domain socket, and
//! checks that all asked for the same thing.
//!
//! Rank 0 leads: it binds the socket path, collects a `Hello` (rank,
//! group size, byte size, descriptors) from each follower, checks them
//! against its own, and then sends every follower each other member's
//! `Share` followed by `Done`. Any verdict against the group (size or
//! group mismatch, a rank claimed twice, a member missing at the deadline,
//! a member that hung up) is sent to every connected follower as an
//! `Abort`, so all members fail alike. Descriptors are owned (`OwnedFd`)
//! from the moment they arrive: an error path closes them on drop, and the
//! socket file is removed when the leader ends, whatever the outcome.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::error::RendezvousError;
use super::frame::{Frame, FrameKind};
use super::socket::{max_path_len, poll_readable, Conn, Listener, MAX_FDS_PER_FRAME};

/// The most members a group may have.
pub const MAX_WORLD: u32 = 64;

/// How long a follower keeps waiting past its own deadline for the
/// leader's verdict (which names the missing ranks).
const VERDICT_GRACE: Duration = Duration::from_secs(2);

/// How often a follower retries a leader that is not listening yet.
const CONNECT_RETRY: Duration = Duration::from_millis(10);

/// What one other member shared.
#[derive(Debug)]
pub struct PeerShare {
    /// Its rank.
    pub rank: u32,
    /// The byte size it asked for (equal to everyone's in the bits the
    /// rendezvous agrees on: [`Rendezvous::agreed_size_bits`]).
    pub size: u64,
    /// Its descriptors, in the order it passed them; this process's own
    /// copies, closed when dropped.
    pub fds: Vec<OwnedFd>,
}

/// One member's side of a rendezvous at a socket path.
///
/// ```no_run
/// use std::os::fd::AsFd;
/// use std::time::Duration;
/// use vigil::ipc::Rendezvous;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let (rank, world) = (1, 2); // e.g. from the launcher's environment
/// let file = std::fs::File::open("/dev/null")?; // e.g. an exported allocation
/// let peers = Rendezvous::new("/tmp/my-job.sock", rank, world)
///     .timeout(Duration::from_secs(30))
///     .exchange(1 << 20, &[file.as_fd()])?;
/// assert_eq!(peers.len(), 1);
/// assert_eq!(peers[0].rank, 0);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Rendezvous {
    path: PathBuf,
    rank: u32,
    world: u32,
    timeout: Duration,
    /// The bits of the size every member must ask for alike.
    agreed: u64,
}

impl Rendezvous {
    /// Member `rank` of a group of `world` meeting at the socket `path`
    /// (rank 0 creates it). The default timeout is 60 s.
    pub fn new(path: impl Into<PathBuf>, rank: u32, world: u32) -> Rendezvous {
        Rendezvous {
            path: path.into(),
            rank,
            world,
            timeout: Duration::from_secs(60),
            agreed: u64::MAX,
        }
    }

    /// How long to wait for the whole group, counted from
    /// [`exchange`](Self::exchange)'s call.
    pub fn timeout(mut self, timeout: Duration) -> Rendezvous {
        self.timeout = timeout;
        self
    }

    /// The bits of the size that every member must ask for alike (all of
    /// them unless told otherwise). A collective call whose members each
    /// share something of its own size (a region that only one rank fills)
    /// names here the bits that say which call it is: members of another
    /// call still fail with [`RendezvousError::SizeMismatch`], and each
    /// [`PeerShare::size`] is the member's own. Only the leader's (rank
    /// 0's) choice is applied.
    ///
    /// ```
    /// use vigil::ipc::Rendezvous;
    /// const MY_CALL: u64 = 1 << 63;
    /// // Each rank announces `MY_CALL | its own bytes`.
    /// let r = Rendezvous::new("/tmp/my-job.sock", 0, 2).agreed_size_bits(MY_CALL);
    /// # let _ = r;
    /// ```
    pub fn agreed_size_bits(mut self, mask: u64) -> Rendezvous {
        self.agreed = mask;
        self
    }

    /// Meets the group: says this member asks for `size` bytes and shares
    /// `fds`, and returns every other member's share, by rank. Every member
    /// must pass the same `size` (in the bits of
    /// [`agreed_size_bits`](Self::agreed_size_bits)) and the same number
    /// of descriptors.
    ///
    /// # Errors
    ///
    /// See [`RendezvousError`]: an invalid request, a live rendezvous
    /// already at the path, a mismatch, a timeout, a lost member.
    pub fn exchange(
        &self,
        size: u64,
        fds: &[BorrowedFd<'_>],
    ) -> Result<Vec<PeerShare>, RendezvousError> {
        let start = Instant::now();
        self.validate(fds.len())?;
        match self.rank {
            _ if self.world == 1 => Ok(Vec::new()),
            0 => Leader::new(self, size, fds, start)?.run(),
            _ => self.follow(size, fds, start),
        }
    }

    fn validate(&self, fds: usize) -> Result<(), RendezvousError> {
        let what = if self.world == 0 || self.world > MAX_WORLD {
            format!("a group of {} (1 to {MAX_WORLD} members)", self.world)
        } else if self.rank >= self.world {
            format!("rank {} in a group of {}", self.rank, self.world)
        } else if fds > MAX_FDS_PER_FRAME {
            format!("{fds} descriptors (at most {MAX_FDS_PER_FRAME} per member)")
        } else if self.path.as_os_str().len() > max_path_len() {
            format!(
                "socket path {} is {} bytes long (at most {})",
                self.path.display(),
                self.path.as_os_str().len(),
                max_path_len()
            )
        } else {
            return Ok(());
        };
        Err(RendezvousError::InvalidRequest { what })
    }

    fn follow(
        &self,
        size: u64,
        fds: &[BorrowedFd<'_>],
        start: Instant,
    ) -> Result<Vec<PeerShare>, RendezvousError> {
        let deadline = start + self.timeout;
        let conn = self.connect(start, deadline)?;
        let mut hello = Frame::new(FrameKind::Hello);
        (hello.rank, hello.world, hello.size, hello.fds) =
            (self.rank, self.world, size, fds.len() as u32);
        conn.send(&hello, fds)
            .map_err(|e| self.leader_gone(&conn, &e, "sendmsg", start))?;
        let mut peers: Vec<PeerShare> = Vec::new();
        loop {
            let now = Instant::now();
            let Some(left) = (deadline + VERDICT_GRACE).checked_duration_since(now) else {
                return Err(RendezvousError::Timeout {
                    path: self.path.clone(),
                    waited: now - start,
                    missing: Vec::new(),
                });
            };
            let ready = poll_readable(&[conn.as_fd()], left)
                .map_err(|e| RendezvousError::from_io("poll", &self.path, &e))?;
            if !ready[0] {
                continue;
            }
            let Some((bytes, got)) = conn
                .recv()
                .map_err(|e| self.leader_gone(&conn, &e, "recvmsg", start))?
            else {
                return Err(RendezvousError::MemberLost { rank: Some(0) });
            };
            let frame = Frame::decode(&bytes)?;
            match frame.kind {
                FrameKind::Abort => return Err(frame.abort_error(&self.path, start.elapsed())),
                FrameKind::Share => {
                    let known = frame.rank >= self.world
                        || frame.rank == self.rank
                        || peers.iter().any(|p| p.rank == frame.rank);
                    if known || got.len() != frame.fds as usize {
                        return Err(RendezvousError::Protocol {
                            what: format!(
                                "a share for rank {} with {} of {} descriptors",
                                frame.rank,
                                got.len(),
                                frame.fds
                            ),
                        });
                    }
                    peers.push(PeerShare {
                        rank: frame.rank,
                        size: frame.size,
                        fds: got,
                    });
                }
                FrameKind::Done if peers.len() + 1 == self.world as usize => {
                    peers.sort_by_key(|p| p.rank);
                    return Ok(peers);
                }
                kind => {
                    return Err(RendezvousError::Protocol {
                        what: format!(
                            "{kind:?} from the leader after {} of {} shares",
                            peers.len(),
                            self.world - 1
                        ),
                    })
                }
            }
        }
    }

    /// Connects to the leader, retrying while nobody listens yet.
    fn connect(&self, start: Instant, deadline: Instant) -> Result<Conn, RendezvousError> {
        loop {
            // A socket file that refuses is stale (its leader died) until
            // this run's leader replaces it.
            let stale = match Conn::connect(&self.path) {
                Ok(conn) => return Ok(conn),
                Err(e) => match e.raw_os_error() {
                    Some(libc::ENOENT) => false,
                    Some(libc::ECONNREFUSED) => true,
                    _ => return Err(RendezvousError::from_io("connect", &self.path, &e)),
                },
            };
            let now = Instant::now();
            if now >= deadline {
                return Err(RendezvousError::LeaderNotFound {
                    path: self.path.clone(),
                    waited: now - start,
                    stale,
                });
            }
            std::thread::sleep(CONNECT_RETRY.min(deadline - now));
        }
    }

    /// What `op` failing with `e` on the connection to the leader means.
    /// A leader that failed the group before reading this follower's
    /// hello sent its verdict and closed the connection with the hello
    /// unread, which the kernel reports to this end as a reset (on the
    /// hello's send, or on the next receive, before the queued verdict):
    /// the verdict, read then, is the error; without one, the leader is
    /// lost.
    fn leader_gone(
        &self,
        conn: &Conn,
        e: &std::io::Error,
        op: &'static str,
        start: Instant,
    ) -> RendezvousError {
        let lost = self.lost_leader(e, op);
        if !matches!(lost, RendezvousError::MemberLost { .. }) {
            return lost;
        }
        // The leader is gone: the read does not wait.
        match conn.recv() {
            Ok(Some((bytes, _))) => match Frame::decode(&bytes) {
                Ok(f) if f.kind == FrameKind::Abort => f.abort_error(&self.path, start.elapsed()),
                _ => lost,
            },
            _ => lost,
        }
    }

    fn lost_leader(&self, e: &std::io::Error, op: &'static str) -> RendezvousError {
        match e.raw_os_error() {
            Some(libc::EPIPE | libc::ECONNRESET) => RendezvousError::MemberLost { rank: Some(0) },
            _ => RendezvousError::from_io(op, &self.path, e),
        }
    }
}

/// A follower the leader heard from.
struct Member {
    conn: Conn,
    share: PeerShare,
}

/// Rank 0's side: the listener, the connections and the shares.
struct Leader<'a> {
    request: &'a Rendezvous,
    size: u64,
    fds: &'a [BorrowedFd<'a>],
    start: Instant,
    listener: Listener,
    /// Removes the socket file when the leader ends.
    _socket_file: SocketFile,
    /// Connected, not yet said who they are.
    pending: Vec<Conn>,
    members: Vec<Member>,
}

impl<'a> Leader<'a> {
    fn new(
        request: &'a Rendezvous,
        size: u64,
        fds: &'a [BorrowedFd<'a>],
        start: Instant,
    ) -> Result<Leader<'a>, RendezvousError> {
        let (listener, socket_file) = bind(&request.path, request.world)?;
        Ok(Leader {
            request,
            size,
            fds,
            start,
            listener,
            _socket_file: socket_file,
            pending: Vec::new(),
            members: Vec::new(),
        })
    }

    fn run(mut self) -> Result<Vec<PeerShare>, RendezvousError> {
        match self.gather().and_then(|()| self.distribute()) {
            Ok(()) => {
                let mut peers: Vec<PeerShare> = self.members.into_iter().map(|m| m.share).collect();
                peers.sort_by_key(|p| p.rank);
                Ok(peers)
            }
            Err(e) => {
                let abort = Frame::abort(&e);
                for conn in self
                    .pending
                    .iter()
                    .chain(self.members.iter().map(|m| &m.conn))
                {
                    // A follower that is gone cannot be told; it is failing anyway.
                    let _ = conn.send(&abort, &[]);
                }
                // Followers that have not connected yet learn the verdict
                // when they do (until the deadline), instead of finding no
                // leader: the listener and the socket file stay open that
                // long on a thread of their own.
                let connected = self.members.len() + self.pending.len();
                let late = (self.request.world as usize - 1).saturating_sub(connected);
                let deadline = self.start + self.request.timeout;
                if late > 0 && Instant::now() < deadline {
                    let (listener, file) = (self.listener, self._socket_file);
                    std::thread::spawn(move || tell_late(&listener, file, &abort, deadline, late));
                }
                Err(e)
            }
        }
    }

    /// Waits for every follower's hello.
    fn gather(&mut self) -> Result<(), RendezvousError> {
        let path = &self.request.path;
        let deadline = self.start + self.request.timeout;
        while self.members.len() + 1 < self.request.world as usize {
            let now = Instant::now();
            if now >= deadline {
                let missing = (1..self.request.world)
                    .filter(|r| !self.members.iter().any(|m| m.share.rank == *r))
                    .collect();
                return Err(RendezvousError::Timeout {
                    path: path.clone(),
                    waited: now - self.start,
                    missing,
                });
            }
            let mut watched = vec![self.listener.as_fd()];
            watched.extend(self.pending.iter().map(|c| c.as_fd()));
            watched.extend(self.members.iter().map(|m| m.conn.as_fd()));
            let ready = poll_readable(&watched, deadline - now)
                .map_err(|e| RendezvousError::from_io("poll", path, &e))?;
            let (pending_ready, member_ready) = ready[1..].split_at(self.pending.len());
            // A member that already said hello has nothing more to say: a
            // readable socket is its end-of-file (or a protocol error).
            if let Some(i) = member_ready.iter().position(|&r| r) {
                let rank = self.members[i].share.rank;
                return Err(match self.members[i].conn.recv() {
                    Ok(Some(_)) => RendezvousError::Protocol {
                        what: format!("rank {rank} sent a second message before the shares"),
                    },
                    _ => RendezvousError::MemberLost { rank: Some(rank) },
                });
            }
            let said: Vec<usize> = (0..pending_ready.len())
                .filter(|&i| pending_ready[i])
                .collect();
            for i in said.into_iter().rev() {
                let conn = self.pending.swap_remove(i);
                // One that leaves before saying who it is is no member (a
                // probe, or a member that will fail on its own).
                if let Ok(Some((bytes, fds))) = conn.recv() {
                    self.admit(conn, &bytes, fds)?;
                }
            }
            if ready[0] {
                match self.listener.accept() {
                    Ok(conn) => self.pending.push(conn),
                    Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => {}
                    Err(e) => return Err(RendezvousError::from_io("accept", path, &e)),
                }
            }
        }
        Ok(())
    }

    /// Checks a follower's hello against the leader's own request.
    fn admit(
        &mut self,
        conn: Conn,
        bytes: &[u8],
        fds: Vec<OwnedFd>,
    ) -> Result<(), RendezvousError> {
        let frame = match Frame::decode(bytes) {
            Ok(f) if f.kind == FrameKind::Hello => f,
            Ok(f) => {
                self.pending.push(conn);
                return Err(RendezvousError::Protocol {
                    what: format!("a {:?} where a Hello was expected", f.kind),
                });
            }
            Err(e) => {
                self.pending.push(conn);
                return Err(e);
            }
        };
        let world = self.request.world;
        let verdict = if frame.world != world {
            Some(RendezvousError::WorldMismatch {
                rank: frame.rank,
                world: frame.world,
                expected: world,
            })
        } else if frame.rank == 0 || frame.rank >= world {
            Some(RendezvousError::Protocol {
                what: format!(
                    "a follower claimed rank {} in a group of {world}",
                    frame.rank
                ),
            })
        } else if self.members.iter().any(|m| m.share.rank == frame.rank) {
            Some(RendezvousError::DuplicateRank { rank: frame.rank })
        } else if (frame.size ^ self.size) & self.request.agreed != 0 {
            Some(RendezvousError::SizeMismatch {
                rank: frame.rank,
                size: frame.size,
                expected: self.size,
            })
        } else if fds.len() != frame.fds as usize || fds.len() != self.fds.len() {
            Some(RendezvousError::Protocol {
                what: format!(
                    "rank {} shared {} descriptor(s) (it said {}); rank 0 shares {}",
                    frame.rank,
                    fds.len(),
                    frame.fds,
                    self.fds.len()
                ),
            })
        } else {
            None
        };
        if let Some(err) = verdict {
            self.pending.push(conn);
            return Err(err);
        }
        self.members.push(Member {
            conn,
            share: PeerShare {
                rank: frame.rank,
                size: frame.size,
                fds,
            },
        });
        Ok(())
    }

    /// Sends every follower each other member's share, then `Done` to all
    /// (only once every share went out, so a member lost on the way fails
    /// the whole group).
    fn distribute(&self) -> Result<(), RendezvousError> {
        let mut own = Frame::new(FrameKind::Share);
        (own.rank, own.size, own.fds) = (0, self.size, self.fds.len() as u32);
        for to in &self.members {
            let send = |frame: &Frame, fds: &[BorrowedFd<'_>]| {
                to.conn
                    .send(frame, fds)
                    .map_err(|e| match e.raw_os_error() {
                        Some(libc::EPIPE | libc::ECONNRESET) => RendezvousError::MemberLost {
                            rank: Some(to.share.rank),
                        },
                        _ => RendezvousError::from_io("sendmsg", &self.request.path, &e),
                    })
            };
            send(&own, self.fds)?;
            for from in self
                .members
                .iter()
                .filter(|m| m.share.rank != to.share.rank)
            {
                let mut share = Frame::new(FrameKind::Share);
                (share.rank, share.size, share.fds) = (
                    from.share.rank,
                    from.share.size,
                    from.share.fds.len() as u32,
                );
                let fds: Vec<BorrowedFd<'_>> = from.share.fds.iter().map(|f| f.as_fd()).collect();
                send(&share, &fds)?;
            }
        }
        for to in &self.members {
            to.conn
                .send(&Frame::new(FrameKind::Done), &[])
                .map_err(|_| RendezvousError::MemberLost {
                    rank: Some(to.share.rank),
                })?;
        }
        Ok(())
    }
}

/// Answers up to `late` followers that connect before `deadline` with the
/// leader's `abort` verdict (after their hello, so that they read it
/// rather than fail to send), then removes the socket file.
fn tell_late(
    listener: &Listener,
    _file: SocketFile,
    abort: &Frame,
    deadline: Instant,
    late: usize,
) {
    let mut told = 0;
    while told < late {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return;
        };
        if !matches!(
            poll_readable(&[listener.as_fd()], left).as_deref(),
            Ok([true])
        ) {
            continue;
        }
        let Ok(conn) = listener.accept() else {
            continue;
        };
        let wait = left.min(Duration::from_secs(1));
        if matches!(poll_readable(&[conn.as_fd()], wait).as_deref(), Ok([true])) {
            let _ = conn.recv();
        }
        let _ = conn.send(abort, &[]);
        told += 1;
    }
}

/// The leader's socket file, removed on drop if it is still the one this
/// leader bound (never another leader's, never a user's file).
struct SocketFile {
    path: PathBuf,
    id: Option<(u64, u64)>,
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if self.id.is_some() && file_id(&self.path) == self.id {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn file_id(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Binds the leader's socket, replacing a stale socket file (one nobody
/// listens on, left by a run that died) but never a live one or a file
/// that is not a socket.
fn bind(path: &Path, world: u32) -> Result<(Listener, SocketFile), RendezvousError> {
    let mut replaced_stale = false;
    loop {
        match Listener::bind(path, world) {
            Ok(listener) => {
                let file = SocketFile {
                    path: path.to_owned(),
                    id: file_id(path),
                };
                return Ok((listener, file));
            }
            Err(e) if e.raw_os_error() == Some(libc::EADDRINUSE) && !replaced_stale => {
                let is_socket = std::fs::symlink_metadata(path)
                    .map(|m| m.file_type().is_socket())
                    .unwrap_or(false);
                if !is_socket {
                    return Err(RendezvousError::InvalidRequest {
                        what: format!(
                            "{} exists and is not a socket; choose a path for the rendezvous socket",
                            path.display()
                        ),
                    });
                }
                match Conn::connect(path) {
                    Ok(_probe) => {
                        return Err(RendezvousError::AddressInUse {
                            path: path.to_owned(),
                        })
                    }
                    Err(c) if c.raw_os_error() == Some(libc::ECONNREFUSED) => {
                        std::fs::remove_file(path)
                            .map_err(|e| RendezvousError::from_io("unlink", path, &e))?;
                        replaced_stale = true;
                    }
                    // It vanished in between: bind again.
                    Err(c) if c.raw_os_error() == Some(libc::ENOENT) => {}
                    Err(c) => return Err(RendezvousError::from_io("connect", path, &c)),
                }
            }
            Err(e) => return Err(RendezvousError::from_io("bind", path, &e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_requests_are_refused_before_any_socket() {
        let long = "/tmp/".to_owned() + &"x".repeat(200);
        for (rv, fds) in [
            (Rendezvous::new("/tmp/a", 2, 2), 0),
            (Rendezvous::new("/tmp/a", 0, 0), 0),
            (Rendezvous::new("/tmp/a", 0, MAX_WORLD + 1), 0),
            (Rendezvous::new(long, 0, 2), 0),
            (Rendezvous::new("/tmp/a", 0, 2), MAX_FDS_PER_FRAME + 1),
        ] {
            assert!(matches!(
                rv.validate(fds),
                Err(RendezvousError::InvalidRequest { .. })
            ));
        }
    }

    /// A leader that fails the group while a follower's hello sits unread
    /// sends its verdict and closes; the kernel then reports a reset to
    /// the follower before the verdict. The follower still returns the
    /// verdict, not a lost leader.
    #[test]
    fn a_verdict_behind_a_reset_is_still_the_follower_s_error() {
        let path = std::env::temp_dir().join(format!("vigil-rv-reset-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let listener = Listener::bind(&path, 4).expect("bind");
        let verdict = RendezvousError::SizeMismatch {
            rank: 2,
            size: 4096,
            expected: 8192,
        };
        let leader = {
            let abort = Frame::abort(&verdict);
            std::thread::spawn(move || {
                let conn = listener.accept().expect("accept");
                // Wait for the hello, leave it unread, answer and close.
                let ready = poll_readable(&[conn.as_fd()], Duration::from_secs(10)).expect("poll");
                assert!(ready[0], "the follower's hello arrives");
                conn.send(&abort, &[]).expect("send the verdict");
            })
        };
        let got = Rendezvous::new(&path, 1, 3)
            .timeout(Duration::from_secs(10))
            .exchange(8192, &[]);
        leader.join().expect("leader thread");
        let _ = std::fs::remove_file(&path);
        assert_eq!(got.unwrap_err(), verdict);
    }

    #[test]
    fn a_group_of_one_needs_no_socket() {
        let path = std::env::temp_dir().join("vigil-rv-never-created.sock");
        let peers = Rendezvous::new(&path, 0, 1).exchange(8, &[]).unwrap();
        assert!(peers.is_empty());
        assert!(!path.exists());
    }
}
