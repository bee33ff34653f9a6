//! Tests of every call and hook of the tasks pallet: each success path with its event,
//! each error path with `assert_noop!`. Every test ends by checking both pallets'
//! invariants and that total issuance did not change.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use crate::{mock::*, Deadlines, Due, Error, Event, HoldReason, Jobs, OpenUnits, Pool, SolverUnits, Units};
use polkadot_sdk::{
	frame_support::{
		assert_noop, assert_ok,
		traits::fungible::{Inspect, InspectHold},
	},
	sp_runtime::{BoundedVec, DispatchResult, FixedU64, Perbill},
};
use touchstone_primitives::referee::{filler_segments, BoundaryOpening};
use touchstone_primitives::{
	Aggregation, Checkpoint, Decomposition, DeviceKind, JobResult, JobStatus,
	LearningProof, ModelArch, TrainingMetrics, UnitScope, UnitState, MAX_DATASET_SAMPLES,
};

const ALICE: u64 = 1;
const BOB: u64 = 2;
const CHARLIE: u64 = 3;
const DAVE: u64 = 4;

/// The congestion fee of the test job's four units entering an empty pool of ten:
/// 10 × (0/10 + 1/9 + 2/8 + 3/7), each rounded down.
const FOUR_UNIT_FEE: u64 = 7;

fn escrowed(who: u64) -> u64 {
	Balances::balance_on_hold(&RuntimeHoldReason::Tasks(HoldReason::JobEscrow), &who)
}

fn deposited(who: u64) -> u64 {
	Balances::balance_on_hold(&RuntimeHoldReason::Tasks(HoldReason::JobDeposit), &who)
}

fn submit(spec: touchstone_primitives::JobSpec<u64>) -> u64 {
	let id = crate::NextJobId::<Test>::get();
	assert_ok!(Tasks::submit_job(RuntimeOrigin::signed(ALICE), spec));
	id
}

fn proof(steps: u32, model: u8) -> LearningProof {
	LearningProof {
		trace_root: [model; 32].into(),
		steps,
		start_state_root: [0; 32].into(),
		final_state_root: [model.wrapping_add(50); 32].into(),
		metrics: TrainingMetrics { loss: FixedU64::from_rational(1, 2), accuracy: Perbill::from_percent(90) },
	}
}

/// `proof` anchored at the unit's start state, with a trace that proves its final state
/// root, and that opening.
fn anchored(job: u64, unit: u32, mut proof: LearningProof) -> (LearningProof, BoundaryOpening) {
	let work_unit = Units::<Test>::get(job, unit).unwrap();
	let (first_step, _) = Tasks::step_range(&Jobs::<Test>::get(job).unwrap(), &work_unit);
	proof.start_state_root = work_unit.start_state_root.unwrap_or_default();
	let interval = Jobs::<Test>::get(job).unwrap().spec.hyper.checkpoint_interval;
	let (root, opening) =
		filler_segments(first_step, proof.steps, interval, proof.final_state_root.0, proof.trace_root[0]).unwrap();
	proof.trace_root = root.root().into();
	(proof, opening)
}

/// Submits `proof`, anchored, as `solver`.
fn submit_proof(solver: u64, job: u64, unit: u32, proof: LearningProof) -> DispatchResult {
	let (proof, opening) = anchored(job, unit, proof);
	Tasks::submit_proof(RuntimeOrigin::signed(solver), job, unit, proof, opening, None).map(|_| ()).map_err(|error| error.error)
}

fn state(job: u64, unit: u32) -> UnitState {
	Units::<Test>::get(job, unit).unwrap().state
}

/// Claims, proves and finalizes one unit as `solver`.
fn complete_unit(solver: u64, job: u64, unit: u32, model: u8) {
	let current = Units::<Test>::get(job, unit).unwrap();
	if current.state.is_claimable() {
		assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(solver), job, unit));
	} else if current.state == UnitState::Assigned && !current.accepted {
		assert_ok!(Tasks::accept_unit(RuntimeOrigin::signed(solver), job, unit));
	}
	let (first, end) = Tasks::step_range(&Jobs::<Test>::get(job).unwrap(), &Units::<Test>::get(job, unit).unwrap());
	let steps = end - first;
	assert_ok!(submit_proof(solver, job, unit, proof(steps, model)));
	run_to_block(System::block_number() + CHALLENGE_WINDOW);
	assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(CHARLIE), job, unit));
}

/// For the migration test: as `BOB`, a finished job and a job with one unit finalized and
/// one proven; returns every unit and job as stored.
#[allow(clippy::type_complexity)]
pub(crate) fn finished_and_proven_for_migration() -> (Vec<(u64, u32, crate::WorkUnitOf<Test>)>, Vec<(u64, crate::JobOf<Test>)>) {
	let finished = submit(job_spec());
	for unit in 0..4 {
		complete_unit(BOB, finished, unit, 1 + unit as u8);
	}
	let running = submit(job_spec());
	complete_unit(BOB, running, 0, 1);
	assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), running, 1));
	assert_ok!(submit_proof(BOB, running, 1, proof(25, 2)));
	let units = Units::<Test>::iter().map(|(job, index, unit)| (job, index, unit)).collect();
	let jobs = Jobs::<Test>::iter().collect();
	(units, jobs)
}

mod submit_job {
	use super::*;

	#[test]
	fn escrows_the_budget_and_decomposes_into_step_ranges() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let free_before = Balances::balance(&ALICE);
			let job = submit(job_spec());
			assert_eq!(
				tasks_events(),
				vec![Event::JobSubmitted { job, owner: ALICE, units: 4, escrow: 50, congestion_fee: FOUR_UNIT_FEE }]
			);
			assert_eq!(escrowed(ALICE), 50);
			assert_eq!(Balances::balance(&ALICE), free_before - 50 - (DEPOSIT_BASE + 4 * DEPOSIT_PER_UNIT) - FOUR_UNIT_FEE);
			assert_eq!(deposited(ALICE), DEPOSIT_BASE + 4 * DEPOSIT_PER_UNIT);
			let stored = Jobs::<Test>::get(job).unwrap();
			assert_eq!((stored.units, stored.escrow, stored.status), (4, 50, JobStatus::Active));
			let scopes: Vec<_> = (0..4).map(|i| Units::<Test>::get(job, i).unwrap().scope).collect();
			assert_eq!(
				scopes,
				(0..4).map(|i| UnitScope::Steps { first_step: i * 25, steps: 25 }).collect::<Vec<_>>()
			);
			// Only the first range is ready; the others wait for the range before them.
			assert_eq!(state(job, 0), UnitState::Pending);
			assert!((1..4).all(|i| state(job, i) == UnitState::Waiting));
			assert_eq!(Pool::<Test>::get().into_inner(), vec![(job, 0)]);
			assert_eq!(OpenUnits::<Test>::get(), 4);
		});
	}

	#[test]
	fn cuts_data_shards_evenly() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let mut spec = job_spec();
			spec.dataset.samples = 10;
			spec.hyper.batch_size = 3;
			spec.decomposition =
				Decomposition::DataShards { shards: 3, aggregation: Aggregation::WeightedBySamples };
			let job = submit(spec);
			let shards: Vec<_> = (0..3).map(|i| Units::<Test>::get(job, i).unwrap().scope).collect();
			assert_eq!(
				shards,
				vec![
					UnitScope::Shard { first_sample: 0, samples: 3 },
					UnitScope::Shard { first_sample: 3, samples: 3 },
					UnitScope::Shard { first_sample: 6, samples: 4 },
				]
			);
			assert!((0..3).all(|i| state(job, i) == UnitState::Pending));
		});
	}

	fn rejects(change: impl FnOnce(&mut touchstone_primitives::JobSpec<u64>), error: Error<Test>) {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let mut spec = job_spec();
			change(&mut spec);
			assert_noop!(Tasks::submit_job(RuntimeOrigin::signed(ALICE), spec), error);
		});
	}

	#[test]
	fn rejects_invalid_hyper_parameters() {
		rejects(|s| s.hyper.steps = 0, Error::ZeroSteps);
		rejects(|s| s.hyper.batch_size = 0, Error::ZeroBatchSize);
		rejects(|s| s.hyper.checkpoint_interval = 0, Error::ZeroCheckpointInterval);
		rejects(|s| s.hyper.batch_size = 1_001, Error::BatchLargerThanData);
	}

	#[test]
	fn rejects_invalid_models() {
		rejects(
			|s| {
				if let ModelArch::Mlp { inputs, .. } = &mut s.model {
					*inputs = 0;
				}
			},
			Error::InvalidModel,
		);
		rejects(
			|s| {
				if let ModelArch::Mlp { classes, .. } = &mut s.model {
					*classes = 1_025;
				}
			},
			Error::TooManyClasses,
		);
		// A tensor the kernels cannot index in 32 bits: the kernels' own validation.
		rejects(
			|s| {
				if let ModelArch::Mlp { hidden, .. } = &mut s.model {
					*hidden = BoundedVec::truncate_from(vec![70_000, 70_000]);
				}
			},
			Error::InvalidModel,
		);
		// Fourteen transformer blocks: a step graph of 1,055 operators, larger than the
		// referee rebuilds within its bound (1,024).
		rejects(transformer_with(|_, _, layers, _, _| *layers = 14), Error::DisputeTooCostly);
		rejects(
			|s| {
				s.model = ModelArch::Cnn {
					channels: 1,
					height: 8,
					width: 8,
					conv_channels: BoundedVec::truncate_from(vec![4, 4]),
					kernel_size: 5,
					hidden: BoundedVec::new(),
					classes: 10,
					activation: touchstone_primitives::Activation::Relu,
				}
			},
			Error::InvalidModel,
		);
	}

	/// A small character transformer over a token stream of 250 windows, trained with
	/// AdamW: the job the chain accepts as it stands.
	fn transformer(s: &mut touchstone_primitives::JobSpec<u64>) {
		s.model = ModelArch::Transformer {
			vocab: 84,
			context: 8,
			layers: 1,
			heads: 2,
			width: 16,
			mlp_ratio: 4,
			norm: touchstone_primitives::Normalization::LayerNorm,
			tied_embeddings: true,
		};
		s.dataset.samples = 250;
		s.hyper.batch_size = 5;
		s.hyper.optimizer = touchstone_primitives::Optimizer::AdamW {
			beta1: FixedU64::from_rational(9, 10),
			beta2: FixedU64::from_rational(99, 100),
			epsilon: FixedU64::from_rational(1, 100_000_000),
			weight_decay: FixedU64::from_rational(1, 10),
		};
	}

	/// Changes the transformer of [`transformer`]'s job.
	fn transformer_with(change: impl Fn(&mut u32, &mut u32, &mut u32, &mut u32, &mut u32)) -> impl FnOnce(&mut touchstone_primitives::JobSpec<u64>) {
		move |s| {
			transformer(s);
			if let ModelArch::Transformer { vocab, context, layers, heads, width, .. } = &mut s.model {
				change(vocab, context, layers, heads, width);
			}
		}
	}

	#[test]
	fn accepts_a_transformer_within_the_kernels_bounds_and_refuses_one_beyond_them() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let mut spec = job_spec();
			transformer(&mut spec);
			let job = submit(spec);
			assert!((0..4).all(|unit| Units::<Test>::get(job, unit).is_some()));
			assert!(Units::<Test>::get(job, 4).is_none());
		});
		rejects(
			|s| {
				transformer(s);
				s.hyper.optimizer = touchstone_primitives::Optimizer::Sgd { momentum: FixedU64::from_rational(9, 10) };
			},
			Error::TransformerNeedsAdamW,
		);
		rejects(transformer_with(|_, context, _, _, _| *context = 1_025), Error::InvalidModel);
		rejects(transformer_with(|vocab, _, _, _, _| *vocab = 1), Error::InvalidModel);
		rejects(transformer_with(|vocab, _, _, _, _| *vocab = 65_537), Error::InvalidModel);
		rejects(transformer_with(|_, _, layers, _, _| *layers = 49), Error::InvalidModel);
		rejects(transformer_with(|_, _, _, heads, _| *heads = 3), Error::InvalidModel);
		rejects(transformer_with(|_, _, _, heads, width| (*heads, *width) = (1, 512)), Error::InvalidModel);
		rejects(transformer_with(|_, _, _, _, width| *width = 0), Error::InvalidModel);
		// Fewer windows than a batch draws.
		rejects(
			|s| {
				transformer(s);
				s.dataset.samples = 4;
			},
			Error::BatchLargerThanData,
		);
	}

	#[test]
	fn rejects_invalid_decompositions() {
		rejects(|s| s.decomposition = Decomposition::StepRanges { steps_per_unit: 0 }, Error::InvalidDecomposition);
		rejects(|s| s.decomposition = Decomposition::StepRanges { steps_per_unit: 10 }, Error::TooManyUnits);
		rejects(
			|s| {
				s.dataset.samples = 2;
				s.hyper.batch_size = 1;
				s.decomposition = Decomposition::DataShards { shards: 3, aggregation: Aggregation::Uniform };
			},
			Error::InvalidDecomposition,
		);
		rejects(|s| s.dataset.samples = 0, Error::EmptyDataset);
		rejects(|s| s.dataset.samples = MAX_DATASET_SAMPLES + 1, Error::DatasetTooLarge);
	}

	#[test]
	fn rejects_budgets_that_do_not_cover_the_cost() {
		rejects(|s| s.price_per_unit = MIN_PRICE - 1, Error::PriceBelowMinimum);
		rejects(|s| s.budget = 39, Error::BudgetBelowCost);
		rejects(|s| s.price_per_unit = u64::MAX / 2, Error::CostOverflow);
		rejects(|s| s.budget = 20_000, Error::InsufficientBalance);
	}

	#[test]
	fn rejects_requirements_no_registered_profile_meets() {
		rejects(|s| s.requirements.min_memory_mib = 1_000_000, Error::UnsatisfiableRequirements);
		rejects(|s| s.requirements.device = Some(DeviceKind::Cpu), Error::UnsatisfiableRequirements);
		rejects(|s| s.unit_timeout = 1, Error::UnitTimeoutTooShort);
	}

	#[test]
	fn rejects_jobs_beyond_the_open_unit_bound() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			submit(job_spec());
			submit(job_spec());
			assert_noop!(
				Tasks::submit_job(RuntimeOrigin::signed(ALICE), job_spec()),
				Error::<Test>::TooManyOpenUnits
			);
		});
	}
}

