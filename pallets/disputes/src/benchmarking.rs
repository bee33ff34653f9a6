//! Benchmarks of every call of the disputes pallet. Opening a dispute, a round of
//! bisection and a timeout need no trace beyond a unit's step-level tree; the bindings
//! between levels and the referee replay disputes recorded over real traces
//! ([`crate::benchmark_case`]): a digits-sized step, and the largest piece a real step opens.

use super::*;
use polkadot_sdk::{
	frame_benchmarking::v2::*,
	frame_support::{traits::Get, BoundedVec},
	frame_system::{self, RawOrigin},
	sp_runtime::traits::Saturating,
};
use crate::benchmark_case::{BenchmarkCase, Recording};
use touchstone_primitives::{
	referee::{
		bookkeeping_spec, chunk_range, filler_proof, filler_segments, job_graph, locate_chunk, reveal, BoundaryOpening,
		DataCommitment, MerkleTree, Openings, Reveal, StateChunk, UnitCommitment, CHUNKS_PER_REQUEST, state_tree,
	},
	Decomposition, JobId, JobSpec, Role,
};

/// Steps of the benchmarks' units.
const STEPS: u32 = 64;
/// The initial state root of the benchmarks' job.
const INITIAL: [u8; 32] = [2; 32];
/// The final state root the defender claims.
const FINAL: [u8; 32] = [3; 32];
/// The unit timeout of every benchmark job: beyond any `MaxSegmentBlocks`.
const CASE_UNIT_TIMEOUT: u32 = 1_000_000;

/// The benchmarks' checkpoint interval: 16 segments of 4 steps, the most segments a unit
/// of the runtime may have (`MaxSegmentsPerUnit`), so that the segment level of a
/// dispute plays its most rounds.
const INTERVAL: u32 = 4;

/// A small job the chain accepts, of `units` step ranges; the helper sets its price.
fn spec<T: Config>(units: u32) -> JobSpec<BalanceOf<T>> {
	let mut spec = bookkeeping_spec(STEPS, units, INTERVAL, INITIAL);
	// A timeout must hold one segment beyond `MinUnitTimeout` (the bookkeeping spec's is
	// the bare minimum, which the runtime refuses), and the recorded jobs' segments take
	// many blocks at a slow chain's reference rate (the mock's): this holds any the chain
	// accepts.
	spec.unit_timeout = CASE_UNIT_TIMEOUT;
	spec
}

/// A segment-level tree over the unit's boundaries: the defender's (salt 0) or a
/// challenger's.
fn tree(salt: u8) -> Result<(MerkleTree, BoundaryOpening), BenchmarkError> {
	filler_segments(0, STEPS, INTERVAL, FINAL, salt).ok_or(BenchmarkError::Stop("no trace"))
}

/// A job of `units` step ranges whose first unit `solver` proved with the salt-0 tree.
fn proven<T: Config>(units: u32) -> Result<(JobId, T::AccountId, MerkleTree), BenchmarkError> {
	let owner: T::AccountId = account("owner", 0, 0);
	let solver: T::AccountId = account("solver", 0, 0);
	T::BenchmarkHelper::register(&solver, Role::Solver);
	let (proof, opening, defender) =
		filler_proof(0, STEPS, INTERVAL, INITIAL, FINAL, 0).ok_or(BenchmarkError::Stop("no trace"))?;
	let job = T::BenchmarkHelper::prove(&owner, spec::<T>(units), &solver, proof, opening)
		.ok_or(BenchmarkError::Stop("the unit could not be proven"))?;
	Ok((job, solver, defender))
}

/// Challenger `index`, registered, disputing unit 0 of `job` with the tree of salt `index + 1`.
fn challenged<T: Config>(job: JobId, index: u32) -> Result<(T::AccountId, MerkleTree), BenchmarkError> {
	let challenger: T::AccountId = account("challenger", index, 0);
	T::BenchmarkHelper::register(&challenger, Role::Challenger);
	let salt = u8::try_from(index.saturating_add(1)).map_err(|_| BenchmarkError::Stop("too many challengers"))?;
	let (own, _) = tree(salt)?;
	Pallet::<T>::challenge(RawOrigin::Signed(challenger.clone()).into(), job, 0, own.root())
		.map_err(|_| BenchmarkError::Stop("challenge failed"))?;
	Ok((challenger, own))
}

