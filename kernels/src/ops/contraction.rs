//! Chunked contractions: the one engine behind matmul and convolution, forward and backward.
//!
//! # Contract
//!
//! A contraction views its operator as a matrix product `out[i][j] = Σₖ a(i,k)·b(k,j)`
//! over `rows × cols` outputs and `depth` reduction steps, where `a` and `b`
//! read the operator's two input tensors through fixed index maps (see
//! [`Contraction`]); an index that falls outside a tensor (the border of a
//! convolution's input gradient) reads zero.
//!
//! - Every operand is rounded by [`quantize_operand`] to 12 significant bits and
//!   flushed below 2⁻⁵², so every product is exact in `f32` and a multiple of
//!   2⁻¹²⁶: fusing a product into the following addition (FMA contraction, which
//!   NVIDIA drivers may do and lavapipe never does) cannot change any bit, and
//!   no sum ever becomes subnormal.
//! - Along k, the reduction runs in chunks of [`CHUNK`] = 32: chunk `c` covers
//!   `k ∈ [32c, 32c + 32)` and its partial sum is accumulated sequentially in
//!   increasing k from `+0`, with `f32` accumulation. The partial sums are then
//!   folded sequentially in increasing `c`, again from `+0`. No split-K, no
//!   atomics, no other tree: a device may tile the outputs and parallelise
//!   across them freely, but each output element follows exactly this order.
//! - Outputs are not flushed: sums of grid values stay on the grid.
//!
//! # Chunks
//!
//! For disputes, the outputs are cut into [`TILE`]×[`TILE`] tiles (in the view's
//! `rows × cols` coordinates) and the depth into K-chunks. [`Contraction::chunk`]
//! recomputes the partial sums of one tile and one K-chunk from the inputs
//! alone; [`chunk_partial_sums`] does the same from the gathered operand blocks,
//! which is all the referee holds; [`fold_chunk_partials`] turns a tile's
//! partial sums into its outputs. Folding every chunk reproduces
//! [`Contraction::compute`] bit for bit, which the tests check.

use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

use crate::arith::{chunk_count, CHUNK, TILE};
use crate::error::{check_len, check_nonzero, element_count, KernelError};
use crate::ops::gemm::{self, Operand};

/// An operator whose every output is a chunked dot product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contraction {
	/// `out = op(lhs) · op(rhs)`: rows `m`, columns `n`, depth `k`;
	/// `a(i,k) = lhs[i·k + k]` (or `lhs[k·m + i]` transposed),
	/// `b(k,j) = rhs[k·n + j]` (or `rhs[j·k + k]` transposed), `out[i·n + j]`.
	Matmul {
		/// The product's dimensions.
		shape: MatmulShape,
		/// Which operands are stored transposed.
		layout: MatmulLayout,
	},
	/// `blocks` matmuls of one shape and layout, block by block: lhs is `blocks` operands
	/// of `m·k`, rhs `blocks` of `k·n`, the output `blocks` products of `m·n`. Rows are
	/// `(block, i)` (`blocks·m` of them), columns `j`, depth `k`; `a` and `b` read the
	/// row's block. A tile never straddles two blocks: each block's rows are tiled from its
	/// own first row. Attention's `Q·Kᵀ`, `P·V` and their gradients.
	BatchedMatmul {
		/// Independent products.
		blocks: usize,
		/// Each product's dimensions.
		shape: MatmulShape,
		/// Which operands are stored transposed, in every block.
		layout: MatmulLayout,
	},
	/// Convolution forward: lhs is the input `x[N,Ci,H,W]`, rhs the weight
	/// `w[Co,Ci,KH,KW]`, the output `y[N,Co,OH,OW]`. Rows are output positions
	/// `(n, oy, ox)`, columns output channels `co`, depth `(ci, ky, kx)`, each
	/// flattened in that order.
	Conv2d(Conv2dShape),
	/// Convolution input gradient: lhs is `dy[N,Co,OH,OW]`, rhs the weight, the
	/// output `dx[N,Ci,H,W]`. Rows are input positions `(n, iy, ix)`, columns
	/// input channels `ci`, depth `(co, ky, kx)`; `a` reads
	/// `dy[n, co, iy − ky, ix − kx]`, or zero where that lies outside `dy`.
	Conv2dInputGrad(Conv2dShape),
	/// Convolution weight gradient: lhs is `dy`, rhs the input `x`, the output
	/// `dw[Co,Ci,KH,KW]`. Rows are `co`, columns `(ci, ky, kx)`, depth the
	/// output positions `(n, oy, ox)`.
	Conv2dWeightGrad(Conv2dShape),
}

