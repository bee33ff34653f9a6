//! The tasks pallet's logic: validation, decomposition, the solver path, scheduling,
//! deadlines, payment, aggregation and removal.

use crate::{pallet::*, BalanceOf, Due, JobOf, ProvenAggregateOf, ProvenUnitOf, UnitKey, WeightInfo, WorkUnitOf};
use alloc::vec::Vec;
use polkadot_sdk::{
	frame_support::{
		defensive, ensure,
		pallet_prelude::*,
		storage::with_storage_layer,
		traits::{
			fungible::{Inspect, Mutate, MutateHold},
			tokens::{DepositConsequence, Fortitude, Precision, Preservation, Provenance, Restriction},
		},
	},
	frame_system::{self, pallet_prelude::BlockNumberFor},
	sp_io::hashing::blake2_256,
	sp_runtime::{
		traits::{CheckedDiv, One, Saturating, Zero},
		DispatchError, DispatchResult, FixedU64, Perbill,
	},
};
use touchstone_primitives::{
	referee::{
		check_judgeable, kernel_train, outer_is_valid, step_operator_bound, transformer_within_bounds, unit_final_state_root, BoundaryOpening, DataCommitment, ShapeError,
		UnitCommitment,
	},
	traits::{ComputeNodes, ProofLifecycle, ProvenAggregate, ProvenUnit},
	Aggregation, Checkpoint, ContentHash, Decomposition, Job, JobId, MAX_DATASET_SAMPLES, MAX_ROUND_SHARDS, JobResult, JobSpec,
	JobStatus, LearningProof, ModelArch, OpenProof, Optimizer, OuterOptimizer, Role, Segments, TrainingMetrics, UnitIndex, UnitScope,
	UnitState, WorkUnit,
	reexecution_blocks, step_multiply_adds,
};

/// What validating one operator of a transformer's step costs at submission: 5 µs. The
/// runtime's wasm builds a step graph at about 0.8 µs an operator (`scripts/bench-referee.sh
/// graph`, the figure `GRAPH_PICOSECONDS_PER_OPERATOR` charges at 2 µs); bounding its
/// pieces takes a third of the build natively (26 µs against 80 µs for twelve blocks,
/// `docs/performance.md`), and is not measured in wasm, hence the margin.
pub const VALIDATION_PICOSECONDS_PER_OPERATOR: u64 = 5_000_000;

impl<T: Config> Pallet<T> {
	// ---------------------------------------------------------------------------------
	// Submission
	// ---------------------------------------------------------------------------------

	/// Validates `spec`, escrows its budget and creates its units. Returns the unit count.
	pub(crate) fn do_submit_job(
		owner: T::AccountId,
		spec: JobSpec<BalanceOf<T>>,
	) -> Result<u32, DispatchError> {
		let scopes = Self::validate_spec(&spec)?;
		let unit_count = scopes.len() as u32;
		let open = OpenUnits::<T>::get();
		ensure!(
			open.saturating_add(unit_count) <= T::MaxOpenUnits::get(),
			Error::<T>::TooManyOpenUnits
		);
		let deposit = Self::job_deposit(unit_count);
		let congestion_fee = Self::congestion_fee(open, unit_count);
		if !congestion_fee.is_zero() {
			T::Currency::transfer(&owner, &T::Jackpot::get(), congestion_fee, Preservation::Preserve)
				.map_err(|_| Error::<T>::InsufficientBalance)?;
		}
		// The holds succeed or the call fails as a whole (extrinsics are transactional).
		T::Currency::hold(&HoldReason::JobEscrow.into(), &owner, spec.budget)
			.map_err(|_| Error::<T>::InsufficientBalance)?;
		T::Currency::hold(&HoldReason::JobDeposit.into(), &owner, deposit)
			.map_err(|_| Error::<T>::InsufficientBalance)?;

		let job_id = NextJobId::<T>::get();
		NextJobId::<T>::put(job_id.saturating_add(1));
		let now = frame_system::Pallet::<T>::block_number();
		let pool_deadline = now.saturating_add(spec.pool_timeout.into());
		let mut pool = Pool::<T>::get();
		for (index, scope) in scopes.into_iter().enumerate() {
			let index = index as UnitIndex;
			// A step range can only start from the model of the range before it; a round's
			// shards from the aggregate of the round before, and an aggregate from its
			// round's proven shards.
			let ready = match scope {
				UnitScope::Steps { .. } => index == 0,
				UnitScope::Shard { .. } => true,
				UnitScope::RoundShard { round, .. } => round == 0,
				UnitScope::Aggregate { .. } => false,
			};
			let mut unit = WorkUnit {
				scope,
				state: UnitState::Waiting,
				solver: None,
				accepted: false,
				deadline: None,
				pool_deadline: None,
				passed_by: None,
				start_state_root: None,
				last_checkpoint: None,
				proof: None,
				proven_at: None,
				attempts: 0,
			};
			if ready {
				unit.start_state_root = Some(spec.initial_state_root);
				Self::enter_pool(&mut unit, (job_id, index), UnitState::Pending, pool_deadline);
				// Cannot fail: `OpenUnits` was checked against the pool's bound above.
				pool.try_push((job_id, index)).map_err(|_| Error::<T>::TooManyOpenUnits)?;
			}
			Units::<T>::insert(job_id, index, unit);
		}
		Pool::<T>::put(pool);
		OpenUnits::<T>::put(open.saturating_add(unit_count));
		let escrow = spec.budget;
		Jobs::<T>::insert(
			job_id,
			Job {
				owner: owner.clone(),
				spec,
				status: JobStatus::Active,
				units: unit_count,
				units_final: 0,
				escrow,
				deposit,
				submitted_at: now,
				result: None,
				removable_at: None,
				tolerance: Default::default(),
			},
		);
		Self::deposit_event(Event::JobSubmitted { job: job_id, owner, units: unit_count, escrow, congestion_fee });
		Ok(unit_count)
	}

	/// The congestion fee of `units` units entering a pool with `open` units open: each
	/// pays `CongestionFee × o / (MaxOpenUnits − o)` for the `o` open before it. The caller
	/// has checked that they fit.
	pub(crate) fn congestion_fee(open: u32, units: u32) -> BalanceOf<T> {
		let max = T::MaxOpenUnits::get();
		(open..open.saturating_add(units)).fold(Zero::zero(), |fee: BalanceOf<T>, occupied| {
			let free = max.saturating_sub(occupied).max(1);
			let this = T::CongestionFee::get().saturating_mul(occupied.into()) / BalanceOf::<T>::from(free);
			fee.saturating_add(this)
		})
	}

	/// The storage deposit of a job of `units` units.
	pub(crate) fn job_deposit(units: u32) -> BalanceOf<T> {
		T::JobDepositBase::get().saturating_add(T::JobDepositPerUnit::get().saturating_mul(units.into()))
	}

	/// `submit_job`'s weight: the call for `units` units, and the registry scan of
	/// `nodes` nodes that checks some solver can take the job.
	pub fn submit_job_weight(units: u32, nodes: u32) -> Weight {
		// The congestion fee's transfer to the jackpot is outside the benchmark: the
		// jackpot's account, read and written.
		T::WeightInfo::submit_job(units)
			.saturating_add(T::WeightInfo::scan_registry(nodes))
			.saturating_add(T::DbWeight::get().reads_writes(1, 1))
	}

	/// `submit_proof`'s weight: with the next range taken and its secret committed when
	/// `takes_next`, and `round_shards` shards of a round read to see whether the round's
	/// aggregate is ready (with its readying).
	pub fn submit_proof_weight(takes_next: bool, round_shards: u32) -> Weight {
		let taking = match takes_next {
			true => T::WeightInfo::accept_unit().saturating_add(T::ProofLifecycle::commit_secret_weight()),
			false => Weight::zero(),
		};
		let round = match round_shards {
			0 => Weight::zero(),
			shards => Self::ready_weight(1).saturating_add(T::DbWeight::get().reads(shards.into())),
		};
		T::WeightInfo::submit_proof().saturating_add(taking).saturating_add(round)
	}

	/// The kernels' validation of a transformer job at submission, beyond the benchmarked
	/// weight (whose job is a small MLP): building its step graph and bounding its pieces,
	/// charged at [`VALIDATION_PICOSECONDS_PER_OPERATOR`] for each operator its shape
	/// allows. Zero for an MLP or a CNN.
	pub fn model_validation_weight(model: &ModelArch) -> Weight {
		Weight::from_parts(step_operator_bound(model).saturating_mul(VALIDATION_PICOSECONDS_PER_OPERATOR), 0)
	}

	/// Readying `units` waiting units: each read and written, its deadline indexed, and
	/// the pool read and written.
	fn ready_weight(units: u32) -> Weight {
		T::DbWeight::get().reads_writes(u64::from(units).saturating_mul(2), u64::from(units).saturating_mul(3))
	}

	/// Checks every rule a spec must satisfy and returns the scopes of its units.
	pub(crate) fn validate_spec(spec: &JobSpec<BalanceOf<T>>) -> Result<Vec<UnitScope>, DispatchError> {
		let hyper = &spec.hyper;
		ensure!(hyper.steps > 0, Error::<T>::ZeroSteps);
		ensure!(hyper.batch_size > 0, Error::<T>::ZeroBatchSize);
		ensure!(hyper.checkpoint_interval > 0, Error::<T>::ZeroCheckpointInterval);
		Self::validate_model(&spec.model)?;
		ensure!(
			!matches!(spec.model, ModelArch::Transformer { .. }) || matches!(hyper.optimizer, Optimizer::AdamW { .. }),
			Error::<T>::TransformerNeedsAdamW
		);
		ensure!(spec.dataset.samples > 0, Error::<T>::EmptyDataset);
		ensure!(spec.dataset.samples <= MAX_DATASET_SAMPLES, Error::<T>::DatasetTooLarge);
		ensure!(spec.unit_timeout >= T::MinUnitTimeout::get(), Error::<T>::UnitTimeoutTooShort);
		ensure!(
			spec.pool_timeout >= T::MinUnitTimeout::get() && spec.pool_timeout <= T::MaxPoolWait::get(),
			Error::<T>::PoolTimeoutOutOfRange
		);
		ensure!(spec.price_per_unit >= T::MinPricePerUnit::get(), Error::<T>::PriceBelowMinimum);

		let scopes = Self::decompose(spec)?;
		let smallest_data = scopes
			.iter()
			.filter_map(|scope| scope.data(spec.dataset.samples))
			.map(|(_, samples)| samples)
			.min()
			.unwrap_or_default();
		ensure!(hyper.batch_size <= smallest_data, Error::<T>::BatchLargerThanData);
		let most_segments = scopes
			.iter()
			.map(|scope| {
				let (first, end) = Self::scope_steps(spec, scope);
				Segments::new(first, end.saturating_sub(first), hyper.checkpoint_interval).count()
			})
			.max()
			.unwrap_or_default();
		ensure!(most_segments <= T::MaxSegmentsPerUnit::get(), Error::<T>::TooManySegments);
		// The kernels' own validation, as the trainer and the referee run it: every
		// accepted job is one whose disputes the referee can judge, at a bounded cost.
		check_judgeable(&spec.model, hyper, &spec.dataset, &scopes).map_err(|error| match error {
			ShapeError::InvalidShape => Error::<T>::InvalidModel,
			ShapeError::TooManyClasses => Error::<T>::TooManyClasses,
			ShapeError::InvalidData => Error::<T>::DatasetTooLarge,
			ShapeError::DisputeTooCostly => Error::<T>::DisputeTooCostly,
		})?;
		// Verification rounds and dispute phases give a segment's re-execution its time, so
		// the time must be bounded for them to end while the parties' bonds are in reach.
		let segment_blocks = Self::segment_blocks(spec);
		ensure!(segment_blocks <= T::MaxSegmentBlocks::get(), Error::<T>::SegmentTooLong);
		// A solver's deadline moves on with each checkpoint it commits, so the timeout must
		// hold one segment's training at the rate the chain assumes for re-execution, beyond
		// the minimum the chain's own steps take: a shorter one times out honest solvers.
		ensure!(
			spec.unit_timeout >= T::MinUnitTimeout::get().saturating_add(segment_blocks),
			Error::<T>::UnitTimeoutTooShort
		);

		let cost = spec
			.price_per_unit
			.checked_mul(&BalanceOf::<T>::from(scopes.len() as u32))
			.ok_or(Error::<T>::CostOverflow)?;
		ensure!(spec.budget >= cost, Error::<T>::BudgetBelowCost);
		ensure!(
			T::Nodes::any_solver_meets(&spec.requirements, spec.price_per_unit),
			Error::<T>::UnsatisfiableRequirements
		);
		Ok(scopes)
	}

