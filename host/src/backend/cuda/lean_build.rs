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
//! device writes in place ([`PathWords`]), when one of their blocks took
//! a general path (`vigil_shared::race::memory::launch_record::PATH_WORD`);
//! its later launches then run the capped build. A kernel whose launches
//! stay on the line paths keeps the lean build.
//!
//! The lean build also runs the launches whose blocks are too large for
//! the capped build, whatever paths they take.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::device::CudaDevice;
use super::mapped::MappedBlock;
use super::module::{CudaFunction, CudaModule};
use crate::error::Result;
use crate::sanitizer::config::LEAN_SANITIZED_REGISTERS;
use crate::types::LaunchVariant;

/// Entries of one module that can have a path word (one page of words).
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

/// One word per sanitized entry of a module, in host memory the device
/// writes in place: non-zero once a launch of the entry's lean twin had
/// a block take a general path. Read by the host at each launch, with no
/// copy and no wait.
struct PathWords {
    /// The words (taken by `LeanBuild`'s drop only).
    block: Option<MappedBlock>,
    index: WordIndex,
}

impl PathWords {
    fn block(&self) -> &MappedBlock {
        self.block.as_ref().expect("held until drop")
    }
}

/// Which word of [`PathWords`] each kernel has, by name: every lookup of
/// one kernel (a `Function` made again for each launch, say) reads and
/// sets the same word.
struct WordIndex {
    words: usize,
    names: Mutex<HashMap<CString, usize>>,
}

impl WordIndex {
    fn new(words: usize) -> WordIndex {
        WordIndex {
            words,
            names: Mutex::new(HashMap::new()),
        }
    }

    /// The word of kernel `name` (given out at its first call), `None`
    /// when every word is taken.
    fn word_of(&self, name: &CStr) -> Option<usize> {
        let mut names = lock(&self.names);
        if let Some(&i) = names.get(name) {
            return Some(i);
        }
        let i = names.len();
        (i < self.words).then(|| *names.entry(name.to_owned()).or_insert(i))
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
    /// The entries' path words; `None` when entries do not start lean
    /// (the lean build then runs the large blocks only).
    words: Option<PathWords>,
    /// Whether entries start on it: asked for, and it compiled.
    lean_first: AtomicBool,
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
        let words = if lean_first {
            Some(PathWords {
                block: Some(MappedBlock::zeroed(4 * PATH_WORDS)?),
                index: WordIndex::new(PATH_WORDS),
            })
        } else {
            None
        };
        let build = LeanBuild {
            device: device.clone(),
            image: image.to_owned(),
            module: Mutex::new(None),
            globals: Mutex::new(Vec::new()),
            words,
            lean_first: AtomicBool::new(lean_first),
        };
        if lean_first {
            if let Err(e) = build.module() {
                build.lean_first.store(false, Ordering::Relaxed);
                eprintln!(
                    "vigil: the {LEAN_SANITIZED_REGISTERS}-register build of a sanitized module \
                     did not compile, so its entries run at the register cap: {e}"
                );
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
}

impl Drop for LeanBuild {
    fn drop(&mut self) {
        // A launch of a dropped module may still be running and write its
        // entry's word: the words live as long as the device.
        if let Some(block) = self.words.as_mut().and_then(|w| w.block.take()) {
            self.device.keep_until_drop(Box::new(block));
        }
    }
}

/// A sanitized entry's twin in its module's [`LeanBuild`].
pub(crate) struct LeanTwin {
    build: Arc<LeanBuild>,
    /// The kernel's name (its entry is `name__vigil`).
    name: CString,
    /// Its path word, when it starts lean.
    word: Option<usize>,
    /// The twin, looked up at its first launch, with the build's module
    /// (dropped after the function).
    function: OnceLock<(Box<CudaFunction>, Arc<CudaModule>)>,
}

impl LeanTwin {
    /// The twin of kernel `name`'s sanitized entry in `build`.
    pub(crate) fn new(build: Arc<LeanBuild>, name: &CStr) -> LeanTwin {
        let word = build.words.as_ref().and_then(|w| w.index.word_of(name));
        LeanTwin {
            build,
            name: name.to_owned(),
            word,
            function: OnceLock::new(),
        }
    }

    /// The function a sanitized launch of blocks of `threads` threads
    /// runs: `capped` (the entry at the context's cap) or this twin
    /// ([`Build::for_launch`]).
    pub(crate) fn pick<'f>(
        &'f self,
        capped: &'f CudaFunction,
        threads: u64,
    ) -> Result<&'f CudaFunction> {
        let capped_max = capped.attrs().max_threads_per_block;
        let lean_first = self.word.is_some() && self.build.lean_first.load(Ordering::Relaxed);
        match Build::for_launch(threads, capped_max, lean_first, self.took_general()) {
            Build::Capped => Ok(capped),
            Build::Lean => self.function(),
        }
    }

    /// Whether a launch of the twin had a block take a general path.
    fn took_general(&self) -> bool {
        match (&self.build.words, self.word) {
            (Some(w), Some(i)) => w.block().words()[i].load(Ordering::Relaxed) != 0,
            _ => false,
        }
    }

    /// The twin's function, looked up (and the build compiled) at the
    /// first call.
    fn function(&self) -> Result<&CudaFunction> {
        if let Some((f, _)) = self.function.get() {
            return Ok(f);
        }
        let module = self.build.module()?;
        let mut f = Box::new(module.function(&self.name)?);
        if let (Some(w), Some(i)) = (&self.build.words, self.word) {
            f.set_path_word(w.block().device + 4 * i as u64);
        }
        Ok(&self.function.get_or_init(|| (f, module)).0)
    }
}

/// `m` locked, past a poisoning panic (what it guards stays consistent).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::{Build, WordIndex};

    #[test]
    fn every_lookup_of_a_kernel_shares_its_word_until_the_words_run_out() {
        let index = WordIndex::new(2);
        let (copy, axpy, scan) = (c"copy", c"axpy", c"scan");
        assert_eq!(index.word_of(copy), Some(0));
        assert_eq!(index.word_of(axpy), Some(1));
        assert_eq!(index.word_of(copy), Some(0), "a second lookup of copy");
        assert_eq!(index.word_of(scan), None, "no word left: it runs capped");
        assert_eq!(index.word_of(axpy), Some(1));
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
