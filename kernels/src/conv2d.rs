//! Two-dimensional convolution (cross-correlation), valid padding, stride 1, forward and backward.
//!
//! # Contract
//!
//! Layouts are row-major `x[N,Ci,H,W]`, `w[Co,Ci,KH,KW]`, `y[N,Co,OH,OW]` with
//! `OH = H − KH + 1`, `OW = W − KW + 1`. The bias is a separate operator
//! ([`crate::bias`]). All three passes are [`Contraction`]s, so operands are
//! rounded to 12 significant bits and flushed below 2⁻⁵², products are exact,
//! and each output is summed in 32-wide chunks along its reduction index,
//! each chunk sequentially from `+0`, the chunk sums folded sequentially from
//! `+0`. The reduction index of each pass, flattened in this order, is:
//!
//! - forward `y[n,co,oy,ox]`: `(ci, ky, kx)` over `x[n,ci,oy+ky,ox+kx]·w[co,ci,ky,kx]`;
//! - input gradient `dx[n,ci,iy,ix]`: `(co, ky, kx)` over
//!   `dy[n,co,iy−ky,ix−kx]·w[co,ci,ky,kx]`, a term whose `dy` index falls
//!   outside `dy` being `+0` (a port may skip it: adding zero changes no
//!   non-zero sum, and chunk boundaries still count it);
//! - weight gradient `dw[co,ci,ky,kx]`: `(n, oy, ox)` over
//!   `dy[n,co,oy,ox]·x[n,ci,oy+ky,ox+kx]`.

use crate::contraction::Contraction;
use crate::error::{check_nonzero, element_count, KernelError};

/// Dimensions of a valid, stride-1 convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dShape {
	/// Batch size `N`.
	pub batch: usize,
	/// Input channels `Ci`.
	pub in_channels: usize,
	/// Output channels `Co`.
	pub out_channels: usize,
	/// Input height `H`.
	pub height: usize,
	/// Input width `W`.
	pub width: usize,
	/// Kernel height `KH`.
	pub kernel_height: usize,
	/// Kernel width `KW`.
	pub kernel_width: usize,
}

/// Derived sizes of a validated [`Conv2dShape`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConvGeometry {
	/// `N·OH·OW`: output positions.
	pub positions: usize,
	/// `Ci·KH·KW`: taps of one output.
	pub taps: usize,
	/// `N·H·W`: input positions.
	pub input_positions: usize,
	/// `Co·KH·KW`: taps of one input-gradient element.
	pub transposed_taps: usize,
}

impl Conv2dShape {
	/// Output height `OH = H − KH + 1`.
	pub fn out_height(&self) -> usize {
		self.height.saturating_sub(self.kernel_height).saturating_add(1)
	}

	/// Output width `OW = W − KW + 1`.
	pub fn out_width(&self) -> usize {
		self.width.saturating_sub(self.kernel_width).saturating_add(1)
	}

	/// Validates the shape and returns its derived sizes.
	pub(crate) fn geometry(&self) -> Result<ConvGeometry, KernelError> {
		check_nonzero("batch", self.batch)?;
		check_nonzero("in_channels", self.in_channels)?;
		check_nonzero("out_channels", self.out_channels)?;
		check_nonzero("kernel_height", self.kernel_height)?;
		check_nonzero("kernel_width", self.kernel_width)?;
		if self.kernel_height > self.height || self.kernel_width > self.width {
			return Err(KernelError::KernelLargerThanInput);
		}
		self.input_len()?;
		self.weight_len()?;
		self.output_len()?;
		Ok(ConvGeometry {
			positions: element_count(&[self.batch, self.out_height(), self.out_width()])?,
			taps: element_count(&[self.in_channels, self.kernel_height, self.kernel_width])?,
			input_positions: element_count(&[self.batch, self.height, self.width])?,
			transposed_taps: element_count(&[self.out_channels, self.kernel_height, self.kernel_width])?,
		})
	}

	/// Elements of `x`.
	pub fn input_len(&self) -> Result<usize, KernelError> {
		element_count(&[self.batch, self.in_channels, self.height, self.width])
	}

	/// Elements of `w`.
	pub fn weight_len(&self) -> Result<usize, KernelError> {
		element_count(&[self.out_channels, self.in_channels, self.kernel_height, self.kernel_width])
	}

	/// Elements of `y`.
	pub fn output_len(&self) -> Result<usize, KernelError> {
		element_count(&[self.batch, self.out_channels, self.out_height(), self.out_width()])
	}

