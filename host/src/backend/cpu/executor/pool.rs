//! The worker pool: one OS thread per virtual SM, alive as long as the
//! executor, each with its own [`Worker`] (coroutine stacks, block state,
//! shared memory). A launch hands every worker the same [`Job`] and waits
//! until all of them have finished with it.

use super::fiber::Worker;
use super::job::Job;
use super::panic;
use crate::error::CpuError;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A job handed to the workers, its lifetime erased.
#[derive(Clone, Copy)]
struct JobPtr(*const Job<'static>);

// SAFETY: a `Job` is `Sync` (atomics, a mutex, shared references to `Sync`
// data and plain values); the pointer is only dereferenced while `Pool::run`
// keeps the job alive.
unsafe impl Send for JobPtr {}

/// What the launching thread and the workers share.
struct Slot {
    /// Bumped for every job, so that each worker takes each job once.
    generation: u64,
    job: Option<JobPtr>,
    /// Workers that have not finished the current job.
    remaining: usize,
    shutdown: bool,
}

struct Shared {
    slot: Mutex<Slot>,
    /// Signals a new job or shutdown to the workers.
    wake: Condvar,
    /// Signals the launching thread that the last worker finished.
    done: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The pool of worker threads.
pub(crate) struct Pool {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// Serialises launches: the workers run one job at a time.
    launch: Mutex<()>,
}

impl Pool {
    /// Starts `workers` threads whose coroutines get `stack_size`-byte stacks.
    pub(crate) fn new(workers: usize, stack_size: usize) -> Result<Self, CpuError> {
        let shared = Arc::new(Shared {
            slot: Mutex::new(Slot {
                generation: 0,
                job: None,
                remaining: 0,
                shutdown: false,
            }),
            wake: Condvar::new(),
            done: Condvar::new(),
        });
        let mut pool = Pool {
            shared,
            threads: Vec::with_capacity(workers),
            launch: Mutex::new(()),
        };
        for smid in 0..workers {
            let shared = Arc::clone(&pool.shared);
            let smid = u32::try_from(smid).expect("worker count fits u32");
            let handle = std::thread::Builder::new()
                .name(format!("vigil-cpu-sm{smid}"))
                .spawn(move || worker_main(&shared, Worker::new(smid, stack_size)))
                .map_err(|e| CpuError::Resource {
                    what: "spawn a worker thread",
                    reason: e.to_string(),
                })?;
            pool.threads.push(handle);
        }
        Ok(pool)
    }

    /// The number of workers.
    pub(crate) fn workers(&self) -> usize {
        self.threads.len()
    }

    /// Runs `job` on every worker and returns when all have finished with
    /// it. After `timeout` the job is aborted with [`CpuError::Timeout`];
    /// its threads stop at their next memory read (a thread that never
    /// reads memory cannot be stopped, and the wait goes on).
    pub(crate) fn run(&self, job: &Job<'_>, timeout: Option<Duration>) {
        let _launch = self.launch.lock().unwrap_or_else(PoisonError::into_inner);
        let deadline = timeout.and_then(|t| Some((Instant::now().checked_add(t)?, t)));
        job.spin_watch().begin(self.threads.len());
        let mut slot = self.shared.lock();
        slot.generation += 1;
        slot.job = Some(JobPtr((job as *const Job<'_>).cast()));
        slot.remaining = self.threads.len();
        self.shared.wake.notify_all();
        let mut timed_out = false;
        while slot.remaining > 0 {
            slot = match deadline {
                Some((at, limit)) if !timed_out => {
                    let left = at.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        timed_out = true;
                        let (finished, total) = job.progress();
                        job.abort(CpuError::Timeout {
                            limit,
                            finished,
                            total,
                        });
                        continue;
                    }
                    self.shared
                        .done
                        .wait_timeout(slot, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                _ => self
                    .shared
                    .done
                    .wait(slot)
                    .unwrap_or_else(PoisonError::into_inner),
            };
        }
        slot.job = None;
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.wake.notify_all();
        for t in self.threads.drain(..) {
            // A worker never panics out of its loop; nothing to report if it did.
            let _ = t.join();
        }
    }
}

/// A worker thread: waits for a job, runs blocks of it, reports back.
fn worker_main(shared: &Shared, mut worker: Worker) {
    panic::capture_on_this_thread();
    let mut seen = 0;
    loop {
        let job = {
            let mut slot = shared.lock();
            loop {
                if slot.shutdown {
                    return;
                }
                if slot.generation != seen {
                    if let Some(job) = slot.job {
                        seen = slot.generation;
                        break job;
                    }
                }
                slot = shared
                    .wake
                    .wait(slot)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        // SAFETY: `Pool::run` keeps the job alive (and its pointer in the
        // slot) until every worker has decremented `remaining` below.
        let job = unsafe { &*job.0 };
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| job.run_on(&mut worker))) {
            let message = panic::take_record()
                .map_or_else(|| panic::payload_message(payload.as_ref()), |r| r.message);
            job.fail(u64::MAX, CpuError::Internal(message));
            // The worker's state may be inconsistent: start afresh.
            worker = Worker::new(worker.smid(), worker.stack_size());
        }
        let mut slot = shared.lock();
        slot.remaining -= 1;
        if slot.remaining == 0 {
            shared.done.notify_all();
        }
    }
}