mod scheduling {
	use super::*;

	#[test]
	fn assigns_pool_units_to_the_best_eligible_solver() {
		ExtBuilder::default()
			.solver(BOB, gpu_profile())
			.solver(CHARLIE, gpu_profile())
			.solver(DAVE, cpu_profile())
			.build_and_execute(|| {
				// Charlie stakes more, so ranks first; Dave has no GPU.
				assert_ok!(Staking::bond_more(RuntimeOrigin::signed(CHARLIE), touchstone_primitives::Role::Solver, 500));
				let job = submit(job_spec());
				tasks_events();
				run_to_block(2);
				assert_eq!(
					tasks_events(),
					vec![Event::UnitAssigned { job, unit: 0, solver: CHARLIE, deadline: 2 + ACCEPTANCE_TIMEOUT }]
				);
				let unit = Units::<Test>::get(job, 0).unwrap();
				assert_eq!((unit.state, unit.solver, unit.accepted, unit.attempts), (UnitState::Assigned, Some(CHARLIE), false, 0));
				assert!(Pool::<Test>::get().is_empty());
				assert_eq!(SolverUnits::<Test>::get(CHARLIE).into_inner(), vec![(job, 0)]);
			});
	}

	#[test]
	fn spreads_work_by_capacity_and_skips_offline_solvers() {
		ExtBuilder::default().solver(BOB, gpu_profile()).solver(CHARLIE, gpu_profile()).build_and_execute(|| {
			let mut spec = job_spec();
			spec.hyper.batch_size = 1;
			spec.decomposition = Decomposition::DataShards { shards: 5, aggregation: Aggregation::Uniform };
			// Both go offline; only Bob comes back.
			run_to_block(2 + HEARTBEAT_TIMEOUT);
			assert_ok!(Staking::heartbeat(RuntimeOrigin::signed(BOB)));
			let job = submit(spec);
			run_to_block(3 + HEARTBEAT_TIMEOUT);
			let held: Vec<_> = (0..5).filter_map(|i| Units::<Test>::get(job, i).unwrap().solver).collect();
			assert_eq!(held, vec![BOB; <<Test as crate::Config>::MaxUnitsPerSolver as polkadot_sdk::frame_support::traits::Get<u32>>::get() as usize]);
			// Units Bob has no room for stay in the pool.
			assert_eq!(Pool::<Test>::get().len(), 3);
		});
	}

	#[test]
	fn the_next_step_range_is_offered_to_the_solver_that_proved_the_range_before_it() {
		ExtBuilder::default().solver(BOB, gpu_profile()).solver(CHARLIE, gpu_profile()).build_and_execute(|| {
			// Charlie ranks first with the scheduler; Bob proves range 0.
			assert_ok!(Staking::bond_more(RuntimeOrigin::signed(CHARLIE), touchstone_primitives::Role::Solver, 500));
			let job = submit(job_spec());
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
			assert_ok!(submit_proof(BOB, job, 0, proof(25, 1)));
			// Range 1 is Bob's to accept, in the proof's block: he holds its start state.
			let next = Units::<Test>::get(job, 1).unwrap();
			assert_eq!((next.state, next.solver, next.accepted), (UnitState::Assigned, Some(BOB), false));
			assert_eq!(SolverUnits::<Test>::get(BOB).into_inner(), vec![(job, 0), (job, 1)]);
			assert_eq!(crate::SolverExposure::<Test>::get(BOB), 2 * job_spec().price_per_unit);
			// Declined, it goes to the others first, as any offer does.
			assert_ok!(Tasks::decline_unit(RuntimeOrigin::signed(BOB), job, 1));
			run_to_block(2);
			let next = Units::<Test>::get(job, 1).unwrap();
			assert_eq!((next.state, next.solver), (UnitState::Assigned, Some(CHARLIE)));
			// Charlie proves range 1; he now asks more than the job pays, so range 2 is not
			// offered to him: it waits in the pool, and the scheduler gives it to Bob.
			assert_ok!(Tasks::accept_unit(RuntimeOrigin::signed(CHARLIE), job, 1));
			assert_ok!(Staking::set_min_price(RuntimeOrigin::signed(CHARLIE), job_spec().price_per_unit + 1));
			tasks_events();
			assert_ok!(submit_proof(CHARLIE, job, 1, proof(25, 2)));
			assert!(!tasks_events().iter().any(|event| matches!(event, Event::UnitAssigned { .. })));
			assert_eq!((state(job, 2), Pool::<Test>::get().into_inner()), (UnitState::Pending, vec![(job, 2)]));
			run_to_block(3);
			assert_eq!(Units::<Test>::get(job, 2).unwrap().solver, Some(BOB));
		});
	}

	#[test]
	fn units_no_online_solver_can_take_stay_in_the_pool() {
		ExtBuilder::default().solver(BOB, gpu_profile()).solver(DAVE, cpu_profile()).build_and_execute(|| {
			let mut spec = job_spec();
			spec.requirements.device = Some(DeviceKind::Cpu);
			let cpu_job = submit(spec);
			assert_ok!(Staking::unbond(RuntimeOrigin::signed(DAVE), touchstone_primitives::Role::Solver, MIN_SOLVER_BOND));
			run_to_block(2);
			assert_eq!(state(cpu_job, 0), UnitState::Pending);
			assert_eq!(Pool::<Test>::get().into_inner(), vec![(cpu_job, 0)]);
		});
	}
}

mod solver_path {
	use super::*;

	#[test]
	fn claim_accept_checkpoint_prove_and_finalize() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			tasks_events();
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
			assert_eq!(
				tasks_events(),
				vec![Event::UnitClaimed { job, unit: 0, solver: BOB, deadline: 1 + 10 }]
			);
			assert!(Units::<Test>::get(job, 0).unwrap().accepted);
			assert!(Deadlines::<Test>::contains_key(11, Due::Unit((job, 0))));

			run_to_block(3);
			let checkpoint = Checkpoint { step: 10, hash: [9; 32].into() };
			assert_ok!(Tasks::commit_checkpoint(RuntimeOrigin::signed(BOB), job, 0, checkpoint));
			System::assert_last_event(Event::CheckpointCommitted { job, unit: 0, checkpoint }.into());
			// Progress moves the deadline.
			assert!(!Deadlines::<Test>::contains_key(11, Due::Unit((job, 0))));
			assert!(Deadlines::<Test>::contains_key(13, Due::Unit((job, 0))));

