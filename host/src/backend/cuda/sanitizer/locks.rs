//! The GPU sanitizer's locks, taken through [`lock`]: a thread that
//! takes a lock it already holds would wait for itself forever (a
//! `std::sync::Mutex` is not re-entrant), so each thread notes the locks
//! it holds and such a call fails at once, naming the lock, instead. The
//! easy way there: a guard that is a temporary of a `let` lives to the
//! statement's end, so `S { a: lock(&m).a, b: f() }` still holds `m`
//! while `f` runs, and `f` may take `m` too.
//!
//! A poisoned lock is taken anyway: a panic while holding one cannot
//! leave the sanitizer's bookkeeping in a state later calls cannot use.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, MutexGuard, PoisonError};

thread_local! {
    /// The addresses of the locks this thread holds through [`lock`].
    static HELD: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// A lock taken through [`lock`]; released, and no longer noted as this
/// thread's, when dropped (on the thread that took it: it is not `Send`).
pub(crate) struct Held<'a, T> {
    guard: MutexGuard<'a, T>,
    at: usize,
}

/// Takes `m`. Panics, naming the lock's type, if this thread holds it
/// already (through [`lock`]): the call would never return.
pub(crate) fn lock<T>(m: &Mutex<T>) -> Held<'_, T> {
    let at = std::ptr::from_ref(m).addr();
    let again = HELD.with_borrow(|held| held.contains(&at));
    if again {
        panic!(
            "the GPU race sanitizer took its lock of {} again on a thread that holds it: \
             a wait for itself that would never end (a bug of the sanitizer)",
            std::any::type_name::<T>()
        );
    }
    let guard = m.lock().unwrap_or_else(PoisonError::into_inner);
    HELD.with_borrow_mut(|held| held.push(at));
    Held { guard, at }
}

impl<T> Deref for Held<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for Held<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T> Drop for Held<'_, T> {
    fn drop(&mut self) {
        // `try_with`: a guard dropped while the thread's locals are torn
        // down has nothing left to unnote.
        let _ = HELD.try_with(|held| {
            let mut held = held.borrow_mut();
            if let Some(i) = held.iter().rposition(|&a| a == self.at) {
                held.swap_remove(i);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::mpsc;
    use std::time::Duration;

    /// Runs `f` on a thread of its own and returns how it ended, or
    /// `None` if it did not end within 10 s (it hangs).
    fn ends<R: Send + 'static>(
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Option<Result<R, String>> {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let out = catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
                p.downcast_ref::<String>()
                    .cloned()
                    .unwrap_or_else(|| "a panic without a message".to_owned())
            });
            let _ = tx.send(out);
        });
        rx.recv_timeout(Duration::from_secs(10)).ok()
    }

    #[derive(Clone, Copy, Debug, Default)]
    struct Descriptor {
        ring: u64,
        lanes: u64,
    }

    /// The shape of the collection that hung: a field read through a
    /// guard that lives to the end of the statement, and a call in the
    /// same statement that takes the same lock. It fails at once, naming
    /// the lock; the lock is usable again afterwards, on that thread and
    /// on others.
    #[test]
    fn taking_a_held_lock_again_fails_at_once_instead_of_hanging() {
        let desc = std::sync::Arc::new(Mutex::new(Descriptor { ring: 7, lanes: 9 }));
        let d = desc.clone();
        let out = ends(move || {
            let lanes = |m: &Mutex<Descriptor>| lock(m).lanes;
            let read = Descriptor {
                ring: lock(&d).ring,
                lanes: lanes(&d),
            };
            read.ring + read.lanes
        })
        .expect("the second lock fails instead of waiting forever");
        let message = out.expect_err("the second lock of a held lock");
        assert!(
            message.contains("Descriptor") && message.contains("again"),
            "{message}"
        );
        let d = desc.clone();
        let out = ends(move || {
            let ring = lock(&d).ring;
            let lanes = lock(&d).lanes;
            ring + lanes
        });
        assert_eq!(out, Some(Ok(16)));
        assert_eq!(lock(&desc).ring, 7);
    }

    /// Distinct locks nest, a lock released is taken again, and a lock
    /// held by another thread is waited for as usual.
    #[test]
    fn distinct_locks_nest_and_others_wait_as_usual() {
        let a = Mutex::new(1u32);
        let b = Mutex::new(2u32);
        {
            let mut x = lock(&a);
            let y = lock(&b);
            *x += *y;
        }
        assert_eq!(*lock(&a), 3);
        let shared = std::sync::Arc::new(Mutex::new(0u32));
        let held = lock(&shared);
        let s = shared.clone();
        let waiter = std::thread::spawn(move || {
            *lock(&s) += 1;
        });
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished(), "the other thread waits for the lock");
        drop(held);
        waiter.join().unwrap();
        assert_eq!(*lock(&shared), 1);
    }
}
