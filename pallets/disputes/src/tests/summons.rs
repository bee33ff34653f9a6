//! Summonses: after a conviction that found no step (the solver fell silent early), the
//! verifiers that attested the overturned proof are judged one segment at a time, each by a
//! dispute it defends against the proof's own boundaries.

use super::*;
use crate::{Overturned, Summonses};

/// Eight steps checkpointed every two: four segments, of which each verifier samples two.
fn four_segments() -> TinyJob {
	TinyJob::new(8, 1).with_interval(2)
}

/// The segment the liar's fault at `LIE_STEP` falls in.
const LIE_STEP: u32 = 5;
const LIE_SEGMENT: u32 = LIE_STEP / 2;

/// `liar`'s proof of unit 0 of a new job, attested `Match` by every verifier, then disputed
/// by `CHALLENGER` with `honest` and convicted by the liar's silence in the first round.
/// Returns the job and the convicting dispute.
fn convicted_by_silence(job: &TinyJob, liar: &Run, honest: &mut Run) -> (u64, DisputeId) {
	register_verifiers();
	let id = job.submit();
	prove(id, 0, SOLVER, liar);
	run_to_block(3);
	attest_match(id);
	let dispute = challenge(id, 0, CHALLENGER, honest);
	assert_ok!(honest.answer(dispute, CHALLENGER));
	run_to_block(DisputeRecords::<Test>::get(dispute).unwrap().deadline + 1);
	assert_ok!(Disputes::time_out(RuntimeOrigin::signed(OWNER), dispute));
	let events = dispute_events();
	assert!(events.iter().any(|event| matches!(
		event,
		Event::DisputeResolved { dispute: d, ruling: Ruling::ChallengerWins, grounds: Grounds::Timeout, .. } if *d == dispute
	)));
	assert!(events.iter().any(|event| matches!(
		event,
		Event::AttestersSummonable { overturned, job, unit: 0, trace_root, .. }
			if *overturned == dispute && *job == id && *trace_root == liar.root()
	)));
	(id, dispute)
}

/// Inside a test's externalities: the liar's run of `job`'s unit and an honest one, the
/// liar's proof convicted by its silence, and the attesters of the lie's segment.
fn convicted_liar(job: &TinyJob) -> (Run<'_>, Run<'_>, DisputeId, Vec<u64>) {
	let liar = Run::train(job, 0, 8, Some(output_fault(LIE_STEP, 1)));
	let mut honest = Run::train(job, 0, 8, None);
	let (_, overturned) = convicted_by_silence(job, &liar, &mut honest);
	let (lazy, _) = attesters_of(overturned, LIE_SEGMENT);
	assert!(!lazy.is_empty(), "the draw has an attester of the lie's segment");
	(liar, honest, overturned, lazy)
}

/// The attesters of the proof `overturned` convicted that re-executed `segment`, and those
/// that did not.
pub(super) fn attesters_of(overturned: DisputeId, segment: u32) -> (Vec<u64>, Vec<u64>) {
	let snapshot = Overturned::<Test>::get(overturned).expect("the proof is kept for summonses");
	let (sampled, others): (Vec<_>, Vec<_>) =
		snapshot.attesters.iter().partition(|(_, samples)| samples.contains(&segment));
	(sampled.into_iter().map(|(who, _)| *who).collect(), others.into_iter().map(|(who, _)| *who).collect())
}

/// `summoner` summons `attester` over `segment` of the proof `overturned` convicted, with
/// `run`'s segment root and the proof's boundary before the segment from `proof`; returns
/// the summons.
pub(super) fn summon(overturned: DisputeId, summoner: u64, attester: u64, segment: u32, run: &Run, proof: &Run) -> DispatchResult {
	let start = proof.unit.start_opening(segment).unwrap();
	Disputes::summon(RuntimeOrigin::signed(summoner), overturned, attester, segment, run.root(), start)
}

#[test]
fn a_conviction_by_silence_keeps_the_proof_and_its_attesters_for_summonses() {
	let job = four_segments();
	build_and_execute(|| {
		let (liar, _, overturned, _) = convicted_liar(&job);
		let snapshot = Overturned::<Test>::get(overturned).unwrap();
		let id = snapshot.job;
		assert_eq!(snapshot.trace.root, liar.root());
		let mut attesters: Vec<u64> = snapshot.attesters.iter().map(|(who, _)| *who).collect();
		attesters.sort();
		assert_eq!(attesters, VERIFIERS.to_vec());
		// The unit is to be done again; the kept proof holds nothing of it.
		assert!(!matches!(unit_state(id, 0), UnitState::Proven | UnitState::Challenged));
		// Forgotten once the window closed with nothing open.
		assert_noop!(Disputes::forget_overturned(RuntimeOrigin::signed(OWNER), overturned), Error::<Test>::SummonsOpen);
		run_to_block(snapshot.summons_until + 1);
		assert_ok!(Disputes::forget_overturned(RuntimeOrigin::signed(OWNER), overturned));
		assert!(Overturned::<Test>::get(overturned).is_none());
	});
}

