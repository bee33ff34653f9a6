//! The runtime's parameters agree with each other where the pallets cannot check it.
#![allow(clippy::arithmetic_side_effects)]

use polkadot_sdk::frame_support::traits::Get;
use touchstone_runtime::{
	configs::{DISPUTE_RESPONSE_WINDOW, MAX_DISPUTE_PHASES, MAX_SEGMENT_BLOCKS},
	Runtime,
};

/// The two history levels of a dispute (a unit's segments, then one segment's steps) take
/// at most `MAX_HISTORY_ROUNDS` rounds together, whatever the unit's step range and grid.
#[test]
fn the_segment_and_step_levels_take_at_most_the_history_rounds() {
	use touchstone_kernels::proof::merkle::depth;
	use touchstone_primitives::Segments;
	let mut worst = 0;
	for first_step in [0u32, 1, 7, u32::MAX / 3, u32::MAX - 2] {
		for steps in [1u32, 2, 3, 1000, u32::MAX / 2, u32::MAX - first_step] {
			for interval in [1u32, 2, 3, 64, 1 << 16, (1 << 16) + 1, u32::MAX / 2, u32::MAX] {
				let grid = Segments::new(first_step, steps, interval);
				let longest = (0..grid.count().min(3))
					.chain(grid.count().saturating_sub(3)..grid.count())
					.filter_map(|k| grid.range(k))
					.map(|range| range.len())
					.max()
					.unwrap_or(0);
				// Every segment but the first and last is a whole interval.
				let longest = longest.max(if grid.count() > 2 { interval as usize } else { 0 });
				worst = worst.max(depth(grid.count() as usize) + depth(longest));
			}
		}
	}
	assert!(worst <= touchstone_runtime::configs::MAX_HISTORY_ROUNDS, "{worst} rounds");
}

/// A solver whose proof is disputed cannot unbond out of reach of the slash: its funds
/// stay slashable while unbonding, for longer than a challenge window and the longest
/// dispute that can follow it.
#[test]
fn unbonding_outlasts_the_longest_dispute() {
	let unbonding: u32 = <Runtime as pallet_touchstone_staking::Config>::UnbondingPeriod::get();
	let window: u32 = <Runtime as pallet_touchstone_tasks::Config>::ChallengeWindow::get();
	let response: u32 = <Runtime as pallet_touchstone_disputes::Config>::ResponseWindow::get();
	assert_eq!(response, DISPUTE_RESPONSE_WINDOW);
	let segment: u32 = <Runtime as pallet_touchstone_tasks::Config>::MaxSegmentBlocks::get();
	assert_eq!(segment, MAX_SEGMENT_BLOCKS);
	// Every phase gives a side a response window and a segment's re-execution.
	let longest_dispute = MAX_DISPUTE_PHASES * (response + segment);
	assert!(unbonding > window + longest_dispute, "unbonding {unbonding} ≤ {window} + {longest_dispute}");
}

/// A verifier that reports a mismatch opens its dispute at the end of its round, which may
/// come after the challenge window: the unbonding period outlasts the round as well, and a
/// round concludes inside the window when the draw is prompt, so verification does not
/// delay honest pay.
#[test]
fn unbonding_outlasts_a_verification_round_and_its_dispute() {
	let unbonding: u32 = <Runtime as pallet_touchstone_staking::Config>::UnbondingPeriod::get();
	let window: u32 = <Runtime as pallet_touchstone_tasks::Config>::ChallengeWindow::get();
	let commit: u32 = <Runtime as pallet_touchstone_verification::Config>::CommitPeriod::get();
	let reveal: u32 = <Runtime as pallet_touchstone_verification::Config>::RevealPeriod::get();
	let beacon: u32 = <Runtime as pallet_touchstone_verification::Config>::RandomnessBlocks::get();
	// The earliest draw is in the block after the beacon's blocks, all after the proof's.
	let round = 1 + beacon + commit + reveal;
	assert!(round < window, "a prompt round ({round} blocks) of a job of short segments ends inside the window ({window})");
	// A round of the longest segments the chain accepts gives each verifier its samples' time
	// and one segment more, for a restart.
	let samples: u32 = <Runtime as pallet_touchstone_verification::Config>::SamplesPerVerifier::get();
	let round = round + (samples + 1) * MAX_SEGMENT_BLOCKS;
	let longest_dispute = MAX_DISPUTE_PHASES * (DISPUTE_RESPONSE_WINDOW + MAX_SEGMENT_BLOCKS);
	assert!(unbonding > window + round + longest_dispute, "unbonding {unbonding} too short");
}

