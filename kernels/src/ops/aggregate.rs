//! The aggregate of a data-parallel round: the shards' end states averaged, and the
//! outer step that makes the average the next round's global state.
//!
//! # Contract
//!
//! A round has `n` shards; shard `i` trained on `samples_i` samples from the round's global
//! state `G` and ended at state `X_i` (every state in the graph's state order, the same
//! lengths). `⊗` is the contract multiplication and `div` rule 6's pinned division.
//!
//! - **Weights**, once per round, on the host: `N = Σ samples_i` (at most 2²⁴, so every
//!   count converts to `f32` exactly), `w_i = div(samples_i, N)` by samples, or
//!   `w_i = div(1, n)` uniform. Pinned values: every party and the referee derive the same
//!   bits, and a port must not re-derive them in a shader.
//! - **Average**, per element `e`: `A[e] = chunked_sum_i(w_i ⊗ X_i[e])`, the shards in
//!   index order (rule 4: 32-wide chunks from `+0`, folded from `+0`). No tree over the
//!   shards that depends on who computes it.
//! - **Outer step**: plain averaging takes `A` as the next global state, bit for bit.
//!   Nesterov momentum (DiLoCo's outer optimizer) treats `Δ = G − A` as the gradient of
//!   SGD with momentum μ, learning rate η and Nesterov's look-ahead, the optimizer's own
//!   per-element order ([`crate::ops::optim`]): `v ← μ ⊗ v + Δ`, `G ← G − η ⊗ (Δ + μ ⊗ v)`,
//!   with the momentum `v` part of the global state.
//!
//! Every output element depends on the same element of its inputs only, so a dispute
//! over an aggregate is narrowed to one 256-word chunk of the state tree
//! ([`crate::proof::state_tree`]), which [`aggregate_chunk`] recomputes from the same
//! chunk of each input: the zero padding of a tensor's last chunk stays zero through the
//! average and the outer step, so a chunk's recomputation equals the tensor's.

use alloc::vec::Vec;

use crate::arith::chunked_sum;
use crate::arith::math::div;
use crate::arith::mul;
use crate::error::{check_len, KernelError};
use crate::ops::optim::{sgd_momentum_step, SgdMomentum};

/// The most samples a round may weigh in all: every count, and their sum, converts to
/// `f32` exactly.
pub const MAX_ROUND_SAMPLES: u64 = 1 << 24;

/// How the shards of a round are weighed in the average.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weighting {
	/// Every shard alike.
	Uniform,
	/// Each shard by the samples it trained on.
	BySamples,
}

/// What makes the average the next global state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Outer {
	/// The average is the next global state.
	Average,
	/// SGD with Nesterov momentum over the pseudo-gradient `G − A`.
	Nesterov {
		/// The outer learning rate η (DiLoCo: 0.7).
		learning_rate: f32,
		/// The outer momentum μ (DiLoCo: 0.9).
		momentum: f32,
	},
}

impl Outer {
	/// Checks the hyper-parameters of the Nesterov step (a positive learning rate, a
	/// momentum in [0, 1)); plain averaging has none.
	pub fn check(&self) -> Result<(), KernelError> {
		self.optimizer().map(|_| ())
	}

	/// The optimizer the Nesterov step runs, checked and on the contract's grid; `None`
	/// for plain averaging.
	fn optimizer(&self) -> Result<Option<SgdMomentum>, KernelError> {
		match *self {
			Self::Average => Ok(None),
			Self::Nesterov { learning_rate, momentum } => {
				SgdMomentum { learning_rate, momentum, weight_decay: 0.0, nesterov: true }.validated().map(Some)
			},
		}
	}
}