	/// The model's own rules, with names for the usual mistakes; the kernels' validation
	/// in [`check_judgeable`] then covers every shape rule.
	fn validate_model(model: &ModelArch) -> DispatchResult {
		match model {
			ModelArch::Mlp { inputs, hidden, classes, .. } => {
				ensure!(
					*inputs > 0 && *classes > 1 && hidden.iter().all(|width| *width > 0),
					Error::<T>::InvalidModel
				);
			},
			ModelArch::Cnn {
				channels, height, width, conv_channels, kernel_size, hidden, classes, ..
			} => {
				// Valid convolutions with stride 1 shrink each side by `kernel_size - 1`.
				let shrink = kernel_size
					.saturating_sub(1)
					.saturating_mul(conv_channels.len() as u32);
				ensure!(
					*channels > 0 &&
						*kernel_size > 0 && !conv_channels.is_empty() &&
						conv_channels.iter().all(|c| *c > 0) &&
						hidden.iter().all(|w| *w > 0) &&
						*classes > 1 && *height > shrink &&
						*width > shrink,
					Error::<T>::InvalidModel
				);
			},
			// The kernels' bounds on every dimension, the same ones the trainer checks.
			ModelArch::Transformer { .. } => {
				ensure!(transformer_within_bounds(model), Error::<T>::InvalidModel);
			},
		}
		Ok(())
	}

	/// Cuts a job into unit scopes as its decomposition says.
	fn decompose(spec: &JobSpec<BalanceOf<T>>) -> Result<Vec<UnitScope>, DispatchError> {
		let steps = spec.hyper.steps;
		let max_units = T::MaxUnitsPerJob::get();
		match spec.decomposition {
			Decomposition::StepRanges { steps_per_unit } => {
				ensure!(steps_per_unit > 0, Error::<T>::InvalidDecomposition);
				let units = steps.div_ceil(steps_per_unit);
				ensure!(units <= max_units, Error::<T>::TooManyUnits);
				Ok((0..units)
					.map(|index| {
						let first_step = index.saturating_mul(steps_per_unit);
						UnitScope::Steps {
							first_step,
							steps: steps_per_unit.min(steps.saturating_sub(first_step)),
						}
					})
					.collect())
			},
			Decomposition::DataShards { shards, .. } => {
				ensure!(shards > 0 && shards <= spec.dataset.samples, Error::<T>::InvalidDecomposition);
				ensure!(shards <= max_units, Error::<T>::TooManyUnits);
				Ok((0..shards)
					.map(|shard| {
						let (first_sample, samples) = Self::shard_samples(spec, shards, shard);
						UnitScope::Shard { first_sample, samples }
					})
					.collect())
			},
			Decomposition::Rounds { shards, rounds, local_steps, outer, .. } => {
				ensure!(
					shards > 0 && shards <= spec.dataset.samples && shards <= MAX_ROUND_SHARDS && rounds > 0 && local_steps > 0,
					Error::<T>::InvalidDecomposition
				);
				ensure!(rounds.checked_mul(local_steps) == Some(steps), Error::<T>::RoundsDoNotCoverSteps);
				ensure!(outer_is_valid(&outer), Error::<T>::InvalidOuterOptimizer);
				let units = u64::from(rounds).saturating_mul(u64::from(shards).saturating_add(1));
				ensure!(units <= u64::from(max_units), Error::<T>::TooManyUnits);
				let mut scopes = Vec::with_capacity(units as usize);
				for round in 0..rounds {
					for shard in 0..shards {
						let (first_sample, samples) = Self::shard_samples(spec, shards, shard);
						scopes.push(UnitScope::RoundShard { round, first_sample, samples });
					}
					scopes.push(UnitScope::Aggregate { round });
				}
				Ok(scopes)
			},
		}
	}

	/// Shard `shard` of `shards` of the job's training set, `(first_sample, samples)`: it
	/// covers samples `⌊i·n/s⌋ .. ⌊(i+1)·n/s⌋`, so sizes differ by at most one.
	fn shard_samples(spec: &JobSpec<BalanceOf<T>>, shards: u32, shard: u32) -> (u32, u32) {
		let samples = spec.dataset.samples;
		let boundary = |i: u32| -> u32 {
			(u64::from(i).saturating_mul(u64::from(samples)) / u64::from(shards.max(1))) as u32
		};
		let first_sample = boundary(shard);
		(first_sample, boundary(shard.saturating_add(1)).saturating_sub(first_sample))
	}

	// ---------------------------------------------------------------------------------
	// Cancellation
	// ---------------------------------------------------------------------------------

	/// Cancels the unstarted units of `job`. Returns the job's unit count, for weight.
	pub(crate) fn do_cancel_job(who: T::AccountId, job_id: JobId) -> Result<u32, DispatchError> {
		let mut job = Jobs::<T>::get(job_id).ok_or(Error::<T>::JobNotFound)?;
		ensure!(job.owner == who, Error::<T>::NotJobOwner);
		ensure!(job.status == JobStatus::Active, Error::<T>::JobNotActive);
		let price = job.spec.price_per_unit;
		let unit_count = job.units;
		let mut cancelled = 0u32;
		let mut refunded = BalanceOf::<T>::zero();
		let mut pool = Pool::<T>::get();
		for index in 0..job.units {
			let Some(mut unit) = Units::<T>::get(job_id, index) else { continue };
			if !Self::is_unstarted(&unit) {
				continue;
			}
			Self::give_up(&mut pool, (job_id, index), &mut unit, price, UnitState::Cancelled);
			refunded = refunded.saturating_add(Self::refund(&mut job, price)?);
			cancelled = cancelled.saturating_add(1);
		}
		Pool::<T>::put(pool);
		job.status = JobStatus::Cancelled;
		Self::note_units_final(&mut job, cancelled);
		Self::deposit_event(Event::JobCancelled { job: job_id, units_cancelled: cancelled, refunded });
		Self::complete_if_done(job_id, job)?;
		Ok(unit_count)
	}

	// ---------------------------------------------------------------------------------
	// The solver path
	// ---------------------------------------------------------------------------------

	pub(crate) fn do_claim_unit(solver: T::AccountId, job_id: JobId, index: UnitIndex) -> DispatchResult {
		let job = Jobs::<T>::get(job_id).ok_or(Error::<T>::JobNotFound)?;
		ensure!(job.status == JobStatus::Active, Error::<T>::JobNotActive);
		let mut unit = Units::<T>::get(job_id, index).ok_or(Error::<T>::UnitNotFound)?;
		ensure!(unit.state.is_claimable(), Error::<T>::UnitNotClaimable);
		ensure!(Self::is_eligible(&solver, &job), Error::<T>::NotEligible);
		let price = job.spec.price_per_unit;
		ensure!(
			Self::covers_collateral(T::Nodes::bond(&solver, Role::Solver), SolverExposure::<T>::get(&solver), price),
			Error::<T>::InsufficientCollateral
		);
		let now = frame_system::Pallet::<T>::block_number();
		let deadline = now.saturating_add(job.spec.unit_timeout.into());
		Self::assign(&mut unit, (job_id, index), &solver, deadline, price)?;
		Self::take(&mut unit);
		Pool::<T>::mutate(|pool| pool.retain(|key| *key != (job_id, index)));
		Units::<T>::insert(job_id, index, unit);
		Self::deposit_event(Event::UnitClaimed { job: job_id, unit: index, solver, deadline });
		Ok(())
	}

	pub(crate) fn do_accept_unit(solver: T::AccountId, job_id: JobId, index: UnitIndex) -> DispatchResult {
		let (job, mut unit) = Self::solver_unit(&solver, job_id, index)?;
		ensure!(!unit.accepted, Error::<T>::AlreadyAccepted);
		Self::take(&mut unit);
		let deadline = Self::extend_deadline(&mut unit, (job_id, index), job.spec.unit_timeout);
		Units::<T>::insert(job_id, index, unit);
		Self::deposit_event(Event::UnitAccepted { job: job_id, unit: index, solver, deadline });
		Ok(())
	}

	pub(crate) fn do_decline_unit(solver: T::AccountId, job_id: JobId, index: UnitIndex) -> DispatchResult {
		let (job, mut unit) = Self::solver_unit(&solver, job_id, index)?;
		ensure!(!unit.accepted, Error::<T>::AlreadyAccepted);
		Self::return_offer((job_id, index), &job, &mut unit)?;
		Units::<T>::insert(job_id, index, unit);
		Self::deposit_event(Event::UnitDeclined { job: job_id, unit: index, solver });
		Ok(())
	}

	pub(crate) fn do_commit_checkpoint(
		solver: T::AccountId,
		job_id: JobId,
		index: UnitIndex,
		checkpoint: Checkpoint,
	) -> DispatchResult {
		let (job, mut unit) = Self::solver_unit(&solver, job_id, index)?;
		ensure!(unit.accepted, Error::<T>::NotAccepted);
		let (first, end) = Self::step_range(&job, &unit);
		ensure!(checkpoint.step > first && checkpoint.step <= end, Error::<T>::CheckpointOutOfRange);
		if let Some(last) = unit.last_checkpoint {
			ensure!(checkpoint.step > last.step, Error::<T>::CheckpointNotAdvancing);
		}
		// The kernels' rule, so the chain accepts exactly the checkpoints a solver writes.
		ensure!(
			kernel_train(&job.spec.hyper).is_checkpoint_step(checkpoint.step, end),
			Error::<T>::CheckpointMisaligned
		);
		unit.last_checkpoint = Some(checkpoint);
		Self::extend_deadline(&mut unit, (job_id, index), job.spec.unit_timeout);
		Units::<T>::insert(job_id, index, unit);
		Self::deposit_event(Event::CheckpointCommitted { job: job_id, unit: index, checkpoint });
		Ok(())
	}

