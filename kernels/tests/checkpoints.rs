//! Checkpoints: safetensors files addressed by their hash, verified before
//! use, and resuming from one reproduces the later records and boundaries bit for bit.

mod support;

use std::path::PathBuf;

use support::*;
use touchstone_kernels::job::checkpoint::{run_with_checkpoints, Checkpoint, CheckpointError};
use touchstone_kernels::job::trace::{Boundary, Trainer};
use touchstone_kernels::arith::canonical_bits;
use touchstone_kernels::proof::chain::record_hash;
use touchstone_kernels::CpuBackend;

/// A fresh directory under the system temp dir.
fn temp_dir(name: &str) -> PathBuf {
	let dir = std::env::temp_dir().join(format!("touchstone-{name}-{}", std::process::id()));
	let _ = std::fs::remove_dir_all(&dir);
	std::fs::create_dir_all(&dir).unwrap();
	dir
}

#[test]
fn resuming_from_a_checkpoint_reproduces_the_later_records() {
	let dir = temp_dir("resume");
	let (model, train, data) = (blob_model(), blob_train(12), blobs(200));
	let mut trainer = Trainer::new(CpuBackend, &model, &train, data.clone()).unwrap();
	let (records, written) = run_with_checkpoints(&mut trainer, 12, train.checkpoint_interval, &dir).unwrap();
	assert_eq!(written.iter().map(|w| w.next_step).collect::<Vec<_>>(), [4, 8, 12]);
	for checkpoint in &written {
		let loaded = Checkpoint::read(&checkpoint.path, &checkpoint.hash).unwrap();
		let at = checkpoint.next_step as usize;
		assert_eq!(loaded.point.next_step, checkpoint.next_step);
		// Checkpoints sit at boundaries: the segment's last record is in the boundary,
		// and the next segment starts without one.
		assert_eq!(loaded.point.record, [0; 32]);
		assert_eq!(checkpoint.boundary.record, records[at - 1].record);
		assert_eq!(checkpoint.boundary.next_step, checkpoint.next_step);
		assert_eq!(checkpoint.boundary.state_root, touchstone_kernels::job::trace::state_root(&loaded.state).unwrap());
		let mut resumed = Trainer::resume(CpuBackend, &model, &train, data.clone(), loaded.state, loaded.point).unwrap();
		let (later, boundaries) = run_segments(&mut resumed, 12);
		assert_eq!(later, records[at..]);
		let expected: Vec<_> = written.iter().filter(|w| w.next_step > checkpoint.next_step).map(|w| w.boundary).collect();
		assert_eq!(boundaries, expected);
	}
	std::fs::remove_dir_all(&dir).unwrap();
}

