//! [`Launch`]: one kernel launch as the front end hands it to a backend,
//! the one description both backends take.
//!
//! The front end fills it after every check: the entry that runs was
//! picked from those the kernel's lookup found (its variant is the
//! launch's), the configuration was validated against that entry's
//! attributes, and the packed arguments against its PTX parameters. A
//! backend trusts it: the CUDA backend only appends the sanitizer's hidden
//! arguments to a sanitized launch's parameters, and the CPU backend runs
//! the plain or checked host entry.

use crate::launch_abi::params::ParamBuffer;
use crate::types::{LaunchConfig, LaunchVariant, StreamId};
use std::time::Duration;

/// One checked kernel launch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Launch<'a> {
    /// The kernel's name (for errors and race reports).
    pub(crate) kernel: &'a str,
    /// Which of the kernel's entries runs: the plain one, or the sanitized
    /// one (with the GPU sanitizer's hidden arguments, or the CPU
    /// sanitizer's runtime).
    pub(crate) variant: LaunchVariant,
    /// The stream it is ordered on.
    pub(crate) stream: StreamId,
    /// Its grid, blocks and dynamic shared memory.
    pub(crate) config: LaunchConfig,
    /// The user's arguments, packed.
    pub(crate) params: &'a ParamBuffer,
    /// The context's launch timeout (the CPU backend bounds the launch; a
    /// GPU launch is asynchronous, and its waits are bounded instead).
    pub(crate) timeout: Option<Duration>,
}
