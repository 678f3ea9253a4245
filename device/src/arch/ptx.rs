//! The PTX implementation of the platform layer: special registers,
//! `bar.sync`, scoped atomics and fences as inline PTX.

use crate::index::Dim3;
use crate::sanitizer::Sanitizer;
use core::arch::asm;
use core::arch::nvptx;
use core::panic::Location;
use vigil_shared::{Ordering, Scope};

// Dynamic shared memory: one module-wide extern array whose size the launch sets.
core::arch::global_asm!(".extern .shared .align 16 .b8 __vigil_dynamic_smem[];");

macro_rules! sreg {
    ($($name:ident => $f:ident),* $(,)?) => {$(
        #[inline(always)]
        #[allow(dead_code)]
        pub fn $name() -> u32 {
            // SAFETY: reading a special register has no preconditions.
            unsafe { nvptx::$f() as u32 }
        }
    )*};
}

sreg! {
    thread_idx_x => _thread_idx_x, thread_idx_y => _thread_idx_y, thread_idx_z => _thread_idx_z,
    block_idx_x => _block_idx_x, block_idx_y => _block_idx_y, block_idx_z => _block_idx_z,
    block_dim_x => _block_dim_x, block_dim_y => _block_dim_y, block_dim_z => _block_dim_z,
    grid_dim_x => _grid_dim_x, grid_dim_y => _grid_dim_y, grid_dim_z => _grid_dim_z,
}

#[inline(always)]
pub fn thread_idx() -> Dim3 {
    Dim3::new(thread_idx_x(), thread_idx_y(), thread_idx_z())
}
#[inline(always)]
pub fn block_idx() -> Dim3 {
    Dim3::new(block_idx_x(), block_idx_y(), block_idx_z())
}
#[inline(always)]
pub fn block_dim() -> Dim3 {
    Dim3::new(block_dim_x(), block_dim_y(), block_dim_z())
}
#[inline(always)]
pub fn grid_dim() -> Dim3 {
    Dim3::new(grid_dim_x(), grid_dim_y(), grid_dim_z())
}

/// The SM this thread runs on (`%smid`).
#[inline(always)]
pub fn smid() -> u32 {
    let r: u32;
    // SAFETY: reading a special register has no preconditions.
    unsafe { asm!("mov.u32 {r}, %smid;", r = out(reg32) r, options(nomem, nostack)) };
    r
}

/// Nanoseconds of the global timer (`%globaltimer`). Not `pure`: every
/// call reads the timer again.
#[inline(always)]
pub fn global_timer() -> u64 {
    let r: u64;
    // SAFETY: reading a special register has no preconditions.
    unsafe { asm!("mov.u64 {r}, %globaltimer;", r = out(reg64) r, options(nomem, nostack)) };
    r
}

/// The warp slot this thread's warp holds on its SM (`%warpid`): distinct
/// among the SM's resident warps. A hint only: PTX lets it change when a
/// thread is migrated (as `%smid` may).
#[inline(always)]
pub fn warp_slot() -> u32 {
    let r: u32;
    // SAFETY: reading a special register has no preconditions.
    unsafe { asm!("mov.u32 {r}, %warpid;", r = out(reg32) r, options(nomem, nostack)) };
    r
}

/// The lane of this thread within its warp (`%laneid`).
#[inline(always)]
pub fn lane_id() -> u32 {
    let r: u32;
    // SAFETY: reading a special register has no preconditions.
    unsafe { asm!("mov.u32 {r}, %laneid;", r = out(reg32) r, options(nomem, nostack)) };
    r
}

#[inline(always)]
pub fn sync_threads() {
    // SAFETY: a block-wide barrier; CUDA's rule that every thread reaches it is the caller's.
    unsafe { nvptx::_syncthreads() }
}

/// `barrier.red.popc.u32 0`: [`sync_threads`] without `.aligned`, so
/// that threads of one warp may reach it from different places, which
/// also returns how many of the threads that arrived passed `pred` true
/// (the GPU sanitizer's barriers: a divergent `sync_threads` must be
/// seen, not be undefined, and the CTA's exit arrives with `pred` set).
///
/// Every instance of barrier 0 after the CTA's entry must be this one:
/// PTX leaves a barrier instance that mixes `barrier.red` with
/// `barrier.sync` undefined.
#[inline(always)]
pub fn barrier_red_popc(pred: bool) -> u32 {
    let r: u32;
    // SAFETY: a block-wide barrier that tolerates a diverged warp; its
    // reduction only counts the predicate.
    unsafe {
        asm!("{{ .reg .pred p; setp.ne.u32 p, {x}, 0; barrier.red.popc.u32 {r}, 0, p; }}",
            r = out(reg32) r, x = in(reg32) u32::from(pred), options(nostack))
    };
    r
}

unsafe extern "C" {
    #[link_name = "llvm.nvvm.isspacep.shared"]
    fn isspacep_shared(p: *const u8) -> bool;
}

