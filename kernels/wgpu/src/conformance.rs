//! The adapter conformance self-test: does this driver reproduce the CPU reference?
//!
//! The contract is designed so that FMA contraction, subnormal flushing and
//! reduction order cannot change a bit, but each of those guarantees leans on
//! the driver compiling integer masks and plain `f32` operations faithfully.
//! [`WgpuBackend::new`](crate::WgpuBackend::new) therefore runs this test on
//! every adapter before trusting it, and refuses any that differs anywhere.
//!
//! Two parts, both compared bit for bit with the reference:
//!
//! - [`probe_mismatches`]: the pinned functions (`recip`, `rsqrt`, `sqrt`,
//!   `log`, `exp`, `tanh`) over the inputs of `tests/contract_vectors.rs`, and
//!   65,536 cancellation-heavy triples `mul(a, b) + c` with `c = −mul(a, b)`:
//!   unfused, each is exactly zero; fused into an FMA, each is the product's
//!   rounding error, non-zero whenever the product is inexact. The triples also
//!   cover products near and below 2⁻¹⁰³ and 2⁻¹²⁶, which a flushing device
//!   treats differently unless the contract's mask erases them, and the bare
//!   product of quantized operands that the contraction loop uses.
//! - [`operator_mismatches`]: every [`Backend`] operator on the contract
//!   vectors' shapes (odd sizes, none a multiple of a tile), generic over the
//!   backend so any future backend can be checked the same way.
//! - [`state_root_mismatches`]: the state root hashed on the device (BLAKE3
//!   over 1 KiB chunks) over tensors that end before, on and after a chunk's
//!   end, an empty one and negative zeros among them, against the reference's
//!   root.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use crate::{WgpuBackend, WgpuError};
use touchstone_kernels::ops::activation::Activation;
use touchstone_kernels::ops::attention::CausalShape;
use touchstone_kernels::ops::norm::{Norm, NormShape};
use touchstone_kernels::ops::heads::HeadsShape;
use touchstone_kernels::exec::backend::Backend;
use touchstone_kernels::ops::bias::BiasLayout;
use touchstone_kernels::arith::{canonicalize, mul, quantize_operand};
use touchstone_kernels::ops::contraction::Contraction;
use touchstone_kernels::exec::cpu::CpuBackend;
use touchstone_kernels::proof::hash::digest_f32;
use touchstone_kernels::ops::loss::ClassifierShape;
use touchstone_kernels::arith::math;
use touchstone_kernels::ops::contraction::{MatmulLayout, MatmulShape};
use touchstone_kernels::ops::optim::{AdamW, SgdMomentum};
use touchstone_kernels::arith::rng::RandomStream;
use touchstone_kernels::error::KernelError;

/// One refused adapter and what it got wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
	/// The adapter, as [`WgpuBackend::adapter_description`] names it.
	pub adapter: String,
	/// One line per differing output: its name, how many elements differ, and the first.
	pub failures: Vec<String>,
}

impl fmt::Display for Report {
	fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
		write!(f, "{}: {}", self.adapter, self.failures.join("; "))
	}
}

/// Runs both parts of the test on `backend`; returns the failures (empty: conformant).
pub fn self_test(backend: &mut WgpuBackend) -> Result<Vec<String>, WgpuError> {
	let mut failures = probe_mismatches(backend)?;
	failures.extend(operator_mismatches(backend)?);
	failures.extend(state_root_mismatches(backend)?);
	Ok(failures)
}

/// `len` canonical values uniform in `[low, high)` from Philox stream `stream`
/// of seed 7: the inputs `tests/contract_vectors.rs` uses.
pub fn random_values(stream: u64, len: usize, low: f32, high: f32) -> Vec<f32> {
	let mut values = vec![0.0; len];
	RandomStream::new(7, stream).fill_uniform(low, high, &mut values);
	canonicalize(&mut values);
	values
}

/// `n + 1` evenly spaced points from `low` to `high`, computed in f64 and rounded once.
fn sweep(low: f64, high: f64, n: u32) -> Vec<f32> {
	(0..=n).map(|i| (low + (high - low) * f64::from(i) / f64::from(n)) as f32).collect()
}

