//! The dense engine behind every [`Contraction`](crate::ops::contraction::Contraction):
//! packed operands, register-blocked micro-kernels, and (with `std`) threads.
//!
//! # Why this cannot change a bit
//!
//! The contract fixes, for each output element on its own, the order of its
//! additions: the products of one 32-wide K-chunk are added in increasing `k`
//! to an accumulator that starts at `+0`, and the chunk sums are added in
//! increasing chunk order to a total that starts at `+0`. It says nothing about
//! the order in which *different* outputs are computed. This module only
//! reorganises that second, free dimension:
//!
//! - operands are quantised once per call while they are packed into panels
//!   (`MR` rows of the left operand, or `NR` columns of the right, interleaved
//!   along `k`), instead of once per product;
//! - a micro-kernel keeps an `MR × NR` block of chunk accumulators in
//!   registers, each one still fed its own products in increasing `k`, and adds
//!   each finished chunk sum into that output's total; vector lanes always hold
//!   different outputs, never two terms of one sum;
//! - the depth is walked in blocks of [`DEPTH_BLOCK`] (a multiple of the
//!   32-wide chunk, so a block boundary is always a chunk boundary) in
//!   increasing order, the totals waiting in the output between blocks;
//! - with `std`, row ranges of the output go to different threads
//!   ([`crate::exec::parallel::threads`]), which share nothing they write.
//!
//! The SIMD kernels use fused multiply-add. The operands have 12 significant
//! bits, so every product is exact in `f32`, and `round(a·b + s)` (fused) equals
//! `round(round(a·b) + s)` (unfused): FMA and the portable kernel's separate
//! multiply and add give the same bits. `tests/chunks.rs`, the pinned contract
//! vectors and the wgpu comparison check the result; the unit tests below check
//! every kernel this machine has against the contract written out naively.

use alloc::vec::Vec;

use crate::arith::{quantize_operand, CHUNK};

/// Depth steps per cache block: eight chunks. A multiple of [`CHUNK`], so that
/// blocks never split a chunk (which would not change the result either, but
/// would need the partial chunk sums kept across blocks).
const DEPTH_BLOCK: usize = 8 * CHUNK;

/// Output rows per cache block: keeps the packed left block
/// (`ROW_BLOCK × DEPTH_BLOCK` values, 128 KiB) in the L2 cache while every
/// column panel passes over it.
const ROW_BLOCK: usize = 128;

/// Multiply-adds below which a contraction runs on one thread: starting a
/// thread costs tens of microseconds, about what a core does in 2²² of them.
const MIN_WORK_PER_THREAD: usize = 1 << 22;

/// A thread budget: at most `count` threads, each with at least `min_work`
/// multiply-adds (ignored without `std`, which has no threads).
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "std"), allow(dead_code))]
struct Threads {
	count: usize,
	min_work: usize,
}

/// How the matrix-product view reads one operand from its tensor.
///
/// The left operand's lines are output rows, the right operand's output
/// columns; `k` runs along the depth. `value(line, k)` is the raw (not yet
/// quantised) value, `+0` where the view reads outside the tensor.
pub(crate) enum Operand<'a> {
	/// `values[line · line_stride + k · depth_stride]`: dense matrices in any
	/// layout, and the referee's row-major chunk blocks.
	Strided {
		/// The tensor.
		values: &'a [f32],
		/// Distance between consecutive lines.
		line_stride: usize,
		/// Distance between consecutive depth steps.
		depth_stride: usize,
	},
	/// `values[lines[line] + depths[k]]`: convolution operands whose index is a
	/// sum of a position part and a tap part (an im2col view without the copy).
	Separable {
		/// The tensor.
		values: &'a [f32],
		/// Offset contributed by each line.
		lines: Vec<usize>,
		/// Offset contributed by each depth step.
		depths: Vec<usize>,
	},
	/// The convolution input gradient's `dy[n, co, iy − ky, ix − kx]`: a
	/// separable offset, read only where `0 ≤ iy − ky < height` and
	/// `0 ≤ ix − kx < width`, and `+0` elsewhere.
	Shifted {
		/// The tensor (`dy`).
		values: &'a [f32],
		/// `dy`'s height and width.
		height: usize,
		/// See `height`.
		width: usize,
		/// Per line `(n, iy, ix)`: the offset `n·Co·OH·OW + iy·OW + ix`, `iy` and `ix`.
		lines: Vec<(usize, usize, usize)>,
		/// Per depth step `(co, ky, kx)`: the offset `co·OH·OW`, `ky` and `kx`
		/// (the read subtracts `ky·OW + kx`).
		depths: Vec<(usize, usize, usize)>,
	},
}