	/// Stands the solver's proof of its unit and readies the next step range, or a
	/// round's aggregate once all its shards are proven. Returns whether `next_secret`
	/// took the next range (its weight is refunded where it did not), and how many of a
	/// round's shards were read.
	pub(crate) fn do_submit_proof(
		solver: T::AccountId,
		job_id: JobId,
		index: UnitIndex,
		proof: LearningProof,
		final_state: BoundaryOpening,
		next_secret: Option<[u8; 32]>,
	) -> Result<(bool, u32), DispatchError> {
		let (job, mut unit) = Self::solver_unit(&solver, job_id, index)?;
		ensure!(unit.accepted, Error::<T>::NotAccepted);
		ensure!(!matches!(unit.scope, UnitScope::Aggregate { .. }), Error::<T>::NotATrainingUnit);
		let next = index.saturating_add(1);
		// Only a step range has a successor that starts from its final model.
		let successor = Units::<T>::get(job_id, next)
			.filter(|successor| successor.state == UnitState::Waiting && matches!(successor.scope, UnitScope::Steps { .. }));
		ensure!(next_secret.is_none() || successor.is_some(), Error::<T>::NoNextRange);
		let (first, end) = Self::step_range(&job, &unit);
		ensure!(proof.steps == end.saturating_sub(first), Error::<T>::StepCountMismatch);
		// The anchor is the chain's, never the solver's: a dispute over the unit's first
		// step is judged against it.
		ensure!(unit.start_state_root == Some(proof.start_state_root), Error::<T>::WrongStartState);
		Self::check_final_state(&job.spec, first, &proof, &final_state)?;
		T::ProofLifecycle::on_proof_submitted(job_id, index, &solver, &proof)?;

		let now = frame_system::Pallet::<T>::block_number();
		Self::clear_deadline(&mut unit, (job_id, index));
		let scope = unit.scope;
		Self::stand_proof(job_id, index, unit, solver.clone(), proof);
		if let UnitScope::RoundShard { round, .. } = scope {
			let read = Self::ready_aggregate_if_complete(job_id, &job, round, proof.start_state_root)?;
			return Ok((false, read));
		}

		// The next step range starts from this unit's final model.
		let Some(mut successor) = successor else { return Ok((false, 0)) };
		successor.start_state_root = Some(proof.final_state_root);
		let pool_deadline = now.saturating_add(job.spec.pool_timeout.into());
		Self::enter_pool(&mut successor, (job_id, next), UnitState::Pending, pool_deadline);
		Self::deposit_event(Event::UnitReady { job: job_id, unit: next });
		// Offered at once to the solver that proved this range, if it may take it: it
		// holds the range's end state and may already be training on from it. Else,
		// or if it declines, the scheduler offers it like any pool unit.
		if !Self::offer_to(&mut successor, (job_id, next), &job, &solver) {
			Self::enqueue((job_id, next))?;
			Units::<T>::insert(job_id, next, successor);
			return Ok((false, 0));
		}
		let Some(hash) = next_secret else {
			Units::<T>::insert(job_id, next, successor);
			return Ok((false, 0));
		};
		// Trained already: taken now, and its secret committed, which needs the unit stored
		// as taken.
		Self::take(&mut successor);
		let deadline = Self::extend_deadline(&mut successor, (job_id, next), job.spec.unit_timeout);
		Units::<T>::insert(job_id, next, successor);
		Self::deposit_event(Event::UnitAccepted { job: job_id, unit: next, solver: solver.clone(), deadline });
		T::ProofLifecycle::commit_secret(job_id, next, &solver, hash)?;
		Ok((true, 0))
	}

	/// Offers a pool-ready `unit` of `job` to `solver` if the scheduler could (bonded,
	/// online, meets the job's price and requirements, room and collateral for it), with
	/// the scheduler's acceptance deadline. Returns whether it did; the caller stores the
	/// unit either way.
	fn offer_to(unit: &mut WorkUnitOf<T>, key: UnitKey, job: &JobOf<T>, solver: &T::AccountId) -> bool {
		let price = job.spec.price_per_unit;
		let may_take = Self::is_eligible(solver, job) &&
			Self::covers_collateral(T::Nodes::bond(solver, Role::Solver), SolverExposure::<T>::get(solver), price);
		if !may_take {
			return false;
		}
		let deadline = frame_system::Pallet::<T>::block_number().saturating_add(T::AcceptanceTimeout::get());
		// At capacity, `assign` changes nothing and the unit goes to the pool.
		if Self::assign(unit, key, solver, deadline, price).is_err() {
			return false;
		}
		Self::deposit_event(Event::UnitAssigned { job: key.0, unit: key.1, solver: solver.clone(), deadline });
		true
	}

	/// Once every shard of `round` stands proven, readies the round's aggregate, which
	/// starts from the round's global state `start_state_root` (the shards' shared start).
	/// Returns the shards read.
	fn ready_aggregate_if_complete(
		job_id: JobId,
		job: &JobOf<T>,
		round: u32,
		start_state_root: ContentHash,
	) -> Result<u32, DispatchError> {
		let Some(layout) = job.spec.decomposition.round_layout() else { return Ok(0) };
		let mut read = 0u32;
		let proven = (0..layout.shards).all(|shard| {
			read = read.saturating_add(1);
			Units::<T>::get(job_id, layout.shard_index(round, shard)).is_some_and(|unit| Self::stands_proven(unit.state))
		});
		if proven {
			Self::ready_waiting(job_id, job, layout.aggregate_index(round), start_state_root)?;
		}
		Ok(read)
	}

	/// Whether a unit in `state` has a proof on record that stands: proven, under
	/// verification or dispute, or final.
	fn stands_proven(state: UnitState) -> bool {
		matches!(state, UnitState::Proven | UnitState::Verifying | UnitState::Challenged | UnitState::Finalized)
	}

	/// Moves a `Waiting` unit to the pool, to start from `start_state_root`. Nothing for a
	/// unit that does not wait (it is ready already, or final).
	fn ready_waiting(job_id: JobId, job: &JobOf<T>, index: UnitIndex, start_state_root: ContentHash) -> DispatchResult {
		let Some(mut unit) = Units::<T>::get(job_id, index).filter(|unit| unit.state == UnitState::Waiting) else {
			return Ok(());
		};
		let now = frame_system::Pallet::<T>::block_number();
		unit.start_state_root = Some(start_state_root);
		Self::enter_pool(&mut unit, (job_id, index), UnitState::Pending, now.saturating_add(job.spec.pool_timeout.into()));
		Units::<T>::insert(job_id, index, unit);
		Self::enqueue((job_id, index))?;
		Self::deposit_event(Event::UnitReady { job: job_id, unit: index });
		Ok(())
	}

	/// Stands the solver's aggregate of a round of a rounds job: `state_root` is the next
	/// global state, `momentum_root` the next outer momentum (Nesterov only). The next
	/// round's shards become ready to start from it. Returns the shards readied.
	pub(crate) fn do_submit_aggregate(
		solver: T::AccountId,
		job_id: JobId,
		index: UnitIndex,
		state_root: ContentHash,
		momentum_root: Option<ContentHash>,
	) -> Result<u32, DispatchError> {
		let (job, mut unit) = Self::solver_unit(&solver, job_id, index)?;
		ensure!(unit.accepted, Error::<T>::NotAccepted);
		let (UnitScope::Aggregate { round }, Decomposition::Rounds { outer, .. }) = (unit.scope, job.spec.decomposition) else {
			return Err(Error::<T>::NotAnAggregate.into());
		};
		let nesterov = matches!(outer, OuterOptimizer::Nesterov { .. });
		ensure!(momentum_root.is_some() == nesterov, Error::<T>::MomentumMismatch);
		let start_state_root = unit.start_state_root.ok_or(Error::<T>::WrongStartState)?;
		let proof = LearningProof {
			trace_root: momentum_root.unwrap_or_default(),
			steps: 0,
			start_state_root,
			final_state_root: state_root,
			metrics: TrainingMetrics::default(),
		};
		Self::clear_deadline(&mut unit, (job_id, index));
		Self::stand_proof(job_id, index, unit, solver, proof);
		let Some(layout) = job.spec.decomposition.round_layout() else { return Ok(0) };
		let next = round.saturating_add(1);
		if next >= layout.rounds {
			return Ok(0);
		}
		for shard in 0..layout.shards {
			Self::ready_waiting(job_id, &job, layout.shard_index(next, shard), state_root)?;
		}
		Ok(layout.shards)
	}

	/// Checks that `final_state` opens the proof's final state root at its last boundary:
	/// the next step range starts from that state, and the final model is named by it.
	fn check_final_state(
		spec: &JobSpec<BalanceOf<T>>,
		first_step: u32,
		proof: &LearningProof,
		final_state: &BoundaryOpening,
	) -> DispatchResult {
		let unit = Self::unit_commitment(spec, first_step, proof);
		ensure!(
			unit_final_state_root(&unit, final_state).ok() == Some(proof.final_state_root.0),
			Error::<T>::InvalidFinalState
		);
		Ok(())
	}

	/// Makes `proof` the unit's standing proof, proven now, so its challenge window opens
	/// in full, and says so.
	fn stand_proof(job_id: JobId, index: UnitIndex, mut unit: WorkUnitOf<T>, solver: T::AccountId, proof: LearningProof) {
		let now = frame_system::Pallet::<T>::block_number();
		unit.state = UnitState::Proven;
		unit.proof = Some(proof);
		Self::set_proven_at(&mut unit, (job_id, index), Some(now));
		Units::<T>::insert(job_id, index, unit);
		let window_ends = now.saturating_add(T::ChallengeWindow::get());
		Self::deposit_event(Event::ProofSubmitted { job: job_id, unit: index, solver, proof, window_ends });
	}

	/// Sets the block unit `key`'s standing proof counts as proven at, moving its entry in
	/// `ProvenAt` with it: a unit is indexed there exactly while it has a proof that can
	/// still be challenged or disputed (`Proven` or `Challenged`).
	fn set_proven_at(unit: &mut WorkUnitOf<T>, key: UnitKey, proven_at: Option<BlockNumberFor<T>>) {
		if let Some(before) = unit.proven_at {
			ProvenAt::<T>::remove(before, key);
		}
		if let Some(after) = proven_at {
			ProvenAt::<T>::insert(after, key, ());
		}
		unit.proven_at = proven_at;
	}