/// A tolerance round whose distances escalate ends, committee and all, long before a
/// solver's unbonding funds leave reach, and the slash of an overturned solver is no more
/// than the bond the chain demands of it.
#[test]
fn an_escalation_ends_inside_the_unbonding_period_and_its_slash_is_payable() {
	let unbonding: u32 = <Runtime as pallet_touchstone_staking::Config>::UnbondingPeriod::get();
	let window: u32 = <Runtime as pallet_touchstone_tasks::Config>::ChallengeWindow::get();
	let commit: u32 = <Runtime as pallet_touchstone_verification::Config>::CommitPeriod::get();
	let reveal: u32 = <Runtime as pallet_touchstone_verification::Config>::RevealPeriod::get();
	let draw_timeout: u32 = <Runtime as pallet_touchstone_verification::Config>::DrawTimeout::get();
	// The round drawn as late as it may be, then the committee as late as it may be, each
	// given its segments' re-execution: the round's samples, then every flagged segment, each
	// with one segment more for a restart.
	let samples: u32 = <Runtime as pallet_touchstone_verification::Config>::SamplesPerVerifier::get();
	let verifiers: u32 = <Runtime as pallet_touchstone_verification::Config>::VerifiersPerUnit::get();
	let longest = 2 * (draw_timeout + commit + reveal) + (samples + 1 + verifiers * samples + 1) * MAX_SEGMENT_BLOCKS;
	assert!(unbonding > window + longest, "unbonding {unbonding} ≤ {window} + {longest}");
	let slash: u128 = <Runtime as pallet_touchstone_verification::Config>::InvalidProofSlash::get();
	let minimum: u128 = <Runtime as pallet_touchstone_staking::Config>::MinSolverBond::get();
	assert!(slash <= minimum, "a minimally bonded solver ({minimum}) cannot pay the slash ({slash})");
}

/// The verification hook's heaviest block (every bound reached: 16 conclusions, two of them
/// escalations that overturn a proof and roll back a 64-unit job's later ranges, 16 draws,
/// two of them whole committees, 16 randomness records) fits well inside the block.
#[test]
fn the_verification_hooks_heaviest_block_fits() {
	let most: u32 = <Runtime as pallet_touchstone_verification::Config>::MaxDrawsPerBlock::get();
	let escalations: u32 = <Runtime as pallet_touchstone_verification::Config>::MaxEscalationsPerBlock::get();
	let secrets: u32 = <Runtime as pallet_touchstone_verification::Config>::MaxSecretsPerBlock::get();
	let queue: u32 = <Runtime as pallet_touchstone_verification::Config>::MaxPendingDraws::get();
	let concluded = pallet_touchstone_verification::HookCount { all: most, escalations, stale: 0 };
	// Each queue's walk may pass every stale entry it holds.
	let drawn = pallet_touchstone_verification::HookCount { all: most, escalations, stale: queue };
	let recorded = pallet_touchstone_verification::HookCount { all: secrets, escalations: 0, stale: queue };
	let weight = pallet_touchstone_verification::Pallet::<Runtime>::hook_weight(concluded, drawn, recorded);
	let share = block_share("verification hook at its bounds", weight);
	assert!(share < 0.2, "the hook may take {:.1} % of a block", share * 100.0);
	let block = <Runtime as polkadot_sdk::frame_system::Config>::BlockWeights::get().max_block;
	assert!(weight.proof_size() < block.proof_size() / 2, "the hook's proof may take half a block");
}

