//! GPU-only cases of the race sanitizer (the race-scenario suite covers
//! what both backends share): memory it does not manage, contexts
//! sharing a device, grids of thousands of CTAs, CTAs sharing an SM, and
//! what checking copies costs
//! (the range-access entry only in sanitized contexts; a checked memset's
//! time, printed as a `figure:`). (`gpu_kernels.rs` runs the
//! kernel API suite sanitized too.) Each test skips without a GPU (fails
//! with `VIGIL_REQUIRE_GPU=1`).

use vigil::unstable::testing::require_gpu;
use vigil::{Context, DeviceBuffer, LaunchConfig, Module, ReportKind, Stream};
use vigil_kernels::block_races::global_neighbours;
use vigil_kernels::proofs::copy_elems;
use vigil_kernels::races::{
    disjoint_writes, many_races, race_waw, read_one, same_sm_writes, write_one,
};
use vigil_tests::KERNELS_PTX;

mod common;

use common::gpu_turn;

/// A sanitized context on GPU 0, a stream and the kernels.
fn sanitized() -> Option<(Context, Stream, Module)> {
    require_gpu()?;
    let ctx = Context::builder()
        .gpu(0)
        .sanitize(true)
        .build()
        .expect("a sanitized GPU context");
    let stream = Stream::new(&ctx).expect("stream");
    let module = Module::from_ptx(&ctx, KERNELS_PTX).expect("kernels module");
    Some((ctx, stream, module))
}

/// Memory from outside the shadow allocator (a plain context's buffer on
/// the same device) is not checked: a real race there is not reported,
/// nothing crashes, and the kernel's writes land.
#[test]
fn accesses_outside_managed_memory_are_ignored() {
    let _turn = gpu_turn();
    let Some((ctx, stream, module)) = sanitized() else {
        return;
    };
    let plain = Context::new(0).expect("plain context");
    let plain_stream = Stream::new(&plain).expect("stream");
    let mut outside = DeviceBuffer::<u32>::alloc_zeroed(&plain_stream, 1).expect("buffer");
    plain_stream.synchronize().expect("zeroed");
    assert!(
        ctx.sanitizer_pool()
            .and_then(|p| p.vmm().lookup(outside.device_ptr()))
            .is_none(),
        "the plain buffer must not come from the shadow allocator"
    );
    stream
        .launch(
            &module.kernel::<race_waw>().unwrap(),
            LaunchConfig::new(64, 1),
            (&mut outside,),
        )
        .expect("launch");
    ctx.synchronize().expect("no report for unmanaged memory");
    let v = outside.to_vec(&plain_stream).unwrap()[0];
    assert!(v == 1 || v == 2, "the kernel's write landed: {v}");
}

/// Two sanitized contexts on one device, as parallel tests make them:
/// one floods its report buffer (4,096 races), the other has one race.
/// Each collects exactly its own reports and its own dropped count; a
/// context made after the flooder is gone (it gets its buffer) starts
/// clean.
#[test]
fn contexts_sharing_a_device_keep_their_own_reports() {
    let _turn = gpu_turn();
    let Some((flood_ctx, flood_stream, flood_module)) = sanitized() else {
        return;
    };
    let (ctx, stream, module) = sanitized().expect("a second sanitized context");
    let mut flooded = DeviceBuffer::<u32>::alloc_zeroed(&flood_stream, 4096).unwrap();
    let mut word = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1).unwrap();
    for _ in 0..3 {
        flood_stream
            .launch(
                &flood_module.kernel::<many_races>().unwrap(),
                LaunchConfig::new(2, 256),
                (&mut flooded, 16u32),
            )
            .unwrap();
        // Let the flood run first (a wait on its context would collect
        // it): with one buffer per device, it left no room for this race.
        std::thread::sleep(std::time::Duration::from_millis(50));
        stream
            .launch(
                &module.kernel::<race_waw>().unwrap(),
                LaunchConfig::new(2, 1),
                (&mut word,),
            )
            .unwrap();
        let mine = common::expect_races(ctx.synchronize(), "the one race");
        assert_eq!(mine.dropped(), 0, "another context's drops:\n{mine}");
        assert_eq!(mine.len(), 1, "{mine}");
        assert_eq!(mine.reports()[0].kind, ReportKind::WriteAfterWrite);
        let flood = common::expect_races(flood_ctx.synchronize(), "the flood's races");
        assert!(
            flood.dropped() > 0,
            "the flood's overflow is its own:\n{flood}"
        );
        // Its own races only (distinct by both sites: a report whose
        // earlier access the side table lost under load counts apart).
        let line = common::marker_line(
            include_str!("../kernels/src/races.rs"),
            "races.rs",
            "many-write",
        );
        assert!(
            flood
                .reports()
                .iter()
                .all(|r| r.kind == ReportKind::WriteAfterWrite
                    && r.current.location.as_ref().map(|l| l.line) == Some(line)),
            "{flood}"
        );
    }
    drop((flooded, flood_stream, flood_module, flood_ctx));
    let (late_ctx, late_stream, late_module) = sanitized().expect("a third context");
    let mut data = DeviceBuffer::<u32>::alloc_zeroed(&late_stream, 256).unwrap();
    late_stream
        .launch(
            &late_module.kernel::<disjoint_writes>().unwrap(),
            LaunchConfig::new(1, 256),
            (&mut data,),
        )
        .unwrap();
    late_ctx
        .synchronize()
        .expect("a new context starts with an empty buffer");
}

