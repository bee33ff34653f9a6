//! What a light client downloads for one pass of a watching challenger and of a verifier:
//! the storage proof of what the pass reads, with the chain as full as the runtime allows
//! (`MaxOpenUnits` units open, every one proven inside its challenge window, each round
//! with its verifiers drawn). A light client reads storage, and runs runtime calls, only
//! against proofs like these, so their size is what a pass costs it. Run with
//! `scripts/bench-keyed-reads.sh` (or `cargo run -p touchstone-runtime --example bench_keyed_reads`).
//!
//! The state is written straight into the runtime's storage, with the runtime's own
//! types, hashers and keys: a pass's proof depends on the trie, not on how it was filled.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::indexing_slicing, clippy::arithmetic_side_effects)]

use codec::Encode;
use pallet_touchstone_tasks::{Jobs, ProvenAt, Units};
use pallet_touchstone_verification::{Attestation, AttestationState, DrawnRound, Round, RoundKind, Rounds, SolverSecret, VerifierRounds};
use polkadot_sdk::frame_support::traits::Get;
use polkadot_sdk::sp_io::TestExternalities;
use polkadot_sdk::sp_runtime::{AccountId32, BoundedVec, FixedU64, Perbill};
use touchstone_primitives::{referee::bookkeeping_spec, Job, JobStatus, LearningProof, TrainingMetrics, UnitScope, UnitState, WorkUnit};
use touchstone_runtime::{Runtime, Tasks, Verification};

/// Verifiers registered: each round draws `VERIFIERS_PER_ROUND` of them.
const VERIFIERS: u32 = 64;
const VERIFIERS_PER_ROUND: u32 = 3;

fn account(seed: u32) -> AccountId32 {
	let mut bytes = [0u8; 32];
	bytes[..4].copy_from_slice(&seed.to_le_bytes());
	bytes[4] = 0xac;
	AccountId32::new(bytes)
}

/// The size of the proof of everything `read` reads.
fn proof_bytes<R>(ext: &mut TestExternalities, read: impl FnOnce() -> R) -> (R, usize) {
	let (result, proof) = ext.execute_and_prove(read);
	(result, proof.encoded_size())
}

fn main() {
	let open_units: u32 = <Runtime as pallet_touchstone_tasks::Config>::MaxOpenUnits::get();
	let units_per_job: u32 = <Runtime as pallet_touchstone_tasks::Config>::MaxUnitsPerJob::get();
	let window: u32 = <Runtime as pallet_touchstone_tasks::Config>::ChallengeWindow::get();
	let jobs = open_units.div_ceil(units_per_job);
	let now = 10 * window;
	let mut ext = TestExternalities::default();
	ext.execute_with(|| {
		polkadot_sdk::frame_system::Pallet::<Runtime>::set_block_number(now);
		let solver = account(1_000_000);
		let mut unit_number = 0u32;
		for job in 0..u64::from(jobs) {
			let mut spec = bookkeeping_spec::<u128>(100, units_per_job, 10, [job as u8; 32]);
			spec.price_per_unit = 1_000;
			Jobs::<Runtime>::insert(
				job,
				Job {
					owner: account(2_000_000),
					spec,
					status: JobStatus::Active,
					units: units_per_job,
					units_final: 0,
					escrow: 0,
					deposit: 0,
					submitted_at: 1,
					result: None,
					removable_at: None,
					tolerance: Default::default(),
				},
			);
			for index in 0..units_per_job {
				// Proven over the whole window, evenly: a pass of a running watcher sees one
				// block's share.
				let proven_at = now - unit_number % window;
				let root = [(unit_number % 251) as u8; 32];
				let proof = LearningProof {
					trace_root: root.into(),
					steps: 100,
					start_state_root: [1; 32].into(),
					final_state_root: [2; 32].into(),
					metrics: TrainingMetrics { loss: FixedU64::from_rational(1, 2), accuracy: Perbill::from_percent(50) },
				};
				Units::<Runtime>::insert(
					job,
					index,
					WorkUnit {
						scope: UnitScope::Steps { first_step: index * 100, steps: 100 },
						state: UnitState::Proven,
						solver: Some(solver.clone()),
						accepted: true,
						deadline: None,
						pool_deadline: None,
						passed_by: None,
						start_state_root: Some([1; 32].into()),
						last_checkpoint: None,
						proof: Some(proof),
						proven_at: Some(proven_at),
						attempts: 1,
					},
				);
				ProvenAt::<Runtime>::insert(proven_at, (job, index), ());
				let drawn: Vec<AccountId32> =
					(0..VERIFIERS_PER_ROUND).map(|k| account((unit_number * VERIFIERS_PER_ROUND + k) % VERIFIERS)).collect();
				for verifier in &drawn {
					VerifierRounds::<Runtime>::insert(verifier, (job, index), ());
				}
				Rounds::<Runtime>::insert(
					(job, index),
					Round {
						trace_root: root,
						committed_at: proven_at,
						drawn: Some(DrawnRound { seed: [3; 32], commit_ends: proven_at + 20, reveal_ends: proven_at + 30 }),
						kind: RoundKind::Exact,
						attestations: BoundedVec::truncate_from(
							drawn.into_iter().map(|verifier| Attestation { verifier, state: AttestationState::Drawn }).collect(),
						),
						concluded: false,
						secret: SolverSecret::NotRequired,
					},
				);
				unit_number += 1;
			}
		}
	});
	ext.commit_all().expect("the state commits");

	println!(
		"{unit_number} units open in {jobs} jobs, every one proven inside its {window}-block challenge window; {VERIFIERS} verifiers, {VERIFIERS_PER_ROUND} drawn per round",
		unit_number = jobs * units_per_job
	);
	println!("| pass | reads | units or rounds read | proof bytes |");
	println!("| --- | --- | --- | --- |");
	let (count, bytes) = proof_bytes(&mut ext, || Units::<Runtime>::iter().count());
	println!("| watcher, whole map (before) | every `tasks.units` entry | {count} | {bytes} |");
	let (open, bytes) = proof_bytes(&mut ext, || Tasks::proofs_since(0).len());
	println!("| watcher, first pass | `proofs_since(0)`: the whole window | {open} | {bytes} |");
	let (open, bytes) = proof_bytes(&mut ext, || Tasks::proofs_since(now).len());
	println!("| watcher, each later pass | `proofs_since(last final + 1)`: one new block | {open} | {bytes} |");
	let (count, bytes) = proof_bytes(&mut ext, || Rounds::<Runtime>::iter().count());
	println!("| verifier, whole map (before) | every `verification.rounds` entry | {count} | {bytes} |");
	let verifier = account(7);
	let (count, bytes) = proof_bytes(&mut ext, || {
		Verification::rounds_of(&verifier).into_iter().filter_map(|key| Rounds::<Runtime>::get(key)).count()
	});
	println!("| verifier, each pass | `rounds_of(verifier)` and those rounds | {count} | {bytes} |");
}