			let (commitment, opening) = anchored(job, 0, proof(25, 1));
			assert_ok!(Tasks::submit_proof(RuntimeOrigin::signed(BOB), job, 0, commitment, opening, None));
			assert_eq!(
				tasks_events(),
				vec![
					Event::CheckpointCommitted { job, unit: 0, checkpoint },
					Event::ProofSubmitted { job, unit: 0, solver: BOB, proof: commitment, window_ends: 3 + CHALLENGE_WINDOW },
					Event::UnitReady { job, unit: 1 },
					// Offered at once to Bob, who holds the range's end state.
					Event::UnitAssigned { job, unit: 1, solver: BOB, deadline: 3 + ACCEPTANCE_TIMEOUT },
				]
			);
			assert_eq!(ProofsSeen::get(), vec![(job, 0)]);
			assert_eq!(state(job, 0), UnitState::Proven);
			// The next range starts from this range's final model.
			let next = Units::<Test>::get(job, 1).unwrap();
			// The next range is anchored at this one's proven end, which names its model.
			assert_eq!((next.state, next.start_state_root), (UnitState::Assigned, Some(commitment.final_state_root)));
			assert_eq!((next.solver, next.accepted), (Some(BOB), false));
			assert!(!Pool::<Test>::get().contains(&(job, 1)), "offered, not pooled");

			assert_noop!(Tasks::finalize_unit(RuntimeOrigin::signed(CHARLIE), job, 0), Error::<Test>::ChallengeWindowOpen);
			run_to_block(3 + CHALLENGE_WINDOW);
			let (bob_before, jackpot_before) = (Balances::balance(&BOB), Balances::balance(&JACKPOT));
			assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(CHARLIE), job, 0));
			// A tenth of the price funds the jackpot.
			System::assert_last_event(Event::UnitFinalized { job, unit: 0, solver: BOB, paid: 9, to_jackpot: 1, to_verifiers: 0 }.into());
			assert_eq!(Balances::balance(&BOB), bob_before + 9);
			assert_eq!(Balances::balance(&JACKPOT), jackpot_before + 1);
			assert_eq!(escrowed(ALICE), 40);
			assert_eq!(state(job, 0), UnitState::Finalized);
			assert_eq!(pallet_touchstone_staking::Nodes::<Test>::get(BOB).unwrap().reputation.completed, 1);
		});
	}

	#[test]
	fn assigned_units_must_be_accepted_first() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			run_to_block(2);
			let checkpoint = Checkpoint { step: 5, hash: [1; 32].into() };
			assert_noop!(
				Tasks::commit_checkpoint(RuntimeOrigin::signed(BOB), job, 0, checkpoint),
				Error::<Test>::NotAccepted
			);
			assert_noop!(submit_proof(BOB, job, 0, proof(25, 1)), Error::<Test>::NotAccepted);
			assert_ok!(Tasks::accept_unit(RuntimeOrigin::signed(BOB), job, 0));
			System::assert_last_event(Event::UnitAccepted { job, unit: 0, solver: BOB, deadline: 12 }.into());
			assert_noop!(Tasks::accept_unit(RuntimeOrigin::signed(BOB), job, 0), Error::<Test>::AlreadyAccepted);
		});
	}

	#[test]
	fn claim_rejects_what_cannot_be_claimed() {
		ExtBuilder::default()
			.solver(BOB, gpu_profile())
			.solver(DAVE, cpu_profile())
			.build_and_execute(|| {
				assert_noop!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), 7, 0), Error::<Test>::JobNotFound);
				let job = submit(job_spec());
				assert_noop!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 9), Error::<Test>::UnitNotFound);
				assert_noop!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 1), Error::<Test>::UnitNotClaimable);
				// Dave's CPU does not meet the GPU requirement; Charlie is not a solver.
				assert_noop!(Tasks::claim_unit(RuntimeOrigin::signed(DAVE), job, 0), Error::<Test>::NotEligible);
				assert_noop!(Tasks::claim_unit(RuntimeOrigin::signed(CHARLIE), job, 0), Error::<Test>::NotEligible);
				assert_ok!(Tasks::cancel_job(RuntimeOrigin::signed(ALICE), job));
				assert_noop!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0), Error::<Test>::JobNotActive);
			});
	}

	#[test]
	fn claim_respects_solver_capacity() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let mut spec = job_spec();
			spec.hyper.batch_size = 1;
			spec.decomposition = Decomposition::DataShards { shards: 3, aggregation: Aggregation::Uniform };
			let job = submit(spec);
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 1));
			assert_noop!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 2), Error::<Test>::SolverAtCapacity);
		});
	}

	#[test]
	fn only_the_assigned_solver_may_act() {
		ExtBuilder::default().solver(BOB, gpu_profile()).solver(CHARLIE, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
			let checkpoint = Checkpoint { step: 5, hash: [1; 32].into() };
			assert_noop!(Tasks::accept_unit(RuntimeOrigin::signed(CHARLIE), job, 0), Error::<Test>::NotAssignedSolver);
			assert_noop!(
				Tasks::commit_checkpoint(RuntimeOrigin::signed(CHARLIE), job, 0, checkpoint),
				Error::<Test>::NotAssignedSolver
			);
			assert_noop!(
				submit_proof(CHARLIE, job, 0, proof(25, 1)),
				Error::<Test>::NotAssignedSolver
			);
			assert_noop!(Tasks::accept_unit(RuntimeOrigin::signed(BOB), job, 0), Error::<Test>::AlreadyAccepted);
			assert_noop!(Tasks::accept_unit(RuntimeOrigin::signed(BOB), 9, 0), Error::<Test>::JobNotFound);
			assert_noop!(Tasks::accept_unit(RuntimeOrigin::signed(BOB), job, 9), Error::<Test>::UnitNotFound);
		});
	}

	#[test]
	fn checkpoints_must_advance_within_the_unit_on_the_interval() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
			let at = |step| Checkpoint { step, hash: [step as u8; 32].into() };
			let commit = |step| Tasks::commit_checkpoint(RuntimeOrigin::signed(BOB), job, 0, at(step));
			assert_noop!(commit(0), Error::<Test>::CheckpointOutOfRange);
			assert_noop!(commit(26), Error::<Test>::CheckpointOutOfRange);
			assert_noop!(commit(7), Error::<Test>::CheckpointMisaligned);
			assert_ok!(commit(10));
			assert_noop!(commit(10), Error::<Test>::CheckpointNotAdvancing);
			assert_noop!(commit(5), Error::<Test>::CheckpointNotAdvancing);
			// The unit's last step is always a valid checkpoint.
			assert_ok!(commit(25));
		});
	}

	#[test]
	fn proofs_must_cover_the_unit() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
			assert_noop!(
				submit_proof(BOB, job, 0, proof(24, 1)),
				Error::<Test>::StepCountMismatch
			);
		});
	}

	#[test]
	fn finalize_rejects_what_cannot_be_finalized() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			assert_noop!(Tasks::finalize_unit(RuntimeOrigin::signed(CHARLIE), 3, 0), Error::<Test>::JobNotFound);
			let job = submit(job_spec());
			assert_noop!(Tasks::finalize_unit(RuntimeOrigin::signed(CHARLIE), job, 8), Error::<Test>::UnitNotFound);
			assert_noop!(Tasks::finalize_unit(RuntimeOrigin::signed(CHARLIE), job, 0), Error::<Test>::UnitNotProven);
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
			assert_ok!(submit_proof(BOB, job, 0, proof(25, 1)));
			run_to_block(1 + CHALLENGE_WINDOW);
			HoldFinalization::set(true);
			assert_noop!(
				Tasks::finalize_unit(RuntimeOrigin::signed(CHARLIE), job, 0),
				Error::<Test>::FinalizationBlocked
			);
			HoldFinalization::set(false);
			assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(CHARLIE), job, 0));
		});
	}
}

mod timeouts {
	use super::*;

