//! Verification rounds played in the mock runtime with the real staking, tasks and
//! disputes pallets: the draw, commit-reveal, missed reveals, the mismatch that opens a
//! dispute, and payment at finalization. The proofs are bookkeeping traces (well formed
//! at their ends); the disputes pallet's tests play disputes over real kernel traces.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use crate::{mock::*, AttestationState, Error, Event, PendingDraws, PendingSecrets, Rounds, Verdict};
use polkadot_sdk::frame_support::{assert_noop, assert_ok, traits::fungible::Inspect};
use touchstone_primitives::{
	referee::{bookkeeping_spec, filler_proof, BoundaryOpening},
	JobSpec, LearningProof, Role, UnitScope, UnitState,
};

/// A one-unit job of 10 steps, checkpointed every 2.
fn spec() -> JobSpec<u64> {
	let mut spec = bookkeeping_spec(10, 1, 2, [6; 32]);
	spec.price_per_unit = PRICE;
	spec.budget = PRICE;
	spec
}

/// Submits the job as `OWNER`, and has `SOLVER` claim and prove its unit; returns the
/// job id and the proof's trace root.
fn prove() -> (u64, [u8; 32]) {
	prove_as(SOLVER)
}

/// As [`prove`], with `solver` solving.
fn prove_as(solver: u64) -> (u64, [u8; 32]) {
	let job = claimed_by(solver);
	let (proof, opening) = proof_for(job);
	let root = proof.trace_root.0;
	assert_ok!(Tasks::submit_proof(RuntimeOrigin::signed(solver), job, 0, proof, opening, None));
	(job, root)
}

/// Submits the job as `OWNER` and has `solver` claim its unit; returns the job id.
fn claimed_by(solver: u64) -> u64 {
	let job = pallet_touchstone_tasks::NextJobId::<Test>::get();
	assert_ok!(Tasks::submit_job(RuntimeOrigin::signed(OWNER), spec()));
	assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(solver), job, 0));
	job
}

/// A bookkeeping proof of `job`'s unit, anchored at its start, and its final-state opening.
fn proof_for(job: u64) -> (LearningProof, BoundaryOpening) {
	let unit = pallet_touchstone_tasks::Units::<Test>::get(job, 0).unwrap();
	let UnitScope::Steps { first_step, steps } = unit.scope else { panic!("a step range") };
	let start = unit.start_state_root.unwrap();
	let (proof, opening, _) = filler_proof(first_step, steps, spec().hyper.checkpoint_interval, start.0, [51; 32], 9).unwrap();
	(proof, opening)
}

/// The verifiers drawn for `job`'s unit.
fn drawn(job: u64) -> Vec<u64> {
	Rounds::<Test>::get((job, 0)).unwrap().attestations.iter().map(|a| a.verifier).collect()
}

fn salt(who: u64) -> [u8; 32] {
	[who as u8; 32]
}

fn commit(who: u64, job: u64, verdict: &Verdict) -> polkadot_sdk::sp_runtime::DispatchResult {
	let commitment = Verification::commitment(verdict, &salt(who), &who);
	Verification::commit(RuntimeOrigin::signed(who), job, 0, commitment)
}

fn reveal(who: u64, job: u64, verdict: Verdict) -> polkadot_sdk::sp_runtime::DispatchResultWithInfo<polkadot_sdk::frame_support::dispatch::PostDispatchInfo> {
	Verification::reveal(RuntimeOrigin::signed(who), job, 0, verdict, salt(who))
}

fn unit_state(job: u64) -> UnitState {
	pallet_touchstone_tasks::Units::<Test>::get(job, 0).unwrap().state
}

#[test]
fn verifiers_are_drawn_only_from_randomness_known_after_the_proof() {
	// The owner is a bonded verifier too: it must never verify its own job.
	build_and_execute(&[OWNER, 6, 7, 8, 9], || {
		let (job, root) = prove();
		assert_eq!(PendingDraws::<Test>::get().to_vec(), vec![(job, 0)]);
		// Block 2's randomness is the parent's (block 1's), the proof's own block: too early.
		run_to_block(2);
		assert!(Rounds::<Test>::get((job, 0)).unwrap().drawn.is_none());
		run_to_block(3);
		let round = Rounds::<Test>::get((job, 0)).unwrap();
		let drawn_round = round.drawn.clone().unwrap();
		assert_eq!(round.trace_root, root);
		let verifiers = drawn(job);
		assert_eq!(verifiers.len() as u32, VERIFIERS_PER_UNIT);
		assert!(!verifiers.contains(&OWNER) && !verifiers.contains(&SOLVER));
		assert!(PendingDraws::<Test>::get().is_empty());
		assert_eq!(
			verification_events(),
			vec![Event::VerifiersDrawn {
				job,
				unit: 0,
				verifiers,
				seed: drawn_round.seed,
				commit_ends: 3 + COMMIT_PERIOD,
				reveal_ends: 3 + COMMIT_PERIOD + REVEAL_PERIOD,
			}]
		);
		// Unconcluded, the round holds finalization back past the challenge window.
		run_to_block(1 + CHALLENGE_WINDOW);
		assert_noop!(
			Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), job, 0),
			pallet_touchstone_tasks::Error::<Test>::FinalizationBlocked
		);
	});
}

/// A round's commit period grows with the work its verifiers are asked: each re-executes
/// its two sampled segments, a checkpoint interval of steps each, at
/// `ReferenceWorkPerBlock` multiply-adds a block, beyond the `CommitPeriod` floor, and has
/// the time of one segment more, for a restart in the middle of the work (a verifier keeps
/// the segments it has checked). A verifier drawn on a unit whose segments take minutes is
/// not late by construction.
#[test]
fn a_round_of_long_segments_gives_its_verifiers_the_time_their_samples_take() {
	build_and_execute(&[6, 7, 8, 9], || {
		let mut wide = spec();
		wide.model = touchstone_primitives::ModelArch::Mlp {
			inputs: 4,
			hidden: polkadot_sdk::sp_runtime::BoundedVec::truncate_from(vec![4096, 4096]),
			classes: 3,
			activation: touchstone_primitives::Activation::Tanh,
		};
		// The unit timeout must hold a segment (403 blocks) beyond the minimum.
		wide.unit_timeout = 500;
		let job = pallet_touchstone_tasks::NextJobId::<Test>::get();
		assert_ok!(Tasks::submit_job(RuntimeOrigin::signed(OWNER), wide.clone()));
		assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(SOLVER), job, 0));
		let (proof, opening) = proof_for(job);
		assert_ok!(Tasks::submit_proof(RuntimeOrigin::signed(SOLVER), job, 0, proof, opening, None));
		run_to_block(3);
		let drawn_round = Rounds::<Test>::get((job, 0)).unwrap().drawn.unwrap();
		// 4 × (4·4096 + 4096·4096 + 4096·3) multiply-adds a sample, three products, batch 4:
		// a segment of two steps at 10⁶ a block takes 403 blocks; two samples and the
		// restart's segment, 1,209.
		let step = 3 * 4 * (4 * 4096 + 4096 * 4096 + 4096 * 3);
		assert_eq!(touchstone_primitives::step_multiply_adds(&wide.model, &wide.hyper), step);
		assert_eq!(drawn_round.commit_ends, 3 + COMMIT_PERIOD + 3 * (2 * step / 1_000_000));
		assert_eq!(drawn_round.commit_ends, 3 + COMMIT_PERIOD + 1_209);
		assert_eq!(drawn_round.reveal_ends, drawn_round.commit_ends + REVEAL_PERIOD);
	});
}