/// The matrix-product view of a contraction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContractionDims {
	/// Output rows.
	pub rows: usize,
	/// Output columns.
	pub cols: usize,
	/// Reduction length.
	pub depth: usize,
}

/// One piece of a contraction: an output tile and a K-chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChunkId {
	/// Tile index along the rows.
	pub tile_row: usize,
	/// Tile index along the columns.
	pub tile_col: usize,
	/// K-chunk index.
	pub chunk: usize,
}

/// How many tiles and K-chunks a contraction has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkGrid {
	/// Tiles along the rows.
	pub tile_rows: usize,
	/// Tiles along the columns.
	pub tile_cols: usize,
	/// K-chunks along the depth.
	pub chunks: usize,
}

/// Where one [`ChunkId`] lies in the matrix-product view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkExtent {
	/// Output rows of the tile.
	pub rows: Range<usize>,
	/// Output columns of the tile.
	pub cols: Range<usize>,
	/// Depth indices of the K-chunk.
	pub depth: Range<usize>,
}

impl ChunkGrid {
	/// Number of `(tile, chunk)` pieces.
	pub fn len(&self) -> usize {
		self.tile_rows.saturating_mul(self.tile_cols).saturating_mul(self.chunks)
	}

	/// Whether the grid has no pieces (never, for a validated contraction).
	pub fn is_empty(&self) -> bool {
		self.len() == 0
	}

	/// `ChunkOutOfRange` unless `id` lies inside the grid.
	pub fn check(&self, id: ChunkId) -> Result<(), KernelError> {
		let coordinates = [
			("tile_row", id.tile_row, self.tile_rows),
			("tile_col", id.tile_col, self.tile_cols),
			("chunk", id.chunk, self.chunks),
		];
		for (coordinate, index, count) in coordinates {
			if index >= count {
				return Err(KernelError::ChunkOutOfRange { coordinate, index, count });
			}
		}
		Ok(())
	}
}

/// The `TILE`- or `CHUNK`-wide range number `index` of `0..len`.
fn block_range(index: usize, width: usize, len: usize) -> Range<usize> {
	let start = index.saturating_mul(width).min(len);
	start..start.saturating_add(width).min(len)
}

impl Contraction {
	/// Validates the shape and returns the matrix-product view.
	pub fn dims(&self) -> Result<ContractionDims, KernelError> {
		let dims = match self {
			Self::Matmul { shape, .. } => {
				check_nonzero("m", shape.m)?;
				check_nonzero("k", shape.k)?;
				check_nonzero("n", shape.n)?;
				ContractionDims { rows: shape.m, cols: shape.n, depth: shape.k }
			},
			Self::BatchedMatmul { blocks, shape, .. } => {
				check_nonzero("blocks", *blocks)?;
				check_nonzero("m", shape.m)?;
				check_nonzero("k", shape.k)?;
				check_nonzero("n", shape.n)?;
				ContractionDims { rows: element_count(&[*blocks, shape.m])?, cols: shape.n, depth: shape.k }
			},
			Self::Conv2d(shape) => {
				let geometry = shape.geometry()?;
				ContractionDims { rows: geometry.positions, cols: shape.out_channels, depth: geometry.taps }
			},
			Self::Conv2dInputGrad(shape) => {
				let geometry = shape.geometry()?;
				ContractionDims {
					rows: geometry.input_positions,
					cols: shape.in_channels,
					depth: geometry.transposed_taps,
				}
			},
			Self::Conv2dWeightGrad(shape) => {
				let geometry = shape.geometry()?;
				ContractionDims { rows: shape.out_channels, cols: geometry.taps, depth: geometry.positions }
			},
		};
		element_count(&[dims.rows, dims.depth])?;
		element_count(&[dims.depth, dims.cols])?;
		element_count(&[dims.rows, dims.cols])?;
		Ok(dims)
	}

