//! A worker's scheduler: runs one block at a time, its threads as stackful
//! coroutines on the worker's OS thread.
//!
//! Each GPU thread is a coroutine on a stack from the worker's pool. A
//! thread runs until it returns or blocks (at `sync_threads` or in a warp
//! collective); one that never blocks simply runs to completion in its
//! first resumption. The scheduler goes warp by warp: it resumes a warp's
//! ready lanes until none is ready (all blocked or done), then moves to the
//! next warp, so a warp's collectives complete while its 32 stacks are
//! still in cache. When a pass over all warps leaves every live thread at
//! the barrier it releases them; when it leaves threads blocked with no
//! way forward it reports a deadlock instead of hanging. A thread that
//! keeps polling one address (a spin-wait on a flag) steps aside until the
//! next pass, so that the thread that sets the flag gets to run, as under
//! the GPU's independent thread scheduling. When every running thread of
//! the launch only spins, on memory that stays the same, the launch ends
//! with a livelock error ([`super::spin`]); when the launch is aborted
//! (a livelock elsewhere, a timeout) the block is abandoned.

use super::block::{BlockState, ThreadState, ThreadYielder};
use super::job::Job;
use super::panic;
use super::spin::{self, BlockSpin};
use super::stack::ColouredStack;
use crate::error::CpuError;
use corosensei::{Coroutine, CoroutineResult};
use std::panic::{catch_unwind, AssertUnwindSafe};
use vigil_device::host_runtime::{set_current, BlockRuntime, ThreadContext};
use vigil_device::Dim3;

/// A GPU thread's coroutine: returns the panic payload if the thread panicked.
type ThreadCoroutine = Coroutine<(), (), Result<(), PanicPayload>, ColouredStack>;

/// What a panicking thread left behind.
type PanicPayload = Box<dyn std::any::Any + Send>;

/// One worker's scheduler and the resources it reuses from block to block.
pub(crate) struct Worker {
    /// The worker's index, which is its blocks' virtual SM.
    smid: u32,
    stack_size: usize,
    /// Stacks of finished coroutines, for the next ones.
    stacks: Vec<ColouredStack>,
    /// The running block's coroutines, by linear thread index.
    tasks: Vec<Option<ThreadCoroutine>>,
    block: BlockState,
}

impl Worker {
    /// A worker for virtual SM `smid` whose coroutines get `stack_size`-byte stacks.
    pub(crate) fn new(smid: u32, stack_size: usize) -> Self {
        Worker {
            smid,
            stack_size,
            stacks: Vec::new(),
            tasks: Vec::new(),
            block: BlockState::new(),
        }
    }

    /// The worker's virtual SM.
    pub(crate) fn smid(&self) -> u32 {
        self.smid
    }

    /// The size of the worker's coroutine stacks.
    pub(crate) fn stack_size(&self) -> usize {
        self.stack_size
    }

    /// Runs block `linear` of `job` to completion; returns how many times
    /// a coroutine was resumed.
    pub(crate) fn run_block(&mut self, job: &Job<'_>, linear: u64) -> Result<u64, CpuError> {
        let block_idx = job.block_index(linear);
        let threads = job.threads_per_block();
        self.block.begin_block(
            threads,
            job.dynamic_shared_bytes(),
            job.abort_flag(),
            self.smid,
            job.sanitizer(),
        );
        self.tasks.clear();
        self.tasks.resize_with(threads as usize, || None);
        if let Some(s) = job.sanitizer() {
            s.block_start(self.smid, block_idx);
        }
        let result = self.schedule(job, block_idx);
        self.recycle();
        self.block.end_block();
        // SAFETY: clearing installs nothing.
        unsafe { set_current(None) };
        if let Some(s) = job.sanitizer() {
            s.block_end(self.smid, block_idx);
        }
        result
    }

    /// Runs the block's threads until all return, one panics, they
    /// deadlock, the launch livelocks, or the launch is aborted (then the
    /// block is abandoned and the job holds the launch's error).
    fn schedule(&mut self, job: &Job<'_>, block_idx: Dim3) -> Result<u64, CpuError> {
        let mut spin = BlockSpin::default();
        let result = self.run_passes(job, block_idx, &mut spin);
        // However it ended, the block no longer stalls the launch.
        spin.progress(job.spin_watch(), self.smid);
        result
    }