/// A proof overturned without a step found, kept for summonses: the salt-0 tree of a unit
/// of `STEPS` steps, attested by `MaxAttesters` verifiers, each over segments 1 onwards
/// (`MaxSamplesPerAttester` of them), until a block far ahead. Returns its id, the first
/// attester, and the opening of the proof's boundary before segment 1.
fn kept_proof<T: Config>() -> Result<(DisputeId, T::AccountId, BoundaryOpening), BenchmarkError> {
	let (proof, _) = tree(0)?;
	let overturned = NextDisputeId::<T>::get();
	NextDisputeId::<T>::put(overturned.saturating_add(1));
	let samples: alloc::vec::Vec<u32> = (1..=T::MaxSamplesPerAttester::get()).collect();
	let attesters: alloc::vec::Vec<_> = (0..T::MaxAttesters::get())
		.map(|index| (account::<T::AccountId>("verifier", index, 0), BoundedVec::truncate_from(samples.clone())))
		.collect();
	let attester = attesters.first().map(|(who, _)| who.clone()).ok_or(BenchmarkError::Stop("no attester"))?;
	let job = spec::<T>(1);
	Overturned::<T>::insert(
		overturned,
		OverturnedProof {
			job: 0,
			unit: 0,
			model: job.model,
			hyper: job.hyper,
			data: DataCommitment { root: [4; 32], samples: job.dataset.samples, first_sample: 0, shard_samples: job.dataset.samples },
			trace: UnitCommitment { root: proof.root(), first_step: 0, steps: STEPS, interval: INTERVAL, start_state_root: INITIAL },
			segment_blocks: 1,
			attesters: BoundedVec::truncate_from(attesters),
			summons_until: frame_system::Pallet::<T>::block_number().saturating_add(1_000u32.into()),
			open_summonses: 0,
		},
	);
	// `filler_segments`' boundary 0 of salt 0.
	let opening = BoundaryOpening {
		state_root: [0x5a; 32],
		record: [0; 32],
		proof: proof.proof(0).map_err(|_| BenchmarkError::Stop("no proof"))?,
	};
	Ok((overturned, attester, opening))
}

/// What `tree` reveals at dispute `id`'s current node.
fn reveal_at<T: Config>(id: DisputeId, tree: &MerkleTree) -> Result<Reveal, BenchmarkError> {
	match Disputes::<T>::get(id).map(|info| info.phase) {
		Some(Phase::Bisect { game, .. }) => Ok(reveal(tree, game.level, game.index)),
		_ => Err(BenchmarkError::Stop("not bisecting")),
	}
}

/// Which phase [`recorded_dispute`] puts the recorded dispute in.
enum At {
	BindSegment,
	BindStep,
	BindOperator,
	Judge,
}

/// The job of the recorded `case` (its model, data and initial state, one unit of all its
/// steps), submitted, and its unit proven by a registered solver with `proof` and
/// `opening`. Returns the job and the solver.
fn prove_case<T: Config>(
	case: &BenchmarkCase,
	proof: touchstone_primitives::LearningProof,
	opening: BoundaryOpening,
) -> Result<(JobId, T::AccountId), BenchmarkError> {
	let owner: T::AccountId = account("owner", 0, 0);
	let solver: T::AccountId = account("solver", 0, 0);
	T::BenchmarkHelper::register(&solver, Role::Solver);
	let mut job_spec = spec::<T>(1);
	job_spec.model = case.model.clone();
	job_spec.hyper = case.hyper.clone();
	job_spec.decomposition = Decomposition::StepRanges { steps_per_unit: case.hyper.steps };
	job_spec.dataset.samples = case.samples;
	job_spec.dataset.root = case.dataset_root.into();
	job_spec.initial_state_root = case.initial_state_root.into();
	let job = T::BenchmarkHelper::prove(&owner, job_spec, &solver, proof, opening)
		.ok_or(BenchmarkError::Stop("the unit could not be proven"))?;
	Ok((job, solver))
}