	#[test]
	fn an_unaccepted_offer_lapses_back_to_the_pool_at_no_cost() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			run_to_block(2);
			assert_eq!(state(job, 0), UnitState::Assigned);
			tasks_events();
			// Deadline 2 + 3 = 5: still fine at block 5, lapsed at block 6. Bob let it lapse,
			// so it is not offered to him again; he may still claim it.
			run_to_block(5);
			assert_eq!(state(job, 0), UnitState::Assigned);
			run_to_block(6);
			assert_eq!(tasks_events(), vec![Event::OfferLapsed { job, unit: 0, solver: BOB }]);
			let unit = Units::<Test>::get(job, 0).unwrap();
			assert_eq!((unit.state, unit.attempts, unit.passed_by), (UnitState::Pending, 0, Some(BOB)));
			assert_eq!(Pool::<Test>::get().into_inner(), vec![(job, 0)]);
			let reputation = pallet_touchstone_staking::Nodes::<Test>::get(BOB).unwrap().reputation;
			assert_eq!(reputation.failed, 0);
			assert_eq!(Staking::bonded(&BOB, touchstone_primitives::Role::Solver), MIN_SOLVER_BOND);
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
		});
	}

	#[test]
	fn a_stalled_unit_resumes_from_its_last_checkpoint() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
			let checkpoint = Checkpoint { step: 15, hash: [4; 32].into() };
			assert_ok!(Tasks::commit_checkpoint(RuntimeOrigin::signed(BOB), job, 0, checkpoint));
			tasks_events();
			// Deadline 1 + 10 = 11; at block 12 the unit times out, costs Bob reputation (not
			// bond), and goes back to the pool carrying its checkpoint along.
			run_to_block(12);
			assert_eq!(
				tasks_events(),
				vec![Event::UnitTimedOut { job, unit: 0, solver: BOB, resume_from: Some(checkpoint) }]
			);
			let unit = Units::<Test>::get(job, 0).unwrap();
			assert_eq!((unit.state, unit.attempts, unit.last_checkpoint), (UnitState::Reassigned, 1, Some(checkpoint)));
			let reputation = pallet_touchstone_staking::Nodes::<Test>::get(BOB).unwrap().reputation;
			assert_eq!((reputation.failed, reputation.failed_value), (1, 10));
			assert_eq!(Staking::bonded(&BOB, touchstone_primitives::Role::Solver), MIN_SOLVER_BOND);
		});
	}

	#[test]
	fn a_unit_out_of_attempts_fails_and_takes_later_ranges_with_it() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			// Two solvers took it (claims at blocks 1 and 12) and both stalled.
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
			run_to_block(12);
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
			run_to_block(23);
			assert!((0..4).all(|i| state(job, i) == UnitState::Failed));
			let stored = Jobs::<Test>::get(job).unwrap();
			assert_eq!(stored.status, JobStatus::Completed);
			assert_eq!(escrowed(ALICE), 0);
			assert_eq!(OpenUnits::<Test>::get(), 0);
			assert_eq!(
				stored.result,
				Some(JobResult {
					state_root: Default::default(),
					metrics: Default::default(),
					units_finalized: 0,
					units_failed: 4
				})
			);
		});
	}

	#[test]
	fn a_unit_nobody_takes_expires_and_is_refunded() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			// Bob declines every offer, so nobody takes unit 0 by block 1 + 20.
			run_to_block(2);
			assert_ok!(Tasks::decline_unit(RuntimeOrigin::signed(BOB), job, 0));
			run_to_block(1 + POOL_TIMEOUT as u64);
			assert_eq!(state(job, 0), UnitState::Pending);
			tasks_events();
			run_to_block(2 + POOL_TIMEOUT as u64);
			let events = tasks_events();
			assert_eq!(events[0], Event::UnitExpired { job, unit: 0 });
			assert!((0..4).all(|i| state(job, i) == UnitState::Failed));
			assert_eq!(escrowed(ALICE), 0);
			assert!(Pool::<Test>::get().is_empty());
			assert_eq!(Jobs::<Test>::get(job).unwrap().status, JobStatus::Completed);
		});
	}

	#[test]
	fn a_timeout_of_an_accepted_unit_in_a_cancelled_job_fails_it_and_the_job_stays_cancelled() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
			assert_ok!(Tasks::cancel_job(RuntimeOrigin::signed(ALICE), job));
			run_to_block(12);
			assert_eq!(state(job, 0), UnitState::Failed);
			let stored = Jobs::<Test>::get(job).unwrap();
			assert_eq!(stored.status, JobStatus::Cancelled);
			assert_eq!(stored.result.map(|r| r.units_failed), Some(4));
			assert_eq!(escrowed(ALICE), 0);
		});
	}

	#[test]
	fn a_failure_mid_job_fails_the_later_ranges_and_keeps_the_proven_one() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			complete_unit(BOB, job, 0, 1);
			// Unit 1 is taken twice and stalls twice.
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 1));
			let stall = System::block_number() + 11;
			run_to_block(stall);
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 1));
			run_to_block(stall + 11);
			assert_eq!(
				(0..4).map(|i| state(job, i)).collect::<Vec<_>>(),
				vec![UnitState::Finalized, UnitState::Failed, UnitState::Failed, UnitState::Failed]
			);
			let result = Jobs::<Test>::get(job).unwrap().result.unwrap();
			assert_eq!((result.units_finalized, result.units_failed), (1, 3));
			assert_eq!(result.state_root, proof(25, 1).final_state_root);
			assert_eq!(escrowed(ALICE), 0);
		});
	}

	#[test]
	fn a_lagging_sweep_catches_up_over_blocks() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let mut spec = job_spec();
			spec.hyper.batch_size = 1;
			spec.budget = 100;
			spec.decomposition = Decomposition::DataShards { shards: 8, aggregation: Aggregation::Uniform };
			let big = submit(spec.clone());
			spec.decomposition = Decomposition::DataShards { shards: 2, aggregation: Aggregation::Uniform };
			let small = submit(spec);
			// Bob leaves the solver role, so nobody takes the ten units: all expire together,
			// more than the eight entries the sweep handles per block.
			assert_ok!(Staking::unbond(RuntimeOrigin::signed(BOB), touchstone_primitives::Role::Solver, MIN_SOLVER_BOND));
			run_to_block(2 + POOL_TIMEOUT as u64);
			let expired = |job: u64, units: u32| (0..units).filter(|&i| state(job, i) == UnitState::Failed).count();
			assert_eq!(expired(big, 8) + expired(small, 2), 8);
			run_to_block(3 + POOL_TIMEOUT as u64);
			assert_eq!(expired(big, 8) + expired(small, 2), 10);
			assert_eq!(crate::DeadlineCursor::<Test>::get(), 3 + POOL_TIMEOUT as u64);
		});
	}
}

mod cancellation {
	use super::*;

	#[test]
	fn refunds_unstarted_units_and_lets_started_ones_finish() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let mut spec = job_spec();
			spec.hyper.batch_size = 1;
			spec.decomposition = Decomposition::DataShards { shards: 3, aggregation: Aggregation::Uniform };
			let job = submit(spec);
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
			tasks_events();
			assert_ok!(Tasks::cancel_job(RuntimeOrigin::signed(ALICE), job));
			assert_eq!(tasks_events(), vec![Event::JobCancelled { job, units_cancelled: 2, refunded: 20 }]);
			assert_eq!(escrowed(ALICE), 30);
			assert_eq!((state(job, 1), state(job, 2)), (UnitState::Cancelled, UnitState::Cancelled));
			assert!(Pool::<Test>::get().is_empty());
			assert_eq!(Jobs::<Test>::get(job).unwrap().status, JobStatus::Cancelled);

			// The started unit runs to the end; then the job completes and refunds the rest.
			complete_unit(BOB, job, 0, 1);
			let stored = Jobs::<Test>::get(job).unwrap();
			assert_eq!(stored.status, JobStatus::Cancelled);
			assert_eq!(stored.result.unwrap().units_finalized, 1);
			assert_eq!(escrowed(ALICE), 0);
		});
	}

	#[test]
	fn cancelling_an_unstarted_job_completes_it() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			run_to_block(2); // Assigned, not accepted: still unstarted.
			assert_ok!(Tasks::cancel_job(RuntimeOrigin::signed(ALICE), job));
			let stored = Jobs::<Test>::get(job).unwrap();
			assert_eq!(stored.status, JobStatus::Cancelled);
			assert!(stored.result.is_some());
			assert_eq!(escrowed(ALICE), 0);
			assert!(SolverUnits::<Test>::get(BOB).is_empty());
		});
	}

	#[test]
	fn rejects_strangers_and_repeats() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			assert_noop!(Tasks::cancel_job(RuntimeOrigin::signed(ALICE), 5), Error::<Test>::JobNotFound);
			let job = submit(job_spec());
			assert_noop!(Tasks::cancel_job(RuntimeOrigin::signed(BOB), job), Error::<Test>::NotJobOwner);
			assert_ok!(Tasks::cancel_job(RuntimeOrigin::signed(ALICE), job));
			assert_noop!(Tasks::cancel_job(RuntimeOrigin::signed(ALICE), job), Error::<Test>::JobNotActive);
		});
	}
}

mod aggregation {
	use super::*;

	#[test]
	fn a_step_range_job_takes_its_last_range_and_refunds_the_rest() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			for unit in 0..4 {
				complete_unit(BOB, job, unit, unit as u8 + 1);
			}
			let result = Jobs::<Test>::get(job).unwrap().result.unwrap();
			assert_eq!(result.state_root, proof(25, 4).final_state_root);
			assert_eq!((result.units_finalized, result.units_failed), (4, 0));
			System::assert_last_event(
				Event::JobCompleted { job, result, refunded: 10, removable_at: System::block_number() + RETENTION }.into(),
			);
			assert_eq!(escrowed(ALICE), 0);
		});
	}

	#[test]
	fn a_data_parallel_job_averages_its_shards_by_samples() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let mut spec = job_spec();
			spec.hyper.batch_size = 1;
			spec.decomposition = Decomposition::DataShards { shards: 2, aggregation: Aggregation::WeightedBySamples };
			spec.dataset.samples = 3; // shards of 1 and 2 samples
			let job = submit(spec);
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 1));
			let mut first = proof(100, 1);
			first.metrics = TrainingMetrics { loss: FixedU64::from_u32(1), accuracy: Perbill::from_percent(60) };
			let mut second = proof(100, 2);
			second.metrics = TrainingMetrics { loss: FixedU64::from_u32(4), accuracy: Perbill::from_percent(90) };
			assert_ok!(submit_proof(BOB, job, 0, first));
			assert_ok!(submit_proof(BOB, job, 1, second));
			run_to_block(1 + CHALLENGE_WINDOW);
			assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(CHARLIE), job, 1));
			assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(CHARLIE), job, 0));
			let result = Jobs::<Test>::get(job).unwrap().result.unwrap();
			// (1·1 + 2·4) / 3 = 3; (1·60% + 2·90%) / 3 = 80%.
			assert_eq!(result.metrics.loss, FixedU64::from_u32(3));
			assert_eq!(result.metrics.accuracy, Perbill::from_percent(80));
			let mut roots = first.final_state_root.0.to_vec();
			roots.extend(second.final_state_root.0);
			assert_eq!(result.state_root, polkadot_sdk::sp_io::hashing::blake2_256(&roots).into());
		});
	}
}

mod runtime_api {
	use super::*;

