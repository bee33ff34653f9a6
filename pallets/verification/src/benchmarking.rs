//! Benchmarks of the verification pallet's calls and hooks, over a unit proven through the
//! real tasks pallet and verifiers registered in the real staking pallet.

use super::*;
use alloc::vec::Vec;
use polkadot_sdk::{
	frame_benchmarking::v2::*,
	frame_support::{pallet_prelude::BoundedVec, traits::Get},
	frame_system::{self, RawOrigin},
	sp_runtime::Saturating,
};
use touchstone_primitives::{
	forced_commitment, forced_error,
	referee::{bookkeeping_spec, filler_proof},
	traits::{ProofLifecycle, ProofSetup, UnitProofs},
	Distance, JobId, Role, VerificationMode,
};
use polkadot_sdk::sp_runtime::FixedU64;
use codec::Encode;
use polkadot_sdk::sp_core::H256;

/// Steps of the benchmarks' unit.
const STEPS: u32 = 16;
/// Its initial state root.
const INITIAL: [u8; 32] = [2; 32];

/// A one-unit job whose unit a registered solver proved; returns the job. Moves to block 1
/// first: the benchmark runs its call at block 1 or later, and the round's periods are
/// counted from the block set up here.
fn proven<T: Config>() -> Result<JobId, BenchmarkError> {
	proven_in::<T>(VerificationMode::Exact)
}

/// As [`proven`], for a job verified in `verification` mode.
fn proven_in<T: Config>(verification: VerificationMode) -> Result<JobId, BenchmarkError> {
	let now = frame_system::Pallet::<T>::block_number();
	frame_system::Pallet::<T>::set_block_number(now.max(1u32.into()));
	let owner: T::AccountId = account("owner", 0, 0);
	let solver: T::AccountId = account("solver", 0, 0);
	T::BenchmarkHelper::register(&solver, Role::Solver);
	let (proof, opening, _) = filler_proof(0, STEPS, STEPS, INITIAL, [3; 32], 0).ok_or(BenchmarkError::Stop("no trace"))?;
	let mut spec = bookkeeping_spec(STEPS, 1, STEPS, INITIAL);
	spec.verification = verification;
	T::BenchmarkHelper::prove(&owner, spec, &solver, proof, opening).ok_or(BenchmarkError::Stop("the unit could not be proven"))
}

/// `count` registered, online verifiers.
fn verifiers<T: Config>(count: u32) -> Vec<T::AccountId> {
	(0..count)
		.map(|index| {
			let who: T::AccountId = account("verifier", index, 0);
			T::BenchmarkHelper::register(&who, Role::Verifier);
			who
		})
		.collect()
}

/// A proven unit whose round is drawn with `attesters` as its verifiers, in `state`, its
/// commit period ending now and its reveal period one block later; returns the job.
fn drawn_round<T: Config>(attesters: &[T::AccountId], state: AttestationState) -> Result<JobId, BenchmarkError> {
	let job = proven::<T>()?;
	let mut round = Rounds::<T>::get((job, 0)).ok_or(BenchmarkError::Stop("no round queued"))?;
	let now = frame_system::Pallet::<T>::block_number();
	let reveal_ends = now.saturating_add(1u32.into());
	round.attestations = BoundedVec::truncate_from(
		attesters.iter().map(|verifier| Attestation { verifier: verifier.clone(), state: state.clone() }).collect(),
	);
	round.drawn = Some(DrawnRound { seed: [7; 32], commit_ends: now, reveal_ends });
	Rounds::<T>::insert((job, 0), round);
	PendingDraws::<T>::kill();
	Closing::<T>::try_mutate(reveal_ends, |closing| closing.try_push((job, 0)))
		.map_err(|_| BenchmarkError::Stop("closing list full"))?;
	Ok(job)
}

#[benchmarks]
mod benchmarks {
	use super::*;