/// How the other context of [`another_contexts_wait_does_not_order_this_contexts_streams`]
/// waits: for the whole device, for its stream, for an event on it.
#[derive(Clone, Copy, Debug)]
enum OtherWait {
    Context,
    Stream,
    Event,
}

/// Another context's wait (for the whole device, which waits for this
/// context's kernels too; for its stream; for an event) does not order
/// this context's streams: a write on one stream and a read on a second
/// stream made after the other context's wait still race. (With one host
/// clock per device, the second stream's first kernel joined the other
/// context's fold of the write.)
#[test]
fn another_contexts_wait_does_not_order_this_contexts_streams() {
    let _turn = gpu_turn();
    for wait in [OtherWait::Context, OtherWait::Stream, OtherWait::Event] {
        let Some((ctx, first, module)) = sanitized() else {
            return;
        };
        let (other, other_stream, other_module) = sanitized().expect("a second sanitized context");
        let mut data = DeviceBuffer::<u32>::alloc_zeroed(&first, 1).unwrap();
        let mut out = DeviceBuffer::<u32>::alloc_zeroed(&first, 1).unwrap();
        let mut mine = DeviceBuffer::<u32>::alloc_zeroed(&other_stream, 256).unwrap();
        ctx.synchronize().expect("zeroed");
        other.synchronize().expect("zeroed");
        first
            .launch(
                &module.kernel::<write_one>().unwrap(),
                LaunchConfig::new(1, 1),
                (&mut data, 5u32),
            )
            .unwrap();
        // The write is done before the other context waits, so each kind
        // of wait could fold it.
        std::thread::sleep(std::time::Duration::from_millis(20));
        other_stream
            .launch(
                &other_module.kernel::<disjoint_writes>().unwrap(),
                LaunchConfig::new(1, 256),
                (&mut mine,),
            )
            .unwrap();
        let waited = match wait {
            OtherWait::Context => other.synchronize(),
            OtherWait::Stream => other_stream.synchronize(),
            OtherWait::Event => other_stream.record_event().and_then(|e| e.synchronize()),
        };
        waited.expect("the other context has no race");
        let second = Stream::new(&ctx).unwrap();
        second
            .launch(
                &module.kernel::<read_one>().unwrap(),
                LaunchConfig::new(1, 1),
                (&mut data, &mut out),
            )
            .unwrap();
        let races = common::expect_races(
            ctx.synchronize(),
            &format!("{wait:?}: the read to race with the write"),
        );
        assert_eq!(races.len(), 1, "{wait:?}: {races}");
        assert_eq!(
            races.reports()[0].kind,
            ReportKind::ReadAfterWrite,
            "{wait:?}: {races}"
        );
    }
}