	/// Elements of the left input tensor.
	pub fn lhs_len(&self) -> Result<usize, KernelError> {
		match self {
			Self::Matmul { shape, .. } => element_count(&[shape.m, shape.k]),
			Self::BatchedMatmul { blocks, shape, .. } => element_count(&[*blocks, shape.m, shape.k]),
			Self::Conv2d(shape) => shape.input_len(),
			Self::Conv2dInputGrad(shape) | Self::Conv2dWeightGrad(shape) => shape.output_len(),
		}
	}

	/// Elements of the right input tensor.
	pub fn rhs_len(&self) -> Result<usize, KernelError> {
		match self {
			Self::Matmul { shape, .. } => element_count(&[shape.k, shape.n]),
			Self::BatchedMatmul { blocks, shape, .. } => element_count(&[*blocks, shape.k, shape.n]),
			Self::Conv2d(shape) | Self::Conv2dInputGrad(shape) => shape.weight_len(),
			Self::Conv2dWeightGrad(shape) => shape.input_len(),
		}
	}

	/// Elements of the output tensor.
	pub fn output_len(&self) -> Result<usize, KernelError> {
		let dims = self.dims()?;
		element_count(&[dims.rows, dims.cols])
	}

	/// The contraction of one block and the number of blocks: a batched matmul's matmul,
	/// or the contraction itself and 1.
	pub fn per_block(&self) -> (Self, usize) {
		match *self {
			Self::BatchedMatmul { blocks, shape, layout } => (Self::Matmul { shape, layout }, blocks),
			other => (other, 1),
		}
	}

	/// The tiles and K-chunks of this contraction.
	pub fn grid(&self) -> Result<ChunkGrid, KernelError> {
		let dims = self.dims()?;
		if let Self::BatchedMatmul { blocks, shape, .. } = self {
			return Ok(ChunkGrid {
				tile_rows: element_count(&[*blocks, shape.m.div_ceil(TILE)])?,
				tile_cols: dims.cols.div_ceil(TILE),
				chunks: chunk_count(dims.depth),
			});
		}
		Ok(ChunkGrid {
			tile_rows: dims.rows.div_ceil(TILE),
			tile_cols: dims.cols.div_ceil(TILE),
			chunks: chunk_count(dims.depth),
		})
	}

	/// The rows, columns and depth that `id` covers, after checking it is in range.
	pub fn extent(&self, id: ChunkId) -> Result<ChunkExtent, KernelError> {
		let dims = self.dims()?;
		self.grid()?.check(id)?;
		let rows = match self {
			// A block's rows are tiled from its own first row.
			Self::BatchedMatmul { shape, .. } => {
				let per_block = shape.m.div_ceil(TILE);
				let local = block_range(id.tile_row % per_block, TILE, shape.m);
				let first = id.tile_row / per_block * shape.m;
				first + local.start..first + local.end
			},
			_ => block_range(id.tile_row, TILE, dims.rows),
		};
		Ok(ChunkExtent {
			rows,
			cols: block_range(id.tile_col, TILE, dims.cols),
			depth: block_range(id.chunk, CHUNK, dims.depth),
		})
	}

	/// The piece of K-chunk `chunk` of the tile holding output `(row, col)`.
	pub fn tile_at(&self, row: usize, col: usize, chunk: usize) -> ChunkId {
		let tile_row = match self {
			Self::BatchedMatmul { shape, .. } if shape.m > 0 => row / shape.m * shape.m.div_ceil(TILE) + row % shape.m / TILE,
			_ => row / TILE,
		};
		ChunkId { tile_row, tile_col: col / TILE, chunk }
	}

