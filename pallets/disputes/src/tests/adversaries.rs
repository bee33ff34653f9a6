//! Random adversaries against honest parties, played block by block through the real
//! staking, tasks, verification and disputes pallets over real kernel traces.
//!
//! A solver proves a unit honestly or with a lie; three drawn verifiers each play honestly
//! (re-executing their samples), lazily (always `Match`), always `Mismatch` (a root of no
//! run) or not at all; a challenger re-executes the unit and disputes a lie, or is absent;
//! a sybil of the solver disputes with a root of no run, or is absent; a lying defender
//! plays its disputes or falls silent; a node that cannot fetch the solver's data demands a
//! chunk of one of its checkpoints, or does not; and before any of it another solver may
//! claim the unit and abandon it, before its forced-error designation or after (it committed
//! a secret and the randomness came). When the lie is convicted before any step is found
//! (the liar fell silent, or withheld a chunk), its `Match` attesters become summonable: an
//! honest summoner summons those of the lie's segment, or not; the sybil summons every
//! attester of every segment up to the lie's with a wrong run of that segment (griefing the
//! true attesters, and trying to shield the lazy ones by summoning them first), or not; every
//! summoned attester defends with the proof's own trace. After every block: total issuance
//! is unchanged, no honest party holds less than it started with, the requester has paid at
//! most its request's bond, and the abandoner holds no more than it started with. At the end
//! every dispute and summons has ended and the kept proof is forgotten, the unit has left its
//! proof's states (paid, or back to the pool), a lie that an honest challenger watched, or
//! whose solver withheld a requested chunk, left the liar (the solver and its sybil together)
//! poorer and unpaid, every attester of the lie's segment that an honest summoner summoned
//! was slashed once, and a solver that abandoned the unit after its designation lost the
//! unit's collateral.

use super::{summons::summon, *};
use crate::Overturned;
use core::cell::RefCell;
use pallet_touchstone_verification::Verdict;
use proptest::prelude::*;

/// How a drawn verifier plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verifying {
	/// Re-executes its samples: `Mismatch` with the honest root if they hold the lie.
	Honest,
	/// Attests `Match` without checking.
	Lazy,
	/// Attests `Mismatch` with a root of no run, whatever the proof.
	AlwaysMismatch,
	/// Never commits.
	Silent,
}

fn verifying() -> impl Strategy<Value = Verifying> {
	prop_oneof![Just(Verifying::Honest), Just(Verifying::Lazy), Just(Verifying::AlwaysMismatch), Just(Verifying::Silent)]
}

/// A node that demands a chunk of the solver's data, bonded as a challenger.
const REQUESTER: u64 = 30;

/// How a solver that claims the unit first and never proves it leaves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Abandoning {
	/// Before its forced-error designation: it only times out.
	Early,
	/// After committing a secret and seeing the randomness that designates the unit.
	Designated,
}

fn abandoning() -> impl Strategy<Value = Option<Abandoning>> {
	proptest::option::of(prop_oneof![Just(Abandoning::Early), Just(Abandoning::Designated)])
}

/// `SECOND_SOLVER` claims unit 0 of `job` and abandons it as `how` says; returns once the
/// unit has left it (back in the pool, or offered to another solver).
fn abandon(job: u64, how: Abandoning) {
	assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(SECOND_SOLVER), job, 0));
	if how == Abandoning::Designated {
		assert_ok!(Verification::commit_secret(RuntimeOrigin::signed(SECOND_SOLVER), job, 0, [7; 32].into()));
	}
	for _ in 0..100 {
		run_to_block(System::block_number() + 1);
		if pallet_touchstone_tasks::Units::<Test>::get(job, 0).is_some_and(|unit| unit.solver != Some(SECOND_SOLVER)) {
			return;
		}
	}
	panic!("the abandoned unit never left its solver");
}