/// The pinned weights of a round's shards, in shard order: `div(samples_i, Σ samples)`
/// by samples, `div(1, n)` uniform. Refuses no shards, a shard of no samples (it trained
/// nothing to weigh), and more than [`MAX_ROUND_SAMPLES`] in all.
pub fn weights(weighting: Weighting, samples: &[u64]) -> Result<Vec<f32>, KernelError> {
	if samples.is_empty() {
		return Err(KernelError::EmptyDimension { dimension: "shards" });
	}
	if samples.contains(&0) {
		return Err(KernelError::EmptyDimension { dimension: "samples" });
	}
	let total = samples.iter().try_fold(0u64, |sum, &count| sum.checked_add(count)).ok_or(KernelError::ShapeOverflow)?;
	if total > MAX_ROUND_SAMPLES {
		return Err(KernelError::ShapeOverflow);
	}
	Ok(match weighting {
		// Both counts are below 2²⁴ + 1: exact in f32.
		Weighting::BySamples => samples.iter().map(|&count| div(count as f32, total as f32)).collect(),
		Weighting::Uniform => {
			let each = div(1.0, samples.len() as f32);
			samples.iter().map(|_| each).collect()
		},
	})
}

/// The weighted average of `shards` (one tensor, or one chunk, of each shard's end
/// state) into `out`: `out[e] = chunked_sum_i(weights[i] ⊗ shards[i][e])`.
pub fn average(weights: &[f32], shards: &[&[f32]], out: &mut [f32]) -> Result<(), KernelError> {
	check_len("shards", shards.len(), weights.len())?;
	for shard in shards {
		check_len("shard", shard.len(), out.len())?;
	}
	for (element, value) in out.iter_mut().enumerate() {
		*value = chunked_sum(weights.iter().zip(shards).map(|(&weight, shard)| mul(weight, shard[element])));
	}
	Ok(())
}

/// The outer step: `global` becomes the next global state from the round's `average`;
/// `momentum` is the outer momentum (unused and unchanged by plain averaging).
pub fn outer_step(outer: &Outer, global: &mut [f32], average: &[f32], momentum: &mut [f32]) -> Result<(), KernelError> {
	check_len("average", average.len(), global.len())?;
	match outer.optimizer()? {
		None => global.copy_from_slice(average),
		Some(optimizer) => {
			let pseudo_gradient: Vec<f32> = global.iter().zip(average).map(|(&now, &mean)| now - mean).collect();
			sgd_momentum_step(&optimizer, global, &pseudo_gradient, momentum)?;
		},
	}
	Ok(())
}

/// A whole round's aggregate, as its solver computes it: every tensor of the shards' end
/// states (`shards`, each in the graph's state order) averaged by `weights`, then the
/// outer step from the round's `global` state and outer `momentum` (one tensor per
/// global tensor; empty for plain averaging, which has none). Returns the next global
/// state and the next momentum (empty for plain averaging). The same arithmetic, element
/// by element, as [`aggregate_chunk`], so any chunk of the result is what the referee
/// recomputes.
pub fn aggregate_state(
	outer: &Outer,
	weights: &[f32],
	shards: &[Vec<Vec<f32>>],
	global: &[Vec<f32>],
	momentum: &[Vec<f32>],
) -> Result<(Vec<Vec<f32>>, Vec<Vec<f32>>), KernelError> {
	let nesterov = outer.optimizer()?.is_some();
	check_len("momentum", momentum.len(), if nesterov { global.len() } else { 0 })?;
	for shard in shards {
		check_len("shard tensors", shard.len(), global.len())?;
	}
	let (mut next, mut next_momentum) = (Vec::with_capacity(global.len()), Vec::with_capacity(momentum.len()));
	for (tensor, start) in global.iter().enumerate() {
		let inputs: Vec<&[f32]> = shards.iter().filter_map(|shard| shard.get(tensor)).map(Vec::as_slice).collect();
		let tensor_momentum = momentum.get(tensor).map(Vec::as_slice).unwrap_or(&[]);
		let (state, velocity) = aggregate_chunk(outer, weights, &inputs, start, tensor_momentum)?;
		next.push(state);
		if nesterov {
			next_momentum.push(velocity);
		}
	}
	Ok((next, next_momentum))
}