/// A unit that starts off the interval (steps 5..11, interval 4) writes its
/// checkpoints at the global multiples inside it and at its end: the same rule
/// the chain accepts commitments by (`TrainConfig::is_checkpoint_step`).
#[test]
fn a_misaligned_unit_checkpoints_at_global_multiples_and_its_end() {
	let dir = temp_dir("misaligned");
	let (model, train, data) = (blob_model(), blob_train(12), blobs(200));
	assert_eq!(train.checkpoint_interval, 4);
	let mut trainer = Trainer::new(CpuBackend, &model, &train, data).unwrap();
	for _ in 0..5 {
		trainer.step().unwrap();
	}
	let (_, written) = run_with_checkpoints(&mut trainer, 6, train.checkpoint_interval, &dir).unwrap();
	let steps: Vec<u32> = written.iter().map(|w| w.next_step).collect();
	assert_eq!(steps, [8, 11]);
	let accepted: Vec<u32> = (6..=11).filter(|&step| train.is_checkpoint_step(step, 11)).collect();
	assert_eq!(accepted, steps);
	std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_same_state_always_gives_the_same_file_and_hash() {
	let (model, train, data) = (blob_model(), blob_train(3), blobs(200));
	let mut a = Trainer::new(CpuBackend, &model, &train, data.clone()).unwrap();
	let mut b = Trainer::new(CpuBackend, &model, &train, data).unwrap();
	for _ in 0..3 {
		a.step().unwrap();
		b.step().unwrap();
	}
	let (first, second) = (Checkpoint::of(&mut a).unwrap(), Checkpoint::of(&mut b).unwrap());
	assert_eq!(first.to_bytes().unwrap(), second.to_bytes().unwrap());
	assert_eq!(first.hash().unwrap(), second.hash().unwrap());
	// The file is plain safetensors: other tools read it.
	let bytes = first.to_bytes().unwrap();
	let parsed = safetensors::SafeTensors::deserialize(&bytes).unwrap();
	assert_eq!(parsed.len(), first.state.len());
	assert_eq!(parsed.tensor("state.0000").unwrap().shape(), [first.state[0].len()]);
}

#[test]
fn a_checkpoint_whose_hash_does_not_match_is_refused_before_parsing() {
	let dir = temp_dir("refuse");
	let (model, train, data) = (blob_model(), blob_train(2), blobs(200));
	let mut trainer = Trainer::new(CpuBackend, &model, &train, data).unwrap();
	trainer.step().unwrap();
	let checkpoint = Checkpoint::of(&mut trainer).unwrap();
	let path = dir.join("c.safetensors");
	let hash = checkpoint.write(&path).unwrap();
	// One weight bit changed on disk.
	let mut bytes = std::fs::read(&path).unwrap();
	let last = bytes.len() - 1;
	bytes[last] ^= 1;
	std::fs::write(&path, &bytes).unwrap();
	assert!(matches!(Checkpoint::read(&path, &hash), Err(CheckpointError::WrongHash { .. })));
	// Garbage with a matching hash still fails cleanly, as a format error.
	let garbage = b"not a safetensors file".to_vec();
	let garbage_hash = touchstone_kernels::proof::content::content_hash(&garbage);
	assert!(matches!(Checkpoint::from_bytes(&garbage, &garbage_hash), Err(CheckpointError::Format(_))));
	std::fs::remove_dir_all(&dir).unwrap();
}

/// The first step of a segment is judged from the checkpoint at its start alone:
/// its segment's trace is anchored at the checkpoint's state root, which the
/// boundary before it commits.
#[test]
fn a_segments_first_step_is_opened_from_the_checkpoint_at_its_start_alone() {
	use touchstone_kernels::proof::graph::Graph;
	use touchstone_kernels::proof::merkle::MerkleTree;
	use touchstone_kernels::referee::{judge, open_case, RunOpening, StateOpening};
	use touchstone_kernels::proof::chain::trace_leaf;
	let (model, train, data) = (blob_model(), blob_train(8), blobs(200));
	let mut trainer = Trainer::new(CpuBackend, &model, &train, data.clone()).unwrap();
	let (records, boundaries) = run_segments(&mut trainer, 4);
	assert_eq!(records.len(), 4);
	let bytes = Checkpoint::of(&mut trainer).unwrap().to_bytes().unwrap();
	let hash = touchstone_kernels::proof::content::content_hash(&bytes);
	// A verifier holding only the checkpoint re-executes step 4 with every operator
	// committed, and the rest of the segment to commit its trace.
	let loaded = Checkpoint::from_bytes(&bytes, &hash).unwrap();
	let data_tree = data.tree().unwrap();
	let mut resumed = Trainer::resume(CpuBackend, &model, &train, data.clone(), loaded.state, loaded.point).unwrap();
	let anchor = resumed.start_trace().unwrap();
	assert_eq!(anchor.last_state_root, boundaries[0].state_root);
	let traced = resumed.trace_step().unwrap();
	let mut hashes = vec![traced.state_hash];
	for _ in 5..8 {
		resumed.step().unwrap();
		hashes.push(resumed.trace_point().unwrap().last_hash);
	}
	let tree = MerkleTree::new(hashes.iter().map(trace_leaf).collect()).unwrap();
	let graph = Graph::build(&model, &train).unwrap();
	let run = RunOpening {
		trace: &tree,
		first_step: 4,
		start_state_root: boundaries[0].state_root,
		dataset: (&data).into(),
		dataset_tree: &data_tree,
		shard: 0..data.len(),
	};
	// The first matmul reads the parameters: the state before step 4 is the segment's start.
	let (dispute, openings) = open_case(&graph, &traced, &run, 1, 0).unwrap();
	assert!(matches!(openings.previous_state, StateOpening::Anchor));
	judge(&model, &train, &dispute, &openings).unwrap();
}

/// Runs `trainer` to `end`, closing a segment wherever the checkpoint grid puts a
/// boundary; returns each step's record and each boundary.
fn run_segments<B: touchstone_kernels::Backend>(
	trainer: &mut Trainer<B>,
	end: u32,
) -> (Vec<touchstone_kernels::job::trace::StepRecord>, Vec<Boundary>)
where
	B::Error: std::fmt::Debug,
{
	let train = *trainer.train_config();
	let (mut records, mut boundaries) = (Vec::new(), Vec::new());
	while trainer.next_step() < end {
		records.push(trainer.step().unwrap());
		if train.is_checkpoint_step(trainer.next_step(), end) {
			boundaries.push(trainer.close_segment().unwrap());
		}
	}
	(records, boundaries)
}

/// The boundary commitments: a boundary holds the state tree's root there and the
/// chained record of its segment's losses, restarted at every boundary, so that a run
/// resumed from a checkpoint (taken at a boundary) reproduces every later boundary.
#[test]
fn boundaries_chain_each_segments_losses_and_a_resumed_run_reproduces_them() {
	let (model, train, data) = (blob_model(), blob_train(14), blobs(200));
	assert_eq!(train.checkpoint_interval, 4);
	let mut trainer = Trainer::new(CpuBackend, &model, &train, data.clone()).unwrap();
	let (records, boundaries) = run_segments(&mut trainer, 14);
	assert_eq!(boundaries.iter().map(|b| b.next_step).collect::<Vec<_>>(), [4, 8, 12, 14]);
	// Each record restarts from zeros at its segment's first step.
	let mut start = 0;
	for boundary in &boundaries {
		let record = records[start..boundary.next_step as usize]
			.iter()
			.fold([0u8; 32], |previous, r| record_hash(&previous, r.step, canonical_bits(r.loss)));
		assert_eq!(boundary.record, record, "boundary {}", boundary.next_step);
		assert_ne!(boundary.leaf(), Boundary { record: [0; 32], ..*boundary }.leaf());
		start = boundary.next_step as usize;
	}
	// A run resumed at step 8 from the state and chain point there closes the same boundaries.
	let mut first = Trainer::new(CpuBackend, &model, &train, data.clone()).unwrap();
	run_segments(&mut first, 8);
	let checkpoint = Checkpoint::of(&mut first).unwrap();
	let root = first.state_tree_root().unwrap();
	assert_eq!(root, boundaries[1].state_root);
	let mut resumed = Trainer::resume(CpuBackend, &model, &train, data, checkpoint.state, checkpoint.point).unwrap();
	let (_, later) = run_segments(&mut resumed, 14);
	assert_eq!(later, boundaries[2..]);
}

/// A wrong value in one step changes the boundary of its segment and every later
/// one, and none before: the first differing boundary is the lie's segment.
#[test]
fn a_lie_changes_its_segments_boundary_and_every_later_one_and_none_before() {
	use touchstone_kernels::job::fault::Fault;
	let (model, train, data) = (blob_model(), blob_train(14), blobs(200));
	let mut honest = Trainer::new(CpuBackend, &model, &train, data.clone()).unwrap();
	let (_, expected) = run_segments(&mut honest, 14);
	let mut liar = Trainer::new(CpuBackend, &model, &train, data).unwrap();
	let operator = liar.graph().nodes.len() - 2;
	liar.inject(Fault::Output { step: 5, operator, output: 0, element: 0, bit: 20 });
	let (_, lied) = run_segments(&mut liar, 14);
	assert_eq!(lied[0], expected[0]);
	for (lie, truth) in lied[1..].iter().zip(&expected[1..]) {
		assert_ne!(lie.state_root, truth.state_root, "boundary {}", truth.next_step);
		assert_ne!(lie.leaf(), truth.leaf());
	}
}

/// The segment level of a dispute, with real runs: the bisection over the two parties'
/// boundary leaves lands on the segment that holds the lie, the boundary before it
/// opens to the same state root for both (the unit's start state for the first
/// segment), and that root is the honest run's state there, so the step-level game
/// that follows starts from an agreed state.
#[test]
fn the_segment_game_lands_on_the_lies_segment_from_a_state_both_sides_agree_on() {
	use touchstone_kernels::job::fault::Fault;
	use touchstone_kernels::proof::bisection::bisect;
	use touchstone_kernels::proof::merkle::MerkleTree;
	use touchstone_kernels::referee::boundary::{boundary_opening, open_boundary, segment_start, UnitCommitment};
	let (model, train, data) = (blob_model(), blob_train(14), blobs(200));
	let commit = |boundaries: &[Boundary], start_state_root| {
		let tree = MerkleTree::new(boundaries.iter().map(Boundary::leaf).collect()).unwrap();
		(UnitCommitment { root: tree.root(), first_step: 0, steps: 14, interval: 4, start_state_root }, tree)
	};
	let mut honest = Trainer::new(CpuBackend, &model, &train, data.clone()).unwrap();
	let start = honest.state_tree_root().unwrap();
	let (_, truth) = run_segments(&mut honest, 14);
	let (honest_unit, honest_tree) = commit(&truth, start);
	let operator = honest.graph().nodes.len() - 2;
	// Segments 0..4, 4..8, 8..12, 12..14: a lie at step 1, 9 and 13.
	for (step, segment) in [(1u32, 0u32), (9, 2), (13, 3)] {
		let mut liar = Trainer::new(CpuBackend, &model, &train, data.clone()).unwrap();
		liar.inject(Fault::Output { step, operator, output: 0, element: 3, bit: 21 });
		let (_, lies) = run_segments(&mut liar, 14);
		let (liar_unit, liar_tree) = commit(&lies, start);
		let outcome = bisect(honest_unit.segments().count(), &honest_tree, &liar_tree).unwrap();
		assert_eq!(outcome.leaf as u32, segment, "lie at step {step}");
		let opened_start = |unit: &UnitCommitment, tree, boundaries: &[Boundary]| {
			let before = segment.checked_sub(1).map(|k| {
				let b = boundaries[k as usize];
				boundary_opening(tree, k, b.state_root, b.record).unwrap()
			});
			segment_start(unit, segment, before.as_ref()).unwrap()
		};
		let agreed = opened_start(&honest_unit, &honest_tree, &truth);
		assert_eq!(agreed, opened_start(&liar_unit, &liar_tree, &lies));
		let expected = if segment == 0 { start } else { truth[segment as usize - 1].state_root };
		assert_eq!(agreed, expected);
		// At the disputed boundary the two sides open different states.
		let end = |unit: &UnitCommitment, tree, b: &Boundary| {
			open_boundary(unit, segment, &boundary_opening(tree, segment, b.state_root, b.record).unwrap()).unwrap()
		};
		assert_ne!(end(&honest_unit, &honest_tree, &truth[segment as usize]), end(&liar_unit, &liar_tree, &lies[segment as usize]));
	}
}

/// Below the segment level, with real runs: each side re-executes the disputed segment
/// from the agreed state and binds its step-level trace to its own boundaries; the
/// bisection over the two traces lands on the lie's step, with the state hash before it
/// agreed. A trace whose last step does not commit the boundary its party opened is
/// refused, and so is one bound to another segment.
#[test]
fn segment_traces_bind_to_their_boundaries_and_the_step_game_lands_on_the_lie() {
	use touchstone_kernels::job::fault::Fault;
	use touchstone_kernels::proof::bisection::bisect;
	use touchstone_kernels::proof::chain::trace_leaf;
	use touchstone_kernels::proof::merkle::MerkleTree;
	use touchstone_kernels::referee::boundary::{bind_segment, boundary_opening, BoundaryError, SegmentBinding, UnitCommitment};
	let (model, train, data) = (blob_model(), blob_train(14), blobs(200));
	let operator = Trainer::new(CpuBackend, &model, &train, data.clone()).unwrap().graph().nodes.len() - 2;
	// A party: its boundaries, its unit commitment and tree, and its trace of segment 2 (steps 8..12).
	let party = |fault: Option<Fault>| {
		let mut trainer = Trainer::new(CpuBackend, &model, &train, data.clone()).unwrap();
		let start = trainer.state_tree_root().unwrap();
		if let Some(fault) = fault {
			trainer.inject(fault);
		}
		let (_, boundaries) = run_segments(&mut trainer, 14);
		let tree = MerkleTree::new(boundaries.iter().map(Boundary::leaf).collect()).unwrap();
		let unit = UnitCommitment { root: tree.root(), first_step: 0, steps: 14, interval: 4, start_state_root: start };
		// Re-executed on demand from the agreed checkpoint at step 8.
		let mut again = Trainer::new(CpuBackend, &model, &train, data.clone()).unwrap();
		if let Some(fault) = fault {
			again.inject(fault);
		}
		run_segments(&mut again, 8);
		let (steps, closed) = again.segment_trace(12).unwrap();
		let hashes: Vec<[u8; 32]> = steps.iter().map(|step| step.state_hash).collect();
		assert_eq!(closed, boundaries[2], "the re-executed segment closes the boundary the run closed");
		(boundaries, unit, tree, hashes)
	};
	let (truth, honest_unit, honest_tree, honest_hashes) = party(None);
	let (lies, liar_unit, liar_tree, liar_hashes) = party(Some(Fault::Output { step: 10, operator, output: 0, element: 3, bit: 21 }));
	let bind = |unit: &UnitCommitment, tree, boundaries: &[Boundary], hashes: &[[u8; 32]], end_segment: u32| {
		let sub = MerkleTree::new(hashes.iter().map(trace_leaf).collect()).unwrap();
		let before = boundaries[1];
		let start = boundary_opening(tree, 1, before.state_root, before.record).unwrap();
		let end = boundaries[end_segment as usize];
		let binding = SegmentBinding {
			start: Some(start),
			end: boundary_opening(tree, end_segment, end.state_root, end.record).unwrap(),
			previous: hashes[hashes.len() - 2],
			proof: sub.proof(hashes.len() - 1).unwrap(),
		};
		(bind_segment(unit, 2, &sub.root(), &binding), sub)
	};
	let (honest, honest_sub) = bind(&honest_unit, &honest_tree, &truth, &honest_hashes, 2);
	let (lying, liar_sub) = bind(&liar_unit, &liar_tree, &lies, &liar_hashes, 2);
	let (honest, lying) = (honest.unwrap(), lying.unwrap());
	assert_eq!((honest.first_step, honest.steps), (8, 4));
	assert_eq!(honest.start_state_root, lying.start_state_root, "both traces start from the agreed state");
	assert_eq!(honest.start_state_root, truth[1].state_root);
	let outcome = bisect(4, &honest_sub, &liar_sub).unwrap();
	assert_eq!(honest.first_step + outcome.leaf as u32, 10, "the step game lands on the lie's step");
	assert_eq!(honest_hashes[..2], liar_hashes[..2], "the state hashes before it agree");
	// The honest trace does not bind to the liar's boundary, nor to the boundary of another segment.
	let (crossed, _) = bind(&liar_unit, &liar_tree, &lies, &honest_hashes, 2);
	assert_eq!(crossed, Err(BoundaryError::InvalidSegmentBinding));
	let (elsewhere, _) = bind(&honest_unit, &honest_tree, &truth, &honest_hashes, 3);
	assert_eq!(elsewhere, Err(BoundaryError::InvalidBoundaryProof));
}
