use super::*;
use crate::ops::norm::Norm;
use crate::job::model::transformer::NormIndices;
use crate::job::text::sequence;
use crate::ops::residual::add_assign;
use alloc::vec;
use alloc::vec::Vec;

fn tiny(norm: Norm, tied_embeddings: bool) -> TransformerConfig {
	TransformerConfig { vocab: 7, context: 6, layers: 2, heads: 2, width: 8, mlp_ratio: 2, norm, tied_embeddings }
}

/// The initial parameters moved by uniform noise in `[−0.4, 0.4)`, so that attention is far
/// from uniform and every gain and bias matters.
fn perturbed(config: TransformerConfig, seed: u64) -> Vec<Vec<f32>> {
	let mut params = config.init(seed).unwrap();
	for (index, tensor) in params.iter_mut().enumerate() {
		let mut noise = vec![0.0f32; tensor.len()];
		RandomStream::new(seed, 99 + index as u64).fill_uniform(-0.4, 0.4, &mut noise);
		add_assign(tensor, &noise).unwrap();
	}
	params
}

/// AdamW with GPT's β (0.9, 0.99) and ε 10⁻⁸ at a constant `rate`, no clipping.
fn constant_rate(batch: usize, rate: f32, weight_decay: f32) -> TransformerTraining {
	TransformerTraining {
		batch,
		schedule: WarmupCosine { peak: rate, floor: rate, warmup_steps: 0, total_steps: 1 },
		beta1: 0.9,
		beta2: 0.99,
		epsilon: 1e-8,
		weight_decay,
		clip_norm: None,
	}
}

fn windows(config: TransformerConfig, sequences: usize, positions: usize, seed: u64) -> Vec<u32> {
	let stream = RandomStream::new(seed, 7);
	(0..sequences * (positions + 1)).map(|i| stream.word(i as u64) % config.vocab).collect()
}

/// A normalisation in f64 from its definition.
fn norm64(norm: Norm, x: &[f64], params: &[Vec<f64>], at: NormIndices) -> Vec<f64> {
	let n = x.len() as f64;
	let epsilon = f64::from(NORM_EPSILON);
	let gain = &params[at.gain];
	match norm {
		Norm::Layer => {
			let mean = x.iter().sum::<f64>() / n;
			let variance = x.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
			let r = 1.0 / (variance + epsilon).sqrt();
			let bias = &params[at.bias.unwrap()];
			x.iter().enumerate().map(|(j, x)| (x - mean) * r * gain[j] + bias[j]).collect()
		},
		Norm::Rms => {
			let r = 1.0 / (x.iter().map(|x| x * x).sum::<f64>() / n + epsilon).sqrt();
			x.iter().enumerate().map(|(j, x)| x * r * gain[j]).collect()
		},
	}
}

