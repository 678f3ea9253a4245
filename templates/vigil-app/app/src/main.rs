//! Runs the kernel once and prints what it computed. An error prints as a
//! sentence with its causes ([`vigil::ErrorReport`]).
fn main() -> Result<(), vigil::ErrorReport> {
    let ctx = vigil::Context::from_env()?;
    let xs: Vec<f32> = (-4..=4).map(|i| i as f32).collect();
    let ys = my_app::softplus(&ctx, &xs)?;
    println!("softplus on {}: {xs:?} -> {ys:?}", ctx.name());
    Ok(())
}