impl Operand<'_> {
	/// The raw value at `(line, k)`; `+0` outside the tensor.
	#[inline(always)]
	fn value(&self, line: usize, k: usize) -> f32 {
		let index = match self {
			Self::Strided { line_stride, depth_stride, .. } => {
				line.checked_mul(*line_stride).zip(k.checked_mul(*depth_stride)).and_then(|(a, b)| a.checked_add(b))
			},
			Self::Separable { lines, depths, .. } => {
				lines.get(line).zip(depths.get(k)).and_then(|(a, b)| a.checked_add(*b))
			},
			Self::Shifted { height, width, lines, depths, .. } => {
				lines.get(line).zip(depths.get(k)).and_then(|(&(base, y, x), &(offset, ky, kx))| {
					y.checked_sub(ky).filter(|&oy| oy < *height)?;
					x.checked_sub(kx).filter(|&ox| ox < *width)?;
					// Inside `dy`: base + offset − (ky·OW + kx) = ((n·Co + co)·OH + oy)·OW + ox.
					base.checked_add(offset)?.checked_sub(ky.checked_mul(*width)?.checked_add(kx)?)
				})
			},
		};
		index.and_then(|at| self.values().get(at)).copied().unwrap_or_default()
	}

	/// Packs consecutive panels of `W` lines, starting with panel
	/// `first_panel`, into `out` (a whole number of `depth · W` panels):
	/// `panel[k·W + l] = q(value(line, k))` with `q` = [`quantize_operand`], and
	/// `+0` for lines at or past `lines`. Every value of `out` is written.
	///
	/// Inlined into each instruction set's [`Pack`] entry, so that the same
	/// code is vectorised for that instruction set.
	#[inline(always)]
	fn pack<const W: usize>(&self, first_panel: usize, lines: usize, depth: usize, out: &mut [f32]) {
		let panel_len = depth * W;
		if panel_len == 0 {
			return;
		}
		let first_line = first_panel * W;
		match self {
			// Lines adjacent in memory (a row-major right operand): walk the
			// tensor in storage order, one depth step at a time, dealing each
			// run of consecutive lines out to the panels.
			Self::Strided { values, line_stride: 1, depth_stride } => {
				let end_line = lines.min(first_line + out.len() / panel_len * W);
				let run_len = end_line.saturating_sub(first_line);
				for k in 0..depth {
					let start = k * depth_stride + first_line;
					let run = values.get(start..start + run_len).unwrap_or_default();
					for (panel, part) in
						out.chunks_exact_mut(panel_len).zip(run.chunks(W).chain(core::iter::repeat(&[][..])))
					{
						if let Some(slot) = panel.get_mut(k * W..k * W + W) {
							let (head, tail) = slot.split_at_mut(part.len());
							for (slot, &value) in head.iter_mut().zip(part) {
								*slot = quantize_operand(value);
							}
							tail.fill(0.0);
						}
					}
				}
			},
			// Depth adjacent in memory (a row-major left operand): quantise
			// a short run of each line at a time, then interleave the runs.
			Self::Strided { values, line_stride, depth_stride: 1 } => {
				for (index, panel) in out.chunks_exact_mut(panel_len).enumerate() {
					let first = first_line + index * W;
					let rows: [&[f32]; W] = core::array::from_fn(|lane| {
						let start = (first + lane) * line_stride;
						if first + lane < lines {
							values.get(start..start + depth).unwrap_or_default()
						} else {
							&[]
						}
					});
					// A block of depth steps of every lane at a time, so that
					// the writes stay in the L1 cache.
					for (block, steps) in panel.chunks_mut(BLOCK * W).enumerate() {
						let k0 = block * BLOCK;
						for (lane, row) in rows.iter().enumerate() {
							scatter_block::<W>(row.get(k0..).unwrap_or_default(), depth - k0, lane, steps);
						}
					}
				}
			},
			Self::Separable { values, lines: offsets, depths } => {
				let runs = runs_of(depths);
				// Runs of a few taps (a kernel row) are not worth the bookkeeping.
				let long_runs = runs.len() * 8 <= depths.len();
				for (index, panel) in out.chunks_exact_mut(panel_len).enumerate() {
					let first = first_line + index * W;
					let lanes = offsets.get(first..).unwrap_or_default();
					let lanes = lanes.get(..W).unwrap_or(lanes);
					// Consecutive lines (positions along a convolution row) sit
					// next to each other: copy one run per depth step.
					if let (true, Some(&start)) = (lanes.len() == W && is_run(lanes), lanes.first()) {
						for (step, &offset) in panel.chunks_exact_mut(W).zip(depths) {
							copy_quantized(values, start.checked_add(offset), step);
						}
						continue;
					}
					if long_runs {
						// Read each line along runs of consecutive depth offsets
						// (a convolution row's positions), as the depth-adjacent
						// strided case does.
						for &(k0, len) in &runs {
							let steps = panel.get_mut(k0 * W..(k0 + len) * W).unwrap_or_default();
							for (block, steps) in steps.chunks_mut(BLOCK * W).enumerate() {
								let k = k0 + block * BLOCK;
								for lane in 0..W {
									let at = lanes
										.get(lane)
										.zip(depths.get(k))
										.and_then(|(base, offset)| base.checked_add(*offset));
									let run = at.and_then(|at| values.get(at..at + (k0 + len - k).min(BLOCK)));
									scatter_block::<W>(run.unwrap_or_default(), k0 + len - k, lane, steps);
								}
							}
						}
						continue;
					}
					for (k, step) in panel.chunks_exact_mut(W).enumerate() {
						for (lane, slot) in step.iter_mut().enumerate() {
							*slot = lanes.get(lane).map_or(0.0, |_| quantize_operand(self.value(first + lane, k)));
						}
					}
				}
			},
			Self::Shifted { height, width, lines: positions, depths, .. } => {
				for (index, panel) in out.chunks_exact_mut(panel_len).enumerate() {
					let first = first_line + index * W;
					let lanes = positions.get(first..).unwrap_or_default();
					let lanes = lanes.get(..W).unwrap_or(lanes);
					// W consecutive input positions along one row read, at each
					// depth step, one run of `dy` clipped at the row's ends.
					let along_a_row = lanes.len() == W
						&& lanes.windows(2).all(|pair| pair[1] == (pair[0].0 + 1, pair[0].1, pair[0].2 + 1));
					if let (true, Some(&(base, y, x))) = (along_a_row, lanes.first()) {
						for (step, &(offset, ky, kx)) in panel.chunks_exact_mut(W).zip(depths) {
							if y < ky || y - ky >= *height {
								step.fill(0.0);
								continue;
							}
							// Lanes `lo..hi` have 0 ≤ x + lane − kx < width.
							let lo = kx.saturating_sub(x).min(W);
							let hi = (width + kx).saturating_sub(x).clamp(lo, W);
							let start = (base + lo + offset).checked_sub(ky * width + kx);
							let (before, rest) = step.split_at_mut(lo);
							let (inside, after) = rest.split_at_mut(hi - lo);
							before.fill(0.0);
							copy_quantized(self.values(), start, inside);
							after.fill(0.0);
						}
						continue;
					}
					for (k, step) in panel.chunks_exact_mut(W).enumerate() {
						for (lane, slot) in step.iter_mut().enumerate() {
							let line = first + lane;
							*slot = if line < lines { quantize_operand(self.value(line, k)) } else { 0.0 };
						}
					}
				}
			},
			Self::Strided { .. } => {
				for (index, panel) in out.chunks_exact_mut(panel_len).enumerate() {
					let first = first_line + index * W;
					for (k, step) in panel.chunks_exact_mut(W).enumerate() {
						for (lane, slot) in step.iter_mut().enumerate() {
							let line = first + lane;
							*slot = if line < lines { quantize_operand(self.value(line, k)) } else { 0.0 };
						}
					}
				}
			},
		}
	}

	/// The tensor the operand reads.
	#[inline(always)]
	fn values(&self) -> &[f32] {
		match self {
			Self::Strided { values, .. } | Self::Separable { values, .. } | Self::Shifted { values, .. } => values,
		}
	}
}

