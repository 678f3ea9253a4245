//! Tests of the host API through real launches, written once and run by
//! Vigil's harness on every backend, sanitized (`*::sanitized::*`: on a GPU
//! every buffer comes from the shadow allocator) and plain
//! (`*::plain::*`): `gpu::*` on a CUDA GPU (reported as skipped without
//! one, a failure with `VIGIL_REQUIRE_GPU=1`) and `cpu::*` on the CPU
//! backend, so they cannot drift. A few GPU-only checks (device
//! attributes, the JIT log, launch overhead, the sanitized mode's
//! allocator) follow.

use vigil::{
    ArgProblem, Context, DeviceBuffer, Error, Event, KernelArgValue, LaunchConfig,
    LaunchConfigError, LaunchVariant, Module, Stream,
};
// The real kernel (its host body runs on the CPU backend); its PTX is
// `AXPY_PTX`.
use vigil_kernels::examples::axpy;

mod common;
use common::{axpy_stale, AXPY_PTX};

/// Runs each check (a `fn(&Context)`) on every backend through Vigil's
/// harness, once sanitized and once plain.
macro_rules! sanitized_and_plain {
    ($($check:ident),* $(,)?) => {
        mod sanitized {
            $(
                #[vigil::test]
                fn $check(ctx: &vigil::Context) {
                    super::$check(ctx);
                }
            )*
        }
        mod plain {
            $(
                #[vigil::test(plain)]
                fn $check(ctx: &vigil::Context) {
                    super::$check(ctx);
                }
            )*
        }
    };
}

sanitized_and_plain!(
    buffers_copy_slice_and_check_lengths,
    typed_axpy_matches_the_cpu,
    mismatched_or_missing_kernels_are_typed_errors,
    launch_checks_happen_before_the_driver,
    untyped_launch_is_checked_against_the_ptx,
    events_time_and_order_streams,
    text_that_is_not_ptx_is_a_typed_error,
);

fn setup(ctx: &Context) -> (Stream, Module) {
    let stream = Stream::new(ctx).expect("stream");
    let module = Module::from_ptx(ctx, AXPY_PTX).expect("load axpy PTX");
    (stream, module)
}

fn data(n: usize, seed: u32) -> Vec<f32> {
    // A small LCG: fresh-looking values without a dependency.
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        })
        .collect()
}

#[vigil::test(gpu, plain)]
fn context_reports_the_device(ctx: &Context) {
    eprintln!(
        "device {}: {} cc {:?}, {} SMs, {} MiB, max threads/block {}, smem {} / opt-in {}",
        ctx.ordinal(),
        ctx.name(),
        ctx.compute_capability(),
        ctx.sm_count(),
        ctx.total_memory() >> 20,
        ctx.max_threads_per_block(),
        ctx.max_shared_mem_per_block(),
        ctx.max_shared_mem_per_block_optin(),
    );
    assert!(!ctx.name().is_empty());
    assert!(ctx.compute_capability().0 >= 7);
    assert!(ctx.sm_count() > 0 && ctx.total_memory() > 0);
    assert_eq!(ctx.max_threads_per_block(), 1024);
    assert_eq!(ctx.limits().max_grid_dim[1], 65_535);
    let (free, total) = ctx.memory_info().unwrap();
    assert!(free <= total && total > 0);
    ctx.synchronize().unwrap();
    let (major, _) = vigil::driver_version().unwrap();
    assert!(major >= 12);
    assert!(matches!(
        vigil::Context::new(vigil::device_count().unwrap()),
        Err(Error::InvalidDevice { .. })
    ));
}