	/// The proofs submitted (or whose challenge window opened again) at block `from` or
	/// later whose window is still open and which stand undisputed (`Proven`), in block
	/// order: trained units' proofs and rounds' aggregates (flagged, as they are challenged
	/// at a chunk, not by re-execution). Reads one `ProvenAt` prefix per block, and no block older than the window, so
	/// a light client asks for a few keys. Backs the `TasksApi::proofs_since` runtime API.
	pub fn proofs_since(from: BlockNumberFor<T>) -> Vec<OpenProof<T::AccountId, BlockNumberFor<T>>> {
		let now = frame_system::Pallet::<T>::block_number();
		let window = T::ChallengeWindow::get();
		// A window is open until the block `proven_at + window`, when the unit may be
		// finalized: a proof at `now - window` or earlier is closed to challenge.
		let mut block = from.max(now.saturating_sub(window).saturating_add(One::one()));
		let mut open = Vec::new();
		let mut job: Option<(JobId, Option<JobOf<T>>)> = None;
		while block <= now {
			for key in ProvenAt::<T>::iter_key_prefix(block) {
				let Some(unit) = Units::<T>::get(key.0, key.1).filter(|unit| unit.state == UnitState::Proven) else {
					continue;
				};
				let (Some(solver), Some(proof)) = (unit.solver, unit.proof) else { continue };
				if job.as_ref().map(|(id, _)| *id) != Some(key.0) {
					job = Some((key.0, Jobs::<T>::get(key.0)));
				}
				let Some(verification) = job.as_ref().and_then(|(_, job)| job.as_ref()).map(|job| job.spec.verification.clone())
				else {
					continue;
				};
				open.push(OpenProof {
					job: key.0,
					unit: key.1,
					solver,
					trace_root: proof.trace_root,
					verification,
					window_ends: block.saturating_add(window),
					aggregate: matches!(unit.scope, UnitScope::Aggregate { .. }).then_some(proof.final_state_root),
				});
			}
			if block == now {
				break;
			}
			block = block.saturating_add(One::one());
		}
		open
	}

	/// A unit's learning proof as the dispute game takes it: its segment root over the
	/// job's checkpoint grid.
	pub(crate) fn unit_commitment(spec: &JobSpec<BalanceOf<T>>, first_step: u32, proof: &LearningProof) -> UnitCommitment {
		UnitCommitment {
			root: proof.trace_root.0,
			first_step,
			steps: proof.steps,
			interval: spec.hyper.checkpoint_interval,
			start_state_root: proof.start_state_root.0,
		}
	}

	/// Finalizes a proven unit. Returns the job's unit count when the job completed (the
	/// aggregation reads every unit), else zero, for weight.
	pub(crate) fn do_finalize_unit(job_id: JobId, index: UnitIndex) -> Result<u32, DispatchError> {
		let mut job = Jobs::<T>::get(job_id).ok_or(Error::<T>::JobNotFound)?;
		let mut unit = Units::<T>::get(job_id, index).ok_or(Error::<T>::UnitNotFound)?;
		ensure!(unit.state == UnitState::Proven, Error::<T>::UnitNotProven);
		let proven_at = unit.proven_at.ok_or(Error::<T>::UnitNotProven)?;
		let now = frame_system::Pallet::<T>::block_number();
		ensure!(
			now >= proven_at.saturating_add(T::ChallengeWindow::get()),
			Error::<T>::ChallengeWindowOpen
		);
		ensure!(T::ProofLifecycle::can_finalize(job_id, index), Error::<T>::FinalizationBlocked);
		// A unit is paid only once every unit it started from is: while one of those can
		// still be overturned, so can this one.
		ensure!(
			job.spec.decomposition
				.predecessors(index, &unit.scope)
				.all(|previous| Units::<T>::get(job_id, previous).map(|unit| unit.state) == Some(UnitState::Finalized)),
			Error::<T>::PredecessorNotFinal
		);
		let solver = unit.solver.clone().ok_or(Error::<T>::UnitNotProven)?;

		let price = job.spec.price_per_unit;
		let jackpot = T::Jackpot::get();
		let mut to_jackpot = T::JackpotShare::get().mul_floor(price);
		// A jackpot that cannot take the share (say, it was drained below the existential
		// deposit) must not block the solver's pay: the share goes to the solver instead.
		if T::Currency::can_deposit(&jackpot, to_jackpot, Provenance::Extant) != DepositConsequence::Success {
			to_jackpot = Zero::zero();
		}
		// The verifiers that attested the proof split their share; one that cannot receive
		// its part (below the existential deposit) leaves it to the solver.
		let attesters = T::ProofLifecycle::on_finalized(job_id, index);
		let attester_count = BalanceOf::<T>::from(u32::try_from(attesters.len()).unwrap_or(u32::MAX));
		let per_verifier = T::VerifierShare::get()
			.mul_floor(price)
			.checked_div(&attester_count)
			.unwrap_or_else(Zero::zero);
		let mut payees: Vec<(T::AccountId, BalanceOf<T>)> = Vec::new();
		let mut to_verifiers = BalanceOf::<T>::zero();
		for verifier in attesters {
			if T::Currency::can_deposit(&verifier, per_verifier, Provenance::Extant) == DepositConsequence::Success {
				to_verifiers = to_verifiers.saturating_add(per_verifier);
				payees.push((verifier, per_verifier));
			}
		}
		let paid = price.saturating_sub(to_jackpot).saturating_sub(to_verifiers);
		payees.push((solver.clone(), paid));
		payees.push((jackpot, to_jackpot));
		for (to, amount) in payees {
			if amount.is_zero() {
				continue;
			}
			T::Currency::transfer_on_hold(
				&HoldReason::JobEscrow.into(),
				&job.owner,
				&to,
				amount,
				Precision::Exact,
				Restriction::Free,
				// Escrow is owed: a freeze on the owner's account cannot stop it.
				Fortitude::Force,
			)?;
		}
		job.escrow = job.escrow.saturating_sub(price);
		Self::release_solver(&mut unit, (job_id, index), price);
		unit.solver = Some(solver.clone());
		unit.state = UnitState::Finalized;
		// Final, the proof can no longer be challenged; its block stays on record.
		ProvenAt::<T>::remove(proven_at, (job_id, index));
		Units::<T>::insert(job_id, index, unit);
		T::Nodes::note_completed(&solver, price);
		Self::note_units_final(&mut job, 1);
		Self::deposit_event(Event::UnitFinalized { job: job_id, unit: index, solver, paid, to_jackpot, to_verifiers });
		let completed = job.is_finished();
		let units = job.units;
		Self::complete_if_done(job_id, job)?;
		Ok(if completed { units } else { 0 })
	}

	// ---------------------------------------------------------------------------------
	// Scheduling and deadlines (called from `on_initialize`)
	// ---------------------------------------------------------------------------------

	/// Offers up to `MaxAssignmentsPerBlock` pool units, oldest first, to the best-scoring
	/// eligible solver with room: one whose minimum price the unit meets, whose bond covers
	/// the collateral of its units with this one, and who did not just pass on it. A unit
	/// no solver can take now moves to the back of the pool. Returns the units considered
	/// and the registry nodes scanned, for weight.
	pub(crate) fn schedule(now: BlockNumberFor<T>) -> (u32, u32) {
		let mut pool = Pool::<T>::get();
		if pool.is_empty() {
			return (0, 0);
		}
		let scanned = T::Nodes::node_count();
		let candidates = T::Nodes::solver_candidates(T::Nodes::max_nodes());
		if candidates.is_empty() {
			return (0, scanned);
		}
		let mut load: Vec<(u32, BalanceOf<T>)> = candidates
			.iter()
			.map(|c| {
				let held = SolverUnits::<T>::decode_len(&c.account).unwrap_or(0) as u32;
				(held, SolverExposure::<T>::get(&c.account))
			})
			.collect();
		let capacity = T::MaxUnitsPerSolver::get();
		let considered = (pool.len() as u32).min(T::MaxAssignmentsPerBlock::get());
		let mut deferred = Vec::new();
		let mut taken = 0usize;
		for key in pool.iter().take(considered as usize) {
			taken = taken.saturating_add(1);
			let (Some(job), Some(mut unit)) = (Jobs::<T>::get(key.0), Units::<T>::get(key.0, key.1)) else {
				continue; // Stale entry: drop it.
			};
			// Defensive: only a claimable unit is pooled (drop any other entry), and one
			// past its pool wait stays for the sweep to expire.
			if !unit.state.is_claimable() {
				continue;
			}
			if unit.pool_deadline.is_some_and(|deadline| deadline < now) {
				deferred.push(*key);
				continue;
			}
			let price = job.spec.price_per_unit;
			let choice = candidates.iter().zip(load.iter_mut()).find(|(candidate, (held, exposure))| {
				*held < capacity &&
					candidate.min_price <= price &&
					unit.passed_by.as_ref() != Some(&candidate.account) &&
					Self::covers_collateral(candidate.bond, *exposure, price) &&
					job.spec.requirements.is_met_by(&candidate.profile)
			});
			match choice {
				Some((candidate, (held, exposure))) => {
					let deadline = now.saturating_add(T::AcceptanceTimeout::get());
					if Self::assign(&mut unit, *key, &candidate.account, deadline, price).is_ok() {
						*held = held.saturating_add(1);
						*exposure = exposure.saturating_add(price);
						Units::<T>::insert(key.0, key.1, unit);
						Self::deposit_event(Event::UnitAssigned {
							job: key.0,
							unit: key.1,
							solver: candidate.account.clone(),
							deadline,
						});
					} else {
						deferred.push(*key);
					}
				},
				None => deferred.push(*key),
			}
		}
		let mut rest: Vec<UnitKey> = pool.iter().skip(taken).copied().collect();
		rest.extend(deferred);
		pool = BoundedVec::truncate_from(rest);
		Pool::<T>::put(pool);
		(considered, scanned)
	}

	/// Handles what fell due before `now`: at most `MaxTimeoutsPerBlock` entries, or empty
	/// deadline blocks skipped, per block. Returns the weight used: each entry is charged
	/// the benchmarked worst case of its kind for its job's size.
	pub(crate) fn sweep_deadlines(now: BlockNumberFor<T>) -> Weight {
		let mut cursor = DeadlineCursor::<T>::get();
		let mut budget = T::MaxTimeoutsPerBlock::get();
		let db = T::DbWeight::get();
		let mut weight = db.reads_writes(1, 1);
		// A deadline is the last block it is met in: it expires after it.
		while cursor < now && budget > 0 {
			budget = budget.saturating_sub(1);
			match Deadlines::<T>::iter_prefix(cursor).next() {
				Some((due, ())) => {
					Deadlines::<T>::remove(cursor, due);
					let (units, shards) = match due {
						Due::Unit((job, _)) | Due::Removal(job) => Jobs::<T>::get(job).map_or((0, 0), |job| {
							(job.units, job.spec.decomposition.round_layout().map_or(0, |layout| layout.shards))
						}),
					};
					weight.saturating_accrue(match due {
						Due::Unit(_) => T::WeightInfo::time_out(units)
							.saturating_add(T::ProofLifecycle::on_abandoned_weight())
							.saturating_add(Self::given_up_shards_weight(shards)),
						Due::Removal(_) => T::WeightInfo::remove_job(units),
					});
					// Each entry is handled in its own storage layer, so a failure leaves
					// that entry's state as it was and is reported, not half-applied.
					let handled = with_storage_layer(|| match due {
						Due::Unit(key) => Self::time_out(key, cursor, now),
						Due::Removal(job) => Self::remove_job(job),
					});
					if let Err(error) = handled {
						log::error!(target: "runtime::tasks", "sweeping {due:?} failed: {error:?}");
						defensive!("a due entry could not be handled");
					}
				},
				None => {
					weight.saturating_accrue(db.reads_writes(1, 0));
					cursor = cursor.saturating_add(1u32.into());
				},
			}
		}
		DeadlineCursor::<T>::put(cursor);
		weight
	}