#[test]
fn a_lazy_attester_summoned_over_the_lie_loses_at_the_referee_and_is_slashed() {
	let job = four_segments();
	build_and_execute(|| {
		let (mut liar, mut honest, overturned, lazy) = convicted_liar(&job);
		for attester in lazy {
			let id = crate::NextDisputeId::<Test>::get();
			assert_ok!(summon(overturned, CHALLENGER, attester, LIE_SEGMENT, &honest, &liar));
			let (summoner_before, jackpot_before) = (Balances::balance(&CHALLENGER), Balances::balance(&JACKPOT));
			System::reset_events();
			// The attester's best defence is the liar's own trace of the segment: it still
			// cannot reach the proof's wrong boundary by honest steps.
			play(id, &mut liar, &mut honest);
			let slashed = false_attestations();
			assert_eq!(ruling(id), (Ruling::ChallengerWins, Grounds::Referee));
			assert_eq!(slashed.len(), 1);
			assert_eq!((slashed[0].0, slashed[0].2), (attester, FALSE_ATTESTATION_SLASH));
			assert!(job.train.checkpoint_interval * LIE_SEGMENT <= slashed[0].1);
			assert_eq!(verifier_bond(attester), VERIFIER_BOND - FALSE_ATTESTATION_SLASH);
			let reward = conviction_reward(FALSE_ATTESTATION_SLASH);
			assert_eq!(Balances::balance(&CHALLENGER), summoner_before + CHALLENGE_BOND + reward);
			assert_eq!(Balances::balance(&JACKPOT), jackpot_before + FALSE_ATTESTATION_SLASH - reward);
		}
		assert_eq!(Overturned::<Test>::get(overturned).unwrap().open_summonses, 0);
	});
}

#[test]
fn an_honest_attester_summoned_over_a_true_segment_wins_the_summoners_bond() {
	let job = four_segments();
	build_and_execute(|| {
		let (mut liar, mut honest, overturned, _) = convicted_liar(&job);
		// An attester of a segment before the lie attested a true transition.
		let snapshot = Overturned::<Test>::get(overturned).unwrap();
		let (attester, segment) = snapshot
			.attesters
			.iter()
			.find_map(|(who, samples)| samples.iter().find(|s| **s < LIE_SEGMENT).map(|s| (*who, *s)))
			.expect("an attester of a segment before the lie");
		// A griefer with a wrong run of that segment summons it, and loses at the referee.
		let mut griefer = Run::train(&job, 0, 8, Some(output_fault(2 * segment + 1, 1)));
		let id = crate::NextDisputeId::<Test>::get();
		assert_ok!(summon(overturned, SECOND_CHALLENGER, attester, segment, &griefer, &liar));
		let attester_before = Balances::balance(&attester);
		play(id, &mut liar, &mut griefer);
		assert_eq!(ruling(id), (Ruling::DefenderWins, Grounds::Referee));
		assert_eq!(Balances::balance(&attester), attester_before + CHALLENGE_BOND / 2);
		assert_eq!(verifier_bond(attester), VERIFIER_BOND);
		// A summoner whose trace of the segment is the attester's has nothing to dispute.
		let id = crate::NextDisputeId::<Test>::get();
		assert_ok!(summon(overturned, CHALLENGER, attester, segment, &honest, &liar));
		assert_ok!(honest.answer(id, CHALLENGER));
		assert_ok!(liar.answer(id, attester));
		assert_eq!(ruling(id), (Ruling::DefenderWins, Grounds::NoDisagreement));
		assert_eq!(verifier_bond(attester), VERIFIER_BOND);
	});
}