/// The dispute of `recording`, its unit proven through the tasks pallet, opened by a
/// challenger, and moved to phase `at` with the challenger's answer to it given. Returns
/// the dispute, the defender and the case.
fn recorded_dispute<T: Config>(
	recording: Recording,
	at: At,
) -> Result<(DisputeId, T::AccountId, BenchmarkCase), BenchmarkError> {
	let case = recording.case().ok_or(BenchmarkError::Stop("no recorded case"))?;
	let (job, solver) = prove_case::<T>(&case, case.proof, case.final_state.clone())?;
	let challenger: T::AccountId = account("challenger", 0, 0);
	T::BenchmarkHelper::register(&challenger, Role::Challenger);
	let id = NextDisputeId::<T>::get();
	Pallet::<T>::challenge(RawOrigin::Signed(challenger).into(), job, 0, case.challenger_trace_root)
		.map_err(|_| BenchmarkError::Stop("challenge failed"))?;
	let mut info = Disputes::<T>::get(id).ok_or(BenchmarkError::Stop("no dispute"))?;
	info.segment = Some(case.segment);
	info.segment_start = Some(case.segment_start);
	info.phase = Phase::BindSegment { roots: Pair { defender: None, challenger: Some(case.segment_traces.challenger) } };
	if matches!(at, At::BindStep | At::BindOperator | At::Judge) {
		info.segment_traces = Some(case.segment_traces);
		info.step = Some(case.step);
		info.phase =
			Phase::BindStep { roots: Pair { defender: None, challenger: Some(case.operator_roots.challenger) } };
	}
	if matches!(at, At::BindOperator | At::Judge) {
		info.operator_roots = Some(case.operator_roots);
		info.operator = Some(case.operator);
		info.phase =
			Phase::BindOperator { roots: Pair { defender: None, challenger: Some(case.piece_roots.challenger) } };
	}
	if matches!(at, At::Judge) {
		info.piece_roots = Some(case.piece_roots);
		info.piece = Some(case.piece);
		info.phase = Phase::Judge;
	}
	Disputes::<T>::insert(id, info);
	Ok((id, solver, case))
}

/// The dispute of `recording` in the referee's phase, a caller, and the defender's openings.
fn to_judge<T: Config>(recording: Recording) -> Result<(DisputeId, T::AccountId, Openings), BenchmarkError> {
	let (id, _, case) = recorded_dispute::<T>(recording, At::Judge)?;
	Ok((id, account("caller", 0, 0), case.openings))
}

/// A job with the recorded K-chunk case's model (a digits-sized MLP), its unit proven
/// with a trace that ends at a state of the model's shape (all zeros), whose tree and
/// tensor lengths are returned with the opening of that final state; and the unit's
/// last step.
fn chunked<T: Config>() -> Result<(JobId, T::AccountId, MerkleTree, alloc::vec::Vec<usize>, BoundaryOpening, u32), BenchmarkError> {
	let case = Recording::KChunk.case().ok_or(BenchmarkError::Stop("no recorded case"))?;
	let graph = job_graph(&case.model, &case.hyper).ok_or(BenchmarkError::Stop("no graph"))?;
	let lens: alloc::vec::Vec<usize> = graph.state_lens().collect();
	let zeros: alloc::vec::Vec<alloc::vec::Vec<f32>> = lens.iter().map(|&len| alloc::vec![0f32; len]).collect();
	let views: alloc::vec::Vec<&[f32]> = zeros.iter().map(|tensor| tensor.as_slice()).collect();
	let state = state_tree::tree(&views).map_err(|_| BenchmarkError::Stop("no state tree"))?;
	let steps = case.hyper.steps;
	let (proof, opening, _) =
		filler_proof(0, steps, case.hyper.checkpoint_interval, case.initial_state_root, state.root(), 0)
			.ok_or(BenchmarkError::Stop("no trace"))?;
	let (job, solver) = prove_case::<T>(&case, proof, opening.clone())?;
	Ok((job, solver, state, lens, opening, steps))
}

#[benchmarks]
mod benchmarks {
	use super::*;

	/// Worst case: the unit already has all but one of its challengers' disputes open, so
	/// the check that the challenger has none reads each of them.
	#[benchmark]
	fn challenge() -> Result<(), BenchmarkError> {
		let (job, _, _) = proven::<T>(1)?;
		let others = Pallet::<T>::challenger_slots().saturating_sub(1);
		for index in 0..others {
			challenged::<T>(job, index)?;
		}
		let challenger: T::AccountId = account("challenger", others, 0);
		T::BenchmarkHelper::register(&challenger, Role::Challenger);
		let (own, _) = tree(200)?;
		#[extrinsic_call]
		_(RawOrigin::Signed(challenger), job, 0, own.root().into());
		assert_eq!(UnitDisputes::<T>::get((job, 0)).len() as u32, others.saturating_add(1));
		Ok(())
	}

