//! The attacks of `docs/protocol.md`, "Attacks considered", each played by a rational
//! adversary against the real pallets. Each test failed before the protocol change that
//! closed its attack and is kept as the regression test.

use super::*;
use touchstone_kernels::proof::{
	graph::{OpKind, Origin, Piece},
	merkle::SEGMENT,
};

impl<'a> Run<'a> {
	/// Records `steps` steps from step `first_step` of the honest model with `faults`,
	/// going on past non-finite values as the prover does (a lie may plant them). Its
	/// records are the plain run's wherever that run is finite.
	fn tracing(job: &'a TinyJob, first_step: u32, steps: u32, faults: Vec<Fault>) -> Self {
		Self::run(job, first_step, steps, honest_state(job, first_step), faults, true)
	}
}

/// A lie at step `planted` that keeps that step finite and makes the honest recomputation
/// of the next step overflow: one weight of the new state set to a huge finite value (the
/// bits where it differs from the honest value flipped, one fault a bit). Returns those
/// faults, and a sybil's: the same, a fault that changes the leaf of the next step's first
/// non-finite piece (and no piece before it), and one that changes its state hash.
fn planted_overflow(job: &TinyJob, planted: u32) -> (Vec<Fault>, Vec<Fault>) {
	let next = planted + 1;
	let graph = &job.graph;
	let commit = graph.nodes.iter().position(|node| node.kind == OpKind::Commit).unwrap();
	// Both runs trace as a prover does, from the start: the job is one segment.
	let mut honest = Trainer::new(CpuBackend, &job.model, &job.train, job.data.clone()).unwrap();
	honest.start_trace().unwrap();
	for _ in 0..planted {
		honest.step().unwrap();
	}
	let trace = honest.trace_step().unwrap();
	for &value in &graph.nodes[commit].inputs {
		let Some(Origin::Node { node: operator, output }) = graph.value(value).map(|v| v.origin) else { continue };
		for element in 0..graph.value(value).unwrap().len.min(16) {
			for target in [1.0e38f32, 3.0e38, -3.0e38] {
				let mask = trace.values[value].as_f32()[element].to_bits() ^ target.to_bits();
				let plant: Vec<Fault> = (0..32)
					.filter(|bit| mask & (1 << bit) != 0)
					.map(|bit| Fault::Output { step: planted, operator, output, element, bit })
					.collect();
				let mut trainer = Trainer::new(CpuBackend, &job.model, &job.train, job.data.clone()).unwrap();
				plant.iter().for_each(|fault| trainer.inject(*fault));
				trainer.start_trace().unwrap();
				if !(0..next).all(|_| trainer.step().is_ok()) {
					continue;
				}
				let Ok(trace) = trainer.trace_step() else { continue };
				let Some((first, piece)) = touchstone_kernels::referee::first_non_finite_piece(graph, &trace).unwrap() else {
					continue;
				};
				let nudge = match graph.piece(first, piece).unwrap() {
					Piece::Accumulator(chunk) => Fault::Accumulator { step: next, operator: first, chunk, element: 0, bit: 20 },
					Piece::Partial { .. } => Fault::Partial { step: next, operator: first, piece, element: 0, bit: 20 },
					Piece::Segment { value, segment } => {
						Fault::Output { step: next, operator: first, output: value, element: segment * SEGMENT, bit: 20 }
					},
					// Commit copies the optimizer's outputs, which would be non-finite first.
					Piece::Chunk { .. } => continue,
				};
				// The nudge alone may change no state hash (a partial feeds no output, and
				// non-finite values stay non-finite): a later finite output flipped too
				// makes the sybil's trace its own, still first different at the nudge.
				let liar = Run::tracing(job, 0, next + 1, plant.clone());
				for later in (first + 1)..graph.nodes.len() {
					for (output, &value) in graph.nodes[later].outputs.iter().enumerate() {
						let words = trace.values[value].as_f32();
						let Some(element) = words.iter().position(|word| word.is_finite()) else { continue };
						let tell = Fault::Output { step: next, operator: later, output, element, bit: 20 };
						let sybil: Vec<Fault> = plant.iter().copied().chain([nudge, tell]).collect();
						if Run::tracing(job, 0, next + 1, sybil.clone()).root() != liar.root() {
							return (plant, sybil);
						}
					}
				}
			}
		}
	}
	panic!("no weight of the tiny job set huge overflows the next step");
}