	#[benchmark]
	fn commit() -> Result<(), BenchmarkError> {
		let pool = verifiers::<T>(T::VerifiersPerUnit::get());
		let caller = pool.last().cloned().ok_or(BenchmarkError::Stop("no verifier"))?;
		let job = drawn_round::<T>(&pool, AttestationState::Drawn)?;
		// The commit period is still open one block earlier.
		let now = frame_system::Pallet::<T>::block_number();
		Rounds::<T>::mutate((job, 0), |round| {
			if let Some(drawn) = round.as_mut().and_then(|round| round.drawn.as_mut()) {
				drawn.commit_ends = now.saturating_add(1u32.into());
				drawn.reveal_ends = now.saturating_add(2u32.into());
			}
		});
		Closing::<T>::remove(now.saturating_add(1u32.into()));
		Closing::<T>::try_mutate(now.saturating_add(2u32.into()), |closing| closing.try_push((job, 0)))
			.map_err(|_| BenchmarkError::Stop("closing list full"))?;
		let commitment = Pallet::<T>::commitment(&Verdict::Match, &[1; 32], &caller);

		#[extrinsic_call]
		_(RawOrigin::Signed(caller.clone()), job, 0, commitment);

		let round = Rounds::<T>::get((job, 0)).ok_or(BenchmarkError::Stop("no round"))?;
		assert!(round.attestations.iter().any(|a| a.verifier == caller && a.state == AttestationState::Committed(commitment)));
		Ok(())
	}

	#[benchmark]
	fn reveal() -> Result<(), BenchmarkError> {
		let pool = verifiers::<T>(T::VerifiersPerUnit::get());
		let caller = pool.last().cloned().ok_or(BenchmarkError::Stop("no verifier"))?;
		let commitment = Pallet::<T>::commitment(&Verdict::Match, &[1; 32], &caller);
		let job = drawn_round::<T>(&pool, AttestationState::Committed(commitment))?;

		#[extrinsic_call]
		_(RawOrigin::Signed(caller.clone()), job, 0, Verdict::Match, [1; 32]);

		let round = Rounds::<T>::get((job, 0)).ok_or(BenchmarkError::Stop("no round"))?;
		assert!(round.attestations.iter().any(|a| a.verifier == caller && a.state == AttestationState::Revealed(Verdict::Match)));
		Ok(())
	}

	/// `on_initialize` with nothing due: the closing list and the queue read.
	#[benchmark]
	fn on_initialize_idle() {
		let now = frame_system::Pallet::<T>::block_number();
		#[block]
		{
			Pallet::<T>::conclude_due(now);
			Pallet::<T>::draw_due(now);
		}
	}

	/// One draw of a proven unit's verifiers from a pool twice the size of a round, with
	/// the stake-weighted picks in the staking pallet's sum tree.
	#[benchmark]
	fn draw_round() -> Result<(), BenchmarkError> {
		verifiers::<T>(T::VerifiersPerUnit::get().saturating_mul(2));
		let job = proven::<T>()?;
		let round = Rounds::<T>::get((job, 0)).ok_or(BenchmarkError::Stop("no round queued"))?;
		let now = frame_system::Pallet::<T>::block_number();

		#[block]
		{
			Pallet::<T>::draw(job, 0, round, [7; 32], now);
		}

		let drawn = Rounds::<T>::get((job, 0)).ok_or(BenchmarkError::Stop("no round"))?;
		assert_eq!(drawn.attestations.len() as u32, T::VerifiersPerUnit::get());
		Ok(())
	}

	/// Concluding a round of `v` verifiers none of which revealed: `v` slashes.
	#[benchmark]
	fn conclude_round(v: Linear<1, { T::VerifiersPerUnit::get() }>) -> Result<(), BenchmarkError> {
		let pool = verifiers::<T>(v);
		let job = drawn_round::<T>(&pool, AttestationState::Drawn)?;
		let reveal_ends = frame_system::Pallet::<T>::block_number().saturating_add(1u32.into());

		#[block]
		{
			Pallet::<T>::conclude((job, 0), reveal_ends);
		}

		let round = Rounds::<T>::get((job, 0)).ok_or(BenchmarkError::Stop("no round"))?;
		assert!(round.concluded && round.attestations.iter().all(|a| a.state == AttestationState::Missed));
		Ok(())
	}

