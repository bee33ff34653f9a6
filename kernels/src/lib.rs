//! Reproducible training kernels for Touchstone.
//!
//! This crate is the determinism contract of `docs/kernels.md` in code. Its
//! CPU reference is `no_std` + `alloc`: it is the specification every other
//! backend is tested against, and the code the chain's referee runs in the
//! runtime to recompute one disputed chunk.
//!
//! The contract in one paragraph: only correctly rounded `f32` `+`, `−`, `×`
//! (the operations Vulkan rounds correctly) plus exact integer and bit
//! operations; every product flushed below 2⁻¹⁰³ by an integer mask, so that
//! no value is ever subnormal and no product can be fused into an addition;
//! matmul and convolution operands rounded to 12 significant bits so that their
//! products are exact and FMA contraction cannot change a bit; every sum in
//! 32-wide chunks folded in a fixed order; division, square roots, `exp`,
//! `log` and `tanh` built from those operations in [`arith::math`]. See
//! [`arith`] for the rules and each operator module for its exact order.
//!
//! # Layout
//!
//! Each folder is one concern, and depends only on the ones above it in this
//! list (the job's description in [`job::model`] aside, which the step graph reads):
//!
//! - [`arith`]: the arithmetic rules (flush, operand quantisation, chunked
//!   sums); [`arith::math`], pinned division, square root and transcendentals;
//!   [`arith::rng`], Philox 4×32-10 streams and the random-access permutation.
//! - [`ops`]: the operators. [`ops::contraction`] is the chunked
//!   matrix-product view (shapes, chunk grid, per-chunk recomputation), with
//!   [`ops::matmul`] and [`ops::conv2d`] as its operators and [`ops::gemm`] the
//!   packed, register-blocked engine that computes it without changing a bit;
//!   [`ops::bias`], [`ops::activation`], [`ops::loss`], [`ops::optim`] and
//!   [`ops::gather`] are the rest of a training step.
//! - [`exec`]: the [`Backend`] trait every device implements,
//!   [`exec::cpu`] (the reference) and [`exec::parallel`] (threads, with `std`).
//! - [`proof`]: what a learning proof commits: [`proof::hash`] (BLAKE2b-256
//!   over canonical bits), [`proof::merkle`], [`proof::graph`] (the operator
//!   graph of a step and its pieces), [`proof::reduction`] (running sums of
//!   reductions), [`proof::chain`] (the state-hash chain) and
//!   [`proof::bisection`] (the game, each level's shape fixed by the job).
//! - [`referee`]: the on-chain judge of one piece, the bindings between the
//!   game's levels, the cost bound by job shape, and, with `std`, the prover
//!   that opens a party's case.
//! - [`job`]: a training job: [`job::model`] (configurations mirroring the
//!   chain's, seeded initialisation), [`job::data`] (the digits set, synthetic
//!   data, splits), [`job::trace`] (the training loop over any backend);
//!   `job::checkpoint` (safetensors) and `job::distance` (tolerance mode's
//!   distances and the verifier's re-execution), both `std` only.
//! - Other backends: the crates `touchstone-kernels-wgpu` (WGSL kernels,
//!   bit-identical to the reference, with an adapter conformance self-test)
//!   and `touchstone-kernels-tch` (libtorch, fast, verified in tolerance mode).
//!
//! # Panics
//!
//! None on bad input: public functions validate shapes with checked arithmetic
//! and return [`KernelError`].
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

/// Derives SCALE `Encode`/`Decode`/`DecodeWithMemTracking` and `TypeInfo` on
/// the items inside with the `codec` feature (the types the chain stores or
/// passes to the referee), and nothing without it.
#[cfg(feature = "codec")]
macro_rules! codec_types {
	($($item:item)*) => {
		$(
			#[derive(codec::Encode, codec::Decode, codec::DecodeWithMemTracking, scale_info::TypeInfo)]
			$item
		)*
	};
}
#[cfg(not(feature = "codec"))]
macro_rules! codec_types {
	($($item:item)*) => { $($item)* };
}

pub mod arith;
pub mod error;
pub mod exec;
pub mod job;
pub mod ops;
pub mod proof;
pub mod referee;

// The wgpu and libtorch backends are the crates `touchstone-kernels-wgpu` and
// `touchstone-kernels-tch`: crates of their own, so that nothing which links this
// one (the runtime, the node) links a GPU driver stack or libtorch.

pub use arith::rng::{philox4x32_10, RandomStream};
pub use arith::{CHUNK, TILE};
pub use error::KernelError;
pub use exec::backend::Backend;
pub use exec::cpu::CpuBackend;
pub use ops::activation::{activation_backward, activation_forward, Activation};
pub use ops::attention::{causal_softmax, causal_softmax_grad, CausalShape};
pub use ops::bias::{bias_add, bias_grad, BiasLayout};
pub use ops::contraction::{
	chunk_partial_sums, fold_chunk_partials, ChunkGrid, ChunkId, Contraction, ContractionDims, Conv2dShape, MatmulLayout,
	MatmulShape,
};
pub use ops::conv2d::{conv2d, conv2d_input_grad, conv2d_weight_grad};
pub use ops::embedding::scatter_add_rows;
pub use ops::gather::gather_rows;
pub use ops::loss::{argmax_rows, softmax_cross_entropy, ClassifierShape};
pub use ops::matmul::{matmul, matmul_lhs_grad, matmul_rhs_grad};
pub use ops::norm::{norm_backward, norm_forward, Norm, NormGrads, NormOutputs, NormShape};
pub use ops::optim::{adamw_step, clip_grad_norm, global_grad_norm, sgd_momentum_step, AdamW, AdamWScalars, SgdMomentum};
pub use proof::hash::{digest_f32, Digest};