fn buffers_copy_slice_and_check_lengths(ctx: &Context) {
    let (stream, _m) = setup(ctx);
    let host = data(1000, 1);
    let buf = DeviceBuffer::from_slice(&stream, &host).unwrap();
    assert_eq!(buf.len(), 1000);
    assert_eq!(buf.to_vec(&stream).unwrap(), host);
    assert_eq!(
        buf.slice(10..20).unwrap().to_vec(&stream).unwrap(),
        &host[10..20]
    );
    assert_eq!(
        buf.slice(..)
            .unwrap()
            .slice(990..)
            .unwrap()
            .to_vec(&stream)
            .unwrap(),
        &host[990..]
    );
    assert!(matches!(
        buf.slice(10..1001),
        Err(Error::OutOfBounds {
            start: 10,
            end: 1001,
            len: 1000
        })
    ));
    #[allow(clippy::reversed_empty_ranges)]
    let r = buf.slice(20..10);
    assert!(matches!(r, Err(Error::OutOfBounds { .. })));

    let mut z = DeviceBuffer::<f32>::alloc_zeroed(&stream, 1000).unwrap();
    assert!(z.to_vec(&stream).unwrap().iter().all(|&v| v == 0.0));
    z.slice_mut(100..200)
        .unwrap()
        .copy_from_host(&stream, &host[..100])
        .unwrap();
    let got = z.to_vec(&stream).unwrap();
    assert_eq!(&got[100..200], &host[..100]);
    assert!(got[..100].iter().chain(&got[200..]).all(|&v| v == 0.0));

    // Device-to-device, whole and partial.
    z.copy_from(&stream, &buf).unwrap();
    assert_eq!(z.to_vec(&stream).unwrap(), host);
    let mut w = DeviceBuffer::<f32>::alloc_zeroed(&stream, 10).unwrap();
    w.copy_from(&stream, &buf.slice(5..15).unwrap()).unwrap();
    assert_eq!(w.to_vec(&stream).unwrap(), &host[5..15]);
    let (mut a, mut b) = z.as_slice_mut().split_at_mut(500).unwrap();
    a.fill_zero(&stream).unwrap();
    b.copy_from_host(&stream, &host[..500]).unwrap();
    assert_eq!(&z.to_vec(&stream).unwrap()[500..], &host[..500]);

    // Length mismatches.
    let e = w.copy_from(&stream, &buf).unwrap_err();
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                op: "copy_from",
                dst: 10,
                src: 1000
            }
        ),
        "{e}"
    );
    let e = w.copy_from_host(&stream, &host).unwrap_err();
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                dst: 10,
                src: 1000,
                ..
            }
        ),
        "{e}"
    );
    let mut small = [0f32; 3];
    assert!(matches!(
        w.copy_to_host(&stream, &mut small),
        Err(Error::LengthMismatch { .. })
    ));

    // Zero-length buffers own nothing and copy nothing.
    let mut e0 = DeviceBuffer::<u64>::alloc_zeroed(&stream, 0).unwrap();
    assert_eq!((e0.len(), e0.device_ptr()), (0, 0));
    assert!(e0.to_vec(&stream).unwrap().is_empty());
    e0.copy_from_host(&stream, &[]).unwrap();
    assert!(e0.slice(0..0).unwrap().is_empty());
    let e1 = DeviceBuffer::<u8>::from_slice(&stream, &[]).unwrap();
    assert!(e1.is_empty());
}

fn typed_axpy_matches_the_cpu(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let axpy = module.kernel::<axpy>().unwrap();
    assert_eq!(axpy.name(), "axpy");
    for n in [1usize, 255, 1000, 1 << 20] {
        let (x, y) = (data(n, 2), data(n, 3));
        let dx = DeviceBuffer::from_slice(&stream, &x).unwrap();
        let mut dy = DeviceBuffer::from_slice(&stream, &y).unwrap();
        stream
            .launch(
                &axpy,
                LaunchConfig::for_num_elems(n, 256),
                (2.5f32, &dx, &mut dy),
            )
            .unwrap();
        let got = dy.to_vec(&stream).unwrap();
        for i in 0..n {
            assert_eq!(got[i], 2.5f32 * x[i] + y[i], "n {n} i {i}");
        }
    }
    // Grid wider than 65535 blocks in x, and slices as arguments (on the
    // CPU with one-thread blocks, to keep the thread count small).
    let (n, block) = if ctx.is_cpu() {
        (70_000, 1)
    } else {
        (1 << 24, 128)
    };
    let x = vec![1.0f32; n];
    let dx = DeviceBuffer::from_slice(&stream, &x).unwrap();
    let mut dy = DeviceBuffer::<f32>::alloc_zeroed(&stream, n).unwrap();
    let cfg = LaunchConfig::for_num_elems(n, block);
    assert!(cfg.grid.x > 65_535);
    stream
        .launch(&axpy, cfg, (3.0f32, dx.as_slice(), dy.as_slice_mut()))
        .unwrap();
    let got = dy.to_vec(&stream).unwrap();
    assert!(got.iter().all(|&v| v == 3.0));
    // Sub-slices: only the middle is written.
    let mut dz = DeviceBuffer::<f32>::alloc_zeroed(&stream, 300).unwrap();
    let xs = dx.slice(0..100).unwrap();
    stream
        .launch(
            &axpy,
            LaunchConfig::for_num_elems(100, 64),
            (1.0f32, xs, dz.slice_mut(100..200).unwrap()),
        )
        .unwrap();
    let z = dz.to_vec(&stream).unwrap();
    assert!(z[..100].iter().all(|&v| v == 0.0) && z[100..200].iter().all(|&v| v == 1.0));
    assert!(z[200..].iter().all(|&v| v == 0.0));
    ctx.synchronize().unwrap();
}

