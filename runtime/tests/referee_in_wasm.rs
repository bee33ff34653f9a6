//! The referee runs inside the runtime's wasm build, not only natively: every verdict
//! the chain would reach matches the native reference, and bad cases get named errors.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::{digits_sized_job, honest_cases, WasmRuntime};
use touchstone_primitives::referee::{judge, RefereeError};

#[test]
fn wasm_verdicts_match_the_native_reference_on_every_operator() {
	let (model, hyper) = digits_sized_job();
	let cases = honest_cases(&model, &hyper, 2, 128);
	assert!(cases.len() >= 10, "a step has many operators, found {}", cases.len());
	let mut runtime = WasmRuntime::new();
	for (label, case) in &cases {
		let native = judge(&model, &hyper, &case.0, &case.1);
		assert!(native.is_ok(), "{label}: the honest claim stands natively: {native:?}");
		assert_eq!(runtime.judge(&model, &hyper, case), native, "{label}: wasm agrees with native");
	}
}

#[test]
fn wasm_rejects_an_unproven_claim_a_wrong_proof_a_piece_out_of_range_and_a_nan() {
	let (model, hyper) = digits_sized_job();
	let cases = honest_cases(&model, &hyper, 1, 128);
	// A contraction that reads another operator's output, so there is an input opening to corrupt.
	let (_, case) = cases
		.iter()
		.find(|(label, case)| label.contains("matmul") && !case.1.inputs.is_empty())
		.expect("a contraction reading an operator output");
	let mut runtime = WasmRuntime::new();
	runtime.judge(&model, &hyper, case).expect("the honest claim stands");

	// A claim that is not the leaf under the claimant's piece root.
	let mut wrong_claim = case.clone();
	wrong_claim.1.claimed_output[0] ^= 1;
	assert_eq!(runtime.judge(&model, &hyper, &wrong_claim), Err(RefereeError::InvalidClaimProof));

	let mut wrong_proof = case.clone();
	let input = wrong_proof.1.inputs.first_mut().expect("the case has inputs");
	input.segments[0].words[0] ^= 1;
	assert!(matches!(
		runtime.judge(&model, &hyper, &wrong_proof),
		Err(RefereeError::InvalidInputProof { .. })
	));

	let mut out_of_range = case.clone();
	out_of_range.0.position.piece = u32::MAX;
	assert!(matches!(runtime.judge(&model, &hyper, &out_of_range), Err(RefereeError::PieceOutOfRange { .. })));

	// A NaN under no valid proof is refused before any arithmetic touches it (a proven
	// one is NonFiniteInput: kernels/tests/learning_proof.rs).
	let mut not_finite = case.clone();
	not_finite.1.inputs[0].segments[0].words[0] = f32::NAN.to_bits();
	assert!(matches!(runtime.judge(&model, &hyper, &not_finite), Err(RefereeError::InvalidInputProof { .. })));

	// Openings beyond what the piece needs.
	let mut twice = case.clone();
	twice.1.inputs.push(twice.1.inputs[0].clone());
	assert_eq!(runtime.judge(&model, &hyper, &twice), Err(RefereeError::TooManyOpenings));
}