	#[test]
	fn lists_held_units_then_claimable_ones() {
		ExtBuilder::default().solver(BOB, gpu_profile()).solver(DAVE, cpu_profile()).build_and_execute(|| {
			let mut spec = job_spec();
			spec.hyper.batch_size = 1;
			spec.decomposition = Decomposition::DataShards { shards: 3, aggregation: Aggregation::Uniform };
			let job = submit(spec);
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 1));
			let listed: Vec<_> = Tasks::units_for_solver(&BOB, 10).into_iter().map(|u| (u.unit, u.claimable)).collect();
			assert_eq!(listed, vec![(1, false), (0, true), (2, true)]);
			assert_eq!(Tasks::units_for_solver(&BOB, 2).len(), 2);
			// Dave's CPU is not eligible for any of them.
			assert!(Tasks::units_for_solver(&DAVE, 10).is_empty());
			let state = Tasks::job_state(job).unwrap();
			assert_eq!((state.job.units, state.units.len()), (3, 3));
			assert!(Tasks::job_state(job + 1).is_none());
		});
	}

	/// The proofs open to challenge are found by the block they were proven at: only those
	/// inside their window and undisputed, a reopened window under its new block, and
	/// none once final.
	#[test]
	fn lists_open_proofs_by_the_block_they_were_proven_at() {
		use touchstone_primitives::traits::UnitProofs;
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let mut spec = job_spec();
			spec.hyper.batch_size = 1;
			spec.decomposition = Decomposition::DataShards { shards: 2, aggregation: Aggregation::Uniform };
			let job = submit(spec);
			let steps = Jobs::<Test>::get(job).unwrap().spec.hyper.steps;
			let open = |from: u64| -> Vec<(u32, u64)> {
				Tasks::proofs_since(from).into_iter().map(|proof| (proof.unit, proof.window_ends)).collect()
			};
			for unit in 0..2 {
				if Units::<Test>::get(job, unit).unwrap().state.is_claimable() {
					assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, unit));
				} else {
					assert_ok!(Tasks::accept_unit(RuntimeOrigin::signed(BOB), job, unit));
				}
			}
			let first = System::block_number();
			assert_ok!(submit_proof(BOB, job, 0, proof(steps, 1)));
			run_to_block(first + 2);
			assert_ok!(submit_proof(BOB, job, 1, proof(steps, 2)));
			let listed = Tasks::proofs_since(0);
			assert_eq!(listed[0].solver, BOB);
			assert_eq!(listed[0].trace_root, Units::<Test>::get(job, 0).unwrap().proof.unwrap().trace_root);
			assert_eq!(open(0), vec![(0, first + CHALLENGE_WINDOW), (1, first + 2 + CHALLENGE_WINDOW)]);
			assert_eq!(open(first + 1), vec![(1, first + 2 + CHALLENGE_WINDOW)]);
			// A disputed proof is not open to another challenge; when its disputes fail, its
			// window opens again in full, under the block it opened in.
			assert_ok!(Tasks::open_challenge(job, 1));
			assert_eq!(open(0), vec![(0, first + CHALLENGE_WINDOW)]);
			run_to_block(first + 3);
			assert_ok!(Tasks::close_challenge(job, 1));
			assert_eq!(open(first + 3), vec![(1, first + 3 + CHALLENGE_WINDOW)]);
			// Unit 0's window closes: it is no longer listed, though not yet final.
			run_to_block(first + CHALLENGE_WINDOW);
			assert_eq!(open(0), vec![(1, first + 3 + CHALLENGE_WINDOW)]);
			assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(CHARLIE), job, 0));
			run_to_block(first + 3 + CHALLENGE_WINDOW);
			assert!(open(0).is_empty());
			assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(CHARLIE), job, 1));
			assert_eq!(crate::ProvenAt::<Test>::iter().count(), 0);
		});
	}
}

mod hardening {
	use super::*;
	use touchstone_primitives::Role;

	#[test]
	fn a_declined_offer_goes_to_another_solver_and_is_not_an_attempt() {
		ExtBuilder::default().solver(BOB, gpu_profile()).solver(CHARLIE, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			run_to_block(2);
			let first = Units::<Test>::get(job, 0).unwrap().solver.unwrap();
			let other = if first == BOB { CHARLIE } else { BOB };
			assert_noop!(Tasks::decline_unit(RuntimeOrigin::signed(other), job, 0), Error::<Test>::NotAssignedSolver);
			tasks_events();
			assert_ok!(Tasks::decline_unit(RuntimeOrigin::signed(first), job, 0));
			assert_eq!(tasks_events(), vec![Event::UnitDeclined { job, unit: 0, solver: first }]);
			assert!(SolverUnits::<Test>::get(first).is_empty());
			run_to_block(3);
			let unit = Units::<Test>::get(job, 0).unwrap();
			assert_eq!((unit.state, unit.solver, unit.attempts), (UnitState::Assigned, Some(other), 0));
			assert_ok!(Tasks::accept_unit(RuntimeOrigin::signed(other), job, 0));
			assert_noop!(Tasks::decline_unit(RuntimeOrigin::signed(other), job, 0), Error::<Test>::AlreadyAccepted);
			assert_eq!(Units::<Test>::get(job, 0).unwrap().attempts, 1);
		});
	}

	#[test]
	fn offers_that_keep_lapsing_do_not_keep_a_unit_past_its_pool_wait() {
		ExtBuilder::default().solver(BOB, gpu_profile()).solver(CHARLIE, gpu_profile()).build_and_execute(|| {
			let mut spec = job_spec();
			spec.pool_timeout = 4;
			let job = submit(spec);
			// Pool deadline 1 + 4 = 5. Offered at 2 (acceptance by 5), lapses at 6: by then
			// the unit's pool wait is over, so it expires instead of going to Charlie.
			run_to_block(2);
			assert_eq!(state(job, 0), UnitState::Assigned);
			tasks_events();
			run_to_block(6);
			let events = tasks_events();
			assert_eq!(events[0], Event::UnitExpired { job, unit: 0 });
			assert!((0..4).all(|i| state(job, i) == UnitState::Failed));
			assert!(SolverUnits::<Test>::iter().next().is_none());
			assert_eq!(escrowed(ALICE), 0);
		});
	}

	#[test]
	fn a_unit_is_offered_only_to_solvers_whose_minimum_price_it_meets() {
		ExtBuilder::default().solver(BOB, gpu_profile()).solver(CHARLIE, gpu_profile()).build_and_execute(|| {
			// Charlie stakes more, so he would rank first, but charges more than the job pays.
			assert_ok!(Staking::bond_more(RuntimeOrigin::signed(CHARLIE), Role::Solver, 500));
			assert_ok!(Staking::set_min_price(RuntimeOrigin::signed(CHARLIE), 11));
			let job = submit(job_spec());
			run_to_block(2);
			assert_eq!(Units::<Test>::get(job, 0).unwrap().solver, Some(BOB));
			let mut second = job_spec();
			second.decomposition = Decomposition::StepRanges { steps_per_unit: 100 };
			second.budget = 10;
			let job2 = submit(second);
			assert_noop!(Tasks::claim_unit(RuntimeOrigin::signed(CHARLIE), job2, 0), Error::<Test>::NotEligible);
			// No bonded solver at the price at all: refused at submission.
			assert_ok!(Staking::set_min_price(RuntimeOrigin::signed(BOB), 11));
			assert_noop!(Tasks::submit_job(RuntimeOrigin::signed(ALICE), job_spec()), Error::<Test>::UnsatisfiableRequirements);
		});
	}

	#[test]
	fn collateral_scales_with_the_value_of_held_units() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			// Units at 20 each, collateral 300 % of the price: Bob's 100 bond covers one
			// (60), not two (120).
			let mut spec = job_spec();
			spec.hyper.batch_size = 1;
			spec.price_per_unit = 20;
			spec.budget = 40;
			spec.decomposition = Decomposition::DataShards { shards: 2, aggregation: Aggregation::Uniform };
			let job = submit(spec);
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
			assert_eq!(crate::SolverExposure::<Test>::get(BOB), 20);
			assert_eq!(<Tasks as touchstone_primitives::traits::ActiveWork<_, _>>::required_collateral(&BOB), 60);
			assert_noop!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 1), Error::<Test>::InsufficientCollateral);
			// The scheduler does not offer it either, and Bob cannot unbond below the collateral.
			run_to_block(2);
			assert_eq!(state(job, 1), UnitState::Pending);
			assert_noop!(
				Staking::unbond(RuntimeOrigin::signed(BOB), Role::Solver, MIN_SOLVER_BOND),
				pallet_touchstone_staking::Error::<Test>::HasActiveWork
			);
			assert_ok!(Staking::bond_more(RuntimeOrigin::signed(BOB), Role::Solver, 20));
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 1));
			assert_noop!(
				Staking::unbond(RuntimeOrigin::signed(BOB), Role::Solver, 1),
				pallet_touchstone_staking::Error::<Test>::BelowCollateral
			);
		});
	}

	#[test]
	fn collateral_rounds_up_and_never_overflows() {
		ExtBuilder::default().build_and_execute(|| {
			assert_eq!(Tasks::collateral(0), 0);
			assert_eq!(Tasks::collateral(1), 3);
			assert_eq!(Tasks::collateral(101), 303);
			assert_eq!(Tasks::collateral(u64::MAX), u64::MAX);
		});
	}

	#[test]
	fn a_unit_with_more_segments_than_the_chain_allows_is_refused() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let limit = <<Test as crate::Config>::MaxSegmentsPerUnit as polkadot_sdk::frame_support::traits::Get<u32>>::get();
			let mut spec = job_spec();
			spec.decomposition = Decomposition::StepRanges { steps_per_unit: limit + 1 };
			spec.hyper.steps = limit + 1;
			spec.hyper.checkpoint_interval = 1;
			spec.budget = spec.price_per_unit;
			assert_noop!(Tasks::submit_job(RuntimeOrigin::signed(ALICE), spec.clone()), Error::<Test>::TooManySegments);
			spec.hyper.checkpoint_interval = 2;
			assert_ok!(Tasks::submit_job(RuntimeOrigin::signed(ALICE), spec));
		});
	}

	/// A job whose checkpoint segments would take longer than `MaxSegmentBlocks` to
	/// re-execute at `ReferenceWorkPerBlock` is refused: rounds and dispute phases give a
	/// segment its time, and must end while bonds are in reach. So is one whose unit timeout
	/// cannot hold a segment's training beyond `MinUnitTimeout`. Shorter segments of the same
	/// model with a timeout that holds them are accepted, and a proven unit reports its
	/// segments' blocks.
	#[test]
	fn a_job_whose_segments_take_too_long_to_re_execute_or_outlast_its_unit_timeout_is_refused() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let limit = <<Test as crate::Config>::MaxSegmentBlocks as polkadot_sdk::frame_support::traits::Get<u32>>::get();
			let rate = <<Test as crate::Config>::ReferenceWorkPerBlock as polkadot_sdk::frame_support::traits::Get<u64>>::get();
			let mut spec = job_spec();
			let ModelArch::Mlp { hidden, .. } = &mut spec.model else { panic!("an MLP") };
			*hidden = BoundedVec::truncate_from(vec![2048, 2048]);
			let step = touchstone_primitives::step_multiply_adds(&spec.model, &spec.hyper);
			// The longest interval the limit allows, and one step more.
			let allowed = (u64::from(limit) * rate / step) as u32;
			assert!(allowed >= 1 && allowed < spec.hyper.steps, "the test's model fits its interval range");
			spec.hyper.checkpoint_interval = allowed + 1;
			assert_noop!(Tasks::submit_job(RuntimeOrigin::signed(ALICE), spec.clone()), Error::<Test>::SegmentTooLong);
			spec.hyper.checkpoint_interval = allowed;
			// The timeout must hold one such segment beyond the minimum: a deadline moves on
			// only when a checkpoint is committed.
			let minimum = <<Test as crate::Config>::MinUnitTimeout as polkadot_sdk::frame_support::traits::Get<u32>>::get();
			let segment = (u64::from(allowed) * step / rate) as u32;
			assert!(segment > 0, "the test's segment takes blocks");
			spec.unit_timeout = minimum + segment - 1;
			assert_noop!(Tasks::submit_job(RuntimeOrigin::signed(ALICE), spec.clone()), Error::<Test>::UnitTimeoutTooShort);
			spec.unit_timeout = minimum + segment;
			let job = submit(spec);
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
			assert_ok!(submit_proof(BOB, job, 0, proof(25, 1)));
			let proven = <Tasks as touchstone_primitives::traits::UnitProofs<_, _, _>>::proven_unit(job, 0).unwrap();
			assert_eq!(u64::from(proven.segment_blocks), u64::from(allowed) * step / rate);
			assert!(proven.segment_blocks <= limit);
		});
	}

	#[test]
	fn solver_calls_after_the_deadline_are_refused_while_the_sweep_lags() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
			// Deadline 11. Jump past it without running the hooks: the sweep has not run.
			System::set_block_number(12);
			assert_eq!(state(job, 0), UnitState::Assigned);
			let checkpoint = Checkpoint { step: 10, hash: [1; 32].into() };
			assert_noop!(
				Tasks::commit_checkpoint(RuntimeOrigin::signed(BOB), job, 0, checkpoint),
				Error::<Test>::DeadlinePassed
			);
			assert_noop!(submit_proof(BOB, job, 0, proof(25, 1)), Error::<Test>::DeadlinePassed);
			System::set_block_number(11);
			assert_ok!(Tasks::commit_checkpoint(RuntimeOrigin::signed(BOB), job, 0, checkpoint));
		});
	}

	#[test]
	fn misaligned_ranges_accept_the_checkpoints_the_kernels_write() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			// Ranges of 25 steps, checkpoints every 10: unit 1 covers steps 25..50.
			let mut spec = job_spec();
			spec.hyper.checkpoint_interval = 10;
			let job = submit(spec.clone());
			complete_unit(BOB, job, 0, 1);
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 1));
			let at = |step: u32| Checkpoint { step, hash: [step as u8; 32].into() };
			assert_noop!(
				Tasks::commit_checkpoint(RuntimeOrigin::signed(BOB), job, 1, at(35)),
				Error::<Test>::CheckpointMisaligned
			);
			// The global multiples inside the range, then its end: what the trainer writes.
			let train = touchstone_primitives::referee::kernel_train(&spec.hyper);
			let written: Vec<u32> = (26..=50).filter(|&step| train.is_checkpoint_step(step, 50)).collect();
			assert_eq!(written, vec![30, 40, 50]);
			for step in written {
				assert_ok!(Tasks::commit_checkpoint(RuntimeOrigin::signed(BOB), job, 1, at(step)));
			}
		});
	}

	#[test]
	fn a_proof_the_verification_hook_refuses_changes_nothing() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
			RejectProofs::set(true);
			assert_noop!(
				submit_proof(BOB, job, 0, proof(25, 1)),
				polkadot_sdk::sp_runtime::DispatchError::Other("proof refused")
			);
			RejectProofs::set(false);
			assert_ok!(submit_proof(BOB, job, 0, proof(25, 1)));
		});
	}

	#[test]
	fn finished_jobs_are_removed_after_retention_and_the_deposit_returned() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let free = Balances::balance(&ALICE);
			let job = submit(job_spec());
			assert_ok!(Tasks::cancel_job(RuntimeOrigin::signed(ALICE), job));
			let removable_at = Jobs::<Test>::get(job).unwrap().removable_at.unwrap();
			assert_eq!(removable_at, 1 + RETENTION);
			run_to_block(removable_at);
			assert!(Jobs::<Test>::get(job).is_some());
			tasks_events();
			run_to_block(removable_at + 1);
			let deposit = DEPOSIT_BASE + 4 * DEPOSIT_PER_UNIT;
			assert_eq!(tasks_events(), vec![Event::JobRemoved { job, deposit }]);
			assert!(Jobs::<Test>::get(job).is_none());
			assert_eq!(Units::<Test>::iter_prefix(job).count(), 0);
			assert_eq!(deposited(ALICE), 0);
			// Everything but the congestion fee came back.
			assert_eq!(Balances::balance(&ALICE), free - FOUR_UNIT_FEE);
		});
	}

	#[test]
	fn a_jackpot_that_cannot_take_its_share_does_not_block_payment() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			use polkadot_sdk::frame_support::traits::{fungible::Mutate, tokens::Preservation};
			let job = submit(job_spec());
			// Drain the jackpot account (below the existential deposit, so it is gone).
			assert_ok!(Balances::transfer(&JACKPOT, &ALICE, 2 + FOUR_UNIT_FEE, Preservation::Expendable));
			let bob_before = Balances::balance(&BOB);
			complete_unit(BOB, job, 0, 1);
			assert_eq!(Balances::balance(&BOB), bob_before + 10);
			assert_eq!(Balances::balance(&JACKPOT), 0);
			// Put the account back so the test's issuance check sees the same total.
			assert_ok!(Balances::transfer(&ALICE, &JACKPOT, 2 + FOUR_UNIT_FEE, Preservation::Expendable));
		});
	}

	#[test]
	fn attesting_verifiers_split_their_share_of_the_price() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			Attesters::set(vec![CHARLIE]);
			let (bob_before, charlie_before) = (Balances::balance(&BOB), Balances::balance(&CHARLIE));
			complete_unit(BOB, job, 0, 1);
			// A tenth of the price of 10 to the jackpot, a tenth to Charlie, the rest to Bob.
			assert!(System::events().iter().any(|record| record.event
				== Event::UnitFinalized { job, unit: 0, solver: BOB, paid: 8, to_jackpot: 1, to_verifiers: 1 }.into()));
			assert_eq!(Balances::balance(&BOB), bob_before + 8);
			assert_eq!(Balances::balance(&CHARLIE), charlie_before + 1);
			Attesters::set(Vec::new());
		});
	}

	#[test]
	fn a_solver_holding_units_cannot_change_its_hardware() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 0));
			assert_noop!(
				Staking::update_profile(RuntimeOrigin::signed(BOB), cpu_profile()),
				pallet_touchstone_staking::Error::<Test>::HasActiveWork
			);
		});
	}
}

