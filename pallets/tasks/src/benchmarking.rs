//! Benchmarks of every call and hook of the tasks pallet, at their worst case.

use super::*;
use crate::Pallet as Tasks;
use alloc::{vec, vec::Vec};
use polkadot_sdk::{
	frame_benchmarking::v2::*,
	frame_support::traits::{fungible::Mutate, Get},
	frame_system::{self, pallet_prelude::BlockNumberFor, RawOrigin},
	sp_runtime::{
		traits::{Bounded, Saturating},
		BoundedVec, FixedU64, Perbill,
	},
};
use touchstone_primitives::{
	referee::{filler_segments, BoundaryOpening},
	traits::ComputeNodes,
	Activation, Aggregation, Checkpoint, ContentRef, DatasetRef, Decomposition, DeviceKind, OuterOptimizer,
	HardwareProfile, HardwareRequirements, HyperParams, JobId, JobSpec, LearningProof, ModelArch,
	Optimizer, TrainingMetrics, UnitIndex, UnitState, VerificationMode,
};

const STEPS: u32 = 100;

fn profile() -> HardwareProfile {
	HardwareProfile {
		device: DeviceKind::Gpu,
		model: BoundedVec::truncate_from(b"bench-gpu".to_vec()),
		memory_mib: 81_920,
		throughput_gflops: 900_000,
		bandwidth_mbps: 100_000,
		region: BoundedVec::truncate_from(b"bench".to_vec()),
	}
}

/// A spec with the largest fields the runtime accepts, cut as `decomposition` says.
fn spec<T: Config>(decomposition: Decomposition, units: u32) -> JobSpec<BalanceOf<T>> {
	let location = BoundedVec::truncate_from(vec![b'l'; touchstone_primitives::MAX_LOCATION_LEN as usize]);
	let hidden = BoundedVec::truncate_from(vec![64; touchstone_primitives::MAX_LAYERS as usize]);
	let price: BalanceOf<T> = T::MinPricePerUnit::get().saturating_mul(1_000u32.into());
	JobSpec {
		model: ModelArch::Mlp { inputs: 64, hidden, classes: 10, activation: Activation::Relu },
		initial_weights: Some(ContentRef { hash: [1; 32].into(), location: location.clone() }),
		initial_state_root: [2; 32].into(),
		dataset: DatasetRef { content: ContentRef { hash: [2; 32].into(), location }, samples: 100_000, root: [3; 32].into() },
		hyper: HyperParams {
			steps: STEPS,
			batch_size: 1,
			learning_rate: FixedU64::from_rational(1, 10),
			optimizer: Optimizer::Sgd { momentum: FixedU64::from_rational(9, 10) },
			grad_clip_norm: None,
			seed: 7,
			// The most checkpoints a unit of the whole job may have.
			checkpoint_interval: STEPS.div_ceil(T::MaxSegmentsPerUnit::get().max(1)),
		},
		decomposition,
		verification: VerificationMode::Exact,
		requirements: HardwareRequirements {
			device: Some(DeviceKind::Gpu),
			min_memory_mib: 1,
			min_throughput_gflops: 1,
			min_bandwidth_mbps: 0,
			region: Some(BoundedVec::truncate_from(vec![b'r'; touchstone_primitives::MAX_REGION_LEN as usize])),
		},
		price_per_unit: price,
		budget: price.saturating_mul(units.into()),
		unit_timeout: T::MinUnitTimeout::get().saturating_add(100),
		pool_timeout: T::MaxPoolWait::get(),
	}
}

fn shards<T: Config>(units: u32) -> JobSpec<BalanceOf<T>> {
	let mut spec = spec::<T>(Decomposition::DataShards { shards: units, aggregation: Aggregation::WeightedBySamples }, units);
	spec.requirements.region = None;
	spec
}

fn funded<T: Config>(name: &'static str, index: u32) -> T::AccountId {
	let who: T::AccountId = account(name, index, 0);
	T::Currency::set_balance(&who, BalanceOf::<T>::max_value() / 4u32.into());
	who
}