/// A seed mixes the randomness of `RandomnessBlocks` blocks, every one known only after
/// the proof's block, and nothing the solver chose: only an author of all of them could
/// have known it when the proof was committed.
#[test]
fn a_seed_mixes_several_blocks_randomness_all_known_after_the_proof() {
	use codec::Encode;
	use polkadot_sdk::sp_io::hashing::blake2_256;
	build_and_execute(&VERIFIERS, || {
		RandomnessBlocks::set(3);
		let (job, _) = prove();
		// Blocks 2 to 4 note the randomness known since blocks 1 to 3: the proof's own
		// block is among them, so the draw waits for block 5's.
		run_to_block(4);
		assert!(Rounds::<Test>::get((job, 0)).unwrap().drawn.is_none());
		run_to_block(5);
		let seed = Rounds::<Test>::get((job, 0)).unwrap().drawn.unwrap().seed;
		// The mock's randomness of block `n`, as BABE's VRF output of its author.
		let known_since = |n: u64| blake2_256(&(&b"touchstone/beacon"[..], n).encode());
		let subject = (b"touchstone/verification", job, 0u32, 1u64, false).encode();
		let values = vec![known_since(2), known_since(3), known_since(4)];
		assert_eq!(seed, blake2_256(&(&subject[..], values).encode()));
		// The beacon keeps older blocks' randomness too; the seed mixes only the newer.
		assert_eq!(crate::Beacon::<Test>::get().iter().map(|entry| entry.known_since).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
	});
}

/// Attack: a validator that authors every block after a solver's commitment knows each
/// block's randomness (its own VRF outputs) in advance, so it knows the seed, and a solver
/// working with it can pick its secret to force its unit, or learn its verifiers before
/// it commits. A seed now needs blocks by `RandomnessAuthors` distinct authors (at most
/// as many as there are): the draw waits for another author's block and mixes it in.
#[test]
fn attack_one_author_of_every_block_after_a_commitment_cannot_know_its_seed() {
	use codec::Encode;
	use polkadot_sdk::sp_io::hashing::blake2_256;
	build_and_execute(&VERIFIERS, || {
		RandomnessBlocks::set(3);
		AuthorityCount::set(4);
		// Author 7 makes blocks 2 to 5, the four after the proof; author 1 makes block 6.
		AuthorOfBlock::set(|n| if (2..=5).contains(&n) { 7 } else { 1 });
		let (job, _) = prove();
		// What author 7 knew before the proof: the randomness of its own blocks 2 to 4.
		let known_since = |n: u64| blake2_256(&(&b"touchstone/beacon"[..], n).encode());
		let subject = (b"touchstone/verification", job, 0u32, 1u64, false).encode();
		let foreseen = blake2_256(&(&subject[..], vec![known_since(2), known_since(3), known_since(4)]).encode());
		// Block `n` notes its parent's randomness: by block 6, that of blocks 1 to 5.
		run_to_block(6);
		let round = Rounds::<Test>::get((job, 0)).unwrap();
		assert!(round.drawn.as_ref().is_none_or(|drawn| drawn.seed != foreseen), "the colluding author knew the seed");
		// Block 6's randomness is the first by another author: the seed waits for it.
		assert!(round.drawn.is_none());
		run_to_block(7);
		let values = (2..=6).map(known_since).collect::<Vec<_>>();
		assert_eq!(
			Rounds::<Test>::get((job, 0)).unwrap().drawn.unwrap().seed,
			blake2_256(&(&subject[..], values).encode())
		);
	});
}

/// How long seeds wait for their randomness on a network of four authors of equal stake,
/// each block's author drawn at random, over 100,000 commitments: every seed mixes blocks
/// by two authors at least, and waits past `RandomnessBlocks` only when one author made
/// all of them (one time in sixteen). Prints the distribution of the wait.
#[test]
fn seeds_wait_for_a_second_author_only_when_one_made_every_block() {
	use polkadot_sdk::sp_io::hashing::blake2_256;
	use crate::{BeaconEntry, MAX_RANDOMNESS_BLOCKS};
	use codec::Encode;
	build_and_execute(&[], || {
		RandomnessBlocks::set(3);
		AuthorityCount::set(4);
		let trials = 100_000u32;
		let mut waits = [0u32; MAX_RANDOMNESS_BLOCKS as usize + 1];
		for trial in 0..trials {
			let mut beacon = Vec::new();
			let wait = (1..=MAX_RANDOMNESS_BLOCKS as u64)
				.find_map(|block| {
					let author = blake2_256(&(trial, block).encode())[0] % 4;
					beacon.push(BeaconEntry { known_since: block, value: [0; 32], author: Some([author; 32]) });
					crate::Pallet::<Test>::seed_after(&beacon, 0, b"subject").map(|_| {
						let mut authors: Vec<_> = beacon.iter().map(|entry| entry.author).collect();
						authors.sort();
						authors.dedup();
						assert!(authors.len() >= 2, "trial {trial}: a seed from one author's blocks");
						block
					})
				})
				.unwrap();
			waits[wait as usize] += 1;
		}
		let mean = waits.iter().enumerate().map(|(blocks, count)| blocks as f64 * f64::from(*count)).sum::<f64>() / f64::from(trials);
		println!("blocks of randomness a seed waits for, 4 authors: mean {mean:.4}; {:?}", &waits[3..8]);
		// One author makes three given blocks with chance 1/16, and each further one 1/4.
		assert!((mean - (3.0 + 1.0 / 12.0)).abs() < 0.01, "mean wait {mean}");
	});
}

/// A solver must commit its secret with `SECRET_DEADLINE_MARGIN` blocks left before its
/// deadline: the randomness may take that long, and after it a designated unit let go
/// forfeits its collateral. Closer to the deadline the commitment is refused, and the
/// solver may still let the unit go for its reputation only.
#[test]
fn a_secret_too_close_to_the_deadline_is_refused() {
	build_and_execute(&VERIFIERS, || {
		ForcedErrorRate::set(polkadot_sdk::sp_runtime::Perbill::one());
		let job = claimed_by(SOLVER);
		let deadline = pallet_touchstone_tasks::Units::<Test>::get(job, 0).unwrap().deadline.unwrap();
		run_to_block(deadline - u64::from(crate::SECRET_DEADLINE_MARGIN) + 1);
		assert_noop!(
			Verification::commit_secret(RuntimeOrigin::signed(SOLVER), job, 0, commitment(job, &[1; 32])),
			Error::<Test>::DeadlineTooClose
		);
	});
}

#[test]
fn honest_verifiers_are_paid_and_a_silent_one_is_slashed() {
	build_and_execute(&VERIFIERS, || {
		let (job, _) = prove();
		run_to_block(3);
		let verifiers = drawn(job);
		let (first, second, silent) = (verifiers[0], verifiers[1], verifiers[2]);
		// Drawn, a verifier keeps its bond until the unit is final: its `Match` can still
		// be proven false until then.
		assert!(verifiers.iter().all(|who| Verification::rounds_of(who) == vec![(job, 0)]));
		assert_noop!(
			Staking::unbond(RuntimeOrigin::signed(first), Role::Verifier, VERIFIER_BOND),
			pallet_touchstone_staking::Error::<Test>::HasActiveWork
		);
		assert_ok!(commit(first, job, &Verdict::Match));
		assert_ok!(commit(second, job, &Verdict::Match));
		run_to_block(3 + COMMIT_PERIOD);
		assert_ok!(reveal(first, job, Verdict::Match));
		assert_ok!(reveal(second, job, Verdict::Match));
		verification_events();
		let (jackpot_before, silent_bond) =
			(Balances::balance(&JACKPOT), pallet_touchstone_staking::Pallet::<Test>::bonded(&silent, Role::Verifier));
		run_to_block(3 + COMMIT_PERIOD + REVEAL_PERIOD);
		assert_eq!(
			verification_events(),
			vec![
				Event::RevealMissed { job, unit: 0, verifier: silent, slashed: MISSED_REVEAL_SLASH },
				Event::RoundConcluded { job, unit: 0, matched: 2, mismatched: 0, missed: 1 },
			]
		);
		assert_eq!(
			pallet_touchstone_staking::Pallet::<Test>::bonded(&silent, Role::Verifier),
			silent_bond - MISSED_REVEAL_SLASH
		);
		assert_eq!(Balances::balance(&JACKPOT), jackpot_before + MISSED_REVEAL_SLASH);

		// Finalized: a tenth of the price to the jackpot, a tenth split by the two that
		// attested, the rest to the solver.
		let before: Vec<u64> = [first, second, silent, SOLVER].iter().map(|who| Balances::balance(who)).collect();
		assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), job, 0));
		assert_eq!(Balances::balance(&first), before[0] + 5);
		assert_eq!(Balances::balance(&second), before[1] + 5);
		assert_eq!(Balances::balance(&silent), before[2]);
		assert_eq!(Balances::balance(&SOLVER), before[3] + 80);
		assert_eq!(unit_state(job), UnitState::Finalized);
		assert!(Rounds::<Test>::get((job, 0)).is_none());
		assert_eq!(crate::VerifierRounds::<Test>::iter().count(), 0);
		assert_ok!(Staking::unbond(RuntimeOrigin::signed(first), Role::Verifier, VERIFIER_BOND));
	});
}

#[test]
fn a_mismatch_opens_a_dispute_with_the_verifier_as_challenger() {
	build_and_execute(&VERIFIERS, || {
		let (job, root) = prove();
		run_to_block(3);
		let verifiers = drawn(job);
		let (reporter, confused, attester) = (verifiers[0], verifiers[1], verifiers[2]);
		let mismatch = Verdict::Mismatch { trace_root: [77; 32] };
		// A "mismatch" naming the proof's own trace root is no disagreement.
		let same = Verdict::Mismatch { trace_root: root };
		assert_ok!(commit(reporter, job, &mismatch));
		assert_ok!(commit(confused, job, &same));
		assert_ok!(commit(attester, job, &Verdict::Match));
		run_to_block(3 + COMMIT_PERIOD);
		assert_ok!(reveal(reporter, job, mismatch.clone()));
		// The reveal lands all the same (no verifier is slashed for a reveal it made), but
		// opens no dispute, and says why.
		verification_events();
		assert_ok!(reveal(confused, job, same));
		let no_dispute: polkadot_sdk::sp_runtime::DispatchError =
			pallet_touchstone_disputes::Error::<Test>::NoDisagreement.into();
		assert!(verification_events()
			.contains(&Event::MismatchNotDisputed { job, unit: 0, verifier: confused, error: no_dispute }));
		assert_ok!(reveal(attester, job, Verdict::Match));
		assert_eq!(unit_state(job), UnitState::Challenged);
		let disputes = pallet_touchstone_disputes::UnitDisputes::<Test>::get((job, 0));
		assert_eq!(disputes.len(), 1);
		let id = disputes[0];
		let dispute = pallet_touchstone_disputes::Disputes::<Test>::get(id).unwrap();
		assert_eq!((dispute.challenger, dispute.defender, dispute.challenger_trace_root), (reporter, SOLVER, [77; 32]));

		// The round concludes, but the dispute still holds the unit.
		run_to_block(3 + COMMIT_PERIOD + REVEAL_PERIOD);
		let events = verification_events();
		assert!(events.contains(&Event::RoundConcluded { job, unit: 0, matched: 1, mismatched: 2, missed: 0 }));
		run_to_block(dispute.deadline + 1);
		assert_noop!(
			Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), job, 0),
			pallet_touchstone_tasks::Error::<Test>::UnitNotProven
		);
		// Neither side plays: the challenger brought the case and loses its bond. The
		// proof stands with its window open again, and only the attester is paid.
		assert_ok!(Disputes::time_out(RuntimeOrigin::signed(OWNER), id));
		assert_eq!(unit_state(job), UnitState::Proven);
		run_to_block(dispute.deadline + 1 + CHALLENGE_WINDOW);
		let before: Vec<u64> = [reporter, attester].iter().map(|who| Balances::balance(who)).collect();
		assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), job, 0));
		assert_eq!(Balances::balance(&reporter), before[0]);
		assert_eq!(Balances::balance(&attester), before[1] + 10);
	});
}

#[test]
fn a_dropped_proof_voids_its_round_and_nobody_is_slashed() {
	use touchstone_primitives::traits::ProofLifecycle;
	build_and_execute(&VERIFIERS, || {
		let (job, _) = prove();
		run_to_block(3);
		let verifier = drawn(job)[0];
		assert_ok!(commit(verifier, job, &Verdict::Match));
		verification_events();
		// The tasks pallet drops the proof when a dispute overturns it (or rolls it back).
		<Verification as ProofLifecycle<u64>>::on_proof_dropped(job, 0);
		assert_eq!(verification_events(), vec![Event::RoundVoided { job, unit: 0 }]);
		assert_noop!(reveal(verifier, job, Verdict::Match), Error::<Test>::NoRound);
		let jackpot = Balances::balance(&JACKPOT);
		run_to_block(3 + COMMIT_PERIOD + REVEAL_PERIOD + 1);
		assert!(verification_events().is_empty(), "nothing concludes");
		assert_eq!(Balances::balance(&JACKPOT), jackpot, "nobody slashed");
	});
}

