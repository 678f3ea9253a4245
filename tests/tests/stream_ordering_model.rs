//! Random programs of kernels, copies and memsets on three streams, with
//! events and host synchronisations between them, against a reference
//! model of the stream-ordering rules: after every operation the
//! sanitizer reports a race exactly when the model says that operation
//! conflicts with an earlier one that is not ordered before it.
//!
//! The model is the definition, with sets instead of clocks: an operation
//! on stream `s` is ordered after everything issued on `s` before it,
//! after every event `s` waited for (what was on the recording stream when
//! the event was recorded) and after everything the host had waited for;
//! a blocking copy (to or from host memory) is a wait of the host for its
//! stream. Two operations conflict when both touch the word and one
//! writes. Reports are collected with `take_reports` after each operation,
//! which does not synchronise, so each verdict belongs to one operation.

use proptest::prelude::*;
use std::collections::BTreeSet;
use vigil::{Context, DeviceBuffer, LaunchConfig, Module, Stream};
use vigil_kernels::races::{read_one, write_one};
use vigil_tests::KERNELS_PTX;

const STREAMS: usize = 3;

/// One step of a program.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// `write_one` (writes the word) or `read_one` (reads it) on a stream.
    Kernel { stream: usize, write: bool },
    /// A host-to-device copy into the word (blocking).
    CopyIn { stream: usize },
    /// A device-to-host copy of the word (blocking).
    CopyOut { stream: usize },
    /// A device-to-device copy into the word.
    DeviceCopyIn { stream: usize },
    /// A device-to-device copy out of the word.
    DeviceCopyOut { stream: usize },
    /// A memset of the word.
    Memset { stream: usize },
    /// An event recorded on `from`, waited for by `to`.
    Event { from: usize, to: usize },
    /// `Stream::synchronize`.
    StreamSync { stream: usize },
    /// `Context::synchronize`.
    ContextSync,
}

impl Op {
    /// Whether it touches the word, and whether it writes it.
    fn access(self) -> Option<bool> {
        match self {
            Op::Kernel { write, .. } => Some(write),
            Op::CopyIn { .. } | Op::DeviceCopyIn { .. } | Op::Memset { .. } => Some(true),
            Op::CopyOut { .. } | Op::DeviceCopyOut { .. } => Some(false),
            Op::Event { .. } | Op::StreamSync { .. } | Op::ContextSync => None,
        }
    }
}

fn op() -> impl Strategy<Value = Op> {
    let s = 0..STREAMS;
    prop_oneof![
        3 => (s.clone(), any::<bool>()).prop_map(|(stream, write)| Op::Kernel { stream, write }),
        1 => s.clone().prop_map(|stream| Op::CopyIn { stream }),
        1 => s.clone().prop_map(|stream| Op::CopyOut { stream }),
        1 => s.clone().prop_map(|stream| Op::DeviceCopyIn { stream }),
        1 => s.clone().prop_map(|stream| Op::DeviceCopyOut { stream }),
        1 => s.clone().prop_map(|stream| Op::Memset { stream }),
        2 => (s.clone(), s.clone()).prop_map(|(from, to)| Op::Event { from, to }),
        1 => s.prop_map(|stream| Op::StreamSync { stream }),
        1 => Just(Op::ContextSync),
    ]
}

/// The reference model: for each operation, whether it races.
fn model(ops: &[Op]) -> Vec<bool> {
    // Per stream: the operations ordered before its next one.
    let mut stream_before: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); STREAMS];
    let mut host_waited: BTreeSet<usize> = BTreeSet::new();
    let mut verdicts = Vec::new();
    for (i, &o) in ops.iter().enumerate() {
        let mut races = false;
        match o {
            Op::Event { from, to } => {
                let recorded = stream_before[from].clone();
                stream_before[to].extend(recorded);
            }
            Op::StreamSync { stream } => host_waited.extend(stream_before[stream].clone()),
            Op::ContextSync => host_waited.extend(0..i),
            Op::Kernel { stream, .. }
            | Op::CopyIn { stream }
            | Op::CopyOut { stream }
            | Op::DeviceCopyIn { stream }
            | Op::DeviceCopyOut { stream }
            | Op::Memset { stream } => {
                let before = &stream_before[stream] | &host_waited;
                let writes = o.access() == Some(true);
                races = (0..i).any(|j| {
                    ops[j]
                        .access()
                        .is_some_and(|w| (w || writes) && !before.contains(&j))
                });
                stream_before[stream] = before;
                stream_before[stream].insert(i);
                if matches!(o, Op::CopyIn { .. } | Op::CopyOut { .. }) {
                    host_waited.extend(stream_before[stream].clone());
                }
            }
        }
        verdicts.push(races);
    }
    verdicts
}