	/// `Ci·KH·KW` of a shape already validated.
	pub(crate) fn taps_unchecked(&self) -> usize {
		self.in_channels * self.kernel_height * self.kernel_width
	}

	/// Splits a flattened `(a, b, c)` index with extents `(_, b_len, c_len)`.
	fn split3(index: usize, b_len: usize, c_len: usize) -> (usize, usize, usize) {
		(index / (b_len * c_len), (index / c_len) % b_len, index % c_len)
	}

	/// Index into `x` read by output position `position = (n, oy, ox)` at tap `tap = (ci, ky, kx)`.
	pub(crate) fn input_index_at(&self, position: usize, tap: usize) -> usize {
		let (n, oy, ox) = Self::split3(position, self.out_height(), self.out_width());
		let (ci, ky, kx) = Self::split3(tap, self.kernel_height, self.kernel_width);
		((n * self.in_channels + ci) * self.height + oy + ky) * self.width + ox + kx
	}

	/// Index into `y` (or `dy`) of output position `(n, oy, ox)` and channel `co`.
	pub(crate) fn output_index(&self, position: usize, out_channel: usize) -> usize {
		let (out_height, out_width) = (self.out_height(), self.out_width());
		let (n, oy, ox) = Self::split3(position, out_height, out_width);
		((n * self.out_channels + out_channel) * out_height + oy) * out_width + ox
	}

	/// Index into `w` of output channel `co` and tap `(ci, ky, kx)`.
	pub(crate) fn weight_index(&self, out_channel: usize, tap: usize) -> usize {
		out_channel * self.taps_unchecked() + tap
	}

	/// Index into `x` (or `dx`) of input position `(n, iy, ix)` and channel `ci`.
	pub(crate) fn input_index(&self, input_position: usize, in_channel: usize) -> usize {
		let (n, iy, ix) = Self::split3(input_position, self.height, self.width);
		((n * self.in_channels + in_channel) * self.height + iy) * self.width + ix
	}

	/// Index into `dy` of `dy[n, co, iy − ky, ix − kx]` for input position
	/// `(n, iy, ix)` and transposed tap `(co, ky, kx)`, or `None` outside `dy`.
	pub(crate) fn output_grad_index_for_input(&self, input_position: usize, transposed_tap: usize) -> Option<usize> {
		let (n, iy, ix) = Self::split3(input_position, self.height, self.width);
		let (co, ky, kx) = Self::split3(transposed_tap, self.kernel_height, self.kernel_width);
		let (out_height, out_width) = (self.out_height(), self.out_width());
		let oy = iy.checked_sub(ky).filter(|&oy| oy < out_height)?;
		let ox = ix.checked_sub(kx).filter(|&ox| ox < out_width)?;
		Some(((n * self.out_channels + co) * out_height + oy) * out_width + ox)
	}

	/// Index into `w` of `w[co, ci, ky, kx]` for transposed tap `(co, ky, kx)` and channel `ci`.
	pub(crate) fn weight_index_for_input_grad(&self, transposed_tap: usize, in_channel: usize) -> usize {
		let (co, ky, kx) = Self::split3(transposed_tap, self.kernel_height, self.kernel_width);
		((co * self.in_channels + in_channel) * self.kernel_height + ky) * self.kernel_width + kx
	}
}

/// `y = conv2d(x, w)`: valid padding, stride 1, no bias.
pub fn conv2d(shape: Conv2dShape, input: &[f32], weight: &[f32], output: &mut [f32]) -> Result<(), KernelError> {
	Contraction::Conv2d(shape).compute(input, weight, output)
}

/// `dx` from `dy` and `w`: the gradient of [`conv2d`] with respect to its input.
pub fn conv2d_input_grad(
	shape: Conv2dShape,
	output_grad: &[f32],
	weight: &[f32],
	input_grad: &mut [f32],
) -> Result<(), KernelError> {
	Contraction::Conv2dInputGrad(shape).compute(output_grad, weight, input_grad)
}

/// `dw` from `dy` and `x`: the gradient of [`conv2d`] with respect to its weight.
pub fn conv2d_weight_grad(
	shape: Conv2dShape,
	output_grad: &[f32],
	input: &[f32],
	weight_grad: &mut [f32],
) -> Result<(), KernelError> {
	Contraction::Conv2dWeightGrad(shape).compute(output_grad, input, weight_grad)
}
