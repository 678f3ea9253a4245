//! Programmatic dependent launch (sm_90+): a kernel launched with
//! programmatic stream serialisation (the host's
//! `LaunchConfig::with_programmatic_stream_serialization`) may start
//! while the kernel before it on its stream is still running, and
//! overlap its prologue with that kernel's tail.
//!
//! The earlier kernel (the primary) calls [`launch_dependents`] once its
//! blocks no longer need the whole GPU to themselves; the dependent calls
//! [`wait`] before it touches anything the primary writes: the wait
//! returns when the primary has completed and its memory operations are
//! visible. Without the launch attribute (and on the CPU backend, which
//! runs a stream's launches one after the other) both are no-ops in
//! effect: the dependent starts after the primary has finished.
//!
//! ```no_run
//! use vigil_device::prelude::*;
//! use vigil_device::grid_dependency;
//!
//! /// `y[i] = x[i] + 1`, where `x` is the previous kernel's output.
//! #[kernel]
//! pub fn add_one(x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
//!     let i = global_index_x();
//!     grid_dependency::wait(); // `x` is complete from here on
//!     if i < y.len() {
//!         y.store(i, x.load(i) + 1.0);
//!     }
//! }
//! ```

use crate::arch::async_imp;
use crate::hooks::Active;
use crate::sanitizer::Sanitizer;

/// Lets the dependent kernels of this launch start as soon as every
/// block of it has called this or exited (`griddepcontrol.launch_dependents`).
/// A hint: the dependents still [`wait`] for this kernel's completion
/// before they use its results.
#[inline(always)]
pub fn launch_dependents() {
    async_imp::launch_dependents()
}

/// Waits until the kernels this launch depends on have completed and
/// their memory operations are visible (`griddepcontrol.wait`); returns
/// at once in a launch without programmatic stream serialisation.
///
/// With the sanitizer, a dependent block's accesses before its wait are
/// unordered with the kernel before it, after the wait ordered, wherever
/// the wait is called.
#[inline(always)]
#[track_caller]
pub fn wait() {
    async_imp::wait_for_prerequisite_grids();
    Active::grid_dependency_wait();
}

/// [`wait`]: the sanitizer type plays no part any more (the build decides
/// what is checked: [`crate::sanitizer`]).
#[deprecated(note = "call `wait()`: the sanitizer sees it wherever it is called")]
#[inline(always)]
#[track_caller]
pub fn wait_in<S: Sanitizer>() {
    wait()
}