/// `weight`'s share of a block's compute, printed with `what`.
fn block_share(what: &str, weight: polkadot_sdk::frame_support::weights::Weight) -> f64 {
	use polkadot_sdk::frame_support::weights::constants::WEIGHT_REF_TIME_PER_MILLIS;
	let block = <Runtime as polkadot_sdk::frame_system::Config>::BlockWeights::get().max_block;
	let share = weight.ref_time() as f64 / block.ref_time() as f64;
	let millis = weight.ref_time() as f64 / WEIGHT_REF_TIME_PER_MILLIS as f64;
	println!("{what}: {millis:.1} ms, {:.2} % of a block", share * 100.0);
	share
}

/// A verifier that attests a lie it re-executed loses more than one that stays silent, and
/// no more than the verifier bond the chain demands, so a minimally bonded verifier can
/// always pay it in full.
#[test]
fn a_false_attestation_costs_the_minimum_verifier_bond() {
	let slash: u128 = <Runtime as pallet_touchstone_verification::Config>::FalseAttestationSlash::get();
	let missed: u128 = <Runtime as pallet_touchstone_verification::Config>::MissedRevealSlash::get();
	let minimum: u128 = <Runtime as pallet_touchstone_staking::Config>::MinVerifierBond::get();
	assert!(slash > missed, "a false attestation ({slash}) must cost more than silence ({missed})");
	assert!(slash <= minimum, "a minimally bonded verifier ({minimum}) cannot pay the slash ({slash})");
}

/// Sybils that fill every summons slot of a false attestation's segment, so that no honest
/// summoner can open one before the window closes, must each lose its summons to free the
/// slot: together they forfeit more to the jackpot than the slash they would spare the
/// attester. And the summons window, with the segment's re-execution on top, ends inside
/// the unbonding period, so the summoned verifier's bond is still there.
#[test]
fn filling_the_summons_slots_costs_more_than_the_false_attestation_slash() {
	let slots: u32 = <Runtime as pallet_touchstone_disputes::Config>::MaxSummonsPerSegment::get();
	let bond: u128 = <Runtime as pallet_touchstone_disputes::Config>::ChallengeBond::get();
	let winner_share: polkadot_sdk::sp_runtime::Perbill = <Runtime as pallet_touchstone_disputes::Config>::WinnerShare::get();
	let lost_each = bond - winner_share * bond;
	let slash: u128 = <Runtime as pallet_touchstone_verification::Config>::FalseAttestationSlash::get();
	assert!(
		u128::from(slots) * lost_each > slash,
		"{slots} losing summonses forfeit {} to the jackpot, not more than the {slash} slash",
		u128::from(slots) * lost_each
	);
	let window: u32 = <Runtime as pallet_touchstone_disputes::Config>::SummonsWindow::get();
	let unbonding: u32 = <Runtime as pallet_touchstone_staking::Config>::UnbondingPeriod::get();
	let longest = window + MAX_SEGMENT_BLOCKS + MAX_DISPUTE_PHASES * (DISPUTE_RESPONSE_WINDOW + MAX_SEGMENT_BLOCKS);
	assert!(longest < unbonding, "a summons can end at block {longest} after the conviction, past unbonding ({unbonding})");
}