	/// A unit's deadline, at block `due`, passed. An offer that lapsed goes back to the
	/// pool (or expires, if the unit's own pool deadline passed meanwhile); an accepted
	/// unit whose solver made no progress is reassigned, or fails once out of attempts
	/// (or when its job was cancelled); a unit nobody took from the pool expires.
	pub(crate) fn time_out(key: UnitKey, due: BlockNumberFor<T>, now: BlockNumberFor<T>) -> DispatchResult {
		let (Some(mut job), Some(mut unit)) = (Jobs::<T>::get(key.0), Units::<T>::get(key.0, key.1)) else {
			return Ok(());
		};
		// An entry the unit no longer points at is stale: nothing is due.
		if unit.deadline != Some(due) {
			return Ok(());
		}
		unit.deadline = None;
		let pool_wait_over = unit.pool_deadline.is_some_and(|deadline| deadline < now);
		if unit.state.is_claimable() || (unit.state == UnitState::Assigned && !unit.accepted && pool_wait_over) {
			if unit.state == UnitState::Assigned {
				// A lapsed offer past the unit's pool deadline: it expires rather than
				// going round solvers that never accept.
				Self::release_solver(&mut unit, key, job.spec.price_per_unit);
			}
			Pool::<T>::mutate(|pool| pool.retain(|queued| *queued != key));
			Self::deposit_event(Event::UnitExpired { job: key.0, unit: key.1 });
			Self::fail_unit(&mut job, key, unit)?;
			return Self::complete_if_done(key.0, job);
		}
		if unit.state != UnitState::Assigned {
			return Ok(());
		}
		let solver = unit.solver.clone().ok_or(Error::<T>::NotAssignedSolver)?;
		if !unit.accepted {
			Self::return_offer(key, &job, &mut unit)?;
			Units::<T>::insert(key.0, key.1, unit);
			Self::deposit_event(Event::OfferLapsed { job: key.0, unit: key.1, solver });
			return Ok(());
		}
		let price = job.spec.price_per_unit;
		T::Nodes::note_failed(&solver, price);
		Self::release_solver(&mut unit, key, price);
		// What the solver committed toward a proof (a forced-error secret) goes with it,
		// and may cost it.
		T::ProofLifecycle::on_abandoned(key.0, key.1);
		unit.passed_by = Some(solver.clone());
		// A cancelled job takes no new solver; a unit out of attempts fails for good.
		if unit.attempts >= T::MaxAttempts::get() || job.status != JobStatus::Active {
			Self::fail_unit(&mut job, key, unit)?;
			return Self::complete_if_done(key.0, job);
		}
		let resume_from = unit.last_checkpoint;
		let pool_deadline = now.saturating_add(job.spec.pool_timeout.into());
		Self::enter_pool(&mut unit, key, UnitState::Reassigned, pool_deadline);
		Units::<T>::insert(key.0, key.1, unit);
		Self::enqueue(key)?;
		Self::deposit_event(Event::UnitTimedOut { job: key.0, unit: key.1, solver, resume_from });
		Ok(())
	}

	/// Removes a finished job's records and its units, and returns its storage deposit.
	pub(crate) fn remove_job(job_id: JobId) -> DispatchResult {
		let Some(job) = Jobs::<T>::get(job_id) else { return Ok(()) };
		ensure!(job.is_finished(), Error::<T>::JobNotActive);
		let _ = Units::<T>::clear_prefix(job_id, job.units, None);
		let _ = WindowReopenings::<T>::clear_prefix(job_id, job.units, None);
		Jobs::<T>::remove(job_id);
		let deposit =
			T::Currency::release(&HoldReason::JobDeposit.into(), &job.owner, job.deposit, Precision::BestEffort)?;
		Self::deposit_event(Event::JobRemoved { job: job_id, deposit });
		Ok(())
	}

	/// Whether nobody has started `unit`: waiting, in the pool, or offered and not accepted.
	fn is_unstarted(unit: &WorkUnitOf<T>) -> bool {
		matches!(unit.state, UnitState::Waiting | UnitState::Pending | UnitState::Reassigned) ||
			(unit.state == UnitState::Assigned && !unit.accepted)
	}

	/// Stores an unstarted unit as `state` (cancelled or failed): out of `pool`, its
	/// offer's solver released and its deadline cleared (`release_solver`). The caller
	/// refunds its price.
	fn give_up(
		pool: &mut BoundedVec<UnitKey, T::MaxOpenUnits>,
		key: UnitKey,
		unit: &mut WorkUnitOf<T>,
		price: BalanceOf<T>,
		state: UnitState,
	) {
		pool.retain(|queued| *queued != key);
		Self::release_solver(unit, key, price);
		unit.pool_deadline = None;
		unit.state = state;
		Units::<T>::insert(key.0, key.1, &*unit);
	}

	/// What failing a shard of a rounds job of `shards` shards a round adds to `time_out`'s
	/// benchmark (a step range failing with every later range, each read and written):
	/// each other shard of its round given up may release the solver it was offered to
	/// (the solver's units and exposure read and written), and the pool is read and
	/// written once more. Nothing for other jobs (`shards` zero).
	pub(crate) fn given_up_shards_weight(shards: u32) -> Weight {
		if shards == 0 {
			return Weight::zero();
		}
		let db = T::DbWeight::get();
		db.reads_writes(2, 2).saturating_mul(u64::from(shards)).saturating_add(db.reads_writes(1, 1))
	}

	/// Fails a unit for good, refunding its price; for a step range, every later range
	/// (which could only start from it) fails with it, and for a rounds job every unit
	/// still waiting (the round's aggregate and the rounds after it) and, for a shard, the
	/// shards of its round nobody has started: that round can never be averaged, so
	/// training them would be paid for nothing. Shards already training or proven stand.
	fn fail_unit(job: &mut JobOf<T>, key: UnitKey, mut unit: WorkUnitOf<T>) -> DispatchResult {
		let sequential = !matches!(job.spec.decomposition, Decomposition::DataShards { .. });
		let price = job.spec.price_per_unit;
		let scope = unit.scope;
		unit.state = UnitState::Failed;
		unit.pool_deadline = None;
		Self::clear_deadline(&mut unit, key);
		Units::<T>::insert(key.0, key.1, unit);
		let mut failed = alloc::vec![key.1];
		if let (UnitScope::RoundShard { round, .. }, Decomposition::Rounds { shards, .. }) = (scope, &job.spec.decomposition) {
			let first = round.saturating_mul(shards.saturating_add(1));
			let mut pool = Pool::<T>::get();
			for sibling in first..first.saturating_add(*shards) {
				let Some(mut unit) = Units::<T>::get(key.0, sibling) else { continue };
				if sibling != key.1 && Self::is_unstarted(&unit) {
					Self::give_up(&mut pool, (key.0, sibling), &mut unit, price, UnitState::Failed);
					failed.push(sibling);
				}
			}
			if failed.len() > 1 {
				Pool::<T>::put(pool);
			}
		}
		if sequential {
			for later in key.1.saturating_add(1)..job.units {
				if let Some(mut waiting) = Units::<T>::get(key.0, later) {
					if waiting.state == UnitState::Waiting {
						waiting.state = UnitState::Failed;
						Units::<T>::insert(key.0, later, waiting);
						failed.push(later);
					}
				}
			}
		}
		for index in &failed {
			let refunded = Self::refund(job, price)?;
			Self::deposit_event(Event::UnitFailed { job: key.0, unit: *index, refunded });
		}
		Self::note_units_final(job, failed.len() as u32);
		Ok(())
	}

	// ---------------------------------------------------------------------------------
	// Completion and aggregation
	// ---------------------------------------------------------------------------------

	/// Stores `job`; if every unit is final, aggregates its result, refunds what is left
	/// in escrow, schedules the removal of its records and announces it. A cancelled job
	/// stays `Cancelled`.
	fn complete_if_done(job_id: JobId, mut job: JobOf<T>) -> DispatchResult {
		if !job.is_finished() || job.result.is_some() {
			Jobs::<T>::insert(job_id, job);
			return Ok(());
		}
		let result = Self::aggregate(job_id, &job);
		let leftover = job.escrow;
		let refunded = Self::refund(&mut job, leftover)?;
		if job.status == JobStatus::Active {
			job.status = JobStatus::Completed;
		}
		job.result = Some(result);
		let now = frame_system::Pallet::<T>::block_number();
		let removable_at = now.saturating_add(T::Retention::get());
		job.removable_at = Some(removable_at);
		Deadlines::<T>::insert(removable_at, Due::Removal(job_id), ());
		Jobs::<T>::insert(job_id, job);
		Self::deposit_event(Event::JobCompleted { job: job_id, result, refunded, removable_at });
		Ok(())
	}