#[test]
fn attestations_follow_the_rules_or_change_nothing() {
	build_and_execute(&VERIFIERS, || {
		let (job, _) = prove();
		assert_noop!(commit(6, job, &Verdict::Match), Error::<Test>::NoRound);
		run_to_block(3);
		let verifiers = drawn(job);
		let outsider = *VERIFIERS.iter().find(|who| !verifiers.contains(who)).unwrap();
		let verifier = verifiers[0];
		assert_noop!(commit(outsider, job, &Verdict::Match), Error::<Test>::NotDrawn);
		assert_noop!(reveal(verifier, job, Verdict::Match), Error::<Test>::RevealNotOpen);
		assert_ok!(commit(verifier, job, &Verdict::Match));
		assert_noop!(commit(verifier, job, &Verdict::Match), Error::<Test>::AlreadyCommitted);
		run_to_block(3 + COMMIT_PERIOD);
		assert_noop!(commit(verifiers[1], job, &Verdict::Match), Error::<Test>::CommitPeriodOver);
		assert_noop!(reveal(verifiers[1], job, Verdict::Match), Error::<Test>::NothingToReveal);
		// Another verdict than the one committed does not open.
		assert_noop!(
			reveal(verifier, job, Verdict::Mismatch { trace_root: [3; 32] }),
			Error::<Test>::CommitmentMismatch
		);
		assert_ok!(reveal(verifier, job, Verdict::Match));
		assert_noop!(reveal(verifier, job, Verdict::Match), Error::<Test>::NothingToReveal);
		run_to_block(3 + COMMIT_PERIOD + REVEAL_PERIOD);
		assert_noop!(reveal(verifiers[1], job, Verdict::Match), Error::<Test>::RevealPeriodOver);
		let round = Rounds::<Test>::get((job, 0)).unwrap();
		assert!(round.concluded);
		assert_eq!(round.attestations[0].state, AttestationState::Revealed(Verdict::Match));
		assert_eq!(round.attestations[1].state, AttestationState::Missed);
	});
}

#[test]
fn with_no_verifier_bonded_a_proof_stands_on_its_challenge_window() {
	build_and_execute(&[], || {
		let (job, _) = prove();
		run_to_block(3);
		assert_eq!(verification_events(), vec![Event::NoVerifiers { job, unit: 0 }]);
		assert!(Rounds::<Test>::get((job, 0)).is_none());
		run_to_block(1 + CHALLENGE_WINDOW);
		assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), job, 0));
	});
}

#[test]
fn a_round_the_randomness_never_serves_expires_and_frees_the_unit() {
	build_and_execute(&VERIFIERS, || {
		RandomnessStalled::set(true);
		let (job, _) = prove();
		// Before the deadline the round waits, and holds finalization back.
		run_to_block(1 + DRAW_TIMEOUT);
		assert!(Rounds::<Test>::get((job, 0)).is_some());
		assert!(!<Verification as touchstone_primitives::traits::ProofLifecycle<u64>>::can_finalize(job, 0));
		run_to_block(2 + DRAW_TIMEOUT);
		assert_eq!(verification_events(), vec![Event::DrawExpired { job, unit: 0 }]);
		assert!(Rounds::<Test>::get((job, 0)).is_none() && PendingDraws::<Test>::get().is_empty());
		RandomnessStalled::set(false);
		run_to_block(1 + CHALLENGE_WINDOW);
		assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), job, 0));
	});
}

#[test]
fn the_draw_queue_takes_every_open_unit_once_and_draws_a_few_a_block() {
	build_and_execute(&VERIFIERS, || {
		// Five proofs in one block; a solver holds two units at most, so three share them.
		for solver in [3, 4] {
			register(solver, &[(Role::Solver, 1_000)]);
		}
		let jobs: Vec<u64> = [SOLVER, SOLVER, 3, 3, 4].into_iter().map(|solver| prove_as(solver).0).collect();
		assert_eq!(PendingDraws::<Test>::get().len(), 5);
		// A unit already queued is not queued again.
		assert_ok!(Verification::enqueue::<PendingDraws<Test>>((jobs[0], 0)));
		assert_eq!(PendingDraws::<Test>::get().len(), 5);
		// Two draws a block (MaxDrawsPerBlock = 2), oldest first.
		run_to_block(3);
		assert_eq!(PendingDraws::<Test>::get().into_inner(), jobs[2..].iter().map(|job| (*job, 0)).collect::<Vec<_>>());
	});
}

#[test]
fn sampled_segments_are_distinct_in_range_and_fixed_by_seed_and_verifier() {
	let seed = [5u8; 32];
	for segments in [1u32, 2, 3, 5, 50] {
		let picked = Verification::sampled_segments(&seed, &6, segments);
		assert_eq!(picked.len() as u32, segments.min(2));
		assert!(picked.iter().all(|segment| *segment < segments));
		let mut distinct = picked.clone();
		distinct.sort();
		distinct.dedup();
		assert_eq!(distinct.len(), picked.len());
		assert_eq!(Verification::sampled_segments(&seed, &6, segments), picked);
	}
	// Other verifiers sample other segments (for these fixed seeds).
	assert_ne!(Verification::sampled_segments(&seed, &6, 50), Verification::sampled_segments(&seed, &7, 50));
}

/// The honest proof of `job`'s unit and the one wrong on purpose that its solver commits
/// beside it, each with its final-state opening: bookkeeping traces of the same steps,
/// start and end over different leaves.
fn honest_and_forced(job: u64) -> ((LearningProof, BoundaryOpening), (LearningProof, BoundaryOpening)) {
	let start = pallet_touchstone_tasks::Units::<Test>::get(job, 0).unwrap().start_state_root.unwrap().0;
	let (honest, honest_opening, _) = filler_proof(0, 10, spec().hyper.checkpoint_interval, start, [51; 32], 10).unwrap();
	((honest, honest_opening), proof_for(job))
}

/// What the solver of `job`'s unit commits for `secret` over its honest and forced proofs.
fn commitment(job: u64, secret: &[u8; 32]) -> polkadot_sdk::sp_core::H256 {
	let ((honest, _), (forced, _)) = honest_and_forced(job);
	polkadot_sdk::sp_core::H256(touchstone_primitives::forced_commitment(secret, &honest.trace_root.0, &forced.trace_root.0))
}

/// The step a forced proof of a unit of [`spec`] gets wrong under `secret`.
fn forced_step(secret: &[u8; 32]) -> u32 {
	touchstone_primitives::forced_step(secret, &touchstone_primitives::Segments::new(0, 10, 2)).unwrap()
}

/// Has `SOLVER` claim a new job's unit and commit `secret`; moves on until the chain has
/// recorded the randomness after it. Returns the job.
fn take_with_secret(secret: &[u8; 32]) -> u64 {
	let job = claimed_by(SOLVER);
	assert_ok!(Verification::commit_secret(RuntimeOrigin::signed(SOLVER), job, 0, commitment(job, secret)));
	run_to_block(System::block_number() + 2);
	assert!(crate::Secrets::<Test>::get((job, 0)).unwrap().random.is_some());
	job
}

/// Has the verifiers drawn for `job`'s unit's standing proof, whose round is about to be
/// drawn, attest `Match`, and finalizes the unit once its window has passed.
fn match_and_finalize(job: u64) {
	let now = System::block_number();
	run_to_block(now + 2);
	for verifier in drawn(job) {
		assert_ok!(commit(verifier, job, &Verdict::Match));
	}
	run_to_block(now + 2 + COMMIT_PERIOD);
	for verifier in drawn(job) {
		assert_ok!(reveal(verifier, job, Verdict::Match));
	}
	run_to_block(now + CHALLENGE_WINDOW + COMMIT_PERIOD + REVEAL_PERIOD);
	assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), job, 0));
}

#[test]
fn the_forced_step_is_the_secrets_and_carries_no_hash_the_proof_repeats() {
	use touchstone_primitives::Segments;
	// Ten steps checkpointed every two: the first steps of the first four segments; the
	// fifth's (step 8) is the step before the last, whose hash the final opening names.
	let segments = Segments::new(0, 10, 2);
	let steps: std::collections::BTreeSet<u32> =
		(0u8..=255).map(|i| touchstone_primitives::forced_step(&[i; 32], &segments).unwrap()).collect();
	assert_eq!(steps.into_iter().collect::<Vec<_>>(), vec![0, 2, 4, 6]);
	// Segments of one step repeat their hash as the next checkpoint: nothing to force.
	assert_eq!(touchstone_primitives::forced_step(&[1; 32], &Segments::new(0, 10, 1)), None);
	assert_eq!(touchstone_primitives::forced_step(&[1; 32], &Segments::new(0, 2, 2)), None);
}