	/// The second reveal of a round: it plays the round.
	#[benchmark]
	fn reveal() -> Result<(), BenchmarkError> {
		let (job, solver, defender) = proven::<T>(1)?;
		let (challenger, own) = challenged::<T>(job, 0)?;
		let id = NextDisputeId::<T>::get().saturating_sub(1);
		let first = reveal_at::<T>(id, &defender)?;
		Pallet::<T>::reveal(RawOrigin::Signed(solver).into(), id, first)
			.map_err(|_| BenchmarkError::Stop("defender's reveal failed"))?;
		let second = reveal_at::<T>(id, &own)?;
		#[extrinsic_call]
		_(RawOrigin::Signed(challenger), id, second);
		assert_eq!(Disputes::<T>::get(id).map(|info| info.rounds), Some(1));
		Ok(())
	}

	/// The heaviest ruling: the defender fell silent, so it is slashed, its unit goes back
	/// to the pool, the next step range rolls back, and every other dispute over the unit
	/// is dismissed with its bond returned.
	#[benchmark]
	fn time_out() -> Result<(), BenchmarkError> {
		let (job, _, _) = proven::<T>(2)?;
		let mut last = None;
		for index in 0..Pallet::<T>::challenger_slots() {
			last = Some(challenged::<T>(job, index)?);
		}
		let (challenger, own) = last.ok_or(BenchmarkError::Stop("no challenger"))?;
		let id = NextDisputeId::<T>::get().saturating_sub(1);
		// The challenger answers the first round; the defender does not.
		let answer = reveal_at::<T>(id, &own)?;
		Pallet::<T>::reveal(RawOrigin::Signed(challenger).into(), id, answer)
			.map_err(|_| BenchmarkError::Stop("challenger's reveal failed"))?;
		let deadline = Disputes::<T>::get(id).map(|info| info.deadline).ok_or(BenchmarkError::Stop("no dispute"))?;
		frame_system::Pallet::<T>::set_block_number(deadline.saturating_add(1u32.into()));
		let caller: T::AccountId = account("caller", 0, 0);
		#[extrinsic_call]
		_(RawOrigin::Signed(caller), id);
		assert!(UnitDisputes::<T>::get((job, 0)).is_empty());
		Ok(())
	}

	/// The defender binds its trace of the recorded segment; the step level starts.
	#[benchmark]
	fn bind_segment() -> Result<(), BenchmarkError> {
		let (id, defender, case) = recorded_dispute::<T>(Recording::KChunk, At::BindSegment)?;
		#[extrinsic_call]
		_(RawOrigin::Signed(defender), id, case.segment_traces.defender, case.segment_binding);
		assert!(matches!(Disputes::<T>::get(id).map(|info| info.phase), Some(Phase::Bisect { .. })));
		Ok(())
	}

	/// The defender binds its operator root of the recorded step; the operator level starts.
	#[benchmark]
	fn bind_step() -> Result<(), BenchmarkError> {
		let (id, defender, case) = recorded_dispute::<T>(Recording::KChunk, At::BindStep)?;
		#[extrinsic_call]
		_(RawOrigin::Signed(defender), id, case.operator_roots.defender, case.step_binding);
		assert!(matches!(Disputes::<T>::get(id).map(|info| info.phase), Some(Phase::Bisect { .. })));
		Ok(())
	}

	/// The defender binds its piece root of the recorded operator; the piece level starts.
	#[benchmark]
	fn bind_operator() -> Result<(), BenchmarkError> {
		let (id, defender, case) = recorded_dispute::<T>(Recording::KChunk, At::BindOperator)?;
		#[extrinsic_call]
		_(RawOrigin::Signed(defender), id, case.piece_roots.defender, case.operator_proof);
		assert!(matches!(Disputes::<T>::get(id).map(|info| info.phase), Some(Phase::Bisect { .. })));
		Ok(())
	}

	/// The referee judges the recorded piece (a K-chunk of the first layer of a
	/// digits-sized step), refuses the defender's claim, and the ruling is carried out.
	#[benchmark]
	fn resolve() -> Result<(), BenchmarkError> {
		let (id, caller, openings) = to_judge::<T>(Recording::KChunk)?;
		#[extrinsic_call]
		resolve(RawOrigin::Signed(caller), id, openings);
		assert!(Disputes::<T>::get(id).is_none());
		Ok(())
	}

	/// The same at the largest piece a real step opens: a loss partial of a job with
	/// `MAX_CLASSES` classes (about 142 KB of openings).
	#[benchmark]
	fn resolve_largest_piece() -> Result<(), BenchmarkError> {
		let (id, caller, openings) = to_judge::<T>(Recording::LargestPiece)?;
		#[extrinsic_call]
		resolve(RawOrigin::Signed(caller), id, openings);
		assert!(Disputes::<T>::get(id).is_none());
		Ok(())
	}

