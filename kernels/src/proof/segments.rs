//! The checkpoint segments of a unit: the grid that checkpoints, boundaries,
//! verifiers' samples and the forced error all follow.

/// The checkpoint segments of a unit: the stretches of steps between the checkpoints its
/// solver writes, after every step that ends on a multiple of the job's checkpoint interval
/// and after the unit's last step. Each starts from a checkpoint, or from the unit's start;
/// verifiers re-execute the ones they are drawn, and a lie shows only in the segment that
/// holds it. Segments follow the job's global grid, so a unit that starts between two
/// multiples of the interval has a shorter first segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segments {
	first_step: u32,
	end: u32,
	interval: u32,
}

impl Segments {
	/// The segments of a unit of `steps` steps from global step `first_step`, checkpointed
	/// every `checkpoint_interval` steps (zero counts as one).
	pub fn new(first_step: u32, steps: u32, checkpoint_interval: u32) -> Self {
		Self { first_step, end: first_step.saturating_add(steps), interval: checkpoint_interval.max(1) }
	}

	/// The step after the unit's last: where its last segment ends.
	pub fn end(&self) -> u32 {
		self.end
	}

	/// How many there are.
	pub fn count(&self) -> u32 {
		if self.end <= self.first_step {
			return 0;
		}
		// Each multiple of the interval after the first step starts a segment, up to the
		// last step, `end - 1`.
		self.block(self.end.saturating_sub(1)).saturating_sub(self.block(self.first_step)).saturating_add(1)
	}

	/// The segment that holds global `step`, if the unit has it.
	pub fn of_step(&self, step: u32) -> Option<u32> {
		(self.first_step..self.end)
			.contains(&step)
			.then(|| self.block(step).saturating_sub(self.block(self.first_step)))
	}

	/// The global steps of segment `index`, if the unit has it.
	pub fn range(&self, index: u32) -> Option<core::ops::Range<u32>> {
		if index >= self.count() {
			return None;
		}
		let grid = |block: u64| block.saturating_mul(u64::from(self.interval)).min(u64::from(self.end)) as u32;
		let block = u64::from(self.block(self.first_step)).saturating_add(u64::from(index));
		let start = if index == 0 { self.first_step } else { grid(block) };
		Some(start..grid(block.saturating_add(1)))
	}

	/// The interval-long block of the global grid that holds `step`.
	fn block(&self, step: u32) -> u32 {
		step.checked_div(self.interval).unwrap_or(step)
	}
}

#[cfg(test)]
mod tests {
	use super::*;
	use alloc::vec;
	use alloc::vec::Vec;

	/// Segments follow the job's checkpoint grid, cover every step of the unit once, in
	/// order, and name the segment of each of its steps.
	#[test]
	fn segments_follow_the_checkpoint_grid_and_cover_the_unit() {
		let ranges = |segments: Segments| (0..segments.count()).map(|i| segments.range(i).unwrap()).collect::<Vec<_>>();
		assert_eq!(ranges(Segments::new(10, 25, 10)), vec![10..20, 20..30, 30..35]);
		assert_eq!(ranges(Segments::new(25, 25, 10)), vec![25..30, 30..40, 40..50]);
		assert_eq!(ranges(Segments::new(250, 250, 50)).len(), 5);
		for (first, steps, interval) in [(0, 1, 1), (0, 250, 50), (250, 250, 50), (7, 100, 13), (3, 2, 10), (0, 10, 0)] {
			let segments = Segments::new(first, steps, interval);
			let mut next = first;
			for index in 0..segments.count() {
				let range = segments.range(index).unwrap();
				assert_eq!(range.start, next);
				assert!(range.end > range.start);
				for step in range.clone() {
					assert_eq!(segments.of_step(step), Some(index));
				}
				next = range.end;
			}
			assert_eq!(next, first + steps);
			assert_eq!(segments.range(segments.count()), None);
			assert_eq!(segments.of_step(first + steps), None);
		}
		assert_eq!(Segments::new(5, 0, 10).count(), 0);
	}
}