#[test]
fn a_forced_error_is_caught_and_paid_from_the_jackpot_and_the_honest_proof_replaces_it() {
	use crate::SolverSecret;
	use polkadot_sdk::frame_support::traits::{
		fungible::{InspectHold, Mutate},
		tokens::Preservation,
	};
	build_and_execute(&VERIFIERS, || {
		// Every unit is forced: what the unit pays the jackpot (a tenth of its price) over a
		// rate of one is paid to its catchers, a third of the jackpot at most.
		ForcedErrorRate::set(polkadot_sdk::sp_runtime::Perbill::one());
		assert_ok!(Balances::transfer(&5, &JACKPOT, 300, Preservation::Expendable));
		let secret = [42u8; 32];
		let job = claimed_by(SOLVER);
		let ((honest, honest_opening), (forced, opening)) = honest_and_forced(job);
		// No proof before the secret and its randomness.
		assert_noop!(
			Tasks::submit_proof(RuntimeOrigin::signed(SOLVER), job, 0, forced, opening.clone(), None),
			Error::<Test>::SecretNotCommitted
		);
		assert_noop!(
			Verification::commit_secret(RuntimeOrigin::signed(OWNER), job, 0, commitment(job, &secret)),
			Error::<Test>::NotUnitSolver
		);
		// The solver has trained the unit: it binds its secret to both proofs before it
		// can know which one it must commit.
		assert_ok!(Verification::commit_secret(RuntimeOrigin::signed(SOLVER), job, 0, commitment(job, &secret)));
		assert_noop!(
			Verification::commit_secret(RuntimeOrigin::signed(SOLVER), job, 0, commitment(job, &[1; 32])),
			Error::<Test>::SecretAlreadyCommitted
		);
		assert_noop!(
			Tasks::submit_proof(RuntimeOrigin::signed(SOLVER), job, 0, forced, opening.clone(), None),
			Error::<Test>::SecretRandomnessPending
		);
		run_to_block(3);
		// The solver knows it is forced; it commits the proof wrong on purpose.
		assert_ok!(Tasks::submit_proof(RuntimeOrigin::signed(SOLVER), job, 0, forced, opening, None));
		// Until the solver reveals, no dispute may rule against it: the proof may be forced.
		let holds = || <Verification as touchstone_primitives::traits::AttestationJudge<u64>>::holds_rulings(job, 0);
		assert!(holds());
		run_to_block(5);
		// The secret fixed the error's step before anyone's samples were drawn; a verifier
		// that re-executes its segment catches it.
		let step = forced_step(&secret);
		let segments = touchstone_primitives::Segments::new(0, 10, 2);
		let seed = Rounds::<Test>::get((job, 0)).unwrap().drawn.unwrap().seed;
		let samples_the_step =
			|v: &u64| Verification::sampled_segments(&seed, v, segments.count()).contains(&segments.of_step(step).unwrap());
		let verifiers = drawn(job);
		let catcher = *verifiers.iter().find(|v| samples_the_step(v)).expect("a drawn verifier samples the forced step");
		let others: Vec<u64> = verifiers.iter().copied().filter(|v| *v != catcher).collect();
		let (fooled, silent) = (others[0], others[1]);
		let mismatch = Verdict::Mismatch { trace_root: honest.trace_root.0 };
		assert_ok!(commit(catcher, job, &mismatch));
		assert_ok!(commit(fooled, job, &Verdict::Match));
		run_to_block(5 + COMMIT_PERIOD);
		// Revealed before the solver's secret, the mismatch opens a dispute.
		assert_ok!(reveal(catcher, job, mismatch));
		assert_eq!(unit_state(job), UnitState::Challenged);
		let held = Balances::balance_on_hold(
			&pallet_touchstone_disputes::HoldReason::ChallengeBond.into(),
			&catcher,
		);
		assert!(held > 0);
		let reveal_secret = |secret, alternative, opening| {
			Verification::reveal_secret(RuntimeOrigin::signed(SOLVER), job, 0, secret, alternative, opening)
		};
		assert_noop!(reveal_secret(secret, honest.trace_root, None), Error::<Test>::HonestProofMissing);
		assert_noop!(reveal_secret([0; 32], honest.trace_root, Some(honest_opening.clone())), Error::<Test>::SecretMismatch);
		// The other root must be the one committed beside the proof.
		assert_noop!(
			reveal_secret(secret, [9; 32].into(), Some(honest_opening.clone())),
			Error::<Test>::SecretMismatch
		);
		let (_, wrong_end_opening, _) = filler_proof(0, 10, spec().hyper.checkpoint_interval, pallet_touchstone_tasks::Units::<Test>::get(job, 0).unwrap().start_state_root.unwrap().0, [52; 32], 10).unwrap();
		assert_noop!(
			reveal_secret(secret, honest.trace_root, Some(wrong_end_opening)),
			pallet_touchstone_tasks::Error::<Test>::InvalidFinalState
		);
		verification_events();
		assert_ok!(reveal_secret(secret, honest.trace_root, Some(honest_opening)));
		assert_eq!(verification_events(), vec![Event::ForcedErrorRevealed { job, unit: 0, step, dismissed: 1 }]);
		// The dispute is dismissed, its bond returned, and the unit is no longer held.
		assert_eq!(
			Balances::balance_on_hold(&pallet_touchstone_disputes::HoldReason::ChallengeBond.into(), &catcher),
			0
		);
		assert_eq!(unit_state(job), UnitState::Proven);
		assert!(matches!(Rounds::<Test>::get((job, 0)).unwrap().secret, SolverSecret::Forced { .. }));
		// Nor while the forced proof stands.
		assert!(holds());
		assert_ok!(reveal(fooled, job, Verdict::Match));

		let (catcher_before, fooled_before, jackpot_before) =
			(Balances::balance(&catcher), Balances::balance(&fooled), Balances::balance(&JACKPOT));
		let solver_bond = pallet_touchstone_staking::Pallet::<Test>::bonded(&SOLVER, Role::Solver);
		run_to_block(5 + COMMIT_PERIOD + REVEAL_PERIOD);
		let events = verification_events();
		assert!(events.contains(&Event::RevealMissed { job, unit: 0, verifier: silent, slashed: MISSED_REVEAL_SLASH }));
		// The unit pays the jackpot a tenth of its price (10); over a rate of one, that is
		// the payout, under a third of the jackpot.
		assert!(events.contains(&Event::ForcedErrorPaid { job, unit: 0, step, caught: vec![catcher], each: PRICE / 10 }));
		assert_eq!(Balances::balance(&catcher), catcher_before + PRICE / 10);
		assert_eq!(Balances::balance(&fooled), fooled_before);
		assert_eq!(Balances::balance(&JACKPOT), jackpot_before + MISSED_REVEAL_SLASH - PRICE / 10);
		// The solver is not penalised, and its honest proof now stands, verified afresh.
		assert_eq!(pallet_touchstone_staking::Pallet::<Test>::bonded(&SOLVER, Role::Solver), solver_bond);
		let unit = pallet_touchstone_tasks::Units::<Test>::get(job, 0).unwrap();
		assert_eq!((unit.state, unit.proof.unwrap().trace_root), (UnitState::Proven, honest.trace_root));
		let round = Rounds::<Test>::get((job, 0)).unwrap();
		assert_eq!((round.trace_root, round.secret), (honest.trace_root.0, SolverSecret::NotRequired));
		assert!(!holds());
		match_and_finalize(job);
		assert_eq!(unit_state(job), UnitState::Finalized);
	});
}

#[test]
fn a_solver_reveals_an_unforced_secret_and_a_silent_one_is_slashed() {
	use crate::SolverSecret;
	build_and_execute(&VERIFIERS, || {
		// One in a billion: no unit here is forced.
		ForcedErrorRate::set(polkadot_sdk::sp_runtime::Perbill::from_parts(1));
		let secret = [7u8; 32];
		let job = take_with_secret(&secret);
		// Unforced, the solver commits its honest proof; the forced one is the other root.
		let ((honest, opening), (forced, _)) = honest_and_forced(job);
		assert_ok!(Tasks::submit_proof(RuntimeOrigin::signed(SOLVER), job, 0, honest, opening, None));
		let proven_at = System::block_number();
		run_to_block(proven_at + 2);
		let reveal_secret = |who, alternative: polkadot_sdk::sp_core::H256| {
			Verification::reveal_secret(RuntimeOrigin::signed(who), job, 0, secret, alternative, None)
		};
		assert_noop!(reveal_secret(SOLVER, forced.trace_root), Error::<Test>::RevealNotOpen);
		run_to_block(proven_at + 2 + COMMIT_PERIOD);
		assert_noop!(reveal_secret(OWNER, forced.trace_root), Error::<Test>::NotUnitSolver);
		assert_noop!(reveal_secret(SOLVER, honest.trace_root), Error::<Test>::SecretMismatch);
		verification_events();
		assert_ok!(reveal_secret(SOLVER, forced.trace_root));
		assert_eq!(verification_events(), vec![Event::SecretRevealed { job, unit: 0 }]);
		assert_eq!(Rounds::<Test>::get((job, 0)).unwrap().secret, SolverSecret::Revealed);
		assert!(!<Verification as touchstone_primitives::traits::AttestationJudge<u64>>::holds_rulings(job, 0));
		assert_noop!(reveal_secret(SOLVER, forced.trace_root), Error::<Test>::NothingToReveal);

		// A second unit whose solver committed the forced proof though the unit was not
		// forced: its reveal cannot match, and it is slashed at the conclusion (besides
		// what its lie costs in a dispute).
		let second = take_with_secret(&[8; 32]);
		let (_, (forced, forced_opening)) = honest_and_forced(second);
		assert_ok!(Tasks::submit_proof(RuntimeOrigin::signed(SOLVER), second, 0, forced, forced_opening, None));
		let bond = pallet_touchstone_staking::Pallet::<Test>::bonded(&SOLVER, Role::Solver);
		let proven_at = System::block_number();
		run_to_block(proven_at + 2 + COMMIT_PERIOD);
		let ((honest, _), _) = honest_and_forced(second);
		assert_noop!(
			Verification::reveal_secret(RuntimeOrigin::signed(SOLVER), second, 0, [8; 32], honest.trace_root, None),
			Error::<Test>::SecretMismatch
		);
		run_to_block(proven_at + 2 + COMMIT_PERIOD + REVEAL_PERIOD);
		assert!(verification_events().contains(&Event::SecretRevealMissed {
			job: second,
			unit: 0,
			solver: SOLVER,
			slashed: MISSED_REVEAL_SLASH
		}));
		assert_eq!(pallet_touchstone_staking::Pallet::<Test>::bonded(&SOLVER, Role::Solver), bond - MISSED_REVEAL_SLASH);
		assert_eq!(Rounds::<Test>::get((second, 0)).unwrap().secret, SolverSecret::Missed);
	});
}

#[test]
fn a_unit_abandoned_after_its_designation_costs_its_collateral_and_the_next_solver_commits_its_own() {
	build_and_execute(&VERIFIERS, || {
		ForcedErrorRate::set(polkadot_sdk::sp_runtime::Perbill::from_parts(1));
		let job = take_with_secret(&[9; 32]);
		let bond = pallet_touchstone_staking::Pallet::<Test>::bonded(&SOLVER, Role::Solver);
		let jackpot = Balances::balance(&JACKPOT);
		// The solver learned whether the unit is forced and never proves: the unit's
		// deadline passes, the sweep takes it back, and the solver forfeits the unit's
		// collateral (three times its price) to the jackpot.
		let timeout = u64::from(spec().unit_timeout);
		verification_events();
		run_to_block(System::block_number() + timeout + 2);
		assert_eq!(unit_state(job), UnitState::Reassigned);
		assert!(crate::Secrets::<Test>::get((job, 0)).is_none());
		let collateral = 3 * PRICE;
		assert!(verification_events().contains(&Event::DesignatedUnitAbandoned {
			job,
			unit: 0,
			solver: SOLVER,
			slashed: collateral
		}));
		assert_eq!(pallet_touchstone_staking::Pallet::<Test>::bonded(&SOLVER, Role::Solver), bond - collateral);
		assert_eq!(Balances::balance(&JACKPOT), jackpot + collateral);
		// Whoever takes it next commits a new secret, judged by randomness after it.
		register(3, &[(Role::Solver, 1_000)]);
		assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(3), job, 0));
		assert_ok!(Verification::commit_secret(RuntimeOrigin::signed(3), job, 0, commitment(job, &[10; 32])));
		assert_eq!(crate::Secrets::<Test>::get((job, 0)).unwrap().hash, commitment(job, &[10; 32]));
		// A solver that runs out of time before the randomness tells it anything loses
		// nothing but the unit.
		let bond = pallet_touchstone_staking::Pallet::<Test>::bonded(&3, Role::Solver);
		RandomnessStalled::set(true);
		run_to_block(System::block_number() + timeout + 2);
		RandomnessStalled::set(false);
		assert!(!verification_events().iter().any(|event| matches!(event, Event::DesignatedUnitAbandoned { .. })));
		assert_eq!(pallet_touchstone_staking::Pallet::<Test>::bonded(&3, Role::Solver), bond);
	});
}

/// Forced errors turned off between a unit's secret and its proof: the proof owes no
/// secret, and the one committed goes with the proof rather than outlive the unit's work.
#[test]
fn a_secret_committed_before_forced_errors_were_turned_off_goes_with_the_proof() {
	build_and_execute(&VERIFIERS, || {
		ForcedErrorRate::set(polkadot_sdk::sp_runtime::Perbill::from_parts(1));
		let job = take_with_secret(&[9; 32]);
		ForcedErrorRate::set(polkadot_sdk::sp_runtime::Perbill::zero());
		let (proof, opening) = proof_for(job);
		assert_ok!(Tasks::submit_proof(RuntimeOrigin::signed(SOLVER), job, 0, proof, opening, None));
		assert!(crate::Secrets::<Test>::get((job, 0)).is_none());
		assert_eq!(Rounds::<Test>::get((job, 0)).unwrap().secret, crate::SolverSecret::NotRequired);
	});
}