	/// The job's result from its finalized units. A step-range job's model is its last
	/// range's; a data-parallel job commits to its shard models in unit order and averages
	/// the shard metrics by the job's rule.
	pub(crate) fn aggregate(job_id: JobId, job: &JobOf<T>) -> JobResult {
		let finalized: Vec<(UnitScope, LearningProof)> = Units::<T>::iter_prefix_values(job_id)
			.filter(|unit| unit.state == UnitState::Finalized)
			.filter_map(|unit| unit.proof.map(|proof| (unit.scope, proof)))
			.collect();
		let mut ordered: Vec<(u64, UnitScope, LearningProof)> = finalized
			.into_iter()
			.map(|(scope, proof)| {
				let order = match scope {
					UnitScope::Steps { first_step, .. } => u64::from(first_step),
					UnitScope::Shard { first_sample, .. } => u64::from(first_sample),
					UnitScope::RoundShard { round, first_sample, .. } => u64::from(round) << 32 | u64::from(first_sample),
					// After its round's shards.
					UnitScope::Aggregate { round } => u64::from(round) << 32 | u64::from(u32::MAX),
				};
				(order, scope, proof)
			})
			.collect();
		ordered.sort_by_key(|(order, _, _)| *order);
		let units_finalized = ordered.len() as u32;
		let units_failed = job.units.saturating_sub(units_finalized);

		let (state_root, metrics) = match job.spec.decomposition {
			Decomposition::StepRanges { .. } => ordered
				.last()
				.map(|(_, _, proof)| (proof.final_state_root, proof.metrics))
				.unwrap_or_default(),
			Decomposition::DataShards { aggregation, .. } => {
				let roots: Vec<u8> =
					ordered.iter().flat_map(|(_, _, proof)| proof.final_state_root.0).collect();
				let weights: Vec<(u128, TrainingMetrics)> = ordered
					.iter()
					.map(|(_, scope, proof)| {
						let weight = match (aggregation, scope) {
							(Aggregation::WeightedBySamples, UnitScope::Shard { samples, .. }) =>
								u128::from(*samples),
							_ => 1,
						};
						(weight, proof.metrics)
					})
					.collect();
				(blake2_256(&roots).into(), weighted_mean(&weights))
			},
			// The model is the last round's aggregate; the metrics are its shards', which
			// each measured its own end state before the average.
			Decomposition::Rounds { rounds, aggregation, .. } => {
				let last = rounds.saturating_sub(1);
				let state_root = ordered
					.iter()
					.find(|(_, scope, _)| *scope == UnitScope::Aggregate { round: last })
					.map(|(_, _, proof)| proof.final_state_root)
					.unwrap_or_default();
				let weights: Vec<(u128, TrainingMetrics)> = ordered
					.iter()
					.filter_map(|(_, scope, proof)| match (aggregation, scope) {
						(Aggregation::WeightedBySamples, UnitScope::RoundShard { round, samples, .. }) if *round == last =>
							Some((u128::from(*samples), proof.metrics)),
						(Aggregation::Uniform, UnitScope::RoundShard { round, .. }) if *round == last => Some((1, proof.metrics)),
						_ => None,
					})
					.collect();
				(state_root, weighted_mean(&weights))
			},
		};
		JobResult { state_root, metrics, units_finalized, units_failed }
	}

	// ---------------------------------------------------------------------------------
	// Helpers
	// ---------------------------------------------------------------------------------

	/// The job and unit, if `solver` holds the unit as `Assigned` and its deadline has not
	/// passed: a solver call after the deadline is refused even while the sweep lags.
	fn solver_unit(
		solver: &T::AccountId,
		job_id: JobId,
		index: UnitIndex,
	) -> Result<(JobOf<T>, WorkUnitOf<T>), DispatchError> {
		let job = Jobs::<T>::get(job_id).ok_or(Error::<T>::JobNotFound)?;
		let unit = Units::<T>::get(job_id, index).ok_or(Error::<T>::UnitNotFound)?;
		ensure!(
			unit.state == UnitState::Assigned && unit.solver.as_ref() == Some(solver),
			Error::<T>::NotAssignedSolver
		);
		let now = frame_system::Pallet::<T>::block_number();
		ensure!(unit.deadline.is_some_and(|deadline| now <= deadline), Error::<T>::DeadlinePassed);
		Ok((job, unit))
	}

	/// Global steps `(first, end)` a unit trains: a slice of the run for a step range,
	/// the whole run (on its own shard) for a data shard.
	pub(crate) fn step_range(job: &JobOf<T>, unit: &WorkUnitOf<T>) -> (u32, u32) {
		Self::scope_steps(&job.spec, &unit.scope)
	}

	/// Global steps `(first, end)` a unit of `scope` trains in a job of `spec`: a round's
	/// shard its round's local steps, an aggregate none (at its round's end).
	fn scope_steps(spec: &JobSpec<BalanceOf<T>>, scope: &UnitScope) -> (u32, u32) {
		let local_steps = spec.decomposition.local_steps();
		match *scope {
			UnitScope::Steps { first_step, steps } => (first_step, first_step.saturating_add(steps)),
			UnitScope::Shard { .. } => (0, spec.hyper.steps),
			UnitScope::RoundShard { round, .. } => {
				let first = round.saturating_mul(local_steps);
				(first, first.saturating_add(local_steps))
			},
			UnitScope::Aggregate { round } => {
				let end = round.saturating_add(1).saturating_mul(local_steps);
				(end, end)
			},
		}
	}

	/// The first unit that an overturn of unit `index` (of `scope`) rolls back, with every
	/// later one that started from it: the next step range; for a round's shard its
	/// round's aggregate; for an aggregate the next round. `None` for a data shard.
	fn first_dependent(job: &JobOf<T>, index: UnitIndex, scope: &UnitScope) -> Option<UnitIndex> {
		match (*scope, job.spec.decomposition.round_layout()) {
			(UnitScope::Steps { .. } | UnitScope::Aggregate { .. }, _) => Some(index.saturating_add(1)),
			(UnitScope::RoundShard { round, .. }, Some(layout)) => Some(layout.aggregate_index(round)),
			_ => None,
		}
	}

	/// Whole blocks one checkpoint segment of a job of `spec` (its checkpoint interval of
	/// steps, or all its steps if fewer) takes to re-execute at `ReferenceWorkPerBlock`.
	pub(crate) fn segment_blocks(spec: &JobSpec<BalanceOf<T>>) -> u32 {
		let steps = spec.hyper.checkpoint_interval.max(1).min(spec.hyper.steps);
		reexecution_blocks(step_multiply_adds(&spec.model, &spec.hyper), steps, T::ReferenceWorkPerBlock::get())
	}

	/// The collateral of units worth `value`: `CollateralPercent` of it, rounded up.
	pub(crate) fn collateral(value: BalanceOf<T>) -> BalanceOf<T> {
		let percent = BalanceOf::<T>::from(T::CollateralPercent::get());
		let hundred = BalanceOf::<T>::from(100u32);
		// Split so that no product overflows before the division.
		let whole = (value / hundred).saturating_mul(percent);
		let part = (value % hundred).saturating_mul(percent).saturating_add(hundred.saturating_sub(1u32.into())) / hundred;
		whole.saturating_add(part)
	}

	/// Whether `solver` may take a unit of `job`: bonded, online, with hardware that meets
	/// the job's requirements and a minimum price the job meets.
	pub(crate) fn is_eligible(solver: &T::AccountId, job: &JobOf<T>) -> bool {
		T::Nodes::is_bonded_for(solver, Role::Solver) &&
			T::Nodes::is_online(solver) &&
			T::Nodes::min_price(solver).is_some_and(|min| min <= job.spec.price_per_unit) &&
			T::Nodes::profile(solver).is_some_and(|profile| job.spec.requirements.is_met_by(&profile))
	}

	/// Whether a solver `bond` covers the collateral of units worth `exposure` plus one
	/// more unit at `price`.
	pub(crate) fn covers_collateral(bond: BalanceOf<T>, exposure: BalanceOf<T>, price: BalanceOf<T>) -> bool {
		bond >= Self::collateral(exposure.saturating_add(price))
	}

	/// Hands `unit` to `solver` with a deadline, counting its price in the solver's
	/// exposure. The unit is offered, not yet taken: see [`Self::take`].
	fn assign(
		unit: &mut WorkUnitOf<T>,
		key: UnitKey,
		solver: &T::AccountId,
		deadline: BlockNumberFor<T>,
		price: BalanceOf<T>,
	) -> DispatchResult {
		SolverUnits::<T>::try_mutate(solver, |units| units.try_push(key))
			.map_err(|_| Error::<T>::SolverAtCapacity)?;
		SolverExposure::<T>::mutate(solver, |exposure| *exposure = exposure.saturating_add(price));
		Self::clear_deadline(unit, key);
		unit.state = UnitState::Assigned;
		unit.solver = Some(solver.clone());
		unit.accepted = false;
		unit.deadline = Some(deadline);
		Deadlines::<T>::insert(deadline, Due::Unit(key), ());
		Ok(())
	}

	/// The assigned solver takes the unit (accepts it, or claimed it): one attempt, and
	/// the unit no longer waits in the pool.
	fn take(unit: &mut WorkUnitOf<T>) {
		unit.accepted = true;
		unit.attempts = unit.attempts.saturating_add(1);
		unit.pool_deadline = None;
		unit.passed_by = None;
	}

	/// Puts `unit` in `state` in the pool, to wait there until `pool_deadline`. The caller
	/// queues its key.
	fn enter_pool(unit: &mut WorkUnitOf<T>, key: UnitKey, state: UnitState, pool_deadline: BlockNumberFor<T>) {
		unit.state = state;
		unit.pool_deadline = Some(pool_deadline);
		unit.deadline = Some(pool_deadline);
		Deadlines::<T>::insert(pool_deadline, Due::Unit(key), ());
	}

	/// Returns a unit whose offer was declined or lapsed to the pool, with the pool
	/// deadline it had (or now, if that passed meanwhile), to be offered to others first.
	fn return_offer(key: UnitKey, job: &JobOf<T>, unit: &mut WorkUnitOf<T>) -> DispatchResult {
		let now = frame_system::Pallet::<T>::block_number();
		unit.passed_by = unit.solver.clone();
		Self::release_solver(unit, key, job.spec.price_per_unit);
		let state = if unit.attempts > 0 { UnitState::Reassigned } else { UnitState::Pending };
		let pool_deadline = unit.pool_deadline.unwrap_or(now).max(now);
		Self::enter_pool(unit, key, state, pool_deadline);
		Self::enqueue(key)
	}

	/// Moves a unit's deadline to `timeout` blocks from now; returns the new deadline.
	fn extend_deadline(unit: &mut WorkUnitOf<T>, key: UnitKey, timeout: u32) -> BlockNumberFor<T> {
		Self::clear_deadline(unit, key);
		let deadline = frame_system::Pallet::<T>::block_number().saturating_add(timeout.into());
		unit.deadline = Some(deadline);
		Deadlines::<T>::insert(deadline, Due::Unit(key), ());
		deadline
	}

	fn clear_deadline(unit: &mut WorkUnitOf<T>, key: UnitKey) {
		if let Some(deadline) = unit.deadline.take() {
			Deadlines::<T>::remove(deadline, Due::Unit(key));
		}
	}

	/// Takes a unit away from its solver: out of the solver's list, its exposure, and
	/// the deadline index.
	fn release_solver(unit: &mut WorkUnitOf<T>, key: UnitKey, price: BalanceOf<T>) {
		Self::clear_deadline(unit, key);
		unit.accepted = false;
		if let Some(solver) = unit.solver.take() {
			SolverUnits::<T>::mutate_exists(&solver, |units| {
				if let Some(list) = units {
					list.retain(|held| *held != key);
					if list.is_empty() {
						*units = None;
					}
				}
			});
			SolverExposure::<T>::mutate_exists(&solver, |exposure| {
				let left = exposure.unwrap_or_default().saturating_sub(price);
				*exposure = if left.is_zero() { None } else { Some(left) };
			});
		}
	}

	fn enqueue(key: UnitKey) -> DispatchResult {
		Pool::<T>::try_mutate(|pool| pool.try_push(key)).map_err(|_| Error::<T>::TooManyOpenUnits.into())
	}

