//! Challenges of a round's aggregate: the challenger opens one chunk of every input and of
//! the committed aggregate, the referee recomputes it, and a wrong one convicts at once,
//! rolling back the round built on it.

use super::*;
use touchstone_kernels::{
	ops::aggregate::{aggregate_state, weights, Weighting},
	proof::state_tree,
	referee::aggregate::{aggregate_openings, AggregateOpenings},
};
use touchstone_primitives::{
	referee::{filler_proof, kernel_outer},
	traits::ComputeNodes,
	Aggregation, OuterOptimizer,
};

/// Two shards, two rounds of four steps each, Nesterov's outer step (η 0.7, μ 0.9).
fn rounds_job() -> TinyJob {
	let mut job = TinyJob::new(8, 1).with_interval(4);
	job.spec.decomposition = Decomposition::Rounds {
		shards: 2,
		rounds: 2,
		local_steps: 4,
		aggregation: Aggregation::WeightedBySamples,
		outer: OuterOptimizer::Nesterov {
			learning_rate: FixedU64::from_rational(7, 10),
			momentum: FixedU64::from_rational(9, 10),
		},
	};
	job.spec.budget = 6 * job.spec.price_per_unit;
	job
}

/// A round's states: the global state it starts from, each shard's end state, and the
/// honest aggregate (next state and momentum) from zero momentum.
struct RoundStates {
	global: Vec<Vec<f32>>,
	shards: Vec<Vec<Vec<f32>>>,
	next: Vec<Vec<f32>>,
	next_momentum: Vec<Vec<f32>>,
}

impl RoundStates {
	/// The job's initial state, each shard's end state a deterministic step away from it.
	fn first(job: &TinyJob) -> Self {
		let global = Trainer::new(CpuBackend, &job.model, &job.train, job.data.clone()).unwrap().state().unwrap();
		let shards: Vec<Vec<Vec<f32>>> = (1..=2)
			.map(|shard| {
				global
					.iter()
					.map(|tensor| tensor.iter().enumerate().map(|(i, value)| value + 0.01 * shard as f32 * ((i % 7) as f32 - 3.0)).collect())
					.collect()
			})
			.collect();
		let zeros: Vec<Vec<f32>> = global.iter().map(|tensor| vec![0.0; tensor.len()]).collect();
		// Twelve samples a shard: equal weights.
		let weights = weights(Weighting::BySamples, &[12, 12]).unwrap();
		let (next, next_momentum) = aggregate_state(&kernel_outer(&rounds_outer(job)), &weights, &shards, &global, &zeros).unwrap();
		Self { global, shards, next, next_momentum }
	}

	fn lens(&self) -> Vec<usize> {
		self.global.iter().map(Vec::len).collect()
	}

	/// The openings of chunk `chunk` against a committed `claimed` state and momentum.
	fn openings(&self, chunk: usize, claimed: &[Vec<f32>], claimed_momentum: &[Vec<f32>]) -> AggregateOpenings {
		aggregate_openings(&self.shards, &self.global, None, claimed, Some(claimed_momentum), chunk).unwrap()
	}
}

fn rounds_outer(job: &TinyJob) -> OuterOptimizer {
	match job.spec.decomposition {
		Decomposition::Rounds { outer, .. } => outer,
		_ => unreachable!("a rounds job"),
	}
}

fn root(state: &[Vec<f32>]) -> Digest {
	state_root(state).unwrap()
}

/// Round 0's shards proven by `SOLVER` and `SECOND_SOLVER` with `states`' end states, and
/// its aggregate committed by `SOLVER` as `claimed` (and `claimed_momentum`). Returns the job.
fn aggregated(job: &TinyJob, states: &RoundStates, claimed: &[Vec<f32>], claimed_momentum: &[Vec<f32>]) -> u64 {
	let id = job.submit();
	for (shard, solver) in [SOLVER, SECOND_SOLVER].into_iter().enumerate() {
		take(id, shard as u32, solver);
		let (proof, opening, _) =
			filler_proof(0, 4, 4, job.spec.initial_state_root.0, root(&states.shards[shard]), shard as u8 + 1).unwrap();
		assert_ok!(Tasks::submit_proof(RuntimeOrigin::signed(solver), id, shard as u32, proof, opening, None));
	}
	take(id, 2, SOLVER);
	assert_ok!(Tasks::submit_aggregate(
		RuntimeOrigin::signed(SOLVER),
		id,
		2,
		root(claimed).into(),
		Some(root(claimed_momentum).into())
	));
	id
}

fn unit_state(job: u64, unit: u32) -> UnitState {
	pallet_touchstone_tasks::Units::<Test>::get(job, unit).unwrap().state
}