/// With forced errors on, a two-range job of 10 steps a range, checkpointed every 2,
/// claimed by `solver`, whose first range's secret `secret` is committed and its
/// randomness recorded.
fn two_ranges_first_taken_with_secret(solver: u64, secret: &[u8; 32]) -> u64 {
	ForcedErrorRate::set(polkadot_sdk::sp_runtime::Perbill::from_parts(1));
	let job = pallet_touchstone_tasks::NextJobId::<Test>::get();
	let mut spec = bookkeeping_spec(10, 2, 2, [6; 32]);
	spec.price_per_unit = PRICE;
	spec.budget = 2 * PRICE;
	assert_ok!(Tasks::submit_job(RuntimeOrigin::signed(OWNER), spec));
	assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(solver), job, 0));
	assert_ok!(Verification::commit_secret(RuntimeOrigin::signed(solver), job, 0, commitment(job, secret)));
	run_to_block(System::block_number() + 2);
	assert!(crate::Secrets::<Test>::get((job, 0)).unwrap().random.is_some());
	job
}

/// The second range's proof, from the first's final state ([51; 32]), and the commitment
/// of `secret` binding it to a forced proof beside it.
fn second_range(secret: &[u8; 32]) -> ((LearningProof, BoundaryOpening), polkadot_sdk::sp_core::H256) {
	let (honest, opening, _) = filler_proof(10, 10, 2, [51; 32], [52; 32], 11).unwrap();
	let (forced, _, _) = filler_proof(10, 10, 2, [51; 32], [52; 32], 12).unwrap();
	let hash = touchstone_primitives::forced_commitment(secret, &honest.trace_root.0, &forced.trace_root.0);
	((honest, opening), polkadot_sdk::sp_core::H256(hash))
}

/// A solver that trained the next step range ahead passes its secret with the proof of
/// the range before: the range is offered, taken and its secret committed in the proof's
/// block, so its randomness comes two blocks earlier than by accepting and committing
/// after; its proof then needs nothing more. A unit no range follows refuses a next
/// secret and changes nothing.
#[test]
fn a_proof_takes_the_next_range_with_its_secret_in_one_block() {
	build_and_execute(&VERIFIERS, || {
		let job = two_ranges_first_taken_with_secret(SOLVER, &[9; 32]);
		let (proof, opening) = proof_for(job);
		let ((second, second_opening), next) = second_range(&[13; 32]);
		verification_events();
		let now = System::block_number();
		assert_ok!(Tasks::submit_proof(RuntimeOrigin::signed(SOLVER), job, 0, proof, opening, Some(next)));
		let unit = pallet_touchstone_tasks::Units::<Test>::get(job, 1).unwrap();
		assert_eq!((unit.state, unit.solver, unit.accepted), (UnitState::Assigned, Some(SOLVER), true));
		assert_eq!(unit.deadline, Some(now + u64::from(spec().unit_timeout)));
		let committed = crate::Secrets::<Test>::get((job, 1)).unwrap();
		assert_eq!((committed.solver, committed.hash, committed.committed_at, committed.random), (SOLVER, next, now, None));
		assert!(verification_events().contains(&Event::SecretCommitted { job, unit: 1, solver: SOLVER }));
		// A second secret for the range it holds is refused, as from `commitSecret`.
		assert_noop!(
			Verification::commit_secret(RuntimeOrigin::signed(SOLVER), job, 1, next),
			Error::<Test>::SecretAlreadyCommitted
		);
		// Until the randomness after it is recorded, the range's proof waits.
		assert_noop!(
			Tasks::submit_proof(RuntimeOrigin::signed(SOLVER), job, 1, second.clone(), second_opening.clone(), None),
			Error::<Test>::SecretRandomnessPending
		);
		run_to_block(now + 2);
		assert!(crate::Secrets::<Test>::get((job, 1)).unwrap().random.is_some());
		// The last range: no range follows it to take.
		assert_noop!(
			Tasks::submit_proof(RuntimeOrigin::signed(SOLVER), job, 1, second.clone(), second_opening.clone(), Some(next)),
			pallet_touchstone_tasks::Error::<Test>::NoNextRange
		);
		assert_ok!(Tasks::submit_proof(RuntimeOrigin::signed(SOLVER), job, 1, second, second_opening, None));
		assert_eq!(unit_state(job), UnitState::Proven);
		assert!(crate::Secrets::<Test>::get((job, 1)).is_none());
	});
}

/// A next range's secret passed by a solver that may not take the range (its bond does
/// not cover one more unit's collateral) is not recorded: the proof stands and the range
/// goes to the pool for others, whose own secret is then judged.
#[test]
fn a_next_secret_from_a_solver_that_may_not_take_the_range_is_dropped_and_the_proof_stands() {
	build_and_execute(&VERIFIERS, || {
		// Three times one price: the collateral of one unit, not of two.
		register(3, &[(Role::Solver, 3 * PRICE)]);
		let job = two_ranges_first_taken_with_secret(3, &[9; 32]);
		let (proof, opening) = proof_for(job);
		let (_, next) = second_range(&[13; 32]);
		verification_events();
		let submitted = Tasks::submit_proof(RuntimeOrigin::signed(3), job, 0, proof, opening, Some(next));
		// Refunded to a plain proof's weight: nothing was taken or committed.
		use pallet_touchstone_tasks::WeightInfo as _;
		let plain = <Test as pallet_touchstone_tasks::Config>::WeightInfo::submit_proof();
		assert_eq!(submitted.map(|info| info.actual_weight), Ok(Some(plain)));
		assert_eq!(pallet_touchstone_tasks::Units::<Test>::get(job, 0).unwrap().state, UnitState::Proven);
		let unit = pallet_touchstone_tasks::Units::<Test>::get(job, 1).unwrap();
		assert_eq!((unit.state, unit.solver), (UnitState::Pending, None));
		assert!(crate::Secrets::<Test>::get((job, 1)).is_none());
		assert!(!verification_events().iter().any(|event| matches!(event, Event::SecretCommitted { .. })));
		assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(SOLVER), job, 1));
		assert_ok!(Verification::commit_secret(RuntimeOrigin::signed(SOLVER), job, 1, next));
	});
}

/// A range taken with its secret ahead is the solver's like any taken range: overturning
/// the proof it started from rolls it back with its secret (a secret bound to a state the
/// chain no longer holds is never judged), and letting it time out after its randomness
/// costs its collateral.
#[test]
fn a_range_taken_ahead_rolls_back_with_its_secret_and_costs_its_collateral_if_abandoned() {
	use touchstone_primitives::traits::UnitProofs;
	build_and_execute(&VERIFIERS, || {
		let job = two_ranges_first_taken_with_secret(SOLVER, &[9; 32]);
		let (proof, opening) = proof_for(job);
		let (_, next) = second_range(&[13; 32]);
		let submitted = Tasks::submit_proof(RuntimeOrigin::signed(SOLVER), job, 0, proof, opening, Some(next));
		// Taken: the taking and the commitment stand; only the round reads a rounds job
		// makes are refunded.
		assert_eq!(submitted.map(|info| info.actual_weight), Ok(Some(Tasks::submit_proof_weight(true, 0))));
		assert!(crate::Secrets::<Test>::get((job, 1)).is_some());
		assert_ok!(<Tasks as UnitProofs<_, _, _>>::open_challenge(job, 0));
		assert_eq!(<Tasks as UnitProofs<_, _, _>>::reject_proof(job, 0), Ok(vec![1]));
		let unit = pallet_touchstone_tasks::Units::<Test>::get(job, 1).unwrap();
		assert_eq!((unit.state, unit.solver, unit.start_state_root), (UnitState::Waiting, None, None));
		assert!(crate::Secrets::<Test>::get((job, 1)).is_none());

		// Taken again the same way, and then let go after its randomness.
		assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(SOLVER), job, 0));
		assert_ok!(Verification::commit_secret(RuntimeOrigin::signed(SOLVER), job, 0, commitment(job, &[10; 32])));
		run_to_block(System::block_number() + 2);
		let (proof, opening) = proof_for(job);
		assert_ok!(Tasks::submit_proof(RuntimeOrigin::signed(SOLVER), job, 0, proof, opening, Some(next)));
		run_to_block(System::block_number() + 2);
		assert!(crate::Secrets::<Test>::get((job, 1)).unwrap().random.is_some());
		verification_events();
		run_to_block(System::block_number() + u64::from(spec().unit_timeout) + 2);
		// (The first range's secret, never revealed here, costs its missed-reveal slash too.)
		assert!(verification_events().contains(&Event::DesignatedUnitAbandoned { job, unit: 1, solver: SOLVER, slashed: 3 * PRICE }));
	});
}

/// Tolerance mode: a job whose proofs are judged by distance.
mod tolerance {
	use super::*;
	use crate::{EscalationOutcome, RoundKind};
	use polkadot_sdk::sp_runtime::FixedU64;
	use touchstone_primitives::{Distance, VerificationMode};

	/// A distance, in thousandths (L2, L∞) and millionths (cosine).
	fn distance(l2: u64, linf: u64, cosine: u64) -> Distance {
		Distance {
			l2: FixedU64::from_rational(l2.into(), 1_000),
			linf: FixedU64::from_rational(linf.into(), 1_000),
			cosine: FixedU64::from_rational(cosine.into(), 1_000_000),
		}
	}

	/// The submitter's ceilings: L2 1, L∞ 0.5, cosine 10⁻².
	fn ceiling() -> Distance {
		distance(1_000, 500, 10_000)
	}