#[test]
fn silence_in_a_summons_loses() {
	let job = four_segments();
	build_and_execute(|| {
		let (liar, mut honest, overturned, lazy) = convicted_liar(&job);
		let attester = lazy[0];
		// The summoner binds; the attester says nothing and loses.
		let id = crate::NextDisputeId::<Test>::get();
		assert_ok!(summon(overturned, CHALLENGER, attester, LIE_SEGMENT, &honest, &liar));
		assert_ok!(honest.answer(id, CHALLENGER));
		run_to_block(DisputeRecords::<Test>::get(id).unwrap().deadline + 1);
		assert_ok!(Disputes::time_out(RuntimeOrigin::signed(OWNER), id));
		assert_eq!(ruling(id), (Ruling::ChallengerWins, Grounds::Timeout));
		assert_eq!(verifier_bond(attester), VERIFIER_BOND - FALSE_ATTESTATION_SLASH);
	});
}

#[test]
fn a_summons_nobody_plays_is_lost_by_its_summoner() {
	let job = four_segments();
	build_and_execute(|| {
		let (liar, honest, overturned, lazy) = convicted_liar(&job);
		let id = crate::NextDisputeId::<Test>::get();
		assert_ok!(summon(overturned, CHALLENGER, lazy[0], LIE_SEGMENT, &honest, &liar));
		run_to_block(DisputeRecords::<Test>::get(id).unwrap().deadline + 1);
		assert_ok!(Disputes::time_out(RuntimeOrigin::signed(OWNER), id));
		assert_eq!(ruling(id), (Ruling::DefenderWins, Grounds::Timeout));
		assert_eq!(verifier_bond(lazy[0]), VERIFIER_BOND);
	});
}

#[test]
fn bad_summonses_are_refused_with_named_errors() {
	let job = four_segments();
	build_and_execute(|| {
		let (liar, honest, overturned, lazy) = convicted_liar(&job);
		let attester = lazy[0];
		let unsampled = (0..4).find(|s| {
			!Overturned::<Test>::get(overturned).unwrap().attesters.iter().any(|(w, samples)| *w == attester && samples.contains(s))
		});
		let origin = |who| RuntimeOrigin::signed(who);
		let start = liar.unit.start_opening(LIE_SEGMENT).unwrap();
		let summon_with = |who, id, segment, root, start| Disputes::summon(origin(who), id, attester, segment, root, start);
		assert_noop!(summon_with(CHALLENGER, overturned + 1, LIE_SEGMENT, honest.root(), start.clone()), Error::<Test>::NotSummonable);
		assert_noop!(summon_with(OWNER, overturned, LIE_SEGMENT, honest.root(), start.clone()), Error::<Test>::NotBondedChallenger);
		assert_noop!(summon_with(attester, overturned, LIE_SEGMENT, honest.root(), start.clone()), Error::<Test>::OwnAttestation);
		if let Some(segment) = unsampled {
			let start = liar.unit.start_opening(segment).unwrap();
			assert_noop!(summon_with(CHALLENGER, overturned, segment, honest.root(), start), Error::<Test>::NotAttested);
		}
		assert_noop!(summon_with(CHALLENGER, overturned, LIE_SEGMENT, liar.root(), start.clone()), Error::<Test>::NoDisagreement);
		// The start must be the proof's own boundary, not the summoner's.
		let own_start = honest.unit.start_opening(LIE_SEGMENT + 1).unwrap();
		assert_noop!(summon_with(CHALLENGER, overturned, LIE_SEGMENT, honest.root(), own_start), Error::<Test>::InvalidSegmentBinding);
		assert_noop!(summon_with(CHALLENGER, overturned, LIE_SEGMENT, honest.root(), None), Error::<Test>::InvalidSegmentBinding);
		// One summons per summoner and slot, and at most `MaxSummonsPerSegment` a slot.
		assert_ok!(summon_with(CHALLENGER, overturned, LIE_SEGMENT, honest.root(), start.clone()));
		assert_noop!(summon_with(CHALLENGER, overturned, LIE_SEGMENT, honest.root(), start.clone()), Error::<Test>::AlreadyChallenged);
		let slots: u32 = <Test as crate::Config>::MaxSummonsPerSegment::get();
		for sybil in 40..40 + u64::from(slots) - 1 {
			assert_ok!(Balances::transfer_allow_death(origin(OWNER), sybil, 10 * CHALLENGE_BOND));
			register(sybil, Role::Challenger, CHALLENGER_ROLE_BOND);
			assert_ok!(summon_with(sybil, overturned, LIE_SEGMENT, [sybil as u8; 32], start.clone()));
		}
		assert_ok!(Balances::transfer_allow_death(origin(OWNER), 60, 10 * CHALLENGE_BOND));
		register(60, Role::Challenger, CHALLENGER_ROLE_BOND);
		assert_noop!(summon_with(60, overturned, LIE_SEGMENT, honest.root(), start.clone()), Error::<Test>::TooManyDisputes);
		assert_eq!(Summonses::<Test>::get((overturned, attester, LIE_SEGMENT)).len() as u32, slots);
		// Kept while a summons is open, even past the window.
		let until = Overturned::<Test>::get(overturned).unwrap().summons_until;
		run_to_block(until + 1);
		assert_noop!(summon_with(60, overturned, LIE_SEGMENT, honest.root(), start), Error::<Test>::WindowClosed);
		assert_noop!(Disputes::forget_overturned(origin(OWNER), overturned), Error::<Test>::SummonsOpen);
	});
}

