//! Streams and events.

use super::{check, query, DriverResult};
use cudarc::driver::sys::{self, CUevent, CUevent_flags, CUstream, CUstream_flags};

/// `cuStreamCreate`: a new stream of the current context.
pub(crate) fn stream_create(flags: CUstream_flags) -> DriverResult<CUstream> {
    let mut stream: CUstream = std::ptr::null_mut();
    // SAFETY: `stream` is a valid out-pointer; the flags are a valid value.
    check("cuStreamCreate", || unsafe {
        sys::cuStreamCreate(&mut stream, flags as u32)
    })?;
    Ok(stream)
}

/// `cuStreamDestroy`: destroys `stream` (its pending work still runs).
///
/// # Safety
/// `stream` is a live stream the caller owns, not used afterwards.
pub(crate) unsafe fn stream_destroy(stream: CUstream) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuStreamDestroy_v2", || unsafe {
        sys::cuStreamDestroy_v2(stream)
    })
}

/// `cuStreamSynchronize`: waits for the work enqueued on `stream`.
///
/// # Safety
/// `stream` is a live stream of the current context, or null (the
/// context's legacy stream).
pub(crate) unsafe fn stream_synchronize(stream: CUstream) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuStreamSynchronize", || unsafe {
        sys::cuStreamSynchronize(stream)
    })
}

/// `cuStreamQuery`: whether the work enqueued on `stream` has finished.
///
/// # Safety
/// As for [`stream_synchronize`].
pub(crate) unsafe fn stream_query(stream: CUstream) -> DriverResult<bool> {
    // SAFETY: the caller's contract.
    query("cuStreamQuery", || unsafe { sys::cuStreamQuery(stream) })
}

/// `cuStreamWaitEvent`: makes later work on `stream` wait for `event`'s
/// last record.
///
/// # Safety
/// Both are live handles of the current context.
pub(crate) unsafe fn stream_wait_event(stream: CUstream, event: CUevent) -> DriverResult<()> {
    // SAFETY: the caller's contract; the flags must be 0.
    check("cuStreamWaitEvent", || unsafe {
        sys::cuStreamWaitEvent(stream, event, 0)
    })
}

/// `cuEventCreate`: a new event of the current context.
pub(crate) fn event_create(flags: CUevent_flags) -> DriverResult<CUevent> {
    let mut event: CUevent = std::ptr::null_mut();
    // SAFETY: `event` is a valid out-pointer; the flags are a valid value.
    check("cuEventCreate", || unsafe {
        sys::cuEventCreate(&mut event, flags as u32)
    })?;
    Ok(event)
}

/// `cuEventRecord`: records `event` at the current end of `stream`.
///
/// # Safety
/// Both are live handles of the current context.
pub(crate) unsafe fn event_record(event: CUevent, stream: CUstream) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuEventRecord", || unsafe {
        sys::cuEventRecord(event, stream)
    })
}

/// `cuEventSynchronize`: waits for the work before `event`'s last record.
///
/// # Safety
/// `event` is a live event.
pub(crate) unsafe fn event_synchronize(event: CUevent) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuEventSynchronize", || unsafe {
        sys::cuEventSynchronize(event)
    })
}

/// `cuEventQuery`: whether the work before `event`'s last record has
/// finished.
///
/// # Safety
/// `event` is a live event.
pub(crate) unsafe fn event_query(event: CUevent) -> DriverResult<bool> {
    // SAFETY: the caller's contract.
    query("cuEventQuery", || unsafe { sys::cuEventQuery(event) })
}

/// `cuEventElapsedTime`: milliseconds from `start`'s record to `end`'s.
///
/// # Safety
/// Both are live events.
pub(crate) unsafe fn event_elapsed_time(start: CUevent, end: CUevent) -> DriverResult<f32> {
    let mut ms = 0f32;
    // SAFETY: `ms` is a valid out-pointer; the caller's contract.
    check("cuEventElapsedTime", || unsafe {
        sys::cuEventElapsedTime(&mut ms, start, end)
    })?;
    Ok(ms)
}

/// `cuEventDestroy`: destroys `event`.
///
/// # Safety
/// `event` is a live event the caller owns, not used afterwards.
pub(crate) unsafe fn event_destroy(event: CUevent) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuEventDestroy_v2", || unsafe {
        sys::cuEventDestroy_v2(event)
    })
}