/// The attacks of `docs/protocol.md`, "Attacks considered", played against the tasks
/// pallet. Each failed before its fix and stays as the regression test.
mod attacks {
	use super::*;

	/// A profile only the attacker's sybil meets: its own region.
	fn sybil_profile() -> touchstone_primitives::HardwareProfile {
		let mut profile = gpu_profile();
		profile.region = BoundedVec::truncate_from(b"zz".to_vec());
		profile
	}

	/// A job only the sybil can take: four units at the minimum price.
	fn sybil_job() -> touchstone_primitives::JobSpec<u64> {
		let mut spec = job_spec();
		spec.requirements.region = Some(BoundedVec::truncate_from(b"zz".to_vec()));
		spec.price_per_unit = MIN_PRICE;
		spec.budget = 4 * MIN_PRICE;
		spec
	}

	/// Attack 8(a): one account fills `MaxOpenUnits` with jobs that only its own sybil
	/// solver can take. The sybil was allowed to be offline, and the jobs cost nothing but
	/// refundable escrow and deposits; every other submission then failed with
	/// `TooManyOpenUnits` until the pool timeout refunded them.
	#[test]
	fn attack_one_account_cannot_freeze_the_pool_for_free() {
		ExtBuilder::default().solver(BOB, gpu_profile()).solver(CHARLIE, sybil_profile()).build_and_execute(|| {
			let max_open = <<Test as crate::Config>::MaxOpenUnits as polkadot_sdk::frame_support::traits::Get<u32>>::get();
			// The sybil lapses; Bob stays online.
			run_to_block(HEARTBEAT_TIMEOUT + 2);
			assert_ok!(Staking::heartbeat(RuntimeOrigin::signed(BOB)));
			let offline = Tasks::submit_job(RuntimeOrigin::signed(DAVE), sybil_job());
			// An offline sybil meets nothing: the job cannot run and is refused.
			eprintln!("offline: {offline:?}");
			// Online, the sybil lets its owner fill the pool, but every unit past the first
			// pays a fee that rises with the pool's occupancy, which no refund returns.
			assert_ok!(Staking::heartbeat(RuntimeOrigin::signed(CHARLIE)));
			let before = Balances::total_balance(&DAVE);
			while OpenUnits::<Test>::get() + 4 <= max_open {
				assert_ok!(Tasks::submit_job(RuntimeOrigin::signed(DAVE), sybil_job()));
			}
			// The sybil declines every offer; the units wait out their pool timeout and
			// everything refundable comes back.
			run_to_block(System::block_number() + u64::from(POOL_TIMEOUT) + RETENTION + 2);
			assert_eq!(OpenUnits::<Test>::get(), 0);
			let lost = before - Balances::total_balance(&DAVE);
			let filled = max_open / 4 * 4;
			assert_eq!(lost, Tasks::congestion_fee(0, filled), "filling {filled} of {max_open} slots cost DAVE {lost}");
			assert!(lost >= 4 * MIN_PRICE, "filling {filled} of {max_open} slots cost DAVE only {lost}");
		});
	}

	/// Attack 9, its model half: the model a job's result names was whatever hash its
	/// solver wrote into the proof (`final_model_hash`), which nothing tied to the final
	/// state root the proof's opening proved: a solver that trained honestly could name any
	/// file, or one it never serves, as the job's model and be paid. The model is now named
	/// by its proven final state root alone (workers fetch it by that root and check it
	/// against it), so a proof can name only a model its trace proves: a final state its
	/// trace does not open to is refused, and the result names the last proof's.
	#[test]
	fn attack_the_result_names_only_a_proven_model() {
		ExtBuilder::default().solver(BOB, gpu_profile()).build_and_execute(|| {
			let job = submit(job_spec());
			for unit in 0..3 {
				complete_unit(BOB, job, unit, 1 + unit as u8);
			}
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, 3));
			let (mut unproven, opening) = anchored(job, 3, proof(25, 4));
			unproven.final_state_root = [99; 32].into();
			assert_noop!(
				Tasks::submit_proof(RuntimeOrigin::signed(BOB), job, 3, unproven, opening, None),
				Error::<Test>::InvalidFinalState
			);
			assert_ok!(submit_proof(BOB, job, 3, proof(25, 4)));
			run_to_block(System::block_number() + CHALLENGE_WINDOW);
			assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(CHARLIE), job, 3));
			let result = Jobs::<Test>::get(job).unwrap().result.unwrap();
			assert_eq!(result.units_finalized, 4);
			assert_eq!(result.state_root, proof(25, 4).final_state_root, "the result names the model the last proof proved");
		});
	}
}

