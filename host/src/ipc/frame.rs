//! The rendezvous wire format: one fixed-size [`Frame`] per
//! `SOCK_SEQPACKET` message, little-endian, its file descriptors (if any)
//! riding along as `SCM_RIGHTS`.

use super::error::RendezvousError;

/// `"VGRV"`: the first word of every frame, so a stray client is told
/// apart from a member.
const MAGIC: u32 = 0x5652_4756;
/// Bumped on any change to the frame layout or the protocol.
const VERSION: u16 = 1;

/// Bytes of one encoded frame.
pub(super) const FRAME_BYTES: usize = 40;

/// What a frame says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FrameKind {
    /// Follower to leader: my rank, world, size, and my descriptors.
    Hello,
    /// Leader to follower: one member's rank, size and descriptors.
    Share,
    /// Leader to follower: every share was sent; the rendezvous succeeded.
    Done,
    /// Leader to follower: the rendezvous failed (`code` says why).
    Abort,
}

impl FrameKind {
    fn code(self) -> u16 {
        match self {
            FrameKind::Hello => 1,
            FrameKind::Share => 2,
            FrameKind::Done => 3,
            FrameKind::Abort => 4,
        }
    }

    fn from_code(code: u16) -> Option<FrameKind> {
        Some(match code {
            1 => FrameKind::Hello,
            2 => FrameKind::Share,
            3 => FrameKind::Done,
            4 => FrameKind::Abort,
            _ => return None,
        })
    }
}

/// Why the leader aborted, as carried by an [`FrameKind::Abort`] frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AbortCode {
    /// `rank` asked for `size`, the leader for `detail`.
    SizeMismatch = 1,
    /// `rank` expects `world` members, the leader `detail`.
    WorldMismatch = 2,
    /// `rank` was claimed twice.
    DuplicateRank = 3,
    /// The ranks in the bit mask `detail` never arrived.
    Timeout = 4,
    /// `rank` (or an unknown member if `detail` is 0) hung up.
    MemberLost = 5,
    /// Something else; the leader's own error says what.
    Other = 6,
}

impl AbortCode {
    fn from_u32(code: u32) -> AbortCode {
        match code {
            1 => AbortCode::SizeMismatch,
            2 => AbortCode::WorldMismatch,
            3 => AbortCode::DuplicateRank,
            4 => AbortCode::Timeout,
            5 => AbortCode::MemberLost,
            _ => AbortCode::Other,
        }
    }
}

/// One message of the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Frame {
    pub kind: FrameKind,
    pub rank: u32,
    pub world: u32,
    pub size: u64,
    /// Descriptors attached to this message.
    pub fds: u32,
    /// An [`AbortCode`] for aborts, 0 otherwise.
    pub code: u32,
    /// Extra: the expected value of a mismatch, the missing-rank mask.
    pub detail: u64,
}

impl Frame {
    /// A frame of `kind` with every other field zero.
    pub fn new(kind: FrameKind) -> Frame {
        Frame {
            kind,
            rank: 0,
            world: 0,
            size: 0,
            fds: 0,
            code: 0,
            detail: 0,
        }
    }

    /// The abort frame that makes a follower fail with `err`.
    pub fn abort(err: &RendezvousError) -> Frame {
        let mut f = Frame::new(FrameKind::Abort);
        f.code = AbortCode::Other as u32;
        match *err {
            RendezvousError::SizeMismatch {
                rank,
                size,
                expected,
            } => {
                (f.code, f.rank, f.size, f.detail) =
                    (AbortCode::SizeMismatch as u32, rank, size, expected);
            }
            RendezvousError::WorldMismatch {
                rank,
                world,
                expected,
            } => {
                (f.code, f.rank, f.world, f.detail) = (
                    AbortCode::WorldMismatch as u32,
                    rank,
                    world,
                    u64::from(expected),
                );
            }
            RendezvousError::DuplicateRank { rank } => {
                (f.code, f.rank) = (AbortCode::DuplicateRank as u32, rank);
            }
            RendezvousError::Timeout { ref missing, .. } => {
                f.code = AbortCode::Timeout as u32;
                f.detail = missing.iter().fold(0, |m, &r| m | 1u64 << r);
            }
            RendezvousError::MemberLost { rank } => {
                f.code = AbortCode::MemberLost as u32;
                (f.rank, f.detail) = (rank.unwrap_or(0), u64::from(rank.is_some()));
            }
            _ => {}
        }
        f
    }

