//! The vocabulary of the PTX memory model that kernels, the engine and the
//! reports share: memory orderings, scopes and access kinds.

/// Memory ordering of an atomic operation or fence, as in the PTX memory model.
///
/// `SeqCst` exists only for fences (`fence.sc`); atomics take the four others.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ordering {
    /// No ordering: the operation is atomic but orders nothing.
    Relaxed = 0,
    /// Later accesses of this thread stay after the operation (loads, RMWs).
    Acquire = 1,
    /// Earlier accesses of this thread stay before the operation (stores, RMWs).
    Release = 2,
    /// Both acquire and release (RMWs and fences).
    AcqRel = 3,
    /// Sequentially consistent (fences only).
    SeqCst = 4,
}

impl Ordering {
    /// True for orderings with acquire semantics.
    #[inline(always)]
    pub const fn acquires(self) -> bool {
        matches!(
            self,
            Ordering::Acquire | Ordering::AcqRel | Ordering::SeqCst
        )
    }

    /// True for orderings with release semantics.
    #[inline(always)]
    pub const fn releases(self) -> bool {
        matches!(
            self,
            Ordering::Release | Ordering::AcqRel | Ordering::SeqCst
        )
    }

    /// The PTX spelling of the ordering qualifier (`relaxed`, `acquire`, ...).
    pub const fn ptx(self) -> &'static str {
        match self {
            Ordering::Relaxed => "relaxed",
            Ordering::Acquire => "acquire",
            Ordering::Release => "release",
            Ordering::AcqRel => "acq_rel",
            Ordering::SeqCst => "sc",
        }
    }
}

/// The set of threads an atomic or fence synchronises with.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// The threads of one thread block (`.cta`).
    Block = 0,
    /// All threads of one GPU (`.gpu`).
    Device = 1,
    /// All threads of all GPUs and the host (`.sys`).
    System = 2,
}

impl Scope {
    /// The PTX spelling of the scope qualifier (`cta`, `gpu`, `sys`).
    pub const fn ptx(self) -> &'static str {
        match self {
            Scope::Block => "cta",
            Scope::Device => "gpu",
            Scope::System => "sys",
        }
    }
}

/// What an access does to memory.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessKind {
    /// A plain (non-atomic) load.
    Read = 0,
    /// A plain (non-atomic) store.
    Write = 1,
    /// An atomic load (or a failed compare-exchange).
    AtomicRead = 2,
    /// An atomic store.
    AtomicWrite = 3,
    /// An atomic read-modify-write that wrote.
    AtomicRmw = 4,
}

impl AccessKind {
    /// True when the access may modify memory.
    pub const fn writes(self) -> bool {
        matches!(
            self,
            AccessKind::Write | AccessKind::AtomicWrite | AccessKind::AtomicRmw
        )
    }

    /// True when the access is atomic.
    pub const fn is_atomic(self) -> bool {
        matches!(
            self,
            AccessKind::AtomicRead | AccessKind::AtomicWrite | AccessKind::AtomicRmw
        )
    }
}