	/// Submits a tolerance-mode job as `OWNER`, has `SOLVER` prove it, and draws its round.
	fn proven_and_drawn() -> u64 {
		let job = pallet_touchstone_tasks::NextJobId::<Test>::get();
		let mut spec = spec();
		let Distance { l2, linf, cosine } = ceiling();
		spec.verification = VerificationMode::Tolerance { max_l2: l2, max_linf: linf, max_cosine_distance: cosine };
		assert_ok!(Tasks::submit_job(RuntimeOrigin::signed(OWNER), spec));
		assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(SOLVER), job, 0));
		let (proof, opening) = proof_for(job);
		assert_ok!(Tasks::submit_proof(RuntimeOrigin::signed(SOLVER), job, 0, proof, opening, None));
		run_to_block(System::block_number() + 2);
		assert!(Rounds::<Test>::get((job, 0)).unwrap().drawn.is_some());
		job
	}

	/// `who`'s verdict over its first sampled segment.
	fn measured(who: u64, job: u64, measured: Distance, profile: Option<Distance>) -> Verdict {
		let segment = Verification::samples(job, 0, &who).unwrap()[0];
		Verdict::Measured { segment, distance: measured, profile }
	}

	/// Commits every `(verifier, verdict)`, then reveals them once the commit period ends.
	fn attest(job: u64, verdicts: &[(u64, Verdict)]) {
		for (who, verdict) in verdicts {
			assert_ok!(commit(*who, job, verdict));
		}
		let drawn = Rounds::<Test>::get((job, 0)).unwrap().drawn.unwrap();
		run_to_block(drawn.commit_ends);
		for (who, verdict) in verdicts {
			assert_ok!(reveal(*who, job, verdict.clone()));
		}
	}

	/// Runs to the end of the unit's current round.
	fn conclude(job: u64) {
		run_to_block(Rounds::<Test>::get((job, 0)).unwrap().drawn.unwrap().reveal_ends);
	}

	fn thresholds(job: u64) -> Option<Distance> {
		pallet_touchstone_tasks::Jobs::<Test>::get(job).unwrap().tolerance.thresholds
	}

	fn verifier_bond(who: u64) -> u64 {
		pallet_touchstone_staking::Pallet::<Test>::bonded(&who, Role::Verifier)
	}

	#[test]
	fn the_first_round_profiles_the_thresholds_and_verifiers_within_them_are_paid() {
		build_and_execute(&MANY_VERIFIERS, || {
			let job = proven_and_drawn();
			let round = Rounds::<Test>::get((job, 0)).unwrap();
			assert_eq!(round.kind, RoundKind::Tolerance { profiling: true });
			// No secret is owed: forced errors are exact mode's.
			assert!(matches!(round.secret, crate::SolverSecret::NotRequired));
			let verifiers = drawn(job);
			// An exact-mode verdict, or a distance without the profile, is refused.
			let (first, second) = (verifiers[0], verifiers[1]);
			let unprofiled = measured(second, job, distance(10, 1, 10), None);
			assert_ok!(commit(first, job, &Verdict::Match));
			assert_ok!(commit(second, job, &unprofiled));
			run_to_block(round.drawn.clone().unwrap().commit_ends);
			assert_noop!(reveal(first, job, Verdict::Match), Error::<Test>::WrongVerdict);
			assert_noop!(reveal(second, job, unprofiled), Error::<Test>::WrongVerdict);
			conclude(job);
			// With no profile revealed the job stays unprofiled; the silent are slashed.
			assert_eq!(thresholds(job), None);
			assert_eq!(verifier_bond(first), VERIFIER_BOND - MISSED_REVEAL_SLASH);
		});
		build_and_execute(&MANY_VERIFIERS, || {
			let job = proven_and_drawn();
			let verifiers = drawn(job);
			// The median of each component, whichever report it comes from.
			let profiles = [distance(100, 20, 100), distance(200, 40, 200), distance(300, 10, 300)];
			let mut verdicts: Vec<(u64, Verdict)> = verifiers
				.iter()
				.zip(profiles)
				.map(|(who, profile)| (*who, measured(*who, job, distance(10, 1, 10), Some(profile))))
				.collect();
			// A distance naming a segment the verifier was not given is refused.
			let (who, Verdict::Measured { distance: near, profile, .. }) = verdicts[0].clone() else { unreachable!() };
			let unsampled = (0..5).find(|s| !Verification::samples(job, 0, &who).unwrap().contains(s)).unwrap();
			let wrong = Verdict::Measured { segment: unsampled, distance: near, profile };
			assert_ok!(commit(who, job, &wrong));
			verdicts.remove(0);
			attest(job, &verdicts);
			assert_noop!(reveal(who, job, wrong), Error::<Test>::SegmentNotSampled);
			verification_events();
			conclude(job);
			// Two profiles revealed, (200, 40, 200) and (300, 10, 300): the median of each
			// component on its own (the mean of the two), times the margin.
			let expected = distance(500, 50, 500);
			assert_eq!(distance(250, 25, 250).scaled(TOLERANCE_MARGIN), expected);
			assert_eq!(thresholds(job), Some(expected));
			let events = verification_events();
			assert!(events.contains(&Event::ThresholdsProfiled { job, thresholds: expected, profiles: 2 }));
			assert!(events.contains(&Event::RoundConcluded { job, unit: 0, matched: 2, mismatched: 0, missed: 1 }));
			// Within the thresholds: paid at finalization.
			run_to_block(System::block_number().max(1 + CHALLENGE_WINDOW));
			let before: Vec<u64> = verdicts.iter().map(|(who, _)| Balances::balance(who)).collect();
			assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), job, 0));
			for ((who, _), before) in verdicts.iter().zip(before) {
				assert!(Balances::balance(who) > before, "verifier {who} paid");
			}
			assert_eq!(crate::VerifierRounds::<Test>::iter().count(), 0);
		});
	}

	#[test]
	fn a_lone_profile_sets_no_thresholds_and_profiles_near_zero_meet_the_floor() {
		build_and_execute(&MANY_VERIFIERS, || {
			let job = proven_and_drawn();
			let verifiers = drawn(job);
			// One profile revealed, the others silent: fewer than `MinProfiles` (2).
			attest(job, &[(verifiers[0], measured(verifiers[0], job, distance(10, 1, 10), Some(distance(200, 40, 200))))]);
			conclude(job);
			assert_eq!(thresholds(job), None);
		});
		build_and_execute(&MANY_VERIFIERS, || {
			let job = proven_and_drawn();
			// Every profile reports no distance at all: the thresholds are the floor, a
			// hundredth of the ceilings, not zero.
			let verdicts: Vec<(u64, Verdict)> =
				drawn(job).iter().map(|who| (*who, measured(*who, job, distance(0, 0, 0), Some(distance(0, 0, 0))))).collect();
			attest(job, &verdicts);
			conclude(job);
			assert_eq!(thresholds(job), Some(ceiling().share(polkadot_sdk::sp_runtime::Perbill::from_percent(1))));
			assert_eq!(thresholds(job), Some(distance(10, 5, 100)));
		});
	}

	/// Profiles every verifier of the round within the thresholds but `accuser`, which
	/// measures `accused` on its first segment; concludes the round. Returns the round's
	/// verifiers.
	fn round_with_accuser(job: u64, accused: Distance) -> Vec<u64> {
		let verifiers = drawn(job);
		let verdicts: Vec<(u64, Verdict)> = verifiers
			.iter()
			.enumerate()
			.map(|(i, who)| {
				let measured_distance = if i == 0 { accused } else { distance(10, 1, 10) };
				(*who, measured(*who, job, measured_distance, Some(distance(200, 40, 200))))
			})
			.collect();
		attest(job, &verdicts);
		conclude(job);
		verifiers
	}

	/// Has every committee member measure the flagged segment at `measured`.
	fn committee_measures(job: u64, measured_distance: Distance) -> Vec<u64> {
		run_to_block(System::block_number() + 2);
		let round = Rounds::<Test>::get((job, 0)).unwrap();
		let RoundKind::Escalation { flagged, .. } = &round.kind else { panic!("an escalation") };
		let segment = flagged[0];
		let committee = drawn(job);
		assert_eq!(committee.len() as u32, ESCALATION_COMMITTEE);
		assert!(!committee.contains(&SOLVER) && !committee.contains(&OWNER));
		// None of the round's own verifiers judges it.
		let RoundKind::Escalation { verifiers, .. } = &round.kind else { panic!("an escalation") };
		assert!(verifiers.iter().all(|attestation| !committee.contains(&attestation.verifier)));
		let verdicts: Vec<(u64, Verdict)> = committee
			.iter()
			.map(|who| (*who, Verdict::Measured { segment, distance: measured_distance, profile: None }))
			.collect();
		attest(job, &verdicts);
		verification_events();
		conclude(job);
		committee
	}

	#[test]
	fn a_distance_beyond_the_thresholds_escalates_and_the_committee_overturns_the_proof() {
		build_and_execute(&MANY_VERIFIERS, || {
			let job = proven_and_drawn();
			let solver_bond = pallet_touchstone_staking::Pallet::<Test>::bonded(&SOLVER, Role::Solver);
			let verifiers = round_with_accuser(job, distance(3_000, 300, 50_000));
			let round = Rounds::<Test>::get((job, 0)).unwrap();
			let RoundKind::Escalation { flagged, .. } = &round.kind else { panic!("an escalation") };
			assert_eq!(flagged.len(), 1);
			assert!(round.drawn.is_none() && !round.concluded);
			// The unit is held while the committee judges.
			assert_eq!(unit_state(job), UnitState::Challenged);
			let committee = committee_measures(job, distance(2_000, 200, 40_000));
			let events = verification_events();
			assert!(events.contains(&Event::EscalationDecided {
				job,
				unit: 0,
				outcome: EscalationOutcome::Overturned,
				beyond: 3,
				within: 0,
				missed: 0
			}));
			assert!(events.contains(&Event::ToleranceProofRejected { job, unit: 0, solver: SOLVER, slashed: 500 }));
			assert_eq!(
				pallet_touchstone_staking::Pallet::<Test>::bonded(&SOLVER, Role::Solver),
				solver_bond - 500
			);
			// The unit goes back to the pool, its round gone, every count released.
			assert_eq!(unit_state(job), UnitState::Reassigned);
			assert!(Rounds::<Test>::get((job, 0)).is_none());
			assert_eq!(crate::VerifierRounds::<Test>::iter().count(), 0);
			// The round's verifiers that endorsed the flagged segment lost; the accuser won.
			let accuser = verifiers[0];
			for who in &verifiers[1..] {
				let endorsed_flagged = Verification::sampled_segments(
					&round_seed(&round),
					who,
					5,
				)
				.contains(&flagged[0]);
				let lost = events.iter().any(|e| matches!(e, Event::WrongDistance { verifier, .. } if verifier == who));
				assert_eq!(lost, endorsed_flagged, "verifier {who}");
			}
			assert!(!events.iter().any(|e| matches!(e, Event::WrongDistance { verifier, .. } if *verifier == accuser)));
			assert!(committee.iter().all(|who| !events
				.iter()
				.any(|e| matches!(e, Event::WrongDistance { verifier, .. } if verifier == who))));
		});
	}

	/// How a verifier plays a tolerance round or an escalation committee.
	#[derive(Clone, Copy, Debug, PartialEq, Eq)]
	enum Measuring {
		/// Reports the distance it measures: beyond the bound for a lie, within it otherwise.
		Honest,
		/// Reports a distance within the bound, whatever the proof.
		Endorses,
		/// Reports a distance beyond the bound, whatever the proof.
		Accuses,
		/// Never commits.
		Silent,
	}

	/// One play of a tolerance job's proof against verifiers playing `plays` (by account,
	/// in `MANY_VERIFIERS` order), through its round and, if one is flagged, its
	/// escalation, to the end of its challenge window. Issuance is checked by
	/// `build_and_execute`. Where the committee's truthful members outnumber its untruthful
	/// ones (or no committee sat), every verifier that only told the truth, and an honest
	/// solver, lose nothing, and a lie that was flagged is not paid and costs its solver;
	/// whatever the committee, the unit ends, paid or back in the pool.
	fn play_tolerance(case: u32, lies: bool, plays: [Measuring; 7]) -> (bool, bool, UnitState) {
		use std::collections::BTreeMap;
		let mut outcome = (false, false, UnitState::Proven);
		build_and_execute(&MANY_VERIFIERS, || {
			let plays: BTreeMap<u64, Measuring> = MANY_VERIFIERS.into_iter().zip(plays).collect();
			let worth = |who: u64| Balances::total_balance(&who);
			let start: BTreeMap<u64, u64> = plays.keys().chain([&SOLVER]).map(|who| (*who, worth(*who))).collect();
			let (within, beyond) = (distance(10, 1, 10), distance(3_000, 300, 50_000));
			let truth = if lies { beyond } else { within };
			let reported = |who: u64| match plays[&who] {
				Measuring::Honest => Some(truth),
				Measuring::Endorses => Some(within),
				Measuring::Accuses => Some(beyond),
				Measuring::Silent => None,
			};
			let mut told_untruth: Vec<u64> = Vec::new();
			let job = proven_and_drawn();
			let round = drawn(job);
			let verdicts: Vec<(u64, Verdict)> = round
				.iter()
				.filter_map(|who| reported(*who).map(|d| (*who, measured(*who, job, d, Some(distance(200, 40, 200))))))
				.collect();
			told_untruth.extend(round.iter().filter(|who| reported(**who).is_some_and(|d| d != truth)));
			attest(job, &verdicts);
			conclude(job);
			let escalated = matches!(Rounds::<Test>::get((job, 0)).map(|round| round.kind), Some(RoundKind::Escalation { .. }));
			let mut truthful_majority = true;
			if escalated {
				run_to_block(System::block_number() + 2);
				let escalation = Rounds::<Test>::get((job, 0)).unwrap();
				let RoundKind::Escalation { flagged, .. } = &escalation.kind else { unreachable!() };
				let segment = flagged[0];
				let committee = drawn(job);
				assert!(committee.iter().all(|who| !round.contains(who)), "case {case}: a round's verifier sat in its committee");
				let verdicts: Vec<(u64, Verdict)> = committee
					.iter()
					.filter_map(|who| reported(*who).map(|d| (*who, Verdict::Measured { segment, distance: d, profile: None })))
					.collect();
				let untruthful = committee.iter().filter(|who| reported(**who).is_some_and(|d| d != truth)).count();
				told_untruth.extend(committee.iter().filter(|who| reported(**who).is_some_and(|d| d != truth)));
				truthful_majority = verdicts.len() - untruthful > untruthful;
				attest(job, &verdicts);
				conclude(job);
			}
			// A decided escalation opens the challenge window again.
			let mut finalized = Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), job, 0);
			for _ in 0..4 * CHALLENGE_WINDOW {
				if finalized.is_ok() || unit_state(job) != UnitState::Proven {
					break;
				}
				run_to_block(System::block_number() + 1);
				finalized = Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), job, 0);
			}
			let state = unit_state(job);
			assert!(
				matches!(state, UnitState::Finalized | UnitState::Reassigned),
				"case {case}: the unit ended {state:?} ({finalized:?}; lies {lies}, plays {plays:?}, escalated {escalated}, block {})",
				System::block_number()
			);
			outcome = (escalated, truthful_majority, state);
			if !truthful_majority {
				return;
			}
			for (who, play) in &plays {
				let truthful = *play != Measuring::Silent && !told_untruth.contains(who);
				if truthful {
					assert!(worth(*who) >= start[who], "case {case}: truthful verifier {who} ({play:?}) lost {}", start[who] - worth(*who));
				}
			}
			if !lies {
				assert!(worth(SOLVER) >= start[&SOLVER], "case {case}: the honest solver lost");
			} else if escalated {
				assert_eq!(state, UnitState::Reassigned, "case {case}: a flagged lie was paid");
				assert!(worth(SOLVER) < start[&SOLVER], "case {case}: a flagged lie cost nothing");
			}
		});
		outcome
	}

	/// Random strategies for every verifier, round and committee alike, against an
	/// honest or a lying solver, over 256 seeded cases: see [`play_tolerance`].
	#[test]
	fn no_tolerance_adversary_costs_a_truthful_party_where_the_committee_is_truthful() {
		use polkadot_sdk::sp_io::hashing::blake2_256;
		const PLAYS: [Measuring; 4] = [Measuring::Honest, Measuring::Endorses, Measuring::Accuses, Measuring::Silent];
		let mut outcomes = Vec::new();
		for case in 0..256u32 {
			let bytes = blake2_256(&case.to_le_bytes());
			let plays = core::array::from_fn(|i| PLAYS[usize::from(bytes[i] % 4)]);
			outcomes.push(play_tolerance(case, bytes[7] % 2 == 1, plays));
		}
		// The cases reach every ending: unescalated, and escalations that overturned the
		// proof or let it stand, with the committee truthful or not.
		let count = |f: &dyn Fn(&(bool, bool, UnitState)) -> bool| outcomes.iter().filter(|o| f(o)).count();
		let plain = count(&|o| !o.0);
		let overturned = count(&|o| o.0 && o.2 == UnitState::Reassigned);
		let stood = count(&|o| o.0 && o.2 == UnitState::Finalized);
		let untruthful = count(&|o| o.0 && !o.1);
		println!("256 cases: {plain} unescalated, {overturned} overturned, {stood} escalated and paid, {untruthful} with an untruthful committee");
		assert!(plain > 0 && overturned > 0 && stood > 0 && untruthful > 0);
	}

	/// The tolerance round's seed an escalation keeps.
	fn round_seed(round: &crate::RoundOf<Test>) -> [u8; 32] {
		match &round.kind {
			RoundKind::Escalation { seed, .. } => *seed,
			_ => round.drawn.clone().unwrap().seed,
		}
	}

	#[test]
	fn the_committee_upholds_an_honest_proof_and_the_accuser_is_slashed() {
		build_and_execute(&MANY_VERIFIERS, || {
			let job = proven_and_drawn();
			let verifiers = round_with_accuser(job, distance(3_000, 300, 50_000));
			let accuser = verifiers[0];
			committee_measures(job, distance(20, 2, 20));
			let events = verification_events();
			assert!(events.contains(&Event::EscalationDecided {
				job,
				unit: 0,
				outcome: EscalationOutcome::Upheld,
				beyond: 0,
				within: 3,
				missed: 0
			}));
			// Its accuser is slashed, and nobody else.
			let slashed: Vec<&Event<Test>> =
				events.iter().filter(|e| matches!(e, Event::WrongDistance { .. })).collect();
			assert_eq!(slashed, vec![&Event::WrongDistance { job, unit: 0, verifier: accuser, slashed: 40 }]);
			// The proof stands: the unit is `Proven` again, its window open in full, and it
			// finalizes, paying those within the thresholds.
			assert_eq!(unit_state(job), UnitState::Proven);
			run_to_block(System::block_number() + CHALLENGE_WINDOW);
			assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), job, 0));
			assert_eq!(crate::VerifierRounds::<Test>::iter().count(), 0);
		});
	}

	#[test]
	fn a_silent_committee_leaves_the_proof_standing_and_is_slashed() {
		build_and_execute(&MANY_VERIFIERS, || {
			let job = proven_and_drawn();
			round_with_accuser(job, distance(3_000, 300, 50_000));
			run_to_block(System::block_number() + 2);
			let committee = drawn(job);
			verification_events();
			conclude(job);
			let events = verification_events();
			assert!(events.contains(&undecided(job, committee.len() as u32)));
			assert!(!events.iter().any(|e| matches!(e, Event::WrongDistance { .. })));
			assert_eq!(unit_state(job), UnitState::Proven);
		});
	}

	/// The event of an escalation of `job`'s unit left undecided, `missed` members silent.
	fn undecided(job: u64, missed: u32) -> Event<Test> {
		Event::EscalationDecided { job, unit: 0, outcome: EscalationOutcome::Undecided, beyond: 0, within: 0, missed }
	}

	/// A committee is drawn without the round it judges: the round's verifiers would vote
	/// on their own verdicts again (a colluding endorser twice). With fewer than
	/// `MinEscalationCommittee` other verifiers eligible, no committee is drawn, the
	/// escalation is undecided and the proof stands, with nobody slashed.
	#[test]
	fn an_escalation_without_enough_verifiers_outside_the_round_is_undecided() {
		build_and_execute(&VERIFIERS, || {
			let job = proven_and_drawn();
			round_with_accuser(job, distance(3_000, 300, 50_000));
			verification_events();
			run_to_block(System::block_number() + 2);
			let events = verification_events();
			// Four verifiers, three of them the round's: one is left.
			assert!(events.contains(&Event::CommitteeTooSmall { job, unit: 0, drawn: 1 }), "{events:?}");
			assert!(events.contains(&undecided(job, 0)));
			assert_eq!(unit_state(job), UnitState::Proven);
		});
	}

	#[test]
	fn thresholds_are_challenged_by_the_owner_or_a_solver_and_profiled_again() {
		build_and_execute(&MANY_VERIFIERS, || {
			let job = proven_and_drawn();
			assert_noop!(
				Verification::challenge_thresholds(RuntimeOrigin::signed(OWNER), job),
				Error::<Test>::NotProfiled
			);
			round_with_accuser(job, distance(10, 1, 10));
			let profiled = thresholds(job).unwrap();
			assert_eq!(profiled, distance(200, 40, 200).scaled(TOLERANCE_MARGIN));
			// A verifier that is neither the owner nor a bonded solver may not.
			assert_noop!(
				Verification::challenge_thresholds(RuntimeOrigin::signed(VERIFIERS[0]), job),
				Error::<Test>::NotEntitled
			);
			// Nor may a solver of one of the job's units: it is a party to their rounds.
			assert_noop!(
				Verification::challenge_thresholds(RuntimeOrigin::signed(SOLVER), job),
				Error::<Test>::SolvesInJob
			);
			let other_solver = 3;
			register(other_solver, &[(Role::Solver, 1_000)]);
			assert_ok!(Verification::challenge_thresholds(RuntimeOrigin::signed(other_solver), job));
			assert_eq!(thresholds(job), None);
			assert!(verification_events().contains(&Event::ThresholdsChallenged {
				job,
				by: other_solver,
				previous: profiled
			}));
			// Once per job here (`MaxThresholdChallenges`).
			pallet_touchstone_tasks::Jobs::<Test>::mutate(job, |info| {
				info.as_mut().unwrap().tolerance.thresholds = Some(profiled)
			});
			assert_noop!(
				Verification::challenge_thresholds(RuntimeOrigin::signed(OWNER), job),
				Error::<Test>::ThresholdChallengeLimit
			);
			// An exact-mode job has no thresholds.
			let exact = claimed_by(SOLVER);
			assert_noop!(
				Verification::challenge_thresholds(RuntimeOrigin::signed(OWNER), exact),
				Error::<Test>::NotToleranceJob
			);
		});
	}

	/// Attack 6: the accused solver (or its sybil, a bonded solver with no unit of the
	/// job) challenged the job's thresholds during its own round, which was then judged by
	/// the submitter's looser ceilings and upheld. Thresholds are now frozen for every
	/// round already open, and no solver of the job may challenge them.
	#[test]
	fn attack_a_defendant_cannot_loosen_its_own_thresholds() {
		let sybil = 3;
		build_and_execute(&MANY_VERIFIERS, || {
			register(sybil, &[(Role::Solver, 1_000)]);
			let job = pallet_touchstone_tasks::NextJobId::<Test>::get();
			let mut spec = spec();
			let Distance { l2, linf, cosine } = ceiling();
			spec.verification = VerificationMode::Tolerance { max_l2: l2, max_linf: linf, max_cosine_distance: cosine };
			assert_ok!(Tasks::submit_job(RuntimeOrigin::signed(OWNER), spec));
			// Profiled by an earlier round: far tighter than the ceilings.
			let profiled = distance(400, 80, 400);
			pallet_touchstone_tasks::Jobs::<Test>::mutate(job, |info| {
				info.as_mut().unwrap().tolerance.thresholds = Some(profiled)
			});
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(SOLVER), job, 0));
			let (proof, opening) = proof_for(job);
			assert_ok!(Tasks::submit_proof(RuntimeOrigin::signed(SOLVER), job, 0, proof, opening, None));
			run_to_block(System::block_number() + 2);
			assert_eq!(Rounds::<Test>::get((job, 0)).unwrap().kind, RoundKind::Tolerance { profiling: false });
			// One verifier measures the lie beyond the thresholds, within the ceilings.
			let verifiers = drawn(job);
			let verdicts: Vec<(u64, Verdict)> = verifiers
				.iter()
				.enumerate()
				.map(|(i, who)| {
					let measured_distance = if i == 0 { distance(900, 100, 900) } else { distance(10, 1, 10) };
					(*who, measured(*who, job, measured_distance, None))
				})
				.collect();
			attest(job, &verdicts);
			// The accused tries to loosen its yardstick, then its sybil does.
			assert!(Verification::challenge_thresholds(RuntimeOrigin::signed(SOLVER), job).is_err());
			let _ = Verification::challenge_thresholds(RuntimeOrigin::signed(sybil), job);
			verification_events();
			conclude(job);
			// The round is judged by the thresholds it was opened under: it escalates.
			let events = verification_events();
			assert!(
				events.iter().any(|e| matches!(e, Event::EscalationOpened { job: j, unit: 0, .. } if *j == job)),
				"{events:?}"
			);
			assert_eq!(unit_state(job), UnitState::Challenged);
			// Played out: the committee measures the lie beyond the thresholds.
			committee_measures(job, distance(900, 100, 900));
			assert_eq!(unit_state(job), UnitState::Reassigned);
		});
	}
}