/// `p`, the address of block-shared storage, with LLVM told so (an
/// assumption that `isspacep.shared` holds): the loads and stores through
/// it and through pointers derived from it in the same function become
/// `ld.shared`/`st.shared` (SASS `LDS`/`STS`) instead of generic ones,
/// which ptxas leaves generic (`LD`/`ST`) even beside the `cvta.shared`.
///
/// The predicate also feeds an empty `asm!`: an assumption whose value
/// nothing else uses is dropped by LLVM before the pass that infers
/// address spaces runs. ptxas then deletes the unused `isspacep`.
#[inline(always)]
pub fn assume_shared<T>(p: *mut T) -> *mut T {
    // SAFETY: `isspacep.shared` only inspects the address.
    let shared = unsafe { isspacep_shared(p as *const u8) };
    // SAFETY: an empty template (a PTX comment) that reads one register.
    unsafe { asm!("// shared: {0}", in(reg32) u32::from(shared), options(nomem, nostack)) };
    // SAFETY: the caller's `p` is shared storage (its contract), so the
    // assumption holds.
    unsafe { core::hint::assert_unchecked(shared) };
    p
}

/// `p` itself: a device global the loading context moved is found
/// through its slot (`device_global`), not here.
#[inline(always)]
pub fn relocated<T>(p: *mut T) -> *mut T {
    p
}

/// The kernel API's `sync_threads` at the kernel's `loc` with no
/// sanitizer type (the CPU backend's barrier checks use `loc`).
#[inline(always)]
pub fn sync_threads_at(_loc: &'static Location<'static>) {
    sync_threads()
}

/// `sync_threads` in a kernel checked by `S`: a checking `S`'s barrier
/// hook is the barrier itself (it checks that every thread arrives at the
/// same call; see `gpu_sanitizer::block`).
#[inline(always)]
pub fn sync_threads_for<S: Sanitizer>(loc: &'static Location<'static>) {
    if S::ENABLED {
        S::barrier(loc)
    } else {
        sync_threads()
    }
}

/// A shared-memory access (`access` describes it) of an array checked by
/// `S`, at the caller's location: evaluated only when `S` checks, so a
/// plain entry's access is only the access.
#[inline(always)]
#[track_caller]
pub fn shared_access<S: Sanitizer>(access: impl FnOnce() -> crate::sanitizer::SharedAccess) {
    if S::ENABLED {
        S::shared_access(access(), Location::caller())
    }
}

/// A shared array (or dynamic shared view) of an entry checked by `S`
/// whose storage has no `.shared` shadow was declared (`access` has size
/// 0 and names it): the sanitizer checks that its window shadow covers it
/// and counts it as unchecked where not.
#[inline(always)]
#[track_caller]
pub fn shared_declared<S: Sanitizer>(access: impl FnOnce() -> crate::sanitizer::SharedAccess) {
    shared_access::<S>(access)
}

/// The offset of the shared-memory byte at generic address `addr` in the
/// CTA's shared window (`cvta.to.shared`).
#[inline(always)]
pub fn shared_window_offset(addr: usize) -> u32 {
    let r: u64;
    // SAFETY: an address conversion; nothing is accessed.
    unsafe {
        asm!("cvta.to.shared.u64 {r}, {a};", r = out(reg64) r, a = in(reg64) addr as u64, options(pure, nomem, nostack))
    };
    r as u32
}

/// The calling lane is about to join a collective over `mask` in a
/// kernel checked by `S`.
#[inline(always)]
pub fn warp_joining<S: Sanitizer>(mask: u32) {
    S::warp_sync(mask)
}

#[inline(always)]
pub fn fence(ordering: Ordering, scope: Scope) {
    // SAFETY: fences only constrain ordering.
    unsafe {
        match (ordering, scope) {
            (Ordering::Relaxed, _) => {}
            (Ordering::SeqCst, Scope::Block) => asm!("fence.sc.cta;", options(nostack)),
            (Ordering::SeqCst, Scope::Device) => asm!("fence.sc.gpu;", options(nostack)),
            (Ordering::SeqCst, Scope::System) => asm!("fence.sc.sys;", options(nostack)),
            (_, Scope::Block) => asm!("fence.acq_rel.cta;", options(nostack)),
            (_, Scope::Device) => asm!("fence.acq_rel.gpu;", options(nostack)),
            (_, Scope::System) => asm!("fence.acq_rel.sys;", options(nostack)),
        }
    }
}

/// A read that a spin-wait may repeat, at the kernel's `loc`: nothing on
/// the GPU, whose threads are scheduled independently (the CPU backend
/// lets a block's other threads run there).
#[inline(always)]
pub fn poll(_addr: usize, _bytes: usize, _loc: &'static Location<'static>) {}

/// A plain load from global memory.
///
/// # Safety
/// `p` must be valid for reads and aligned.
#[inline(always)]
pub unsafe fn load<T: Copy>(p: *const T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { p.read() }
}

/// A plain store to global memory.
///
/// # Safety
/// `p` must be valid for writes and aligned.
#[inline(always)]
pub unsafe fn store<T: Copy>(p: *mut T, v: T) {
    // SAFETY: forwarded from the caller.
    unsafe { p.write(v) }
}