	/// Index into the left input of `a(row, k)`, or `None` where `a` reads zero.
	///
	/// Meaningful for `row < rows` and `k < depth` of a validated contraction.
	pub fn lhs_index(&self, row: usize, k: usize) -> Option<usize> {
		match self {
			Self::Matmul { shape, layout } => {
				Some(if layout.lhs_transposed { k * shape.m + row } else { row * shape.k + k })
			},
			Self::BatchedMatmul { shape, layout, .. } => {
				let (block, i) = (row / shape.m, row % shape.m);
				Some(block * shape.m * shape.k + if layout.lhs_transposed { k * shape.m + i } else { i * shape.k + k })
			},
			Self::Conv2d(shape) => Some(shape.input_index_at(row, k)),
			Self::Conv2dInputGrad(shape) => shape.output_grad_index_for_input(row, k),
			Self::Conv2dWeightGrad(shape) => Some(shape.output_index(k, row)),
		}
	}

	/// Index into the right input of `b(k, col)` for output row `row` (which only a batched
	/// matmul reads: the block whose operand `b` is).
	///
	/// Meaningful for `row < rows`, `k < depth` and `col < cols` of a validated contraction.
	pub fn rhs_index(&self, row: usize, k: usize, col: usize) -> Option<usize> {
		match self {
			Self::Matmul { shape, layout } => {
				Some(if layout.rhs_transposed { col * shape.k + k } else { k * shape.n + col })
			},
			Self::BatchedMatmul { shape, layout, .. } => {
				let block = row / shape.m;
				Some(block * shape.k * shape.n + if layout.rhs_transposed { col * shape.k + k } else { k * shape.n + col })
			},
			Self::Conv2d(shape) => Some(shape.weight_index(col, k)),
			Self::Conv2dInputGrad(shape) => Some(shape.weight_index_for_input_grad(k, col)),
			Self::Conv2dWeightGrad(shape) => Some(shape.input_index_at(k, col)),
		}
	}

	/// Index into the output of `out[row][col]`.
	///
	/// Meaningful for `row < rows` and `col < cols` of a validated contraction.
	pub fn output_index(&self, row: usize, col: usize) -> usize {
		match self {
			Self::Matmul { shape, .. } | Self::BatchedMatmul { shape, .. } => row * shape.n + col,
			Self::Conv2d(shape) => shape.output_index(row, col),
			Self::Conv2dInputGrad(shape) => shape.input_index(row, col),
			Self::Conv2dWeightGrad(shape) => row * shape.taps_unchecked() + col,
		}
	}

	/// Checks the three slice lengths against the shape; returns the view.
	fn validate(&self, lhs: &[f32], rhs: &[f32], out_len: Option<usize>) -> Result<ContractionDims, KernelError> {
		let dims = self.dims()?;
		check_len("lhs", lhs.len(), self.lhs_len()?)?;
		check_len("rhs", rhs.len(), self.rhs_len()?)?;
		if let Some(out_len) = out_len {
			check_len("out", out_len, self.output_len()?)?;
		}
		Ok(dims)
	}

