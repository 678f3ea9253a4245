//! The run's time budget: the sanitized cells and the compute-sanitizer
//! columns share one wall-time budget. Each phase gets its weight's share
//! of what is left when it starts, so that time one phase leaves unused
//! goes to the later ones, and the last phase ends with the budget.

use std::time::{Duration, Instant};

/// A wall-time budget, from its creation.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    end: Instant,
}

impl Budget {
    /// A budget of `total` from now.
    pub fn new(total: Duration) -> Budget {
        Budget {
            end: Instant::now() + total,
        }
    }

    /// What is left of it.
    pub fn left(&self) -> Duration {
        self.end.saturating_duration_since(Instant::now())
    }

    /// The deadline of a phase of weight `weight` starting now, with
    /// phases of total weight `later` still to come.
    pub fn share(&self, weight: u32, later: u32) -> Instant {
        let fraction = f64::from(weight) / f64::from((weight + later).max(1));
        Instant::now() + self.left().mul_f64(fraction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_gets_its_weights_share_of_what_is_left() {
        let b = Budget::new(Duration::from_secs(100));
        let half = b.share(2, 2).saturating_duration_since(Instant::now());
        assert!(half <= Duration::from_secs(50) && half > Duration::from_secs(49));
        let last = b.share(1, 0).saturating_duration_since(Instant::now());
        assert!(
            last > Duration::from_secs(99),
            "the last phase gets the rest"
        );
        assert_eq!(
            Budget::new(Duration::ZERO)
                .share(1, 1)
                .saturating_duration_since(Instant::now()),
            Duration::ZERO
        );
    }
}