/// Attack 1: a liar plants a huge finite value at step k−1; a sybil challenger agrees with
/// every leaf before the first non-finite piece of step k and disputes that piece; the
/// referee's recomputation overflows. The ruling used to be `Diverged`: the unit failed,
/// every other dispute was dismissed, and nobody was slashed. A proof that commits a
/// value the honest recomputation cannot produce is a wrong proof, finite or not.
#[test]
fn attack_a_forged_divergence_convicts_the_liar() {
	let job = TinyJob::new(4, 1);
	let (plant, sybil_faults) = planted_overflow(&job, 2);
	build_and_execute(|| {
		let id = job.submit();
		let mut liar = Run::tracing(&job, 0, 4, plant.clone());
		let mut sybil = Run::tracing(&job, 0, 4, sybil_faults);
		let honest = Run::train(&job, 0, 4, None);
		assert_ne!(liar.root(), sybil.root());
		prove(id, 0, SOLVER, &liar);
		// An honest challenger disputes first; the liar plays its sybil's dispute first.
		let honest_dispute = challenge(id, 0, CHALLENGER, &honest);
		let forged = challenge(id, 0, SECOND_CHALLENGER, &sybil);
		let honest_before = Balances::balance(&CHALLENGER);
		play(forged, &mut liar, &mut sybil);
		let resolved = dispute_events();
		let ruling_of = |id: DisputeId| {
			resolved.iter().find_map(|event| match event {
				Event::DisputeResolved { dispute, ruling, grounds, .. } if *dispute == id => Some((*ruling, *grounds)),
				_ => None,
			})
		};
		assert_eq!(ruling_of(forged), Some((Ruling::ChallengerWins, Grounds::Referee)), "{resolved:?}");
		// The liar is slashed and its unit redone, not failed and refunded.
		assert_eq!(solver_bond(SOLVER), SOLVER_BOND - SOLVER_SLASH);
		assert_eq!(unit_state(id, 0), UnitState::Reassigned);
		// The honest challenger's dispute ended no worse than its own play would have.
		assert!(!DisputeRecords::<Test>::contains_key(honest_dispute));
		assert!(Balances::balance(&CHALLENGER) >= honest_before + CHALLENGE_BOND);
	});
}

