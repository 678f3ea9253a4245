//! A sanitized module's lean build: the same PTX JIT-compiled at
//! [`LEAN_SANITIZED_REGISTERS`], beside the build at the context's cap
//! ([`SanitizerConfig::sanitized_registers`](crate::sanitizer::config::SanitizerConfig::sanitized_registers)).
//!
//! The cap is a trade the kernel's own paths decide. The race engine's
//! general paths (a line split into word records, shared-memory, atomic
//! and fence checks) take up to 253 registers and run slower at 64 than
//! at 128 for all the blocks 64 adds; its whole-line paths, with the
//! same-block table's, spill little, and at 64 an SM holds four
//! 256-thread blocks instead of two, which runs a latency-bound
//! sanitized kernel up to 1.5 times faster. Which paths a
//! kernel takes shows only when it runs, so each sanitized entry starts
//! on its lean twin, and its launches say, in a word of host memory the
//! device writes in place (`LeanBuild::words`), when one of their blocks took
//! a general path (`vigil_shared::race::memory::launch_record::path_word`);
//! its later launches then run the capped build. A kernel whose launches
//! stay on the line paths keeps the lean build.
//!
//! The same word says whether a block of the entry claimed its same-block
//! regions in its body (a check against its block): the entry's later
//! launches, on either build, then claim them at entry
//! (`vigil_shared::gpu::launch_flags::CLAIM_AT_ENTRY`), where the block's
//! other warps wait at the entry's barrier anyway, rather than one warp
//! at a time in the body. Entries that do not start lean
//! (`VIGIL_LEAN_ENTRIES=0`) have no word: a block of theirs that claims
//! in its body does so at every launch.
//!
//! The lean build also runs the launches whose blocks are too large for
//! the capped build, whatever paths they take.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::device::CudaDevice;
use super::mapped::MappedBlock;
use super::module::{CudaFunction, CudaModule};
use crate::error::Result;
use crate::sanitizer::config::LEAN_SANITIZED_REGISTERS;
use crate::types::LaunchVariant;
use vigil_shared::race::memory::launch_record::path_word;

/// Kernels of one module that can have a path word (one page of words).
const PATH_WORDS: usize = 1024;

/// Which build a sanitized launch runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Build {
    /// The build at the context's register cap.
    Capped,
    /// The build at [`LEAN_SANITIZED_REGISTERS`].
    Lean,
}

impl Build {
    /// The build for a launch of blocks of `threads` threads of an entry
    /// whose capped build launches at most `capped_max` threads a block:
    /// the lean one when the capped one cannot launch the block, or when
    /// the entry may start lean (`lean_first`) and none of its launches
    /// took a general path yet (`took_general`).
    pub(crate) fn for_launch(
        threads: u64,
        capped_max: u32,
        lean_first: bool,
        took_general: bool,
    ) -> Build {
        if threads > u64::from(capped_max) || (lean_first && !took_general) {
            Build::Lean
        } else {
            Build::Capped
        }
    }
}

/// An entry's path word (`launch_record::path_word`), where its launches
/// tell the host what their blocks took; the entry's build at the cap
/// and its lean twin share it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PathWord {
    /// The word, in mapped host memory the device keeps until its drop
    /// ([`LeanBuild`]'s `Drop`).
    host: *const AtomicU32,
    /// Its device address.
    device: u64,
    /// Whether the build that holds it asks whether a block took a
    /// general path (the lean twin does; the capped build runs the
    /// general paths as they are).
    asks_general: bool,
}

// SAFETY: the word is an atomic in memory that outlives every function of
// its device (a function keeps its module, which keeps the device).
unsafe impl Send for PathWord {}
// SAFETY: as above.
unsafe impl Sync for PathWord {}

/// What a sanitized launch asks of its entry's path word.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PathRequest {
    /// The record's `PATH_WORD`: the word's device address with what the
    /// launch is to tell there (`path_word::TELL_*`); 0: nothing.
    pub(crate) record: u64,
    /// Whether its blocks claim their same-block regions at entry: a
    /// block of an earlier launch claimed them.
    pub(crate) claim_at_entry: bool,
}