/// 2^22 elements in 16,384 CTAs of 256 threads (many per SM over time),
/// written once each and then read by a second kernel on the same stream
/// and a third on another stream ordered by an event: no report.
#[test]
fn thousands_of_ctas_per_launch_raise_no_false_race() {
    let _turn = gpu_turn();
    let Some((ctx, stream, module)) = sanitized() else {
        return;
    };
    let n = 1usize << 22;
    let mut data = DeviceBuffer::<u32>::alloc_zeroed(&stream, n).unwrap();
    let cfg = LaunchConfig::for_num_elems(n, 256);
    assert!(cfg.grid.x as usize >= 16 * 1024);
    let disjoint = module.kernel::<disjoint_writes>().unwrap();
    stream.launch(&disjoint, cfg, (&mut data,)).unwrap();
    stream.launch(&disjoint, cfg, (&mut data,)).unwrap();
    let other = Stream::new(&ctx).unwrap();
    let ev = stream.record_event().unwrap();
    other.wait_event(&ev).unwrap();
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1).unwrap();
    stream.synchronize().expect("zeroed output, no race so far");
    other
        .launch(
            &module.kernel::<read_one>().unwrap(),
            LaunchConfig::new(1, 1),
            (&mut data, &mut out),
        )
        .unwrap();
    ctx.synchronize()
        .expect("no false race between ordered CTAs");
    let got = data.to_vec(&stream).unwrap();
    assert!(got.iter().enumerate().all(|(i, &v)| v == i as u32));
}

/// Every block writes the element of its SM: each race is between two
/// CTAs that shared an SM, which holds only if resident CTAs get their own
/// sanitizer threads (slots).
#[test]
fn ctas_sharing_an_sm_race_with_each_other() {
    let _turn = gpu_turn();
    let Some((ctx, stream, module)) = sanitized() else {
        return;
    };
    let sms = ctx.sm_count() as usize;
    let mut data = DeviceBuffer::<u32>::alloc_zeroed(&stream, sms).unwrap();
    stream
        .launch(
            &module.kernel::<same_sm_writes>().unwrap(),
            LaunchConfig::new(8 * sms as u32, 32),
            (&mut data,),
        )
        .unwrap();
    let reports = common::expect_races(ctx.synchronize(), "races between CTAs of one SM");
    // Every report is a write-after-write between blocks (one thread per
    // block writes), and some name two blocks that shared an SM.
    let all = reports.reports();
    assert!(
        all.iter()
            .all(|r| r.kind == ReportKind::WriteAfterWrite && !r.prior.same_block),
        "{reports}"
    );
    assert!(
        all.iter().any(|r| Some(r.current.block) != r.prior.block),
        "{reports}"
    );
}

/// CTAs of 256 threads resident per SM, plain entry against sanitized
/// entry, for the three examples' kernels (printed as `figure:` lines).
/// Every sanitized entry must still fit at least one such CTA per SM, and
/// the slots must cover what the occupancy allows.
#[test]
fn ctas_per_sm_sanitized_against_plain() {
    let _turn = gpu_turn();
    use vigil::Kernel;
    use vigil_kernels::examples::{axpy, histogram, reduce_sum};
    let Some((ctx, _stream, module)) = sanitized() else {
        return;
    };
    // Each kind of context loads only the entries it launches, so the
    // plain entries are measured in a plain context's module.
    let plain_ctx = Context::builder()
        .gpu(0)
        .build()
        .expect("a plain GPU context");
    let plain_module = Module::from_ptx(&plain_ctx, KERNELS_PTX).expect("kernels module");
    let occupancy = |ctx: &Context, module: &Module, name: &str| {
        ctx.bind().unwrap();
        let f = module.function(name).expect("entry");
        let mut n = 0i32;
        // SAFETY: `f` is a live function of the current context; 256
        // threads with its static shared memory is a valid block.
        let r = unsafe {
            vigil::unstable::sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut n,
                f.raw(),
                256,
                0,
            )
        };
        assert_eq!(r, vigil::unstable::sys::CUresult::CUDA_SUCCESS, "{name}");
        (n, f.attrs().num_regs)
    };
    for name in [axpy::NAME, reduce_sum::NAME, histogram::NAME] {
        let (plain, plain_regs) = occupancy(&plain_ctx, &plain_module, name);
        let (checked, checked_regs) = occupancy(&ctx, &module, &format!("{name}__vigil"));
        println!(
            "figure: {name}: CTAs/SM at 256 threads: plain {plain} ({plain_regs} regs), \
             sanitized {checked} ({checked_regs} regs)"
        );
        assert!(checked >= 1, "{name}__vigil cannot run a 256-thread CTA");
    }
}

