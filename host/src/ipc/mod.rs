//! Inter-process plumbing for multi-process groups (one process per GPU):
//! a [`Rendezvous`] over a Unix-domain socket that checks every member
//! asked for the same allocation and hands each member every other
//! member's file descriptors (`SCM_RIGHTS`), e.g. exported CUDA memory
//! handles. Linux only, like the CUDA POSIX handle type it serves.
//!
//! The layer imports nothing else from the crate.

mod error;
mod frame;
mod rendezvous;
mod socket;

pub use error::RendezvousError;
pub use rendezvous::{PeerShare, Rendezvous, MAX_WORLD};