fn solver<T: Config>(index: u32) -> T::AccountId {
	let who: T::AccountId = account("solver", index, 0);
	T::BenchmarkHelper::register_solver(&who, profile());
	who
}

/// Submits a job and returns its id.
fn submitted<T: Config>(spec: JobSpec<BalanceOf<T>>) -> Result<JobId, BenchmarkError> {
	let owner = funded::<T>("owner", 0);
	let id = NextJobId::<T>::get();
	Tasks::<T>::submit_job(RawOrigin::Signed(owner).into(), spec)
		.map_err(|_| BenchmarkError::Stop("submit_job failed"))?;
	Ok(id)
}

fn claim<T: Config>(who: &T::AccountId, job: JobId, unit: UnitIndex) -> Result<(), BenchmarkError> {
	Tasks::<T>::claim_unit(RawOrigin::Signed(who.clone()).into(), job, unit)
		.map_err(|_| BenchmarkError::Stop("claim_unit failed"))
}

/// A proof of unit `unit` of `job` over `steps` steps, anchored at the unit's start, with
/// the opening of its final state.
fn proof<T: Config>(job: JobId, unit: UnitIndex, steps: u32) -> Result<(LearningProof, BoundaryOpening), BenchmarkError> {
	let work_unit = Units::<T>::get(job, unit).ok_or(BenchmarkError::Stop("no unit"))?;
	let stored = Jobs::<T>::get(job).ok_or(BenchmarkError::Stop("no job"))?;
	let (first_step, _) = Tasks::<T>::step_range(&stored, &work_unit);
	let start = work_unit.start_state_root.ok_or(BenchmarkError::Stop("unit not ready"))?;
	let interval = stored.spec.hyper.checkpoint_interval;
	let (trace, opening) =
		filler_segments(first_step, steps, interval, [5; 32], 3).ok_or(BenchmarkError::Stop("no trace"))?;
	let proof = LearningProof {
		trace_root: trace.root().into(),
		steps,
		start_state_root: start,
		final_state_root: [5; 32].into(),
		metrics: TrainingMetrics { loss: FixedU64::from_rational(1, 3), accuracy: Perbill::from_percent(97) },
	};
	Ok((proof, opening))
}

/// Claims every unit of `job` (0..units), starting with `first` (registered already, so
/// that the job could be submitted) and registering as many more solvers as their capacity
/// needs. Returns who holds each unit.
fn claim_all<T: Config>(job: JobId, units: u32, first: T::AccountId) -> Result<Vec<T::AccountId>, BenchmarkError> {
	let capacity = T::MaxUnitsPerSolver::get();
	let price = Jobs::<T>::get(job).ok_or(BenchmarkError::Stop("no job"))?.spec.price_per_unit;
	let mut holders = Vec::new();
	let (mut current, mut held, mut next) = (first, 0u32, 1u32);
	for unit in 0..units {
		// A solver holds what its list and its bond allow (the collateral), then the next.
		let bond = T::Nodes::bond(&current, touchstone_primitives::Role::Solver);
		if held == capacity || !Tasks::<T>::covers_collateral(bond, SolverExposure::<T>::get(&current), price) {
			current = solver::<T>(next);
			(held, next) = (0, next.saturating_add(1));
		}
		claim::<T>(&current, job, unit)?;
		held = held.saturating_add(1);
		holders.push(current.clone());
	}
	Ok(holders)
}

fn advance<T: Config>(blocks: BlockNumberFor<T>) {
	let now = frame_system::Pallet::<T>::block_number();
	frame_system::Pallet::<T>::set_block_number(now.saturating_add(blocks));
}

#[benchmarks]
mod benchmarks {
	use super::*;

	#[benchmark]
	fn submit_job(u: Linear<1, { T::MaxUnitsPerJob::get() }>) -> Result<(), BenchmarkError> {
		solver::<T>(0);
		let owner = funded::<T>("owner", 0);
		let spec = shards::<T>(u);
		#[extrinsic_call]
		_(RawOrigin::Signed(owner), spec);
		assert_eq!(OpenUnits::<T>::get(), u);
		Ok(())
	}

