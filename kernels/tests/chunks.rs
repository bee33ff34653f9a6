//! Property tests over random shapes (most not multiples of the 32-wide tiles
//! and chunks): chunk recomputation reproduces the operator bit for bit, the
//! grid invariant holds, and the operators stay close to exact math.

mod common;

use common::*;
use proptest::prelude::*;
use touchstone_kernels::arith::{canonical_bits, chunked_sum, CHUNK};
use touchstone_kernels::*;

/// Whether `value` is a multiple of 2⁻¹²⁶ (the contract's grid: never subnormal).
fn on_grid(value: f32) -> bool {
	let scaled = f64::from(value) * 2f64.powi(126);
	scaled == scaled.trunc()
}

/// Canonical bits of every element, for bit-exact comparisons that ignore zero signs.
fn bits(values: &[f32]) -> Vec<u32> {
	values.iter().map(|&v| canonical_bits(v)).collect()
}

/// Recomputes `contraction` chunk by chunk, folds each tile and scatters it;
/// asserts the result equals `compute` bit for bit, and that the block-level
/// chunk function agrees with the tensor-level one.
fn assert_chunks_reproduce(contraction: Contraction, lhs: &[f32], rhs: &[f32]) -> Result<(), TestCaseError> {
	let mut expected = vec![0.0; contraction.output_len().unwrap()];
	contraction.compute(lhs, rhs, &mut expected).unwrap();
	prop_assert!(expected.iter().all(|&v| on_grid(v)), "output off the 2^-126 grid");
	let grid = contraction.grid().unwrap();
	let mut rebuilt = vec![f32::NAN; expected.len()];
	for tile_row in 0..grid.tile_rows {
		for tile_col in 0..grid.tile_cols {
			let mut partials = Vec::new();
			let mut extent = None;
			for chunk in 0..grid.chunks {
				let id = ChunkId { tile_row, tile_col, chunk };
				let partial = contraction.chunk(lhs, rhs, id).unwrap();
				let this_extent = contraction.extent(id).unwrap();
				let from_blocks = chunk_partial_sums(
					&contraction.lhs_block(lhs, id).unwrap(),
					&contraction.rhs_block(rhs, id).unwrap(),
					this_extent.rows.len(),
					this_extent.cols.len(),
					this_extent.depth.len(),
				)
				.unwrap();
				prop_assert_eq!(bits(&partial), bits(&from_blocks));
				extent = Some(this_extent);
				partials.push(partial);
			}
			let extent = extent.unwrap();
			let tile =
				fold_chunk_partials(partials.iter().map(Vec::as_slice), extent.rows.len() * extent.cols.len()).unwrap();
			for (offset, &value) in tile.iter().enumerate() {
				let row = extent.rows.start + offset / extent.cols.len();
				let col = extent.cols.start + offset % extent.cols.len();
				rebuilt[contraction.output_index(row, col)] = value;
				// Every output finds its tile again, as the referee locates a segment's tiles.
				prop_assert_eq!(contraction.tile_at(row, col, grid.chunks - 1), ChunkId { tile_row, tile_col, chunk: grid.chunks - 1 });
			}
		}
	}
	prop_assert_eq!(bits(&rebuilt), bits(&expected));
	Ok(())
}

fn matmul_case() -> impl Strategy<Value = (MatmulShape, MatmulLayout, u64)> {
	(1usize..=80, 1usize..=100, 1usize..=80, any::<bool>(), any::<bool>(), any::<u64>()).prop_map(
		|(m, k, n, lhs_transposed, rhs_transposed, seed)| {
			(MatmulShape { m, k, n }, MatmulLayout { lhs_transposed, rhs_transposed }, seed)
		},
	)
}