/// The jackpot pays out no more than it takes in, and its lottery pays for checking. A
/// forced unit's catchers share what the unit pays into the jackpot divided by the
/// forced-error rate, so a unit's expected outflow (the rate times that) is its inflow,
/// at any price and any rate. The jackpot's share is at least the verifiers', so the
/// lottery is worth, in expectation, at least the fair pay for checking a unit. A solver
/// that learned its unit's designation and let the unit time out, to retry for a forced
/// one, forfeits the unit's collateral: more than the retry's expected payout (the unit's
/// inflow). One payout leaves two thirds of the jackpot. The rate is a storage parameter:
/// read at genesis, its default.
#[test]
fn the_jackpot_pays_out_no_more_than_it_takes_in_and_its_lottery_pays_for_checking() {
	use polkadot_sdk::sp_runtime::Perbill;
	polkadot_sdk::sp_io::TestExternalities::default().execute_with(|| {
		let rate: Perbill = <Runtime as pallet_touchstone_verification::Config>::ForcedErrorRate::get();
		let cap: Perbill = <Runtime as pallet_touchstone_verification::Config>::MaxForcedErrorPayout::get();
		let to_jackpot: Perbill = <Runtime as pallet_touchstone_tasks::Config>::JackpotShare::get();
		let to_verifiers: Perbill = <Runtime as pallet_touchstone_tasks::Config>::VerifierShare::get();
		let collateral_percent: u32 = <Runtime as pallet_touchstone_tasks::Config>::CollateralPercent::get();
		assert_eq!(rate, Perbill::from_percent(1));
		assert!(cap <= Perbill::from_rational(1u32, 3u32));
		assert!(to_jackpot >= to_verifiers, "the lottery pays less than checking is worth");
		for price in [10_000_000_000u128, 1_000_000_000_000, 7_777_777_777_777_777, u128::from(u64::MAX)] {
			let inflow = to_jackpot.mul_floor(price);
			let payout = rate.saturating_reciprocal_mul(inflow);
			assert!(rate.mul_ceil(payout) <= inflow + 1, "at {price}: outflow {} over inflow {inflow}", rate.mul_ceil(payout));
			assert!(payout >= rate.saturating_reciprocal_mul(to_verifiers.mul_floor(price)));
			let collateral = price * u128::from(collateral_percent) / 100;
			assert!(collateral > inflow, "at {price}: abandoning costs {collateral}, a retry brings {inflow}");
		}
	});
}

/// At the largest job the chain accepts, one resolution costs at most a tenth of a block:
/// the openings of the costliest piece any accepted job may have (`MAX_PIECE_COST`) fit
/// `MaxOpeningsLen`, and judging openings that large is charged under 10 % of the block's
/// compute. (It was under 5 % with the weights taken on a machine that ran the referee's
/// wasm twice as fast; the bound is for the slowest machine the weights come from.) The ruling's aftermath (later step ranges rolled
/// back, other disputes dismissed) is charged on top, by what the ruling does.
#[test]
fn a_resolution_at_the_largest_accepted_job_costs_at_most_a_tenth_of_a_block() {
	use touchstone_kernels::referee::{MAX_OPENED_PIECES, MAX_OPENED_SEGMENTS};
	use touchstone_primitives::referee::MAX_PIECE_COST;
	let max_openings: u32 = <Runtime as pallet_touchstone_disputes::Config>::MaxOpeningsLen::get();
	// Words at four bytes, every hash counted as if sent (leaf hashes are not), and per
	// opened segment or piece its index, length prefix and multiproof index, with 1 KiB
	// for the fixed fields.
	let bound = MAX_PIECE_COST.words * 4 +
		MAX_PIECE_COST.hashes * 32 +
		9 * (MAX_OPENED_SEGMENTS + MAX_OPENED_PIECES) as u64 +
		1024;
	assert!(bound <= u64::from(max_openings), "the costliest piece's openings ({bound} bytes) exceed {max_openings}");
	let charged = pallet_touchstone_disputes::Pallet::<Runtime>::resolve_weight(max_openings);
	let block = touchstone_runtime::configs::RuntimeBlockWeights::get().max_block;
	let share = charged.ref_time() as f64 / block.ref_time() as f64;
	println!(
		"resolve at MaxOpeningsLen ({max_openings} bytes, openings bound {bound}): {:.1} ms, {:.2} % of a block",
		charged.ref_time() as f64 / 1e9,
		share * 100.0
	);
	assert!(charged.ref_time() * 10 <= block.ref_time(), "resolve is charged {:.2} % of a block", share * 100.0);
	// The largest piece a real step opens, benchmarked itself, and what it is charged.
	use pallet_touchstone_disputes::{weights::WeightInfo, LARGEST_PIECE_BENCHMARK_BYTES};
	let measured = <Runtime as pallet_touchstone_disputes::Config>::WeightInfo::resolve_largest_piece();
	let charged = pallet_touchstone_disputes::Pallet::<Runtime>::resolve_weight(LARGEST_PIECE_BENCHMARK_BYTES);
	println!(
		"resolve of the largest piece ({LARGEST_PIECE_BENCHMARK_BYTES} bytes): benchmarked {:.2} ms, charged {:.2} ms",
		measured.ref_time() as f64 / 1e9,
		charged.ref_time() as f64 / 1e9
	);
}