/// Base of the launch's dynamic shared memory and its size in bytes.
#[inline(always)]
pub fn dynamic_shared() -> (*mut u8, usize) {
    let p: u64;
    let n: u32;
    // SAFETY: taking the address of the module's extern shared array and
    // reading `%dynamic_smem_size` have no preconditions.
    unsafe {
        asm!("cvta.shared.u64 {p}, __vigil_dynamic_smem;", p = out(reg64) p, options(nomem, nostack));
        asm!("mov.u32 {n}, %dynamic_smem_size;", n = out(reg32) n, options(nomem, nostack));
    }
    (p as *mut u8, n as usize)
}

// Scoped atomics. PTX spells ordering and scope in the opcode, so each
// operation is a match over the (ordering, scope) pairs it accepts; with
// constant arguments the match folds to one instruction.

macro_rules! sem_scope_match {
    // RMW and CAS: relaxed, acquire, release, acq_rel (SeqCst as acq_rel).
    (rmw $o:expr, $s:expr, $go:ident) => {
        match ($o, $s) {
            (Ordering::Relaxed, Scope::Block) => $go!("relaxed", "cta"),
            (Ordering::Relaxed, Scope::Device) => $go!("relaxed", "gpu"),
            (Ordering::Relaxed, Scope::System) => $go!("relaxed", "sys"),
            (Ordering::Acquire, Scope::Block) => $go!("acquire", "cta"),
            (Ordering::Acquire, Scope::Device) => $go!("acquire", "gpu"),
            (Ordering::Acquire, Scope::System) => $go!("acquire", "sys"),
            (Ordering::Release, Scope::Block) => $go!("release", "cta"),
            (Ordering::Release, Scope::Device) => $go!("release", "gpu"),
            (Ordering::Release, Scope::System) => $go!("release", "sys"),
            (_, Scope::Block) => $go!("acq_rel", "cta"),
            (_, Scope::Device) => $go!("acq_rel", "gpu"),
            (_, Scope::System) => $go!("acq_rel", "sys"),
        }
    };
    // Loads: relaxed or acquire.
    (load $o:expr, $s:expr, $go:ident) => {
        match ($o.acquires(), $s) {
            (false, Scope::Block) => $go!("relaxed", "cta"),
            (false, Scope::Device) => $go!("relaxed", "gpu"),
            (false, Scope::System) => $go!("relaxed", "sys"),
            (true, Scope::Block) => $go!("acquire", "cta"),
            (true, Scope::Device) => $go!("acquire", "gpu"),
            (true, Scope::System) => $go!("acquire", "sys"),
        }
    };
    // Stores: relaxed or release.
    (store $o:expr, $s:expr, $go:ident) => {
        match ($o.releases(), $s) {
            (false, Scope::Block) => $go!("relaxed", "cta"),
            (false, Scope::Device) => $go!("relaxed", "gpu"),
            (false, Scope::System) => $go!("relaxed", "sys"),
            (true, Scope::Block) => $go!("release", "cta"),
            (true, Scope::Device) => $go!("release", "gpu"),
            (true, Scope::System) => $go!("release", "sys"),
        }
    };
}

/// An `atom.relaxed.cta.shared` of the operation spelt by `$op`
/// (`["add.u32"]`, `["exch.b", "64"]`, ...) at the generic address `$p` of
/// block-shared memory, converted to the shared window first
/// (`cvta.to.shared`), with the operands `$operand` after the address;
/// evaluates to the previous value.
macro_rules! shared_atom {
    ($ty:ty, $reg:ident, [$($op:literal),+], $p:expr, $($operand:ident = $v:expr),+) => {{
        let r: $ty;
        // SAFETY: `$p` is a valid aligned generic address of shared memory
        // (the caller's contract), so its shared-window form is too.
        unsafe {
            asm!(concat!("{{ .reg .u64 s; cvta.to.shared.u64 s, {p}; atom.relaxed.cta.shared.", $($op,)+ " {r}, [s]", $(", {", stringify!($operand), "}",)+ "; }}"),
                r = out($reg) r, p = in(reg64) $p, $($operand = in($reg) $v,)+ options(nostack))
        };
        r
    }};
}