	/// The registry scan behind `submit_job`'s requirements check, at its worst: no node
	/// meets them, so every one is read.
	#[benchmark]
	fn scan_registry(n: Linear<1, { T::Nodes::max_nodes() }>) -> Result<(), BenchmarkError> {
		for index in 0..n {
			T::BenchmarkHelper::register_unfit_solver(&account("unfit", index, 0));
		}
		let requirements = shards::<T>(1).requirements;
		let price = T::MinPricePerUnit::get();
		let met;
		#[block]
		{
			met = T::Nodes::any_solver_meets(&requirements, price);
		}
		assert!(!met);
		Ok(())
	}

	#[benchmark]
	fn cancel_job(u: Linear<1, { T::MaxUnitsPerJob::get() }>) -> Result<(), BenchmarkError> {
		solver::<T>(0);
		let owner = funded::<T>("owner", 0);
		let job = NextJobId::<T>::get();
		Tasks::<T>::submit_job(RawOrigin::Signed(owner.clone()).into(), shards::<T>(u))
			.map_err(|_| BenchmarkError::Stop("submit_job failed"))?;
		#[extrinsic_call]
		_(RawOrigin::Signed(owner), job);
		assert_eq!(OpenUnits::<T>::get(), 0);
		Ok(())
	}

	#[benchmark]
	fn claim_unit() -> Result<(), BenchmarkError> {
		let who = solver::<T>(0);
		// Worst case: the claimed unit sits at the back of a full pool (`MaxOpenUnits`).
		let per_job = T::MaxUnitsPerJob::get();
		let mut room = T::MaxOpenUnits::get();
		let mut last = (0, 0);
		while room > 0 {
			let units = per_job.min(room);
			last = (submitted::<T>(shards::<T>(units))?, units.saturating_sub(1));
			room = room.saturating_sub(units);
		}
		assert_eq!(Pool::<T>::get().len() as u32, T::MaxOpenUnits::get());
		#[extrinsic_call]
		_(RawOrigin::Signed(who), last.0, last.1);
		assert_eq!(Units::<T>::get(last.0, last.1).map(|u| u.state), Some(UnitState::Assigned));
		Ok(())
	}

	#[benchmark]
	fn decline_unit() -> Result<(), BenchmarkError> {
		let who = solver::<T>(0);
		let job = submitted::<T>(shards::<T>(1))?;
		Tasks::<T>::schedule(frame_system::Pallet::<T>::block_number());
		#[extrinsic_call]
		_(RawOrigin::Signed(who), job, 0);
		assert_eq!(Units::<T>::get(job, 0).map(|u| u.state), Some(UnitState::Pending));
		Ok(())
	}

	#[benchmark]
	fn accept_unit() -> Result<(), BenchmarkError> {
		let who = solver::<T>(0);
		let job = submitted::<T>(shards::<T>(1))?;
		Tasks::<T>::schedule(frame_system::Pallet::<T>::block_number());
		#[extrinsic_call]
		_(RawOrigin::Signed(who), job, 0);
		assert_eq!(Units::<T>::get(job, 0).map(|u| u.accepted), Some(true));
		Ok(())
	}

	#[benchmark]
	fn commit_checkpoint() -> Result<(), BenchmarkError> {
		let who = solver::<T>(0);
		let job = submitted::<T>(shards::<T>(1))?;
		claim::<T>(&who, job, 0)?;
		let checkpoint = Checkpoint { step: STEPS, hash: [5; 32].into() };
		#[extrinsic_call]
		_(RawOrigin::Signed(who), job, 0, checkpoint);
		assert_eq!(Units::<T>::get(job, 0).and_then(|u| u.last_checkpoint), Some(checkpoint));
		Ok(())
	}

	#[benchmark]
	fn submit_proof() -> Result<(), BenchmarkError> {
		let who = solver::<T>(0);
		// Worst case: a step range whose successor becomes ready and is offered to its solver.
		let mut two_ranges = spec::<T>(Decomposition::StepRanges { steps_per_unit: STEPS / 2 }, 2);
		two_ranges.requirements.region = None;
		let job = submitted::<T>(two_ranges)?;
		claim::<T>(&who, job, 0)?;
		let (commitment, opening) = proof::<T>(job, 0, STEPS / 2)?;
		T::BenchmarkHelper::ready_proof(job, 0, &who);
		let who_again = who.clone();
		#[extrinsic_call]
		_(RawOrigin::Signed(who), job, 0, commitment, opening, None);
		let successor = Units::<T>::get(job, 1).ok_or(BenchmarkError::Stop("no second range"))?;
		assert_eq!((successor.state, successor.solver), (UnitState::Assigned, Some(who_again)));
		Ok(())
	}