/// Writes `q(values[start + i])` into `out[i]` for every `i`, with `q` =
/// [`quantize_operand`]; `+0` where that lies outside `values` (never, for a
/// validated contraction).
#[inline(always)]
fn copy_quantized(values: &[f32], start: Option<usize>, out: &mut [f32]) {
	let run = start.and_then(|start| values.get(start..start + out.len())).unwrap_or_default();
	let (head, tail) = out.split_at_mut(run.len());
	for (slot, &value) in head.iter_mut().zip(run) {
		*slot = quantize_operand(value);
	}
	tail.fill(0.0);
}

/// Depth steps quantised at a time before being interleaved into a panel.
const BLOCK: usize = 16;

/// Writes `q(run[j])` (`+0` past the end of `run`) into lane `lane` of the
/// first `count ≤ BLOCK` depth steps of `steps` (`W` values per step), with
/// `q` = [`quantize_operand`]: quantised together, which vectorises, then
/// interleaved.
#[inline(always)]
fn scatter_block<const W: usize>(run: &[f32], count: usize, lane: usize, steps: &mut [f32]) {
	let mut quantized = [0.0f32; BLOCK];
	for (slot, &value) in quantized.iter_mut().zip(run) {
		*slot = quantize_operand(value);
	}
	for (step, &value) in steps.chunks_exact_mut(W).take(count).zip(&quantized) {
		if let Some(slot) = step.get_mut(lane) {
			*slot = value;
		}
	}
}

/// The maximal runs `(first index, length)` of consecutive values in `offsets`.
fn runs_of(offsets: &[usize]) -> Vec<(usize, usize)> {
	let mut runs: Vec<(usize, usize)> = Vec::new();
	for (index, pair) in offsets.windows(2).enumerate() {
		if pair[0].checked_add(1) != Some(pair[1]) {
			let start = runs.last().map_or(0, |&(k0, len)| k0 + len);
			runs.push((start, index + 1 - start));
		}
	}
	let start = runs.last().map_or(0, |&(k0, len)| k0 + len);
	if start < offsets.len() {
		runs.push((start, offsets.len() - start));
	}
	runs
}

/// Whether `offsets` are consecutive integers.
#[inline(always)]
fn is_run(offsets: &[usize]) -> bool {
	offsets.windows(2).all(|pair| pair[0].checked_add(1) == Some(pair[1]))
}

