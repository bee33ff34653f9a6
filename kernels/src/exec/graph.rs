//! A step graph's buffers on a backend, and the one dispatch from a graph's operator to the
//! [`Backend`] method that computes it: every runner of a graph (the trainer of a job, a
//! transformer's step) runs its operators through [`GraphBuffers::run`].

use alloc::vec::Vec;

use crate::error::{check_len, KernelError};
use crate::exec::backend::Backend;
use crate::ops::norm::Norm;
use crate::proof::graph::{Graph, OpKind, ValueId, ValueKind};

/// A graph's buffers on a backend, by buffer index: a tensor for each `F32` buffer and an
/// index list for each `U32` buffer once it is set.
pub struct GraphBuffers<B: Backend> {
	tensors: Vec<Option<B::Tensor>>,
	indices: Vec<Option<B::Indices>>,
}

impl<B: Backend> GraphBuffers<B> {
	/// `graph`'s buffers with `state` (its state tensors, in order) in the state's buffers
	/// and every other `F32` buffer zeroed; no index list is set yet.
	pub fn new(backend: &mut B, graph: &Graph, state: Vec<B::Tensor>) -> Result<Self, B::Error> {
		if state.len() != graph.state.len() {
			return Err(KernelError::LengthMismatch { operand: "state", expected: graph.state.len(), actual: state.len() }.into());
		}
		let mut tensors: Vec<Option<B::Tensor>> = graph.buffers.iter().map(|_| None).collect();
		for (&id, tensor) in graph.state.iter().zip(state) {
			let value = graph.value(id).ok_or(KernelError::MissingValue { id })?;
			check_len("state", backend.tensor_len(&tensor), value.len)?;
			if let Some(slot) = tensors.get_mut(value.buffer) {
				*slot = Some(tensor);
			}
		}
		for (slot, &(len, kind)) in tensors.iter_mut().zip(&graph.buffers) {
			if slot.is_none() && kind == ValueKind::F32 {
				*slot = Some(backend.zeros(len)?);
			}
		}
		let indices = graph.buffers.iter().map(|_| None).collect();
		Ok(Self { tensors, indices })
	}

	/// Value `id`'s buffer index.
	fn buffer(graph: &Graph, id: ValueId) -> Result<usize, KernelError> {
		graph.value(id).map(|value| value.buffer).ok_or(KernelError::MissingValue { id })
	}

	/// The tensor holding value `id`.
	pub fn tensor(&self, graph: &Graph, id: ValueId) -> Result<&B::Tensor, KernelError> {
		let buffer = Self::buffer(graph, id)?;
		self.tensors.get(buffer).and_then(Option::as_ref).ok_or(KernelError::MissingValue { id })
	}

	/// Takes the tensor holding value `id` out of its buffer (to replace or keep it).
	pub fn take(&mut self, graph: &Graph, id: ValueId) -> Result<B::Tensor, KernelError> {
		let buffer = Self::buffer(graph, id)?;
		self.tensors.get_mut(buffer).and_then(Option::take).ok_or(KernelError::MissingValue { id })
	}

	/// Puts `tensor` in value `id`'s buffer.
	pub fn put(&mut self, graph: &Graph, id: ValueId, tensor: B::Tensor) -> Result<(), KernelError> {
		let buffer = Self::buffer(graph, id)?;
		*self.tensors.get_mut(buffer).ok_or(KernelError::MissingValue { id })? = Some(tensor);
		Ok(())
	}

	/// Sets the index list of the `U32` value `id`.
	pub fn put_indices(&mut self, graph: &Graph, id: ValueId, indices: B::Indices) -> Result<(), KernelError> {
		let buffer = Self::buffer(graph, id)?;
		*self.indices.get_mut(buffer).ok_or(KernelError::MissingValue { id })? = Some(indices);
		Ok(())
	}

	/// Runs operator `id` of `graph` for step `step` (counted from 0) on `backend`, writing
	/// its outputs into their buffers (an in-place output's buffer is its input's).
	pub fn run(&mut self, backend: &mut B, graph: &Graph, id: usize, step: u32) -> Result<(), B::Error> {
		let node = graph.node(id).map_err(|_| KernelError::MissingValue { id })?;
		let lost = || KernelError::MissingValue { id };
		// Outputs are taken out of the table while the operator runs; an in-place output is
		// its input's buffer, read through the taken tensor.
		let mut outs: Vec<B::Tensor> = Vec::with_capacity(node.outputs.len());
		for &value in &node.outputs {
			outs.push(self.take(graph, value)?);
		}
		let Self { tensors, indices } = &*self;
		let buffer_of = |position: usize| -> Result<usize, KernelError> {
			let value = node.inputs.get(position).copied().ok_or_else(lost)?;
			Self::buffer(graph, value)
		};
		let input = |position: usize| -> Result<&B::Tensor, KernelError> {
			tensors.get(buffer_of(position)?).and_then(Option::as_ref).ok_or_else(lost)
		};
		let ids = |position: usize| -> Result<&B::Indices, KernelError> {
			indices.get(buffer_of(position)?).and_then(Option::as_ref).ok_or_else(lost)
		};
		let result = run_operator(backend, graph, id, step, &input, &ids, &mut outs);
		for (&value, tensor) in node.outputs.iter().zip(outs) {
			self.put(graph, value, tensor)?;
		}
		result
	}
}