macro_rules! atomics_for {
    ($ty:ty, $reg:ident, $bits:literal) => {
        impl crate::atomic::sealed::ArchAtomic for $ty {
            #[inline(always)]
            unsafe fn arch_load(p: *const Self, o: Ordering, s: Scope) -> Self {
                let r: $ty;
                macro_rules! go {
                    ($sem:literal, $sc:literal) => {
                        // SAFETY: `p` is a valid aligned global address (caller's contract).
                        unsafe { asm!(concat!("ld.", $sem, ".", $sc, ".global.b", $bits, " {r}, [{p}];"), r = out($reg) r, p = in(reg64) p, options(nostack)) }
                    };
                }
                sem_scope_match!(load o, s, go);
                r
            }

            #[inline(always)]
            unsafe fn arch_store(p: *mut Self, v: Self, o: Ordering, s: Scope) {
                macro_rules! go {
                    ($sem:literal, $sc:literal) => {
                        // SAFETY: `p` is a valid aligned global address (caller's contract).
                        unsafe { asm!(concat!("st.", $sem, ".", $sc, ".global.b", $bits, " [{p}], {v};"), p = in(reg64) p, v = in($reg) v, options(nostack)) }
                    };
                }
                sem_scope_match!(store o, s, go)
            }

            #[inline(always)]
            unsafe fn arch_exchange(p: *mut Self, v: Self, o: Ordering, s: Scope) -> Self {
                let r: $ty;
                macro_rules! go {
                    ($sem:literal, $sc:literal) => {
                        // SAFETY: `p` is a valid aligned global address (caller's contract).
                        unsafe { asm!(concat!("atom.", $sem, ".", $sc, ".global.exch.b", $bits, " {r}, [{p}], {v};"), r = out($reg) r, p = in(reg64) p, v = in($reg) v, options(nostack)) }
                    };
                }
                sem_scope_match!(rmw o, s, go);
                r
            }

            #[inline(always)]
            unsafe fn arch_cas(p: *mut Self, cmp: Self, new: Self, o: Ordering, s: Scope) -> Self {
                let r: $ty;
                macro_rules! go {
                    ($sem:literal, $sc:literal) => {
                        // SAFETY: `p` is a valid aligned global address (caller's contract).
                        unsafe { asm!(concat!("atom.", $sem, ".", $sc, ".global.cas.b", $bits, " {r}, [{p}], {c}, {n};"), r = out($reg) r, p = in(reg64) p, c = in($reg) cmp, n = in($reg) new, options(nostack)) }
                    };
                }
                sem_scope_match!(rmw o, s, go);
                r
            }

            #[inline(always)]
            unsafe fn arch_shared_exchange(p: *mut Self, v: Self) -> Self {
                shared_atom!($ty, $reg, ["exch.b", $bits], p, v = v)
            }

            #[inline(always)]
            unsafe fn arch_shared_cas(p: *mut Self, cmp: Self, new: Self) -> Self {
                shared_atom!($ty, $reg, ["cas.b", $bits], p, c = cmp, n = new)
            }

            #[inline(always)]
            unsafe fn arch_load_volatile(p: *const Self) -> Self {
                let r: $ty;
                // SAFETY: `p` is a valid aligned global address (caller's contract).
                unsafe { asm!(concat!("ld.volatile.global.b", $bits, " {r}, [{p}];"), r = out($reg) r, p = in(reg64) p, options(nostack)) };
                r
            }

            #[inline(always)]
            unsafe fn arch_store_volatile(p: *mut Self, v: Self) {
                // SAFETY: `p` is a valid aligned global address (caller's contract).
                unsafe { asm!(concat!("st.volatile.global.b", $bits, " [{p}], {v};"), p = in(reg64) p, v = in($reg) v, options(nostack)) }
            }

            #[inline(always)]
            unsafe fn arch_shared_load_volatile(p: *const Self) -> Self {
                let r: $ty;
                // SAFETY: `p` is a valid aligned generic address of shared
                // memory (caller's contract), so its shared-window form is too.
                unsafe { asm!(concat!("{{ .reg .u64 s; cvta.to.shared.u64 s, {p}; ld.volatile.shared.b", $bits, " {r}, [s]; }}"), r = out($reg) r, p = in(reg64) p, options(nostack)) };
                r
            }

            #[inline(always)]
            unsafe fn arch_shared_store_volatile(p: *mut Self, v: Self) {
                // SAFETY: as in `arch_shared_load_volatile`.
                unsafe { asm!(concat!("{{ .reg .u64 s; cvta.to.shared.u64 s, {p}; st.volatile.shared.b", $bits, " [s], {v}; }}"), p = in(reg64) p, v = in($reg) v, options(nostack)) }
            }
        }
    };
}

atomics_for!(u32, reg32, "32");
atomics_for!(i32, reg32, "32");
atomics_for!(f32, reg32, "32");
atomics_for!(u64, reg64, "64");
atomics_for!(i64, reg64, "64");
atomics_for!(f64, reg64, "64");

/// Read-modify-write atomics named by their PTX operation (`add.u32`, `min.s64`, `or.b32`, ...),
/// on global memory and on block-shared memory.
macro_rules! rmw_op {
    ($trait:path, $method:ident / $shared:ident, $ty:ty, $reg:ident, $op:literal) => {
        impl $trait for $ty {
            #[inline(always)]
            unsafe fn $method(p: *mut Self, v: Self, o: Ordering, s: Scope) -> Self {
                let r: $ty;
                macro_rules! go {
                    ($sem:literal, $sc:literal) => {
                        // SAFETY: `p` is a valid aligned global address (caller's contract).
                        unsafe { asm!(concat!("atom.", $sem, ".", $sc, ".global.", $op, " {r}, [{p}], {v};"), r = out($reg) r, p = in(reg64) p, v = in($reg) v, options(nostack)) }
                    };
                }
                sem_scope_match!(rmw o, s, go);
                r
            }

            #[inline(always)]
            unsafe fn $shared(p: *mut Self, v: Self) -> Self {
                shared_atom!($ty, $reg, [$op], p, v = v)
            }
        }
    };
}

