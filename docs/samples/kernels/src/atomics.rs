//! Writing kernels: atomics, orderings and scopes.

use vigil_device::prelude::*;

// ANCHOR: histogram
/// Counts the values of `x` (each below `bins.len()`) into `bins`.
#[kernel]
pub fn histogram(x: GlobalSlice<u32>, bins: GlobalSliceMut<u32>) {
    let i = global_index_x();
    if i < x.len() {
        bins.at(x.load(i) as usize)
            .atomic_add(1, Ordering::Relaxed, Scope::Device);
    }
}
// ANCHOR_END: histogram

// ANCHOR: handoff
/// Block 0 writes `data`, then publishes it by storing 1 to `flag` with
/// `set`; block 1 waits for the flag with `wait` and copies `data` to
/// `out`. One thread per block. Race-free only with `set` a release,
/// `wait` an acquire and `scope` covering both blocks (device or system).
#[kernel]
pub fn handoff(
    data: GlobalSliceMut<u32>,
    flag: GlobalPtrMut<u32>,
    out: GlobalSliceMut<u32>,
    set: u32,
    wait: u32,
    scope: u32,
) {
    let scope = scope_of(scope);
    if block_idx().x == 0 {
        data.store(0, 42);
        flag.atomic_store(1, ordering_of(set), scope);
    } else {
        while flag.atomic_load(ordering_of(wait), scope) == 0 {}
        out.store(0, data.load(0));
    }
}
// ANCHOR_END: handoff

// ANCHOR: fenced_handoff
/// The same hand-off with relaxed flag accesses and fences: a release
/// fence before the flag's store and an acquire fence after its load
/// order `data` as a release store and an acquire load would. A kernel
/// that calls `fence` names its sanitizer type `S`.
#[kernel]
pub fn fenced_handoff<S: Sanitizer>(
    data: GlobalSliceMut<u32, S>,
    flag: GlobalPtrMut<u32, S>,
    out: GlobalSliceMut<u32, S>,
) {
    if block_idx().x == 0 {
        data.store(0, 42);
        thread_fence(Ordering::Release, Scope::Device);
        flag.atomic_store(1, Ordering::Relaxed, Scope::Device);
    } else {
        while flag.atomic_load(Ordering::Relaxed, Scope::Device) == 0 {}
        thread_fence(Ordering::Acquire, Scope::Device);
        out.store(0, data.load(0));
    }
}
// ANCHOR_END: fenced_handoff

/// The [`Ordering`] of a launch argument: 0 relaxed, 1 acquire, 2 release.
pub fn ordering_of(code: u32) -> Ordering {
    match code {
        1 => Ordering::Acquire,
        2 => Ordering::Release,
        _ => Ordering::Relaxed,
    }
}

/// The [`Scope`] of a launch argument: 0 block, 1 device, 2 system.
pub fn scope_of(code: u32) -> Scope {
    match code {
        0 => Scope::Block,
        2 => Scope::System,
        _ => Scope::Device,
    }
}