	/// A round's aggregate committed, readying `s` shards of the next round: the largest
	/// round a two-round job of `MaxUnitsPerJob` units holds, at most `MAX_ROUND_SHARDS`.
	#[benchmark]
	fn submit_aggregate(
		s: Linear<1, { (T::MaxUnitsPerJob::get() / 2).saturating_sub(1).clamp(1, touchstone_primitives::MAX_ROUND_SHARDS) }>,
	) -> Result<(), BenchmarkError> {
		let first = solver::<T>(0);
		let outer = OuterOptimizer::Nesterov { learning_rate: FixedU64::from_rational(7, 10), momentum: FixedU64::from_rational(9, 10) };
		let decomposition =
			Decomposition::Rounds { shards: s, rounds: 2, local_steps: STEPS / 2, aggregation: Aggregation::WeightedBySamples, outer };
		let mut rounds = spec::<T>(decomposition, 2 * (s + 1));
		rounds.requirements.region = None;
		let job = submitted::<T>(rounds)?;
		let holders = claim_all::<T>(job, s, first)?;
		for (shard, holder) in holders.iter().enumerate() {
			let (commitment, opening) = proof::<T>(job, shard as u32, STEPS / 2)?;
			T::BenchmarkHelper::ready_proof(job, shard as u32, holder);
			Tasks::<T>::submit_proof(RawOrigin::Signed(holder.clone()).into(), job, shard as u32, commitment, opening, None)
				.map_err(|_| BenchmarkError::Stop("submit_proof failed"))?;
		}
		let aggregator = solver::<T>(1_000);
		claim::<T>(&aggregator, job, s)?;
		#[extrinsic_call]
		_(RawOrigin::Signed(aggregator), job, s, [7; 32].into(), Some([8; 32].into()));
		for shard in 0..s {
			let next = Units::<T>::get(job, s + 1 + shard).ok_or(BenchmarkError::Stop("no next round"))?;
			assert_eq!(next.state, UnitState::Pending);
		}
		Ok(())
	}

	#[benchmark]
	fn finalize_unit(u: Linear<1, { T::MaxUnitsPerJob::get() }>) -> Result<(), BenchmarkError> {
		// Worst case: the last open unit, so the job completes and aggregates `u` units.
		let first = solver::<T>(0);
		let job = submitted::<T>(shards::<T>(u))?;
		let holders = claim_all::<T>(job, u, first)?;
		for (unit, who) in holders.iter().enumerate() {
			let (commitment, opening) = proof::<T>(job, unit as u32, STEPS)?;
			T::BenchmarkHelper::ready_proof(job, unit as u32, who);
			Tasks::<T>::submit_proof(RawOrigin::Signed(who.clone()).into(), job, unit as u32, commitment, opening, None)
				.map_err(|_| BenchmarkError::Stop("submit_proof failed"))?;
		}
		advance::<T>(T::ChallengeWindow::get());
		for unit in 0..u {
			T::BenchmarkHelper::ready_finalize(job, unit);
		}
		let caller = funded::<T>("caller", 0);
		for unit in 1..u {
			Tasks::<T>::finalize_unit(RawOrigin::Signed(caller.clone()).into(), job, unit)
				.map_err(|_| BenchmarkError::Stop("finalize_unit failed"))?;
		}
		#[extrinsic_call]
		_(RawOrigin::Signed(caller), job, 0);
		assert!(Jobs::<T>::get(job).is_some_and(|j| j.result.is_some()));
		Ok(())
	}

