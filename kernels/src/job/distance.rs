//! Tolerance mode: how far a claimed training state is from the reference's.
//!
//! A job trained on a backend that is not bit-exact (the `tch` fast path) is
//! not verified by comparing hashes. A verifier re-executes a segment of `k`
//! steps on the CPU reference, from a state the worker committed, and compares
//! the parameters it reaches with the ones the worker committed after the
//! segment, by the [`Distance`] below (Proof-of-Learning's L2, L∞ and cosine),
//! against the job's thresholds. Everything here needs only the reference:
//! no libtorch, no GPU.
//!
//! Requires `std` for `f64::sqrt`. The distance is not part of any hash, so
//! `std`'s correctly rounded square root is fine here.

use core::fmt;

use crate::exec::cpu::CpuBackend;
use crate::job::data::Dataset;
use crate::error::{check_len, KernelError};
use crate::job::model::{ModelConfig, TrainConfig};
use crate::job::trace::Trainer;
use crate::proof::chain::ChainPoint;

/// How far one state is from another: the figures tolerance mode compares
/// against a job's thresholds (Proof-of-Learning's L2, L∞ and cosine).
///
/// Computed in `f64` over the concatenation of the tensors, in order.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Distance {
	/// ‖a − b‖₂.
	pub l2: f64,
	/// max |aᵢ − bᵢ|.
	pub linf: f64,
	/// 1 − a·b / (‖a‖₂ ‖b‖₂); 0 when both are zero, 1 when only one is.
	pub cosine: f64,
}

impl Distance {
	/// The distance between `actual` and `reference`, tensor by tensor in order.
	///
	/// Fails with `LengthMismatch` when the two states are not shaped alike.
	pub fn between(actual: &[Vec<f32>], reference: &[Vec<f32>]) -> Result<Self, KernelError> {
		check_len("tensors", actual.len(), reference.len())?;
		let (mut squared, mut linf, mut dot, mut norm_a, mut norm_b) = (0.0f64, 0.0f64, 0.0f64, 0.0f64, 0.0f64);
		for (a, b) in actual.iter().zip(reference) {
			check_len("tensor", a.len(), b.len())?;
			for (&x, &y) in a.iter().zip(b) {
				let (x, y) = (f64::from(x), f64::from(y));
				squared += (x - y) * (x - y);
				linf = linf.max((x - y).abs());
				dot += x * y;
				norm_a += x * x;
				norm_b += y * y;
			}
		}
		let cosine = match (norm_a > 0.0, norm_b > 0.0) {
			(true, true) => 1.0 - dot / (norm_a.sqrt() * norm_b.sqrt()),
			(false, false) => 0.0,
			_ => 1.0,
		};
		Ok(Self { l2: squared.sqrt(), linf, cosine })
	}

	/// Whether every component is at most `bound`'s.
	pub fn within(&self, bound: &Distance) -> bool {
		self.l2 <= bound.l2 && self.linf <= bound.linf && self.cosine <= bound.cosine
	}
}

impl fmt::Display for Distance {
	fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
		write!(f, "L2 {:.3e}, L∞ {:.3e}, cosine {:.3e}", self.l2, self.linf, self.cosine)
	}
}

/// The verifier's side of tolerance mode: re-executes `steps` steps of a job
/// on the CPU reference from `state` (parameters then optimizer moments, as
/// [`Trainer::state`] returns them) at global step `first_step`, with the
/// job's own batches, and returns the [`Distance`] from `claimed` (the
/// parameters the worker committed after the segment) to the reference's.
pub fn reference_distance(
	model: &ModelConfig,
	train: &TrainConfig,
	data: &Dataset,
	state: &[Vec<f32>],
	first_step: u32,
	steps: u32,
	claimed: &[Vec<f32>],
) -> Result<Distance, KernelError> {
	// Only the parameters are compared here, not the records.
	let point = ChainPoint::start(first_step);
	let mut reference = Trainer::resume(CpuBackend, model, train, data.clone(), state.to_vec(), point)?;
	for _ in 0..steps {
		reference.step()?;
	}
	Distance::between(claimed, &reference.params()?)
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::ops::activation::Activation;
	use crate::job::model::OptimizerConfig;

	#[test]
	fn distance_is_l2_linf_and_cosine_over_the_whole_state() {
		let a = vec![vec![3.0, 0.0], vec![4.0]];
		let b = vec![vec![0.0, 0.0], vec![4.0]];
		let distance = Distance::between(&a, &b).unwrap();
		assert_eq!((distance.l2, distance.linf), (3.0, 3.0));
		assert!((distance.cosine - (1.0 - 16.0 / 20.0)).abs() < 1e-12);
		assert_eq!(Distance::between(&a, &a).unwrap(), Distance::default());
		assert_eq!(Distance::between(&[vec![0.0]], &[vec![1.0]]).unwrap().cosine, 1.0);
		assert!(Distance::between(&a, &b[..1]).is_err());
		assert!(Distance::between(&a, &[vec![3.0], vec![4.0]]).is_err());
	}

	#[test]
	fn the_reference_is_at_distance_zero_from_itself_and_not_from_a_tampered_claim() {
		let model = ModelConfig::Mlp { inputs: 8, hidden: vec![6], classes: 3, activation: Activation::Relu };
		let train = TrainConfig {
			steps: 20,
			batch_size: 4,
			learning_rate: 100_000_000,
			optimizer: OptimizerConfig::Sgd { momentum: 900_000_000 },
			grad_clip_norm: None,
			seed: 5,
			checkpoint_interval: 10,
		};
		let data = crate::job::data::synthetic(3, 40, 8, 3);
		let mut worker = Trainer::new(CpuBackend, &model, &train, data.clone()).unwrap();
		for _ in 0..3 {
			worker.step().unwrap();
		}
		let committed = worker.state().unwrap();
		for _ in 0..5 {
			worker.step().unwrap();
		}
		let mut claimed = worker.params().unwrap();
		let honest = reference_distance(&model, &train, &data, &committed, 3, 5, &claimed).unwrap();
		assert_eq!(honest, Distance::default());
		let original = claimed[0][0];
		claimed[0][0] += 0.5;
		let tampered = reference_distance(&model, &train, &data, &committed, 3, 5, &claimed).unwrap();
		// 0.5, up to the rounding of the sum.
		assert_eq!(tampered.linf, (f64::from(claimed[0][0]) - f64::from(original)).abs());
		assert!((tampered.linf - 0.5).abs() < 1e-6);
		assert!(!tampered.within(&Distance { l2: 0.1, linf: 0.1, cosine: 1e-3 }));
	}
}