/// Attack 4: sybils fill a unit's dispute slots with hopeless challenges, so a drawn
/// verifier's `Mismatch` reveal used to fail with `TooManyDisputes`, revert whole, and get
/// the verifier slashed for a missed reveal. Slots are now reserved for drawn verifiers.
#[test]
fn attack_filling_the_dispute_slots_cannot_silence_a_verifier() {
	use pallet_touchstone_verification::Verdict;
	let job = TinyJob::new(8, 1);
	build_and_execute(|| {
		register_verifiers();
		let id = job.submit();
		let liar = Run::train(&job, 0, 8, Some(output_fault(5, 1)));
		let honest = Run::train(&job, 0, 8, None);
		prove(id, 0, SOLVER, &liar);
		run_to_block(3);
		let drawn = pallet_touchstone_verification::Rounds::<Test>::get((id, 0)).unwrap().drawn.unwrap();
		// The liar's sybils take every slot a public challenger may take.
		let mut sybils = 0u64;
		for sybil in (CHALLENGER..=SECOND_CHALLENGER).chain(20..40) {
			if sybil >= 20 {
				assert_ok!(Balances::transfer_allow_death(RuntimeOrigin::signed(OWNER), sybil, 10 * CHALLENGE_BOND));
				register(sybil, Role::Challenger, CHALLENGER_ROLE_BOND);
			}
			let bogus = [sybil as u8; 32];
			match Disputes::challenge(RuntimeOrigin::signed(sybil), id, 0, bogus) {
				Ok(()) => sybils += 1,
				Err(error) => {
					assert_eq!(error, Error::<Test>::TooManyDisputes.into());
					break;
				},
			}
		}
		assert!(sybils >= 1);
		// Every drawn verifier re-executed the lie's segment or not; the first mismatches.
		let verdicts: Vec<(u64, Verdict)> = VERIFIERS
			.into_iter()
			.enumerate()
			.map(|(i, who)| (who, if i == 0 { Verdict::Mismatch { trace_root: honest.root().into() } } else { Verdict::Match }))
			.collect();
		for (who, verdict) in &verdicts {
			let commitment = Verification::commitment(verdict, &[*who as u8; 32], who);
			assert_ok!(Verification::commit(RuntimeOrigin::signed(*who), id, 0, commitment));
		}
		run_to_block(drawn.commit_ends);
		for (who, verdict) in &verdicts {
			assert_ok!(Verification::reveal(RuntimeOrigin::signed(*who), id, 0, verdict.clone(), [*who as u8; 32]));
		}
		// The mismatch opened its dispute beside the sybils'.
		let mismatching = VERIFIERS[0];
		let open = UnitDisputes::<Test>::get((id, 0));
		assert_eq!(open.len() as u64, sybils + 1);
		assert!(open.iter().any(|d| DisputeRecords::<Test>::get(d).unwrap().challenger == mismatching));
		// Nobody who revealed is slashed for missing the reveal.
		run_to_block(drawn.reveal_ends + 1);
		for who in VERIFIERS {
			assert_eq!(verifier_bond(who), VERIFIER_BOND);
		}
		// Played out so that the pallets end consistent: every dispute times out.
		let last = open.iter().map(|d| DisputeRecords::<Test>::get(d).unwrap().deadline).max().unwrap();
		run_to_block(last + 1);
		for dispute in open {
			if DisputeRecords::<Test>::contains_key(dispute) {
				assert_ok!(Disputes::time_out(RuntimeOrigin::signed(OWNER), dispute));
			}
		}
	});
}

/// Attack 3: a caught liar reports itself. An honest challenger disputes the lie first; the
/// liar's sybil disputes it later, and the liar answers the honest dispute but stays silent
/// against its sybil, which wins by timeout. The first dispute to conclude used to take
/// half the slash, and the honest one was dismissed unpaid. Now a conviction pays a small
/// fixed share of the slash, split equally among every dispute open over the unit.
#[test]
fn attack_a_liar_that_reports_itself_recovers_little_and_the_earlier_challenger_no_less() {
	let job = TinyJob::new(8, 1);
	build_and_execute(|| {
		let id = job.submit();
		let mut liar = Run::train(&job, 0, 8, Some(output_fault(5, 1)));
		let mut honest = Run::train(&job, 0, 8, None);
		prove(id, 0, SOLVER, &liar);
		let coalition = || Balances::total_balance(&SOLVER) + Balances::total_balance(&SECOND_CHALLENGER);
		let (coalition_before, honest_before) = (coalition(), Balances::total_balance(&CHALLENGER));
		let earlier = challenge(id, 0, CHALLENGER, &honest);
		let sybil = challenge(id, 0, SECOND_CHALLENGER, &honest);
		// The liar keeps the honest dispute going and lets its sybil's run out.
		run_to_block(System::block_number() + 2);
		assert_ok!(liar.answer(earlier, SOLVER));
		assert_ok!(honest.answer(earlier, CHALLENGER));
		assert_ok!(honest.answer(sybil, SECOND_CHALLENGER));
		let deadline = DisputeRecords::<Test>::get(sybil).unwrap().deadline;
		assert!(DisputeRecords::<Test>::get(earlier).unwrap().deadline > deadline);
		run_to_block(deadline + 1);
		assert_ok!(Disputes::time_out(RuntimeOrigin::signed(OWNER), sybil));
		assert_eq!(ruling(sybil), (Ruling::ChallengerWins, Grounds::Timeout));
		assert!(!DisputeRecords::<Test>::contains_key(earlier));
		let lost = coalition_before - coalition();
		let honest_paid = Balances::total_balance(&CHALLENGER) - honest_before;
		let sybil_paid = SOLVER_SLASH - lost;
		// The liar recovers at most a tenth of its slash through its sybil ...
		assert!(sybil_paid <= SOLVER_SLASH / 10, "the liar recovered {sybil_paid} of {SOLVER_SLASH}");
		// ... and the honest challenger that opened first is paid no less than the sybil.
		assert!(honest_paid >= sybil_paid, "honest {honest_paid}, sybil {sybil_paid}");
	});
}