    /// [`Self::schedule`]'s scheduler passes, with the block's livelock
    /// detector `spin`.
    fn run_passes(
        &mut self,
        job: &Job<'_>,
        block_idx: Dim3,
        spin: &mut BlockSpin,
    ) -> Result<u64, CpuError> {
        let threads = job.threads_per_block();
        let mut resumes = 0u64;
        loop {
            let events = self.block.events();
            let mut progressed = false;
            for warp in 0..threads.div_ceil(32) {
                let lanes = warp * 32..threads.min(warp * 32 + 32);
                loop {
                    let mut ran = false;
                    for t in lanes.clone() {
                        match self.block.state(t) {
                            ThreadState::NotStarted => {
                                self.spawn(job, block_idx, t)?;
                                self.block.progress();
                            }
                            ThreadState::Ready => {}
                            _ => continue,
                        }
                        self.resume(job, block_idx, t)?;
                        resumes += 1;
                        ran = true;
                    }
                    if !ran {
                        break;
                    }
                    progressed = true;
                }
            }
            if self.block.live() == 0 || job.aborted() {
                return Ok(resumes);
            }
            match self.block.try_release_barrier() {
                Ok(true) => continue,
                Ok(false) => {}
                Err(d) => {
                    return Err(CpuError::DivergentBarrier(crate::error::DivergentBarrier {
                        block: block_idx,
                        barrier: d.barrier.to_string(),
                        detail: d.detail,
                    }))
                }
            }
            let spinners = self.block.spinners();
            if self.block.wake_yielded() {
                if self.block.events() != events {
                    spin.progress(job.spin_watch(), self.smid);
                } else if let Some(blocks) = spin.quiet_pass(
                    &self.block,
                    &spinners,
                    job.spin_watch(),
                    self.smid,
                    |spinners, block| {
                        let waiting = (block.live() as usize > spinners.len())
                            .then(|| block.describe_waits());
                        spin::stalled_block(block_idx, spinners, |t| job.thread_index(t), waiting)
                    },
                ) {
                    return Err(job.abort(spin::livelock(blocks, job.unstarted())));
                }
                continue;
            }
            if !progressed {
                return Err(CpuError::Deadlock {
                    block: block_idx,
                    detail: self.block.describe_waits(),
                });
            }
        }
    }

    /// Creates thread `t`'s coroutine.
    fn spawn(&mut self, job: &Job<'_>, block_idx: Dim3, t: u32) -> Result<(), CpuError> {
        let mut stack = match self.stacks.pop() {
            Some(s) => s,
            None => ColouredStack::new(self.stack_size).map_err(|e| CpuError::Resource {
                what: "allocate a coroutine stack",
                reason: e.to_string(),
            })?,
        };
        stack.set_colour(t % 32);
        let block: &BlockState = &self.block;
        let ctx = ThreadContext {
            thread_idx: job.thread_index(t),
            block_idx,
            block_dim: job.block_dim(),
            grid_dim: job.grid_dim(),
            smid: self.smid,
            block: block as &dyn BlockRuntime,
            sanitizer: job.sanitizer(),
            globals: job.globals(),
        };
        let (entry, params) = (job.entry(), job.params());
        let body = move |y: &ThreadYielder, ()| {
            block.set_yielder(y);
            // SAFETY: `ctx` lives on this coroutine's stack until the kernel
            // body returns; every suspension point reinstalls it afterwards
            // (the platform layer's contract), and the worker clears it
            // before the block's borrows end.
            unsafe { set_current(Some(&ctx)) };
            // The panic is caught here, once per thread, rather than around
            // every resumption.
            catch_unwind(AssertUnwindSafe(|| {
                // SAFETY: the launch's caller guarantees that `params` holds
                // the kernel's arguments and that its pointers are valid
                // (`launch`'s contract).
                unsafe { entry(params) }
            }))
        };
        // SAFETY: the body borrows the block state, the job's parameters and
        // sanitizer, all of which outlive the coroutine: `run_block` drives
        // every coroutine to completion or unwinds it (`recycle`) before it
        // returns, and the job outlives `run_block`.
        let co = unsafe { Coroutine::with_stack_unchecked(stack, body) };
        self.tasks[t as usize] = Some(co);
        Ok(())
    }

    /// Resumes thread `t` until it blocks, returns or panics.
    fn resume(&mut self, job: &Job<'_>, block_idx: Dim3, t: u32) -> Result<(), CpuError> {
        self.block.set_running(t);
        let co = self.tasks[t as usize]
            .as_mut()
            .expect("a runnable thread has a coroutine");
        let outcome = match co.resume(()) {
            CoroutineResult::Yield(()) => return Ok(()),
            CoroutineResult::Return(outcome) => outcome,
        };
        if let Some(co) = self.tasks[t as usize].take() {
            self.stacks.push(co.into_stack());
        }
        match outcome {
            Ok(()) => {
                self.block.thread_exited(t);
                Ok(())
            }
            Err(payload) => {
                let record = panic::take_record();
                let message = record.as_ref().map_or_else(
                    || panic::payload_message(payload.as_ref()),
                    |r| r.message.clone(),
                );
                Err(CpuError::KernelPanic {
                    block: block_idx,
                    thread: job.thread_index(t),
                    message,
                    location: record.and_then(|r| r.location),
                })
            }
        }
    }

    /// Returns every coroutine's stack to the pool, unwinding the threads
    /// that did not finish (after a panic or a deadlock).
    fn recycle(&mut self) {
        for slot in self.tasks.iter_mut() {
            let Some(mut co) = slot.take() else { continue };
            if co.done() {
                self.stacks.push(co.into_stack());
                continue;
            }
            // Unwinding runs the suspended thread's destructors; if that
            // panics, give up on the stack (the coroutine is never resumed
            // again, so leaking it is safe).
            match catch_unwind(AssertUnwindSafe(|| co.force_unwind())) {
                Ok(()) => self.stacks.push(co.into_stack()),
                Err(_) => std::mem::forget(co),
            }
        }
        let _ = panic::take_record();
    }
}