use crate::atomic::sealed::{ArchAdd, ArchAnd, ArchMax, ArchMin, ArchOr, ArchXor};
rmw_op!(ArchAdd, arch_add / arch_shared_add, u32, reg32, "add.u32");
rmw_op!(ArchAdd, arch_add / arch_shared_add, i32, reg32, "add.s32");
rmw_op!(ArchAdd, arch_add / arch_shared_add, u64, reg64, "add.u64");
rmw_op!(ArchAdd, arch_add / arch_shared_add, i64, reg64, "add.u64");
rmw_op!(ArchAdd, arch_add / arch_shared_add, f32, reg32, "add.f32");
rmw_op!(ArchAdd, arch_add / arch_shared_add, f64, reg64, "add.f64");
rmw_op!(ArchMin, arch_min / arch_shared_min, u32, reg32, "min.u32");
rmw_op!(ArchMin, arch_min / arch_shared_min, i32, reg32, "min.s32");
rmw_op!(ArchMin, arch_min / arch_shared_min, u64, reg64, "min.u64");
rmw_op!(ArchMin, arch_min / arch_shared_min, i64, reg64, "min.s64");
rmw_op!(ArchMax, arch_max / arch_shared_max, u32, reg32, "max.u32");
rmw_op!(ArchMax, arch_max / arch_shared_max, i32, reg32, "max.s32");
rmw_op!(ArchMax, arch_max / arch_shared_max, u64, reg64, "max.u64");
rmw_op!(ArchMax, arch_max / arch_shared_max, i64, reg64, "max.s64");
rmw_op!(ArchAnd, arch_and / arch_shared_and, u32, reg32, "and.b32");
rmw_op!(ArchAnd, arch_and / arch_shared_and, i32, reg32, "and.b32");
rmw_op!(ArchAnd, arch_and / arch_shared_and, u64, reg64, "and.b64");
rmw_op!(ArchAnd, arch_and / arch_shared_and, i64, reg64, "and.b64");
rmw_op!(ArchOr, arch_or / arch_shared_or, u32, reg32, "or.b32");
rmw_op!(ArchOr, arch_or / arch_shared_or, i32, reg32, "or.b32");
rmw_op!(ArchOr, arch_or / arch_shared_or, u64, reg64, "or.b64");
rmw_op!(ArchOr, arch_or / arch_shared_or, i64, reg64, "or.b64");
rmw_op!(ArchXor, arch_xor / arch_shared_xor, u32, reg32, "xor.b32");
rmw_op!(ArchXor, arch_xor / arch_shared_xor, i32, reg32, "xor.b32");
rmw_op!(ArchXor, arch_xor / arch_shared_xor, u64, reg64, "xor.b64");
rmw_op!(ArchXor, arch_xor / arch_shared_xor, i64, reg64, "xor.b64");

// Warp collectives.

/// `shfl.sync` of one 32-bit value; `mode` is `idx`, `up`, `down` or `bfly`.
/// Shuffles and votes are not `nomem`: like barriers they are compiler
/// fences, so warp-synchronous code's shared-memory accesses (which are
/// not volatile) stay on their side of the collective, as the CPU
/// backend's model of warp collectives has them.
macro_rules! shfl {
    ($name:ident, $mode:literal) => {
        #[inline(always)]
        pub fn $name(mask: u32, v: u32, lane_or_delta: u32, clamp: u32) -> u32 {
            let r: u32;
            // SAFETY: `shfl.sync` with the caller's member mask; CUDA's
            // convergence rule for the mask is the caller's.
            unsafe {
                asm!(concat!("shfl.sync.", $mode, ".b32 {r}, {v}, {l}, {c}, {m};"),
                    r = out(reg32) r, v = in(reg32) v, l = in(reg32) lane_or_delta,
                    c = in(reg32) clamp, m = in(reg32) mask, options(nostack))
            };
            r
        }
    };
}
shfl!(shfl_idx, "idx");
shfl!(shfl_up, "up");
shfl!(shfl_down, "down");
shfl!(shfl_xor, "bfly");

#[inline(always)]
pub fn vote_ballot(mask: u32, pred: bool) -> u32 {
    let r: u32;
    // SAFETY: `vote.sync.ballot` with the caller's member mask.
    unsafe {
        asm!("{{ .reg .pred p; setp.ne.u32 p, {x}, 0; vote.sync.ballot.b32 {r}, p, {m}; }}",
            r = out(reg32) r, x = in(reg32) pred as u32, m = in(reg32) mask, options(nostack))
    };
    r
}

#[inline(always)]
pub fn vote_any(mask: u32, pred: bool) -> bool {
    vote_ballot(mask, pred) != 0
}

#[inline(always)]
pub fn vote_all(mask: u32, pred: bool) -> bool {
    let r: u32;
    // SAFETY: `vote.sync.all` with the caller's member mask.
    unsafe {
        asm!("{{ .reg .pred p, q; setp.ne.u32 p, {x}, 0; vote.sync.all.pred q, p, {m}; selp.u32 {r}, 1, 0, q; }}",
            r = out(reg32) r, x = in(reg32) pred as u32, m = in(reg32) mask, options(nostack))
    };
    r != 0
}

