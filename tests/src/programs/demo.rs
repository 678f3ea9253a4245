//! The main demo: the race sanitizer catches a data race in a kernel, then
//! finds nothing once it is fixed. Both kernels count the positive numbers
//! of an array into one counter: the racy one with `count = count + 1`
//! (a plain read and a plain write), the fixed one with an atomic add.

use crate::{Rng, KERNELS_PTX};
use std::time::{Duration, Instant};
use vigil::{Context, DeviceBuffer, Error, LaunchConfig, Module, RaceReports, Stream};
use vigil_kernels::races::{count_positive_fixed, count_positive_racy};

const N: usize = 1 << 16;
const BLOCK: u32 = 256;

/// What the demo saw.
#[derive(Debug)]
pub struct DemoOutcome {
    /// The races reported for the racy kernel.
    pub racy_reports: RaceReports,
    /// The fixed kernel's count (the racy one's may be anything).
    pub fixed_count: u32,
    /// The right count.
    pub expected: usize,
}

/// Runs both kernels on `ctx` (a sanitized context) and prints what the
/// sanitizer reports; an error if the fixed kernel is reported or miscounts.
pub fn run(ctx: &Context) -> Result<DemoOutcome, Box<dyn std::error::Error>> {
    let stream = Stream::new(ctx)?;
    let module = Module::from_ptx(ctx, KERNELS_PTX)?;

    let values: Vec<i32> = Rng::new(7)
        .u32s(N, 200)
        .into_iter()
        .map(|v| v as i32 - 100)
        .collect();
    let expected = values.iter().filter(|&&v| v > 0).count();
    let data = DeviceBuffer::from_slice(&stream, &values)?;
    let config = LaunchConfig::for_num_elems(N, BLOCK);
    println!(
        "Counting the positive values among {N} numbers with {} blocks of {BLOCK} threads \
         ({} CPU workers, race sanitizer on).\n",
        config.grid.x,
        ctx.cpu_executor().map_or(0, |e| e.num_virtual_sms()),
    );

    println!("1. count_positive_racy: `count = count + 1` with a plain load and store");
    let mut count = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    let started = Instant::now();
    stream.launch(
        &module.kernel::<count_positive_racy>()?,
        config,
        (&data, &mut count),
    )?;
    let synced = ctx.synchronize();
    let racy_time = started.elapsed();
    let racy_reports = match synced {
        Err(Error::Races(reports)) => {
            println!("{reports}");
            reports
        }
        Err(e) => return Err(e.into()),
        Ok(()) => {
            println!("no race reported (unexpected!)");
            RaceReports::default()
        }
    };
    let got = count.to_vec(&stream)?[0];
    let luck = if got as usize == expected {
        " (no update was lost this time: the race is there whether or not it bites)"
    } else {
        " (updates were lost)"
    };
    println!("   counted {got}, expected {expected}{luck}");
    println!("   (kernel and race check: {:.1} ms)\n", ms(racy_time));

    println!("2. count_positive_fixed: one atomic add per positive value");
    let mut count = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    let started = Instant::now();
    stream.launch(
        &module.kernel::<count_positive_fixed>()?,
        config,
        (&data, &mut count),
    )?;
    ctx.synchronize()?;
    let fixed_time = started.elapsed();
    let fixed_count = count.to_vec(&stream)?[0];
    let got = fixed_count;
    println!("   no race reported; counted {got}, expected {expected}");
    println!("   (kernel and race check: {:.1} ms)", ms(fixed_time));
    if got as usize != expected {
        return Err(format!("the fixed kernel counted {got}, expected {expected}").into());
    }
    Ok(DemoOutcome {
        racy_reports,
        fixed_count,
        expected,
    })
}

/// Milliseconds, for the printed timings.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