/// Rounds jobs: each round's shards train from its global state in parallel, its
/// aggregate waits for all of them, and the next round starts from the aggregate.
mod rounds {
	use super::*;
	use touchstone_primitives::{OuterOptimizer, RoundLayout};

	const EVE: u64 = 5;
	const FERDIE: u64 = 6;
	const SOLVERS: [u64; 4] = [BOB, DAVE, EVE, FERDIE];
	/// Four shards, three rounds of 20 local steps.
	const LAYOUT: RoundLayout = RoundLayout { shards: 4, rounds: 3 };
	const LOCAL_STEPS: u32 = 20;

	/// A 3-round, 4-shard job of 15 units (the test bounds raised to hold it), under
	/// Nesterov's outer step.
	fn rounds_spec() -> touchstone_primitives::JobSpec<u64> {
		crate::mock::MaxUnitsPerJob::set(&16);
		crate::mock::MaxOpenUnits::set(&20);
		let mut spec = job_spec();
		spec.hyper.steps = LAYOUT.rounds * LOCAL_STEPS;
		spec.decomposition = Decomposition::Rounds {
			shards: LAYOUT.shards,
			rounds: LAYOUT.rounds,
			local_steps: LOCAL_STEPS,
			aggregation: Aggregation::WeightedBySamples,
			outer: OuterOptimizer::Nesterov {
				learning_rate: FixedU64::from_rational(7, 10),
				momentum: FixedU64::from_rational(9, 10),
			},
		};
		spec.budget = 15 * spec.price_per_unit;
		spec
	}

	fn builder() -> ExtBuilder {
		SOLVERS.iter().fold(ExtBuilder::default(), |builder, solver| builder.solver(*solver, gpu_profile()))
	}

	/// The root of round `round`'s aggregate in these tests.
	fn aggregate_root(round: u32) -> polkadot_sdk::sp_core::H256 {
		[100 + round as u8; 32].into()
	}

	fn start_of(job: u64, unit: u32) -> Option<polkadot_sdk::sp_core::H256> {
		Units::<Test>::get(job, unit).unwrap().start_state_root
	}