	/// Releases `amount` of the job's escrow back to its owner.
	fn refund(job: &mut JobOf<T>, amount: BalanceOf<T>) -> Result<BalanceOf<T>, DispatchError> {
		let amount = amount.min(job.escrow);
		if amount.is_zero() {
			return Ok(amount);
		}
		T::Currency::release(&HoldReason::JobEscrow.into(), &job.owner, amount, Precision::Exact)?;
		job.escrow = job.escrow.saturating_sub(amount);
		Ok(amount)
	}

	fn note_units_final(job: &mut JobOf<T>, count: u32) {
		job.units_final = job.units_final.saturating_add(count);
		OpenUnits::<T>::mutate(|open| *open = open.saturating_sub(count));
	}

	// ---------------------------------------------------------------------------------
	// Disputes (the disputes pallet acts through `UnitProofs`)
	// ---------------------------------------------------------------------------------

	/// A unit whose proof stands (`Proven` or `Challenged`), as a dispute sees it.
	pub(crate) fn proven_unit(job_id: JobId, index: UnitIndex) -> Option<ProvenUnitOf<T>> {
		let job = Jobs::<T>::get(job_id)?;
		let unit = Units::<T>::get(job_id, index)?;
		if !matches!(unit.state, UnitState::Proven | UnitState::Challenged) {
			return None;
		}
		let proof = unit.proof?;
		let (first, _) = Self::step_range(&job, &unit);
		let dataset = &job.spec.dataset;
		// An aggregate is not disputed by the step game: it trained no steps.
		let (first_sample, shard_samples) = unit.scope.data(dataset.samples)?;
		Some(ProvenUnit {
			solver: unit.solver?,
			jackpot_pay: T::JackpotShare::get().mul_floor(job.spec.price_per_unit),
			collateral: Self::collateral(job.spec.price_per_unit),
			owner: job.owner,
			trace: Self::unit_commitment(&job.spec, first, &proof),
			data: DataCommitment { root: dataset.root.0, samples: dataset.samples, first_sample, shard_samples },
			window_ends: unit.proven_at?.saturating_add(T::ChallengeWindow::get()),
			challenged: unit.state == UnitState::Challenged,
			segment_blocks: Self::segment_blocks(&job.spec),
			model: job.spec.model,
			hyper: job.spec.hyper,
			verification: job.spec.verification,
		})
	}

	/// A round's aggregate whose commitment stands undisputed (`Proven`), with what a
	/// challenge of it is judged against: its round's shards' proven end states (each must
	/// still stand: a round readied its aggregate only once they all did) and the outer
	/// momentum the round starts from.
	pub(crate) fn proven_aggregate(job_id: JobId, index: UnitIndex) -> Option<ProvenAggregateOf<T>> {
		let job = Jobs::<T>::get(job_id)?;
		let unit = Units::<T>::get(job_id, index)?;
		let (UnitScope::Aggregate { round }, Decomposition::Rounds { aggregation, outer, .. }) = (unit.scope, job.spec.decomposition)
		else {
			return None;
		};
		if unit.state != UnitState::Proven {
			return None;
		}
		let layout = job.spec.decomposition.round_layout()?;
		let proof = unit.proof?;
		let mut shards = Vec::with_capacity(layout.shards as usize);
		for shard in 0..layout.shards {
			let shard_unit = Units::<T>::get(job_id, layout.shard_index(round, shard))?;
			let (_, samples) = shard_unit.scope.data(job.spec.dataset.samples)?;
			shards.push((shard_unit.proof?.final_state_root, samples));
		}
		let nesterov = matches!(outer, OuterOptimizer::Nesterov { .. });
		let momentum_root = match round.checked_sub(1) {
			Some(previous) if nesterov => Some(Units::<T>::get(job_id, layout.aggregate_index(previous))?.proof?.trace_root),
			_ => None,
		};
		Some(ProvenAggregate {
			solver: unit.solver?,
			collateral: Self::collateral(job.spec.price_per_unit),
			model: job.spec.model,
			hyper: job.spec.hyper,
			outer,
			aggregation,
			shards,
			global_root: proof.start_state_root,
			momentum_root,
			claimed_root: proof.final_state_root,
			claimed_momentum_root: nesterov.then_some(proof.trace_root),
			window_ends: unit.proven_at?.saturating_add(T::ChallengeWindow::get()),
		})
	}

	/// The proof that replaces the standing proof of a unit whose proof carried a forced
	/// error: the same steps, start, final state and final model, over the other
	/// segment root `trace_root`, whose last boundary `final_state` opens. The later step
	/// ranges started from that final model, so they stand.
	pub(crate) fn replacement(
		job_id: JobId,
		index: UnitIndex,
		trace_root: [u8; 32],
		final_state: &BoundaryOpening,
	) -> Result<LearningProof, DispatchError> {
		let job = Jobs::<T>::get(job_id).ok_or(Error::<T>::JobNotFound)?;
		let unit = Units::<T>::get(job_id, index).ok_or(Error::<T>::UnitNotFound)?;
		ensure!(matches!(unit.state, UnitState::Proven | UnitState::Challenged), Error::<T>::UnitNotProven);
		let standing = unit.proof.ok_or(Error::<T>::UnitNotProven)?;
		let (first, _) = Self::step_range(&job, &unit);
		ensure!(standing.trace_root.0 != trace_root, Error::<T>::NotAReplacement);
		let proof = LearningProof { trace_root: trace_root.into(), ..standing };
		Self::check_final_state(&job.spec, first, &proof, final_state)?;
		Ok(proof)
	}

	/// Replaces a unit's standing proof with one [`Self::replacement`] accepted. The
	/// unit is `Proven` again, its challenge window open in full.
	pub(crate) fn replace_proof(job_id: JobId, index: UnitIndex, proof: LearningProof) -> DispatchResult {
		let unit = Units::<T>::get(job_id, index).ok_or(Error::<T>::UnitNotFound)?;
		ensure!(matches!(unit.state, UnitState::Proven | UnitState::Challenged), Error::<T>::UnitNotProven);
		let solver = unit.solver.clone().ok_or(Error::<T>::UnitNotProven)?;
		T::ProofLifecycle::on_proof_submitted(job_id, index, &solver, &proof)?;
		Self::stand_proof(job_id, index, unit, solver, proof);
		Ok(())
	}

	/// Moves a unit between `Proven` and `Challenged`.
	pub(crate) fn set_challenged(job_id: JobId, index: UnitIndex, challenged: bool) -> DispatchResult {
		Units::<T>::try_mutate(job_id, index, |unit| {
			let unit = unit.as_mut().ok_or(Error::<T>::UnitNotFound)?;
			let from_ok = if challenged {
				matches!(unit.state, UnitState::Proven | UnitState::Challenged)
			} else {
				unit.state == UnitState::Challenged
			};
			ensure!(from_ok, Error::<T>::NotDisputable);
			unit.state = if challenged { UnitState::Challenged } else { UnitState::Proven };
			if !challenged {
				// Every dispute failed: the window opens again in full, so filling the
				// unit's dispute slots with hopeless challenges cannot run it out; but only
				// `MaxWindowReopenings` times a proof, so lost challenges cannot hold the
				// unit's pay for ever.
				let root = unit.proof.as_ref().map(|proof| proof.trace_root);
				let reopened = WindowReopenings::<T>::get(job_id, index)
					.filter(|(counted, _)| Some(*counted) == root)
					.map_or(0, |(_, count)| count);
				if let Some(root) = root.filter(|_| reopened < T::MaxWindowReopenings::get()) {
					Self::set_proven_at(unit, (job_id, index), Some(frame_system::Pallet::<T>::block_number()));
					WindowReopenings::<T>::insert(job_id, index, (root, reopened.saturating_add(1)));
				}
			}
			Ok(())
		})
	}

	/// A challenged unit's proof was overturned. Later step ranges roll back to `Waiting`;
	/// the solver is released. The unit goes back to the pool from its start (its
	/// checkpoints came from the same solver), or fails once out of attempts. Returns the
	/// rolled-back units.
	pub(crate) fn overturn(job_id: JobId, index: UnitIndex) -> Result<Vec<UnitIndex>, DispatchError> {
		let mut job = Jobs::<T>::get(job_id).ok_or(Error::<T>::JobNotFound)?;
		let mut unit = Units::<T>::get(job_id, index).ok_or(Error::<T>::UnitNotFound)?;
		ensure!(unit.state == UnitState::Challenged, Error::<T>::NotDisputable);
		let key = (job_id, index);
		let rolled_back = Self::roll_back_successors(&job, job_id, index, &unit.scope)?;
		for dropped in core::iter::once(index).chain(rolled_back.iter().copied()) {
			T::ProofLifecycle::on_proof_dropped(job_id, dropped);
		}
		let price = job.spec.price_per_unit;
		let solver = unit.solver.clone().ok_or(Error::<T>::NotDisputable)?;
		T::Nodes::note_failed(&solver, price);
		unit.passed_by = Some(solver.clone());
		Self::release_solver(&mut unit, key, price);
		unit.proof = None;
		Self::set_proven_at(&mut unit, key, None);
		unit.last_checkpoint = None;
		Self::deposit_event(Event::ProofRejected { job: job_id, unit: index, solver, rolled_back: rolled_back.len() as u32 });
		if unit.attempts >= T::MaxAttempts::get() || job.status != JobStatus::Active {
			Self::fail_unit(&mut job, key, unit)?;
			Self::complete_if_done(job_id, job)?;
		} else {
			let now = frame_system::Pallet::<T>::block_number();
			let pool_deadline = now.saturating_add(job.spec.pool_timeout.into());
			Self::enter_pool(&mut unit, key, UnitState::Reassigned, pool_deadline);
			Units::<T>::insert(job_id, index, unit);
			Self::enqueue(key)?;
		}
		Ok(rolled_back)
	}

	/// Rolls every later unit that started from unit `index`'s model back to `Waiting`
	/// (later step ranges; for a round's shard its round's aggregate and every later
	/// round): out of the pool, away from its solver (at no cost to it: the attempt is
	/// given back), its proof void. Nothing for a data shard.
	fn roll_back_successors(
		job: &JobOf<T>,
		job_id: JobId,
		index: UnitIndex,
		scope: &UnitScope,
	) -> Result<Vec<UnitIndex>, DispatchError> {
		let mut rolled_back = Vec::new();
		let Some(first) = Self::first_dependent(job, index, scope) else { return Ok(rolled_back) };
		// A step range waits for the one before it, so the ranges after a waiting one
		// wait too; a round's units are ready side by side, so each is looked at.
		let sequential = matches!(scope, UnitScope::Steps { .. });
		for later in first..job.units {
			let Some(mut unit) = Units::<T>::get(job_id, later) else { break };
			let key = (job_id, later);
			match unit.state {
				UnitState::Pending | UnitState::Reassigned => {
					Pool::<T>::mutate(|pool| pool.retain(|queued| *queued != key));
					Self::clear_deadline(&mut unit, key);
				},
				UnitState::Assigned | UnitState::Proven | UnitState::Verifying | UnitState::Challenged => {
					if unit.accepted || unit.state != UnitState::Assigned {
						unit.attempts = unit.attempts.saturating_sub(1);
					}
					Self::release_solver(&mut unit, key, job.spec.price_per_unit);
				},
				// None after a final one moves.
				UnitState::Waiting | UnitState::Finalized | UnitState::Failed | UnitState::Cancelled if sequential => break,
				UnitState::Waiting | UnitState::Finalized | UnitState::Failed | UnitState::Cancelled => continue,
			}
			unit.state = UnitState::Waiting;
			unit.pool_deadline = None;
			unit.passed_by = None;
			unit.proof = None;
			Self::set_proven_at(&mut unit, key, None);
			unit.last_checkpoint = None;
			unit.start_state_root = None;
			Units::<T>::insert(job_id, later, unit);
			rolled_back.push(later);
		}
		Ok(rolled_back)
	}