	/// Computes the whole operator into `out`.
	///
	/// The work runs in [`crate::ops::gemm`]'s packed, register-blocked kernels (and,
	/// with `std`, on several threads), which keep every output's order of
	/// additions exactly as the module docs state.
	pub fn compute(&self, lhs: &[f32], rhs: &[f32], out: &mut [f32]) -> Result<(), KernelError> {
		let dims = self.validate(lhs, rhs, Some(out.len()))?;
		let (single, blocks) = self.per_block();
		if blocks > 1 {
			let (lhs_len, rhs_len, out_len) = (single.lhs_len()?, single.rhs_len()?, single.output_len()?);
			for ((lhs, rhs), out) in lhs.chunks_exact(lhs_len).zip(rhs.chunks_exact(rhs_len)).zip(out.chunks_exact_mut(out_len)) {
				single.compute(lhs, rhs, out)?;
			}
			return Ok(());
		}
		let (a, b) = (single.lhs_operand(lhs, dims), single.rhs_operand(rhs, dims));
		if matches!(single, Self::Matmul { .. }) {
			// The output index map is the identity: accumulate in place.
			gemm::contract(&a, &b, dims.rows, dims.cols, dims.depth, out);
			return Ok(());
		}
		let mut staged = vec![0.0f32; out.len()];
		gemm::contract(&a, &b, dims.rows, dims.cols, dims.depth, &mut staged);
		// Every convolution's output index is `output_index(row, 0) +
		// output_index(0, col)`: scatter with the two parts precomputed.
		let col_offsets: Vec<usize> = (0..dims.cols).map(|col| self.output_index(0, col)).collect();
		for (row, values) in staged.chunks_exact(dims.cols).enumerate() {
			let base = self.output_index(row, 0);
			for (&value, &offset) in values.iter().zip(&col_offsets) {
				if let Some(slot) = out.get_mut(base + offset) {
					*slot = value;
				}
			}
		}
		Ok(())
	}

