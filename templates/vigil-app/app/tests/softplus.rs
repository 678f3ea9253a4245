//! The kernel against a host reference, on the GPU if there is one, else on
//! the CPU backend, with the race sanitizer on.

#[test]
fn softplus_matches_the_host_and_has_no_races() {
    let ctx = vigil::Context::builder()
        .sanitize(true)
        .build()
        .expect("context");
    let xs: Vec<f32> = (0..10_000).map(|i| (i as f32 - 5_000.0) / 50.0).collect();
    let ys = my_app::softplus(&ctx, &xs).expect("launch");
    for (x, y) in xs.iter().zip(&ys) {
        let want = (*x as f64).exp().ln_1p();
        assert!(
            (*y as f64 - want).abs() <= 1e-6 * want.max(1.0),
            "softplus({x}) = {y}, want {want}"
        );
    }
}
