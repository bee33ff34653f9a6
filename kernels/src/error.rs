//! The one error type of the reference kernels.
//!
//! Every public entry point validates its shapes and slice lengths with checked
//! arithmetic before it touches data, and reports a violation here instead of
//! panicking: the on-chain referee calls these functions on inputs an adversary
//! chose, and a panic in the runtime is not an answer.

use core::fmt;

/// Why a kernel refused its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelError {
	/// A slice does not hold as many elements as its shape says.
	LengthMismatch {
		/// Which operand, by its parameter name.
		operand: &'static str,
		/// Elements the shape implies.
		expected: usize,
		/// Elements the slice holds.
		actual: usize,
	},
	/// A shape has a zero extent where the operator needs at least one element.
	EmptyDimension {
		/// Which dimension, by its field name.
		dimension: &'static str,
	},
	/// A shape's element count does not fit in `usize` (or in the `u32` range a
	/// device buffer can index).
	ShapeOverflow,
	/// A convolution kernel is larger than its input in some spatial dimension.
	KernelLargerThanInput,
	/// A tile or K-chunk index lies outside the operator's chunk grid.
	ChunkOutOfRange {
		/// Which coordinate: `tile_row`, `tile_col` or `chunk`.
		coordinate: &'static str,
		/// The index asked for.
		index: usize,
		/// How many there are.
		count: usize,
	},
	/// A class label is not below the number of classes.
	LabelOutOfRange {
		/// The row whose label is bad.
		row: usize,
		/// The label.
		label: u32,
		/// The number of classes.
		classes: usize,
	},
	/// A gather index is not below the number of source rows.
	IndexOutOfRange {
		/// The offending index.
		index: u32,
		/// The number of source rows.
		rows: usize,
	},
	/// A hyper-parameter is outside the range where the contract is defined.
	InvalidHyperparameter {
		/// Which hyper-parameter, by its field name.
		name: &'static str,
	},
	/// An operand block for one chunk is deeper than a K-chunk.
	ChunkTooDeep {
		/// The depth given.
		depth: usize,
	},
	/// A piece, lane, span or segment index lies outside its operator's range.
	PieceOutOfRange {
		/// What was asked for: `piece`, `span` or `segment`.
		what: &'static str,
		/// The index asked for.
		index: usize,
		/// How many there are.
		count: usize,
	},
	/// A word or piece a recomputation reads was not supplied.
	MissingInput {
		/// Input position (`usize::MAX` for an earlier piece).
		position: usize,
		/// Element or piece index.
		index: usize,
	},
	/// A value, buffer or operator the step graph names is not where the
	/// trainer keeps it: the graph and the trainer disagree (a defect, not bad input).
	MissingValue {
		/// The value, buffer or operator id.
		id: usize,
	},
	/// A commitment over the values could not be built.
	Commitment(crate::proof::merkle::MerkleError),
	/// Training step `step` produced NaN or an infinity in its loss or its new
	/// state: under rule 7 the step is invalid, and the run stops before it.
	NonFinite {
		/// The global step.
		step: u32,
	},
	/// An input holds NaN or an infinity where rule 7 admits only finite values (an
	/// opened state's words, which no verdict may depend on the bits of).
	NonFiniteInput {
		/// Which input, by its parameter name.
		operand: &'static str,
	},
}

impl fmt::Display for KernelError {
	fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
		match self {
			Self::LengthMismatch { operand, expected, actual } => {
				write!(f, "`{operand}` holds {actual} elements but its shape needs {expected}")
			},
			Self::EmptyDimension { dimension } => write!(f, "dimension `{dimension}` is zero"),
			Self::ShapeOverflow => write!(f, "shape's element count overflows"),
			Self::KernelLargerThanInput => write!(f, "convolution kernel larger than its input"),
			Self::ChunkOutOfRange { coordinate, index, count } => {
				write!(f, "{coordinate} {index} out of range (there are {count})")
			},
			Self::LabelOutOfRange { row, label, classes } => {
				write!(f, "label {label} of row {row} is not below {classes} classes")
			},
			Self::IndexOutOfRange { index, rows } => {
				write!(f, "row index {index} is not below {rows} rows")
			},
			Self::InvalidHyperparameter { name } => write!(f, "hyper-parameter `{name}` out of range"),
			Self::ChunkTooDeep { depth } => write!(f, "chunk depth {depth} exceeds the 32-wide K-chunk"),
			Self::PieceOutOfRange { what, index, count } => write!(f, "{what} {index} out of range (there are {count})"),
			Self::MissingInput { position, index } => write!(f, "input {position} word {index} was not supplied"),
			Self::MissingValue { id } => write!(f, "value {id} of the step graph is missing (a defect)"),
			Self::Commitment(error) => write!(f, "commitment could not be built: {error:?}"),
			Self::NonFinite { step } => {
				write!(f, "step {step} produced NaN or an infinity (the job diverges; a smaller learning rate may help)")
			},
			Self::NonFiniteInput { operand } => write!(f, "`{operand}` holds NaN or an infinity"),
		}
	}
}

#[cfg(feature = "std")]
impl std::error::Error for KernelError {}

/// Checks that `slice_len` equals `expected`, naming `operand` otherwise.
pub fn check_len(operand: &'static str, slice_len: usize, expected: usize) -> Result<(), KernelError> {
	if slice_len == expected {
		Ok(())
	} else {
		Err(KernelError::LengthMismatch { operand, expected, actual: slice_len })
	}
}

/// Product of `dims`, or `ShapeOverflow` when it does not fit in a `u32`.
///
/// The bound is `u32` rather than `usize` so that a shape valid on a 64-bit
/// solver is also valid in the 32-bit wasm referee and indexable by a GPU.
pub fn element_count(dims: &[usize]) -> Result<usize, KernelError> {
	let mut count: usize = 1;
	for &dim in dims {
		count = count.checked_mul(dim).ok_or(KernelError::ShapeOverflow)?;
	}
	if u32::try_from(count).is_err() {
		return Err(KernelError::ShapeOverflow);
	}
	Ok(count)
}

/// `EmptyDimension` unless `extent` is positive.
pub fn check_nonzero(dimension: &'static str, extent: usize) -> Result<(), KernelError> {
	if extent == 0 {
		Err(KernelError::EmptyDimension { dimension })
	} else {
		Ok(())
	}
}
