//! Kernels that do not finish on their own, for the tests that a hang
//! becomes an error (the CPU backend's livelock detection and the launch
//! timeout on both backends) and that work on other streams ends them on
//! a GPU (a flag set by a kernel, a copy or a memset; a persistent kernel
//! fed by launches).

use vigil_device::prelude::*;

/// Polls `word` (acquire, device scope) until `done` says yes to what it
/// read, at most `max_polls` times (`0`: without limit); true when it
/// did, false when it gave up.
#[inline(always)]
#[track_caller]
fn poll_until<S: Sanitizer>(
    word: GlobalPtrMut<u32, S>,
    max_polls: u32,
    done: impl Fn(u32) -> bool,
) -> bool {
    let mut polls = 0u32;
    while !done(word.atomic_load(Ordering::Acquire, Scope::Device)) {
        polls = polls.wrapping_add(1);
        if polls == max_polls {
            return false;
        }
    }
    true
}

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
    let set = poll_until(flag.at(0), max_polls, |v| v != 0);
    seen.store(block_idx().x as usize, u32::from(set));
}

/// [`fn@wait_for_flag`] for `flag[0] == value`: thread 0 of each block polls
/// until the flag holds `value` (a memset's zero, say), at most
/// `max_polls` times, and writes in `seen[block]` whether it saw it.
#[kernel]
pub fn wait_for_value(
    flag: GlobalSliceMut<u32>,
    seen: GlobalSliceMut<u32>,
    value: u32,
    max_polls: u32,
) {
    if thread_idx().x != 0 {
        return;
    }
    let saw = poll_until(flag.at(0), max_polls, |v| v == value);
    seen.store(block_idx().x as usize, u32::from(saw));
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

/// A persistent kernel served by launches on another stream: thread 0 of
/// block 0 serves `rounds` rounds; in round `k` (from 1) it waits until
/// `counter[0]` is `k` (acquire), then stores `k` in `ack[0]` (release).
/// It writes the rounds it served in `served[0]`: fewer than `rounds` when
/// a wait gave up after `max_polls` polls.
#[kernel]
pub fn serve_rounds(
    counter: GlobalSliceMut<u32>,
    ack: GlobalSliceMut<u32>,
    served: GlobalSliceMut<u32>,
    rounds: u32,
    max_polls: u32,
) {
    if thread_idx().x != 0 || block_idx().x != 0 {
        return;
    }
    let mut done = 0;
    while done < rounds {
        let round = done + 1;
        if !poll_until(counter.at(0), max_polls, |v| v == round) {
            break;
        }
        ack.at(0)
            .atomic_store(round, Ordering::Release, Scope::Device);
        done = round;
    }
    served.store(0, done);
}

/// One round of [`fn@serve_rounds`]' feed: thread 0 of block 0 waits until
/// `ack[0]` is `round - 1` (acquire: the server took the round before),
/// then stores `round` in `counter[0]` (release). It writes in
/// `fed[round - 1]` whether it did (1) or gave up after `max_polls` polls
/// (0).
#[kernel]
pub fn feed_round(
    counter: GlobalSliceMut<u32>,
    ack: GlobalSliceMut<u32>,
    fed: GlobalSliceMut<u32>,
    round: u32,
    max_polls: u32,
) {
    if thread_idx().x != 0 || block_idx().x != 0 || round == 0 {
        return;
    }
    let taken = poll_until(ack.at(0), max_polls, |v| v == round - 1);
    if taken {
        counter
            .at(0)
            .atomic_store(round, Ordering::Release, Scope::Device);
    }
    fed.store(round as usize - 1, u32::from(taken));
}