/// Attack 7: the slash for a wrong proof was `SolverSlash` whatever the unit was worth,
/// and a solver's bond had to cover only a share of its units' value. A solver
/// bonded just enough took a unit worth several times its slash and lied: caught, it lost
/// less than the unit paid; uncaught, it was paid in full. Now a wrong proof costs at least
/// the unit's collateral, a multiple of its price that outweighs the draw's chance to miss
/// the lie, and the bond must cover the collateral of every unit held.
#[test]
fn attack_a_lie_on_a_valuable_unit_costs_more_than_it_pays() {
	let mut job = TinyJob::new(8, 1);
	let price = 2 * SOLVER_SLASH;
	job.spec.price_per_unit = price;
	job.spec.budget = price;
	build_and_execute(|| {
		let id = job.submit();
		// Bonded below what the unit's lie would cost, the solver cannot take it.
		let mut liar = Run::train(&job, 0, 8, Some(output_fault(5, 1)));
		let mut honest = Run::train(&job, 0, 8, None);
		// Bonded enough, it takes the unit and lies; convicted, it loses more than the unit pays.
		assert_ok!(Staking::bond_more(RuntimeOrigin::signed(SOLVER), Role::Solver, 5 * price));
		let before = solver_bond(SOLVER);
		prove(id, 0, SOLVER, &liar);
		let dispute = challenge(id, 0, CHALLENGER, &honest);
		play(dispute, &mut liar, &mut honest);
		assert_eq!(ruling(dispute), (Ruling::ChallengerWins, Grounds::Referee));
		let slashed = before - solver_bond(SOLVER);
		assert!(slashed > price, "a lie on a unit worth {price} cost {slashed}");
	});
}

/// Medium finding, delaying payment: every dispute that failed opened the challenge window
/// again in full, so sybil challengers, each losing one hopeless dispute at the end of the
/// window, kept an honest unit unpaid for as long as they kept paying lost bonds. Now the
/// window reopens at most `MaxWindowReopenings` times a proof; after that, only disputes
/// opened inside the window's own time count, and the unit is paid when they end.
#[test]
fn attack_lost_challenges_cannot_delay_payment_without_bound() {
	let job = TinyJob::new(4, 1);
	let honest = Run::train(&job, 0, 4, None);
	build_and_execute(|| {
		let id = job.submit();
		prove(id, 0, SOLVER, &honest);
		let proven_at = System::block_number();
		let mut reopened = 0u32;
		for sybil in 20u64..30 {
			assert_ok!(Balances::transfer_allow_death(RuntimeOrigin::signed(OWNER), sybil, 10 * CHALLENGE_BOND));
			register(sybil, Role::Challenger, CHALLENGER_ROLE_BOND);
			let window_ends = <Tasks as touchstone_primitives::traits::UnitProofs<_, _, _>>::proven_unit(id, 0).unwrap().window_ends;
			run_to_block(window_ends.max(System::block_number() + 1) - 1);
			let id_before = crate::NextDisputeId::<Test>::get();
			if Disputes::challenge(RuntimeOrigin::signed(sybil), id, 0, [sybil as u8; 32]).is_err() {
				break;
			}
			// The sybil abandons its dispute: it loses by timeout.
			run_to_block(DisputeRecords::<Test>::get(id_before).unwrap().deadline + 1);
			assert_ok!(Disputes::time_out(RuntimeOrigin::signed(OWNER), id_before));
			reopened += 1;
		}
		// However many sybils try, the unit is paid within a bounded time of its proof.
		let bound = proven_at + 4 * (CHALLENGE_WINDOW + RESPONSE_WINDOW + 1);
		run_to_block(System::block_number().max(proven_at + CHALLENGE_WINDOW) + 1);
		assert!(
			System::block_number() <= bound && Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), id, 0).is_ok(),
			"{reopened} lost challenges held the unit unpaid until block {} (bound {bound})",
			System::block_number()
		);
	});
}