/// Attack 8(b): the secret queue was global, bounded below the open units and drained two
/// entries a block (`MaxDrawsPerBlock`), so sybil solvers committing the secrets of the
/// units they held in one block filled it: an honest solver's `commit_secret` failed with
/// `DrawQueueFull`, or waited behind them for blocks while its unit's deadline ran. Now
/// the queue has room for every open unit, holds each unit once, and records every
/// queued secret's randomness as soon as it is known (up to `MaxSecretsPerBlock`, more
/// than assignments can refill it with).
#[test]
fn attack_sybil_secrets_cannot_shut_out_or_delay_an_honest_one() {
	build_and_execute(&VERIFIERS, || {
		let sybils = [3, 4, 5];
		for sybil in sybils {
			register(sybil, &[(Role::Solver, 1_000)]);
		}
		// The sybils hold two units each, as many as a solver may; the honest solver one.
		let held: Vec<(u64, u64)> = sybils.iter().flat_map(|sybil| [*sybil, *sybil]).map(|sybil| (sybil, claimed_by(sybil))).collect();
		let honest = claimed_by(SOLVER);
		for (sybil, job) in &held {
			let _ = Verification::commit_secret(RuntimeOrigin::signed(*sybil), *job, 0, commitment(*job, &[*sybil as u8; 32]));
		}
		assert_ok!(Verification::commit_secret(RuntimeOrigin::signed(SOLVER), honest, 0, commitment(honest, &[2; 32])));
		run_to_block(System::block_number() + 2);
		assert!(
			crate::Secrets::<Test>::get((honest, 0)).unwrap().random.is_some(),
			"the honest secret still waits behind {} sybil secrets",
			PendingSecrets::<Test>::get().len()
		);
	});
}

