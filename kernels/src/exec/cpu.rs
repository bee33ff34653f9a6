//! The CPU reference backend: [`Backend`] over host vectors, delegating to the
//! reference functions, which are the specification.

use alloc::vec;
use alloc::vec::Vec;

use crate::ops::activation::{activation_backward, activation_forward, Activation};
use crate::ops::attention::{self, CausalShape};
use crate::ops::norm::{self, NormShape};
use crate::ops::heads::{self, HeadsShape};
use crate::ops::embedding;
use crate::exec::backend::Backend;
use crate::ops::bias::{self, BiasLayout};
use crate::ops::contraction::Contraction;
use crate::error::{check_len, element_count, KernelError};
use crate::ops::loss::{self, ClassifierShape};
use crate::ops::optim::{self, AdamWScalars, SgdMomentum};

/// The reference backend; its tensors are plain `Vec`s in host memory.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

/// Writes `value` into a one-element tensor.
fn write_scalar(operand: &'static str, tensor: &mut [f32], value: f32) -> Result<(), KernelError> {
	check_len(operand, tensor.len(), 1)?;
	tensor.fill(value);
	Ok(())
}

impl Backend for CpuBackend {
	type Tensor = Vec<f32>;
	type Indices = Vec<u32>;
	type Error = KernelError;

	fn name(&self) -> &str {
		"cpu-reference"
	}

	fn is_bit_exact(&self) -> bool {
		true
	}

	fn upload(&mut self, values: &[f32]) -> Result<Vec<f32>, KernelError> {
		Ok(values.to_vec())
	}

	fn upload_indices(&mut self, values: &[u32]) -> Result<Vec<u32>, KernelError> {
		Ok(values.to_vec())
	}

	fn zeros(&mut self, len: usize) -> Result<Vec<f32>, KernelError> {
		Ok(vec![0.0; element_count(&[len])?])
	}

	fn download(&mut self, tensor: &Vec<f32>) -> Result<Vec<f32>, KernelError> {
		Ok(tensor.clone())
	}

	fn check_finite(&mut self, tensor: &Vec<f32>) -> Result<Option<bool>, KernelError> {
		Ok(Some(tensor.iter().all(|value| value.is_finite())))
	}

	fn state_root(&mut self, tensors: &[&Vec<f32>]) -> Result<Option<crate::proof::hash::Digest>, KernelError> {
		// Hashed in place: no copy of the state.
		let views: Vec<&[f32]> = tensors.iter().map(|tensor| tensor.as_slice()).collect();
		crate::proof::state_tree::root(&views).map(Some).map_err(KernelError::Commitment)
	}

	fn tensor_len(&self, tensor: &Vec<f32>) -> usize {
		tensor.len()
	}

	fn contract(
		&mut self,
		contraction: Contraction,
		lhs: &Vec<f32>,
		rhs: &Vec<f32>,
		out: &mut Vec<f32>,
	) -> Result<(), KernelError> {
		contraction.compute(lhs, rhs, out)
	}

	fn bias_add(&mut self, layout: BiasLayout, values: &mut Vec<f32>, bias: &Vec<f32>) -> Result<(), KernelError> {
		bias::bias_add(layout, values, bias)
	}

	fn bias_grad(
		&mut self,
		layout: BiasLayout,
		out_grad: &Vec<f32>,
		bias_grad: &mut Vec<f32>,
	) -> Result<(), KernelError> {
		bias::bias_grad(layout, out_grad, bias_grad)
	}

	fn activation(&mut self, kind: Activation, input: &Vec<f32>, output: &mut Vec<f32>) -> Result<(), KernelError> {
		activation_forward(kind, input, output)
	}

	fn activation_grad(
		&mut self,
		kind: Activation,
		input: &Vec<f32>,
		output_grad: &Vec<f32>,
		input_grad: &mut Vec<f32>,
	) -> Result<(), KernelError> {
		activation_backward(kind, input, output_grad, input_grad)
	}

	fn softmax_cross_entropy(
		&mut self,
		shape: ClassifierShape,
		logits: &Vec<f32>,
		labels: &Vec<u32>,
		loss: &mut Vec<f32>,
		logits_grad: &mut Vec<f32>,
	) -> Result<(), KernelError> {
		check_len("loss", loss.len(), 1)?;
		let value = loss::softmax_cross_entropy(shape, logits, labels, logits_grad)?;
		write_scalar("loss", loss, value)
	}