fn gelu64(x: f64) -> f64 {
	0.5 * x * (1.0 + ((2.0 / core::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}

/// The transformer of the module docs in f64, written from its maths alone: the loss the
/// operators' gradients must be the gradient of.
fn reference_loss(config: TransformerConfig, params: &[Vec<f64>], windows: &[u32], positions: usize) -> f64 {
	let (w, heads, vocab) = (config.width as usize, config.heads as usize, config.vocab as usize);
	let (d, hidden) = (w / heads, w * config.mlp_ratio as usize);
	let project = |x: &[f64], weight: usize, outputs: usize| -> Vec<f64> {
		(0..outputs).map(|o| params[weight + 1][o] + (0..x.len()).map(|i| x[i] * params[weight][i * outputs + o]).sum::<f64>()).collect()
	};
	let (mut total, mut rows) = (0.0, 0.0);
	for window in windows.chunks_exact(positions + 1) {
		let mut h: Vec<Vec<f64>> =
			(0..positions).map(|t| (0..w).map(|j| params[0][window[t] as usize * w + j] + params[1][t * w + j]).collect()).collect();
		for layer in 0..config.layers as usize {
			let block = config.block(layer);
			let a: Vec<Vec<f64>> = h.iter().map(|x| norm64(config.norm, x, params, block.attention_norm)).collect();
			let q: Vec<Vec<f64>> = a.iter().map(|x| project(x, block.query, w)).collect();
			let k: Vec<Vec<f64>> = a.iter().map(|x| project(x, block.key, w)).collect();
			let v: Vec<Vec<f64>> = a.iter().map(|x| project(x, block.value, w)).collect();
			let mut attended = vec![vec![0.0; w]; positions];
			for head in 0..heads {
				let at = |x: &Vec<f64>, e: usize| x[head * d + e];
				for i in 0..positions {
					let scores: Vec<f64> =
						(0..=i).map(|j| (0..d).map(|e| at(&q[i], e) * at(&k[j], e)).sum::<f64>() / (d as f64).sqrt()).collect();
					let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
					let sum: f64 = scores.iter().map(|s| (s - max).exp()).sum();
					for e in 0..d {
						attended[i][head * d + e] = (0..=i).map(|j| (scores[j] - max).exp() / sum * at(&v[j], e)).sum();
					}
				}
			}
			for t in 0..positions {
				let out = project(&attended[t], block.output, w);
				h[t].iter_mut().zip(out).for_each(|(h, o)| *h += o);
				let up = project(&norm64(config.norm, &h[t], params, block.mlp_norm), block.up, hidden);
				let down = project(&up.into_iter().map(gelu64).collect::<Vec<_>>(), block.down, w);
				h[t].iter_mut().zip(down).for_each(|(h, m)| *h += m);
			}
		}
		for t in 0..positions {
			let f = norm64(config.norm, &h[t], params, config.final_norm());
			let logits: Vec<f64> = (0..vocab)
				.map(|v| match config.head() {
					Some(head) => (0..w).map(|j| f[j] * params[head][j * vocab + v]).sum(),
					None => (0..w).map(|j| f[j] * params[0][v * w + j]).sum(),
				})
				.collect();
			let max = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
			let log_sum = max + logits.iter().map(|l| (l - max).exp()).sum::<f64>().ln();
			total += log_sum - logits[window[t + 1] as usize];
			rows += 1.0;
		}
	}
	total / rows
}

/// Every parameter's gradient, from the operators, against central differences of the f64
/// model: for LayerNorm with tied embeddings and RMSNorm with a head of its own, and a batch
/// shorter than the context (the unused positions' rows get no gradient). The contractions
/// round their operands to 12 bits, so each tensor matches to about a part in a thousand.
#[test]
fn the_operators_give_the_gradient_of_the_transformer() {
	for (config, positions) in [(tiny(Norm::Layer, true), 6), (tiny(Norm::Rms, false), 5)] {
		let params = perturbed(config, 3);
		let batch = windows(config, 2, positions, 4);
		let (loss, grads) = loss_and_gradients(config, &params, &batch, positions).unwrap();
		let mut wide: Vec<Vec<f64>> = params.iter().map(|t| t.iter().map(|&x| f64::from(x)).collect()).collect();
		let expected_loss = reference_loss(config, &wide, &batch, positions);
		assert!((f64::from(loss) - expected_loss).abs() < 2e-3 * expected_loss, "loss {loss} against {expected_loss}");
		for (index, analytic) in grads.iter().enumerate() {
			let (mut error, mut scale) = (0.0f64, 0.0f64);
			for element in 0..analytic.len() {
				let h = 1e-5;
				let original = wide[index][element];
				wide[index][element] = original + h;
				let up = reference_loss(config, &wide, &batch, positions);
				wide[index][element] = original - h;
				let down = reference_loss(config, &wide, &batch, positions);
				wide[index][element] = original;
				let expected = (up - down) / (2.0 * h);
				error += (f64::from(analytic[element]) - expected).powi(2);
				scale += expected * expected;
			}
			let (error, scale) = (error.sqrt(), scale.sqrt());
			// The key's bias adds `q·b_k` to every score of a row, which the softmax ignores:
			// its gradient is zero, and the operators' must be as good as zero.
			if (0..config.layers as usize).any(|layer| config.block(layer).key + 1 == index) {
				assert!(scale < 1e-8 && error < 1e-5, "{config:?}: the key bias's gradient {error} should vanish");
				continue;
			}
			assert!(scale > 1e-4, "{config:?}: tensor {index} has no gradient to check");
			assert!(error < 3e-3 * scale, "{config:?}: tensor {index}: error {error} against a gradient of norm {scale}");
		}
	}
}

/// The character model: 4 blocks of width 128 with 4 heads, context 64, over the
/// corpus's 84 bytes, tied: 812,288 parameters.
#[test]
fn the_character_model_has_its_parameter_count() {
	let config = TransformerConfig {
		vocab: 84,
		context: 64,
		layers: 4,
		heads: 4,
		width: 128,
		mlp_ratio: 4,
		norm: Norm::Layer,
		tied_embeddings: true,
	};
	assert_eq!(config.parameter_count(), 812_288);
	assert_eq!(config.tensors().iter().filter(|t| t.matrix).count(), 2 + 4 * 6);
	let untied = TransformerConfig { tied_embeddings: false, norm: Norm::Rms, ..config };
	assert_eq!(untied.parameter_count(), 812_288 + 84 * 128 - 9 * 128);
}

/// Out-of-bounds dimensions are refused by name.
#[test]
fn dimensions_outside_the_bounds_are_refused() {
	let base = tiny(Norm::Layer, true);
	let refused = |config: TransformerConfig, name: &'static str| {
		assert_eq!(config.validated(), Err(KernelError::InvalidHyperparameter { name }));
		assert_eq!(config.init(1), Err(KernelError::InvalidHyperparameter { name }));
	};
	refused(TransformerConfig { vocab: 1, ..base }, "vocab");
	refused(TransformerConfig { vocab: MAX_VOCAB + 1, ..base }, "vocab");
	refused(TransformerConfig { context: 0, ..base }, "context");
	refused(TransformerConfig { context: MAX_CONTEXT + 1, ..base }, "context");
	refused(TransformerConfig { layers: MAX_LAYERS + 1, ..base }, "layers");
	refused(TransformerConfig { width: MAX_WIDTH + 1, ..base }, "width");
	refused(TransformerConfig { heads: 3, ..base }, "heads");
	refused(TransformerConfig { heads: 9, ..base }, "heads");
	refused(TransformerConfig { width: 512, heads: 1, ..base }, "heads");
	refused(TransformerConfig { mlp_ratio: 0, ..base }, "mlp_ratio");
	assert_eq!(base.validated(), Ok(base));
	// A batch longer than the context, or not made of whole windows, is refused too.
	let params = base.init(1).unwrap();
	assert_eq!(mean_loss(base, &params, &windows(base, 1, 7, 1), 7), Err(KernelError::InvalidHyperparameter { name: "context" }));
	assert_eq!(
		mean_loss(base, &params, &windows(base, 1, 6, 1)[1..], 6),
		Err(KernelError::LengthMismatch { operand: "sequences", expected: 7, actual: 6 })
	);
	assert_eq!(mean_loss(base, &params[1..], &windows(base, 1, 6, 1), 6), Err(KernelError::LengthMismatch { operand: "params", expected: params.len(), actual: params.len() - 1 }));
}

/// Initialisation: matrices N(0, 0.02), gains 1, biases 0; a seed gives the same bits.
#[test]
fn initialisation_draws_matrices_and_sets_gains_and_biases() {
	let config = TransformerConfig { width: 64, heads: 4, vocab: 50, ..tiny(Norm::Layer, false) };
	let params = config.init(9).unwrap();
	assert_eq!(params, config.init(9).unwrap());
	assert_ne!(params, config.init(10).unwrap());
	let block = config.block(1);
	assert!(params[block.attention_norm.gain].iter().all(|&g| g == 1.0));
	assert!(params[block.attention_norm.bias.unwrap()].iter().chain(&params[block.up + 1]).all(|&b| b == 0.0));
	let head = &params[config.head().unwrap()];
	let deviation = (head.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>() / head.len() as f64).sqrt();
	assert!((deviation - 0.02).abs() < 0.002, "deviation {deviation}");
}

/// Steps are bit-for-bit repeatable, decay only the matrices, and fit one batch.
#[test]
fn steps_repeat_bit_for_bit_and_fit_a_batch() {
	let config = tiny(Norm::Layer, true);
	let training = TransformerTraining {
		schedule: WarmupCosine { peak: 0.02, floor: 0.002, warmup_steps: 5, total_steps: 40 },
		clip_norm: Some(1.0),
		..constant_rate(3, 0.02, 0.1)
	};
	let batch = windows(config, 3, 6, 5);
	let run = || {
		let mut state = TransformerState::new(config, 11).unwrap();
		let reports: Vec<StepReport> = (0..40).map(|_| state.step(config, &training, &batch).unwrap()).collect();
		(state, reports)
	};
	let (state, reports) = run();
	assert_eq!(state, run().0);
	assert_eq!(state.steps, 40);
	assert_eq!(reports[0].learning_rate, training.schedule.rate(0));
	assert!(reports[39].loss < 0.5 * reports[0].loss, "loss {} then {}", reports[0].loss, reports[39].loss);
	// With no gradient (a zero rate), a step changes only what weight decay touches: none.
	let mut still = TransformerState::new(config, 11).unwrap();
	let frozen = TransformerTraining { clip_norm: Some(1.0), ..constant_rate(3, 0.0, 0.1) };
	still.step(config, &frozen, &batch).unwrap();
	assert_eq!(still.params, config.init(11).unwrap());
	// A step on other than its batch's windows is refused and changes nothing.
	let mut refused = TransformerState::new(config, 11).unwrap();
	let error = refused.step(config, &training, &windows(config, 2, 6, 5));
	assert_eq!(error, Err(KernelError::LengthMismatch { operand: "windows", expected: 21, actual: 14 }));
	assert_eq!(refused, TransformerState::new(config, 11).unwrap());
}

/// Weight decay shrinks matrices and leaves gains and biases alone.
#[test]
fn weight_decay_touches_matrices_only() {
	let config = tiny(Norm::Rms, false);
	let batch = windows(config, 1, 6, 6);
	let training = |weight_decay| constant_rate(1, 0.01, weight_decay);
	let mut plain = TransformerState::new(config, 2).unwrap();
	let mut decayed = plain.clone();
	plain.step(config, &training(0.0), &batch).unwrap();
	decayed.step(config, &training(0.5), &batch).unwrap();
	for (index, spec) in config.tensors().iter().enumerate() {
		assert_eq!(plain.params[index] != decayed.params[index], spec.matrix, "tensor {index}");
	}
}

/// The batch of a step is its sequences in the epoch order, each a window of the stream.
#[test]
fn a_batch_is_windows_of_the_stream_in_epoch_order() {
	let stream: Vec<u32> = (0..1000).map(|i| i % 13).collect();
	let drawn = batch_windows(&stream, 16, 4, 8, 3).unwrap();
	let indices = batch_indices(0..sequence_count(1000, 16), 4, 8, 3).unwrap();
	for (window, index) in drawn.chunks_exact(17).zip(indices) {
		assert_eq!(window, sequence(&stream, 16, index as usize).unwrap());
	}
	assert_eq!(drawn.len(), 4 * 17);
}

/// Generation repeats for a seed, stays in the vocabulary, and a fitted model continues its
/// one sequence greedily.
#[test]
fn generation_repeats_and_continues_what_it_learned() {
	let config = TransformerConfig { vocab: 5, context: 8, ..tiny(Norm::Layer, true) };
	let pattern: Vec<u32> = (0..9).map(|i| i % 5).collect();
	let training = constant_rate(1, 0.03, 0.0);
	let mut state = TransformerState::new(config, 4).unwrap();
	for _ in 0..150 {
		state.step(config, &training, &pattern).unwrap();
	}
	assert_eq!(generate(config, &state.params, &[0, 1, 2], 5, true, 1).unwrap(), vec![3, 4, 0, 1, 2]);
	let sampled = generate(config, &state.params, &[0], 20, false, 1).unwrap();
	assert_eq!(sampled, generate(config, &state.params, &[0], 20, false, 1).unwrap());
	assert!(sampled.iter().all(|&token| token < 5));
	assert_eq!(generate(config, &state.params, &[], 1, true, 1), Err(KernelError::EmptyDimension { dimension: "prompt" }));
}

/// A transformer job's trainer, on a token stream, runs the same steps as the state's own
/// `step` on the windows `batch_windows` draws, at the rates the job's schedule derives:
/// the same losses and the same state, bit for bit. A stream the job cannot commit (not
/// cut to whole windows, another vocabulary, fewer windows than a batch) is refused.
#[test]
fn a_transformer_job_trains_its_token_stream_as_the_state_does() {
	use crate::job::model::{ModelConfig, OptimizerConfig, TrainConfig};
	use crate::job::text::TokenStream;
	use crate::job::trace::Trainer;
	let config = tiny(Norm::Rms, false);
	let source = RandomStream::new(3, 11);
	let tokens: Vec<u32> = (0..200).map(|i| source.word(i) % config.vocab).collect();
	let stream = TokenStream { tokens, vocab: config.vocab }.cut_to_windows(config.context as usize);
	assert_eq!(stream.tokens.len(), 33 * 6 + 1);
	let train = TrainConfig {
		steps: 100,
		batch_size: 4,
		learning_rate: 2_000_000,
		optimizer: OptimizerConfig::AdamW { beta1: 900_000_000, beta2: 950_000_000, epsilon: 10, weight_decay: 100_000_000 },
		grad_clip_norm: Some(500_000_000),
		seed: 9,
		checkpoint_interval: 10,
	};
	let model = ModelConfig::Transformer(config);
	let training = train.transformer_training().unwrap();
	assert_eq!(training.schedule, WarmupCosine { peak: 2e-3, floor: 2e-4, warmup_steps: 2, total_steps: 100 });
	let mut trainer = Trainer::new(CpuBackend, &model, &train, stream.clone()).unwrap();
	let mut state = TransformerState::new(config, train.seed).unwrap();
	for step in 0..4 {
		let windows = batch_windows(&stream.tokens, config.context as usize, 4, train.seed, step).unwrap();
		let report = state.step(config, &training, &windows).unwrap();
		assert_eq!(trainer.step().unwrap().loss.to_bits(), report.loss.to_bits(), "step {step}");
	}
	let expected: Vec<Vec<f32>> = state.params.iter().chain(&state.first_moments).chain(&state.second_moments).cloned().collect();
	assert_eq!(trainer.state().unwrap(), expected);

	let refused = |stream: TokenStream| Trainer::new(CpuBackend, &model, &train, stream).err();
	let dataset = Some(KernelError::InvalidHyperparameter { name: "dataset" });
	let mut uncut = stream.clone();
	uncut.tokens.push(0);
	assert_eq!(refused(uncut), dataset);
	assert_eq!(refused(TokenStream { vocab: 8, ..stream.clone() }), dataset);
	let three_windows = TokenStream { tokens: stream.tokens[..24].to_vec(), vocab: config.vocab }.cut_to_windows(6);
	assert_eq!(three_windows.tokens.len(), 19);
	assert_eq!(refused(three_windows), dataset);
	// Only AdamW trains a transformer.
	let sgd = TrainConfig { optimizer: OptimizerConfig::Sgd { momentum: 0 }, ..train };
	assert!(Trainer::new(CpuBackend, &model, &sgd, stream).is_err());
}
