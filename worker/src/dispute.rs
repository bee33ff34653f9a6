//! Playing disputes: a solver defends its learning proofs, and a verifier that found a
//! mismatch plays the dispute its reveal opened, each from its own run of the unit, so an
//! honest side never loses by silence.
//!
//! A dispute is four bisection games (the unit's segments, the disputed segment's steps,
//! the disputed step's operators, the disputed operator's pieces) with a binding between
//! levels, and ends with the referee judging one piece from the defender's openings (see
//! `pallets/disputes`). Each round a side reveals the children of its current node; the
//! trees come from the unit's `boundaries.txt` (the segment level), from re-executing the
//! disputed segment from the checkpoint at its start (the step level, kept in the unit's
//! folder), and from re-executing the disputed step (the operator and piece levels). When
//! the other side misses a deadline, the side that answered ends the dispute by timeout and
//! collects its share.

use anyhow::{anyhow, Context, Result};
use subxt::utils::Static;
use touchstone_kernels::job::trace::{Boundary, StepTrace};
use touchstone_kernels::proof::graph::Graph;
use touchstone_kernels::proof::merkle::MerkleTree;
use touchstone_kernels::referee::{open_case, open_step_binding, state_chunk, SegmentTrace, UnitBoundaries};
use touchstone_primitives::referee::{self, boundary_before, reveal, Digest, Level, UnitCommitment};
use touchstone_primitives::{JobId, UnitIndex};

use crate::chain::{runtime, AccountId, AtBlock, Settled};
use crate::state::{ChainState, Transactions};
use crate::train::{self, UnitWork};

/// A dispute as the chain stores it.
pub type Dispute = pallet_touchstone_disputes::DisputeInfo<AccountId, u128, u32>;
/// A dispute's phase, and its two sides.
pub use pallet_touchstone_disputes::{Party, Phase};
/// A proof overturned without a step found, as the chain keeps it for the summonses of its
/// attesters (the bounds only limit decoding).
pub type OverturnedProof = pallet_touchstone_disputes::OverturnedProof<
	AccountId,
	u32,
	polkadot_sdk::sp_runtime::traits::ConstU32<64>,
	polkadot_sdk::sp_runtime::traits::ConstU32<64>,
>;

/// The open disputes `account` is a side of (challenger or defender, summonses included),
/// with their ids: the runtime reads the account's own keys, so a light client asks for a
/// few keys, not every dispute.
pub async fn party_disputes(at: &AtBlock, account: &AccountId) -> Result<Vec<(u64, Dispute)>> {
	let ids = at
		.runtime_apis()
		.call(runtime::runtime_apis().disputes_api().disputes_of(account.clone()))
		.await
		.context("asking the chain for this node's disputes")?;
	at.open_disputes(ids).await
}

/// What a side sends next in a dispute, if anything is due from it.
pub enum Move {
	/// The children of its current node in this round's tree.
	Reveal(Static<referee::Reveal>),
	/// Its step-level trace of the disputed segment, bound to its boundaries.
	BindSegment(Digest, Static<referee::SegmentBinding>),
	/// Its operator root of the disputed step, bound to its trace.
	BindStep(Digest, Static<referee::StepBinding>),
	/// Its piece root of the disputed operator, bound to its operator root.
	BindOperator(Digest, Static<referee::MerkleProof>),
	/// The openings the referee judges the disputed piece from.
	Resolve(Static<referee::Openings>),
	/// The chunk of a state an availability request demands, with its proofs.
	ProvideChunk(Static<referee::StateChunk>),
	/// The other side missed its deadline: end the dispute against it.
	TimeOut,
}

/// The work of defending segment `segment` of a proof with trace manifest `manifest`, as a
/// verifier summoned over it: `work` (the unit) moved to `dir`, which gets the proof's
/// boundaries and, unless the segment starts the unit, `checkpoint` (the bytes of the proof's
/// checkpoint before it). The segment then re-executes from the proof's own state, and its
/// trace binds to the proof's boundary at its end only if the proof's transition there is an
/// honest run: what the verifier attested.
pub fn defence_folder(
	mut work: UnitWork,
	dir: std::path::PathBuf,
	manifest: &crate::samples::TraceManifest,
	segment: u32,
	checkpoint: Option<&[u8]>,
) -> Result<UnitWork> {
	write_segment_folder(&work, &dir, &manifest.boundaries(), segment, checkpoint)?;
	work.dir = dir;
	Ok(work)
}