	// ---------------------------------------------------------------------------------
	// Invariants
	// ---------------------------------------------------------------------------------

	/// Checks the pallet's invariants:
	/// - the escrow held from each account equals the escrow of its jobs, and covers the
	///   price of every open unit; the deposit held equals the deposits of its jobs;
	/// - every unit holding a solver belongs to a bonded solver and is in its list, and a
	///   solver's exposure is the price of the units it holds;
	/// - every pool entry is a claimable unit, once, and every claimable unit is in the
	///   pool; every assigned or claimable unit has its deadline indexed;
	/// - no deadline lies behind the sweep's cursor;
	/// - `OpenUnits` counts the units that are not final, and each job's `units_final`
	///   counts its final units; a finished job has a result and a removal scheduled.
	#[cfg(any(feature = "try-runtime", feature = "std"))]
	pub fn do_try_state() -> Result<(), polkadot_sdk::sp_runtime::TryRuntimeError> {
		use alloc::collections::btree_map::BTreeMap;
		use polkadot_sdk::frame_support::traits::fungible::InspectHold;

		let mut escrow_by_owner: BTreeMap<T::AccountId, BalanceOf<T>> = BTreeMap::new();
		let mut deposit_by_owner: BTreeMap<T::AccountId, BalanceOf<T>> = BTreeMap::new();
		let mut exposure_by_solver: BTreeMap<T::AccountId, BalanceOf<T>> = BTreeMap::new();
		let mut open_units = 0u32;
		let pool = Pool::<T>::get();
		for (job_id, job) in Jobs::<T>::iter() {
			let entry = escrow_by_owner.entry(job.owner.clone()).or_default();
			*entry = entry.saturating_add(job.escrow);
			let entry = deposit_by_owner.entry(job.owner.clone()).or_default();
			*entry = entry.saturating_add(job.deposit);
			let price = job.spec.price_per_unit;
			let mut final_units = 0u32;
			for (index, unit) in Units::<T>::iter_prefix(job_id) {
				if unit.state.is_final() {
					final_units = final_units.saturating_add(1);
				} else {
					open_units = open_units.saturating_add(1);
				}
				let holds_solver = matches!(
					unit.state,
					UnitState::Assigned | UnitState::Proven | UnitState::Verifying | UnitState::Challenged
				);
				if holds_solver {
					let solver = unit.solver.as_ref().ok_or("held unit without a solver")?;
					// Registered, hence bonded as a solver: nothing unbonds the solver role
					// while units are held (a slash may still take the bond below its minimum).
					ensure!(T::Nodes::is_registered(solver), "unit held by an unregistered solver");
					ensure!(
						SolverUnits::<T>::get(solver).contains(&(job_id, index)),
						"held unit missing from its solver's list"
					);
					let exposure = exposure_by_solver.entry(solver.clone()).or_default();
					*exposure = exposure.saturating_add(price);
				}
				ensure!(
					unit.state.is_final() || (unit.state == UnitState::Waiting) == unit.start_state_root.is_none(),
					"a unit's start state is known exactly when it no longer waits"
				);
				if matches!(unit.state, UnitState::Proven | UnitState::Challenged) {
					let proof = unit.proof.ok_or("proven unit without a proof")?;
					ensure!(unit.start_state_root == Some(proof.start_state_root), "proof not anchored at the unit's start");
				}
				// A round's unit that no longer waits starts from what it was readied from:
				// a shard from the standing aggregate of the round before, an aggregate
				// from its round's start, with every shard of the round proven.
				let open_round_unit = job.spec.decomposition.round_layout().filter(|_| !unit.state.is_final());
				if let (Some(layout), Some(start)) = (open_round_unit, unit.start_state_root) {
					let source = match unit.scope {
						UnitScope::RoundShard { round, .. } if round > 0 =>
							Units::<T>::get(job_id, layout.aggregate_index(round.saturating_sub(1))),
						UnitScope::Aggregate { round } => {
							let shards = (0..layout.shards).filter_map(|shard| Units::<T>::get(job_id, layout.shard_index(round, shard)));
							let mut shards = shards.peekable();
							ensure!(
								shards.peek().is_some() && shards.all(|shard| Self::stands_proven(shard.state) && shard.start_state_root == Some(start)),
								"an aggregate readied before its round's shards all stand proven from its start"
							);
							None
						},
						_ => None,
					};
					if let Some(source) = source {
						ensure!(
							Self::stands_proven(source.state) && source.proof.map(|proof| proof.final_state_root) == Some(start),
							"a round's shard readied from no standing aggregate of the round before"
						);
					}
				}
				if unit.state.is_claimable() {
					ensure!(pool.contains(&(job_id, index)), "claimable unit missing from the pool");
					ensure!(unit.deadline == unit.pool_deadline, "pooled unit's deadline is not its pool deadline");
				}
				if unit.state == UnitState::Assigned && !unit.accepted {
					ensure!(unit.pool_deadline.is_some(), "offered unit without a pool deadline");
				}
				if unit.state == UnitState::Assigned || unit.state.is_claimable() {
					let deadline = unit.deadline.ok_or("assigned or pooled unit without a deadline")?;
					ensure!(
						Deadlines::<T>::contains_key(deadline, Due::Unit((job_id, index))),
						"unit's deadline not indexed"
					);
				}
			}
			ensure!(final_units == job.units_final, "units_final out of sync");
			let open_price = price.saturating_mul(job.units.saturating_sub(job.units_final).into());
			ensure!(job.escrow >= open_price, "escrow below the price of the open units");
			if job.is_finished() {
				ensure!(job.escrow.is_zero(), "finished job still holds escrow");
				let removable_at = job.removable_at.ok_or("finished job without a removal")?;
				ensure!(job.result.is_some(), "finished job without a result");
				ensure!(
					Deadlines::<T>::contains_key(removable_at, Due::Removal(job_id)),
					"finished job's removal not indexed"
				);
			}
		}
		for (owner, escrow) in escrow_by_owner {
			ensure!(
				T::Currency::balance_on_hold(&HoldReason::JobEscrow.into(), &owner) == escrow,
				"escrow held differs from the open budgets"
			);
		}
		for (owner, deposit) in deposit_by_owner {
			ensure!(
				T::Currency::balance_on_hold(&HoldReason::JobDeposit.into(), &owner) == deposit,
				"deposit held differs from the jobs' deposits"
			);
		}
		ensure!(OpenUnits::<T>::get() == open_units, "OpenUnits out of sync");
		for (job, index, (_, count)) in WindowReopenings::<T>::iter() {
			ensure!(Units::<T>::contains_key(job, index), "a window reopening count without its unit");
			ensure!(count <= T::MaxWindowReopenings::get(), "a window reopened more often than allowed");
		}
		for (position, key) in pool.iter().enumerate() {
			let unit = Units::<T>::get(key.0, key.1).ok_or("pool entry without a unit")?;
			ensure!(unit.state.is_claimable(), "pool entry not claimable");
			ensure!(!pool.iter().skip(position.saturating_add(1)).any(|k| k == key), "duplicate pool entry");
		}
		for (solver, keys) in SolverUnits::<T>::iter() {
			for key in keys {
				let unit = Units::<T>::get(key.0, key.1).ok_or("listed unit missing")?;
				ensure!(unit.solver.as_ref() == Some(&solver), "listed unit held by another solver");
				ensure!(
					matches!(
						unit.state,
						UnitState::Assigned | UnitState::Proven | UnitState::Verifying | UnitState::Challenged
					),
					"listed unit not in a held state"
				);
			}
		}
		for (solver, exposure) in SolverExposure::<T>::iter() {
			let expected = exposure_by_solver.remove(&solver).unwrap_or_default();
			ensure!(exposure == expected, "solver exposure differs from its units' prices");
		}
		ensure!(exposure_by_solver.values().all(|e| e.is_zero()), "held units without exposure");
		let disputable: alloc::collections::BTreeSet<(BlockNumberFor<T>, UnitKey)> = Units::<T>::iter()
			.filter(|(_, _, unit)| matches!(unit.state, UnitState::Proven | UnitState::Challenged))
			.filter_map(|(job_id, index, unit)| Some((unit.proven_at?, (job_id, index))))
			.collect();
		ensure!(
			ProvenAt::<T>::iter_keys().collect::<alloc::collections::BTreeSet<_>>() == disputable,
			"the index of proofs by block is not the units with a proof that can be disputed"
		);
		let cursor = DeadlineCursor::<T>::get();
		for (block, due, ()) in Deadlines::<T>::iter() {
			ensure!(block >= cursor, "a deadline lies behind the sweep's cursor");
			match due {
				Due::Unit(key) => {
					let unit = Units::<T>::get(key.0, key.1).ok_or("deadline of a missing unit")?;
					ensure!(unit.deadline == Some(block), "deadline entry the unit does not point at");
					ensure!(
						unit.state == UnitState::Assigned || unit.state.is_claimable(),
						"deadline of a unit that is neither assigned nor pooled"
					);
				},
				Due::Removal(job) => {
					let job = Jobs::<T>::get(job).ok_or("removal of a missing job")?;
					ensure!(job.is_finished() && job.removable_at == Some(block), "removal of an unfinished job");
				},
			}
		}
		Ok(())
	}
}

/// Mean of metrics weighted by the `u128` weights, in exact integer arithmetic on the
/// fixed-point representations so every node computes the same value.
fn weighted_mean(items: &[(u128, TrainingMetrics)]) -> TrainingMetrics {
	let total: u128 = items.iter().fold(0u128, |acc, (weight, _)| acc.saturating_add(*weight));
	if total == 0 {
		return TrainingMetrics::default();
	}
	let mean = |value: fn(&TrainingMetrics) -> u128| -> u128 {
		items
			.iter()
			.fold(0u128, |acc, (weight, metrics)| acc.saturating_add(weight.saturating_mul(value(metrics))))
			.checked_div(total)
			.unwrap_or_default()
	};
	let loss = mean(|m| u128::from(m.loss.into_inner()));
	let accuracy = mean(|m| u128::from(m.accuracy.deconstruct()));
	TrainingMetrics {
		loss: FixedU64::from_inner(u64::try_from(loss).unwrap_or(u64::MAX)),
		accuracy: Perbill::from_parts(u32::try_from(accuracy).unwrap_or(u32::MAX)),
	}
}