/// `SOLVER` takes unit 0 of `job` (accepting the scheduler's offer, or claiming it from the
/// pool) and commits `run`'s proof.
fn take_and_prove(job: u64, run: &Run) {
	let offered = pallet_touchstone_tasks::Units::<Test>::get(job, 0).is_some_and(|unit| unit.solver == Some(SOLVER));
	if !offered {
		return prove(job, 0, SOLVER, run);
	}
	assert_ok!(Tasks::accept_unit(RuntimeOrigin::signed(SOLVER), job, 0));
	let (proof, opening) = run.proof();
	assert_ok!(Tasks::submit_proof(RuntimeOrigin::signed(SOLVER), job, 0, proof, opening, None));
}

/// Everyone's worth: free and held funds together (bonds and challenge bonds are holds).
fn worth(who: u64) -> u64 {
	Balances::total_balance(&who)
}

/// Who summons the attesters of a proof convicted before any step was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Summoning {
	/// `CHALLENGER` summons every `Match` attester of the lie's segment with the honest run.
	honest: bool,
	/// `SECOND_CHALLENGER` summons every `Match` attester of every segment up to the lie's,
	/// first, each with a run that is wrong in that segment.
	sybil: bool,
}

/// A defender that answers a dispute from the proof's run, as the account it plays for.
type Defending = Option<u64>;