/// The staking hook's heaviest block (as many lapses as it checks in one block, each taking
/// a verifier out of the draw's tree) fits well inside the block.
#[test]
fn the_staking_hooks_heaviest_block_fits() {
	let weight = pallet_touchstone_staking::Pallet::<Runtime>::lapses_weight(pallet_touchstone_staking::MAX_LAPSES_PER_BLOCK);
	let share = block_share("staking hook at its bound", weight);
	assert!(share < 0.05, "the hook may take {:.1} % of a block", share * 100.0);
}

/// A lie loses in expectation at every unit price and every segment count the chain
/// accepts. A liar that falsifies one segment of a unit of `S` is caught by the draw alone
/// with probability `q = 1 − ((S − s)/S)^k` (`k` verifiers, `s` samples each); uncaught,
/// it gains at most the unit's price `p` (the pay for work it did not do), and caught, it
/// loses at least the unit's collateral `c·p`. So it loses in expectation when
/// `q·(1 + c) > 1`, checked in whole numbers for every `S` up to the bound. Challengers
/// watching in the window only raise `q`.
#[test]
fn a_lie_loses_in_expectation_at_every_accepted_segment_count() {
	let k: u32 = <Runtime as pallet_touchstone_verification::Config>::VerifiersPerUnit::get();
	let s: u32 = <Runtime as pallet_touchstone_verification::Config>::SamplesPerVerifier::get();
	let percent: u32 = <Runtime as pallet_touchstone_tasks::Config>::CollateralPercent::get();
	let most: u32 = <Runtime as pallet_touchstone_tasks::Config>::MaxSegmentsPerUnit::get();
	let mut worst = f64::INFINITY;
	for segments in 1..=most {
		let (all, missed) = (u128::from(segments).pow(k), u128::from(segments.saturating_sub(s)).pow(k));
		// q·(1 + c) > 1  ⇔  (all − missed)·(100 + percent) > 100·all.
		let caught = all - missed;
		assert!(
			caught * u128::from(100 + percent) > 100 * all,
			"a lie in one of {segments} segments pays: caught {caught} of {all}, collateral {percent} %"
		);
		worst = worst.min(caught as f64 / all as f64 * (1.0 + f64::from(percent) / 100.0) - 1.0);
	}
	println!("the least a lie loses in expectation, per unit of its price: {worst:.3}");
}

/// Neither of the verification pallet's global queues can be filled to shut anyone out:
/// each holds a unit once and has room for every open unit, and the secret queue drains
/// faster than assignments can refill it. A unit gets a new secret only with a new
/// solver, and a solver holds a unit at least `MinUnitTimeout` blocks unless it proves
/// it, so the open units commit at most `MaxOpenUnits / MinUnitTimeout` secrets a block
/// (more only by cancelling and resubmitting jobs, which pays the congestion fee again).
#[test]
fn the_verification_queues_hold_every_open_unit_and_secrets_drain_faster_than_they_come() {
	let open: u32 = <Runtime as pallet_touchstone_tasks::Config>::MaxOpenUnits::get();
	let timeout: u32 = <Runtime as pallet_touchstone_tasks::Config>::MinUnitTimeout::get();
	let queue: u32 = <Runtime as pallet_touchstone_verification::Config>::MaxPendingDraws::get();
	let secrets: u32 = <Runtime as pallet_touchstone_verification::Config>::MaxSecretsPerBlock::get();
	assert!(queue >= open, "the queues hold {queue} units of {open} open");
	assert!(secrets * timeout >= open, "{secrets} secrets a block drain slower than {open} units over {timeout} blocks commit");
}