/// A tensor operand by input position.
type Operand<'a, T> = &'a dyn Fn(usize) -> Result<&'a T, KernelError>;

/// Runs operator `id` of `graph` from its inputs by position (`input` for `F32`
/// values, `ids` for `U32` ones) into `outs`, in the order [`OpKind`] documents.
fn run_operator<'a, B: Backend>(
	backend: &mut B,
	graph: &Graph,
	id: usize,
	step: u32,
	input: Operand<'a, B::Tensor>,
	ids: Operand<'a, B::Indices>,
	outs: &mut [B::Tensor],
) -> Result<(), B::Error> {
	let lost = || -> B::Error { KernelError::MissingValue { id }.into() };
	let kind = graph.node(id).map_err(|_| lost())?.kind;
	match kind {
		OpKind::Batch | OpKind::Commit => Ok(()),
		OpKind::Contract(contraction) => {
			let [out] = outs else { return Err(lost()) };
			backend.contract(contraction, input(0)?, input(1)?, out)
		},
		OpKind::BiasAdd(layout) => {
			let [out] = outs else { return Err(lost()) };
			backend.bias_add(layout, out, input(1)?)
		},
		OpKind::Residual => {
			let [out] = outs else { return Err(lost()) };
			backend.add_assign(out, input(1)?)
		},
		OpKind::Activation(activation) => {
			let [out] = outs else { return Err(lost()) };
			backend.activation(activation, input(0)?, out)
		},
		OpKind::ActivationGrad(activation) => {
			let [out] = outs else { return Err(lost()) };
			backend.activation_grad(activation, input(0)?, input(1)?, out)
		},
		OpKind::SoftmaxCrossEntropy(shape) => {
			let [loss, grad] = outs else { return Err(lost()) };
			backend.softmax_cross_entropy(shape, input(0)?, ids(1)?, loss, grad)
		},
		OpKind::BiasGrad(layout) => {
			let [out] = outs else { return Err(lost()) };
			backend.bias_grad(layout, input(0)?, out)
		},
		OpKind::ClipGradNorm(max_norm) => {
			let (norm, grads) = outs.split_last_mut().ok_or_else(lost)?;
			let mut grads: Vec<&mut B::Tensor> = grads.iter_mut().collect();
			backend.clip_grad_norm(max_norm, &mut grads, norm)
		},
		OpKind::Sgd(hyper) => {
			let [param, velocity] = outs else { return Err(lost()) };
			backend.sgd_momentum(&hyper, param, input(1)?, velocity)
		},
		OpKind::AdamW(hyper) => {
			let scalars = graph.adamw_scalars(hyper, step)?;
			let [param, first, second] = outs else { return Err(lost()) };
			backend.adamw(&scalars, param, input(1)?, first, second)
		},
		OpKind::Gather { row_len } => {
			let [out] = outs else { return Err(lost()) };
			backend.gather_rows(input(0)?, row_len, ids(1)?, out)
		},
		OpKind::Norm(shape) => {
			let [out, normalised] = outs else { return Err(lost()) };
			let bias = if shape.norm == Norm::Layer { Some(input(2)?) } else { None };
			backend.norm(shape, input(0)?, input(1)?, bias, out, normalised)
		},
		OpKind::NormGrad(shape) => {
			let (x, gain, dy, normalised) = (input(0)?, input(1)?, input(2)?, input(3)?);
			match outs {
				[x_grad, gain_grad] => backend.norm_backward(shape, x, gain, dy, normalised, x_grad, gain_grad, None),
				[x_grad, gain_grad, bias_grad] => backend.norm_backward(shape, x, gain, dy, normalised, x_grad, gain_grad, Some(bias_grad)),
				_ => Err(lost()),
			}
		},
		OpKind::SplitHeads(shape) => {
			let [out] = outs else { return Err(lost()) };
			backend.split_heads(shape, input(0)?, out)
		},
		OpKind::MergeHeads(shape) => {
			let [out] = outs else { return Err(lost()) };
			backend.merge_heads(shape, input(0)?, out)
		},
		OpKind::CausalSoftmax(shape) => {
			let [out] = outs else { return Err(lost()) };
			backend.causal_softmax(shape, input(0)?, out)
		},
		OpKind::CausalSoftmaxGrad(shape) => {
			let [out] = outs else { return Err(lost()) };
			backend.causal_softmax_grad(shape, input(0)?, input(1)?, out)
		},
		OpKind::ScatterAddRows { row_len, table_rows } => {
			let [out] = outs else { return Err(lost()) };
			backend.scatter_add_rows(input(0)?, row_len, ids(1)?, table_rows, out)
		},
	}
}