fn conv_case() -> impl Strategy<Value = (Conv2dShape, u64)> {
	(1usize..=3, 1usize..=4, 1usize..=5, 1usize..=10, 1usize..=10, any::<u64>()).prop_flat_map(
		|(batch, in_channels, out_channels, height, width, seed)| {
			(1..=height, 1..=width).prop_map(move |(kernel_height, kernel_width)| {
				let shape =
					Conv2dShape { batch, in_channels, out_channels, height, width, kernel_height, kernel_width };
				(shape, seed)
			})
		},
	)
}

proptest! {
	#![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

	#[test]
	fn matmul_chunks_reproduce_the_operator((shape, layout, seed) in matmul_case()) {
		let lhs = random_values(seed, shape.m * shape.k, -3.0, 3.0);
		let rhs = random_values(seed ^ 1, shape.k * shape.n, -3.0, 3.0);
		assert_chunks_reproduce(shape.contraction(layout), &lhs, &rhs)?;
	}

	/// A batched matmul's tiles stay inside their block (a block's rows tiled from its first
	/// row, `m` mostly not a multiple of 32), and its chunks rebuild every block's product.
	#[test]
	fn batched_matmul_chunks_reproduce_the_operator((shape, layout, seed) in matmul_case(), blocks in 1usize..=4) {
		let lhs = random_values(seed, blocks * shape.m * shape.k, -3.0, 3.0);
		let rhs = random_values(seed ^ 1, blocks * shape.k * shape.n, -3.0, 3.0);
		let contraction = Contraction::BatchedMatmul { blocks, shape, layout };
		assert_chunks_reproduce(contraction, &lhs, &rhs)?;
		let grid = contraction.grid().unwrap();
		prop_assert_eq!(grid.tile_rows, blocks * shape.m.div_ceil(32));
		for tile_row in 0..grid.tile_rows {
			let rows = contraction.extent(ChunkId { tile_row, tile_col: 0, chunk: 0 }).unwrap().rows;
			prop_assert_eq!(rows.start / shape.m, (rows.end - 1) / shape.m, "tile {} straddles two blocks", tile_row);
		}
		// Block by block, the same bits as the matmul of that block alone.
		let mut out = vec![0.0; blocks * shape.m * shape.n];
		contraction.compute(&lhs, &rhs, &mut out).unwrap();
		let single = shape.contraction(layout);
		for block in 0..blocks {
			let mut alone = vec![0.0; shape.m * shape.n];
			let (l, r) = (shape.m * shape.k, shape.k * shape.n);
			single.compute(&lhs[block * l..][..l], &rhs[block * r..][..r], &mut alone).unwrap();
			prop_assert_eq!(bits(&out[block * alone.len()..][..alone.len()]), bits(&alone));
		}
	}

	#[test]
	fn conv_chunks_reproduce_every_pass((shape, seed) in conv_case()) {
		let x = random_values(seed, shape.input_len().unwrap(), -2.0, 2.0);
		let w = random_values(seed ^ 1, shape.weight_len().unwrap(), -2.0, 2.0);
		let dy = random_values(seed ^ 2, shape.output_len().unwrap(), -2.0, 2.0);
		assert_chunks_reproduce(Contraction::Conv2d(shape), &x, &w)?;
		assert_chunks_reproduce(Contraction::Conv2dInputGrad(shape), &dy, &w)?;
		assert_chunks_reproduce(Contraction::Conv2dWeightGrad(shape), &dy, &x)?;
	}

	#[test]
	fn matmul_is_close_to_exact_math((shape, _, seed) in matmul_case()) {
		let MatmulShape { m, k, n } = shape;
		let a = random_values(seed, m * k, -10.0, 10.0);
		let b = random_values(seed ^ 1, k * n, -1e-3, 1e-3);
		let (expected, scale) = matmul_f64(&widen(&a), &widen(&b), m, k, n);
		let mut out = vec![0.0; m * n];
		matmul(shape, MatmulLayout::default(), &a, &b, &mut out).unwrap();
		assert_within("matmul", &out, &expected, &contraction_tolerance(&scale));
	}

	#[test]
	fn conv_is_close_to_exact_math((shape, seed) in conv_case()) {
		let x = random_values(seed, shape.input_len().unwrap(), -2.0, 2.0);
		let w = random_values(seed ^ 1, shape.weight_len().unwrap(), -2.0, 2.0);
		let (expected, scale) = conv2d_f64(&shape, &widen(&x), &widen(&w));
		let mut y = vec![0.0; shape.output_len().unwrap()];
		conv2d(shape, &x, &w, &mut y).unwrap();
		assert_within("conv2d", &y, &expected, &contraction_tolerance(&scale));
	}

	#[test]
	fn bias_grad_is_a_chunked_sum_per_channel(outer in 1usize..=70, channels in 1usize..=9, inner in 1usize..=40, seed in any::<u64>()) {
		let layout = BiasLayout { outer, channels, inner };
		let dy = random_values(seed, outer * channels * inner, -1.0, 1.0);
		let mut grad = vec![0.0; channels];
		bias_grad(layout, &dy, &mut grad).unwrap();
		for (channel, &value) in grad.iter().enumerate() {
			let terms = (0..outer).flat_map(|o| (0..inner).map(move |i| (o, i)))
				.map(|(o, i)| dy[(o * channels + channel) * inner + i]);
			prop_assert_eq!(canonical_bits(value), canonical_bits(chunked_sum(terms)));
		}
	}

	#[test]
	fn tiny_and_huge_operands_stay_on_the_grid(exponent_a in -70i32..=60, exponent_b in -70i32..=60, k in 1usize..=70, seed in any::<u64>()) {
		// Operand magnitudes across many binades, including ones quantisation flushes.
		let a: Vec<f32> = random_values(seed, k, -1.0, 1.0).iter().map(|v| v * 2f32.powi(exponent_a)).collect();
		let b: Vec<f32> = random_values(seed ^ 1, k, -1.0, 1.0).iter().map(|v| v * 2f32.powi(exponent_b)).collect();
		let mut out = [0.0f32];
		matmul(MatmulShape { m: 1, k, n: 1 }, MatmulLayout::default(), &a, &b, &mut out).unwrap();
		prop_assert!(on_grid(out[0]));
		prop_assert!(out[0] == 0.0 || out[0].is_normal());
	}
}