/// Makes `dir` a unit folder that plays segment `segment` of the unit in `work` from a
/// proof's state: `checkpoint` (the bytes of the checkpoint the segment starts from, unless
/// it starts the unit), then `boundaries` (the run's boundaries, written last: a folder with
/// them is complete). Traces of the segment re-executed there start from that checkpoint.
pub fn write_segment_folder(
	work: &UnitWork,
	dir: &std::path::Path,
	boundaries: &[Boundary],
	segment: u32,
	checkpoint: Option<&[u8]>,
) -> Result<()> {
	let range = work.segments().range(segment).with_context(|| format!("the unit has no segment {segment}"))?;
	std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
	if range.start != work.first_step {
		let bytes = checkpoint.context("the segment starts from a checkpoint of the proof")?;
		crate::store::write_atomically(&train::checkpoint_path(dir, range.start), bytes)?;
	}
	train::save_boundaries(dir, boundaries)
}

/// One side's run over a unit, rebuilt from the unit's folder.
pub struct Run<'a> {
	work: &'a UnitWork,
	graph: Graph,
	unit: UnitBoundaries,
	dataset_tree: MerkleTree,
	start_state_root: [u8; 32],
}

impl<'a> Run<'a> {
	/// The run the unit in `work` proved, from its saved boundaries.
	pub fn load(work: &'a UnitWork) -> Result<Self> {
		let boundaries = train::saved_boundaries(&work.dir)?;
		let segments = work.segments().count() as usize;
		if boundaries.len() != segments {
			anyhow::bail!("the unit's boundaries in {} cover {} of its {segments} segments", work.dir.display(), boundaries.len());
		}
		let unit = UnitBoundaries::new(boundaries).map_err(|error| anyhow!("{error:?}"))?;
		let graph = Graph::build(&work.model, &work.train).map_err(|error| anyhow!("{error:?}"))?;
		let dataset_tree = work.data.as_ref().tree().map_err(|error| anyhow!("{error:?}"))?;
		let start_state_root = touchstone_kernels::job::trace::state_root(&work.start_state).map_err(|error| anyhow!("{error:?}"))?;
		Ok(Self { work, graph, unit, dataset_tree, start_state_root })
	}

	/// The unit's commitment, as the chain holds this run's proof.
	fn commitment(&self) -> UnitCommitment {
		UnitCommitment {
			root: self.unit.root(),
			first_step: self.work.first_step,
			steps: self.work.steps,
			interval: self.work.train.checkpoint_interval,
			start_state_root: self.start_state_root,
		}
	}

	fn segment(&self, segment: u32) -> Result<SegmentTrace> {
		train::segment_trace(self.work, segment)
	}

	fn trace(&self, step: u32) -> Result<StepTrace> {
		train::trace_step(self.work, step)
	}

	/// The step trace of the disputed step and the opening of its segment's trace.
	fn disputed(&self, dispute: &Dispute) -> Result<(StepTrace, SegmentTrace)> {
		let segment = dispute.segment.context("the dispute has no disputed segment yet")?;
		let step = dispute.step.context("the dispute has no disputed step yet")?;
		Ok((self.trace(step)?, self.segment(segment)?))
	}