	/// How the engine reads `a(row, k)` from the left input: the same values
	/// as [`Contraction::lhs_index`], with the index arithmetic hoisted out of
	/// the per-element loop.
	fn lhs_operand<'a>(&self, lhs: &'a [f32], dims: ContractionDims) -> Operand<'a> {
		match self {
			// One block's operand (`compute` runs a batched matmul block by block).
			Self::Matmul { shape, layout } | Self::BatchedMatmul { shape, layout, .. } if layout.lhs_transposed => {
				Operand::Strided { values: lhs, line_stride: 1, depth_stride: shape.m }
			},
			Self::Matmul { shape, .. } | Self::BatchedMatmul { shape, .. } => {
				Operand::Strided { values: lhs, line_stride: shape.k, depth_stride: 1 }
			},
			// x[n, ci, oy + ky, ox + kx] sits at index(position, 0) + index(0, tap).
			Self::Conv2d(shape) => Operand::Separable {
				values: lhs,
				lines: (0..dims.rows).map(|position| shape.input_index_at(position, 0)).collect(),
				depths: (0..dims.depth).map(|tap| shape.input_index_at(0, tap)).collect(),
			},
			Self::Conv2dInputGrad(shape) => {
				let (out_height, out_width) = (shape.out_height(), shape.out_width());
				let plane = out_height * out_width;
				let (kernel_height, kernel_width) = (shape.kernel_height, shape.kernel_width);
				Operand::Shifted {
					values: lhs,
					height: out_height,
					width: out_width,
					lines: (0..dims.rows)
						.map(|position| {
							let (n, iy, ix) = (
								position / (shape.height * shape.width),
								position / shape.width % shape.height,
								position % shape.width,
							);
							(n * shape.out_channels * plane + iy * out_width + ix, iy, ix)
						})
						.collect(),
					depths: (0..dims.depth)
						.map(|tap| {
							let (co, ky, kx) = (
								tap / (kernel_height * kernel_width),
								tap / kernel_width % kernel_height,
								tap % kernel_width,
							);
							(co * plane, ky, kx)
						})
						.collect(),
				}
			},
			// dy[n, co, oy, ox] sits at index(position, 0) + index(0, co).
			Self::Conv2dWeightGrad(shape) => Operand::Separable {
				values: lhs,
				lines: (0..dims.rows).map(|channel| shape.output_index(0, channel)).collect(),
				depths: (0..dims.depth).map(|position| shape.output_index(position, 0)).collect(),
			},
		}
	}

	/// How the engine reads `b(k, col)` from the right input: the values of
	/// [`Contraction::rhs_index`].
	fn rhs_operand<'a>(&self, rhs: &'a [f32], dims: ContractionDims) -> Operand<'a> {
		match self {
			Self::Matmul { shape, layout } | Self::BatchedMatmul { shape, layout, .. } if layout.rhs_transposed => {
				Operand::Strided { values: rhs, line_stride: shape.k, depth_stride: 1 }
			},
			Self::Matmul { shape, .. } | Self::BatchedMatmul { shape, .. } => {
				Operand::Strided { values: rhs, line_stride: 1, depth_stride: shape.n }
			},
			Self::Conv2d(_) => Operand::Strided { values: rhs, line_stride: dims.depth, depth_stride: 1 },
			// w[co, ci, ky, kx] sits at index(tap, 0) + index(0, ci).
			Self::Conv2dInputGrad(shape) => Operand::Separable {
				values: rhs,
				lines: (0..dims.cols).map(|channel| shape.weight_index_for_input_grad(0, channel)).collect(),
				depths: (0..dims.depth).map(|tap| shape.weight_index_for_input_grad(tap, 0)).collect(),
			},
			Self::Conv2dWeightGrad(shape) => Operand::Separable {
				values: rhs,
				lines: (0..dims.cols).map(|tap| shape.input_index_at(0, tap)).collect(),
				depths: (0..dims.depth).map(|position| shape.input_index_at(position, 0)).collect(),
			},
		}
	}

	/// The raw (unquantized) left operand block of `id`: tile rows × chunk depth,
	/// row-major, zero where `a` reads zero. These are the values a referee needs
	/// proven against the input commitment.
	pub fn lhs_block(&self, lhs: &[f32], id: ChunkId) -> Result<Vec<f32>, KernelError> {
		check_len("lhs", lhs.len(), self.lhs_len()?)?;
		let extent = self.extent(id)?;
		Ok(gather(lhs, extent.rows, extent.depth, |row, k| self.lhs_index(row, k)))
	}

	/// The raw right operand block of `id`: chunk depth × tile columns, row-major.
	pub fn rhs_block(&self, rhs: &[f32], id: ChunkId) -> Result<Vec<f32>, KernelError> {
		check_len("rhs", rhs.len(), self.rhs_len()?)?;
		let extent = self.extent(id)?;
		let row = extent.rows.start;
		Ok(gather(rhs, extent.depth, extent.cols, |k, col| self.rhs_index(row, k, col)))
	}

	/// The partial sums of tile `id` over its K-chunk, row-major over the tile,
	/// recomputed from the full inputs.
	pub fn chunk(&self, lhs: &[f32], rhs: &[f32], id: ChunkId) -> Result<Vec<f32>, KernelError> {
		self.validate(lhs, rhs, None)?;
		let extent = self.extent(id)?;
		let lhs_block = self.lhs_block(lhs, id)?;
		let rhs_block = self.rhs_block(rhs, id)?;
		chunk_partial_sums(&lhs_block, &rhs_block, extent.rows.len(), extent.cols.len(), extent.depth.len())
	}
}

/// Reads `source` through `index` over `rows × cols`, row-major.
///
/// Indices are in range once the caller has validated the lengths; a missing
/// one reads zero rather than panicking.
fn gather(
	source: &[f32],
	rows: Range<usize>,
	cols: Range<usize>,
	index: impl Fn(usize, usize) -> Option<usize>,
) -> Vec<f32> {
	let mut block = Vec::with_capacity(rows.len().saturating_mul(cols.len()));
	for row in rows {
		for col in cols.clone() {
			block.push(index(row, col).and_then(|at| source.get(at)).copied().unwrap_or_default());
		}
	}
	block
}