	fn gather_rows(
		&mut self,
		source: &Vec<f32>,
		row_len: usize,
		indices: &Vec<u32>,
		destination: &mut Vec<f32>,
	) -> Result<(), KernelError> {
		crate::gather_rows(source, row_len, indices, destination)
	}

	fn sgd_momentum(
		&mut self,
		hyper: &SgdMomentum,
		param: &mut Vec<f32>,
		grad: &Vec<f32>,
		velocity: &mut Vec<f32>,
	) -> Result<(), KernelError> {
		optim::sgd_momentum_step(hyper, param, grad, velocity)
	}

	fn adamw(
		&mut self,
		scalars: &AdamWScalars,
		param: &mut Vec<f32>,
		grad: &Vec<f32>,
		first_moment: &mut Vec<f32>,
		second_moment: &mut Vec<f32>,
	) -> Result<(), KernelError> {
		optim::adamw_step(scalars, param, grad, first_moment, second_moment)
	}

	fn clip_grad_norm(
		&mut self,
		max_norm: f32,
		grads: &mut [&mut Vec<f32>],
		norm: &mut Vec<f32>,
	) -> Result<(), KernelError> {
		check_len("norm", norm.len(), 1)?;
		let mut slices: Vec<&mut [f32]> = grads.iter_mut().map(|tensor| tensor.as_mut_slice()).collect();
		let value = optim::clip_grad_norm(&mut slices, max_norm)?;
		write_scalar("norm", norm, value)
	}

	fn norm(
		&mut self,
		shape: NormShape,
		x: &Vec<f32>,
		gamma: &Vec<f32>,
		beta: Option<&Vec<f32>>,
		y: &mut Vec<f32>,
		normalised: &mut Vec<f32>,
	) -> Result<(), KernelError> {
		norm::norm_forward(shape, x, gamma, beta.map_or(&[][..], Vec::as_slice), norm::NormOutputs { y, normalised })
	}

	fn norm_backward(
		&mut self,
		shape: NormShape,
		x: &Vec<f32>,
		gamma: &Vec<f32>,
		dy: &Vec<f32>,
		normalised: &Vec<f32>,
		x_grad: &mut Vec<f32>,
		gamma_grad: &mut Vec<f32>,
		beta_grad: Option<&mut Vec<f32>>,
	) -> Result<(), KernelError> {
		let grads = norm::NormGrads { x: x_grad, gamma: gamma_grad, beta: beta_grad.map_or(&mut [][..], Vec::as_mut_slice) };
		norm::norm_backward(shape, x, gamma, dy, normalised, grads)
	}

	fn split_heads(&mut self, shape: HeadsShape, side_by_side: &Vec<f32>, blocked: &mut Vec<f32>) -> Result<(), KernelError> {
		heads::split_heads(shape, side_by_side, blocked)
	}

	fn merge_heads(&mut self, shape: HeadsShape, blocked: &Vec<f32>, side_by_side: &mut Vec<f32>) -> Result<(), KernelError> {
		heads::merge_heads(shape, blocked, side_by_side)
	}

	fn scatter_add_rows(&mut self, dy: &Vec<f32>, row_len: usize, ids: &Vec<u32>, table_rows: usize, dtable: &mut Vec<f32>) -> Result<(), KernelError> {
		embedding::scatter_add_rows(dy, row_len, ids, table_rows, dtable)
	}

	fn add_assign(&mut self, into: &mut Vec<f32>, other: &Vec<f32>) -> Result<(), KernelError> {
		crate::ops::residual::add_assign(into, other)
	}

	fn causal_softmax(&mut self, shape: CausalShape, scores: &Vec<f32>, probs: &mut Vec<f32>) -> Result<(), KernelError> {
		attention::causal_softmax(shape, scores, probs)
	}

	fn causal_softmax_grad(
		&mut self,
		shape: CausalShape,
		probs: &Vec<f32>,
		probs_grad: &Vec<f32>,
		scores_grad: &mut Vec<f32>,
	) -> Result<(), KernelError> {
		attention::causal_softmax_grad(shape, probs, probs_grad, scores_grad)
	}
}