#[test]
fn out_of_range_chunks_are_named_errors() {
	let contraction = MatmulShape { m: 40, k: 65, n: 33 }.contraction(MatmulLayout::default());
	let grid = contraction.grid().unwrap();
	assert_eq!(grid, ChunkGrid { tile_rows: 2, tile_cols: 2, chunks: 3 });
	let (lhs, rhs) = (vec![1.0; 40 * 65], vec![1.0; 65 * 33]);
	assert_eq!(
		contraction.chunk(&lhs, &rhs, ChunkId { tile_row: 0, tile_col: 0, chunk: 3 }),
		Err(KernelError::ChunkOutOfRange { coordinate: "chunk", index: 3, count: 3 })
	);
	assert_eq!(
		contraction.chunk(&lhs, &rhs, ChunkId { tile_row: 2, tile_col: 0, chunk: 0 }),
		Err(KernelError::ChunkOutOfRange { coordinate: "tile_row", index: 2, count: 2 })
	);
	// The last chunk is one element deep, the last tiles 8 rows and 1 column.
	let last = contraction.chunk(&lhs, &rhs, ChunkId { tile_row: 1, tile_col: 1, chunk: 2 }).unwrap();
	assert_eq!(last, vec![1.0; 8]);
	assert_eq!(
		chunk_partial_sums(&[0.0; CHUNK + 1], &[0.0; CHUNK + 1], 1, 1, CHUNK + 1),
		Err(KernelError::ChunkTooDeep { depth: CHUNK + 1 })
	);
	assert!(chunk_partial_sums(&[0.0; 3], &[0.0; 4], 1, 1, 4).is_err());
}