/// The partial sums of one tile over one K-chunk: `out[i][j] = Σₖ q(a[i][k])·q(b[k][j])`,
/// summed in increasing k from `+0`, with `q` = [`quantize_operand`].
///
/// `lhs_block` is `rows × depth` and `rhs_block` `depth × cols`, both row-major
/// and unquantized; `depth` must not exceed [`CHUNK`]. This is the function the
/// referee runs.
pub fn chunk_partial_sums(
	lhs_block: &[f32],
	rhs_block: &[f32],
	rows: usize,
	cols: usize,
	depth: usize,
) -> Result<Vec<f32>, KernelError> {
	if depth > CHUNK {
		return Err(KernelError::ChunkTooDeep { depth });
	}
	check_nonzero("rows", rows)?;
	check_nonzero("cols", cols)?;
	check_nonzero("depth", depth)?;
	check_len("lhs_block", lhs_block.len(), element_count(&[rows, depth])?)?;
	check_len("rhs_block", rhs_block.len(), element_count(&[depth, cols])?)?;
	let mut out = vec![0.0f32; element_count(&[rows, cols])?];
	let a = Operand::Strided { values: lhs_block, line_stride: depth, depth_stride: 1 };
	let b = Operand::Strided { values: rhs_block, line_stride: 1, depth_stride: cols };
	gemm::contract(&a, &b, rows, cols, depth, &mut out);
	Ok(out)
}

/// Folds a tile's per-chunk partial sums, given in chunk order, into its
/// outputs: `out[e] = ((+0 + p₀[e]) + p₁[e]) + …`.
pub fn fold_chunk_partials<'a>(
	partials: impl IntoIterator<Item = &'a [f32]>,
	len: usize,
) -> Result<Vec<f32>, KernelError> {
	let mut out = vec![0.0f32; len];
	for partial in partials {
		check_len("partial", partial.len(), len)?;
		for (acc, &value) in out.iter_mut().zip(partial) {
			*acc += value;
		}
	}
	Ok(out)
}

/// Dimensions of `C[m×n] = A[m×k] · B[k×n]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatmulShape {
	/// Rows of `A` and `C`.
	pub m: usize,
	/// Columns of `A`, rows of `B`: the reduction length.
	pub k: usize,
	/// Columns of `B` and `C`.
	pub n: usize,
}

/// How the operands of a matmul are stored (all row-major).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatmulLayout {
	/// `A` is stored as its `k×m` transpose.
	pub lhs_transposed: bool,
	/// `B` is stored as its `n×k` transpose.
	pub rhs_transposed: bool,
}

impl MatmulShape {
	/// The contraction computing `C = A · B` with operands stored as `layout` says.
	pub fn contraction(self, layout: MatmulLayout) -> Contraction {
		Contraction::Matmul { shape: self, layout }
	}

	/// The contraction computing `dA = dC · Bᵀ` for a plain-layout forward pass:
	/// its lhs is `dC` (m×n) and its rhs is `B` (k×n, read transposed).
	pub fn lhs_grad_contraction(self) -> Contraction {
		let shape = MatmulShape { m: self.m, k: self.n, n: self.k };
		shape.contraction(MatmulLayout { lhs_transposed: false, rhs_transposed: true })
	}

	/// The contraction computing `dB = Aᵀ · dC` for a plain-layout forward pass:
	/// its lhs is `A` (m×k, read transposed) and its rhs is `dC` (m×n).
	pub fn rhs_grad_contraction(self) -> Contraction {
		let shape = MatmulShape { m: self.k, k: self.m, n: self.n };
		shape.contraction(MatmulLayout { lhs_transposed: true, rhs_transposed: false })
	}
}

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

/// The matmul shape of the pinned contract vectors (`tests/contract_vectors.rs`),
/// which every backend's conformance check reuses: no size is a multiple of a tile.
pub const VECTOR_MATMUL: MatmulShape = MatmulShape { m: 37, k: 70, n: 45 };

/// The convolution shape of the pinned contract vectors, shared as [`VECTOR_MATMUL`] is:
/// odd sizes and a non-square kernel.
pub const VECTOR_CONV: Conv2dShape = Conv2dShape {
	batch: 3,
	in_channels: 4,
	out_channels: 6,
	height: 11,
	width: 9,
	kernel_height: 3,
	kernel_width: 4,
};