/// A sanitized entry is built for at most 128 registers, which fits
/// blocks of 512 threads; a launch of 1,024-thread blocks runs the same entry
/// from a second build at 64 registers, with the same checks: a clean
/// kernel stays clean and right, a racy one is reported.
#[test]
fn blocks_too_large_for_the_register_cap_launch_from_a_second_build() {
    let _turn = gpu_turn();
    let Some((ctx, stream, module)) = sanitized() else {
        return;
    };
    let entry = module
        .function("disjoint_writes__vigil")
        .expect("the sanitized entry");
    let (regs, max_threads) = (entry.attrs().num_regs, entry.attrs().max_threads_per_block);
    println!(
        "figure: disjoint_writes__vigil: {regs} registers, blocks up to {max_threads} threads"
    );
    assert!(
        regs <= 128 && max_threads < 1024,
        "{regs} registers, {max_threads} threads"
    );
    let n = 1 << 16;
    for block in [256u32, 1024] {
        let mut data = DeviceBuffer::<u32>::alloc_zeroed(&stream, n).expect("buffer");
        stream
            .launch(
                &module.kernel::<disjoint_writes>().unwrap(),
                LaunchConfig::new(n as u32 / block, block),
                (&mut data,),
            )
            .unwrap_or_else(|e| panic!("{block}-thread blocks: {e}"));
        ctx.synchronize()
            .unwrap_or_else(|e| panic!("{block}-thread blocks: {e}"));
        let v = data.to_vec(&stream).unwrap();
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
    }
    let mut one = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1).expect("buffer");
    stream
        .launch(
            &module.kernel::<race_waw>().unwrap(),
            LaunchConfig::new(2, 1024),
            (&mut one,),
        )
        .expect("1,024-thread blocks of a racy kernel");
    match ctx.synchronize() {
        Err(vigil::Error::Races(r)) => assert!(r
            .reports()
            .iter()
            .any(|r| r.kind == ReportKind::WriteAfterWrite)),
        other => panic!("expected the write-after-write, got {other:?}"),
    }
}

/// Sanitized entries start on their module's lean build (64 registers a
/// thread, so that four 256-thread blocks share an SM) and keep it while
/// their launches take only the race engine's whole-line paths; an entry
/// one of whose launches takes a general path (accesses of single words,
/// which race here) runs its later launches at the register cap. Both
/// builds check alike: the racy kernel is reported from each.
#[test]
fn entries_run_lean_until_a_launch_takes_a_general_path() {
    let _turn = gpu_turn();
    let Some((ctx, stream, module)) = sanitized() else {
        return;
    };
    let copy = module.kernel::<copy_elems>().unwrap();
    let lean = copy
        .function()
        .attrs_for_block(256)
        .expect("the lean build");
    let capped = copy.function().attrs();
    println!(
        "figure: copy_elems__vigil: {} registers lean, {} at the cap",
        lean.num_regs, capped.num_regs
    );
    assert!(lean.num_regs <= 64, "{} registers", lean.num_regs);
    let n = 1u32 << 20;
    let x = DeviceBuffer::from_slice(&stream, &(0..n).collect::<Vec<_>>()).expect("x");
    let mut y = DeviceBuffer::<u32>::alloc_zeroed(&stream, n as usize).expect("y");
    for round in 0..2 {
        stream
            .launch(&copy, LaunchConfig::new(n / 256, 256), (&x, &mut y))
            .expect("launch");
        ctx.synchronize().expect("a copy has no race");
        assert_eq!(
            copy.function().attrs_for_block(256).unwrap().num_regs,
            lean.num_regs,
            "launch {round}: whole lines keep the lean build"
        );
    }
    let got = y.to_vec(&stream).unwrap();
    assert!(got.iter().enumerate().all(|(i, &v)| v == i as u32));

    let racy = module.kernel::<race_waw>().unwrap();
    let capped = racy.function().attrs().num_regs;
    let first = racy.function().attrs_for_block(1).unwrap().num_regs;
    println!("figure: race_waw__vigil: {first} registers lean, {capped} at the cap");
    assert!(first <= 64 && capped > 64, "{first} and {capped} registers");
    let mut one = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1).expect("buffer");
    for build in ["lean", "capped"] {
        stream
            .launch(&racy, LaunchConfig::new(64, 1), (&mut one,))
            .expect("launch");
        match ctx.synchronize() {
            Err(vigil::Error::Races(r)) => assert!(
                r.reports()
                    .iter()
                    .any(|r| r.kind == ReportKind::WriteAfterWrite),
                "{build}: {r:?}"
            ),
            other => panic!("{build}: expected the write-after-write, got {other:?}"),
        }
        assert_eq!(
            racy.function().attrs_for_block(1).unwrap().num_regs,
            capped,
            "after the {build} launch, the entry runs at the cap"
        );
    }
}