    /// The error an abort frame stands for, as seen by a follower that
    /// waited `waited` on `path`.
    pub fn abort_error(
        &self,
        path: &std::path::Path,
        waited: std::time::Duration,
    ) -> RendezvousError {
        match AbortCode::from_u32(self.code) {
            AbortCode::SizeMismatch => RendezvousError::SizeMismatch {
                rank: self.rank,
                size: self.size,
                expected: self.detail,
            },
            AbortCode::WorldMismatch => RendezvousError::WorldMismatch {
                rank: self.rank,
                world: self.world,
                expected: self.detail as u32,
            },
            AbortCode::DuplicateRank => RendezvousError::DuplicateRank { rank: self.rank },
            AbortCode::Timeout => RendezvousError::Timeout {
                path: path.to_owned(),
                waited,
                missing: (0..64).filter(|r| self.detail >> r & 1 == 1).collect(),
            },
            AbortCode::MemberLost => RendezvousError::MemberLost {
                rank: (self.detail != 0).then_some(self.rank),
            },
            AbortCode::Other => RendezvousError::Protocol {
                what: "the leader (rank 0) aborted the rendezvous (its own error says why)"
                    .to_owned(),
            },
        }
    }

    /// The frame's bytes.
    pub fn encode(&self) -> [u8; FRAME_BYTES] {
        let mut b = [0u8; FRAME_BYTES];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&VERSION.to_le_bytes());
        b[6..8].copy_from_slice(&self.kind.code().to_le_bytes());
        b[8..12].copy_from_slice(&self.rank.to_le_bytes());
        b[12..16].copy_from_slice(&self.world.to_le_bytes());
        b[16..24].copy_from_slice(&self.size.to_le_bytes());
        b[24..28].copy_from_slice(&self.fds.to_le_bytes());
        b[28..32].copy_from_slice(&self.code.to_le_bytes());
        b[32..40].copy_from_slice(&self.detail.to_le_bytes());
        b
    }

    /// Decodes one message of `len` bytes.
    pub fn decode(b: &[u8]) -> Result<Frame, RendezvousError> {
        let bad = |what: String| RendezvousError::Protocol { what };
        if b.len() != FRAME_BYTES {
            return Err(bad(format!(
                "a message of {} bytes (a frame is {FRAME_BYTES})",
                b.len()
            )));
        }
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| u64::from(u32_at(i)) | u64::from(u32_at(i + 4)) << 32;
        if u32_at(0) != MAGIC {
            return Err(bad("not a Vigil rendezvous message (bad magic)".to_owned()));
        }
        if u16_at(4) != VERSION {
            return Err(bad(format!(
                "protocol version {} (this build speaks {VERSION}): every member must run the same Vigil",
                u16_at(4)
            )));
        }
        let kind = FrameKind::from_code(u16_at(6))
            .ok_or_else(|| bad(format!("unknown message kind {}", u16_at(6))))?;
        Ok(Frame {
            kind,
            rank: u32_at(8),
            world: u32_at(12),
            size: u64_at(16),
            fds: u32_at(24),
            code: u32_at(28),
            detail: u64_at(32),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::Duration;

    #[test]
    fn frames_round_trip() {
        let f = Frame {
            kind: FrameKind::Share,
            rank: 3,
            world: 4,
            size: u64::MAX - 7,
            fds: 2,
            code: 0,
            detail: 1 << 40,
        };
        assert_eq!(Frame::decode(&f.encode()).unwrap(), f);
    }

    #[test]
    fn a_stray_message_is_a_protocol_error() {
        let mut b = Frame::new(FrameKind::Hello).encode();
        b[0] ^= 1;
        assert!(matches!(
            Frame::decode(&b),
            Err(RendezvousError::Protocol { .. })
        ));
        assert!(matches!(
            Frame::decode(&b[..8]),
            Err(RendezvousError::Protocol { .. })
        ));
    }

    #[test]
    fn every_group_verdict_survives_the_abort_frame() {
        let path = Path::new("/tmp/x.sock");
        let waited = Duration::from_secs(1);
        for err in [
            RendezvousError::SizeMismatch {
                rank: 2,
                size: 10,
                expected: 12,
            },
            RendezvousError::WorldMismatch {
                rank: 1,
                world: 3,
                expected: 2,
            },
            RendezvousError::DuplicateRank { rank: 5 },
            RendezvousError::Timeout {
                path: path.to_owned(),
                waited,
                missing: vec![1, 63],
            },
            RendezvousError::MemberLost { rank: Some(0) },
            RendezvousError::MemberLost { rank: None },
        ] {
            let frame = Frame::decode(&Frame::abort(&err).encode()).unwrap();
            assert_eq!(frame.abort_error(path, waited), err);
        }
    }
}