/// A CPU micro-kernel: which instructions compute the contraction. All give
/// the same bits (see the module docs); they differ in speed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuKernel {
	/// Plain Rust on fixed-size arrays, vectorised by the compiler where the
	/// target allows: 4 × 8 outputs at a time. The only kernel in `no_std`
	/// builds without compile-time x86 features (the runtime's wasm).
	Portable,
	/// x86-64 AVX2 with FMA: 6 × 16 outputs in twelve 256-bit registers.
	Avx2,
	/// x86-64 AVX-512F: 8 × 32 outputs in sixteen 512-bit registers.
	Avx512,
}

impl CpuKernel {
	/// Every kernel, slowest first.
	pub const ALL: [CpuKernel; 3] = [Self::Portable, Self::Avx2, Self::Avx512];

	/// Whether this processor can run the kernel (detected at run time with
	/// `std`, from the compile-time target features without it).
	pub fn is_available(self) -> bool {
		match self {
			Self::Portable => true,
			#[cfg(all(target_arch = "x86_64", feature = "std"))]
			Self::Avx2 => std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"),
			#[cfg(all(target_arch = "x86_64", feature = "std"))]
			Self::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
			#[cfg(all(target_arch = "x86_64", not(feature = "std")))]
			Self::Avx2 => cfg!(all(target_feature = "avx2", target_feature = "fma")),
			#[cfg(all(target_arch = "x86_64", not(feature = "std")))]
			Self::Avx512 => cfg!(target_feature = "avx512f"),
			#[cfg(not(target_arch = "x86_64"))]
			Self::Avx2 | Self::Avx512 => false,
		}
	}

	/// The fastest kernel this processor can run.
	pub fn detect() -> Self {
		Self::ALL.into_iter().rev().find(|kernel| kernel.is_available()).unwrap_or(Self::Portable)
	}

	/// The kernel's name as [`CpuKernel::from_name`] reads it.
	pub fn name(self) -> &'static str {
		match self {
			Self::Portable => "portable",
			Self::Avx2 => "avx2",
			Self::Avx512 => "avx512",
		}
	}

	/// The kernel called `name` (`portable`, `avx2` or `avx512`).
	pub fn from_name(name: &str) -> Option<Self> {
		Self::ALL.into_iter().find(|kernel| kernel.name() == name)
	}
}

/// The process-wide kernel choice.
#[cfg(feature = "std")]
mod setting {
	use super::CpuKernel;
	use std::sync::atomic::{AtomicUsize, Ordering};
	use std::sync::OnceLock;

	/// 0: not set; otherwise 1 + the index in [`CpuKernel::ALL`].
	static KERNEL: AtomicUsize = AtomicUsize::new(0);

	/// `TOUCHSTONE_CPU_KERNEL` if this processor has it, else the fastest, read once.
	fn default_kernel() -> CpuKernel {
		static DEFAULT: OnceLock<CpuKernel> = OnceLock::new();
		*DEFAULT.get_or_init(|| {
			std::env::var("TOUCHSTONE_CPU_KERNEL")
				.ok()
				.and_then(|name| CpuKernel::from_name(name.trim()))
				.filter(|kernel| kernel.is_available())
				.unwrap_or_else(CpuKernel::detect)
		})
	}

	pub fn set(kernel: Option<CpuKernel>) -> bool {
		match kernel {
			None => KERNEL.store(0, Ordering::Relaxed),
			Some(kernel) if kernel.is_available() => {
				let index = CpuKernel::ALL.iter().position(|&k| k == kernel).unwrap_or_default();
				KERNEL.store(index + 1, Ordering::Relaxed);
			},
			Some(_) => return false,
		}
		true
	}

	pub fn get() -> CpuKernel {
		match KERNEL.load(Ordering::Relaxed) {
			0 => default_kernel(),
			index => CpuKernel::ALL.get(index - 1).copied().unwrap_or_else(default_kernel),
		}
	}
}

/// Selects the CPU micro-kernel (`None`: back to the default,
/// `TOUCHSTONE_CPU_KERNEL` if available, else the fastest). Returns `false`,
/// changing nothing, if this processor lacks `kernel`.
///
/// Process-wide; for conformance runs of one kernel and benchmarks. Every
/// kernel gives the same bits. The thread count is [`crate::exec::parallel`]'s.
#[cfg(feature = "std")]
pub fn set_kernel(kernel: Option<CpuKernel>) -> bool {
	setting::set(kernel)
}

/// The CPU micro-kernel contractions use.
pub fn kernel() -> CpuKernel {
	#[cfg(feature = "std")]
	return setting::get();
	#[cfg(not(feature = "std"))]
	return CpuKernel::detect();
}

/// `out[i·cols + j]` (row-major, overwritten) = the contract's chunk-folded
/// `Σₖ q(lhs(i, k)) · q(rhs(k, j))` over `rows × cols` outputs and `depth`
/// steps, with the process-wide kernel and threads.
///
/// `out` must hold `rows · cols` values; a shorter one is left as is where it
/// ends (the callers validate every length first).
pub(crate) fn contract(lhs: &Operand, rhs: &Operand, rows: usize, cols: usize, depth: usize, out: &mut [f32]) {
	contract_with(kernel(), crate::exec::parallel::threads(), MIN_WORK_PER_THREAD, lhs, rhs, Dims { rows, cols, depth }, out);
}

