//! The kernel against a host reference, once per backend this machine has
//! (the CPU backend always, each CUDA GPU when there is one), with the
//! race sanitizer on: a race fails the test with its reports.

use vigil::Context;

#[vigil::test]
fn softplus_matches_the_host(ctx: &Context) -> vigil::Result<()> {
    let xs: Vec<f32> = (0..10_000).map(|i| (i as f32 - 5_000.0) / 50.0).collect();
    let ys = my_app::softplus(ctx, &xs)?;
    for (x, y) in xs.iter().zip(&ys) {
        let want = (*x as f64).exp().ln_1p();
        assert!(
            (*y as f64 - want).abs() <= 1e-6 * want.max(1.0),
            "softplus({x}) = {y}, want {want}"
        );
    }
    Ok(())
}

vigil::test_main!();