fn mismatched_or_missing_kernels_are_typed_errors(ctx: &Context) {
    let (_stream, module) = setup(ctx);
    let e = module.kernel::<axpy_stale>().unwrap_err();
    assert!(
        matches!(
            e,
            Error::SignatureType {
                index: 0,
                name: "n",
                ..
            }
        ),
        "{e}"
    );
    let e = module.function("axpi").unwrap_err();
    assert!(
        matches!(&e, Error::KernelNotFound { available, .. } if available == &["axpy"]),
        "{e}"
    );
    assert_eq!(module.entries().unwrap().len(), 1);
}

#[vigil::test(gpu, plain)]
fn bad_ptx_returns_the_jit_log(ctx: &Context) {
    let bad = ".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\tbogus.instruction %r1;\n\tret;\n}\n";
    let e = Module::from_ptx(ctx, bad).unwrap_err();
    eprintln!("{e}");
    match &e {
        Error::PtxLoad { log, .. } => assert!(!log.is_empty(), "JIT log should explain: {e}"),
        e => panic!("unexpected {e:?}"),
    }
    let e = Module::from_ptx(ctx, "abc\0def").unwrap_err();
    assert!(matches!(e, Error::PtxText { .. }), "{e}");
}

/// Every backend checks PTX text before taking it (the CPU backend too,
/// which never compiles it).
fn text_that_is_not_ptx_is_a_typed_error(ctx: &Context) {
    let cases = [
        ("this is not ptx", "this text with `this is not ptx`"),
        ("", "empty"),
        (
            ".version 8.0\n.visible .entry k()\n{\n ret;\n}\n",
            "`.target`",
        ),
        (
            ".version 8.0\n.target sm_80\n.visible .func f()\n{\n ret;\n}\n",
            "no `.entry`",
        ),
        (
            ".version 8.0\n.target sm_80\n.visible .entry k()\n{\n ret;\n",
            "not closed",
        ),
        ("abc\0def", "NUL byte"),
    ];
    for (text, says) in cases {
        match Module::from_ptx(ctx, text) {
            Err(Error::PtxText { message }) => {
                assert!(message.contains(says), "{text:?}: {message}")
            }
            Err(e) => panic!("{text:?}: expected a PTX text error, got {e}"),
            Ok(_) => panic!("{text:?} was accepted as PTX on {}", ctx.device()),
        }
    }
}

fn launch_checks_happen_before_the_driver(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let axpy = module.kernel::<axpy>().unwrap();
    let dx = DeviceBuffer::from_slice(&stream, &[1.0f32; 4]).unwrap();
    let mut dy = DeviceBuffer::<f32>::alloc_zeroed(&stream, 4).unwrap();
    let e = stream
        .launch(
            &axpy,
            LaunchConfig::new(0u32, 32u32),
            (1.0f32, &dx, &mut dy),
        )
        .unwrap_err();
    assert!(
        matches!(
            &e,
            Error::LaunchConfig {
                problem: LaunchConfigError::ZeroDim { which: "grid.x" },
                ..
            }
        ),
        "{e}"
    );
    let e = stream.launch(
        &axpy,
        LaunchConfig::new((1u32, 70_000, 1), 32u32),
        (1.0f32, &dx, &mut dy),
    );
    assert!(matches!(e, Err(Error::LaunchConfig { .. })));
    let e = stream.launch(
        &axpy,
        LaunchConfig::new(1u32, 2048u32),
        (1.0f32, &dx, &mut dy),
    );
    assert!(matches!(e, Err(Error::LaunchConfig { .. })));
    let too_much = stream.context().max_shared_mem_per_block_optin() + 1;
    let e = stream.launch(
        &axpy,
        LaunchConfig::new(1u32, 32u32).with_shared_mem(too_much),
        (1.0f32, &dx, &mut dy),
    );
    assert!(matches!(e, Err(Error::LaunchConfig { .. })));
    // More than the default 48 KiB but within the opt-in limit: Vigil opts in.
    let big = 100 * 1024;
    if stream.context().max_shared_mem_per_block_optin() >= big {
        stream
            .launch(
                &axpy,
                LaunchConfig::new(1u32, 32u32).with_shared_mem(big),
                (1.0f32, &dx, &mut dy),
            )
            .unwrap();
        stream.synchronize().unwrap();
    }
    // Hidden arguments the entry does not declare are caught.
    let mut buf = vigil::pack_args::<axpy, _>((1.0f32, &dx, &mut dy)).unwrap();
    buf.append_hidden(7u64);
    // SAFETY: the buffer holds live device pointers; the launch is rejected anyway.
    let e = unsafe { stream.launch_packed(axpy.function(), LaunchConfig::new(1u32, 32u32), &buf) };
    assert!(
        matches!(
            e,
            Err(Error::ArgumentCount {
                given: 6,
                expected: 5,
                ..
            })
        ),
        "{e:?}"
    );
    assert_eq!(dy.to_vec(&stream).unwrap(), [1.0; 4]);
}