/// Describes how `actual` differs from `expected`, or `None` when every bit agrees.
///
/// Bits are compared as the hashes see them ([`digest_f32`]: `−0` is `+0`).
pub fn difference(name: &str, actual: &[f32], expected: &[f32]) -> Option<String> {
	if actual.len() == expected.len() && digest_f32(actual) == digest_f32(expected) {
		return None;
	}
	if actual.len() != expected.len() {
		return Some(format!("{name}: {} elements, expected {}", actual.len(), expected.len()));
	}
	let differing: Vec<usize> =
		(0..actual.len()).filter(|&i| digest_f32(&actual[i..=i]) != digest_f32(&expected[i..=i])).collect();
	let first = differing[0];
	Some(format!(
		"{name}: {} of {} elements differ, first [{first}] = {:#010x}, reference {:#010x}",
		differing.len(),
		actual.len(),
		actual[first].to_bits(),
		expected[first].to_bits()
	))
}

/// The cancellation-heavy triples `(a, b, c)`: `c = −mul(a, b)` at ordinary
/// magnitudes, at magnitudes whose products straddle 2⁻¹⁰³, and at magnitudes
/// whose products are subnormal.
fn cancellation_triples() -> (Vec<f32>, Vec<f32>, Vec<f32>) {
	const COUNT: usize = 65_536;
	let mut a = random_values(900, COUNT, -4.0, 4.0);
	let mut b = random_values(901, COUNT, -4.0, 4.0);
	let power_of_two = |exponent: i32| f32::from_bits(((127 + exponent) as u32) << 23);
	for (index, (x, y)) in a.iter_mut().zip(b.iter_mut()).enumerate() {
		// One triple in sixteen has a product near 2^-103, one a subnormal product.
		let (x_scale, y_scale) = match index % 16 {
			7 => (-51, -52),
			15 => (-70, -60),
			_ => (0, 0),
		};
		*x = mul(*x, power_of_two(x_scale));
		*y = mul(*y, power_of_two(y_scale));
	}
	let c = a.iter().zip(&b).map(|(&x, &y)| -mul(x, y)).collect();
	(a, b, c)
}

