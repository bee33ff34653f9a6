//! The chain's view of the kernels' referee: the job's model and hyper-parameters as the
//! kernels take them, and the `RefereeApi` runtime API that runs the referee inside the
//! runtime's wasm, where a disputes pallet will call it.

use crate::{Activation, HyperParams, ModelArch, Optimizer};
use touchstone_kernels::{
	job::model::{ModelConfig, OptimizerConfig, TrainConfig},
	Activation as KernelActivation,
};

pub use touchstone_kernels::referee::{
	DataCommitment, Dispute, Openings, Position, RefereeError, TraceCommitment, Verdict,
};

/// A job's model architecture as the kernels take it.
pub fn kernel_model(model: &ModelArch) -> ModelConfig {
	let activation = |activation: &Activation| match activation {
		Activation::Relu => KernelActivation::Relu,
		Activation::Tanh => KernelActivation::Tanh,
		Activation::Gelu => KernelActivation::GeluTanh,
	};
	match model {
		ModelArch::Mlp { inputs, hidden, classes, activation: act } => ModelConfig::Mlp {
			inputs: *inputs,
			hidden: hidden.to_vec(),
			classes: *classes,
			activation: activation(act),
		},
		ModelArch::Cnn {
			channels,
			height,
			width,
			conv_channels,
			kernel_size,
			hidden,
			classes,
			activation: act,
		} => ModelConfig::Cnn {
			channels: *channels,
			height: *height,
			width: *width,
			conv_channels: conv_channels.to_vec(),
			kernel_size: *kernel_size,
			hidden: hidden.to_vec(),
			classes: *classes,
			activation: activation(act),
		},
	}
}

/// A job's hyper-parameters as the kernels take them: fixed-point values pass as their
/// inner `u64` (value × 10⁹), which the kernels round to `f32` once, identically
/// everywhere.
pub fn kernel_train(hyper: &HyperParams) -> TrainConfig {
	TrainConfig {
		steps: hyper.steps,
		batch_size: hyper.batch_size,
		learning_rate: hyper.learning_rate.into_inner(),
		optimizer: match hyper.optimizer {
			Optimizer::Sgd { momentum } => OptimizerConfig::Sgd { momentum: momentum.into_inner() },
			Optimizer::AdamW { beta1, beta2, epsilon, weight_decay } => OptimizerConfig::AdamW {
				beta1: beta1.into_inner(),
				beta2: beta2.into_inner(),
				epsilon: epsilon.into_inner(),
				weight_decay: weight_decay.into_inner(),
			},
		},
		grad_clip_norm: hyper.grad_clip_norm.map(|norm| norm.into_inner()),
		seed: hyper.seed,
		checkpoint_interval: hyper.checkpoint_interval,
	}
}

/// Judges one disputed piece of a training step of a job with `model` and `hyper`.
/// `dispute` comes from the chain's records (the claimant's learning proof, the job's
/// data, the position the bisection ended on, the roots it fixed); `openings` from a
/// party. `Ok` upholds the claimed output, `Err(WrongClaimedOutput)` rejects it,
/// `Err(NonFiniteOutput)` says the step diverges, and any other error means the
/// openings are invalid.
pub fn judge(model: &ModelArch, hyper: &HyperParams, dispute: &Dispute, openings: &Openings) -> Result<Verdict, RefereeError> {
	touchstone_kernels::referee::judge(&kernel_model(model), &kernel_train(hyper), dispute, openings)
}

polkadot_sdk::sp_api::decl_runtime_apis! {
	/// The on-chain referee: recomputes one piece of a training step with the kernels'
	/// reference code, inside the runtime.
	pub trait RefereeApi {
		/// See [`judge`].
		fn judge(model: ModelArch, hyper: HyperParams, dispute: Dispute, openings: Openings) -> Result<Verdict, RefereeError>;
	}
}