/// A wrong aggregate (one word of the next state off) is shown wrong at the chunk that
/// holds the word: its solver is slashed, the challenger rewarded, the aggregate goes back
/// to the pool and the next round's shards wait again. Elsewhere the chunk is upheld.
#[test]
fn a_wrong_aggregate_is_overturned_at_the_referee() {
	build_and_execute(|| {
		let job = rounds_job();
		let states = RoundStates::first(&job);
		let mut lie = states.next.clone();
		let last = lie.len() - 1;
		lie[last][0] += 0.5;
		let id = aggregated(&job, &states, &lie, &states.next_momentum);
		assert!([3, 4].iter().all(|unit| unit_state(id, *unit) == UnitState::Pending));
		let chunk_of_lie = state_tree::state_chunk_count(states.lens()[..last].iter().copied());
		// A chunk without the lie is upheld, and changes nothing.
		assert_noop!(
			Disputes::challenge_aggregate(RuntimeOrigin::signed(CHALLENGER), id, 2, 0, states.openings(0, &lie, &states.next_momentum)),
			Error::<Test>::AggregateUpheld
		);
		// Openings of another chunk than the one named are refused.
		assert_noop!(
			Disputes::challenge_aggregate(
				RuntimeOrigin::signed(CHALLENGER),
				id,
				2,
				chunk_of_lie as u32,
				states.openings(0, &lie, &states.next_momentum)
			),
			Error::<Test>::InvalidAggregateOpenings
		);
		let solver_bond = || <Staking as ComputeNodes<u64, u64>>::bond(&SOLVER, Role::Solver);
		let bond_before = solver_bond();
		let challenger_before = Balances::balance(&CHALLENGER);
		assert_ok!(Disputes::challenge_aggregate(
			RuntimeOrigin::signed(CHALLENGER),
			id,
			2,
			chunk_of_lie as u32,
			states.openings(chunk_of_lie, &lie, &states.next_momentum)
		));
		let overturned = dispute_events().into_iter().find_map(|event| match event {
			Event::AggregateOverturned { job, unit: 2, solver: SOLVER, challenger: CHALLENGER, slashed, to_challenger, .. }
				if job == id => Some((slashed, to_challenger)),
			_ => None,
		});
		let (slashed, to_challenger) = overturned.expect("the aggregate was overturned");
		assert!(slashed >= SOLVER_SLASH && to_challenger > 0);
		assert_eq!(bond_before - solver_bond(), slashed);
		assert_eq!(Balances::balance(&CHALLENGER), challenger_before + to_challenger);
		// The aggregate is back in the pool (or offered), the next round waits again.
		assert!(matches!(unit_state(id, 2), UnitState::Reassigned | UnitState::Assigned));
		assert!([3, 4].iter().all(|unit| unit_state(id, *unit) == UnitState::Waiting));
		// Overturned, it can no longer be challenged.
		assert_noop!(
			Disputes::challenge_aggregate(
				RuntimeOrigin::signed(SECOND_CHALLENGER),
				id,
				2,
				chunk_of_lie as u32,
				states.openings(chunk_of_lie, &lie, &states.next_momentum)
			),
			Error::<Test>::NotAChallengeableAggregate
		);
	});
}

/// An honest aggregate is upheld at every chunk; only a bonded challenger may challenge,
/// and only within the aggregate's window.
#[test]
fn an_honest_aggregate_stands() {
	build_and_execute(|| {
		let job = rounds_job();
		let states = RoundStates::first(&job);
		let id = aggregated(&job, &states, &states.next, &states.next_momentum);
		let chunks = state_tree::state_chunk_count(states.lens());
		for chunk in 0..chunks {
			assert_noop!(
				Disputes::challenge_aggregate(
					RuntimeOrigin::signed(CHALLENGER),
					id,
					2,
					chunk as u32,
					states.openings(chunk, &states.next, &states.next_momentum)
				),
				Error::<Test>::AggregateUpheld
			);
		}
		assert_noop!(
			Disputes::challenge_aggregate(RuntimeOrigin::signed(OWNER), id, 2, 0, states.openings(0, &states.next, &states.next_momentum)),
			Error::<Test>::NotBondedChallenger
		);
		assert_noop!(
			Disputes::challenge_aggregate(RuntimeOrigin::signed(CHALLENGER), id, 0, 0, states.openings(0, &states.next, &states.next_momentum)),
			Error::<Test>::NotAChallengeableAggregate
		);
		run_to_block(System::block_number() + CHALLENGE_WINDOW);
		assert_noop!(
			Disputes::challenge_aggregate(RuntimeOrigin::signed(CHALLENGER), id, 2, 0, states.openings(0, &states.next, &states.next_momentum)),
			Error::<Test>::NotAChallengeableAggregate
		);
	});
}
