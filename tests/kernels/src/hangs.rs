//! Kernels that do not finish on their own, for the tests that a hang
//! becomes an error: the CPU backend's livelock detection and the launch
//! timeout on both backends.

use vigil_device::prelude::*;

/// Thread 0 of each block polls `flag[0]` (acquire, device scope) until it
/// is not zero, at most `max_polls` times (`0`: without limit, which on
/// the CPU backend is a livelock and on a GPU a hang until the flag is
/// set), then writes in `seen[block]` whether it saw the flag set (1) or
/// gave up (0); the other threads return.
#[kernel]
pub fn wait_for_flag(flag: GlobalSliceMut<u32>, seen: GlobalSliceMut<u32>, max_polls: u32) {
    if thread_idx().x != 0 {
        return;
    }
    let mut polls = 0u32;
    let mut set = 1;
    while flag.at(0).atomic_load(Ordering::Acquire, Scope::Device) == 0 {
        polls = polls.wrapping_add(1);
        if polls == max_polls {
            set = 0;
            break;
        }
    }
    seen.store(block_idx().x as usize, set);
}

/// Thread 0 polls `flags[0]` and `flags[1]` in turn until one is not zero:
/// it never reads one address twice in a row, so the CPU backend cannot
/// tell it from a thread at work, and only a launch timeout ends it.
#[kernel]
pub fn wait_for_either_flag(flags: GlobalSliceMut<u32>) {
    if thread_idx().x != 0 {
        return;
    }
    while flags.load(0) == 0 && flags.load(1) == 0 {}
}

/// Thread 0 of block 0 sets `flag[0]` to 1 (release, device scope).
#[kernel]
pub fn set_flag(flag: GlobalSliceMut<u32>) {
    if thread_idx().x == 0 && block_idx().x == 0 {
        flag.at(0).atomic_store(1, Ordering::Release, Scope::Device);
    }
}