/// Attack 2: draining the jackpot through forced errors. The solver learned whether its
/// unit was forced from the randomness recorded after its secret, before it committed
/// anything it could be judged on; an unforced unit it simply let time out (a timeout
/// cost reputation, not bond) and took the next one. On a forced unit it named the forced
/// step in a segment only its colluding verifier sampled (the samples are public once
/// drawn), and the colluder, which checked nothing, took the payout: the verifiers' pay
/// divided by the rate. Playing until its first forced unit (15 tries), the attacker
/// (submitter, solver and colluding verifier) gained 250 at a price of 300, and the
/// jackpot lost 270.
///
/// Now the solver binds its secret to its honest and its forced trace root before the
/// randomness exists, and letting a unit time out after the randomness forfeits its
/// collateral; the forced step follows from the secret, so it lies where the solver put
/// it before any sample was drawn, and only verifiers that sampled it are paid; the
/// payout is what the unit paid the jackpot divided by the rate. The same strategy now
/// loses: each abandonment costs three times the price, more than a payout can bring.
#[test]
fn attack_the_jackpot_cannot_be_drained_through_forced_errors() {
	use polkadot_sdk::frame_support::traits::{fungible::Mutate, tokens::Preservation};
	build_and_execute(&VERIFIERS, || {
		const ATTACKER_SOLVER: u64 = 3;
		const PRICE_SET_BY_THE_ATTACKER: u64 = 300;
		let rate = polkadot_sdk::sp_runtime::Perbill::from_percent(10);
		ForcedErrorRate::set(rate);
		assert_ok!(Balances::transfer(&5, &JACKPOT, 30_000, Preservation::Expendable));
		register(ATTACKER_SOLVER, &[(Role::Solver, 100_000)]);
		let wealth = |who: u64| Balances::total_balance(&who);
		let before: Vec<u64> = (0..=9).map(wealth).collect();
		let jackpot_before = Balances::balance(&JACKPOT);
		let mut spec = spec();
		spec.price_per_unit = PRICE_SET_BY_THE_ATTACKER;
		spec.budget = PRICE_SET_BY_THE_ATTACKER;
		let timeout = u64::from(spec.unit_timeout);
		// The most one forced unit can pay out: what it pays the jackpot over the rate.
		let most_a_payout_brings = rate.saturating_reciprocal_mul(PRICE_SET_BY_THE_ATTACKER / 10);
		let mut tries = 0u8;
		let mut forfeited = 0;
		let (job, secret) = loop {
			tries += 1;
			assert!(tries < 60, "no forced unit in 60 tries");
			let job = pallet_touchstone_tasks::NextJobId::<Test>::get();
			assert_ok!(Tasks::submit_job(RuntimeOrigin::signed(OWNER), spec.clone()));
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(ATTACKER_SOLVER), job, 0));
			let secret = [10 + tries; 32];
			assert_ok!(Verification::commit_secret(RuntimeOrigin::signed(ATTACKER_SOLVER), job, 0, commitment(job, &secret)));
			run_to_block(System::block_number() + 2);
			let commitment = crate::Secrets::<Test>::get((job, 0)).unwrap();
			if touchstone_primitives::forced_error(&secret, &commitment.random.unwrap(), job, 0, commitment.rate) {
				break (job, secret);
			}
			// Not forced: abandon the unit and take another. It costs the collateral.
			verification_events();
			run_to_block(System::block_number() + timeout + 2);
			let slashed = verification_events()
				.into_iter()
				.find_map(|event| match event {
					Event::DesignatedUnitAbandoned { slashed, .. } => Some(slashed),
					_ => None,
				})
				.expect("abandoning a designated unit is slashed");
			assert!(slashed > most_a_payout_brings, "an abandonment cost {slashed}, a payout brings up to {most_a_payout_brings}");
			forfeited += slashed;
			assert_ok!(Tasks::cancel_job(RuntimeOrigin::signed(OWNER), job));
		};
		let ((honest, honest_opening), (forced, opening)) = honest_and_forced(job);
		assert_ok!(Tasks::submit_proof(RuntimeOrigin::signed(ATTACKER_SOLVER), job, 0, forced, opening, None));
		run_to_block(System::block_number() + 2);
		let verifiers = drawn(job);
		let colluder = verifiers[0];
		// The error is where the secret put it; honest verifiers that sample it catch it.
		let seed = Rounds::<Test>::get((job, 0)).unwrap().drawn.unwrap().seed;
		let segments = touchstone_primitives::Segments::new(0, 10, 2);
		let forced_segment = segments.of_step(forced_step(&secret)).unwrap();
		let mismatch = Verdict::Mismatch { trace_root: honest.trace_root.0 };
		let verdict = |v: &u64| {
			let catches = Verification::sampled_segments(&seed, v, segments.count()).contains(&forced_segment);
			if *v == colluder || catches { mismatch.clone() } else { Verdict::Match }
		};
		for verifier in &verifiers {
			assert_ok!(commit(*verifier, job, &verdict(verifier)));
		}
		run_to_block(System::block_number() + COMMIT_PERIOD);
		assert_ok!(Verification::reveal_secret(
			RuntimeOrigin::signed(ATTACKER_SOLVER),
			job,
			0,
			secret,
			honest.trace_root,
			Some(honest_opening)
		));
		for verifier in &verifiers {
			assert_ok!(reveal(*verifier, job, verdict(verifier)));
		}
		run_to_block(System::block_number() + REVEAL_PERIOD);
		// The honest proof's round, checked by everyone, then payment.
		match_and_finalize(job);
		let gained = |who: u64| wealth(who) as i128 - before[who as usize] as i128;
		let net = gained(OWNER) + gained(ATTACKER_SOLVER) + gained(colluder);
		let jackpot_gained = Balances::balance(&JACKPOT) as i128 - jackpot_before as i128;
		assert!(
			net < 0 && jackpot_gained > 0,
			"the attacker gained {net} (the jackpot {jackpot_gained}) in {tries} tries at a price of {PRICE_SET_BY_THE_ATTACKER}"
		);
		assert!(forfeited > 0);
	});
}