/// A burst of proofs fills the draw queue (each a unit its sender holds with three times
/// its price bonded, and trained): the queue drains `MaxDrawsPerBlock` a block in
/// commitment order, and a seed ready for a later proof is ready for every earlier one
/// (it mixes fewer blocks), so a proof behind the burst is drawn at most the queue's
/// length over the draws a block after it, or after its own randomness if that comes
/// later. Drawn that late, its round still concludes inside the challenge window for a
/// job of short segments: the burst delays no honest unit's pay.
#[test]
fn a_full_draw_queue_delays_no_round_past_the_challenge_window() {
	use pallet_touchstone_verification::MAX_RANDOMNESS_BLOCKS;
	let window: u32 = <Runtime as pallet_touchstone_tasks::Config>::ChallengeWindow::get();
	let queue: u32 = <Runtime as pallet_touchstone_verification::Config>::MaxPendingDraws::get();
	let per_block: u32 = <Runtime as pallet_touchstone_verification::Config>::MaxDrawsPerBlock::get();
	let commit: u32 = <Runtime as pallet_touchstone_verification::Config>::CommitPeriod::get();
	let reveal: u32 = <Runtime as pallet_touchstone_verification::Config>::RevealPeriod::get();
	let behind_the_burst = queue.div_ceil(per_block);
	let slowest_seed = MAX_RANDOMNESS_BLOCKS + 1;
	let round = behind_the_burst.max(slowest_seed) + 1 + commit + reveal;
	println!("a round behind a full draw queue concludes {round} blocks after its proof; the window is {window}");
	assert!(round <= window, "a round behind a full draw queue ends {round} blocks after its proof, past the {window}-block window");
}

/// A solver that commits its forced-error secret after training its last segment still
/// has the verification pallet's `SECRET_DEADLINE_MARGIN` before its deadline: every
/// accepted job's timeout leaves `MinUnitTimeout` blocks beyond a segment.
#[test]
fn every_accepted_unit_leaves_time_for_its_forced_error_secret() {
	use pallet_touchstone_verification::SECRET_DEADLINE_MARGIN;
	let timeout: u32 = <Runtime as pallet_touchstone_tasks::Config>::MinUnitTimeout::get();
	assert!(timeout >= SECRET_DEADLINE_MARGIN, "MinUnitTimeout {timeout} < SECRET_DEADLINE_MARGIN {SECRET_DEADLINE_MARGIN}");
}

/// A block's length costs what its compute costs, so crowding a dispute's answers out with
/// long transactions is no cheaper than with heavy ones; and the largest `resolve` a
/// defender may have to send stays affordable beside what the dispute is about.
#[test]
fn length_is_priced_like_weight_and_the_largest_resolve_stays_affordable() {
	use polkadot_sdk::{frame_support::weights::WeightToFee, pallet_transaction_payment::Config as Payment};
	use touchstone_runtime::UNIT;
	let block = <Runtime as polkadot_sdk::frame_system::Config>::BlockWeights::get().max_block;
	let length = *<Runtime as polkadot_sdk::frame_system::Config>::BlockLength::get().max.get(
		polkadot_sdk::frame_support::dispatch::DispatchClass::Operational,
	);
	let weight_fee = <Runtime as Payment>::WeightToFee::weight_to_fee(&block);
	let length_fee = <Runtime as Payment>::LengthToFee::weight_to_fee(&polkadot_sdk::frame_support::weights::Weight::from_parts(u64::from(length), 0));
	let ratio = length_fee as f64 / weight_fee as f64;
	assert!((0.99..=1.01).contains(&ratio), "a full block's length costs {ratio:.3} of its compute");
	let openings: u32 = <Runtime as pallet_touchstone_disputes::Config>::MaxOpeningsLen::get();
	let resolve = <Runtime as Payment>::LengthToFee::weight_to_fee(&polkadot_sdk::frame_support::weights::Weight::from_parts(u64::from(openings), 0));
	let bond: u128 = <Runtime as pallet_touchstone_disputes::Config>::ChallengeBond::get();
	println!("the largest resolve's length fee: {:.3} TST", resolve as f64 / UNIT as f64);
	assert!(resolve < bond / 10, "the largest resolve's length costs {resolve}, a tenth of the bond is {}", bond / 10);
}