/// The extents of one contraction.
#[derive(Clone, Copy)]
struct Dims {
	rows: usize,
	cols: usize,
	depth: usize,
}

/// [`contract`] with an explicit kernel (which must be available) and thread
/// budget; each thread gets at least `min_work` multiply-adds.
fn contract_with(
	kernel: CpuKernel,
	threads: usize,
	min_work: usize,
	lhs: &Operand,
	rhs: &Operand,
	dims: Dims,
	out: &mut [f32],
) {
	let threads = Threads { count: threads, min_work };
	match kernel {
		#[cfg(target_arch = "x86_64")]
		CpuKernel::Avx512 if kernel.is_available() => {
			let isa =
				Isa { micro: x86::avx512_entry, pack_lhs: x86::pack_avx512::<8>, pack_rhs: x86::pack_avx512::<32> };
			drive::<8, 32>(isa, threads, lhs, rhs, dims, out);
		},
		#[cfg(target_arch = "x86_64")]
		CpuKernel::Avx2 if kernel.is_available() => {
			let isa = Isa { micro: x86::avx2_entry, pack_lhs: x86::pack_avx2::<6>, pack_rhs: x86::pack_avx2::<16> };
			drive::<6, 16>(isa, threads, lhs, rhs, dims, out);
		},
		_ => {
			let isa = Isa { micro: portable_micro::<4, 8>, pack_lhs: portable_pack::<4>, pack_rhs: portable_pack::<8> };
			drive::<4, 8>(isa, threads, lhs, rhs, dims, out);
		},
	}
}

/// A micro-kernel: adds to an `MR × NR` block of running totals the chunk
/// sums of `depth` steps of an `MR`-row left panel `a` (`a[k·MR + r]`) and an
/// `NR`-column right panel `b` (`b[k·NR + c]`). The totals are
/// `c[r·ldc + j]`, taken to be `+0` (and not read) if `first`, which saves
/// zeroing the output; `depth` starts on a chunk boundary. If a panel holds
/// fewer than `depth` steps, or `c` fewer than `(MR − 1)·ldc + NR` values,
/// nothing is changed.
type Micro = fn(a: &[f32], b: &[f32], depth: usize, c: &mut [f32], ldc: usize, first: bool);

/// A packing routine: [`Operand::pack`] into panels of as many lines as the
/// kernel's rows (left) or columns (right), compiled for one instruction set.
type Pack = fn(operand: &Operand, first_panel: usize, lines: usize, depth: usize, out: &mut [f32]);

/// What one kernel runs: its micro-kernel and its packing routines.
#[derive(Clone, Copy)]
struct Isa {
	micro: Micro,
	pack_lhs: Pack,
	pack_rhs: Pack,
}

/// [`Operand::pack`] compiled for the target's baseline instructions.
fn portable_pack<const W: usize>(operand: &Operand, first_panel: usize, lines: usize, depth: usize, out: &mut [f32]) {
	operand.pack::<W>(first_panel, lines, depth, out);
}

/// Whether `a`, `b` and `c` are large enough for an `MR × NR` micro-kernel call.
#[inline(always)]
fn fits<const MR: usize, const NR: usize>(a: &[f32], b: &[f32], depth: usize, c: &[f32], ldc: usize) -> bool {
	a.len() >= depth * MR && b.len() >= depth * NR && ldc >= NR && c.len() >= (MR - 1) * ldc + NR
}

/// The portable micro-kernel: the contract's loop over fixed-size arrays.
fn portable_micro<const MR: usize, const NR: usize>(
	a: &[f32],
	b: &[f32],
	depth: usize,
	c: &mut [f32],
	ldc: usize,
	first: bool,
) {
	if !fits::<MR, NR>(a, b, depth, c, ldc) {
		return;
	}
	for (index, (a_chunk, b_chunk)) in
		a[..depth * MR].chunks(CHUNK * MR).zip(b[..depth * NR].chunks(CHUNK * NR)).enumerate()
	{
		let fresh = first && index == 0;
		let mut sums = [[0.0f32; NR]; MR];
		for (a_step, b_step) in a_chunk.chunks_exact(MR).zip(b_chunk.chunks_exact(NR)) {
			for (row, &a_value) in sums.iter_mut().zip(a_step) {
				for (sum, &b_value) in row.iter_mut().zip(b_step) {
					*sum += a_value * b_value;
				}
			}
		}
		for (totals, row) in c.chunks_mut(ldc).zip(&sums) {
			for (total, &sum) in totals.iter_mut().zip(row) {
				*total = (if fresh { 0.0 } else { *total }) + sum;
			}
		}
	}
}

/// The x86-64 SIMD micro-kernels.
#[cfg(target_arch = "x86_64")]
mod x86 {
	use core::arch::x86_64::*;

	use super::{fits, Operand};
	use crate::arith::CHUNK;

