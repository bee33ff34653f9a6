//! How many threads the reference may use, and the one helper that spreads
//! independent pieces of work over them.
//!
//! Threads never change a result: the contraction engine gives each thread
//! its own output rows ([`crate::ops::gemm`]), and state hashing gives each one its
//! own aligned subtrees of the Merkle tree ([`crate::proof::merkle::root_of_segments`]).
//! Without `std` there are no threads, and everything runs on the caller's.

/// The process-wide thread setting.
#[cfg(feature = "std")]
mod setting {
	use std::sync::atomic::{AtomicUsize, Ordering};
	use std::sync::OnceLock;

	/// 0: not set, use the environment or the default.
	static THREADS: AtomicUsize = AtomicUsize::new(0);

	/// `TOUCHSTONE_CPU_THREADS`, else the available cores, read once.
	fn default_threads() -> usize {
		static DEFAULT: OnceLock<usize> = OnceLock::new();
		*DEFAULT.get_or_init(|| {
			std::env::var("TOUCHSTONE_CPU_THREADS")
				.ok()
				.and_then(|value| value.trim().parse::<usize>().ok())
				.filter(|&threads| threads > 0)
				.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
		})
	}

	pub fn set(threads: usize) {
		THREADS.store(threads, Ordering::Relaxed);
	}

	pub fn get() -> usize {
		match THREADS.load(Ordering::Relaxed) {
			0 => default_threads(),
			threads => threads,
		}
	}
}

/// Sets how many threads the reference may use for contractions and state
/// hashing (`0`: back to the default, `TOUCHSTONE_CPU_THREADS` or else every
/// available core). Process-wide; results do not depend on it.
#[cfg(feature = "std")]
pub fn set_threads(threads: usize) {
	setting::set(threads);
}

/// How many threads the reference may use (always 1 without `std`).
pub fn threads() -> usize {
	#[cfg(feature = "std")]
	return setting::get();
	#[cfg(not(feature = "std"))]
	return 1;
}

/// `work(index)` for every `index < count`, in index order, spread over up to
/// `threads` threads that each claim the next unclaimed index (so a thread
/// slowed by a busy core holds up no one). Without `std`, or with one thread
/// or one index, runs on the caller's thread.
pub(crate) fn map_indices<R: Send>(
	count: usize,
	threads: usize,
	work: impl Fn(usize) -> R + Sync,
) -> alloc::vec::Vec<R> {
	#[cfg(feature = "std")]
	if threads > 1 && count > 1 {
		use std::sync::atomic::{AtomicUsize, Ordering};
		let next = AtomicUsize::new(0);
		let (next, work) = (&next, &work);
		let mut done: alloc::vec::Vec<(usize, R)> = std::thread::scope(|scope| {
			let handles: alloc::vec::Vec<_> = (0..threads.min(count))
				.map(|_| {
					scope.spawn(move || {
						let mut mine = alloc::vec::Vec::new();
						loop {
							let index = next.fetch_add(1, Ordering::Relaxed);
							if index >= count {
								break mine;
							}
							mine.push((index, work(index)));
						}
					})
				})
				.collect();
			// A worker only panics if `work` does; pass that on unchanged.
			handles
				.into_iter()
				.flat_map(|handle| handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
				.collect()
		});
		done.sort_unstable_by_key(|&(index, _)| index);
		return done.into_iter().map(|(_, result)| result).collect();
	}
	let _ = threads;
	(0..count).map(work).collect()
}