/// The lanes of the warp executing this instruction together
/// (`activemask`): the GPU sanitizer's hooks cooperate only among them.
#[inline(always)]
pub fn active_mask() -> u32 {
    let r: u32;
    // SAFETY: `activemask` has no preconditions.
    unsafe { asm!("activemask.b32 {r};", r = out(reg32) r, options(nomem, nostack)) };
    r
}

/// `match.any.sync.b64`: the lanes of `mask` holding the same `v` as this
/// one (sm_70+).
#[inline(always)]
pub fn match_any_u64(mask: u32, v: u64) -> u32 {
    let r: u32;
    // SAFETY: `match.any.sync` with the caller's member mask.
    unsafe {
        asm!("match.any.sync.b64 {r}, {v}, {m};",
            r = out(reg32) r, v = in(reg64) v, m = in(reg32) mask, options(nomem, nostack))
    };
    r
}

/// `bar.warp.sync`: the lanes of `mask` wait for each other, with memory
/// ordering among them (so not `nomem`: the compiler keeps accesses on
/// their side of it).
#[inline(always)]
pub fn sync_warp(mask: u32) {
    // SAFETY: `bar.warp.sync` with the caller's member mask.
    unsafe { asm!("bar.warp.sync {m};", m = in(reg32) mask, options(nostack)) };
}

// The GPU sanitizer's per-CTA state: one module-wide `.shared` block that
// only sanitized entries touch (ptxas allocates it only for them).
core::arch::global_asm!(
    ".shared .align 16 .b8 __vigil_cta_state[{n}];",
    n = const vigil_shared::block::CTA_STATE_BYTES
);

/// The 16 bytes at byte `OFF` of the CTA's sanitizer state
/// (`ld.shared.v2.b64` at the block's symbol): a load ptxas issues with no
/// generic address to resolve and no register for the address. Weak, and
/// dropped when its value is unused.
#[inline(always)]
pub fn cta_state_chunk<const OFF: usize>() -> [u64; 2] {
    const { assert!(OFF % 16 == 0 && OFF + 16 <= vigil_shared::block::CTA_STATE_BYTES) };
    let (a, b): (u64, u64);
    // SAFETY: 16 bytes inside the 16-aligned block (checked above).
    unsafe {
        asm!("ld.shared.v2.b64 {{{a}, {b}}}, [__vigil_cta_state+{off}];",
            a = out(reg64) a, b = out(reg64) b, off = const OFF, options(pure, readonly, nostack))
    };
    [a, b]
}

/// A load of the 4-byte word at byte `OFF` of the CTA's sanitizer state,
/// atomic at the CTA's scope, at the block's symbol: one function per
/// semantics (the instruction names them; a relaxed load is `readonly`,
/// an acquire orders what follows it).
macro_rules! cta_state_load {
    ($(#[$doc:meta])* $name:ident => $insn:literal, $($option:ident),*) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name<const OFF: usize>() -> u32 {
            const { assert!(OFF % 4 == 0 && OFF + 4 <= vigil_shared::block::CTA_STATE_BYTES) };
            let r: u32;
            // SAFETY: 4 aligned bytes inside the block (checked above),
            // accessed atomically by every thread.
            unsafe {
                asm!(concat!($insn, " {r}, [__vigil_cta_state+{off}];"),
                    r = out(reg32) r, off = const OFF, options($($option),*))
            };
            r
        }
    };
}

cta_state_load!(
    /// `ld.relaxed.cta.shared.b32`: a word other threads of the CTA
    /// change while it runs.
    cta_state_word => "ld.relaxed.cta.shared.b32", readonly, nostack
);
cta_state_load!(
    /// `ld.acquire.cta.shared.b32`: a word another thread of the CTA
    /// publishes with [`cta_state_word_release`], the fields it guards
    /// written before.
    cta_state_word_acquire => "ld.acquire.cta.shared.b32", nostack
);

/// Stores `v` to the 4-byte word at byte `OFF` of the CTA's sanitizer
/// state with release semantics at the CTA's scope
/// (`st.release.cta.shared.b32`; see [`cta_state_word_acquire`]).
#[inline(always)]
pub fn cta_state_word_release<const OFF: usize>(v: u32) {
    const { assert!(OFF % 4 == 0 && OFF + 4 <= vigil_shared::block::CTA_STATE_BYTES) };
    // SAFETY: as in `cta_state_word_acquire`.
    unsafe {
        asm!("st.release.cta.shared.b32 [__vigil_cta_state+{off}], {v};",
            v = in(reg32) v, off = const OFF, options(nostack))
    };
}