	/// [`Operand::pack`] vectorised for AVX-512. Only ever selected after
	/// `CpuKernel::Avx512.is_available()`.
	pub(super) fn pack_avx512<const W: usize>(
		operand: &Operand,
		first_panel: usize,
		lines: usize,
		depth: usize,
		out: &mut [f32],
	) {
		/// # Safety
		/// AVX-512F.
		#[target_feature(enable = "avx512f")]
		unsafe fn pack<const W: usize>(
			operand: &Operand,
			first_panel: usize,
			lines: usize,
			depth: usize,
			out: &mut [f32],
		) {
			operand.pack::<W>(first_panel, lines, depth, out);
		}
		// SAFETY: the caller checked that the processor has AVX-512F.
		unsafe { pack::<W>(operand, first_panel, lines, depth, out) }
	}

	/// [`Operand::pack`] vectorised for AVX2. Only ever selected after
	/// `CpuKernel::Avx2.is_available()`.
	pub(super) fn pack_avx2<const W: usize>(
		operand: &Operand,
		first_panel: usize,
		lines: usize,
		depth: usize,
		out: &mut [f32],
	) {
		/// # Safety
		/// AVX2.
		#[target_feature(enable = "avx2")]
		unsafe fn pack<const W: usize>(
			operand: &Operand,
			first_panel: usize,
			lines: usize,
			depth: usize,
			out: &mut [f32],
		) {
			operand.pack::<W>(first_panel, lines, depth, out);
		}
		// SAFETY: the caller checked that the processor has AVX2.
		unsafe { pack::<W>(operand, first_panel, lines, depth, out) }
	}

	/// Safe entry to [`avx512`]. Only ever selected after `CpuKernel::Avx512.is_available()`.
	pub(super) fn avx512_entry(a: &[f32], b: &[f32], depth: usize, c: &mut [f32], ldc: usize, first: bool) {
		if fits::<8, 32>(a, b, depth, c, ldc) {
			// SAFETY: the caller checked that the processor has AVX-512F, and
			// `fits` that every read and write stays inside the slices.
			unsafe { avx512(a.as_ptr(), b.as_ptr(), depth, c.as_mut_ptr(), ldc, first) }
		}
	}

	/// Safe entry to [`avx2`]. Only ever selected after `CpuKernel::Avx2.is_available()`.
	pub(super) fn avx2_entry(a: &[f32], b: &[f32], depth: usize, c: &mut [f32], ldc: usize, first: bool) {
		if fits::<6, 16>(a, b, depth, c, ldc) {
			// SAFETY: the caller checked that the processor has AVX2 and FMA,
			// and `fits` that every read and write stays inside the slices.
			unsafe { avx2(a.as_ptr(), b.as_ptr(), depth, c.as_mut_ptr(), ldc, first) }
		}
	}

	/// 8 × 32 outputs: each output has its own lane, which accumulates its
	/// chunk in increasing `k`; the fused multiply-add is exact-product safe.
	///
	/// # Safety
	/// AVX-512F; `a` holds `depth · 8` values, `b` `depth · 32`, `c` `7·ldc + 32`.
	#[target_feature(enable = "avx512f")]
	unsafe fn avx512(a: *const f32, b: *const f32, depth: usize, c: *mut f32, ldc: usize, first: bool) {
		let mut start = 0;
		while start < depth {
			let end = (start + CHUNK).min(depth);
			// The total starts at +0: written as +0 + sum, as the contract says.
			let fresh = first && start == 0;
			let mut sums = [[_mm512_setzero_ps(); 2]; 8];
			for k in start..end {
				// SAFETY: k < depth, so these reads stay inside the panels.
				let (b0, b1) = unsafe { (_mm512_loadu_ps(b.add(k * 32)), _mm512_loadu_ps(b.add(k * 32 + 16))) };
				for (r, row) in sums.iter_mut().enumerate() {
					// SAFETY: as above.
					let a_value = _mm512_set1_ps(unsafe { *a.add(k * 8 + r) });
					row[0] = _mm512_fmadd_ps(a_value, b0, row[0]);
					row[1] = _mm512_fmadd_ps(a_value, b1, row[1]);
				}
			}
			for (r, row) in sums.iter().enumerate() {
				for (half, &sum) in row.iter().enumerate() {
					// SAFETY: r·ldc + half·16 + 16 ≤ 7·ldc + 32.
					unsafe {
						let at = c.add(r * ldc + half * 16);
						let total = if fresh { _mm512_setzero_ps() } else { _mm512_loadu_ps(at) };
						_mm512_storeu_ps(at, _mm512_add_ps(total, sum));
					}
				}
			}
			start = end;
		}
	}