	/// Handing over the `v` verifiers that attested a unit at its finalization.
	#[benchmark]
	fn on_finalized(v: Linear<0, { T::VerifiersPerUnit::get() }>) -> Result<(), BenchmarkError> {
		let pool = verifiers::<T>(v);
		let job = drawn_round::<T>(&pool, AttestationState::Revealed(Verdict::Match))?;
		Rounds::<T>::mutate((job, 0), |round| {
			if let Some(round) = round.as_mut() {
				round.concluded = true;
			}
		});
		let paid;

		#[block]
		{
			paid = <Pallet<T> as ProofLifecycle<T::AccountId>>::on_finalized(job, 0);
		}

		assert_eq!(paid.len() as u32, v);
		Ok(())
	}

	/// The solver of an accepted unit commits its secret: the commitment and the queue.
	#[benchmark]
	fn commit_secret() -> Result<(), BenchmarkError> {
		let owner: T::AccountId = account("owner", 0, 0);
		let solver: T::AccountId = account("solver", 0, 0);
		T::BenchmarkHelper::register(&solver, Role::Solver);
		// A deadline far enough for a secret (`SECRET_DEADLINE_MARGIN`).
		let mut spec = bookkeeping_spec(STEPS, 1, STEPS, INITIAL);
		spec.unit_timeout = 4 * SECRET_DEADLINE_MARGIN;
		let job = T::BenchmarkHelper::take(&owner, spec, &solver).ok_or(BenchmarkError::Stop("the unit could not be taken"))?;
		Secrets::<T>::remove((job, 0));
		PendingSecrets::<T>::kill();

		#[extrinsic_call]
		_(RawOrigin::Signed(solver.clone()), job, 0, H256([9; 32]));

		assert!(Secrets::<T>::get((job, 0)).is_some_and(|c| c.solver == solver));
		Ok(())
	}

	/// The solver reveals its secret. At its worst the unit is forced (when forced errors
	/// are on): the honest proof's final state is checked against its trace.
	#[benchmark]
	fn reveal_secret() -> Result<(), BenchmarkError> {
		let pool = verifiers::<T>(T::VerifiersPerUnit::get());
		let job = drawn_round::<T>(&pool, AttestationState::Drawn)?;
		let solver: T::AccountId = account("solver", 0, 0);
		let secret = [4u8; 32];
		let rate = T::ForcedErrorRate::get();
		// Randomness that makes the unit forced, if forced errors are on.
		let random = (0u32..100_000)
			.map(|i| polkadot_sdk::sp_io::hashing::blake2_256(&i.encode()))
			.find(|random| rate.is_zero() || forced_error(&secret, random, job, 0, rate))
			.ok_or(BenchmarkError::Stop("no forcing randomness"))?;
		let (honest, final_state, _) =
			filler_proof(0, STEPS, STEPS, INITIAL, [3; 32], 1).ok_or(BenchmarkError::Stop("no trace"))?;
		let standing = Rounds::<T>::get((job, 0)).ok_or(BenchmarkError::Stop("no round"))?.trace_root;
		let (hash, forced) = if rate.is_zero() {
			(forced_commitment(&secret, &standing, &honest.trace_root.0), None)
		} else {
			(forced_commitment(&secret, &honest.trace_root.0, &standing), Some(final_state))
		};
		Rounds::<T>::mutate((job, 0), |round| {
			if let Some(round) = round.as_mut() {
				round.secret = SolverSecret::Awaited { hash: H256(hash), random, rate };
			}
		});

		#[extrinsic_call]
		_(RawOrigin::Signed(solver), job, 0, secret, honest.trace_root, forced);

		let round = Rounds::<T>::get((job, 0)).ok_or(BenchmarkError::Stop("no round"))?;
		assert!(matches!(round.secret, SolverSecret::Revealed | SolverSecret::Forced { .. }));
		Ok(())
	}