impl PathWord {
    /// What the word says now: read in place, without a wait, so that
    /// a launch still running may set it after (a later launch reads it).
    pub(crate) fn value(&self) -> u32 {
        // SAFETY: `host` is a word of the device's mapped block of path
        // words, live while any function of the device is (above).
        unsafe { &*self.host }.load(Ordering::Relaxed)
    }

    /// What a launch of the build holding this word asks, given what it
    /// says now (`claims_anyway`: its blocks claim at entry whatever it
    /// says).
    pub(crate) fn request(&self, claims_anyway: bool) -> PathRequest {
        PathRequest::given(self.value(), self.device, self.asks_general, claims_anyway)
    }
}

impl PathRequest {
    /// The request of a launch whose entry's word (at device address
    /// `device`) says `value`: it asks what the word does not say yet
    /// (whether a block took a general path only when `asks_general`;
    /// whether a block claimed only when its blocks do not claim at entry
    /// anyway, `claims_anyway`: they use the window shadow from their
    /// first access), and has its blocks claim at entry once the word
    /// says a block claimed.
    pub(crate) fn given(
        value: u32,
        device: u64,
        asks_general: bool,
        claims_anyway: bool,
    ) -> PathRequest {
        let claimed = claims_anyway || value & path_word::CLAIMED_REGIONS != 0;
        let mut tell = 0;
        if asks_general && value & path_word::GENERAL_PATH == 0 {
            tell |= path_word::TELL_GENERAL_PATH;
        }
        if !claimed {
            tell |= path_word::TELL_CLAIMED_REGIONS;
        }
        PathRequest {
            record: if tell == 0 { 0 } else { device | tell },
            claim_at_entry: claimed,
        }
    }

    /// The request of a launch whose entry has no path word: it asks
    /// nothing, and its blocks claim at entry only when they do anyway.
    pub(crate) fn without_word(claims_anyway: bool) -> PathRequest {
        PathRequest {
            record: 0,
            claim_at_entry: claims_anyway,
        }
    }
}

/// What a module's lean build keeps for one kernel, shared by every
/// lookup of it (a `Function` made again for each launch, say): its word
/// of the build's path words, if it has one, and its entry in the build,
/// looked up at its first launch from the build.
struct TwinEntry {
    /// The kernel's name (its entry is `name__vigil`).
    name: CString,
    /// Its path word, when it starts lean.
    word: Option<usize>,
    function: OnceLock<Box<CudaFunction>>,
}

/// Each kernel's [`TwinEntry`], by name, with the first `words` kernels
/// given a path word each.
struct TwinIndex {
    words: usize,
    entries: Mutex<HashMap<CString, Arc<TwinEntry>>>,
}