/// Compare-exchange of the 4-byte word at byte `OFF` of the CTA's
/// sanitizer state, relaxed at the CTA's scope
/// (`atom.relaxed.cta.shared.cas.b32`): the value found (it swapped when
/// that is `current`).
#[inline(always)]
pub fn cta_state_word_cas<const OFF: usize>(current: u32, new: u32) -> u32 {
    const { assert!(OFF % 4 == 0 && OFF + 4 <= vigil_shared::block::CTA_STATE_BYTES) };
    let r: u32;
    // SAFETY: as in `cta_state_word_acquire`.
    unsafe {
        asm!("atom.relaxed.cta.shared.cas.b32 {r}, [__vigil_cta_state+{off}], {c}, {n};",
            r = out(reg32) r, c = in(reg32) current, n = in(reg32) new, off = const OFF,
            options(nostack))
    };
    r
}

/// A function returning the generic address of a module-wide `.shared` block.
macro_rules! shared_block_address {
    ($(#[$doc:meta])* $name:ident => $symbol:literal) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name() -> *mut u8 {
            let p: u64;
            // SAFETY: taking the address of the module's shared block has no preconditions.
            unsafe {
                asm!(concat!("cvta.shared.u64 {p}, ", $symbol, ";"), p = out(reg64) p, options(nomem, nostack))
            };
            p as *mut u8
        }
    };
}