/// Attack 9, its withholding half: nothing on chain made a solver serve what its proof
/// commits, so a liar that served no checkpoint and no model could not be checked in
/// time, and its proof stood and was paid. Now any bonded node may demand a chunk of a
/// state the proof commits (a checkpoint or the final model); a solver that does not post
/// it, with its proofs, within the response window loses as a liar: slashed the unit's
/// collateral, the unit redone, the requester paid like any challenger and its bond
/// returned. An honest solver posts the chunk and keeps its proof, and the requester's
/// small bond pays it for the trouble.
#[test]
fn attack_a_solver_that_withholds_its_data_loses_its_proof() {
	let mut job = TinyJob::new(8, 1);
	job.spec.hyper.checkpoint_interval = 4;
	job.train.checkpoint_interval = 4;
	let liar = Run::train(&job, 0, 8, Some(output_fault(5, 1)));
	let honest = Run::train(&job, 0, 8, None);
	build_and_execute(|| {
		let id = job.submit();
		prove(id, 0, SOLVER, &liar);
		// The liar serves nothing; the challenger cannot fetch its checkpoint at step 4,
		// so it demands a chunk of it. The liar stays silent.
		let request = crate::NextDisputeId::<Test>::get();
		assert_ok!(Disputes::request_chunk(RuntimeOrigin::signed(CHALLENGER), id, 0, 4, 0));
		assert_eq!(challenge_bond_held(CHALLENGER), AVAILABILITY_BOND);
		assert_eq!(unit_state(id, 0), UnitState::Challenged);
		let (challenger_before, bond_before) = (Balances::balance(&CHALLENGER), solver_bond(SOLVER));
		run_to_block(DisputeRecords::<Test>::get(request).unwrap().deadline + 1);
		assert_ok!(Disputes::time_out(RuntimeOrigin::signed(OWNER), request));
		assert_eq!(ruling(request), (Ruling::ChallengerWins, Grounds::Timeout));
		assert_eq!(solver_bond(SOLVER), bond_before - SOLVER_SLASH);
		assert_eq!(Balances::balance(&CHALLENGER), challenger_before + conviction_reward(SOLVER_SLASH) + AVAILABILITY_BOND);
		assert_eq!(unit_state(id, 0), UnitState::Reassigned);

		// An honest solver posts what is asked, the checkpoint's chunk or its final model's,
		// and keeps its proof; the bond pays it.
		let mut honest = honest;
		prove(id, 0, SECOND_SOLVER, &honest);
		for step in [4, 8] {
			let request = crate::NextDisputeId::<Test>::get();
			let solver_before = Balances::balance(&SECOND_SOLVER);
			assert_ok!(Disputes::request_chunk(RuntimeOrigin::signed(CHALLENGER), id, 0, step, 0));
			assert_ok!(honest.answer(request, SECOND_SOLVER));
			assert_eq!(ruling(request), (Ruling::DefenderWins, Grounds::Provided));
			let share = <Test as crate::Config>::WinnerShare::get().mul_floor(AVAILABILITY_BOND);
			assert_eq!(Balances::balance(&SECOND_SOLVER), solver_before + share);
			assert_eq!(unit_state(id, 0), UnitState::Proven);
		}
	});
}