	/// 6 × 16 outputs in 256-bit lanes; otherwise as [`avx512`].
	///
	/// # Safety
	/// AVX2 and FMA; `a` holds `depth · 6` values, `b` `depth · 16`, `c` `5·ldc + 16`.
	#[target_feature(enable = "avx2,fma")]
	unsafe fn avx2(a: *const f32, b: *const f32, depth: usize, c: *mut f32, ldc: usize, first: bool) {
		let mut start = 0;
		while start < depth {
			let end = (start + CHUNK).min(depth);
			// The total starts at +0: written as +0 + sum, as the contract says.
			let fresh = first && start == 0;
			let mut sums = [[_mm256_setzero_ps(); 2]; 6];
			for k in start..end {
				// SAFETY: k < depth, so these reads stay inside the panels.
				let (b0, b1) = unsafe { (_mm256_loadu_ps(b.add(k * 16)), _mm256_loadu_ps(b.add(k * 16 + 8))) };
				for (r, row) in sums.iter_mut().enumerate() {
					// SAFETY: as above.
					let a_value = _mm256_set1_ps(unsafe { *a.add(k * 6 + r) });
					row[0] = _mm256_fmadd_ps(a_value, b0, row[0]);
					row[1] = _mm256_fmadd_ps(a_value, b1, row[1]);
				}
			}
			for (r, row) in sums.iter().enumerate() {
				for (half, &sum) in row.iter().enumerate() {
					// SAFETY: r·ldc + half·8 + 8 ≤ 5·ldc + 16.
					unsafe {
						let at = c.add(r * ldc + half * 8);
						let total = if fresh { _mm256_setzero_ps() } else { _mm256_loadu_ps(at) };
						_mm256_storeu_ps(at, _mm256_add_ps(total, sum));
					}
				}
			}
			start = end;
		}
	}
}

/// Scratch buffers for packed operands, reused across calls: fresh multi-MiB
/// allocations cost page faults on every call.
#[cfg(feature = "std")]
mod scratch {
	use std::sync::Mutex;
	use std::vec::Vec;

	/// Buffers not in use. A few suffice: one per thread of one call.
	static FREE: Mutex<Vec<Vec<f32>>> = Mutex::new(Vec::new());
	/// Buffers kept at most; more are freed.
	const KEEP: usize = 16;

	/// A buffer of `len` values (their contents unspecified: packing writes them all).
	pub fn take(len: usize) -> Vec<f32> {
		let mut buffer = FREE.lock().ok().and_then(|mut free| free.pop()).unwrap_or_default();
		buffer.resize(len, 0.0);
		buffer
	}

	/// Returns a buffer for reuse.
	pub fn give(buffer: Vec<f32>) {
		if let Ok(mut free) = FREE.lock() {
			if free.len() < KEEP {
				free.push(buffer);
			}
		}
	}
}

/// Without `std`, plain allocations.
#[cfg(not(feature = "std"))]
mod scratch {
	use alloc::vec::Vec;

	/// A zeroed buffer of `len` values.
	pub fn take(len: usize) -> Vec<f32> {
		alloc::vec![0.0; len]
	}

	/// Drops the buffer.
	pub fn give(_: Vec<f32>) {}
}

/// Packs both operands and runs `micro` over the output, on up to `threads` threads.
fn drive<const MR: usize, const NR: usize>(
	isa: Isa,
	threads: Threads,
	lhs: &Operand,
	rhs: &Operand,
	dims: Dims,
	out: &mut [f32],
) {
	let Dims { rows, cols, depth } = dims;
	let Some(out) = out.get_mut(..rows * cols) else { return };
	if depth == 0 {
		out.fill(0.0);
		return;
	}
	let col_panels = cols.div_ceil(NR);
	let mut b = scratch::take(col_panels * depth * NR);
	#[cfg(feature = "std")]
	{
		let row_panels = rows.div_ceil(MR);
		let work = rows.saturating_mul(cols).saturating_mul(depth);
		let count = threads.count.min(row_panels).min(work / threads.min_work.max(1)).max(1);
		if count > 1 {
			// Pack the shared right operand in parallel, then give each thread
			// a contiguous range of row panels, which it packs and computes.
			let panels_per_part = col_panels.div_ceil(count);
			std::thread::scope(|scope| {
				for (index, part) in b.chunks_mut(panels_per_part * depth * NR).enumerate() {
					scope.spawn(move || (isa.pack_rhs)(rhs, index * panels_per_part, cols, depth, part));
				}
			});
			let packed = &b;
			let rows_per_part = row_panels.div_ceil(count) * MR;
			std::thread::scope(|scope| {
				for (index, part) in out.chunks_mut(rows_per_part * cols).enumerate() {
					scope.spawn(move || compute_rows::<MR, NR>(isa, lhs, packed, index * rows_per_part, dims, part));
				}
			});
			scratch::give(b);
			return;
		}
	}
	#[cfg(not(feature = "std"))]
	let Threads { .. } = threads;
	(isa.pack_rhs)(rhs, 0, cols, depth, &mut b);
	compute_rows::<MR, NR>(isa, lhs, &b, 0, dims, out);
	scratch::give(b);
}