	/// One due unit at its worst: the first step range of a `u`-unit job, offered to a
	/// solver who lets the offer lapse after the unit's pool wait, while the pool is full.
	/// It leaves the solver (its list and exposure), leaves the pool, and fails with every
	/// later range: refunds, events, the aggregation of the job and its removal scheduled.
	/// The other paths (a stalled unit reassigned or failed, a pooled unit expiring) do a
	/// subset of this work.
	#[benchmark]
	fn time_out(u: Linear<1, { T::MaxUnitsPerJob::get() }>) -> Result<(), BenchmarkError> {
		let who = solver::<T>(0);
		let mut ranges = spec::<T>(Decomposition::StepRanges { steps_per_unit: STEPS.div_ceil(u) }, u);
		ranges.requirements.region = None;
		ranges.hyper.steps = STEPS.div_ceil(u).saturating_mul(u);
		ranges.pool_timeout = T::MinUnitTimeout::get();
		let job = submitted::<T>(ranges)?;
		// Unit 0 is the only one in the pool: the scheduler offers it to the solver.
		Tasks::<T>::schedule(frame_system::Pallet::<T>::block_number());
		if Units::<T>::get(job, 0).and_then(|unit| unit.solver).as_ref() != Some(&who) {
			return Err(BenchmarkError::Stop("unit 0 was not offered"));
		}
		// Fill the rest of the pool with other jobs' units.
		let per_job = T::MaxUnitsPerJob::get();
		let mut room = T::MaxOpenUnits::get().saturating_sub(u);
		while room > 0 {
			let units = per_job.min(room);
			submitted::<T>(shards::<T>(units))?;
			room = room.saturating_sub(units);
		}
		let due = Units::<T>::get(job, 0).and_then(|unit| unit.deadline).ok_or(BenchmarkError::Stop("no deadline"))?;
		let pool_deadline =
			Units::<T>::get(job, 0).and_then(|unit| unit.pool_deadline).ok_or(BenchmarkError::Stop("no pool deadline"))?;
		let later = due.max(pool_deadline).saturating_add(1u32.into());
		frame_system::Pallet::<T>::set_block_number(later);
		#[block]
		{
			Tasks::<T>::time_out((job, 0), due, later).map_err(|_| BenchmarkError::Stop("time_out failed"))?;
		}
		assert_eq!(Units::<T>::get(job, u.saturating_sub(1)).map(|u| u.state), Some(UnitState::Failed));
		assert!(Jobs::<T>::get(job).is_some_and(|j| j.result.is_some()));
		Ok(())
	}

	/// A finished job of `u` units removed after its retention.
	#[benchmark]
	fn remove_job(u: Linear<1, { T::MaxUnitsPerJob::get() }>) -> Result<(), BenchmarkError> {
		solver::<T>(0);
		let owner = funded::<T>("owner", 0);
		let job = NextJobId::<T>::get();
		Tasks::<T>::submit_job(RawOrigin::Signed(owner.clone()).into(), shards::<T>(u))
			.map_err(|_| BenchmarkError::Stop("submit_job failed"))?;
		Tasks::<T>::cancel_job(RawOrigin::Signed(owner).into(), job)
			.map_err(|_| BenchmarkError::Stop("cancel_job failed"))?;
		#[block]
		{
			Tasks::<T>::remove_job(job).map_err(|_| BenchmarkError::Stop("remove_job failed"))?;
		}
		assert!(Jobs::<T>::get(job).is_none());
		Ok(())
	}

	#[benchmark]
	fn schedule(
		a: Linear<1, { T::MaxAssignmentsPerBlock::get() }>,
		n: Linear<1, { T::Nodes::max_nodes() }>,
	) -> Result<(), BenchmarkError> {
		for index in 0..n {
			solver::<T>(index);
		}
		let units = a.min(T::MaxUnitsPerJob::get());
		let job = submitted::<T>(shards::<T>(units))?;
		let now = frame_system::Pallet::<T>::block_number();
		#[block]
		{
			Tasks::<T>::schedule(now);
		}
		assert_eq!(Units::<T>::get(job, 0).map(|u| u.state), Some(UnitState::Assigned));
		Ok(())
	}

	impl_benchmark_test_suite!(Tasks, crate::mock::ExtBuilder::default().build(), crate::mock::Test);
}