/// A request names a state the solver keeps and a chunk it has; a posted chunk must be the
/// one asked, proven against the proof's own commitments, from the defender. Each refusal
/// names its error and changes nothing.
#[test]
fn bad_chunk_requests_and_answers_are_refused_with_named_errors() {
	let mut job = TinyJob::new(8, 1);
	job.spec.hyper.checkpoint_interval = 4;
	job.train.checkpoint_interval = 4;
	let honest = Run::train(&job, 0, 8, None);
	build_and_execute(|| {
		let id = job.submit();
		prove(id, 0, SOLVER, &honest);
		let request = |step, chunk| Disputes::request_chunk(RuntimeOrigin::signed(CHALLENGER), id, 0, step, chunk);
		for step in [0, 3, 5, 9] {
			assert_noop!(request(step, 0), Error::<Test>::NotACheckpoint);
		}
		let graph = touchstone_primitives::referee::job_graph(&job.spec.model, &job.spec.hyper).unwrap();
		let requests = touchstone_primitives::referee::state_chunks(&graph) as u32;
		assert!(requests >= 1);
		assert_noop!(request(4, requests), Error::<Test>::NoSuchChunk);
		assert_noop!(
			Disputes::request_chunk(RuntimeOrigin::signed(SOLVER), id, 0, 4, 0),
			Error::<Test>::OwnProof
		);
		let dispute = crate::NextDisputeId::<Test>::get();
		assert_ok!(request(4, 0));
		assert_noop!(request(8, 0), Error::<Test>::AlreadyChallenged);
		let right = state_chunk(&honest.state_before(4), 0, honest.boundary_opening(4)).unwrap();
		// Another step's state, a changed word, or the challenger posting: refused.
		let other_step = state_chunk(&honest.state_before(8), 0, honest.boundary_opening(8)).unwrap();
		let mut changed = right.clone();
		changed.chunks[0][0] ^= 1;
		for wrong in [other_step, changed] {
			assert_noop!(
				Disputes::provide_chunk(RuntimeOrigin::signed(SOLVER), dispute, wrong),
				Error::<Test>::InvalidChunk
			);
		}
		assert_noop!(
			Disputes::provide_chunk(RuntimeOrigin::signed(CHALLENGER), dispute, right.clone()),
			Error::<Test>::NotTheDefender
		);
		// The request's phase takes no move of a trace dispute.
		assert_noop!(
			Disputes::resolve(RuntimeOrigin::signed(SOLVER), dispute, dummy_openings()),
			Error::<Test>::WrongPhase
		);
		assert_ok!(Disputes::provide_chunk(RuntimeOrigin::signed(SOLVER), dispute, right));
	});
}

/// Attack 7's arithmetic for a solver lying on several units at once: its bond covers the
/// collateral of every unit it holds, and a conviction slashes `SolverSlash` where that is
/// more than the unit's collateral, so the first convictions take more than their units'
/// share and the bond may be gone before the last. Whatever the order, what the liar loses
/// in all is at least the collateral of every unit convicted: the bond it had covered all
/// of them. Here two lies (as many units as a solver may hold in the mock) on units of
/// collateral 480 each, a bond of 1,000 and a slash floor of 500: the convictions take 500
/// and 500, and 1,000 ≥ 2 × 480.
#[test]
fn lies_on_several_units_lose_at_least_their_collateral_together() {
	let mut job = TinyJob::new(8, 1);
	let price = 160;
	job.spec.price_per_unit = price;
	job.spec.budget = price;
	let collateral = 3 * price;
	let mut liar = Run::train(&job, 0, 8, Some(output_fault(5, 1)));
	let mut honest = Run::train(&job, 0, 8, None);
	build_and_execute(|| {
		let jobs: Vec<u64> = (0..2).map(|_| job.submit()).collect();
		// Its bond covers the two units' collateral, and no more.
		assert!(solver_bond(SOLVER) >= 2 * collateral && solver_bond(SOLVER) < 3 * collateral);
		assert!(SOLVER_SLASH > collateral, "the slash floor is above each unit's collateral");
		for &id in &jobs {
			prove(id, 0, SOLVER, &liar);
		}
		let before = solver_bond(SOLVER);
		for &id in &jobs {
			let dispute = challenge(id, 0, CHALLENGER, &honest);
			play(dispute, &mut liar, &mut honest);
			assert_eq!(ruling(dispute).0, Ruling::ChallengerWins);
			assert_eq!(unit_state(id, 0), UnitState::Reassigned);
		}
		let lost = before - solver_bond(SOLVER);
		assert!(lost >= 2 * collateral, "two lies cost {lost}, less than their collateral {}", 2 * collateral);
	});
}