	/// The tasks pallet's sweep lets go of a unit whose solver committed a secret and saw
	/// its designation: the unit's collateral is forfeited, and the secret dropped.
	#[benchmark]
	fn on_abandoned() -> Result<(), BenchmarkError> {
		let owner: T::AccountId = account("owner", 0, 0);
		let solver: T::AccountId = account("solver", 0, 0);
		T::BenchmarkHelper::register(&solver, Role::Solver);
		let job = T::BenchmarkHelper::take(&owner, bookkeeping_spec(STEPS, 1, STEPS, INITIAL), &solver)
			.ok_or(BenchmarkError::Stop("the unit could not be taken"))?;
		let committed_at = frame_system::Pallet::<T>::block_number();
		Secrets::<T>::insert(
			(job, 0),
			SecretCommitment { solver, hash: H256([9; 32]), committed_at, rate: T::ForcedErrorRate::get(), random: Some([5; 32]) },
		);

		#[block]
		{
			<Pallet<T> as ProofLifecycle<T::AccountId>>::on_abandoned(job, 0);
		}

		assert!(Secrets::<T>::get((job, 0)).is_none());
		Ok(())
	}

	/// The hook records the randomness of one queued secret.
	#[benchmark]
	fn record_randomness() -> Result<(), BenchmarkError> {
		frame_system::Pallet::<T>::set_block_number((MAX_RANDOMNESS_BLOCKS + 1).into());
		let solver: T::AccountId = account("solver", 0, 0);
		Secrets::<T>::insert(
			(0, 0),
			SecretCommitment {
				solver,
				hash: H256([9; 32]),
				committed_at: 0u32.into(),
				rate: T::ForcedErrorRate::get(),
				random: None,
			},
		);
		PendingSecrets::<T>::put(BoundedVec::truncate_from(alloc::vec![(0, 0)]));
		// A full beacon of blocks after the commitment: the record path, not the wait.
		let blocks = (1..=MAX_RANDOMNESS_BLOCKS)
			.map(|n| BeaconEntry { known_since: n.into(), value: [n as u8; 32], author: Some([n as u8; 32]) })
			.collect();
		Beacon::<T>::put(BoundedVec::truncate_from(blocks));
		let now = frame_system::Pallet::<T>::block_number();
		let recorded;

		#[block]
		{
			recorded = Pallet::<T>::record_due(now);
		}

		assert_eq!(recorded.all, 1);
		assert!(Secrets::<T>::get((0, 0)).is_some_and(|commitment| commitment.random.is_some()));
		Ok(())
	}

	/// A bonded solver that solves none of the job's units (the costlier of the two who
	/// may) challenges a tolerance-mode job's profiled thresholds. Reading the job's units
	/// is charged on top, one read a unit (`challenge_thresholds`' weight).
	#[benchmark]
	fn challenge_thresholds() -> Result<(), BenchmarkError> {
		let ceiling = FixedU64::from_u32(1);
		let job = proven_in::<T>(VerificationMode::Tolerance {
			max_l2: ceiling,
			max_linf: ceiling,
			max_cosine_distance: ceiling,
		})?;
		let solver: T::AccountId = account("solver", 1, 0);
		T::BenchmarkHelper::register(&solver, Role::Solver);
		T::Units::set_thresholds(job, Some(Distance::default())).map_err(|_| BenchmarkError::Stop("no job"))?;

		#[extrinsic_call]
		_(RawOrigin::Signed(solver), job);

		assert!(T::Units::tolerance_job(job).is_some_and(|info| info.profile.thresholds.is_none()));
		Ok(())
	}

	impl_benchmark_test_suite!(Pallet, crate::mock::new_test_ext(&[]), crate::mock::Test);
}