impl TwinIndex {
    fn new(words: usize) -> TwinIndex {
        TwinIndex {
            words,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Kernel `name`'s entry, made (and given a word while there is one
    /// left) at its first call.
    fn entry(&self, name: &CStr) -> Arc<TwinEntry> {
        let mut entries = lock(&self.entries);
        if let Some(e) = entries.get(name) {
            return e.clone();
        }
        let n = entries.len();
        let e = Arc::new(TwinEntry {
            name: name.to_owned(),
            word: (n < self.words).then_some(n),
            function: OnceLock::new(),
        });
        entries.insert(name.to_owned(), e.clone());
        e
    }
}

/// A sanitized module's lean build: JIT-compiled with the capped build
/// when its entries start on it (so that no launch waits for the compile,
/// nor for the larger stack it may need, which the driver sets only when
/// no kernel runs), else at the first launch of a block too large for the
/// capped build (and never, for a program without one).
pub(crate) struct LeanBuild {
    device: Arc<CudaDevice>,
    image: CString,
    module: Mutex<Option<Arc<CudaModule>>>,
    /// Where the capped build's device globals were moved to (by symbol):
    /// the lean build's slots point there too, so that both builds share
    /// each global.
    globals: Mutex<Vec<(CString, u64)>>,
    /// The path words, one per kernel, in host memory the device writes
    /// in place: non-zero once a launch of the kernel's lean twin had a
    /// block take a general path; read by the host at each launch, with
    /// no copy and no wait. `None` when entries do not start lean (the
    /// lean build then runs the large blocks only); taken by the drop.
    words: Option<MappedBlock>,
    twins: TwinIndex,
}

impl LeanBuild {
    /// The lean build of the sanitized module `image` (NUL-terminated
    /// PTX) on `device`; `lean_first`: its entries start on it (the
    /// context's [`lean_entries`](crate::sanitizer::config::SanitizerConfig::lean_entries)),
    /// which compiles it and allocates their path words now (the caller
    /// bound the context). A build that fails to compile then leaves the
    /// entries on the capped build, said on stderr.
    pub(crate) fn new(
        device: &Arc<CudaDevice>,
        image: &CStr,
        lean_first: bool,
    ) -> Result<LeanBuild> {
        let mut build = LeanBuild {
            device: device.clone(),
            image: image.to_owned(),
            module: Mutex::new(None),
            globals: Mutex::new(Vec::new()),
            words: None,
            twins: TwinIndex::new(0),
        };
        if lean_first {
            match build.module() {
                Ok(_) => {
                    build.words = Some(MappedBlock::zeroed(4 * PATH_WORDS)?);
                    build.twins = TwinIndex::new(PATH_WORDS);
                }
                Err(e) => eprintln!(
                    "vigil: the {LEAN_SANITIZED_REGISTERS}-register build of a sanitized module \
                     did not compile, so its entries run at the register cap: {e}"
                ),
            }
        }
        Ok(build)
    }

    /// The module, JIT-compiled now if this is its first use.
    fn module(&self) -> Result<Arc<CudaModule>> {
        let mut m = lock(&self.module);
        if let Some(m) = &*m {
            return Ok(m.clone());
        }
        let built = Arc::new(CudaModule::load(
            &self.device,
            &self.image,
            LaunchVariant::Sanitized,
            Some(LEAN_SANITIZED_REGISTERS),
            false,
        )?);
        for (symbol, to) in lock(&self.globals).iter() {
            built.point_global(symbol, *to)?;
        }
        *m = Some(built.clone());
        Ok(built)
    }

    /// Points the lean build's device global `symbol` at `to`, where the
    /// capped build's was moved: now if the build is made, else when it
    /// is.
    pub(crate) fn point_global(&self, symbol: &CStr, to: u64) -> Result<()> {
        // The module's lock first, as `module` takes them.
        let m = lock(&self.module);
        lock(&self.globals).push((symbol.to_owned(), to));
        match &*m {
            Some(built) => built.point_global(symbol, to),
            None => Ok(()),
        }
    }

    /// `entry`'s path word, for the build that asks whether a block took
    /// a general path (`asks_general`: the lean twin) or not.
    fn word(&self, entry: &TwinEntry, asks_general: bool) -> Option<PathWord> {
        let (block, i) = (self.words.as_ref()?, entry.word?);
        Some(PathWord {
            host: &block.words()[i],
            device: block.device + 4 * i as u64,
            asks_general,
        })
    }

    /// `entry`'s function in the build, looked up (and the build
    /// compiled, for large blocks) at the first call.
    fn function<'e>(&self, entry: &'e TwinEntry) -> Result<&'e CudaFunction> {
        if let Some(f) = entry.function.get() {
            return Ok(f);
        }
        let mut f = Box::new(self.module()?.function(&entry.name)?);
        f.set_path_word(self.word(entry, true));
        Ok(entry.function.get_or_init(|| f))
    }
}

impl Drop for LeanBuild {
    fn drop(&mut self) {
        // A launch of a dropped module may still be running and write its
        // entry's word: the words live as long as the device.
        if let Some(block) = self.words.take() {
            self.device.keep_until_drop(Box::new(block));
        }
    }
}

/// A sanitized entry's twin in its module's [`LeanBuild`].
pub(crate) struct LeanTwin {
    build: Arc<LeanBuild>,
    entry: Arc<TwinEntry>,
}

impl LeanTwin {
    /// The twin of kernel `name`'s sanitized entry in `build`.
    pub(crate) fn new(build: Arc<LeanBuild>, name: &CStr) -> LeanTwin {
        let entry = build.twins.entry(name);
        LeanTwin { build, entry }
    }

    /// The entry's path word, as its build at the cap holds it.
    pub(crate) fn path_word(&self) -> Option<PathWord> {
        self.build.word(&self.entry, false)
    }

