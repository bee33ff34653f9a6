//! Deliberate errors for the dispute tests: a [`Fault`] makes a trainer
//! dishonest in one place, so that a test can check the game finds it and the
//! referee rejects it.
//!
//! This is test equipment. Without the `testing` feature `Fault` has no
//! values, so no build that leaves the feature off (the runtime, a release
//! worker) can make a dishonest trace, and the code that applies one is never
//! reached.

use crate::ops::contraction::ChunkId;

#[cfg(feature = "testing")]
/// A deliberate error in a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
	/// Flip bit `bit` of element `element` of output `output` of operator `operator` at `step`.
	Output {
		/// Global step.
		step: u32,
		/// Operator id.
		operator: usize,
		/// Which output.
		output: usize,
		/// Element of that output.
		element: usize,
		/// Bit of the `f32` to flip.
		bit: u32,
	},
	/// Flip bit `bit` of element `element` (row-major in the tile) of the
	/// partial sum of `chunk` of contraction `operator` at `step`; the fold and
	/// the output follow from it, as a wrong chunk would.
	Accumulator {
		/// Global step.
		step: u32,
		/// Operator id.
		operator: usize,
		/// The tile and K-chunk.
		chunk: ChunkId,
		/// Element within the tile.
		element: usize,
		/// Bit of the `f32` to flip.
		bit: u32,
	},
	/// Flip bit `bit` of element `element` of partial `piece` (a piece index)
	/// of reduction `operator` at `step`. The later partials of its lane carry
	/// the error; the operator's outputs do not
	/// (see [`Reduction::partials`](crate::proof::reduction::Reduction::partials)).
	Partial {
		/// Global step.
		step: u32,
		/// Operator id.
		operator: usize,
		/// The partial's piece index.
		piece: usize,
		/// Element within the partial.
		element: usize,
		/// Bit of the `f32` to flip.
		bit: u32,
	},
}

#[cfg(not(feature = "testing"))]
/// A deliberate error in a trace: none can exist without the `testing` feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {}

/// Which element of which value a fault flips, and the bit.
pub type Flip<T> = Option<(T, usize, u32)>;

#[cfg(feature = "testing")]
impl Fault {
	/// `(output, element, bit)` if this fault flips an output of operator `operator` at `step`.
	pub fn output(&self, at: u32, id: usize) -> Flip<usize> {
		match *self {
			Self::Output { step, operator, output, element, bit } if step == at && operator == id => Some((output, element, bit)),
			_ => None,
		}
	}

	/// `(chunk, element, bit)` if it flips a partial sum of contraction `id` at `step`.
	pub fn accumulator(&self, at: u32, id: usize) -> Flip<ChunkId> {
		match *self {
			Self::Accumulator { step, operator, chunk, element, bit } if step == at && operator == id => Some((chunk, element, bit)),
			_ => None,
		}
	}

	/// `(piece, element, bit)` if it flips a running sum of reduction `id` at `step`.
	pub fn partial(&self, at: u32, id: usize) -> Flip<usize> {
		match *self {
			Self::Partial { step, operator, piece, element, bit } if step == at && operator == id => Some((piece, element, bit)),
			_ => None,
		}
	}
}

#[cfg(not(feature = "testing"))]
impl Fault {
	/// See the `testing` build.
	pub fn output(&self, _: u32, _: usize) -> Flip<usize> {
		match *self {}
	}

	/// See the `testing` build.
	pub fn accumulator(&self, _: u32, _: usize) -> Flip<ChunkId> {
		match *self {}
	}

	/// See the `testing` build.
	pub fn partial(&self, _: u32, _: usize) -> Flip<usize> {
		match *self {}
	}
}

/// Flips bit `bit` of element `element` of `values`, if it exists.
pub fn flip(values: &mut [f32], element: usize, bit: u32) {
	if let Some(slot) = values.get_mut(element) {
		*slot = f32::from_bits(slot.to_bits() ^ (1 << (bit % 32)));
	}
}