/// CTA-scoped 8-byte loads and stores of an atomic: `core`'s atomics
/// are system-scoped (an acquire load invalidates the whole L1, a release
/// store is a `MEMBAR.SYS`, and a relaxed global one misses the L1), while
/// the sanitizer's block state is touched by one CTA's threads only. One
/// template per direction; the instruction names the semantics and the
/// state space.
macro_rules! cta_load {
    ($(#[$doc:meta])* $name:ident => $insn:literal) => {
        cta_load!($(#[$doc])* $name => $insn, AtomicU64, u64, reg64);
    };
    ($(#[$doc:meta])* $name:ident => $insn:literal, $atomic:ident, $int:ty, $reg:ident) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name(p: &core::sync::atomic::$atomic) -> $int {
            let r: $int;
            // SAFETY: `p` is a live, aligned atomic of the instruction's
            // size in its state space.
            unsafe {
                asm!(concat!($insn, " {r}, [{p}];"), r = out($reg) r, p = in(reg64) p.as_ptr(), options(nostack))
            };
            r
        }
    };
}

macro_rules! cta_store {
    ($(#[$doc:meta])* $name:ident => $insn:literal) => {
        cta_store!($(#[$doc])* $name => $insn, AtomicU64, u64, reg64);
    };
    ($(#[$doc:meta])* $name:ident => $insn:literal, $atomic:ident, $int:ty, $reg:ident) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name(p: &core::sync::atomic::$atomic, v: $int) {
            // SAFETY: `p` is a live, aligned atomic of the instruction's
            // size in its state space.
            unsafe {
                asm!(concat!($insn, " [{p}], {v};"), p = in(reg64) p.as_ptr(), v = in($reg) v, options(nostack))
            };
        }
    };
}

cta_load!(
    /// `ld.acquire.cta.global.b64`: an acquire load ordered for the
    /// calling CTA only (the same-block table of `gpu_sanitizer::block`,
    /// which only one CTA touches while it runs). On sm_90 it is a plain
    /// load.
    load_acquire_block => "ld.acquire.cta.global.b64"
);
cta_store!(
    /// `st.release.cta.global.b64`: a release store ordered for the
    /// calling CTA only (see [`load_acquire_block`]): a `MEMBAR.CTA`.
    store_release_block => "st.release.cta.global.b64"
);

macro_rules! cta_cas {
    ($(#[$doc:meta])* $name:ident => $insn:literal) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name(p: &core::sync::atomic::AtomicU64, current: u64, new: u64) -> u64 {
            let r: u64;
            // SAFETY: `p` is a live, aligned 8-byte atomic in the
            // instruction's state space.
            unsafe {
                asm!(concat!($insn, " {r}, [{p}], {c}, {n};"), r = out(reg64) r, p = in(reg64) p.as_ptr(), c = in(reg64) current, n = in(reg64) new, options(nostack))
            };
            r
        }
    };
}

cta_cas!(
    /// `atom.acquire.cta.global.cas.b64`: a compare-exchange ordered for
    /// the calling CTA only (see [`load_acquire_block`]); the value found
    /// (it swapped when that is `current`).
    compare_exchange_acquire_block => "atom.acquire.cta.global.cas.b64"
);
cta_cas!(
    /// `atom.relaxed.cta.cas.b64` through a generic address (shared or
    /// global): a compare-exchange ordered for the calling CTA only (a
    /// record of `gpu_sanitizer::block`'s shadows, which only the CTA's
    /// threads touch); the value found.
    compare_exchange_relaxed_cta => "atom.relaxed.cta.cas.b64"
);

/// `atom.relaxed.cta.exch.b64` through a generic address (see
/// [`compare_exchange_relaxed_cta`]): the value replaced.
#[inline(always)]
pub fn exchange_relaxed_cta(p: &core::sync::atomic::AtomicU64, v: u64) -> u64 {
    let r: u64;
    // SAFETY: `p` is a live, aligned 8-byte atomic.
    unsafe {
        asm!("atom.relaxed.cta.exch.b64 {r}, [{p}], {v};", r = out(reg64) r, p = in(reg64) p.as_ptr(), v = in(reg64) v, options(nostack))
    };
    r
}

cta_load!(
    /// `ld.relaxed.cta.b64` through a generic address (shared or global):
    /// a lane state of `gpu_sanitizer::block`, which only the CTA's
    /// threads touch.
    load_relaxed_cta => "ld.relaxed.cta.b64"
);
cta_load!(
    /// `ld.acquire.cta.b64` through a generic address (see
    /// [`load_relaxed_cta`]).
    load_acquire_cta => "ld.acquire.cta.b64"
);
cta_store!(
    /// `st.relaxed.cta.b64` through a generic address (see
    /// [`load_relaxed_cta`]).
    store_relaxed_cta => "st.relaxed.cta.b64"
);
cta_store!(
    /// `st.release.cta.b64` through a generic address: a `MEMBAR.CTA`
    /// (see [`load_relaxed_cta`]).
    store_release_cta => "st.release.cta.b64"
);

cta_load!(
    /// `ld.acquire.cta.b32` through a generic address: a shared array
    /// shadow's header or a word's interval (`gpu_sanitizer::block`),
    /// which only the CTA's threads touch.
    load_acquire_cta_u32 => "ld.acquire.cta.b32", AtomicU32, u32, reg32
);
cta_store!(
    /// `st.release.cta.b32` through a generic address (see
    /// [`load_acquire_cta_u32`]).
    store_release_cta_u32 => "st.release.cta.b32", AtomicU32, u32, reg32
);

shared_block_address!(
    /// Generic address of the CTA's sanitizer state (32 bytes of `.shared`).
    cta_state => "__vigil_cta_state"
);

// The GPU sanitizer's block-race state (see `gpu_sanitizer::block`): the
// CTA's acquire count and report keys, and every thread's barrier and
// warp-collective state; only sanitized entries touch them.
core::arch::global_asm!(
    ".shared .align 8 .b8 __vigil_block_counters[{n}];",
    n = const vigil_shared::block::COUNTERS_BYTES
);
core::arch::global_asm!(
    ".shared .align 8 .b8 __vigil_block_lanes[{n}];",
    n = const vigil_shared::block::LANES_BYTES
);

shared_block_address!(
    /// Generic address of the CTA's block-race counters (16 bytes and the
    /// report keys of `.shared`: the acquire count, the report keys).
    block_counters => "__vigil_block_counters"
);

shared_block_address!(
    /// Generic address of the CTA's lane states of its first threads
    /// (8 + 8 x `vigil_shared::block::SHARED_LANES` bytes of `.shared`).
    block_lanes => "__vigil_block_lanes"
);

// The GPU sanitizer's divergent-barrier check (see `gpu_sanitizer::block`):
// the barrier slot and flag, and the groups of a divergence report.
core::arch::global_asm!(
    ".shared .align 8 .b8 __vigil_block_barrier[{n}];",
    n = const vigil_shared::block::BarrierCheck::BYTES
);

shared_block_address!(
    /// Generic address of the CTA's divergent-barrier state
    /// (`vigil_shared::block::BarrierCheck::BYTES` of `.shared`).
    block_barrier => "__vigil_block_barrier"
);

/// Waits a little in a spin loop (`nanosleep`, about 100 ns): a lock
/// holder's own accesses to the lock's line are not starved by thousands
/// of waiters hammering it.
#[inline(always)]
pub fn backoff() {
    // SAFETY: `nanosleep` only delays this thread (sm_70+).
    unsafe { asm!("nanosleep.u32 100;", options(nomem, nostack)) }
}

/// The two `u64`s at `p`, each read relaxed at device scope, in one
/// paired load (`ld.relaxed.gpu.global.v2.u64`).
///
/// # Safety
/// `p` must be 16-aligned global memory, valid for reads of 16 bytes.
#[inline(always)]
pub unsafe fn load_relaxed_pair(p: *const u64) -> [u64; 2] {
    let (a, b): (u64, u64);
    // SAFETY: forwarded from the caller.
    unsafe {
        asm!(
            "ld.relaxed.gpu.global.v2.u64 {{{a}, {b}}}, [{p}];",
            a = out(reg64) a,
            b = out(reg64) b,
            p = in(reg64) p,
            options(nostack, readonly)
        )
    };
    [a, b]
}

/// Aborts the kernel (`trap`): the host sees a launch failure.
#[inline(always)]
pub fn trap() -> ! {
    // SAFETY: `trap` has no preconditions; it aborts the kernel.
    unsafe { nvptx::trap() }
}

/// The PTX comment that marks a `#[kernel(no_runtime_checks)]` entry for
/// the build helper (`vigil_build`), which fails the build if the entry
/// keeps a `trap`.
#[inline(always)]
pub fn no_runtime_checks_marker() {
    // SAFETY: a comment: no instruction, no effect.
    unsafe {
        asm!(
            "// vigil:no_runtime_checks",
            options(nomem, nostack, preserves_flags)
        )
    }
}