	/// Takes unit `index` for `solver` from the pool, or accepts it as the solver the
	/// scheduler offered it to. Returns who took it.
	fn take(solver: u64, job: u64, index: u32) -> u64 {
		let unit = Units::<Test>::get(job, index).unwrap();
		if unit.state == UnitState::Assigned && !unit.accepted {
			let offered = unit.solver.unwrap();
			assert_ok!(Tasks::accept_unit(RuntimeOrigin::signed(offered), job, index));
			return offered;
		}
		assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(solver), job, index));
		solver
	}

	/// Takes and proves every shard of `round`, shard `s` by `SOLVERS[s]` unless the
	/// scheduler offered it to another solver.
	fn prove_round(job: u64, round: u32) {
		for shard in 0..LAYOUT.shards {
			let index = LAYOUT.shard_index(round, shard);
			let solver = take(SOLVERS[shard as usize], job, index);
			assert_ok!(submit_proof(solver, job, index, proof(LOCAL_STEPS, 10 + shard as u8)));
		}
	}

	/// Claims round `round`'s aggregate as `solver` and commits `aggregate_root(round)`.
	fn aggregate(job: u64, round: u32, solver: u64) {
		let index = LAYOUT.aggregate_index(round);
		let solver = take(solver, job, index);
		assert_ok!(Tasks::submit_aggregate(RuntimeOrigin::signed(solver), job, index, aggregate_root(round), Some([9; 32].into())));
	}

	/// Runs out the challenge window and finalizes every unit of `round`, shards first.
	fn finalize_round(job: u64, round: u32) {
		run_to_block(System::block_number() + CHALLENGE_WINDOW);
		for index in LAYOUT.shard_index(round, 0)..=LAYOUT.aggregate_index(round) {
			assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(CHARLIE), job, index));
		}
	}

	#[test]
	fn a_job_is_cut_into_rounds_of_shards_and_an_aggregate() {
		builder().build_and_execute(|| {
			let job = submit(rounds_spec());
			assert_eq!(Jobs::<Test>::get(job).unwrap().units, 15);
			for round in 0..3 {
				for shard in 0..4 {
					let scope = Units::<Test>::get(job, LAYOUT.shard_index(round, shard)).unwrap().scope;
					assert_eq!(scope, UnitScope::RoundShard { round, first_sample: shard * 250, samples: 250 });
				}
				assert_eq!(Units::<Test>::get(job, LAYOUT.aggregate_index(round)).unwrap().scope, UnitScope::Aggregate { round });
			}
			// Only round 0's shards are ready, from the job's initial state.
			assert!((0..4).all(|index| state(job, index) == UnitState::Pending && start_of(job, index) == Some(INITIAL_STATE_ROOT.into())));
			assert!((4..15).all(|index| state(job, index) == UnitState::Waiting));
			let unit = Units::<Test>::get(job, LAYOUT.shard_index(1, 2)).unwrap();
			assert_eq!(Tasks::step_range(&Jobs::<Test>::get(job).unwrap(), &unit), (20, 40), "round 1 trains steps 20..40");
		});
	}

	#[test]
	fn bad_rounds_are_refused_with_their_reason() {
		builder().build_and_execute(|| {
			let refused = |change: &dyn Fn(&mut touchstone_primitives::JobSpec<u64>), error: Error<Test>| {
				let mut spec = rounds_spec();
				change(&mut spec);
				assert_noop!(Tasks::submit_job(RuntimeOrigin::signed(ALICE), spec), error);
			};
			let set = |spec: &mut touchstone_primitives::JobSpec<u64>, shards: u32, rounds: u32, local_steps: u32, outer: OuterOptimizer| {
				spec.decomposition =
					Decomposition::Rounds { shards, rounds, local_steps, aggregation: Aggregation::Uniform, outer };
			};
			refused(&|spec| set(spec, 4, 3, 21, OuterOptimizer::Average), Error::<Test>::RoundsDoNotCoverSteps);
			refused(&|spec| set(spec, 0, 3, 20, OuterOptimizer::Average), Error::<Test>::InvalidDecomposition);
			refused(&|spec| set(spec, 4, 0, 20, OuterOptimizer::Average), Error::<Test>::InvalidDecomposition);
			refused(&|spec| set(spec, 65, 1, 60, OuterOptimizer::Average), Error::<Test>::InvalidDecomposition);
			refused(&|spec| set(spec, 5, 3, 20, OuterOptimizer::Average), Error::<Test>::TooManyUnits);
			let no_momentum_bound = OuterOptimizer::Nesterov { learning_rate: FixedU64::from_rational(7, 10), momentum: FixedU64::from_u32(1) };
			refused(&|spec| set(spec, 4, 3, 20, no_momentum_bound), Error::<Test>::InvalidOuterOptimizer);
			let no_rate = OuterOptimizer::Nesterov { learning_rate: FixedU64::from_u32(0), momentum: FixedU64::from_rational(9, 10) };
			refused(&|spec| set(spec, 4, 3, 20, no_rate), Error::<Test>::InvalidOuterOptimizer);
		});
	}

	/// A 3-round, 4-shard job from submission to its result: each aggregate waits for
	/// its round, each round starts from the aggregate before it, each unit is paid only
	/// after what it started from, and the job's model is the last aggregate.
	#[test]
	fn three_rounds_of_four_shards_train_aggregate_and_complete() {
		builder().solver(CHARLIE_SOLVER, gpu_profile()).build_and_execute(|| {
			let job = submit(rounds_spec());
			for round in 0..3 {
				let global = if round == 0 { INITIAL_STATE_ROOT.into() } else { aggregate_root(round - 1) };
				for shard in 0..4 {
					assert_eq!(start_of(job, LAYOUT.shard_index(round, shard)), Some(global));
				}
				let aggregate_index = LAYOUT.aggregate_index(round);
				for shard in 0..4 {
					assert_eq!(state(job, aggregate_index), UnitState::Waiting, "the aggregate waits for every shard");
					let index = LAYOUT.shard_index(round, shard);
					let solver = take(SOLVERS[shard as usize], job, index);
					assert_ok!(submit_proof(solver, job, index, proof(LOCAL_STEPS, 10 + shard as u8)));
				}
				// Ready from the round's global state once the last shard is proven.
				assert_eq!(state(job, aggregate_index), UnitState::Pending);
				assert_eq!(start_of(job, aggregate_index), Some(global));
				assert!(tasks_events().contains(&Event::UnitReady { job, unit: aggregate_index }));
				aggregate(job, round, CHARLIE_SOLVER);
				assert_eq!(state(job, aggregate_index), UnitState::Proven);
				// Watchers find the aggregate open to challenge, flagged apart from the shards.
				let listed: Vec<_> = Tasks::proofs_since(0).into_iter().map(|open| (open.unit, open.aggregate)).collect();
				assert!(listed.contains(&(aggregate_index, Some(aggregate_root(round)))), "{listed:?}");
				assert!(listed.iter().all(|&(unit, aggregate)| aggregate.is_some() == (unit == aggregate_index)), "{listed:?}");
				if round < 2 {
					let next: Vec<_> = (0..4).map(|shard| LAYOUT.shard_index(round + 1, shard)).collect();
					assert!(next.iter().all(|index| state(job, *index) == UnitState::Pending));
					let events = tasks_events();
					assert!(next.iter().all(|index| events.contains(&Event::UnitReady { job, unit: *index })));
				}
				run_to_block(System::block_number() + CHALLENGE_WINDOW);
				// Paid only once its round's shards are.
				assert_noop!(
					Tasks::finalize_unit(RuntimeOrigin::signed(CHARLIE), job, aggregate_index),
					Error::<Test>::PredecessorNotFinal
				);
				finalize_round(job, round);
			}
			let stored = Jobs::<Test>::get(job).unwrap();
			assert_eq!(stored.status, JobStatus::Completed);
			let result = stored.result.unwrap();
			assert_eq!((result.state_root, result.units_finalized, result.units_failed), (aggregate_root(2), 15, 0));
			assert_eq!(result.metrics.accuracy, Perbill::from_percent(90), "the last round's shards' metrics");
			assert_eq!(escrowed(ALICE), 0);
		});
	}

	/// The solver of the aggregates: holds no shard.
	const CHARLIE_SOLVER: u64 = 7;

	/// A shard whose solver stops is reassigned from its last checkpoint; the round then
	/// aggregates as usual.
	#[test]
	fn a_straggler_is_reassigned_from_its_checkpoint() {
		builder().solver(CHARLIE_SOLVER, gpu_profile()).build_and_execute(|| {
			let job = submit(rounds_spec());
			let straggler = LAYOUT.shard_index(0, 3);
			for shard in 0..3 {
				let index = LAYOUT.shard_index(0, shard);
				assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(SOLVERS[shard as usize]), job, index));
				assert_ok!(submit_proof(SOLVERS[shard as usize], job, index, proof(LOCAL_STEPS, 10)));
			}
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(FERDIE), job, straggler));
			let checkpoint = Checkpoint { step: 10, hash: [3; 32].into() };
			assert_ok!(Tasks::commit_checkpoint(RuntimeOrigin::signed(FERDIE), job, straggler, checkpoint));
			let deadline = Units::<Test>::get(job, straggler).unwrap().deadline.unwrap();
			run_to_block(deadline + 3);
			assert!(tasks_events().contains(&Event::UnitTimedOut { job, unit: straggler, solver: FERDIE, resume_from: Some(checkpoint) }));
			// Back in the pool, where the scheduler offers it to another solver.
			let unit = Units::<Test>::get(job, straggler).unwrap();
			assert!(unit.state == UnitState::Reassigned || (unit.state == UnitState::Assigned && unit.solver != Some(FERDIE)));
			assert_eq!(state(job, LAYOUT.aggregate_index(0)), UnitState::Waiting);
			// Another solver takes it from the checkpoint, and the round completes.
			let solver = take(CHARLIE_SOLVER, job, straggler);
			assert_ne!(solver, FERDIE);
			assert_eq!(Units::<Test>::get(job, straggler).unwrap().last_checkpoint, Some(checkpoint));
			assert_ok!(submit_proof(solver, job, straggler, proof(LOCAL_STEPS, 13)));
			assert_eq!(state(job, LAYOUT.aggregate_index(0)), UnitState::Pending);
			aggregate(job, 0, EVE);
			assert!((0..4).all(|shard| state(job, LAYOUT.shard_index(1, shard)) == UnitState::Pending));
		});
	}

	/// A lie in round 1 overturned while round 2 trains: round 1's aggregate and every
	/// unit of round 2 wait again (their solvers released, their attempts given back);
	/// round 1's other shards and round 0 stand. Proven again, the round aggregates anew.
	#[test]
	fn a_lie_in_round_one_rolls_back_round_two() {
		builder().solver(CHARLIE_SOLVER, gpu_profile()).build_and_execute(|| {
			let job = submit(rounds_spec());
			prove_round(job, 0);
			aggregate(job, 0, CHARLIE_SOLVER);
			finalize_round(job, 0);
			prove_round(job, 1);
			aggregate(job, 1, CHARLIE_SOLVER);
			// Round 2: two shards proven, one held, one in the pool or offered.
			for shard in 0..2 {
				let index = LAYOUT.shard_index(2, shard);
				let solver = take(SOLVERS[shard as usize], job, index);
				assert_ok!(submit_proof(solver, job, index, proof(LOCAL_STEPS, 30)));
			}
			take(SOLVERS[2], job, LAYOUT.shard_index(2, 2));

			let liar = LAYOUT.shard_index(1, 1);
			let lying_solver = Units::<Test>::get(job, liar).unwrap().solver.unwrap();
			assert_ok!(Tasks::set_challenged(job, liar, true));
			let rolled_back = Tasks::overturn(job, liar).unwrap();
			let mut expected = vec![LAYOUT.aggregate_index(1)];
			expected.extend((0..3).map(|shard| LAYOUT.shard_index(2, shard)));
			expected.push(LAYOUT.shard_index(2, 3));
			expected.sort();
			assert_eq!(rolled_back, expected);
			assert!(tasks_events().contains(&Event::ProofRejected { job, unit: liar, solver: lying_solver, rolled_back: 5 }));
			for index in &expected {
				let unit = Units::<Test>::get(job, index).unwrap();
				assert_eq!((unit.state, unit.solver, unit.start_state_root, unit.proof), (UnitState::Waiting, None, None, None));
			}
			assert_eq!(state(job, liar), UnitState::Reassigned);
			assert!([0, 2, 3].iter().all(|shard| state(job, LAYOUT.shard_index(1, *shard)) == UnitState::Proven));
			assert!((0..5).all(|index| state(job, index) == UnitState::Finalized));
			// Proven again by another solver, the round aggregates again, from the same
			// global state, and round 2 follows.
			let solver = take(if lying_solver == BOB { DAVE } else { BOB }, job, liar);
			assert_ne!(solver, lying_solver);
			assert_ok!(submit_proof(solver, job, liar, proof(LOCAL_STEPS, 21)));
			assert_eq!(state(job, LAYOUT.aggregate_index(1)), UnitState::Pending);
			assert_eq!(start_of(job, LAYOUT.aggregate_index(1)), Some(aggregate_root(0)));
			aggregate(job, 1, CHARLIE_SOLVER);
			assert!((0..4).all(|shard| state(job, LAYOUT.shard_index(2, shard)) == UnitState::Pending));
		});
	}

	/// A shard that fails for good fails its round's aggregate and every later round:
	/// nothing can start from a round that cannot be averaged.
	#[test]
	fn a_failed_shard_fails_the_rounds_after_it() {
		builder().build_and_execute(|| {
			let job = submit(rounds_spec());
			let shard = LAYOUT.shard_index(0, 0);
			// Nobody takes it within the pool timeout.
			run_to_block(System::block_number() + u64::from(POOL_TIMEOUT) + 2);
			assert_eq!(state(job, shard), UnitState::Failed);
			assert!((4..15).all(|index| state(job, index) == UnitState::Failed));
		});
	}

	/// A shard out of attempts fails its round's shards nobody has started (taken out of
	/// the pool, refunded) with the rounds after it; a shard already training stands.
	#[test]
	fn a_failed_shard_gives_up_its_rounds_unstarted_shards() {
		builder().build_and_execute(|| {
			let job = submit(rounds_spec());
			let (failing, training) = (LAYOUT.shard_index(0, 0), LAYOUT.shard_index(0, 1));
			let trainer = take(DAVE, job, training);
			// Proven and overturned as often as a unit may be tried: it fails for good.
			for liar in [EVE, FERDIE] {
				let liar = take(liar, job, failing);
				assert_ok!(submit_proof(liar, job, failing, proof(LOCAL_STEPS, 10)));
				assert_ok!(Tasks::set_challenged(job, failing, true));
				Tasks::overturn(job, failing).unwrap();
			}
			assert_eq!(state(job, failing), UnitState::Failed);
			let unit = Units::<Test>::get(job, training).unwrap();
			assert_eq!((unit.state, unit.accepted, unit.solver), (UnitState::Assigned, true, Some(trainer)));
			let given_up = [LAYOUT.shard_index(0, 2), LAYOUT.shard_index(0, 3)];
			for index in given_up {
				let unit = Units::<Test>::get(job, index).unwrap();
				assert_eq!((unit.state, unit.solver, unit.deadline), (UnitState::Failed, None, None));
			}
			assert!(Pool::<Test>::get().iter().all(|(pooled, _)| *pooled != job), "nothing of the job is left to take");
			assert!((LAYOUT.aggregate_index(0)..15).all(|index| state(job, index) == UnitState::Failed));
			let failed: Vec<u32> = tasks_events()
				.into_iter()
				.filter_map(|event| match event {
					Event::UnitFailed { job: failed_job, unit, .. } if failed_job == job => Some(unit),
					_ => None,
				})
				.collect();
			assert_eq!(failed.len(), 14, "every unit but the one training: {failed:?}");
			assert!(given_up.iter().all(|index| failed.contains(index)));
		});
	}

	/// The aggregate and the training units each take only their own submission; an
	/// aggregate carries a momentum root exactly when the outer step is Nesterov's.
	#[test]
	fn aggregates_and_proofs_are_not_interchangeable() {
		builder().solver(CHARLIE_SOLVER, gpu_profile()).build_and_execute(|| {
			let job = submit(rounds_spec());
			let shard = LAYOUT.shard_index(0, 0);
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(BOB), job, shard));
			assert_noop!(
				Tasks::submit_aggregate(RuntimeOrigin::signed(BOB), job, shard, aggregate_root(0), Some([9; 32].into())),
				Error::<Test>::NotAnAggregate
			);
			assert_ok!(submit_proof(BOB, job, shard, proof(LOCAL_STEPS, 10)));
			for shard in 1..4 {
				let index = LAYOUT.shard_index(0, shard);
				assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(SOLVERS[shard as usize]), job, index));
				assert_ok!(submit_proof(SOLVERS[shard as usize], job, index, proof(LOCAL_STEPS, 10)));
			}
			let index = LAYOUT.aggregate_index(0);
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(CHARLIE_SOLVER), job, index));
			let (mut wrong, opening) = anchored(job, shard, proof(LOCAL_STEPS, 1));
			wrong.steps = 0;
			assert_noop!(
				Tasks::submit_proof(RuntimeOrigin::signed(CHARLIE_SOLVER), job, index, wrong, opening, None).map_err(|e| e.error),
				Error::<Test>::NotATrainingUnit
			);
			assert_noop!(
				Tasks::submit_aggregate(RuntimeOrigin::signed(CHARLIE_SOLVER), job, index, aggregate_root(0), None),
				Error::<Test>::MomentumMismatch
			);
			assert_noop!(
				Tasks::submit_aggregate(RuntimeOrigin::signed(BOB), job, index, aggregate_root(0), Some([9; 32].into())),
				Error::<Test>::NotAssignedSolver
			);
			assert_ok!(Tasks::submit_aggregate(RuntimeOrigin::signed(CHARLIE_SOLVER), job, index, aggregate_root(0), Some([9; 32].into())));
			let stored = Units::<Test>::get(job, index).unwrap().proof.unwrap();
			assert_eq!((stored.steps, stored.trace_root, stored.final_state_root), (0, [9; 32].into(), aggregate_root(0)));
			// Listed open to challenge as an aggregate, which is not re-executed.
			let listed = Tasks::proofs_since(0).into_iter().find(|open| open.unit == index).expect("the aggregate is open to challenge");
			assert_eq!((listed.aggregate, listed.trace_root), (Some(aggregate_root(0)), [9; 32].into()));
		});
	}
}