fn untyped_launch_is_checked_against_the_ptx(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let f = module.function("axpy").unwrap();
    let typed = module.kernel::<axpy>().unwrap();
    assert!(f.attrs().max_threads_per_block > 0);
    let x = data(100, 4);
    let dx = DeviceBuffer::from_slice(&stream, &x).unwrap();
    let mut dy = DeviceBuffer::<f32>::alloc_zeroed(&stream, 100).unwrap();
    let cfg = LaunchConfig::for_num_elems(100, 32);
    // SAFETY: axpy reads x[i] and writes y[i] for i < y.len() only.
    unsafe {
        let bad = [
            KernelArgValue::U32(2),
            KernelArgValue::slice(&dx),
            KernelArgValue::slice_mut(&mut dy),
        ];
        let e = stream.launch_dynamic(&f, cfg, &bad).unwrap_err();
        assert!(
            matches!(&e, Error::Argument { index: 0, problem, .. } if matches!(**problem, ArgProblem::PtxType { .. })),
            "{e}"
        );
        let args = [
            KernelArgValue::F32(2.0),
            KernelArgValue::slice(&dx),
            KernelArgValue::slice_mut(&mut dy),
        ];
        let r = stream.launch_dynamic(&f, cfg, &args);
        if ctx.is_cpu() {
            // A function looked up by name has no host code to run there;
            // the typed kernel's function does.
            assert!(matches!(r, Err(Error::Unsupported { .. })), "{r:?}");
            stream.launch_dynamic(typed.function(), cfg, &args).unwrap();
        } else {
            r.unwrap();
        }
    }
    let got = dy.to_vec(&stream).unwrap();
    assert!(got.iter().zip(&x).all(|(g, x)| *g == 2.0 * x));
}

fn events_time_and_order_streams(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let axpy = module.kernel::<axpy>().unwrap();
    let n = if ctx.is_cpu() { 1 << 16 } else { 1 << 24 };
    let dx = DeviceBuffer::from_slice(&stream, &vec![1.0f32; n]).unwrap();
    let mut dy = DeviceBuffer::<f32>::alloc_zeroed(&stream, n).unwrap();
    let start = stream.record_event().unwrap();
    stream
        .launch(
            &axpy,
            LaunchConfig::for_num_elems(n, 256),
            (1.0f32, &dx, &mut dy),
        )
        .unwrap();
    let end = stream.record_event().unwrap();
    // A second stream waits for the first before copying the result.
    let other = Stream::new(ctx).unwrap();
    other.wait_event(&end).unwrap();
    let mut copy = DeviceBuffer::<f32>::alloc(&other, n).unwrap();
    copy.copy_from(&other, &dy).unwrap();
    end.synchronize().unwrap();
    assert!(end.is_complete().unwrap());
    let ms = start.elapsed_ms(&end).unwrap();
    eprintln!(
        "axpy over {n} f32: {ms:.3} ms, {:.1} GB/s",
        (3 * 4 * n) as f64 / (ms as f64 * 1e6)
    );
    assert!(ms > 0.0);
    let got = copy.to_vec(&other).unwrap();
    assert!(got.iter().all(|&v| v == 1.0));
    let untimed = Event::new_untimed(ctx).unwrap();
    untimed.record(&other).unwrap();
    other.synchronize().unwrap();
    assert!(other.is_idle().unwrap());
    assert!(
        start.elapsed_ms(&untimed).is_err(),
        "untimed events cannot be timed"
    );
}