/// Runs `ops` on a sanitized CPU context; for each operation, whether
/// reports came out of it.
fn run(ops: &[Op]) -> Vec<bool> {
    let ctx = Context::builder()
        .cpu()
        .sanitize(true)
        .cpu_workers(1)
        .build()
        .expect("a sanitized CPU context");
    let module = Module::from_ptx(&ctx, KERNELS_PTX).expect("kernels module");
    let (write, read) = (
        module.kernel::<write_one>().unwrap(),
        module.kernel::<read_one>().unwrap(),
    );
    let streams: Vec<Stream> = (0..STREAMS).map(|_| Stream::new(&ctx).unwrap()).collect();
    let buffer = || DeviceBuffer::from_slice(&streams[0], &[0u32]).unwrap();
    let mut word = buffer();
    let source = buffer();
    // A private output per operation, so only the word is shared.
    let mut outputs: Vec<DeviceBuffer<u32>> = ops.iter().map(|_| buffer()).collect();
    ctx.synchronize().expect("nothing races while setting up");
    let one = LaunchConfig::new(1, 1);
    let mut host = [0u32];
    ops.iter()
        .zip(&mut outputs)
        .map(|(&o, out)| {
            match o {
                Op::Kernel {
                    stream,
                    write: true,
                } => streams[stream].launch(&write, one, (&mut word, 1u32)),
                Op::Kernel {
                    stream,
                    write: false,
                } => streams[stream].launch(&read, one, (&mut word, out)),
                Op::CopyIn { stream } => word.copy_from_host(&streams[stream], &[2]),
                Op::CopyOut { stream } => word.copy_to_host(&streams[stream], &mut host),
                Op::DeviceCopyIn { stream } => word.copy_from(&streams[stream], &source),
                Op::DeviceCopyOut { stream } => out.copy_from(&streams[stream], &word),
                Op::Memset { stream } => word.fill_zero(&streams[stream]),
                Op::Event { from, to } => streams[from]
                    .record_event()
                    .and_then(|e| streams[to].wait_event(&e)),
                Op::StreamSync { stream } => streams[stream].synchronize(),
                Op::ContextSync => ctx.synchronize(),
            }
            .unwrap_or_else(|e| panic!("{o:?}: {e}"));
            !ctx.take_reports().is_empty()
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn copies_memsets_and_kernels_race_exactly_when_unordered(
        ops in proptest::collection::vec(op(), 2..10)
    ) {
        prop_assert_eq!(run(&ops), model(&ops), "program: {:?}", ops);
    }
}

/// The model itself, on programs whose verdicts are plain.
#[test]
fn the_model_orders_by_stream_event_and_host_sync() {
    let k = |stream, write| Op::Kernel { stream, write };
    assert_eq!(model(&[k(0, true), k(1, false)]), [false, true]);
    assert_eq!(model(&[k(0, true), k(0, false)]), [false, false]);
    assert_eq!(model(&[k(0, false), k(1, false)]), [false, false]);
    let ev = Op::Event { from: 0, to: 1 };
    assert_eq!(model(&[k(0, true), ev, k(1, true)]), [false, false, false]);
    // An event recorded before the write does not order it.
    assert_eq!(model(&[ev, k(0, true), k(1, true)]), [false, false, true]);
    let sync = Op::StreamSync { stream: 0 };
    assert_eq!(
        model(&[k(0, true), sync, k(2, true)]),
        [false, false, false]
    );
    // A blocking copy waits for its stream: what follows is ordered.
    let copy_out = Op::CopyOut { stream: 0 };
    assert_eq!(
        model(&[k(0, true), copy_out, k(1, true)]),
        [false, false, false]
    );
    // A device-to-device copy does not.
    let dcopy = Op::DeviceCopyOut { stream: 0 };
    assert_eq!(model(&[dcopy, k(1, true)]), [false, true]);
}
