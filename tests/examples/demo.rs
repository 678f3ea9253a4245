//! The main demo: Vigil's race sanitizer catches a data race in a kernel,
//! then finds nothing once it is fixed.
//!
//! `cargo run --release --example demo`
//!
//! Both kernels count the positive numbers of an array into one counter.
//! The racy one does `count = count + 1` with a plain read and a plain
//! write, so blocks that run at the same time overwrite each other's
//! updates; the fixed one uses an atomic add. The sanitizer reports each
//! race with its kind, the buffer and offset, and both accesses' blocks,
//! threads and source lines.
//!
//! It runs on the CPU backend: sanitized launches on a GPU are not built
//! yet, so a machine with a GPU says so and uses the CPU backend too.

use vigil::{Context, DeviceBuffer, Error, LaunchConfig, Module, Stream};
use vigil_kernels::races::{count_positive_fixed, count_positive_racy};
use vigil_tests::{Rng, KERNELS_PTX};

const N: usize = 1 << 16;
const BLOCK: u32 = 256;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if vigil::gpu_available().is_ok() {
        println!(
            "A GPU is present, but sanitized GPU launches are not built yet: \
             running the demo on the CPU backend."
        );
    } else {
        println!("No CUDA GPU found: running the demo on the CPU backend.");
    }
    let ctx = Context::builder().cpu().sanitize(true).build()?;
    let stream = Stream::new(&ctx)?;
    let module = Module::from_ptx(&ctx, KERNELS_PTX)?;

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
    stream.launch(
        &module.kernel::<count_positive_racy>()?,
        config,
        (&data, &mut count),
    )?;
    match ctx.synchronize() {
        Err(Error::Races(reports)) => println!("{reports}"),
        Err(e) => return Err(e.into()),
        Ok(()) => println!("no race reported (unexpected!)"),
    }
    let got = count.to_vec(&stream)?[0];
    let luck = if got as usize == expected {
        " (no update was lost this time: the race is there whether or not it bites)"
    } else {
        " (updates were lost)"
    };
    println!("   counted {got}, expected {expected}{luck}\n");

    println!("2. count_positive_fixed: one atomic add per positive value");
    let mut count = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    stream.launch(
        &module.kernel::<count_positive_fixed>()?,
        config,
        (&data, &mut count),
    )?;
    ctx.synchronize()?;
    let got = count.to_vec(&stream)?[0];
    println!("   no race reported; counted {got}, expected {expected}");
    if got as usize != expected {
        return Err(format!("the fixed kernel counted {got}, expected {expected}").into());
    }
    Ok(())
}