	/// Worst case: the unit already has all but one of its challengers' disputes open, and
	/// the request checks the job's graph for the chunk.
	#[benchmark]
	fn request_chunk() -> Result<(), BenchmarkError> {
		let (job, _, _, _, _, steps) = chunked::<T>()?;
		let others = Pallet::<T>::challenger_slots().saturating_sub(1);
		for index in 0..others {
			challenged::<T>(job, index)?;
		}
		let requester: T::AccountId = account("challenger", others, 0);
		T::BenchmarkHelper::register(&requester, Role::Challenger);
		#[extrinsic_call]
		_(RawOrigin::Signed(requester), job, 0, steps, 0);
		assert_eq!(UnitDisputes::<T>::get((job, 0)).len() as u32, others.saturating_add(1));
		Ok(())
	}

	/// The solver posts a full chunk of its final state; the request ends and its bond is
	/// paid out.
	#[benchmark]
	fn provide_chunk() -> Result<(), BenchmarkError> {
		let (job, solver, state, lens, opening, steps) = chunked::<T>()?;
		let requester: T::AccountId = account("challenger", 0, 0);
		T::BenchmarkHelper::register(&requester, Role::Challenger);
		let id = NextDisputeId::<T>::get();
		Pallet::<T>::request_chunk(RawOrigin::Signed(requester).into(), job, 0, steps, 0)
			.map_err(|_| BenchmarkError::Stop("request failed"))?;
		let count = CHUNKS_PER_REQUEST.min(state.len());
		let indices: alloc::vec::Vec<usize> = (0..count).collect();
		let proof = state.multiproof(&indices).map_err(|_| BenchmarkError::Stop("no multiproof"))?;
		let mut chunks = alloc::vec::Vec::with_capacity(count);
		for index in indices {
			let (tensor, within) = locate_chunk(lens.iter().copied(), index).ok_or(BenchmarkError::Stop("no chunk"))?;
			chunks.push(alloc::vec![0u32; chunk_range(lens.get(tensor).copied().unwrap_or(0), within).len()]);
		}
		let chunk = StateChunk { boundary: opening, chunks, proof };
		#[extrinsic_call]
		_(RawOrigin::Signed(solver), id, chunk);
		assert!(Disputes::<T>::get(id).is_none());
		Ok(())
	}

	/// Worst case: the attester's segment already has all but one of its summonses open,
	/// so the check that the summoner has none reads each of them, and the start is opened
	/// against the proof.
	#[benchmark]
	fn summon() -> Result<(), BenchmarkError> {
		let (overturned, attester, start) = kept_proof::<T>()?;
		let others = T::MaxSummonsPerSegment::get().saturating_sub(1);
		for index in 0..others {
			let summoner: T::AccountId = account("challenger", index, 0);
			T::BenchmarkHelper::register(&summoner, Role::Challenger);
			let salt = u8::try_from(index.saturating_add(1)).map_err(|_| BenchmarkError::Stop("too many summoners"))?;
			let (own, _) = tree(salt)?;
			Pallet::<T>::summon(
				RawOrigin::Signed(summoner).into(),
				overturned,
				attester.clone(),
				1,
				own.root(),
				Some(start.clone()),
			)
			.map_err(|_| BenchmarkError::Stop("summons failed"))?;
		}
		let summoner: T::AccountId = account("challenger", others, 0);
		T::BenchmarkHelper::register(&summoner, Role::Challenger);
		let (own, _) = tree(200)?;
		#[extrinsic_call]
		_(RawOrigin::Signed(summoner), overturned, attester.clone(), 1, own.root(), Some(start));
		assert_eq!(Summonses::<T>::get((overturned, attester, 1)).len() as u32, others.saturating_add(1));
		Ok(())
	}

	/// A kept proof whose window closed with no summons open.
	#[benchmark]
	fn forget_overturned() -> Result<(), BenchmarkError> {
		let (overturned, _, _) = kept_proof::<T>()?;
		let until = Overturned::<T>::get(overturned).map(|proof| proof.summons_until).ok_or(BenchmarkError::Stop("not kept"))?;
		frame_system::Pallet::<T>::set_block_number(until.saturating_add(1u32.into()));
		let caller: T::AccountId = account("caller", 0, 0);
		#[extrinsic_call]
		_(RawOrigin::Signed(caller), overturned);
		assert!(Overturned::<T>::get(overturned).is_none());
		Ok(())
	}

	impl_benchmark_test_suite!(Pallet, crate::mock::new_test_ext(), crate::mock::Test);
}