	/// The move of `side` in `dispute` at block `now`, if one is due. Only the defender
	/// opens the judged piece: the referee checks the defender's claim, so a challenger in
	/// that phase waits, and ends the dispute by timeout if the defender stays silent.
	pub fn next_move(&self, dispute: &Dispute, side: Party, now: u32) -> Result<Option<Move>> {
		let step = || dispute.step.context("the dispute has no disputed step yet");
		let segment = || dispute.segment.context("the dispute has no disputed segment yet");
		let shard = self.work.shard.clone().unwrap_or(0..self.work.samples());
		let operator = || dispute.operator.map(|operator| operator as usize).context("the dispute has no disputed operator yet");
		// Whether each side has answered the current phase.
		let (defender_done, challenger_done) = match &dispute.phase {
			Phase::Bisect { reveals, .. } => (reveals.defender.is_some(), reveals.challenger.is_some()),
			Phase::BindSegment { roots } | Phase::BindStep { roots } | Phase::BindOperator { roots } => {
				(roots.defender.is_some(), roots.challenger.is_some())
			},
			Phase::Judge | Phase::Availability { .. } => (false, true),
		};
		let (mine_done, theirs_done) = match side {
			Party::Defender => (defender_done, challenger_done),
			Party::Challenger => (challenger_done, defender_done),
		};
		// A call sent now lands in the next block: once that is past the deadline, only a
		// timeout can still be played.
		if now >= dispute.deadline {
			return Ok((mine_done && !theirs_done).then_some(Move::TimeOut));
		}
		if mine_done {
			return Ok(None);
		}
		Ok(Some(match &dispute.phase {
			Phase::Bisect { level, game, .. } => {
				let revealed = match level {
					Level::Segments => reveal(&self.unit.tree, game.level, game.index),
					Level::Steps => reveal(&self.segment(segment()?)?.tree, game.level, game.index),
					Level::Operators => reveal(&self.trace(step()?)?.operators, game.level, game.index),
					Level::Pieces { operator } => {
						let trace = self.trace(step()?)?;
						let pieces = trace.pieces.get(*operator as usize).context("the disputed operator is not in the step")?;
						reveal(pieces, game.level, game.index)
					},
				};
				Move::Reveal(Static(revealed))
			},
			Phase::BindSegment { .. } => {
				let segment = segment()?;
				let trace = self.segment(segment)?;
				let start = self.unit.start_opening(segment).context("the boundary before the segment")?;
				let end = self.unit.opening(segment).context("the segment's boundary")?;
				let binding = trace.binding(start, end).context("the segment's trace cannot be bound")?;
				Move::BindSegment(trace.root(), Static(binding))
			},
			Phase::BindStep { .. } => {
				let (trace, segment) = self.disputed(dispute)?;
				let opening = segment.run_opening(&self.work.data, &self.dataset_tree, shard);
				let binding = open_step_binding(&self.graph, &trace, &opening).map_err(|error| anyhow!("{error:?}"))?;
				Move::BindStep(trace.operators.root(), Static(binding))
			},
			Phase::BindOperator { .. } => {
				let trace = self.trace(step()?)?;
				let operator = operator()?;
				let pieces = trace.pieces.get(operator).context("the disputed operator is not in the step")?;
				let proof = trace.operators.proof(operator).map_err(|error| anyhow!("{error:?}"))?;
				Move::BindOperator(pieces.root(), Static(proof))
			},
			Phase::Judge => {
				let (trace, segment) = self.disputed(dispute)?;
				let piece = dispute.piece.context("the dispute has no disputed piece yet")? as usize;
				let operator = operator()?;
				let kind = self.graph.nodes.get(operator).map_or("unknown", |node| node.kind.name());
				tracing::info!(step = dispute.step, operator, kind, piece, "dispute: opening the disputed piece to the referee");
				let opening = segment.run_opening(&self.work.data, &self.dataset_tree, shard);
				let (_, openings) =
					open_case(&self.graph, &trace, &opening, operator, piece).map_err(|error| anyhow!("{error:?}"))?;
				Move::Resolve(Static(openings))
			},
			Phase::Availability { step, chunk } => {
				let state = train::state_before(self.work, *step)?;
				let boundary = boundary_before(&self.commitment(), *step).context("the requested state is not a boundary")?;
				let opening = self.unit.opening(boundary).context("the requested boundary")?;
				let posted = state_chunk(&state, *chunk, opening).map_err(|error| anyhow!("{error:?}"))?;
				Move::ProvideChunk(Static(posted))
			},
		}))
	}
}

/// The key of the background duty that ends dispute `id` by timeout: the same whichever
/// pass (a move or a chunk request's end) sends it.
fn time_out_key(id: u64) -> String {
	format!("dispute {id} time_out")
}