/// One piece of a round's aggregate, as the referee recomputes it: from the same chunk
/// of each shard's end state (`shards`), of the global state the round started from
/// (`global`) and of the outer momentum (`momentum`, empty for plain averaging), the
/// chunk of the next global state and of the next momentum. Every word must be finite
/// (rule 7: no verdict may depend on a NaN's bits).
pub fn aggregate_chunk(
	outer: &Outer,
	weights: &[f32],
	shards: &[&[f32]],
	global: &[f32],
	momentum: &[f32],
) -> Result<(Vec<f32>, Vec<f32>), KernelError> {
	let finite = |operand: &'static str, values: &[f32]| match values.iter().all(|value| value.is_finite()) {
		true => Ok(()),
		false => Err(KernelError::NonFiniteInput { operand }),
	};
	for shard in shards {
		finite("shards", shard)?;
	}
	finite("global", global)?;
	finite("momentum", momentum)?;
	let mut next = global.to_vec();
	let mut mean = alloc::vec![0.0; global.len()];
	average(weights, shards, &mut mean)?;
	let mut next_momentum = momentum.to_vec();
	if matches!(outer, Outer::Average) {
		next_momentum.clear();
	} else {
		check_len("momentum", momentum.len(), global.len())?;
	}
	outer_step(outer, &mut next, &mean, &mut next_momentum)?;
	Ok((next, next_momentum))
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::arith::canonical_bits;

	fn bits(values: &[f32]) -> Vec<u32> {
		values.iter().map(|&value| canonical_bits(value)).collect()
	}

	/// A pseudo-random state of `len` values in [−1, 1).
	fn state(seed: u32, len: usize) -> Vec<f32> {
		let mut values = vec![0.0; len];
		crate::RandomStream::new(u64::from(seed), 7).fill_uniform(-1.0, 1.0, &mut values);
		values
	}

	/// Weights by samples are the pinned quotients, uniform ones one pinned reciprocal;
	/// bad rounds are refused with the reason.
	#[test]
	fn weights_are_pinned_quotients_and_bad_rounds_are_refused() {
		let by_samples = weights(Weighting::BySamples, &[100, 300]).unwrap();
		assert_eq!(by_samples, [div(100.0, 400.0), div(300.0, 400.0)]);
		assert!((by_samples[0] - 0.25).abs() < 1e-6 && (by_samples[1] - 0.75).abs() < 1e-6);
		let uniform = weights(Weighting::Uniform, &[5, 9, 1]).unwrap();
		assert!(uniform.iter().all(|&weight| weight == div(1.0, 3.0)));
		assert_eq!(weights(Weighting::Uniform, &[]), Err(KernelError::EmptyDimension { dimension: "shards" }));
		assert_eq!(weights(Weighting::BySamples, &[4, 0]), Err(KernelError::EmptyDimension { dimension: "samples" }));
		assert_eq!(weights(Weighting::BySamples, &[MAX_ROUND_SAMPLES, 1]), Err(KernelError::ShapeOverflow));
		assert_eq!(weights(Weighting::BySamples, &[u64::MAX, 2]), Err(KernelError::ShapeOverflow));
	}

	/// The average follows rule 4 over the shards in index order: with more than 32
	/// shards the chunks fold, and the result is within rounding of the exact mean.
	#[test]
	fn the_average_is_a_chunked_sum_over_the_shards_in_order() {
		let shards: Vec<Vec<f32>> = (0..40).map(|seed| state(seed, 300)).collect();
		let views: Vec<&[f32]> = shards.iter().map(Vec::as_slice).collect();
		let samples: Vec<u64> = (1..=40).collect();
		let weights = weights(Weighting::BySamples, &samples).unwrap();
		let mut out = vec![0.0; 300];
		average(&weights, &views, &mut out).unwrap();
		for (element, &value) in out.iter().enumerate() {
			let expected = chunked_sum(weights.iter().zip(&shards).map(|(&weight, shard)| mul(weight, shard[element])));
			assert_eq!(value.to_bits(), expected.to_bits());
			let exact: f64 = samples.iter().zip(&shards).map(|(&n, shard)| n as f64 * f64::from(shard[element])).sum::<f64>() / 820.0;
			assert!((f64::from(value) - exact).abs() < 1e-5, "element {element}: {value} against {exact}");
		}
		let short = [0.0f32; 299];
		let mut wrong = views.clone();
		wrong[3] = &short;
		assert!(matches!(average(&weights, &wrong, &mut out), Err(KernelError::LengthMismatch { operand: "shard", .. })));
	}

	/// Plain averaging hands the average on bit for bit; Nesterov's step is SGD's with
	/// the pseudo-gradient, and identical shards (a round that changed nothing) leave the
	/// global state and a zero momentum as they were.
	#[test]
	fn the_outer_step_is_the_average_or_nesterov_over_the_pseudo_gradient() {
		let (global, mean) = (state(1, 500), state(2, 500));
		let mut next = global.clone();
		let mut unused = vec![0.5; 3];
		outer_step(&Outer::Average, &mut next, &mean, &mut unused).unwrap();
		assert_eq!(bits(&next), bits(&mean));
		assert_eq!(unused, [0.5; 3]);

		let outer = Outer::Nesterov { learning_rate: 0.7, momentum: 0.9 };
		let (mut next, mut momentum) = (global.clone(), state(3, 500));
		let (mut expected, mut expected_momentum) = (global.clone(), momentum.clone());
		outer_step(&outer, &mut next, &mean, &mut momentum).unwrap();
		let pseudo: Vec<f32> = global.iter().zip(&mean).map(|(g, a)| g - a).collect();
		let sgd = SgdMomentum { learning_rate: 0.7, momentum: 0.9, weight_decay: 0.0, nesterov: true };
		sgd_momentum_step(&sgd, &mut expected, &pseudo, &mut expected_momentum).unwrap();
		assert_eq!((bits(&next), bits(&momentum)), (bits(&expected), bits(&expected_momentum)));

		let (mut still, mut zero) = (global.clone(), vec![0.0; 500]);
		outer_step(&outer, &mut still, &global, &mut zero).unwrap();
		assert_eq!((bits(&still), bits(&zero)), (bits(&global), vec![0; 500]));
		let bad = Outer::Nesterov { learning_rate: 0.7, momentum: 1.5 };
		assert!(matches!(outer_step(&bad, &mut still, &global, &mut zero), Err(KernelError::InvalidHyperparameter { .. })));
	}

	/// A chunk recomputed alone equals the same chunk of the whole tensors' aggregate,
	/// for a tensor's last, zero-padded chunk too; a non-finite word is refused.
	#[test]
	fn a_chunk_recomputed_alone_is_that_chunk_of_the_whole_aggregate() {
		use crate::proof::state_tree::{chunk_range, CHUNK_WORDS};
		let len = 3 * CHUNK_WORDS + 17;
		let shards: Vec<Vec<f32>> = (10..14).map(|seed| state(seed, len)).collect();
		let (global, momentum) = (state(20, len), state(21, len));
		let weights = weights(Weighting::BySamples, &[60, 20, 10, 10]).unwrap();
		let outer = Outer::Nesterov { learning_rate: 0.7, momentum: 0.9 };
		let views: Vec<&[f32]> = shards.iter().map(Vec::as_slice).collect();
		let (whole, whole_momentum) = aggregate_chunk(&outer, &weights, &views, &global, &momentum).unwrap();
		let padded = |values: &[f32], chunk: usize| {
			let mut words = values[chunk_range(len, chunk)].to_vec();
			words.resize(CHUNK_WORDS, 0.0);
			words
		};
		for chunk in 0..4 {
			let pieces: Vec<Vec<f32>> = shards.iter().map(|shard| padded(shard, chunk)).collect();
			let views: Vec<&[f32]> = pieces.iter().map(Vec::as_slice).collect();
			let (next, next_momentum) =
				aggregate_chunk(&outer, &weights, &views, &padded(&global, chunk), &padded(&momentum, chunk)).unwrap();
			assert_eq!(bits(&next), bits(&padded(&whole, chunk)), "chunk {chunk}");
			assert_eq!(bits(&next_momentum), bits(&padded(&whole_momentum, chunk)), "chunk {chunk}");
		}
		let (averaged, none) = aggregate_chunk(&Outer::Average, &weights, &views, &global, &[]).unwrap();
		assert!(none.is_empty());
		let mut mean = vec![0.0; len];
		average(&weights, &views, &mut mean).unwrap();
		assert_eq!(bits(&averaged), bits(&mean));
		let mut poisoned = shards[1].clone();
		poisoned[5] = f32::NAN;
		let views = [views[0], poisoned.as_slice(), views[2], views[3]];
		assert!(matches!(aggregate_chunk(&outer, &weights, &views, &global, &momentum), Err(KernelError::NonFiniteInput { operand: "shards" })));
	}
}