/// Evaluates the probe functions on `backend` and on the CPU; returns mismatches.
pub fn probe_mismatches(backend: &mut WgpuBackend) -> Result<Vec<String>, WgpuError> {
	let positive: Vec<f32> = (0..=20_000u32).map(|i| f32::from_bits(0x2180_0000 + i * 50_331)).collect();
	let mut failures = Vec::new();
	/// A pinned function: its name, its probe number, its inputs, the reference.
	type Unary = (&'static str, u32, Vec<f32>, fn(f32) -> f32);
	let unary: [Unary; 6] = [
		("recip", 0, positive.clone(), math::recip),
		("rsqrt", 1, positive.clone(), math::rsqrt),
		("sqrt", 2, positive.clone(), math::sqrt),
		("log", 3, positive, math::log),
		("exp", 4, sweep(-90.0, 90.0, 20_000), math::exp),
		("tanh", 5, sweep(-12.0, 12.0, 20_000), math::tanh),
	];
	for (name, function, inputs, reference) in unary {
		let zeros = vec![0.0; inputs.len()];
		let actual = backend.probe(function, &inputs, &zeros, &zeros)?;
		let expected: Vec<f32> = inputs.iter().map(|&x| reference(x)).collect();
		failures.extend(difference(name, &actual, &expected));
	}
	let (a, b, c) = cancellation_triples();
	let actual = backend.probe(6, &a, &b, &c)?;
	let expected: Vec<f32> = a.iter().zip(&b).zip(&c).map(|((&x, &y), &z)| mul(x, y) + z).collect();
	failures.extend(difference("mul(a, b) + c (FMA contraction, flush)", &actual, &expected));
	let actual = backend.probe(7, &a, &b, &c)?;
	let expected: Vec<f32> =
		a.iter().zip(&b).zip(&c).map(|((&x, &y), &z)| quantize_operand(x) * quantize_operand(y) + z).collect();
	failures.extend(difference("q(a)·q(b) + c (exact products)", &actual, &expected));
	Ok(failures)
}

/// Runs every operator of [`Backend`] on fixed inputs and returns the outputs by name.
///
/// The shapes are those of `tests/contract_vectors.rs`: matmul 37×70×45 in all
/// four layouts with both gradients, a 3×4×11×9 convolution with a 3×4 kernel
/// and 6 output channels in all three passes, bias add and gradient, the three
/// activations forward and backward, softmax cross-entropy over 40×10, three
/// SGD and AdamW steps, clipping that scales and clipping that does not, a row
/// gather, LayerNorm and RMSNorm forward and backward over 37×45, the causal softmax
/// and its backward over 3 blocks of 37 positions, the heads' split and merge, three
/// batched `QKᵀ` blocks, the embedding's scatter-add and the residual sum.
pub fn operator_outputs<B: Backend>(backend: &mut B) -> Result<Vec<(String, Vec<f32>)>, B::Error> {
	let mut outputs = Vec::new();
	let shape = touchstone_kernels::ops::contraction::VECTOR_MATMUL;
	let MatmulShape { m, k, n } = shape;
	let a = random_values(1, m * k, -2.0, 2.0);
	let b = random_values(2, k * n, -2.0, 2.0);
	let g = random_values(3, m * n, -1.0, 1.0);
	let (at, bt, gt) = (backend.upload(&a)?, backend.upload(&b)?, backend.upload(&g)?);
	for (lhs_transposed, rhs_transposed) in [(false, false), (true, false), (false, true), (true, true)] {
		let layout = MatmulLayout { lhs_transposed, rhs_transposed };
		let mut out = backend.zeros(m * n)?;
		backend.matmul(shape, layout, &at, &bt, &mut out)?;
		outputs.push((format!("matmul {layout:?}"), backend.download(&out)?));
	}
	let mut da = backend.zeros(m * k)?;
	backend.contract(shape.lhs_grad_contraction(), &gt, &bt, &mut da)?;
	outputs.push(("matmul_lhs_grad".into(), backend.download(&da)?));
	let mut db = backend.zeros(k * n)?;
	backend.contract(shape.rhs_grad_contraction(), &at, &gt, &mut db)?;
	outputs.push(("matmul_rhs_grad".into(), backend.download(&db)?));

	let conv = touchstone_kernels::ops::contraction::VECTOR_CONV;
	let (input_len, weight_len, output_len) = (conv.input_len()?, conv.weight_len()?, conv.output_len()?);
	let x = backend.upload(&random_values(4, input_len, -1.0, 1.0))?;
	let w = backend.upload(&random_values(5, weight_len, -1.0, 1.0))?;
	let dy_values = random_values(6, output_len, -1.0, 1.0);
	let dy = backend.upload(&dy_values)?;
	for (name, contraction, lhs, rhs, len) in [
		("conv2d", Contraction::Conv2d(conv), &x, &w, output_len),
		("conv2d_input_grad", Contraction::Conv2dInputGrad(conv), &dy, &w, input_len),
		("conv2d_weight_grad", Contraction::Conv2dWeightGrad(conv), &dy, &x, weight_len),
	] {
		let mut out = backend.zeros(len)?;
		backend.contract(contraction, lhs, rhs, &mut out)?;
		outputs.push((name.into(), backend.download(&out)?));
	}
	let layout = BiasLayout::channels_first(3, 6, conv.out_height() * conv.out_width());
	let bias = backend.upload(&random_values(7, 6, -1.0, 1.0))?;
	let mut biased = backend.upload(&dy_values)?;
	backend.bias_add(layout, &mut biased, &bias)?;
	outputs.push(("bias_add".into(), backend.download(&biased)?));
	let mut dbias = backend.zeros(6)?;
	backend.bias_grad(layout, &dy, &mut dbias)?;
	outputs.push(("bias_grad".into(), backend.download(&dbias)?));

	let activation_input = sweep(-8.0, 8.0, 5000);
	let len = activation_input.len();
	let input = backend.upload(&activation_input)?;
	let output_grad = backend.upload(&random_values(8, len, -1.0, 1.0))?;
	for kind in [Activation::Relu, Activation::Tanh, Activation::GeluTanh] {
		let mut forward = backend.zeros(len)?;
		backend.activation(kind, &input, &mut forward)?;
		outputs.push((format!("{kind:?} forward"), backend.download(&forward)?));
		let mut backward = backend.zeros(len)?;
		backend.activation_grad(kind, &input, &output_grad, &mut backward)?;
		outputs.push((format!("{kind:?} backward"), backend.download(&backward)?));
	}

	let classifier = ClassifierShape { rows: 40, classes: 10 };
	let logits = backend.upload(&random_values(9, 400, -6.0, 6.0))?;
	let labels = backend.upload_indices(&(0..40).map(|r| (r * 3) % 10).collect::<Vec<u32>>())?;
	let (mut loss, mut dlogits) = (backend.zeros(1)?, backend.zeros(400)?);
	backend.softmax_cross_entropy(classifier, &logits, &labels, &mut loss, &mut dlogits)?;
	outputs.push(("softmax_cross_entropy gradient".into(), backend.download(&dlogits)?));
	outputs.push(("softmax_cross_entropy loss".into(), backend.download(&loss)?));

	let grads_values = random_values(10, 500, -1.0, 1.0);
	let params_values = random_values(11, 500, -1.0, 1.0);
	let grads = backend.upload(&grads_values)?;
	let mut params = backend.upload(&params_values)?;
	let mut velocity = backend.zeros(500)?;
	let sgd = SgdMomentum { learning_rate: 0.1, momentum: 0.9, weight_decay: 1e-4, nesterov: true };
	for _ in 0..3 {
		backend.sgd_momentum(&sgd, &mut params, &grads, &mut velocity)?;
	}
	outputs.push(("sgd_momentum params".into(), backend.download(&params)?));
	outputs.push(("sgd_momentum velocity".into(), backend.download(&velocity)?));
	let adamw = AdamW { learning_rate: 1e-3, beta1: 0.9, beta2: 0.999, epsilon: 1e-8, weight_decay: 0.01 };
	let mut params = backend.upload(&params_values)?;
	let (mut first, mut second) = (backend.zeros(500)?, backend.zeros(500)?);
	for step in 1..=3 {
		backend.adamw(&adamw.scalars(step)?, &mut params, &grads, &mut first, &mut second)?;
	}
	outputs.push(("adamw params".into(), backend.download(&params)?));
	outputs.push(("adamw moments".into(), [backend.download(&first)?, backend.download(&second)?].concat()));
	for max_norm in [0.5, 1.0e6] {
		let mut head = backend.upload(&grads_values[..100])?;
		let mut tail = backend.upload(&grads_values[100..])?;
		let mut norm = backend.zeros(1)?;
		backend.clip_grad_norm(max_norm, &mut [&mut head, &mut tail], &mut norm)?;
		let clipped = [backend.download(&head)?, backend.download(&tail)?, backend.download(&norm)?].concat();
		outputs.push((format!("clip_grad_norm to {max_norm}"), clipped));
	}

	let source = backend.upload(&random_values(12, 50 * 7, -1.0, 1.0))?;
	let order = RandomStream::new(7, 13).permutation(50);
	let indices = backend.upload_indices(&order[..31])?;
	let mut gathered = backend.zeros(31 * 7)?;
	backend.gather_rows(&source, 7, &indices, &mut gathered)?;
	outputs.push(("gather_rows".into(), backend.download(&gathered)?));

	// The transformer's row operators: both norms over 37 rows of 45 (rows and width end
	// mid-chunk), forward and backward, and the causal softmax over 3 blocks of 37 positions.
	let (rows, width) = (37, 45);
	let x = backend.upload(&random_values(14, rows * width, -3.0, 5.0))?;
	let gamma = backend.upload(&random_values(15, width, 0.5, 1.5))?;
	let beta = backend.upload(&random_values(16, width, -0.5, 0.5))?;
	let dy = backend.upload(&random_values(17, rows * width, -1.0, 1.0))?;
	for norm in [Norm::Layer, Norm::Rms] {
		let shape = NormShape { norm, rows, width, epsilon: 1e-5 };
		let layer = norm == Norm::Layer;
		let (mut y, mut normalised) = (backend.zeros(rows * width)?, backend.zeros(rows * width)?);
		backend.norm(shape, &x, &gamma, layer.then_some(&beta), &mut y, &mut normalised)?;
		outputs.push((format!("{norm:?}Norm forward"), [backend.download(&y)?, backend.download(&normalised)?].concat()));
		let (mut dx, mut dgamma) = (backend.zeros(rows * width)?, backend.zeros(width)?);
		let mut dbeta = backend.zeros(shape.bias_len())?;
		backend.norm_backward(shape, &x, &gamma, &dy, &normalised, &mut dx, &mut dgamma, layer.then_some(&mut dbeta))?;
		let grads = [backend.download(&dx)?, backend.download(&dgamma)?, backend.download(&dbeta)?].concat();
		outputs.push((format!("{norm:?}Norm backward"), grads));
	}
	let causal = CausalShape { blocks: 3, positions: 37, scale: 0.125 };
	let len = causal.scores_len()?;
	let scores = backend.upload(&random_values(18, len, -60.0, 60.0))?;
	let probs_grad = backend.upload(&random_values(19, len, -1.0, 1.0))?;
	let mut probs = backend.zeros(len)?;
	backend.causal_softmax(causal, &scores, &mut probs)?;
	outputs.push(("causal_softmax".into(), backend.download(&probs)?));
	let mut scores_grad = backend.zeros(len)?;
	backend.causal_softmax_grad(causal, &probs, &probs_grad, &mut scores_grad)?;
	outputs.push(("causal_softmax_grad".into(), backend.download(&scores_grad)?));

	// Attention's layout and batched contractions (3 blocks of 37×45 by 45×37, transposed
	// as `QKᵀ` is), and the embedding's scatter-add with repeated and unused tokens.
	let heads = HeadsShape { sequences: 1, positions: 37, heads: 5, head_width: 9 };
	let mut split = backend.zeros(heads.values_len()?)?;
	backend.split_heads(heads, &x, &mut split)?;
	outputs.push(("split_heads".into(), backend.download(&split)?));
	let mut merged = backend.zeros(heads.values_len()?)?;
	backend.merge_heads(heads, &split, &mut merged)?;
	outputs.push(("merge_heads".into(), backend.download(&merged)?));
	let attention = MatmulShape { m: 37, k: 45, n: 37 };
	let keys = backend.upload(&random_values(20, 3 * 37 * 45, -2.0, 2.0))?;
	let queries = backend.upload(&random_values(21, 3 * 37 * 45, -2.0, 2.0))?;
	let mut scores = backend.zeros(3 * 37 * 37)?;
	let transposed = MatmulLayout { lhs_transposed: false, rhs_transposed: true };
	backend.batched_matmul(3, attention, transposed, &queries, &keys, &mut scores)?;
	outputs.push(("batched_matmul".into(), backend.download(&scores)?));
	let ids = backend.upload_indices(&(0..37u32).map(|r| (r * r) % 11).collect::<Vec<u32>>())?;
	let mut table_grad = backend.zeros(13 * 45)?;
	backend.scatter_add_rows(&x, 45, &ids, 13, &mut table_grad)?;
	outputs.push(("scatter_add_rows".into(), backend.download(&table_grad)?));
	let mut residual = backend.upload(&random_values(22, 37 * 45, -1.0, 1.0))?;
	backend.add_assign(&mut residual, &x)?;
	outputs.push(("add_assign".into(), backend.download(&residual)?));
	Ok(outputs)
}

/// Runs [`operator_outputs`] on `backend` and on the CPU reference; returns mismatches.
pub fn operator_mismatches<B: Backend>(backend: &mut B) -> Result<Vec<String>, B::Error> {
	let actual = operator_outputs(backend)?;
	// The reference cannot fail on these fixed, valid inputs.
	let expected = operator_outputs(&mut CpuBackend).map_err(B::Error::from)?;
	let mut failures = Vec::new();
	for ((name, actual), (_, expected)) in actual.iter().zip(&expected) {
		failures.extend(difference(name, actual, expected));
	}
	Ok(failures)
}

/// Tensors of the state-root check: lengths around a chunk's 256 words, an
/// empty tensor, one of several chunks with a short tail, and negative zeros.
pub fn state_root_tensors() -> Vec<Vec<f32>> {
	[1usize, 255, 256, 257, 0, 16 * 256 + 3]
		.iter()
		.enumerate()
		.map(|(stream, &len)| {
			let mut values = random_values(20 + stream as u64, len, -1.0, 1.0);
			for value in values.iter_mut().step_by(97) {
				*value = -0.0;
			}
			values
		})
		.collect()
}

/// Compares `backend`'s own state root of [`state_root_tensors`] with the
/// reference's; a backend that hashes nothing itself has nothing to differ.
pub fn state_root_mismatches<B: Backend>(backend: &mut B) -> Result<Vec<String>, B::Error> {
	let host = state_root_tensors();
	let views: Vec<&[f32]> = host.iter().map(Vec::as_slice).collect();
	// The reference cannot fail on this fixed state of several chunks.
	let expected = touchstone_kernels::proof::state_tree::root(&views).map_err(KernelError::Commitment).map_err(B::Error::from)?;
	let tensors = host.iter().map(|values| backend.upload(values)).collect::<Result<Vec<_>, _>>()?;
	let refs: Vec<&B::Tensor> = tensors.iter().collect();
	Ok(match backend.state_root(&refs)? {
		Some(actual) if actual != expected => {
			vec![format!("state_root: {} where the reference has {}", hex(&actual), hex(&expected))]
		},
		_ => Vec::new(),
	})
}

/// Lowercase hex of a digest.
fn hex(digest: &[u8; 32]) -> String {
	digest.iter().map(|byte| format!("{byte:02x}")).collect()
}
