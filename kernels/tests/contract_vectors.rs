//! Pinned contract vectors: the BLAKE2b-256 digest of every operator's output on
//! fixed Philox inputs. A change to any digest is a change to the contract:
//! every backend and every recorded learning proof would disagree with the new
//! bits. Update a digest only together with `docs/kernels.md`, on purpose.
//!
//! These are also the vectors a `wgpu` or other port must reproduce first.

mod common;

use common::random_values;
use touchstone_kernels::proof::hash::digest_f32;
use touchstone_kernels::arith::math;
use touchstone_kernels::*;

/// `n + 1` evenly spaced points from `low` to `high`, as `f32` (computed in
/// f64 with correctly rounded operations, then rounded: the same on every platform).
fn sweep(low: f64, high: f64, n: u32) -> Vec<f32> {
	(0..=n).map(|i| (low + (high - low) * f64::from(i) / f64::from(n)) as f32).collect()
}

fn hex(digest: Digest) -> String {
	digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Every pinned output, by name.
fn outputs() -> Vec<(&'static str, Vec<f32>)> {
	let mut outputs = Vec::new();
	// 2⁻⁶⁰ to about 2⁶⁰ by even steps of the bit pattern: no libm in the inputs either.
	let positive: Vec<f32> = (0..=20_000u32).map(|i| f32::from_bits(0x2180_0000 + i * 50_331)).collect();
	outputs.push(("recip", positive.iter().map(|&x| math::recip(x)).collect()));
	outputs.push(("rsqrt", positive.iter().map(|&x| math::rsqrt(x)).collect()));
	outputs.push(("sqrt", positive.iter().map(|&x| math::sqrt(x)).collect()));
	outputs.push(("log", positive.iter().map(|&x| math::log(x)).collect()));
	outputs.push(("exp", sweep(-90.0, 90.0, 20_000).iter().map(|&x| math::exp(x)).collect()));
	outputs.push(("tanh", sweep(-12.0, 12.0, 20_000).iter().map(|&x| math::tanh(x)).collect()));
	outputs.push(("powi", (0..2000).map(|n| math::powi(0.999, n)).collect()));

	let shape = touchstone_kernels::ops::contraction::VECTOR_MATMUL;
	let MatmulShape { m, k, n } = shape;
	let a = random_values(1, m * k, -2.0, 2.0);
	let b = random_values(2, k * n, -2.0, 2.0);
	let g = random_values(3, m * n, -1.0, 1.0);
	let mut out = vec![0.0; m * n];
	matmul(shape, MatmulLayout::default(), &a, &b, &mut out).unwrap();
	outputs.push(("matmul", out));
	let mut da = vec![0.0; m * k];
	matmul_lhs_grad(shape, &g, &b, &mut da).unwrap();
	outputs.push(("matmul_lhs_grad", da));
	let mut db = vec![0.0; k * n];
	matmul_rhs_grad(shape, &a, &g, &mut db).unwrap();
	outputs.push(("matmul_rhs_grad", db));

	let conv = touchstone_kernels::ops::contraction::VECTOR_CONV;
	let x = random_values(4, conv.input_len().unwrap(), -1.0, 1.0);
	let w = random_values(5, conv.weight_len().unwrap(), -1.0, 1.0);
	let dy = random_values(6, conv.output_len().unwrap(), -1.0, 1.0);
	let mut y = vec![0.0; dy.len()];
	conv2d(conv, &x, &w, &mut y).unwrap();
	outputs.push(("conv2d", y));
	let mut dx = vec![0.0; x.len()];
	conv2d_input_grad(conv, &dy, &w, &mut dx).unwrap();
	outputs.push(("conv2d_input_grad", dx));
	let mut dw = vec![0.0; w.len()];
	conv2d_weight_grad(conv, &dy, &x, &mut dw).unwrap();
	outputs.push(("conv2d_weight_grad", dw));
	let layout = BiasLayout::channels_first(3, 6, conv.out_height() * conv.out_width());
	let mut biased = dy.clone();
	bias_add(layout, &mut biased, &random_values(7, 6, -1.0, 1.0)).unwrap();
	outputs.push(("bias_add", biased));
	let mut dbias = vec![0.0; 6];
	bias_grad(layout, &dy, &mut dbias).unwrap();
	outputs.push(("bias_grad", dbias));

	let activation_input = sweep(-8.0, 8.0, 5000);
	let activation_grad = random_values(8, activation_input.len(), -1.0, 1.0);
	for (name, kind) in
		[("relu", Activation::Relu), ("tanh_activation", Activation::Tanh), ("gelu_tanh", Activation::GeluTanh)]
	{
		let mut forward = vec![0.0; activation_input.len()];
		activation_forward(kind, &activation_input, &mut forward).unwrap();
		let mut backward = vec![0.0; activation_input.len()];
		activation_backward(kind, &activation_input, &activation_grad, &mut backward).unwrap();
		forward.extend(backward);
		outputs.push((name, forward));
	}

	let classifier = ClassifierShape { rows: 40, classes: 10 };
	let logits = random_values(9, 400, -6.0, 6.0);
	let labels: Vec<u32> = (0..40).map(|r| (r * 3) % 10).collect();
	let mut dlogits = vec![0.0; 400];
	let loss = softmax_cross_entropy(classifier, &logits, &labels, &mut dlogits).unwrap();
	dlogits.push(loss);
	outputs.push(("softmax_cross_entropy", dlogits));

	let grads = random_values(10, 500, -1.0, 1.0);
	let mut params = random_values(11, 500, -1.0, 1.0);
	let mut velocity = vec![0.0; 500];
	let sgd = SgdMomentum { learning_rate: 0.1, momentum: 0.9, weight_decay: 1e-4, nesterov: true };
	for _ in 0..3 {
		sgd_momentum_step(&sgd, &mut params, &grads, &mut velocity).unwrap();
	}
	params.extend(velocity);
	outputs.push(("sgd_momentum", params));
	let adamw = AdamW { learning_rate: 1e-3, beta1: 0.9, beta2: 0.999, epsilon: 1e-8, weight_decay: 0.01 };
	let mut params = random_values(11, 500, -1.0, 1.0);
	let (mut first, mut second) = (vec![0.0; 500], vec![0.0; 500]);
	for step in 1..=3 {
		adamw_step(&adamw.scalars(step).unwrap(), &mut params, &grads, &mut first, &mut second).unwrap();
	}
	params.extend(first);
	params.extend(second);
	outputs.push(("adamw", params));
	let mut clipped = grads.clone();
	let (head, tail) = clipped.split_at_mut(100);
	let norm = clip_grad_norm(&mut [head, tail], 0.5).unwrap();
	clipped.push(norm);
	outputs.push(("clip_grad_norm", clipped));

	let mut uniform = vec![0.0; 1000];
	RandomStream::new(2024, 3).fill_uniform(-0.1, 0.1, &mut uniform);
	outputs.push(("philox_uniform", uniform));
	let permutation = RandomStream::new(2024, 4).permutation(1000);
	// Carried as raw bits (no arithmetic touches them), so the digest is digest_u32's.
	outputs.push(("philox_permutation", permutation.iter().map(|&i| f32::from_bits(i)).collect()));
	outputs
}

/// The pinned digests, by name.
const PINNED: &[(&str, &str)] = &[
	("recip", "d4a30089f632e109665ce9a072981cb9d2a0ef2bd6623442e7ab807eac28d0b5"),
	("rsqrt", "c990f2f4a538c2ad5bc98c972e913fb346527255ba99929b260821acee2675bd"),
	("sqrt", "c20c32c90897ba96345090c6a97b8670fb47a0dcb7c47100e97c6aadd63b98a0"),
	("log", "ce082741cf91f4c3f0217370f0ed1233c876a22b5a577d6eba773e2126fb22ab"),
	("exp", "4db5666e7f7ddb699f3aac8acb8c3805b3951d25d46cce05d81db87a7c51cb39"),
	("tanh", "faf954295a9cff8da37ef5a6f565cde8d1fe510edea022b3426b9df60c24634f"),
	("powi", "4be4b4e7357bba8a6f91efdbba9695f7f9aafe527ecc033104f1770d55ee55d8"),
	("matmul", "3d399a572311e072092fc716d7d67e896c76dff020f3559a410d56076e763ca2"),
	("matmul_lhs_grad", "f7a6463ce98bfb1090785c032f4800f06a60b1ec3728030df4e4ed107ec3da48"),
	("matmul_rhs_grad", "f9de90dc99a4255297fd30dc4b1f804ce5e88ef9be12f396cd36ba2e5a208d49"),
	("conv2d", "9607dae8180d1d67bc49aeee62043576223d4932b0ab0820344b41f0e4c9a2ae"),
	("conv2d_input_grad", "205d70365aeb06428928d1c0c906411641b488434a7919dc7a80de3dc1faf537"),
	("conv2d_weight_grad", "161b7ced7eb181c177a084c5be805cc7a1883edffb3c527fd649e6ee1611a18d"),
	("bias_add", "247d1d3829c3ccccb5c57b1fcb00052c396544db83d2ff0c7ba3ba3cd6301727"),
	("bias_grad", "f5c1f8acd5adfb8e9a67ea03d43cc9d12d43b83dc5e005b623cf65e22606a53e"),
	("relu", "303216b11ecef69fa641edcf1647c2fe12cc2430416552966149d74d3a15d890"),
	("tanh_activation", "e9aa2531826630b7d9a6b0fb3e57a5c125535f3603404152ba68481bb0f7a26b"),
	("gelu_tanh", "8d8a53ce0f7fc702a9b3d6967a6f7724d9281e2ba66636c50433860a299837c2"),
	("softmax_cross_entropy", "5e95975fae515b4b1399b002eeff107bfc37a50121c60786ae9601b103630b63"),
	("sgd_momentum", "b6593507244140e7bbe76d1d1bc80ba5742c4bedcdacd5abc66677806887bed6"),
	("adamw", "bb300321769d882b74c6b282b36bf2bbe13e5df24a807355070257f455934f77"),
	("clip_grad_norm", "ddfcf0758894194e048ea105ee4a8c409861f7f3fc89046a0ce7b54af69e712b"),
	("philox_uniform", "9ae0cb4cf4f62e2c8d2524e2f46ffe3b49da8ad1c6fecc6d4d1312aa58f526da"),
	("philox_permutation", "ee6e1bda76e890353e59aea441d6f3658c99ad6481971dce4d5c891dcfc30763"),
];

#[test]
fn operator_outputs_match_the_pinned_contract_vectors() {
	let mut mismatches = Vec::new();
	for (name, values) in outputs() {
		let actual = hex(digest_f32(&values));
		let pinned = PINNED.iter().find(|(pinned_name, _)| *pinned_name == name).map(|(_, digest)| *digest);
		if pinned != Some(actual.as_str()) {
			mismatches.push(format!("(\"{name}\", \"{actual}\"),"));
		}
	}
	assert!(mismatches.is_empty(), "digests differ from the pinned contract vectors:\n{}", mismatches.join("\n"));
}
