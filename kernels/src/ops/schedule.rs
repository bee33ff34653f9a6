//! Learning-rate schedules: a linear warm-up, then a cosine decay to a floor, with every
//! step's rate a pinned function of the step, so the chain can derive it as any party does.
//!
//! # Contract
//!
//! For step `s` (counted from 0), peak rate `η`, floor `η_min`, `W` warm-up steps and `T`
//! steps in all (`W ≤ T ≤ 2²⁴`, so every count converts to `f32` exactly), with `div` the
//! pinned division, `⊗` the contract multiplication and `sin_cos_turns` the pinned
//! sine and cosine of a fraction of a turn ([`crate::arith::math`]):
//!
//! - warm-up, `s < W`: `η_s = η ⊗ div(s + 1, W)`, rising to `η` at its last step;
//! - decay, `W ≤ s < T`: `p = div(s − W, T − W)`, `c = cos(π p)`, the cosine of
//!   `sin_cos_turns(p ⊗ 0.5)`, and `η_s = η_min + ((η − η_min) ⊗ 0.5) ⊗ (1 + c)`;
//! - after, `s ≥ T`: `η_min`.
//!
//! A constant rate is `W = 0` and `η_min = η`.

use crate::arith::math::{div, sin_cos_turns};
use crate::arith::mul;
use crate::error::KernelError;

/// The most steps a schedule counts: every count converts to `f32` exactly.
pub const MAX_SCHEDULE_STEPS: u32 = 1 << 24;

/// A linear warm-up followed by a cosine decay.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WarmupCosine {
	/// The rate at the end of the warm-up, `η`.
	pub peak: f32,
	/// The rate the decay ends at, `η_min` (at most `peak`).
	pub floor: f32,
	/// Warm-up steps, `W`.
	pub warmup_steps: u32,
	/// Steps of the whole schedule, `T` (warm-up included).
	pub total_steps: u32,
}

impl WarmupCosine {
	/// The schedule if its rates and counts are within the contract: finite rates with
	/// `0 ≤ floor ≤ peak`, at least one step, no more warm-up than steps, and at most
	/// [`MAX_SCHEDULE_STEPS`].
	pub fn validated(self) -> Result<Self, KernelError> {
		if !(self.peak.is_finite() && self.floor.is_finite() && self.floor >= 0.0 && self.floor <= self.peak) {
			return Err(KernelError::InvalidHyperparameter { name: "learning_rate" });
		}
		if self.total_steps == 0 || self.total_steps > MAX_SCHEDULE_STEPS || self.warmup_steps > self.total_steps {
			return Err(KernelError::InvalidHyperparameter { name: "steps" });
		}
		Ok(self)
	}

	/// The rate of step `step` (the module's contract). The schedule must be
	/// [`Self::validated`]: outside its domain the value is deterministic but meaningless.
	pub fn rate(&self, step: u32) -> f32 {
		if step < self.warmup_steps {
			return mul(self.peak, div((step + 1) as f32, self.warmup_steps as f32));
		}
		if step >= self.total_steps {
			return self.floor;
		}
		let progress = div((step - self.warmup_steps) as f32, (self.total_steps - self.warmup_steps) as f32);
		let (_, cosine) = sin_cos_turns(mul(progress, 0.5));
		self.floor + mul(mul(self.peak - self.floor, 0.5), 1.0 + cosine)
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	/// Every step's rate is near the exact schedule, rises through the warm-up and falls
	/// through the decay, reaches the peak at the warm-up's end and the floor after the
	/// last step.
	#[test]
	fn rates_follow_the_warmup_and_the_cosine() {
		let schedule = WarmupCosine { peak: 3e-3, floor: 3e-4, warmup_steps: 100, total_steps: 2_000 }.validated().unwrap();
		let exact = |step: u32| -> f64 {
			let (peak, floor) = (f64::from(schedule.peak), f64::from(schedule.floor));
			if step < 100 {
				peak * f64::from(step + 1) / 100.0
			} else if step >= 2_000 {
				floor
			} else {
				let progress = f64::from(step - 100) / 1_900.0;
				floor + (peak - floor) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
			}
		};
		let rates: alloc::vec::Vec<f32> = (0..2_100).map(|step| schedule.rate(step)).collect();
		for (step, &rate) in rates.iter().enumerate() {
			let expected = exact(step as u32);
			assert!((f64::from(rate) - expected).abs() <= 1e-6 * expected + 1e-9, "step {step}: {rate} against {expected}");
		}
		assert!(rates[..100].windows(2).all(|pair| pair[0] < pair[1]), "the warm-up rises");
		// Falls, within the pinned cosine's error where consecutive steps differ by less.
		assert!(rates[100..2_000].windows(2).all(|pair| pair[0] >= pair[1] - 1e-9), "the decay falls");
		assert!((rates[99] - schedule.peak).abs() <= 1e-9 && (rates[100] - schedule.peak).abs() <= 1e-9);
		assert!(rates[2_000..].iter().all(|&rate| rate == schedule.floor));
	}

	/// A constant rate is no warm-up and a floor at the peak; bad schedules are refused.
	#[test]
	fn a_constant_rate_and_bad_schedules() {
		let constant = WarmupCosine { peak: 0.1, floor: 0.1, warmup_steps: 0, total_steps: 50 }.validated().unwrap();
		assert!((0..60).all(|step| constant.rate(step) == 0.1));
		let good = WarmupCosine { peak: 0.1, floor: 0.0, warmup_steps: 10, total_steps: 50 };
		let rate = Err(KernelError::InvalidHyperparameter { name: "learning_rate" });
		let steps = Err(KernelError::InvalidHyperparameter { name: "steps" });
		assert_eq!(WarmupCosine { floor: 0.2, ..good }.validated(), rate);
		assert_eq!(WarmupCosine { floor: -0.1, ..good }.validated(), rate);
		assert_eq!(WarmupCosine { peak: f32::NAN, ..good }.validated(), rate);
		assert_eq!(WarmupCosine { total_steps: 0, warmup_steps: 0, ..good }.validated(), steps);
		assert_eq!(WarmupCosine { warmup_steps: 51, ..good }.validated(), steps);
		assert_eq!(WarmupCosine { total_steps: MAX_SCHEDULE_STEPS + 1, ..good }.validated(), steps);
	}
}
