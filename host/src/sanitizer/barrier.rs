//! [`DivergentBarrier`]: a `sync_threads` that the threads of a block did
//! not all reach, as both backends report it, and the GPU's record of one
//! (`vigil_shared::block::DivergenceRecord`) decoded into it.

use super::decode::{unlinear, ReportResolver};
use super::report_json::names;
use crate::types::Dim3;
use serde::{Deserialize, Serialize};
use std::fmt;
use vigil_shared::block::{DivergenceRecord, ThreadGroup, ThreadSet};

/// Threads of a block diverged at a barrier: some wait at one
/// `sync_threads` while others wait at another call, or returned without
/// reaching it (CUDA requires every thread of the block to reach the same
/// barrier; unchecked, a GPU hangs or silently pairs the barrier with
/// whatever barrier the others reach next). Threads are named by their
/// linear index in the block (x fastest), as ranges (`0..=15`).
///
/// The CPU backend fails the launch with it; a sanitized GPU context
/// returns it from the next synchronisation (the block runs on, its
/// barriers paired as the hardware pairs them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DivergentBarrier {
    /// `blockIdx` of the block.
    #[serde(with = "names::dim3")]
    pub block: Dim3,
    /// The `sync_threads` call (`file:line:column`) the lowest-numbered
    /// waiting thread waits at.
    pub barrier: String,
    /// Which threads wait there, and where the others are.
    pub detail: String,
}

impl fmt::Display for DivergentBarrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.block;
        write!(
            f,
            "divergent barrier in block ({}, {}, {}) at {}: {}",
            b.x, b.y, b.z, self.barrier, self.detail
        )
    }
}

impl std::error::Error for DivergentBarrier {}

/// Thread indices (ascending) as the reports write them: runs as
/// `a..=b`, joined by `, ` (`0..=15, 17`).
pub(crate) fn thread_list(ts: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ts.len() {
        let mut j = i;
        while j + 1 < ts.len() && ts[j + 1] == ts[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            ts[i].to_string()
        } else {
            format!("{}..={}", ts[i], ts[j])
        });
        i = j + 1;
    }
    out.join(", ")
}

/// A group's threads as [`thread_list`] writes them; when the record
/// knows only the first, the last and the count: `3, ..., 900 (120 in all)`.
fn group_list(g: &ThreadGroup) -> String {
    match g.exact() {
        Some(ThreadSet::Low(mask)) => {
            let ts: Vec<u32> = (0..64).filter(|t| mask >> t & 1 == 1).collect();
            thread_list(&ts)
        }
        Some(ThreadSet::Run(a, b)) => thread_list(&(a..=b).collect::<Vec<_>>()),
        None => format!("{}, ..., {} ({} in all)", g.first, g.last, g.count),
    }
}

