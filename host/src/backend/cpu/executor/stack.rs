//! Coroutine stacks with cache colouring.
//!
//! Every stack is a separate page-aligned mapping, so the tops of all
//! stacks sit at the same offset within a page and the few cache lines a
//! suspended thread keeps hot (its saved registers and top frames) would
//! all compete for the same L1 sets; a warp's 32 threads then evict each
//! other at every switch. Each coroutine's stack therefore starts a
//! different number of cache lines below the top of its mapping, chosen
//! by the thread's lane.

use corosensei::stack::{DefaultStack, Stack, StackPointer};

/// Bytes between two colours: a few cache lines, about what a suspended
/// thread touches at the top of its stack.
const COLOUR_STEP: usize = 192;
/// Colours used: enough for a warp.
const COLOURS: usize = 32;

/// A pooled stack whose top is lowered by a per-coroutine colour.
pub(crate) struct ColouredStack {
    inner: DefaultStack,
    offset: usize,
}

impl ColouredStack {
    /// A new stack with at least `size` usable bytes besides the colour offset.
    pub(crate) fn new(size: usize) -> std::io::Result<Self> {
        Ok(ColouredStack {
            inner: DefaultStack::new(size + COLOURS * COLOUR_STEP)?,
            offset: 0,
        })
    }

    /// Sets the colour for the next coroutine built on this stack. Only
    /// while no coroutine uses the stack (it is owned here, so none can).
    pub(crate) fn set_colour(&mut self, colour: u32) {
        self.offset = (colour as usize % COLOURS) * COLOUR_STEP;
    }
}

// SAFETY: the base stays inside the inner stack's usable memory (the inner
// stack was made larger than the largest offset, and the offset is a
// multiple of 16, so the base stays aligned); the limit and the guard
// page are the inner stack's own.
unsafe impl Stack for ColouredStack {
    fn base(&self) -> StackPointer {
        let base = self.inner.base().get() - self.offset;
        StackPointer::new(base).expect("a stack base is not null")
    }

    fn limit(&self) -> StackPointer {
        self.inner.limit()
    }

    #[cfg(windows)]
    fn teb_fields(&self) -> corosensei::stack::StackTebFields {
        self.inner.teb_fields()
    }

    #[cfg(windows)]
    fn update_teb_fields(&mut self, stack_limit: usize, guaranteed_stack_bytes: usize) {
        self.inner
            .update_teb_fields(stack_limit, guaranteed_stack_bytes)
    }
}

const _: () = assert!(COLOUR_STEP.is_multiple_of(corosensei::stack::STACK_ALIGNMENT));