    /// The function a sanitized launch of blocks of `threads` threads
    /// runs: `capped` (the entry at the context's cap) or this twin
    /// ([`Build::for_launch`]).
    pub(crate) fn pick<'f>(
        &'f self,
        capped: &'f CudaFunction,
        threads: u64,
    ) -> Result<&'f CudaFunction> {
        let word = self.path_word();
        let took_general = word.is_some_and(|w| w.value() & path_word::GENERAL_PATH != 0);
        let capped_max = capped.attrs().max_threads_per_block;
        match Build::for_launch(threads, capped_max, word.is_some(), took_general) {
            Build::Capped => Ok(capped),
            Build::Lean => self.build.function(&self.entry),
        }
    }
}

/// `m` locked, past a poisoning panic (what it guards stays consistent).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::{path_word, Build, PathRequest, TwinIndex};

    /// A launch asks only what its entry's word does not say yet, and its
    /// blocks claim their regions at entry once a block of an earlier
    /// launch claimed them in its body; a word that says everything is
    /// not passed at all, so that no block writes host memory.
    #[test]
    fn a_launch_asks_what_the_word_does_not_say_yet() {
        const AT: u64 = 0x7f00_0000_1000;
        let (general, claimed) = (path_word::GENERAL_PATH, path_word::CLAIMED_REGIONS);
        let tell_general = path_word::TELL_GENERAL_PATH;
        let tell_claims = path_word::TELL_CLAIMED_REGIONS;
        let request = |record, claim_at_entry| PathRequest {
            record,
            claim_at_entry,
        };
        // (word says, lean twin, claims anyway) -> (record, claims at entry)
        for (value, lean, anyway, record, at_entry) in [
            // The lean twin asks both until the word says them.
            (0, true, false, AT | tell_general | tell_claims, false),
            (general, true, false, AT | tell_claims, false),
            (claimed, true, false, AT | tell_general, true),
            (general | claimed, true, false, 0, true),
            // The capped build never asks about general paths.
            (0, false, false, AT | tell_claims, false),
            (claimed, false, false, 0, true),
            // A launch that claims at entry anyway asks only the rest.
            (0, true, true, AT | tell_general, true),
            (general, true, true, 0, true),
            (0, false, true, 0, true),
        ] {
            assert_eq!(
                PathRequest::given(value, AT, lean, anyway),
                request(record, at_entry),
                "word {value:#x}, lean {lean}, claims anyway {anyway}"
            );
        }
        assert_eq!(PathRequest::without_word(true), request(0, true));
        // The tells fit in the low bits of a word's address.
        assert_eq!(AT & !path_word::ADDRESS, 0);
        assert_eq!((tell_general | tell_claims) & path_word::ADDRESS, 0);
    }

    #[test]
    fn every_lookup_of_a_kernel_shares_its_word_until_the_words_run_out() {
        let index = TwinIndex::new(2);
        let word_of = |name| index.entry(name).word;
        let (copy, axpy, scan) = (c"copy", c"axpy", c"scan");
        assert_eq!(word_of(copy), Some(0));
        assert_eq!(word_of(axpy), Some(1));
        assert_eq!(word_of(copy), Some(0), "a second lookup of copy");
        assert_eq!(word_of(scan), None, "no word left: it runs capped");
        assert_eq!(word_of(axpy), Some(1));
    }

    #[test]
    fn an_entry_runs_lean_until_a_launch_takes_a_general_path() {
        assert_eq!(Build::for_launch(256, 512, true, false), Build::Lean);
        assert_eq!(Build::for_launch(256, 512, true, true), Build::Capped);
        assert_eq!(Build::for_launch(512, 512, true, true), Build::Capped);
    }

    #[test]
    fn blocks_the_capped_build_cannot_launch_run_lean_whatever_their_paths() {
        for (lean_first, took_general) in [(false, false), (true, true), (false, true)] {
            assert_eq!(
                Build::for_launch(1024, 512, lean_first, took_general),
                Build::Lean
            );
        }
    }

    #[test]
    fn entries_that_do_not_start_lean_run_the_capped_build() {
        assert_eq!(Build::for_launch(256, 512, false, false), Build::Capped);
        assert_eq!(Build::for_launch(1, 1024, false, false), Build::Capped);
    }
}