#[vigil::test(gpu, plain)]
fn host_launch_overhead_is_small(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let axpy = module.kernel::<axpy>().unwrap();
    let dx = DeviceBuffer::from_slice(&stream, &[1.0f32; 256]).unwrap();
    let mut dy = DeviceBuffer::<f32>::alloc_zeroed(&stream, 256).unwrap();
    let cfg = LaunchConfig::for_num_elems(256, 256);
    for _ in 0..100 {
        stream.launch(&axpy, cfg, (1.0f32, &dx, &mut dy)).unwrap();
    }
    stream.synchronize().unwrap();
    let n = 2000;
    let t = std::time::Instant::now();
    for _ in 0..n {
        stream.launch(&axpy, cfg, (1.0f32, &dx, &mut dy)).unwrap();
    }
    let per_launch = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    stream.synchronize().unwrap();
    let t = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(vigil::pack_args::<axpy, _>((1.0f32, &dx, &mut dy)).unwrap());
    }
    let per_pack = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    eprintln!("host time per typed launch: {per_launch:.2} us (packing alone {per_pack:.3} us)");
    assert_eq!(dy.to_vec(&stream).unwrap()[0], (100 + n) as f32);
}

#[vigil::test(gpu, plain)]
fn sanitized_gpu_buffers_come_from_the_shadow_allocator(plain: &Context) {
    let ctx = Context::builder()
        .gpu(plain.ordinal())
        .sanitize(true)
        .build()
        .unwrap();
    assert!(ctx.is_sanitized() && !plain.is_sanitized());
    assert_eq!(ctx.device(), plain.device());
    // A sanitized context launches the `__vigil` entries.
    assert_eq!(ctx.launch_variant(), LaunchVariant::Sanitized);
    assert_eq!(plain.launch_variant(), LaunchVariant::Plain);
    let pool = ctx
        .sanitizer_pool()
        .expect("a sanitized GPU context has a pool");
    let (stream, module) = setup(&ctx);
    let k = module.kernel::<axpy>().unwrap();
    let n = 100_000;
    let (xs, ys) = (data(n, 5), data(n, 6));
    let x = DeviceBuffer::from_slice(&stream, &xs).unwrap();
    let mut y = DeviceBuffer::from_slice(&stream, &ys).unwrap();
    for b in [x.device_ptr(), y.device_ptr()] {
        let a = pool
            .vmm()
            .lookup(b)
            .expect("buffer inside the shadow allocator");
        assert_eq!(a.ptr, b);
        assert!(a.shadow_bytes >= 2 * (n as u64 * 4) && a.shadow_ptr < a.ptr);
    }
    stream
        .launch(
            &k,
            LaunchConfig::for_num_elems(n, 256),
            (2.0f32, &x, &mut y),
        )
        .unwrap();
    let got = y.to_vec(&stream).unwrap();
    assert!((0..n).all(|i| got[i] == 2.0 * xs[i] + ys[i]));
    // Buffers of a plain context of the same device are usable too.
    let plain_stream = Stream::new(plain).unwrap();
    let z = DeviceBuffer::from_slice(&plain_stream, &xs).unwrap();
    assert!(pool.vmm().lookup(z.device_ptr()).is_none());
    stream
        .launch(
            &k,
            LaunchConfig::for_num_elems(n, 256),
            (1.0f32, &z, &mut y),
        )
        .unwrap();
    ctx.synchronize().unwrap();
    // Dropping returns the block to the cache (still mapped) rather than
    // to the driver; a new buffer comes from the pool, zeroed. (Other
    // tests share the process's pool concurrently: no exact counts.)
    let ptr = y.device_ptr();
    drop(y);
    if pool.vmm().caching() {
        assert!(pool.vmm().lookup(ptr).is_some(), "cached, not unmapped");
    }
    let again = DeviceBuffer::<f32>::alloc_zeroed(&stream, n).unwrap();
    assert!(pool.vmm().lookup(again.device_ptr()).is_some());
    assert!(again.to_vec(&stream).unwrap().iter().all(|&v| v == 0.0));
    let stats = pool.stats();
    assert!(
        stats.hits + stats.misses >= 3 && stats.live_blocks >= 2,
        "{stats:?}"
    );
    // A second sanitized context shares the process's allocator.
    let other = Context::builder()
        .gpu(plain.ordinal())
        .sanitize(true)
        .build()
        .unwrap();
    assert!(std::ptr::eq(other.sanitizer_pool().unwrap(), pool));
    assert!(ctx.take_reports().is_empty());
}

vigil::test_main!();