/// GPT-2 small's shape (50,257 tokens, context 1,024, 12 blocks of width 768, 12 heads) is a
/// job this chain takes: the referee can judge any piece of its step, and one step of four
/// sequences of 1,024 re-executes inside a segment's `MAX_SEGMENT_BLOCKS` at the reference
/// rate, so a job checkpointing every step passes both of `submit_job`'s cost checks.
#[test]
fn a_gpt2_small_shaped_job_is_judgeable_and_its_step_fits_a_segment() {
	use polkadot_sdk::sp_runtime::{BoundedVec, FixedU64};
	use touchstone_primitives::{
		reexecution_blocks,
		referee::{check_judgeable, MAX_PIECE_COST},
		step_multiply_adds, ContentRef, DatasetRef, HyperParams, ModelArch, Normalization, Optimizer, UnitScope,
	};
	use touchstone_runtime::configs::REFERENCE_WORK_PER_BLOCK;
	let model = ModelArch::Transformer {
		vocab: 50_257,
		context: 1_024,
		layers: 12,
		heads: 12,
		width: 768,
		mlp_ratio: 4,
		norm: Normalization::LayerNorm,
		tied_embeddings: true,
	};
	let hyper = HyperParams {
		steps: 1_000,
		batch_size: 4,
		learning_rate: FixedU64::from_rational(6, 10_000),
		optimizer: Optimizer::AdamW {
			beta1: FixedU64::from_rational(9, 10),
			beta2: FixedU64::from_rational(95, 100),
			epsilon: FixedU64::from_rational(1, 100_000_000),
			weight_decay: FixedU64::from_rational(1, 10),
		},
		grad_clip_norm: Some(FixedU64::from_u32(1)),
		seed: 1,
		checkpoint_interval: 1,
	};
	// A hundred million tokens of windows of 1,024.
	let dataset = DatasetRef {
		content: ContentRef { hash: [1; 32].into(), location: BoundedVec::truncate_from(b"tokens".to_vec()) },
		samples: 97_656,
		root: [2; 32].into(),
	};
	let scopes = [UnitScope::Steps { first_step: 0, steps: 1_000 }];
	let worst = check_judgeable(&model, &hyper, &dataset, &scopes).expect("judgeable");
	assert!(worst.words <= MAX_PIECE_COST.words && worst.hashes <= MAX_PIECE_COST.hashes && worst.operators <= MAX_PIECE_COST.operators);
	let step = step_multiply_adds(&model, &hyper);
	assert!(reexecution_blocks(step, 1, REFERENCE_WORK_PER_BLOCK) <= MAX_SEGMENT_BLOCKS, "{step} multiply-adds a step");
	// Five sequences a step would not: a segment is one step at least.
	let wider = HyperParams { batch_size: 5, ..hyper.clone() };
	assert!(reexecution_blocks(step_multiply_adds(&model, &wider), 1, REFERENCE_WORK_PER_BLOCK) > MAX_SEGMENT_BLOCKS);
	println!("GPT-2 small: worst piece {worst:?}; {step} multiply-adds a step");
}
