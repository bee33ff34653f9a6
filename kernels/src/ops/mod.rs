//! The operators of a training step, each to the contract's exact order:
//! the contraction view and its engine, and the element-wise and reduction
//! operators around it.

/// Defines an element-wise function once and, on x86-64 with `std`, compiles its body three
/// times: for AVX-512, for AVX2 and for the baseline, calling the widest this CPU runs.
///
/// The versions are bit-identical. Each performs the same IEEE-754 operations on each
/// element in the same order; Rust never fuses a multiply and an add into one rounding,
/// whatever the target features allow, and the vectors only work on several elements at
/// once. The contract's functions are written without branches where a branch would keep
/// the compiler from vectorising a loop over elements (`arith::math::exp` and `tanh`
/// compute every case and select). Without `std` (the runtime's referee) and on other
/// architectures, the baseline body alone.
macro_rules! widest_vectors {
	($(#[$attr:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty $body:block) => {
		$(#[$attr])*
		$vis fn $name($($arg: $ty),*) -> $ret {
			#[cfg(all(feature = "std", target_arch = "x86_64"))]
			{
				#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
				fn avx512($($arg: $ty),*) -> $ret $body
				#[target_feature(enable = "avx2")]
				fn avx2($($arg: $ty),*) -> $ret $body
				if std::is_x86_feature_detected!("avx512f")
					&& std::is_x86_feature_detected!("avx512bw")
					&& std::is_x86_feature_detected!("avx512dq")
					&& std::is_x86_feature_detected!("avx512vl")
				{
					// SAFETY: the CPU has every feature `avx512` was compiled for.
					return unsafe { avx512($($arg),*) };
				}
				if std::is_x86_feature_detected!("avx2") {
					// SAFETY: the CPU has AVX2, which `avx2` was compiled for.
					return unsafe { avx2($($arg),*) };
				}
			}
			$body
		}
	};
}

pub mod activation;
pub mod aggregate;
pub mod attention;
pub mod bias;
pub mod contraction;
pub mod conv2d;
pub mod embedding;
pub mod gather;
pub mod gemm;
pub mod heads;
pub mod loss;
pub mod matmul;
pub mod norm;
pub mod optim;
pub mod residual;
pub mod schedule;