/// The GPU's record of a divergent barrier, in the CPU backend's words:
/// the barrier is the call of the lowest-numbered thread that waits at a
/// `sync_threads` (not at the block's exit); then the threads at another
/// call, and those that returned (reached the exit) instead.
pub(crate) fn decode_divergence(
    rec: &DivergenceRecord,
    resolver: &dyn ReportResolver,
) -> DivergentBarrier {
    let grid = resolver
        .launch(rec.kernel_id)
        .map_or(Dim3::new(1, 1, 1), |l| l.grid);
    let site = |addr: u64| {
        resolver.location(addr).map_or_else(
            || format!("<unknown location {addr:#x}>"),
            |l| l.to_string(),
        )
    };
    let [first, other, returned] = rec.groups;
    // Groups at a `sync_threads` call, with the call; then those at the exit.
    let mut waiting = vec![(first, rec.first), (other, rec.other)];
    waiting.retain(|(g, _)| g.count > 0);
    waiting.sort_by_key(|(g, _)| g.first);
    let mixed = rec.mixed != 0;
    let mut parts = Vec::new();
    let barrier = match waiting.first() {
        Some((g, at)) => {
            let also = if mixed && *at == rec.other {
                " (and at other sync_threads calls)"
            } else {
                ""
            };
            parts.push(format!("thread(s) {} wait here{also}", group_list(g)));
            site(*at)
        }
        None => "<the block's exit>".to_owned(),
    };
    for (g, at) in waiting.iter().skip(1) {
        let calls = if mixed && *at == rec.other {
            "sync_threads calls, one"
        } else {
            "sync_threads"
        };
        parts.push(format!(
            "thread(s) {} wait at the {calls} at {} instead",
            group_list(g),
            site(*at)
        ));
    }
    if returned.count > 0 {
        parts.push(format!(
            "thread(s) {} returned without reaching it",
            group_list(&returned)
        ));
    }
    DivergentBarrier {
        block: unlinear(u64::from(rec.block), grid),
        barrier,
        detail: parts.join("; "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sanitizer::decode::{LaunchShape, ThreadPlace};
    use crate::sanitizer::report::SourceLocation;

    /// Locations at 0x100 (line 10) and 0x200 (line 20); one launch of
    /// 4 x 1 x 1 blocks.
    struct Sites;

    impl ReportResolver for Sites {
        fn location(&self, location: u64) -> Option<SourceLocation> {
            Some(SourceLocation {
                file: "k.rs".into(),
                line: (location / 0x10) as u32,
                column: 9,
            })
        }
        fn file_name(&self, _: u64, _: u32) -> Option<String> {
            None
        }
        fn launch(&self, _: u32) -> Option<LaunchShape> {
            Some(LaunchShape {
                kernel: "k".into(),
                grid: Dim3::new(4, 1, 1),
                block: Dim3::new(32, 1, 1),
                host_issued: false,
            })
        }
        fn place(&self, _: u32) -> ThreadPlace {
            ThreadPlace {
                device: 0,
                sm: None,
            }
        }
        fn allocation(&self, _: u64) -> Option<(u64, u64)> {
            None
        }
    }

    fn group(ts: impl IntoIterator<Item = u32>) -> ThreadGroup {
        ts.into_iter().fold(ThreadGroup::EMPTY, ThreadGroup::with)
    }

    /// The CPU backend's texts for its two divergent-barrier scenarios,
    /// whichever group arrived first on the GPU.
    #[test]
    fn records_read_like_the_cpu_backend() {
        let (low, high) = (group(0..16), group(16..32));
        let returned = DivergenceRecord {
            first: 0x100,
            block: 2,
            groups: [low, ThreadGroup::EMPTY, high],
            ..DivergenceRecord::default()
        };
        let d = decode_divergence(&returned, &Sites);
        assert_eq!(d.block, Dim3::new(2, 0, 0));
        assert_eq!(d.barrier, "k.rs:16:9");
        assert_eq!(
            d.detail,
            "thread(s) 0..=15 wait here; thread(s) 16..=31 returned without reaching it"
        );
        for high_first in [false, true] {
            let (first, other, groups) = if high_first {
                (0x200, 0x100, [high, low, ThreadGroup::EMPTY])
            } else {
                (0x100, 0x200, [low, high, ThreadGroup::EMPTY])
            };
            let rec = DivergenceRecord {
                first,
                other,
                groups,
                ..DivergenceRecord::default()
            };
            let d = decode_divergence(&rec, &Sites);
            assert_eq!(d.barrier, "k.rs:16:9");
            assert_eq!(
                d.detail,
                "thread(s) 0..=15 wait here; thread(s) 16..=31 wait at the sync_threads at \
                 k.rs:32:9 instead"
            );
        }
    }

    /// Threads at three calls: the record names one of the others and
    /// says there were more.
    #[test]
    fn a_third_call_is_mentioned() {
        let rec = DivergenceRecord {
            first: 0x100,
            other: 0x200,
            mixed: 1,
            groups: [group(8..16), group(0..8), group(16..20)],
            ..DivergenceRecord::default()
        };
        let d = decode_divergence(&rec, &Sites);
        assert_eq!(d.barrier, "k.rs:32:9");
        assert_eq!(
            d.detail,
            "thread(s) 0..=7 wait here (and at other sync_threads calls); thread(s) 8..=15 wait \
             at the sync_threads at k.rs:16:9 instead; thread(s) 16..=19 returned without \
             reaching it"
        );
    }

    #[test]
    fn large_groups_say_what_the_record_knows() {
        let scattered = group((100..400).step_by(3));
        assert_eq!(group_list(&scattered), "100, ..., 397 (100 in all)");
        assert_eq!(group_list(&group(64..1024)), "64..=1023");
        assert_eq!(group_list(&group([1, 2, 3, 40])), "1..=3, 40");
    }

    #[test]
    fn thread_lists_are_runs() {
        assert_eq!(thread_list(&[]), "");
        assert_eq!(thread_list(&[3]), "3");
        assert_eq!(thread_list(&[0, 1, 2, 5, 7, 8]), "0..=2, 5, 7..=8");
    }
}