/// One play of the game; see the module's docs.
#[allow(clippy::too_many_arguments)]
fn play_adversaries(
	lie: Option<(u32, usize, usize, u32)>,
	verifiers: [Verifying; 3],
	honest_challenger: bool,
	sybil: bool,
	defender_plays: bool,
	request: Option<u32>,
	abandoned: Option<Abandoning>,
	summoning: Summoning,
) {
	let mut job = TinyJob::new(8, 1);
	job.spec.hyper.checkpoint_interval = 2;
	job.train.checkpoint_interval = 2;
	let fault = lie.map(|(step, operator, element, bit)| Fault::Output { step, operator, output: 0, element, bit });
	let solver_run = RefCell::new(Run::train(&job, 0, 8, fault));
	let honest_run = RefCell::new(Run::train(&job, 0, 8, None));
	let lies = solver_run.borrow().root() != honest_run.borrow().root();
	let lie_segment = lie.map(|(step, ..)| step / 2);
	// The sybil's runs, each wrong in one segment (its second step) and honest before it.
	let wrong_runs: Vec<RefCell<Run>> =
		(0..4).map(|segment| RefCell::new(Run::train(&job, 0, 8, Some(output_fault(2 * segment + 1, 1))))).collect();
	build_and_execute(|| {
		register_verifiers();
		assert_ok!(Balances::transfer_allow_death(RuntimeOrigin::signed(OWNER), REQUESTER, 10 * CHALLENGE_BOND));
		register(REQUESTER, Role::Challenger, CHALLENGER_ROLE_BOND);
		let id = job.submit();
		let abandoner_start = worth(SECOND_SOLVER);
		if let Some(how) = abandoned {
			abandon(id, how);
		}
		take_and_prove(id, &solver_run.borrow());
		let first = System::block_number() + 1;
		let plays: BTreeMap<u64, Verifying> = VERIFIERS.into_iter().zip(verifiers).collect();
		let mut honest: Vec<u64> = plays.iter().filter(|(_, play)| **play == Verifying::Honest).map(|(who, _)| *who).collect();
		if !lies {
			honest.push(SOLVER);
		}
		if honest_challenger || summoning.honest {
			honest.push(CHALLENGER);
		}
		let start: BTreeMap<u64, u64> = honest.iter().chain([&SOLVER, &SECOND_CHALLENGER]).map(|who| (*who, worth(*who))).collect();
		let liar_start = worth(SOLVER) + worth(SECOND_CHALLENGER);
		let requester_start = worth(REQUESTER);
		let issuance = Balances::total_issuance();
		// Who answers each dispute for its defender, from the proof's run, and the run its
		// challenger answers from (`None`: silent).
		let mut sides: BTreeMap<DisputeId, (Defending, Option<&RefCell<Run<'_>>>)> = BTreeMap::new();
		let defender_answers = (!lies || defender_plays).then_some(SOLVER);
		// The attesters an honest summoner summoned, with their bonds before.
		let mut summoned: Option<BTreeMap<u64, u64>> = None;
		let bogus = |who: u64| Verdict::Mismatch { trace_root: [who as u8; 32] };
		for block in first..first + 400 {
			run_to_block(block);
			if block == first {
				if sybil {
					let id_before = crate::NextDisputeId::<Test>::get();
					if Disputes::challenge(RuntimeOrigin::signed(SECOND_CHALLENGER), id, 0, [99; 32]).is_ok() {
						sides.insert(id_before, (defender_answers, None));
					}
				}
				if honest_challenger && lies {
					let dispute = challenge(id, 0, CHALLENGER, &honest_run.borrow());
					sides.insert(dispute, (defender_answers, Some(&honest_run)));
				}
				if let Some(step) = request {
					let id_before = crate::NextDisputeId::<Test>::get();
					assert_ok!(Disputes::request_chunk(RuntimeOrigin::signed(REQUESTER), id, 0, step, 0));
					sides.insert(id_before, (defender_answers, None));
				}
			}
			// The verification round, as each verifier plays it.
			if let Some(round) = pallet_touchstone_verification::Rounds::<Test>::get((id, 0)) {
				if let Some(drawn) = round.drawn.clone().filter(|_| !round.concluded) {
					for attestation in round.attestations.iter() {
						let who = attestation.verifier;
						let verdict = match plays[&who] {
							Verifying::Silent => continue,
							Verifying::Lazy => Verdict::Match,
							Verifying::AlwaysMismatch => bogus(who),
							Verifying::Honest => {
								let samples = Verification::samples(id, 0, &who).unwrap();
								match lie_segment.filter(|segment| lies && samples.contains(segment)) {
									Some(_) => Verdict::Mismatch { trace_root: honest_run.borrow().root() },
									None => Verdict::Match,
								}
							},
						};
						let salt = [who as u8; 32];
						if block < drawn.commit_ends && attestation.state == pallet_touchstone_verification::AttestationState::Drawn {
							let commitment = Verification::commitment(&verdict, &salt, &who);
							assert_ok!(Verification::commit(RuntimeOrigin::signed(who), id, 0, commitment));
						}
						if block >= drawn.commit_ends && block < drawn.reveal_ends {
							if let pallet_touchstone_verification::AttestationState::Committed(_) = attestation.state {
								let next = crate::NextDisputeId::<Test>::get();
								assert_ok!(Verification::reveal(RuntimeOrigin::signed(who), id, 0, verdict.clone(), salt));
								if crate::Disputes::<Test>::contains_key(next) {
									let side = matches!(verdict, Verdict::Mismatch { trace_root } if trace_root == honest_run.borrow().root());
									sides.insert(next, (defender_answers, side.then_some(&honest_run)));
								}
							}
						}
					}
				}
			}
			// Every open dispute: each side that plays answers what it is awaited for;
			// a deadline passed ends it against the silent.
			for (dispute, (defender_answers, challenger_side)) in &sides {
				let Some(status) = Disputes::status(*dispute) else { continue };
				if block > status.deadline {
					assert_ok!(Disputes::time_out(RuntimeOrigin::signed(OWNER), *dispute));
					continue;
				}
				if let (true, Some(defender)) = (status.awaiting_defender, defender_answers) {
					assert_ok!(solver_run.borrow_mut().answer(*dispute, *defender));
				}
				if !crate::Disputes::<Test>::contains_key(dispute) {
					continue;
				}
				let status = Disputes::status(*dispute).unwrap();
				if let (true, Some(run)) = (status.awaiting_challenger, challenger_side) {
					assert_ok!(run.borrow_mut().answer(*dispute, status.challenger));
				}
			}
			let _ = Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), id, 0);
			// A proof convicted before any step was found: its attesters are summoned.
			if let Some((overturned, snapshot)) = Overturned::<Test>::iter().next().filter(|_| summoned.is_none()) {
				let lie_segment = lie_segment.expect("only a lie is convicted");
				let attesters_of = |segment: u32| {
					snapshot.attesters.iter().filter(move |(_, samples)| samples.contains(&segment)).map(|(who, _)| *who)
				};
				if summoning.sybil {
					for segment in 0..=lie_segment {
						for attester in attesters_of(segment) {
							let run = &wrong_runs[segment as usize];
							let next = crate::NextDisputeId::<Test>::get();
							// Refused where the wrong run is the proof's own.
							if summon(overturned, SECOND_CHALLENGER, attester, segment, &run.borrow(), &solver_run.borrow()).is_ok() {
								sides.insert(next, (Some(attester), Some(run)));
							}
						}
					}
				}
				let mut bonds = BTreeMap::new();
				if summoning.honest {
					for attester in attesters_of(lie_segment) {
						let next = crate::NextDisputeId::<Test>::get();
						assert_ok!(summon(overturned, CHALLENGER, attester, lie_segment, &honest_run.borrow(), &solver_run.borrow()));
						sides.insert(next, (Some(attester), Some(&honest_run)));
						bonds.insert(attester, verifier_bond(attester));
					}
				}
				summoned = Some(bonds);
			}
			if let Some((overturned, _)) = Overturned::<Test>::iter().next() {
				let _ = Disputes::forget_overturned(RuntimeOrigin::signed(OWNER), overturned);
			}
			assert_eq!(Balances::total_issuance(), issuance, "block {block}: issuance changed");
			for who in &honest {
				assert!(worth(*who) >= start[who], "block {block}: honest {who} lost {} ", start[who] - worth(*who));
			}
			assert!(worth(REQUESTER) + AVAILABILITY_BOND >= requester_start, "block {block}: the requester paid more than its bond");
			assert!(worth(SECOND_SOLVER) <= abandoner_start, "block {block}: the abandoner profited");
			let settled = !matches!(unit_state(id, 0), UnitState::Proven | UnitState::Challenged);
			if settled && crate::Disputes::<Test>::iter().next().is_none() && Overturned::<Test>::iter().next().is_none() {
				break;
			}
		}
		assert!(crate::Disputes::<Test>::iter().next().is_none(), "every dispute ended");
		assert!(Overturned::<Test>::iter().next().is_none(), "the convicted proof was forgotten");
		for (attester, before) in summoned.unwrap_or_default() {
			assert_eq!(verifier_bond(attester), before - FALSE_ATTESTATION_SLASH, "the summoned attester {attester} of the lie");
		}
		assert!(!matches!(unit_state(id, 0), UnitState::Proven | UnitState::Challenged), "the unit ended");
		let withheld = request.is_some() && !defender_plays;
		if lies && (honest_challenger || withheld) {
			assert!(worth(SOLVER) + worth(SECOND_CHALLENGER) < liar_start, "the liar and its sybil profited");
			assert_ne!(unit_state(id, 0), UnitState::Finalized, "the lie was paid");
		}
		if abandoned == Some(Abandoning::Designated) {
			// The unit's collateral: three times its price.
			assert_eq!(worth(SECOND_SOLVER), abandoner_start - 3 * job.spec.price_per_unit, "the designated abandoner's forfeit");
		}
	});
}

proptest! {
	#![proptest_config(ProptestConfig { cases: 128, ..Default::default() })]

	/// Random strategies, each against honest parties; see the module's docs.
	#[test]
	fn no_adversary_costs_an_honest_party_or_profits_from_a_watched_lie(
		lie in proptest::option::of((0u32..8, 1usize..1_000, 0usize..8, 10u32..23)),
		verifiers in [verifying(), verifying(), verifying()],
		honest_challenger: bool,
		sybil: bool,
		defender_plays: bool,
		request in proptest::option::of(1u32..=4),
		abandoned in abandoning(),
		honest_summons: bool,
		sybil_summons: bool,
	) {
		let job = TinyJob::new(8, 1);
		let lie = lie.map(|(step, pick, element, bit)| (step, 1 + pick % (job.graph.nodes.len() - 2), element, bit));
		// A checkpoint of the unit's (every two steps) or its end.
		play_adversaries(lie, verifiers, honest_challenger, sybil, defender_plays, request.map(|boundary| 2 * boundary), abandoned, Summoning { honest: honest_summons, sybil: sybil_summons });
	}
}