#[test]
fn a_lazy_attester_is_slashed_once_and_its_other_summonses_are_dismissed() {
	let job = four_segments();
	build_and_execute(|| {
		let (mut liar, mut honest, overturned, lazy) = convicted_liar(&job);
		let attester = lazy[0];
		let first = crate::NextDisputeId::<Test>::get();
		assert_ok!(summon(overturned, CHALLENGER, attester, LIE_SEGMENT, &honest, &liar));
		let second = crate::NextDisputeId::<Test>::get();
		assert_ok!(summon(overturned, SECOND_CHALLENGER, attester, LIE_SEGMENT, &honest, &liar));
		let second_before = Balances::balance(&SECOND_CHALLENGER);
		play(first, &mut liar, &mut honest);
		assert_eq!(verifier_bond(attester), VERIFIER_BOND - FALSE_ATTESTATION_SLASH);
		// The other summons is moot: its bond comes back, and the attester cannot be summoned again.
		assert!(!DisputeRecords::<Test>::contains_key(second));
		assert_eq!(Balances::balance(&SECOND_CHALLENGER), second_before + CHALLENGE_BOND);
		assert_noop!(summon(overturned, SECOND_CHALLENGER, attester, LIE_SEGMENT, &honest, &liar), Error::<Test>::NotAttested);
		assert_eq!(Overturned::<Test>::get(overturned).unwrap().open_summonses, 0);
	});
}

/// A dispute open at the upgrade, stored in version 0's layout (no `summons`), reads back as
/// it was after the migration and is played on to its ruling; run again, the migration
/// changes nothing.
#[test]
fn a_dispute_open_across_the_upgrade_goes_on_where_it_stood() {
	use crate::migrations::{AddSummons, DisputeInfoV0};
	use codec::Encode;
	use polkadot_sdk::frame_support::{
		storage::unhashed,
		traits::{GetStorageVersion, OnRuntimeUpgrade, StorageVersion},
	};
	let job = four_segments();
	build_and_execute(|| {
		let id_job = job.submit();
		let mut liar = Run::train(&job, 0, 8, Some(output_fault(LIE_STEP, 1)));
		let mut honest = Run::train(&job, 0, 8, None);
		prove(id_job, 0, SOLVER, &liar);
		let id = challenge(id_job, 0, CHALLENGER, &honest);
		assert_ok!(liar.answer(id, SOLVER));
		assert_ok!(honest.answer(id, CHALLENGER));
		let now = DisputeRecords::<Test>::get(id).unwrap();
		let old = DisputeInfoV0 {
			job: now.job,
			unit: now.unit,
			defender: now.defender,
			challenger: now.challenger,
			bond: now.bond,
			challenger_trace_root: now.challenger_trace_root,
			segment: now.segment,
			segment_start: now.segment_start,
			segment_traces: now.segment_traces,
			step: now.step,
			operator_roots: now.operator_roots,
			operator: now.operator,
			piece_roots: now.piece_roots,
			piece: now.piece,
			phase: now.phase.clone(),
			deadline: now.deadline,
			rounds: now.rounds,
		};
		unhashed::put_raw(&DisputeRecords::<Test>::hashed_key_for(id), &old.encode());
		StorageVersion::new(0).put::<crate::Pallet<Test>>();
		AddSummons::<Test>::on_runtime_upgrade();
		assert_eq!(crate::Pallet::<Test>::on_chain_storage_version(), 1);
		AddSummons::<Test>::on_runtime_upgrade();
		assert_eq!(DisputeRecords::<Test>::get(id).as_ref(), Some(&now));
		play(id, &mut liar, &mut honest);
		assert_eq!(ruling(id), (Ruling::ChallengerWins, Grounds::Referee));
	});
}