/// Writes output rows `first_row ..` (as many whole rows as `out` holds):
/// their contraction with the packed right operand `b`,
/// packing the rows' own left panels first.
fn compute_rows<const MR: usize, const NR: usize>(
	isa: Isa,
	lhs: &Operand,
	b: &[f32],
	first_row: usize,
	dims: Dims,
	out: &mut [f32],
) {
	let Dims { rows, cols, depth } = dims;
	let my_rows = out.len() / cols;
	let my_panels = my_rows.div_ceil(MR);
	let mut a = scratch::take(my_panels * depth * MR);
	(isa.pack_lhs)(lhs, first_row / MR, rows, depth, &mut a);
	let micro = isa.micro;
	let col_panels = cols.div_ceil(NR);
	// Totals of a tile that overhangs the output, parked here while the
	// micro-kernel runs (the kernel always writes a full MR × NR block).
	let mut edge = [0.0f32; 256];
	let mut block_start = 0;
	// Depth blocks in increasing order, so every output's chunks stay in order;
	// its running total waits in `out` between blocks.
	while block_start < depth {
		let block = DEPTH_BLOCK.min(depth - block_start);
		let first = block_start == 0;
		let mut row_block = 0;
		while row_block < my_panels {
			let row_block_end = (row_block + ROW_BLOCK / MR).min(my_panels);
			for col_panel in 0..col_panels {
				let b_panel = b.get((col_panel * depth + block_start) * NR..).unwrap_or_default();
				let col0 = col_panel * NR;
				let width = NR.min(cols - col0);
				for row_panel in row_block..row_block_end {
					let a_panel = a.get((row_panel * depth + block_start) * MR..).unwrap_or_default();
					let row0 = row_panel * MR;
					let height = MR.min(my_rows - row0);
					if height == MR && width == NR {
						if let Some(c) = out.get_mut(row0 * cols + col0..) {
							micro(a_panel, b_panel, block, c, cols, first);
						}
						continue;
					}
					let Some(edge) = edge.get_mut(..MR * NR) else { continue };
					for (r, totals) in edge.chunks_exact_mut(NR).enumerate() {
						let at = (row0 + r) * cols + col0;
						match out.get(at..at + width).filter(|_| r < height && !first) {
							Some(stored) => totals[..width].copy_from_slice(stored),
							None => totals[..width].fill(0.0),
						}
					}
					micro(a_panel, b_panel, block, edge, NR, first);
					for (r, totals) in edge.chunks_exact(NR).enumerate().take(height) {
						let at = (row0 + r) * cols + col0;
						if let Some(stored) = out.get_mut(at..at + width) {
							stored.copy_from_slice(&totals[..width]);
						}
					}
				}
			}
			row_block = row_block_end;
		}
		block_start += block;
	}
	scratch::give(a);
}

#[cfg(test)]
mod tests {
	use super::*;

	/// The contract written out for one output at a time.
	fn naive(a: &[f32], b: &[f32], rows: usize, cols: usize, depth: usize) -> Vec<u32> {
		let mut out = Vec::with_capacity(rows * cols);
		for i in 0..rows {
			for j in 0..cols {
				let mut total = 0.0f32;
				for chunk in (0..depth).step_by(CHUNK) {
					let mut sum = 0.0f32;
					for k in chunk..(chunk + CHUNK).min(depth) {
						sum += quantize_operand(a[i * depth + k]) * quantize_operand(b[k * cols + j]);
					}
					total += sum;
				}
				out.push(crate::arith::canonical_bits(total));
			}
		}
		out
	}

	/// Values of varied magnitude and sign, many not representable in 12 bits,
	/// so that a wrong summation order shows in the bits.
	fn values(seed: u64, len: usize) -> Vec<f32> {
		let mut out = vec![0.0; len];
		crate::arith::rng::RandomStream::new(seed, 7).fill_uniform(-1.0, 1.0, &mut out);
		for (index, value) in out.iter_mut().enumerate() {
			*value *= [1.0, 1e-3, 37.0, 1e-6][index % 4];
		}
		out
	}

	#[test]
	fn every_available_kernel_matches_the_contract_bit_for_bit() {
		let shapes = [(1, 1, 1), (3, 5, 7), (9, 33, 31), (17, 40, 65), (130, 70, 300), (7, 3, 600), (33, 129, 257)];
		for (rows, cols, depth) in shapes {
			let a = values(1, rows * depth);
			let b = values(2, depth * cols);
			let expected = naive(&a, &b, rows, cols, depth);
			let lhs = Operand::Strided { values: &a, line_stride: depth, depth_stride: 1 };
			let rhs = Operand::Strided { values: &b, line_stride: 1, depth_stride: cols };
			for kernel in CpuKernel::ALL.into_iter().filter(|kernel| kernel.is_available()) {
				for threads in [1, 3] {
					let mut out = vec![f32::NAN; rows * cols];
					contract_with(kernel, threads, 1, &lhs, &rhs, Dims { rows, cols, depth }, &mut out);
					let bits: Vec<u32> = out.iter().map(|&v| crate::arith::canonical_bits(v)).collect();
					assert_eq!(bits, expected, "{kernel:?}, {threads} threads, {rows}×{cols}×{depth}");
				}
			}
		}
	}

	#[test]
	fn kernel_names_round_trip() {
		for kernel in CpuKernel::ALL {
			assert_eq!(CpuKernel::from_name(kernel.name()), Some(kernel));
		}
		assert!(CpuKernel::Portable.is_available());
		assert!(CpuKernel::detect().is_available());
	}
}