/// Sends `side`'s next move in every dispute over unit `index` of `job` that the signer
/// plays on that side, answering from its run of the unit, which `prepare` says where to
/// find (called only when a dispute is open). Every dispute due an answer gets one in the
/// same pass: several challengers of one proof must not starve one another into a
/// timeout. Each move is handed over ([`Chain::send_in_background`]): the pass does not
/// wait for it, and a move still in the background is not sent again. Returns whether a
/// move is on its way (the chain is moving on, and the caller reads it again before
/// sending more).
pub async fn play(
	chain: &impl Transactions,
	signer: &subxt_signer::sr25519::Keypair,
	at: &impl ChainState,
	(job, index): (JobId, UnitIndex),
	side: Party,
	prepare: impl FnOnce() -> Result<UnitWork>,
) -> Result<bool> {
	let disputes = at.unit_disputes(job, index).await?;
	play_listed(chain, signer, at, (job, index), disputes, side, prepare).await
}

/// As [`play`], over `disputes` (with their ids) of unit `index` of `job`: the summonses
/// of an overturned proof, which are not listed under the unit.
pub async fn play_listed(
	chain: &impl Transactions,
	signer: &subxt_signer::sr25519::Keypair,
	at: &impl ChainState,
	(job, index): (JobId, UnitIndex),
	disputes: Vec<(u64, Dispute)>,
	side: Party,
	prepare: impl FnOnce() -> Result<UnitWork>,
) -> Result<bool> {
	let me = signer.public_key().to_account_id();
	let mine: Vec<_> = disputes
		.into_iter()
		.filter(|(_, dispute)| match side {
			Party::Defender => dispute.defender == me,
			Party::Challenger => dispute.challenger == me,
		})
		.collect();
	let now = at.number();
	// A requester of a chunk has nothing to answer from a run of its own: it waits out
	// the deadline and ends the request against a solver that posted nothing.
	let (requests, mine): (Vec<_>, Vec<_>) =
		mine.into_iter().partition(|(_, dispute)| side == Party::Challenger && matches!(dispute.phase, Phase::Availability { .. }));
	let calls = runtime::transactions().disputes();
	let mut sent_any = false;
	for (id, _) in requests.into_iter().filter(|(_, dispute)| now >= dispute.deadline) {
		let done = move |outcome: Result<crate::state::Included>| match outcome {
			Ok(_) => tracing::info!(job, unit = index, dispute = id, "chunk request: the solver posted nothing; ended it"),
			Err(error) => tracing::warn!(job, unit = index, dispute = id, "chunk request: time_out refused: {error:#}"),
		};
		chain.send_in_background(time_out_key(id), now.into(), calls.time_out(id), signer, Settled::Finalized, done);
		sent_any = true;
	}
	if mine.is_empty() {
		return Ok(sent_any);
	}
	// Loading the unit and re-executing a disputed step take seconds on a large model:
	// off the executor's other tasks, which include the worker's other duties.
	let moves = tokio::task::block_in_place(|| -> Result<Vec<(u64, u32, Move)>> {
		let work = prepare()?;
		let run = Run::load(&work).context("the unit's boundaries, to play a dispute")?;
		let mut moves = Vec::new();
		for (id, dispute) in &mine {
			if let Some(next) = run.next_move(dispute, side, now)? {
				moves.push((*id, dispute.rounds, next));
			}
		}
		Ok(moves)
	})?;
	for (id, rounds, next) in moves {
		// One move a side a round: the key a move in the background is known by.
		let key = |name: &str| format!("dispute {id} round {rounds} {side:?} {name}");
		let done = |name: &'static str| {
			move |outcome: Result<crate::state::Included>| match outcome {
				Ok(_) => {
					let party = if side == Party::Defender { "defender" } else { "challenger" };
					crate::metrics::get().dispute_moves.with_label_values(&[party]).inc();
					tracing::info!(job, unit = index, dispute = id, round = rounds, ?side, "dispute: sent {name}")
				},
				Err(error) => tracing::warn!(job, unit = index, dispute = id, ?side, "dispute: {name} refused: {error:#}"),
			}
		};
		let (now, in_block) = (u64::from(now), Settled::InBlock);
		match next {
			Move::Reveal(reveal) => chain.send_in_background(key("reveal"), now, calls.reveal(id, reveal), signer, in_block, done("reveal")),
			Move::BindSegment(root, binding) => {
				let call = calls.bind_segment(id, root, binding);
				chain.send_in_background(key("bind_segment"), now, call, signer, in_block, done("bind_segment"))
			},
			Move::BindStep(root, binding) => {
				let call = calls.bind_step(id, root, binding);
				chain.send_in_background(key("bind_step"), now, call, signer, in_block, done("bind_step"))
			},
			Move::BindOperator(root, proof) => {
				let call = calls.bind_operator(id, root, proof);
				chain.send_in_background(key("bind_operator"), now, call, signer, in_block, done("bind_operator"))
			},
			Move::Resolve(openings) => {
				let call = calls.resolve(id, openings);
				chain.send_in_background(key("resolve"), now, call, signer, Settled::Finalized, done("resolve"))
			},
			Move::ProvideChunk(chunk) => {
				let call = calls.provide_chunk(id, chunk);
				chain.send_in_background(key("provide_chunk"), now, call, signer, in_block, done("provide_chunk"))
			},
			Move::TimeOut => {
				chain.send_in_background(time_out_key(id), now, calls.time_out(id), signer, Settled::Finalized, done("time_out"))
			},
		};
		sent_any = true;
	}
	Ok(sent_any)
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::train::{run_unit, tests::work};
	use pallet_touchstone_disputes::{DisputeInfo, Pair};
	use std::sync::atomic::AtomicBool;
	use touchstone_kernels::proof::bisection::Game;
	use touchstone_kernels::CpuBackend;
	use touchstone_primitives::referee::{bind_segment, bind_step, open_state_chunk};

	fn dispute(phase: Phase, deadline: u32) -> Dispute {
		DisputeInfo {
			job: 0,
			unit: 0,
			defender: AccountId::from([1; 32]),
			challenger: AccountId::from([2; 32]),
			bond: 10,
			challenger_trace_root: [9; 32],
			segment: None,
			segment_start: None,
			segment_traces: None,
			step: None,
			operator_roots: None,
			operator: None,
			piece_roots: None,
			piece: None,
			phase,
			deadline,
			rounds: 0,
			summons: None,
		}
	}

	/// The defender answers from its unit folder: each segment's trace, re-executed on
	/// demand, binds to the boundaries of the learning proof it committed, and a step
	/// re-executed for the step level binds to that trace. It reveals its own tree's
	/// children each round, and once the challenger misses a deadline it plays the timeout.
	#[test]
	fn answers_from_the_unit_folder_bind_to_the_committed_proof() {
		let base = std::env::temp_dir().join(format!("touchstone-defender-{}", std::process::id()));
		let unit = work(&base);
		let proof = run_unit(CpuBackend, &unit, &AtomicBool::new(false), |_| {}).unwrap().unwrap().proof;
		let run = Run::load(&unit).unwrap();
		assert_eq!(run.unit.root(), proof.trace_root.0);
		let commitment = run.commitment();
		let shard = 0..unit.samples();
		// Segments 10..20, 20..30, 30..35.
		for (segment, step) in [(0, 10), (0, 11), (1, 20), (1, 27), (2, 34)] {
			let mut disputed = dispute(Phase::BindSegment { roots: Pair::default() }, 100);
			disputed.segment = Some(segment);
			let Some(Move::BindSegment(root, Static(binding))) = run.next_move(&disputed, Party::Defender, 50).unwrap() else {
				panic!("the defender binds its trace of segment {segment}");
			};
			let trace = bind_segment(&commitment, segment, &root, &binding).unwrap();
			let step_trace = run.trace(step).unwrap();
			let segment_trace = run.segment(segment).unwrap();
			let binding = open_step_binding(&run.graph, &step_trace, &segment_trace.run_opening(&unit.data, &run.dataset_tree, shard.clone())).unwrap();
			assert!(bind_step(&run.graph, &trace, step, &step_trace.operators.root(), &binding).is_ok(), "step {step}");
		}

		let game = Game::new(unit.segments().count()).unwrap();
		let bisect = |reveals: Pair<Option<touchstone_primitives::referee::Reveal>>| Phase::Bisect {
			level: Level::Segments,
			game,
			nodes: Pair { defender: proof.trace_root.0, challenger: [9; 32] },
			reveals,
		};
		match run.next_move(&dispute(bisect(Pair::default()), 100), Party::Defender, 50).unwrap() {
			Some(Move::Reveal(Static(revealed))) => assert_eq!(revealed, reveal(&run.unit.tree, game.level, game.index)),
			_ => panic!("the defender reveals first"),
		}
		let answered = Pair { defender: Some(reveal(&run.unit.tree, game.level, game.index)), challenger: None };
		assert!(run.next_move(&dispute(bisect(answered.clone()), 100), Party::Defender, 50).unwrap().is_none(), "waits for the challenger");
		assert!(matches!(run.next_move(&dispute(bisect(answered.clone()), 100), Party::Defender, 100).unwrap(), Some(Move::TimeOut)));
		// Silent past the deadline itself, the defender can do nothing more.
		assert!(run.next_move(&dispute(bisect(Pair::default()), 100), Party::Defender, 100).unwrap().is_none());
		// The same run on the challenger's side: it answers the round the defender answered,
		// and past the deadline has nothing left to play.
		assert!(matches!(run.next_move(&dispute(bisect(answered.clone()), 100), Party::Challenger, 50).unwrap(), Some(Move::Reveal(_))));
		assert!(run.next_move(&dispute(bisect(answered), 100), Party::Challenger, 100).unwrap().is_none());
		// In the referee's phase only the defender opens the piece; the challenger waits
		// for the deadline and then ends the dispute against a silent defender.
		assert!(run.next_move(&dispute(Phase::Judge, 100), Party::Challenger, 50).unwrap().is_none());
		assert!(matches!(run.next_move(&dispute(Phase::Judge, 100), Party::Challenger, 100).unwrap(), Some(Move::TimeOut)));
		std::fs::remove_dir_all(&base).unwrap();
	}

	/// Summoned over a segment of a proof it attested, a verifier defends it from the proof's
	/// trace manifest and checkpoint alone (it never trained the unit): its trace binds to
	/// the proof's boundaries where the proof is an honest run, and cannot be built where it
	/// is not.
	#[test]
	#[cfg(feature = "test-equipment")]
	fn a_summoned_verifier_defends_a_true_segment_and_cannot_defend_a_false_one() {
		use crate::samples::TraceManifest;
		let base = std::env::temp_dir().join(format!("touchstone-summoned-{}", std::process::id()));
		let mut liar = work(&base.join("liar"));
		liar.fault = Some(touchstone_kernels::job::fault::Fault::Output { step: 24, operator: 1, output: 0, element: 0, bit: 20 });
		let proof = run_unit(CpuBackend, &liar, &AtomicBool::new(false), |_| {}).unwrap().unwrap().proof;
		let manifest = TraceManifest::of_unit(&liar).unwrap();
		let commitment = Run::load(&liar).unwrap().commitment();
		assert_eq!(commitment.root, proof.trace_root.0);
		// The verifier's own copy of the unit: no fault, no folder of the liar's.
		let attester = || UnitWork { fault: None, ..work(&base.join("verifier")) };
		let checkpoint = |step: u32| std::fs::read(train::checkpoint_path(&liar.dir, step)).unwrap();
		// Segments 10..20 (true), 20..30 (the lie at 24), 30..35 (true, from the lie's end).
		for (segment, start) in [(0u32, None), (1, Some(20u32)), (2, Some(30))] {
			let bytes = start.map(checkpoint);
			let dir = base.join(format!("summons-{segment}"));
			let defence = defence_folder(attester(), dir, &manifest, segment, bytes.as_deref()).unwrap();
			let run = Run::load(&defence).unwrap();
			assert_eq!(run.unit.root(), proof.trace_root.0, "the folder holds the proof's boundaries");
			let mut summons = dispute(Phase::BindSegment { roots: Pair::default() }, 100);
			summons.segment = Some(segment);
			let answer = run.next_move(&summons, Party::Defender, 50);
			if segment == 1 {
				let error = format!("{:#}", answer.err().expect("no honest trace reaches the lie's boundary"));
				assert!(error.contains("does not reach the boundary the unit committed"), "{error}");
			} else {
				let Some(Move::BindSegment(root, Static(binding))) = answer.unwrap() else { panic!("segment {segment} is bound") };
				assert!(bind_segment(&commitment, segment, &root, &binding).is_ok(), "segment {segment}");
			}
		}
		std::fs::remove_dir_all(&base).unwrap();
	}

	/// A verifier whose sample of a lie does not reproduce disputes the proof with a run
	/// spliced into it: the proof's boundaries, with the one the verifier reached from the
	/// liar's own checkpoint in place of the lie's. That run re-executed one segment, not
	/// the unit, and still plays the whole game: the segment level ends on the lie's segment,
	/// both sides bind their traces of it from the same start (the liar's checkpoint), and
	/// the step level ends on the faulted step.
	#[test]
	#[cfg(feature = "test-equipment")]
	fn a_run_spliced_at_a_false_segment_lands_its_dispute_on_the_lie() {
		use crate::samples::{segment_start, ReplayDevice, TraceManifest};
		use touchstone_kernels::proof::bisection::bisect;
		let base = std::env::temp_dir().join(format!("touchstone-spliced-{}", std::process::id()));
		let mut liar = work(&base.join("liar"));
		liar.fault = Some(touchstone_kernels::job::fault::Fault::Output { step: 24, operator: 1, output: 0, element: 0, bit: 20 });
		let proof = run_unit(CpuBackend, &liar, &AtomicBool::new(false), |_| {}).unwrap().unwrap().proof;
		let manifest = TraceManifest::of_unit(&liar).unwrap();
		let liar_run = Run::load(&liar).unwrap();
		// The verifier's copy of the unit: no fault, none of the liar's folder. Segment 1
		// (steps 20..30) holds the lie; it re-executes it from the liar's checkpoint at 20.
		let verifier = UnitWork { fault: None, ..work(&base.join("verifier")) };
		let (hash, bytes) = (manifest.checkpoint(20).unwrap(), std::fs::read(train::checkpoint_path(&liar.dir, 20)).unwrap());
		let start = segment_start(&verifier, &manifest, 20, Some((&hash, &bytes))).unwrap();
		let device = ReplayDevice::new(train::BackendKind::Cpu).unwrap();
		let reached = device.replay(&verifier, &manifest, 20..30, start, &AtomicBool::new(false)).unwrap();
		let reached = reached.expect("the lie's segment does not reproduce");
		let mut boundaries = manifest.boundaries();
		boundaries[1] = reached;
		let dir = base.join("spliced");
		write_segment_folder(&verifier, &dir, &boundaries, 1, Some(&bytes)).unwrap();
		let spliced = UnitWork { dir, ..verifier };
		let run = Run::load(&spliced).unwrap();
		assert_ne!(run.unit.root(), proof.trace_root.0);
		assert_eq!(bisect(3, &liar_run.unit.tree, &run.unit.tree).unwrap().leaf, 1, "the segment level ends on the lie's");
		let bound = |run: &Run| {
			let trace = run.segment(1).unwrap();
			let binding = trace.binding(run.unit.start_opening(1).unwrap(), run.unit.opening(1).unwrap()).unwrap();
			let bound = bind_segment(&run.commitment(), 1, &trace.root(), &binding).expect("the trace binds to the run's boundaries");
			(trace, bound.start_state_root)
		};
		let ((mine, my_start), (theirs, their_start)) = (bound(&run), bound(&liar_run));
		assert_eq!(my_start, their_start, "both traces start from the liar's checkpoint");
		assert_eq!(bisect(10, &theirs.tree, &mine.tree).unwrap().leaf, 4, "the step level ends on step 24");
		std::fs::remove_dir_all(&base).unwrap();
	}

	/// Asked for a chunk of a checkpoint or of the final model, the defender posts one the
	/// chain's check accepts against the proof it committed, read from its unit folder; a
	/// requester has nothing to post and ends the request once its deadline has passed.
	#[test]
	fn the_defender_posts_the_chunks_an_availability_request_demands() {
		let base = std::env::temp_dir().join(format!("touchstone-available-{}", std::process::id()));
		let unit = work(&base);
		run_unit(CpuBackend, &unit, &AtomicBool::new(false), |_| {}).unwrap().unwrap();
		let run = Run::load(&unit).unwrap();
		let commitment = run.commitment();
		for step in [20, 30, 35] {
			let request = dispute(Phase::Availability { step, chunk: 0 }, 100);
			let Some(Move::ProvideChunk(Static(chunk))) = run.next_move(&request, Party::Defender, 50).unwrap() else {
				panic!("the defender posts the chunk of step {step}");
			};
			assert_eq!(open_state_chunk(&run.graph, &commitment, step, 0, &chunk), Ok(()), "step {step}");
			// The chunk of one state is not another's.
			assert!(open_state_chunk(&run.graph, &commitment, step - 10, 0, &chunk).is_err(), "step {step}");
		}
		let request = dispute(Phase::Availability { step: 20, chunk: 0 }, 100);
		assert!(run.next_move(&request, Party::Challenger, 50).unwrap().is_none());
		assert!(matches!(run.next_move(&request, Party::Challenger, 100).unwrap(), Some(Move::TimeOut)));
		std::fs::remove_dir_all(&base).unwrap();
	}

	/// A unit trained with an injected fault (`solve --inject-fault`) proves a trace no
	/// honest run gives, and its re-execution for a dispute replays the fault: the liar's
	/// segment trace and operator trees of the faulted step bind to its own commitment, so a
	/// dispute against it is played to the referee rather than lost on a binding.
	#[test]
	#[cfg(feature = "test-equipment")]
	fn a_faulted_unit_is_replayed_consistently_for_its_dispute() {
		let base = std::env::temp_dir().join(format!("touchstone-liar-{}", std::process::id()));
		let honest = work(&base.join("honest"));
		let mut liar = work(&base.join("liar"));
		liar.fault = Some(touchstone_kernels::job::fault::Fault::Output { step: 24, operator: 1, output: 0, element: 0, bit: 20 });
		let honest_proof = run_unit(CpuBackend, &honest, &AtomicBool::new(false), |_| {}).unwrap().unwrap().proof;
		let liar_proof = run_unit(CpuBackend, &liar, &AtomicBool::new(false), |_| {}).unwrap().unwrap().proof;
		assert_ne!(honest_proof.trace_root, liar_proof.trace_root);
		assert_eq!(honest_proof.start_state_root, liar_proof.start_state_root);
		let (honest_run, liar_run) = (Run::load(&honest).unwrap(), Run::load(&liar).unwrap());
		assert_eq!(liar_run.unit.root(), liar_proof.trace_root.0);
		// The first boundary agrees, the second (the lie's segment) does not.
		assert_eq!(honest_run.unit.boundaries[0], liar_run.unit.boundaries[0]);
		assert_ne!(honest_run.unit.boundaries[1], liar_run.unit.boundaries[1]);
		let commitment = liar_run.commitment();
		let (start, end) = (liar_run.unit.start_opening(1).unwrap(), liar_run.unit.opening(1).unwrap());
		let segment = liar_run.segment(1).unwrap();
		let trace = bind_segment(&commitment, 1, &segment.root(), &segment.binding(start, end).unwrap()).unwrap();
		let opening = segment.run_opening(&liar.data, &liar_run.dataset_tree, 0..liar.samples());
		for step in [23, 24, 25] {
			let step_trace = liar_run.trace(step).unwrap();
			let binding = open_step_binding(&liar_run.graph, &step_trace, &opening).unwrap();
			assert!(bind_step(&liar_run.graph, &trace, step, &step_trace.operators.root(), &binding).is_ok(), "step {step}");
		}
		// The runs agree before the faulted step and differ from it on.
		assert_eq!(honest_run.trace(23).unwrap().operators.root(), liar_run.trace(23).unwrap().operators.root());
		assert_ne!(honest_run.trace(24).unwrap().operators.root(), liar_run.trace(24).unwrap().operators.root());
		std::fs::remove_dir_all(&base).unwrap();
	}
}
