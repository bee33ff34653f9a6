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
//! `log` and `tanh` built from those operations in [`math`]. See
//! [`contract`] for the rules and each operator module for its exact order.
//!
//! # Layout
//!
//! - [`contract`]: the arithmetic rules (flush, operand quantisation, chunked sums).
//! - [`math`]: pinned division, square root and transcendentals.
//! - [`contraction`]: the chunked matrix-product view, with per-chunk
//!   recomputation for disputes; [`mod@matmul`] and [`mod@conv2d`] are its
//!   operators, and [`gemm`] the packed, register-blocked (SIMD and, with
//!   `std`, multi-threaded) engine that computes it without changing a bit.
//! - [`bias`], [`activation`], [`loss`], [`optim`], [`gather`]: the rest of a
//!   training step.
//! - [`rng`]: Philox 4×32-10 streams for initialisation and batch order.
//! - [`hash`]: BLAKE2b-256 digests over canonical bits.
//! - [`backend`]: the [`Backend`] trait; [`cpu`]: its reference implementation.
//! - Learning proofs: [`model`] (configurations mirroring the chain's, seeded
//!   initialisation), [`data`] (the digits set, synthetic data, splits),
//!   [`trace`] (the training loop over any backend and the state-hash chain),
//!   `checkpoint` (safetensors, `std` only), [`merkle`], [`graph`] (the
//!   operator graph of a step and its pieces), [`bisection`] (the game, with
//!   each level's shape fixed by the job) and [`referee`] (the on-chain judge of
//!   one piece, the bindings between levels, and, with `std`, the prover); `distance` (`std`): tolerance mode's
//!   L2 / L∞ / cosine distance and the verifier's re-execution on the reference.
//! - Other backends: `wgpu` (feature `wgpu`: WGSL kernels, bit-identical to
//!   the reference, with an adapter conformance self-test) and `tch` (feature
//!   `tch`: libtorch, fast, verified in tolerance mode).
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

pub mod activation;
pub mod backend;
pub mod bias;
pub mod contract;
pub mod contraction;
pub mod conv2d;
pub mod cpu;
pub mod error;
pub mod gather;
pub mod gemm;
pub mod hash;
pub mod loss;
pub mod math;
pub mod matmul;
pub mod optim;
pub mod parallel;
pub mod rng;

// Training traces and learning proofs.
pub mod bisection;
#[cfg(feature = "std")]
pub mod checkpoint;
pub mod data;
#[cfg(feature = "std")]
pub mod distance;
pub mod graph;
pub mod merkle;
pub mod model;
pub mod reduction;
pub mod referee;
pub mod trace;

// The wgpu and libtorch backends are the crates `touchstone-kernels-wgpu` and
// `touchstone-kernels-tch`: crates of their own, so that nothing which links this
// one (the runtime, the node) links a GPU driver stack or libtorch.

pub use activation::{activation_backward, activation_forward, Activation};
pub use backend::Backend;
pub use bias::{bias_add, bias_grad, BiasLayout};
pub use contract::{CHUNK, TILE};
pub use contraction::{chunk_partial_sums, fold_chunk_partials, ChunkGrid, ChunkId, Contraction, ContractionDims};
pub use conv2d::{conv2d, conv2d_input_grad, conv2d_weight_grad, Conv2dShape};
pub use cpu::CpuBackend;
pub use error::KernelError;
pub use gather::gather_rows;
pub use hash::{digest_f32, Digest};
pub use loss::{argmax_rows, softmax_cross_entropy, ClassifierShape};
pub use matmul::{matmul, matmul_lhs_grad, matmul_rhs_grad, MatmulLayout, MatmulShape};
pub use optim::{adamw_step, clip_grad_norm, global_grad_norm, sgd_momentum_step, AdamW, AdamWScalars, SgdMomentum};
pub use rng::{philox4x32_10, RandomStream};
