//! [`RendezvousError`]: everything a rendezvous can end in, other than
//! success, with what a user needs to act on it.

use std::path::PathBuf;
use std::time::Duration;

/// Why a [`Rendezvous`](super::Rendezvous) failed.
///
/// The verdicts about the group (size or world mismatch, timeout, a lost
/// member) reach every member that is still connected: the leader decides
/// and tells the others, so all members fail with the same variant.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RendezvousError {
    /// The request itself is malformed (rank past world, too many
    /// descriptors, a socket path too long for `sockaddr_un`).
    #[error("invalid rendezvous request: {what}")]
    InvalidRequest {
        /// What is wrong and what is accepted.
        what: String,
    },

    /// Another rendezvous is live at this socket path (a leader answered).
    #[error(
        "a rendezvous is already listening at {}; use another path or wait for it to end",
        path.display()
    )]
    AddressInUse {
        /// The socket path.
        path: PathBuf,
    },

    /// A socket call failed.
    #[error("{op} on the rendezvous socket {} failed: {message} (errno {errno})", path.display())]
    Socket {
        /// The system call (`bind`, `sendmsg`, ...).
        op: &'static str,
        /// The socket path.
        path: PathBuf,
        /// The `errno` value.
        errno: i32,
        /// The system's text for it.
        message: String,
    },

    /// A member asked for an allocation of another size than the leader.
    #[error(
        "rank {rank} asked for {size} bytes but rank 0 asked for {expected}: every member of a \
         symmetric allocation must ask for the same size"
    )]
    SizeMismatch {
        /// The member that differs.
        rank: u32,
        /// What it asked for, in bytes.
        size: u64,
        /// What rank 0 asked for, in bytes.
        expected: u64,
    },

    /// A member believes the group has another number of members.
    #[error("rank {rank} expects a group of {world} but rank 0 expects {expected}")]
    WorldMismatch {
        /// The member that differs.
        rank: u32,
        /// Its group size.
        world: u32,
        /// Rank 0's group size.
        expected: u32,
    },

    /// Two members claimed the same rank.
    #[error("two members claimed rank {rank}")]
    DuplicateRank {
        /// The rank claimed twice.
        rank: u32,
    },

    /// Not every member arrived before the deadline.
    #[error(
        "rendezvous at {} timed out after {waited:?}; missing rank(s): {}",
        path.display(),
        missing_list(missing)
    )]
    Timeout {
        /// The socket path.
        path: PathBuf,
        /// How long this member waited.
        waited: Duration,
        /// The ranks that never arrived (empty: the leader did not say).
        missing: Vec<u32>,
    },

    /// A follower found no leader listening at the path before its
    /// deadline.
    #[error(
        "no rendezvous leader (rank 0) at {} after {waited:?}{}",
        path.display(),
        if *stale { ": the socket file exists but nobody listens on it (stale from an earlier run?)" } else { "" }
    )]
    LeaderNotFound {
        /// The socket path.
        path: PathBuf,
        /// How long it tried.
        waited: Duration,
        /// The path existed but refused connections.
        stale: bool,
    },

    /// A member hung up (died) before the rendezvous completed.
    #[error("{} hung up before the rendezvous completed (did it die?)", member_name(*rank))]
    MemberLost {
        /// Its rank, if it had said it.
        rank: Option<u32>,
    },

    /// A member sent something that is not this protocol.
    #[error("rendezvous protocol error: {what}")]
    Protocol {
        /// What was wrong.
        what: String,
    },
}

fn missing_list(missing: &[u32]) -> String {
    if missing.is_empty() {
        return "unknown (the leader did not answer)".to_owned();
    }
    let ranks: Vec<String> = missing.iter().map(u32::to_string).collect();
    ranks.join(", ")
}

fn member_name(rank: Option<u32>) -> String {
    match rank {
        Some(0) => "the leader (rank 0)".to_owned(),
        Some(r) => format!("rank {r}"),
        None => "a member".to_owned(),
    }
}

impl RendezvousError {
    /// A failed system call described by `e`.
    pub(super) fn from_io(
        op: &'static str,
        path: &std::path::Path,
        e: &std::io::Error,
    ) -> RendezvousError {
        RendezvousError::Socket {
            op,
            path: path.to_owned(),
            errno: e.raw_os_error().unwrap_or(0),
            message: e.to_string(),
        }
    }
}