/// Issue 23's deadlines sized to the work, for disputes: every phase gives a side
/// `ResponseWindow` and the blocks a checkpoint interval of the job's steps takes to
/// re-execute at `ReferenceWorkPerBlock` (an answer below the step level re-executes the
/// disputed step from the checkpoint before it). An honest defender of a unit with long
/// segments is not late by construction.
#[test]
fn a_dispute_over_long_segments_gives_each_phase_the_time_a_segment_takes() {
	let job = TinyJob::shaped(4, 20_000, 3, 4, 24, 8, 1);
	let honest = Run::train(&job, 0, 8, None);
	build_and_execute(|| {
		let id = job.submit();
		prove(id, 0, SOLVER, &honest);
		let dispute = crate::NextDisputeId::<Test>::get();
		assert_ok!(Disputes::challenge(RuntimeOrigin::signed(CHALLENGER), id, 0, [7; 32]));
		// (4 · 20,000 + 20,000 · 3) multiply-adds a sample, three products, batch 4, eight
		// steps (the checkpoint interval) at 10⁶ a block: 13 blocks beyond the window.
		let step = 3 * 4 * (4 * 20_000 + 20_000 * 3);
		assert_eq!(touchstone_primitives::step_multiply_adds(&job.spec.model, &job.spec.hyper), step);
		let deadline = DisputeRecords::<Test>::get(dispute).unwrap().deadline;
		assert_eq!(deadline, System::block_number() + RESPONSE_WINDOW + 8 * step / 1_000_000);
		assert_eq!(deadline, System::block_number() + RESPONSE_WINDOW + 13);
	});
}

/// Attack 3, its last part: a caught liar falls silent against its own sybil before the step
/// level, so nothing shows which segment was wrong, and its verifier, which attested `Match`
/// without re-executing anything, kept its bond. Now the conviction keeps the proof, and the
/// honest challenger (whose dispute was dismissed) summons the lazy verifier over the first
/// segment where the proof leaves its own run: the verifier must bind an honest trace to the
/// proof's wrong boundary, cannot, and is slashed.
#[test]
fn attack_a_liar_silent_against_its_sybil_cannot_shield_its_lazy_verifier() {
	let job = TinyJob::new(8, 1).with_interval(2);
	build_and_execute(|| {
		register_verifiers();
		let id = job.submit();
		let mut liar = Run::train(&job, 0, 8, Some(output_fault(5, 1)));
		let mut honest = Run::train(&job, 0, 8, None);
		prove(id, 0, SOLVER, &liar);
		run_to_block(3);
		attest_match(id);
		let earlier = challenge(id, 0, CHALLENGER, &honest);
		let sybil = challenge(id, 0, SECOND_CHALLENGER, &honest);
		assert_ok!(honest.answer(sybil, SECOND_CHALLENGER));
		run_to_block(DisputeRecords::<Test>::get(sybil).unwrap().deadline + 1);
		assert_ok!(Disputes::time_out(RuntimeOrigin::signed(OWNER), sybil));
		assert!(!DisputeRecords::<Test>::contains_key(earlier));
		assert!(false_attestations().is_empty(), "silence showed no step");
		// The first segment where the proof leaves the honest run holds the lie.
		let first_wrong = (0..4u32).find(|s| liar.unit.boundaries[*s as usize] != honest.unit.boundaries[*s as usize]).unwrap();
		let (lazy, _) = super::summons::attesters_of(sybil, first_wrong);
		assert!(!lazy.is_empty());
		for verifier in lazy {
			let summons = crate::NextDisputeId::<Test>::get();
			assert_ok!(super::summons::summon(sybil, CHALLENGER, verifier, first_wrong, &honest, &liar));
			play(summons, &mut liar, &mut honest);
			assert_eq!(ruling(summons), (Ruling::ChallengerWins, Grounds::Referee));
			assert_eq!(verifier_bond(verifier), VERIFIER_BOND - FALSE_ATTESTATION_SLASH);
		}
	});
}
