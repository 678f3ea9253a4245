//! Capturing a kernel panic's message and location.
//!
//! A panic's location is only visible to the panic hook, so the executor
//! installs (once per process) a hook that chains to the previous one: on a
//! worker thread it records the message and `file:line:column` for the
//! executor to put into [`CpuError::KernelPanic`](super::CpuError) instead
//! of printing them; on every other thread it defers to the previous hook.
//! A hook installed later by the application replaces this one; the error
//! then carries the message without a location.

use std::cell::{Cell, RefCell};
use std::sync::Once;

/// A panic as the hook saw it.
#[derive(Debug)]
pub(crate) struct PanicRecord {
    /// The panic message.
    pub message: String,
    /// `file:line:column`.
    pub location: Option<String>,
}

thread_local! {
    /// True on the executor's worker threads.
    static CAPTURE: Cell<bool> = const { Cell::new(false) };
    /// The last panic recorded on this thread.
    static LAST: RefCell<Option<PanicRecord>> = const { RefCell::new(None) };
}

/// Installs the capturing hook, once per process.
pub(crate) fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CAPTURE.with(Cell::get) {
                let record = PanicRecord {
                    message: payload_message(info.payload()),
                    location: info.location().map(|l| l.to_string()),
                };
                LAST.with(|l| *l.borrow_mut() = Some(record));
            } else {
                previous(info)
            }
        }));
    });
}

/// Marks the calling thread as a worker: its panics are recorded, not printed.
pub(crate) fn capture_on_this_thread() {
    CAPTURE.with(|c| c.set(true));
}

/// Takes the last panic recorded on this thread, if any.
pub(crate) fn take_record() -> Option<PanicRecord> {
    LAST.with(|l| l.borrow_mut().take())
}

/// The message of a panic payload (`&str` or `String`; anything else is
/// described by its kind).
pub(crate) fn payload_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}