/// A block claims its regions of the SM (its same-block table) when a
/// thread first checks an access against its block; once blocks of a
/// launch did, the entry's later launches claim them at entry instead.
/// Either way, launch after launch, threads of one block that race on
/// global memory are reported as the same block's, and the same accesses
/// ordered by a barrier are clean and right.
#[test]
fn same_block_races_are_found_whether_regions_are_claimed_in_the_body_or_at_entry() {
    let _turn = gpu_turn();
    let Some((ctx, stream, module)) = sanitized() else {
        return;
    };
    let neighbours = module.kernel::<global_neighbours>().unwrap();
    let mut data = DeviceBuffer::<u32>::alloc_zeroed(&stream, 64).expect("data");
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, 64).expect("out");
    let want: Vec<u32> = (0..64).map(|t| (t + 1) % 64 + 1).collect();
    for round in 0..4 {
        for barrier in [1u32, 0] {
            stream
                .launch(
                    &neighbours,
                    LaunchConfig::new(1, 64),
                    (&mut data, &mut out, barrier),
                )
                .expect("launch");
            let outcome = ctx.synchronize();
            if barrier == 1 {
                outcome.unwrap_or_else(|e| panic!("launch {round}: the barrier orders it: {e}"));
                assert_eq!(out.to_vec(&stream).unwrap(), want, "launch {round}");
                continue;
            }
            match outcome {
                Err(vigil::Error::Races(r)) => {
                    assert!(!r.reports().is_empty(), "launch {round}");
                    assert!(
                        r.reports().iter().all(|r| r.prior.same_block),
                        "launch {round}: {r:?}"
                    );
                }
                other => panic!("launch {round}: expected the same-block race, got {other:?}"),
            }
        }
    }
}

/// Copies and fills are checked only in a sanitized context: a plain
/// context's module does not even hold the range-access entry (the plain
/// cut drops it), a sanitized one's does.
#[test]
fn only_a_sanitized_context_loads_the_range_access_entry() {
    let _turn = gpu_turn();
    use vigil_shared::gpu::RANGE_ACCESS_ENTRY;
    let Some((_ctx, _stream, module)) = sanitized() else {
        return;
    };
    module
        .function(RANGE_ACCESS_ENTRY)
        .expect("the range-access entry in a sanitized context's module");
    let plain = Context::builder().gpu(0).build().expect("a plain context");
    let plain_module = Module::from_ptx(&plain, KERNELS_PTX).expect("kernels module");
    let got = plain_module.function(RANGE_ACCESS_ENTRY);
    assert!(
        matches!(got, Err(vigil::Error::EntryNotLoaded { .. })),
        "a plain context loaded the range-access entry: {:?}",
        got.err()
    );
}

/// What checking a fill costs: a 64 MiB memset, plain against sanitized
/// (printed as `figure:` lines); both zero the buffer.
#[test]
fn a_checked_memset_costs_one_range_check() {
    let _turn = gpu_turn();
    use std::time::Instant;
    let Some((ctx, stream, _module)) = sanitized() else {
        return;
    };
    let plain = Context::builder().gpu(0).build().expect("a plain context");
    let plain_stream = Stream::new(&plain).expect("stream");
    let n = 16 << 20; // 64 MiB of u32
    let ones = vec![1u32; n];
    for (what, stream) in [("plain", &plain_stream), ("sanitized", &stream)] {
        let mut buf = DeviceBuffer::from_slice(stream, &ones).expect("buffer");
        let mut best = f64::MAX;
        for _ in 0..3 {
            let start = Instant::now();
            buf.fill_zero(stream).expect("fill");
            stream.synchronize().expect("no race on one stream");
            best = best.min(start.elapsed().as_secs_f64() * 1e3);
        }
        println!("figure: memset of 64 MiB on one stream, {what}: {best:.3} ms");
        let back = buf.to_vec(stream).expect("read back");
        assert!(back.iter().all(|&v| v == 0), "{what}: the fill landed");
    }
    assert!(ctx.take_reports().is_empty());
}
