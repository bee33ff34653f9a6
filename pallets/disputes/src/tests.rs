//! Disputes played end to end in the mock runtime, over real traces: tiny models trained
//! with the kernels' reference trainer, honest and with deliberate faults, and the real
//! staking and tasks pallets. Every test ends by checking every pallet's invariants and
//! that total issuance did not change.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::arithmetic_side_effects, clippy::indexing_slicing)]

mod adversaries;
mod attacks;
mod summons;
mod aggregates;

use crate::{mock::*, DisputeId, Disputes as DisputeRecords, Error, Event, Grounds, Party, Phase, Ruling, UnitDisputes};
use polkadot_sdk::{
	frame_support::{
		assert_noop, assert_ok,
		traits::{
			fungible::{Inspect, InspectHold},
			Get, GetStorageVersion, OnRuntimeUpgrade, StorageVersion,
		},
	},
	sp_runtime::{BoundedVec, DispatchResult, FixedU64, Perbill},
};
use std::collections::BTreeMap;
use touchstone_kernels::{
	job::{
		data::{synthetic, Dataset},
		fault::Fault,
		model::{ModelConfig, TrainConfig},
		trace::{state_root, Boundary, StepRecord, StepTrace, Trainer},
	},
	proof::{
		bisection::reveal,
		chain::ChainPoint,
		graph::Graph,
		merkle::{depth, MerkleTree},
	},
	referee::{open_case, open_step_binding, state_chunk, RunOpening, SegmentTrace, TracedStep, UnitBoundaries},
	CpuBackend, Digest,
};
use touchstone_primitives::{
	referee::{boundary_before, kernel_model, kernel_train, BoundaryOpening, Level, StateOpening, UnitCommitment},
	Activation, ContentRef, DatasetRef, Decomposition, HardwareRequirements, HyperParams, JobSpec, LearningProof,
	ModelArch, Optimizer, Role, Segments, TrainingMetrics, UnitState, VerificationMode,
};

/// A tiny job the chain accepts and the kernels train: a 4→6→3 tanh MLP on 24 synthetic
/// samples, batch 4, SGD with momentum, cut into `units` step ranges.
struct TinyJob {
	spec: JobSpec<u64>,
	model: ModelConfig,
	train: TrainConfig,
	data: Dataset,
	data_tree: MerkleTree,
	graph: Graph,
}

impl TinyJob {
	fn new(steps: u32, units: u32) -> Self {
		Self::shaped(4, 6, 3, 4, 24, steps, units)
	}

	/// An MLP `inputs → hidden → classes` with batches of `batch` from `samples` samples.
	fn shaped(inputs: u32, hidden: u32, classes: u32, batch: u32, samples: usize, steps: u32, units: u32) -> Self {
		let model = ModelArch::Mlp {
			inputs,
			hidden: BoundedVec::truncate_from(vec![hidden]),
			classes,
			activation: Activation::Tanh,
		};
		Self::of_model(model, batch, samples, steps, units)
	}

	/// A job training `model` with batches of `batch` from `samples` synthetic samples.
	fn of_model(model: ModelArch, batch: u32, samples: usize, steps: u32, units: u32) -> Self {
		let probe = kernel_model(&model);
		let data = synthetic(5, samples, probe.input_len().unwrap(), probe.classes());
		let data_tree = data.tree().unwrap();
		let hyper = HyperParams {
			steps,
			batch_size: batch,
			learning_rate: FixedU64::from_rational(1, 10),
			optimizer: Optimizer::Sgd { momentum: FixedU64::from_rational(9, 10) },
			grad_clip_norm: None,
			seed: 11,
			checkpoint_interval: steps / units,
		};
		let (kernel_model, train) = (kernel_model(&model), kernel_train(&hyper));
		let initial = Trainer::new(CpuBackend, &kernel_model, &train, data.clone()).unwrap().state().unwrap();
		let spec = JobSpec {
			model,
			initial_weights: None,
			initial_state_root: state_root(&initial).unwrap().into(),
			dataset: DatasetRef {
				content: ContentRef {
					hash: [1; 32].into(),
					location: BoundedVec::truncate_from(b"file:///tiny.bin".to_vec()),
				},
				samples: data.len() as u32,
				root: data_tree.root().into(),
			},
			hyper,
			decomposition: Decomposition::StepRanges { steps_per_unit: steps / units },
			verification: VerificationMode::Exact,
			requirements: HardwareRequirements {
				device: None,
				min_memory_mib: 0,
				min_throughput_gflops: 0,
				min_bandwidth_mbps: 0,
				region: None,
			},
			price_per_unit: 10,
			budget: 10 * u64::from(units),
			unit_timeout: 20,
			pool_timeout: 20,
		};
		// A timeout that holds a segment's training at the mock's reference rate, as the
		// chain requires; 20 blocks for the small jobs most tests time.
		let minimum: u32 = <Test as pallet_touchstone_tasks::Config>::MinUnitTimeout::get();
		let segment = minimum.saturating_add(
			touchstone_primitives::reexecution_blocks(
				touchstone_primitives::step_multiply_adds(&spec.model, &spec.hyper),
				spec.hyper.checkpoint_interval,
				<Test as pallet_touchstone_tasks::Config>::ReferenceWorkPerBlock::get(),
			),
		);
		let spec = JobSpec { unit_timeout: spec.unit_timeout.max(segment), ..spec };
		let graph = Graph::build(&kernel_model, &train).unwrap();
		Self { spec, model: kernel_model, train, data, data_tree, graph }
	}

	/// Submits the job as `OWNER`; returns its id.
	/// The job with checkpoint boundaries every `interval` steps.
	fn with_interval(mut self, interval: u32) -> Self {
		self.spec.hyper.checkpoint_interval = interval;
		self.train.checkpoint_interval = interval;
		self
	}

	fn submit(&self) -> u64 {
		let id = pallet_touchstone_tasks::NextJobId::<Test>::get();
		assert_ok!(Tasks::submit_job(RuntimeOrigin::signed(OWNER), self.spec.clone()));
		id
	}
}

/// A party's run over one unit: the trainer's records of every step and its boundaries,
/// honest or with faults, from the unit's start state; segment traces and step traces are
/// re-executed when a dispute asks for them, as a solver does.
struct Run<'a> {
	job: &'a TinyJob,
	first_step: u32,
	start_state: Vec<Vec<f32>>,
	start: Digest,
	faults: Vec<Fault>,
	/// Whether it steps as the prover does, on past non-finite values.
	traced: bool,
	records: Vec<StepRecord>,
	unit: UnitBoundaries,
	segments: BTreeMap<u32, SegmentTrace>,
	traces: BTreeMap<u32, StepTrace>,
}

impl<'a> Run<'a> {
	/// Trains `steps` steps from step `first_step`, starting from the honest model at
	/// that step, with `fault` applied if any.
	fn train(job: &'a TinyJob, first_step: u32, steps: u32, fault: Option<Fault>) -> Self {
		Self::train_with(job, first_step, steps, fault.into_iter().collect())
	}

	/// Trains as [`Run::train`] does, with every fault of `faults` applied.
	fn train_with(job: &'a TinyJob, first_step: u32, steps: u32, faults: Vec<Fault>) -> Self {
		Self::from_state(job, first_step, steps, honest_state(job, first_step), faults)
	}

	/// Trains `steps` steps from step `first_step`, starting from `start_state`.
	fn from_state(job: &'a TinyJob, first_step: u32, steps: u32, start_state: Vec<Vec<f32>>, faults: Vec<Fault>) -> Self {
		Self::run(job, first_step, steps, start_state, faults, false)
	}

	/// Runs the unit, closing a segment at every boundary of the job's grid; `traced`
	/// steps as the prover does, going on past non-finite values (a lie may plant them).
	fn run(
		job: &'a TinyJob,
		first_step: u32,
		steps: u32,
		start_state: Vec<Vec<f32>>,
		faults: Vec<Fault>,
		traced: bool,
	) -> Self {
		let start = state_root(&start_state).unwrap();
		let mut run = Self {
			job,
			first_step,
			start_state,
			start,
			faults,
			traced,
			records: Vec::new(),
			unit: UnitBoundaries::new(vec![Boundary { next_step: 0, state_root: [0; 32], record: [0; 32] }]).unwrap(),
			segments: BTreeMap::new(),
			traces: BTreeMap::new(),
		};
		let mut trainer = run.trainer(first_step);
		let end = first_step + steps;
		let mut boundaries = Vec::new();
		for _ in 0..steps {
			run.records.push(run.advance(&mut trainer).0);
			if job.train.is_checkpoint_step(trainer.next_step(), end) {
				boundaries.push(trainer.close_segment().unwrap());
			}
		}
		run.unit = UnitBoundaries::new(boundaries).unwrap();
		run
	}

	/// The unit's checkpoint grid.
	fn grid(&self) -> Segments {
		Segments::new(self.first_step, self.records.len() as u32, self.job.train.checkpoint_interval)
	}

	/// The state this run ends at: where the next step range starts from it.
	fn final_state(&self) -> Vec<Vec<f32>> {
		self.state_before(self.first_step + self.records.len() as u32)
	}

	/// A trainer at global step `step` of this run (a boundary, or the unit's start),
	/// with this run's faults.
	fn trainer(&self, step: u32) -> Trainer<CpuBackend> {
		let state = if step == self.first_step { self.start_state.clone() } else { self.state_before(step) };
		let mut trainer =
			Trainer::resume(CpuBackend, &self.job.model, &self.job.train, self.job.data.clone(), state, ChainPoint::start(step))
				.unwrap();
		for &fault in &self.faults {
			trainer.inject(fault);
		}
		trainer
	}

	/// The state this run holds before global step `step`.
	fn state_before(&self, step: u32) -> Vec<Vec<f32>> {
		let mut trainer = Trainer::resume(
			CpuBackend,
			&self.job.model,
			&self.job.train,
			self.job.data.clone(),
			self.start_state.clone(),
			ChainPoint::start(self.first_step),
		)
		.unwrap();
		for &fault in &self.faults {
			trainer.inject(fault);
		}
		for _ in self.first_step..step {
			self.advance(&mut trainer);
		}
		trainer.state().unwrap()
	}

	/// Runs `trainer`'s next step as this run does (a traced run hashes every step and
	/// goes on past non-finite values); returns its record and where its trace stands.
	fn advance(&self, trainer: &mut Trainer<CpuBackend>) -> (StepRecord, TracedStep) {
		if trainer.trace_point().is_none() {
			trainer.start_trace().unwrap();
		}
		let record = if self.traced { trainer.trace_step().unwrap().record } else { trainer.step().unwrap() };
		let point = trainer.trace_point().unwrap();
		(record, TracedStep { state_hash: point.last_hash, state_root: point.last_state_root, record: record.record })
	}

	/// The step-level trace of segment `segment`, re-executed once from the boundary
	/// before it and kept.
	fn segment(&mut self, segment: u32) -> &SegmentTrace {
		if !self.segments.contains_key(&segment) {
			let range = self.grid().range(segment).unwrap();
			let mut trainer = self.trainer(range.start);
			let start = trainer.start_trace().unwrap().last_state_root;
			let steps = range.clone().map(|_| self.advance(&mut trainer).1).collect();
			self.segments.insert(segment, SegmentTrace::new(range.start, start, steps).unwrap());
		}
		&self.segments[&segment]
	}

	/// The full trace of global step `step`, re-executed once from the start of its
	/// segment and kept.
	fn trace(&mut self, step: u32) -> &StepTrace {
		if !self.traces.contains_key(&step) {
			let grid = self.grid();
			let range = grid.range(grid.of_step(step).unwrap()).unwrap();
			let mut trainer = self.trainer(range.start);
			trainer.start_trace().unwrap();
			for _ in range.start..step {
				self.advance(&mut trainer);
			}
			self.traces.insert(step, trainer.trace_step().unwrap());
		}
		&self.traces[&step]
	}

	/// The unit's segment root.
	fn root(&self) -> Digest {
		self.unit.root()
	}

	/// The opening of the boundary this run commits before global step `step`.
	fn boundary_opening(&self, step: u32) -> BoundaryOpening {
		let unit = UnitCommitment {
			root: self.root(),
			first_step: self.first_step,
			steps: self.records.len() as u32,
			interval: self.job.train.checkpoint_interval,
			start_state_root: self.start,
		};
		self.unit.opening(boundary_before(&unit, step).unwrap()).unwrap()
	}

	/// The learning proof a solver commits for this run, and the opening of its final state.
	fn proof(&self) -> (LearningProof, BoundaryOpening) {
		let last = self.unit.boundaries.last().unwrap();
		let proof = LearningProof {
			trace_root: self.root().into(),
			steps: self.records.len() as u32,
			start_state_root: self.start.into(),
			final_state_root: last.state_root.into(),
			metrics: TrainingMetrics { loss: FixedU64::from_rational(1, 2), accuracy: Perbill::from_percent(50) },
		};
		(proof, self.unit.final_opening().unwrap())
	}

	/// Answers the current phase of dispute `id` as `who`, from this run.
	fn answer(&mut self, id: DisputeId, who: u64) -> DispatchResult {
		let info = DisputeRecords::<Test>::get(id).unwrap();
		let origin = RuntimeOrigin::signed(who);
		let graph = self.job.graph.clone();
		match info.phase {
			Phase::Bisect { level, game, .. } => {
				let reveal = match level {
					Level::Segments => reveal(&self.unit.tree, game.level, game.index),
					Level::Steps => reveal(&self.segment(info.segment.unwrap()).tree, game.level, game.index),
					Level::Operators => reveal(&self.trace(info.step.unwrap()).operators, game.level, game.index),
					Level::Pieces { operator } => {
						reveal(&self.trace(info.step.unwrap()).pieces[operator as usize], game.level, game.index)
					},
				};
				Disputes::reveal(origin, id, reveal)
			},
			Phase::BindSegment { .. } => {
				let segment = info.segment.unwrap();
				let (start, end) = (self.unit.start_opening(segment).unwrap(), self.unit.opening(segment).unwrap());
				let trace = self.segment(segment);
				let binding = trace.binding(start, end).unwrap();
				Disputes::bind_segment(origin, id, trace.root(), binding)
			},
			Phase::BindStep { .. } => {
				let step = info.step.unwrap();
				self.segment(info.segment.unwrap());
				self.trace(step);
				let opening = self.opening(info.segment.unwrap());
				let binding = open_step_binding(&graph, &self.traces[&step], &opening).unwrap();
				Disputes::bind_step(origin, id, self.traces[&step].operators.root(), binding).map(|_| ()).map_err(|error| error.error)
			},
			Phase::BindOperator { .. } => {
				let operator = info.operator.unwrap() as usize;
				let trace = self.trace(info.step.unwrap());
				let (root, proof) = (trace.pieces[operator].root(), trace.operators.proof(operator).unwrap());
				Disputes::bind_operator(origin, id, root, proof).map(|_| ()).map_err(|error| error.error)
			},
			Phase::Judge => {
				let step = info.step.unwrap();
				self.segment(info.segment.unwrap());
				self.trace(step);
				let opening = self.opening(info.segment.unwrap());
				let (operator, piece) = (info.operator.unwrap() as usize, info.piece.unwrap() as usize);
				let (_, openings) = open_case(&graph, &self.traces[&step], &opening, operator, piece).unwrap();
				Disputes::resolve(origin, id, openings).map(|_| ()).map_err(|error| error.error)
			},
			Phase::Availability { step, chunk } => {
				let posted = state_chunk(&self.state_before(step), chunk, self.boundary_opening(step)).unwrap();
				Disputes::provide_chunk(origin, id, posted).map(|_| ()).map_err(|error| error.error)
			},
		}
	}

	/// What a case over segment `segment` (re-executed already) is opened from.
	fn opening(&self, segment: u32) -> RunOpening<'_> {
		self.segments[&segment].run_opening(&self.job.data, &self.job.data_tree, 0..self.job.data.len())
	}
}

/// The honest model's state before global step `step`.
fn honest_state(job: &TinyJob, step: u32) -> Vec<Vec<f32>> {
	let mut honest = Trainer::new(CpuBackend, &job.model, &job.train, job.data.clone()).unwrap();
	for _ in 0..step {
		honest.step().unwrap();
	}
	honest.state().unwrap()
}

/// A fault that flips an output of `operator` at `step` (its first output, element 0).
fn output_fault(step: u32, operator: usize) -> Fault {
	Fault::Output { step, operator, output: 0, element: 0, bit: 20 }
}

/// `solver` takes unit `unit` of `job` (accepts it if it is offered to it, as the next step
/// range is to the solver of the one before, else claims it) and commits `run`'s proof.
fn prove(job: u64, unit: u32, solver: u64, run: &Run) {
	take(job, unit, solver);
	let (proof, opening) = run.proof();
	assert_ok!(Tasks::submit_proof(RuntimeOrigin::signed(solver), job, unit, proof, opening, None));
}

/// `solver` takes unit `unit` of `job`: accepts it if it is offered to it, else claims it
/// (once the solver it is offered to, if another, declines it).
fn take(job: u64, unit: u32, solver: u64) {
	let offered_to = pallet_touchstone_tasks::Units::<Test>::get(job, unit)
		.filter(|unit| unit.state == UnitState::Assigned && !unit.accepted)
		.and_then(|unit| unit.solver);
	match offered_to {
		Some(offered) if offered == solver => {
			assert_ok!(Tasks::accept_unit(RuntimeOrigin::signed(solver), job, unit));
		},
		other => {
			if let Some(other) = other {
				assert_ok!(Tasks::decline_unit(RuntimeOrigin::signed(other), job, unit));
			}
			assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(solver), job, unit));
		},
	}
}

/// `challenger` disputes unit `unit` of `job` with `run`'s trace; returns the dispute.
fn challenge(job: u64, unit: u32, challenger: u64, run: &Run) -> DisputeId {
	let id = crate::NextDisputeId::<Test>::get();
	assert_ok!(Disputes::challenge(RuntimeOrigin::signed(challenger), job, unit, run.root()));
	id
}

/// Plays dispute `id` to its end, both sides answering from their runs; returns the
/// rounds of bisection played.
fn play(id: DisputeId, defender: &mut Run, challenger: &mut Run) -> u32 {
	let mut rounds = 0;
	while let Some(info) = DisputeRecords::<Test>::get(id) {
		rounds = info.rounds;
		if info.phase == Phase::Judge {
			assert_ok!(defender.answer(id, info.defender));
			break;
		}
		assert_ok!(defender.answer(id, info.defender));
		assert_ok!(challenger.answer(id, info.challenger));
	}
	assert!(!DisputeRecords::<Test>::contains_key(id), "the dispute ended");
	rounds
}

fn challenge_bond_held(who: u64) -> u64 {
	Balances::balance_on_hold(&RuntimeHoldReason::Disputes(crate::HoldReason::ChallengeBond), &who)
}

fn solver_bond(who: u64) -> u64 {
	<Staking as touchstone_primitives::traits::ComputeNodes<u64, u64>>::bond(&who, Role::Solver)
}

fn unit_state(job: u64, unit: u32) -> UnitState {
	pallet_touchstone_tasks::Units::<Test>::get(job, unit).unwrap().state
}

/// The ruling of dispute `id` among the events.
fn ruling(id: DisputeId) -> (Ruling, Grounds) {
	dispute_events()
		.into_iter()
		.find_map(|event| match event {
			Event::DisputeResolved { dispute, ruling, grounds, .. } if dispute == id => Some((ruling, grounds)),
			_ => None,
		})
		.expect("the dispute was resolved")
}

/// What a conviction pays its challengers, together, of a slash of `slashed`.
fn conviction_reward(slashed: u64) -> u64 {
	<Test as crate::Config>::ConvictionShare::get().mul_floor(slashed)
}

/// The expected rounds of a dispute found at `operator` and `piece` count of a unit of `steps` steps.
fn expected_rounds(job: &TinyJob, steps: u32, step: u32, operator: usize) -> u32 {
	let grid = Segments::new(0, steps, job.train.checkpoint_interval);
	let segment = grid.range(grid.of_step(step).unwrap()).unwrap();
	depth(grid.count() as usize)
		+ depth(segment.len())
		+ depth(job.graph.nodes.len())
		+ depth(job.graph.piece_count(operator).unwrap())
}

#[test]
fn an_honest_proof_is_paid_after_its_window() {
	let job = TinyJob::new(8, 1);
	build_and_execute(|| {
		let id = job.submit();
		let honest = Run::train(&job, 0, 8, None);
		prove(id, 0, SOLVER, &honest);
		run_to_block(1 + CHALLENGE_WINDOW);
		let before = Balances::balance(&SOLVER);
		assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), id, 0));
		assert_eq!(Balances::balance(&SOLVER), before + 9, "paid the price less the jackpot's tenth");
		// The job's result names the state the honest run ends at, proven against its trace.
		let result = pallet_touchstone_tasks::Jobs::<Test>::get(id).unwrap().result.unwrap();
		assert_eq!(result.state_root.0, state_root(&honest.final_state()).unwrap());
	});
}

#[test]
fn a_solver_that_lies_at_one_operator_is_caught_slashed_and_its_unit_redone() {
	let job = TinyJob::new(8, 1);
	build_and_execute(|| {
		let id = job.submit();
		let operator = 1;
		let mut liar = Run::train(&job, 0, 8, Some(output_fault(5, operator)));
		let mut honest = Run::train(&job, 0, 8, None);
		assert_ne!(liar.root(), honest.root());
		prove(id, 0, SOLVER, &liar);
		let dispute = challenge(id, 0, CHALLENGER, &honest);
		assert_eq!(unit_state(id, 0), UnitState::Challenged);
		assert_eq!(challenge_bond_held(CHALLENGER), CHALLENGE_BOND);
		// The unit cannot be paid while the dispute is open.
		run_to_block(1 + CHALLENGE_WINDOW);
		assert!(Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), id, 0).is_err());
		let (challenger_before, jackpot_before) = (Balances::balance(&CHALLENGER), Balances::balance(&JACKPOT));

		let rounds = play(dispute, &mut liar, &mut honest);
		assert_eq!(ruling(dispute), (Ruling::ChallengerWins, Grounds::Referee));
		assert_eq!(rounds, expected_rounds(&job, 8, 5, operator));
		// The conviction's share of the slash to the challenger, the rest to the jackpot;
		// the bond is returned.
		let reward = conviction_reward(SOLVER_SLASH);
		assert_eq!(solver_bond(SOLVER), SOLVER_BOND - SOLVER_SLASH);
		assert_eq!(Balances::balance(&CHALLENGER), challenger_before + reward + CHALLENGE_BOND);
		assert_eq!(Balances::balance(&JACKPOT), jackpot_before + SOLVER_SLASH - reward);
		assert_eq!(challenge_bond_held(CHALLENGER), 0);
		// The unit goes back to the pool from its start, for another solver.
		let unit = pallet_touchstone_tasks::Units::<Test>::get(id, 0).unwrap();
		assert_eq!((unit.state, unit.proof, unit.passed_by), (UnitState::Reassigned, None, Some(SOLVER)));
		let honest_again = Run::train(&job, 0, 8, None);
		prove(id, 0, SECOND_SOLVER, &honest_again);
	});
}

#[test]
fn a_lie_at_any_step_operator_and_piece_kind_is_located_and_refused_by_the_referee() {
	let job = TinyJob::new(6, 1);
	// Every operator with outputs a later operator reads: matmuls (accumulators and
	// segments), bias adds, the activation, the loss and its gradients, the optimizer.
	let operators: Vec<usize> = (1..job.graph.nodes.len() - 1).collect();
	let mut played = 0;
	for (i, &operator) in operators.iter().enumerate() {
		let step = (i as u32) % 6;
		let mut liar = Run::train(&job, 0, 6, Some(output_fault(step, operator)));
		let mut honest = Run::train(&job, 0, 6, None);
		if liar.root() == honest.root() {
			// The flipped element feeds nothing that reaches the state (the loss value is
			// the one exception the state hash binds; a_wrong_loss covers it).
			continue;
		}
		build_and_execute(|| {
			let id = job.submit();
			prove(id, 0, SOLVER, &liar);
			let dispute = challenge(id, 0, CHALLENGER, &honest);
			play(dispute, &mut liar, &mut honest);
			assert_eq!(ruling(dispute), (Ruling::ChallengerWins, Grounds::Referee), "operator {operator} at step {step}");
		});
		played += 1;
	}
	assert!(played * 3 >= operators.len() * 2, "{played} of {} operators played", operators.len());
}

proptest::proptest! {
	#![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

	/// Random faults (step, operator, element, a mantissa bit: an exponent bit can make the
	/// liar's own run diverge, which its trainer refuses) in random roles: whichever side lies,
	/// the honest side wins, the loser pays, and no funds are created or destroyed
	/// (`build_and_execute` checks total issuance and every pallet's invariants).
	#[test]
	fn the_honest_side_always_wins(
		step in 0u32..6,
		operator_pick in 0usize..1_000,
		element in 0usize..8,
		bit in 10u32..23,
		defender_lies: bool,
	) {
		let job = TinyJob::new(6, 1);
		let operator = 1 + operator_pick % (job.graph.nodes.len() - 2);
		let fault = Fault::Output { step, operator, output: 0, element, bit };
		let mut liar = Run::train(&job, 0, 6, Some(fault));
		let mut honest = Run::train(&job, 0, 6, None);
		if liar.root() != honest.root() {
			build_and_execute(|| {
				let id = job.submit();
				let (defender, challenger) = if defender_lies { (&mut liar, &mut honest) } else { (&mut honest, &mut liar) };
				prove(id, 0, SOLVER, defender);
				let dispute = challenge(id, 0, CHALLENGER, challenger);
				play(dispute, defender, challenger);
				let expected = if defender_lies { Ruling::ChallengerWins } else { Ruling::DefenderWins };
				assert_eq!(ruling(dispute), (expected, Grounds::Referee), "{fault:?}");
			});
		}
	}
}

#[test]
fn a_wrong_partial_sum_inside_a_contraction_is_caught() {
	let job = TinyJob::new(4, 1);
	let chunk = touchstone_kernels::ChunkId { tile_row: 0, tile_col: 0, chunk: 0 };
	let fault = Fault::Accumulator { step: 2, operator: 1, chunk, element: 0, bit: 21 };
	let mut liar = Run::train(&job, 0, 4, Some(fault));
	let mut honest = Run::train(&job, 0, 4, None);
	assert_ne!(liar.root(), honest.root());
	build_and_execute(|| {
		let id = job.submit();
		prove(id, 0, SOLVER, &liar);
		let dispute = challenge(id, 0, CHALLENGER, &honest);
		play(dispute, &mut liar, &mut honest);
		assert_eq!(ruling(dispute), (Ruling::ChallengerWins, Grounds::Referee));
	});
}

#[test]
fn a_challenger_that_disputes_an_honest_proof_loses_its_bond() {
	let job = TinyJob::new(8, 1);
	build_and_execute(|| {
		let id = job.submit();
		let mut honest = Run::train(&job, 0, 8, None);
		let mut liar = Run::train(&job, 0, 8, Some(output_fault(3, 4)));
		prove(id, 0, SOLVER, &honest);
		let dispute = challenge(id, 0, CHALLENGER, &liar);
		let (solver_before, jackpot_before, challenger_before) =
			(Balances::balance(&SOLVER), Balances::balance(&JACKPOT), Balances::total_balance(&CHALLENGER));
		play(dispute, &mut honest, &mut liar);
		assert_eq!(ruling(dispute), (Ruling::DefenderWins, Grounds::Referee));
		assert_eq!(Balances::balance(&SOLVER), solver_before + CHALLENGE_BOND / 2);
		assert_eq!(Balances::balance(&JACKPOT), jackpot_before + CHALLENGE_BOND / 2);
		assert_eq!(Balances::total_balance(&CHALLENGER), challenger_before - CHALLENGE_BOND);
		assert_eq!(solver_bond(SOLVER), SOLVER_BOND);
		// The proof stands: the unit is paid once its window has passed.
		assert_eq!(unit_state(id, 0), UnitState::Proven);
		run_to_block(1 + CHALLENGE_WINDOW);
		assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), id, 0));
		assert_eq!(unit_state(id, 0), UnitState::Finalized);
	});
}

/// Plays dispute `id` until `silent` would answer for the `answers`-th time, then lets
/// the deadline pass and times it out.
fn play_until_silent(id: DisputeId, defender: &mut Run, challenger: &mut Run, silent: Party, answers: usize) {
	let mut answered = 0;
	loop {
		let info = DisputeRecords::<Test>::get(id).unwrap();
		if answered == answers {
			// The other side answers; the silent one does not.
			if info.phase != Phase::Judge {
				match silent {
					Party::Defender => {
						assert_ok!(challenger.answer(id, info.challenger));
					},
					Party::Challenger => {
						assert_ok!(defender.answer(id, info.defender));
					},
				}
			}
			assert_noop!(
				Disputes::time_out(RuntimeOrigin::signed(OWNER), id),
				Error::<Test>::DeadlineNotReached
			);
			run_to_block(info.deadline + 1);
			// Late answers are refused.
			let late = match silent {
				Party::Defender => defender.answer(id, info.defender),
				Party::Challenger => challenger.answer(id, info.challenger),
			};
			assert_noop!(late, Error::<Test>::DeadlinePassed);
			assert_ok!(Disputes::time_out(RuntimeOrigin::signed(OWNER), id));
			return;
		}
		if info.phase == Phase::Judge {
			panic!("the game ended before {silent:?} fell silent");
		}
		assert_ok!(defender.answer(id, info.defender));
		assert_ok!(challenger.answer(id, info.challenger));
		answered += 1;
	}
}

#[test]
fn silence_at_every_round_of_every_level_loses() {
	let job = TinyJob::new(4, 1);
	let operator = 2;
	let mut liar = Run::train(&job, 0, 4, Some(output_fault(1, operator)));
	let mut honest = Run::train(&job, 0, 4, None);
	// Answers per dispute: every round of the four levels and the three bindings.
	let phases = expected_rounds(&job, 4, 1, operator) as usize + 3;
	for answers in 0..=phases {
		for silent in [Party::Defender, Party::Challenger] {
			// An honest side falling silent loses as surely as a dishonest one.
			for defender_lies in [true, false] {
				if answers == phases && silent == Party::Challenger {
					continue; // the referee's phase waits on the defender only
				}
				build_and_execute(|| {
					let id = job.submit();
					let (defender, challenger) =
						if defender_lies { (&mut liar, &mut honest) } else { (&mut honest, &mut liar) };
					prove(id, 0, SOLVER, defender);
					let dispute = challenge(id, 0, CHALLENGER, challenger);
					play_until_silent(dispute, defender, challenger, silent, answers);
					let expected = match silent {
						Party::Defender => Ruling::ChallengerWins,
						Party::Challenger => Ruling::DefenderWins,
					};
					assert_eq!(ruling(dispute), (expected, Grounds::Timeout), "silent {silent:?} after {answers} answers");
				});
			}
		}
	}
}

#[test]
fn a_wrong_reveal_or_binding_is_refused_and_changes_nothing() {
	let job = TinyJob::new(4, 1).with_interval(2);
	let mut liar = Run::train(&job, 0, 4, Some(output_fault(1, 2)));
	let mut honest = Run::train(&job, 0, 4, None);
	build_and_execute(|| {
		let id = job.submit();
		prove(id, 0, SOLVER, &liar);
		let dispute = challenge(id, 0, CHALLENGER, &honest);
		// The challenger reveals the liar's children: they do not hash to its node.
		let game = match DisputeRecords::<Test>::get(dispute).unwrap().phase {
			Phase::Bisect { game, .. } => game,
			phase => panic!("{phase:?}"),
		};
		let wrong = reveal(&liar.unit.tree, game.level, game.index);
		assert_noop!(
			Disputes::reveal(RuntimeOrigin::signed(CHALLENGER), dispute, wrong),
			Error::<Test>::RevealInconsistent
		);
		let misshapen = touchstone_kernels::proof::bisection::Reveal { left: wrong.left, right: None };
		assert_noop!(
			Disputes::reveal(RuntimeOrigin::signed(SOLVER), dispute, misshapen),
			Error::<Test>::RevealMisshapen
		);
		assert_noop!(Disputes::reveal(RuntimeOrigin::signed(OWNER), dispute, wrong), Error::<Test>::NotAParty);
		assert_ok!(liar.answer(dispute, SOLVER));
		assert_noop!(liar.answer(dispute, SOLVER), Error::<Test>::AlreadyAnswered);
		// Play to the segment binding: the challenger's trace bound to the liar's boundary,
		// or the liar's trace to the challenger's, is refused.
		assert_ok!(honest.answer(dispute, CHALLENGER));
		while !matches!(DisputeRecords::<Test>::get(dispute).unwrap().phase, Phase::BindSegment { .. }) {
			assert_ok!(liar.answer(dispute, SOLVER));
			assert_ok!(honest.answer(dispute, CHALLENGER));
		}
		let segment = DisputeRecords::<Test>::get(dispute).unwrap().segment.unwrap();
		let liars_end = liar.unit.opening(segment).unwrap();
		let honest_trace = honest.segment(segment).clone();
		let crossed = honest_trace.binding(honest.unit.start_opening(segment).unwrap(), liars_end).unwrap();
		assert_noop!(
			Disputes::bind_segment(RuntimeOrigin::signed(CHALLENGER), dispute, honest_trace.root(), crossed.clone()),
			Error::<Test>::InvalidSegmentBinding
		);
		assert_noop!(
			Disputes::bind_segment(RuntimeOrigin::signed(SOLVER), dispute, honest_trace.root(), crossed),
			Error::<Test>::InvalidSegmentBinding
		);
		// Then to the step binding; the challenger offers the liar's operator root.
		while !matches!(DisputeRecords::<Test>::get(dispute).unwrap().phase, Phase::BindStep { .. }) {
			assert_ok!(liar.answer(dispute, SOLVER));
			assert_ok!(honest.answer(dispute, CHALLENGER));
		}
		let info = DisputeRecords::<Test>::get(dispute).unwrap();
		let (step, segment) = (info.step.unwrap(), info.segment.unwrap());
		liar.segment(segment);
		liar.trace(step);
		let binding = open_step_binding(&job.graph, &liar.traces[&step], &liar.opening(segment)).unwrap();
		let root = liar.traces[&step].operators.root();
		assert_noop!(
			Disputes::bind_step(RuntimeOrigin::signed(CHALLENGER), dispute, root, binding),
			Error::<Test>::InvalidStepBinding
		);
		assert_noop!(
			Disputes::resolve(RuntimeOrigin::signed(SOLVER), dispute, dummy_openings()),
			Error::<Test>::WrongPhase
		);
	});
}

fn dummy_openings() -> touchstone_primitives::referee::Openings {
	let proof = touchstone_primitives::referee::MerkleProof { index: 0, leaf_count: 1, siblings: vec![] };
	touchstone_primitives::referee::Openings {
		previous_state: StateOpening::Anchor,
		operator_proof: proof.clone(),
		operators: vec![],
		inputs: vec![],
		pieces: vec![],
		claimed_output: [0; 32],
		claim_proof: proof,
	}
}

#[test]
fn bad_challenges_are_refused_with_named_errors() {
	let job = TinyJob::new(4, 1);
	let honest = Run::train(&job, 0, 4, None);
	let other = Run::train(&job, 0, 4, Some(output_fault(1, 2)));
	build_and_execute(|| {
		let id = job.submit();
		let challenge_with = |who: u64, root: Digest| Disputes::challenge(RuntimeOrigin::signed(who), id, 0, root);
		assert_noop!(challenge_with(CHALLENGER, other.root()), Error::<Test>::NotDisputable);
		prove(id, 0, SOLVER, &honest);
		assert_noop!(challenge_with(CHALLENGER, honest.root()), Error::<Test>::NoDisagreement);
		assert_noop!(challenge_with(SOLVER, other.root()), Error::<Test>::OwnProof);
		assert_noop!(challenge_with(SECOND_SOLVER, other.root()), Error::<Test>::NotBondedChallenger);
		assert_ok!(challenge_with(CHALLENGER, other.root()));
		assert_noop!(challenge_with(CHALLENGER, other.root()), Error::<Test>::AlreadyChallenged);
		run_to_block(2 + CHALLENGE_WINDOW);
		assert_noop!(challenge_with(SECOND_CHALLENGER, other.root()), Error::<Test>::WindowClosed);
	});
}

#[test]
fn two_challengers_of_one_lie_share_one_reward() {
	let job = TinyJob::new(8, 1);
	build_and_execute(|| {
		let id = job.submit();
		let mut liar = Run::train(&job, 0, 8, Some(output_fault(6, 1)));
		let mut honest = Run::train(&job, 0, 8, None);
		prove(id, 0, SOLVER, &liar);
		let first = challenge(id, 0, CHALLENGER, &honest);
		let second = challenge(id, 0, SECOND_CHALLENGER, &honest);
		assert_eq!(UnitDisputes::<Test>::get((id, 0)).len(), 2);
		// Each side finds its disputes by its own keys: the defender both, each
		// challenger its own.
		let mut defended = Disputes::disputes_of(&SOLVER);
		defended.sort();
		assert_eq!(defended, vec![first, second]);
		assert_eq!(Disputes::disputes_of(&CHALLENGER), vec![first]);
		assert_eq!(Disputes::disputes_of(&SECOND_CHALLENGER), vec![second]);
		// A chain upgraded from version 1 indexes the disputes open at the upgrade.
		let _ = crate::PartyDisputes::<Test>::clear(u32::MAX, None);
		StorageVersion::new(1).put::<Disputes>();
		crate::migrations::IndexPartyDisputes::<Test>::on_runtime_upgrade();
		assert_eq!(Disputes::on_chain_storage_version(), 2);
		assert_eq!(Disputes::disputes_of(&CHALLENGER), vec![first]);
		assert_eq!(Disputes::disputes_of(&SOLVER).len(), 2);
		let (first_before, second_before) = (Balances::balance(&CHALLENGER), Balances::balance(&SECOND_CHALLENGER));
		play(first, &mut liar, &mut honest);
		let events = dispute_events();
		assert!(events.contains(&Event::DisputeDismissed { dispute: second, returned: CHALLENGE_BOND }));
		assert!(!DisputeRecords::<Test>::contains_key(second));
		// Both challengers get their bonds back and half the reward each, whichever
		// dispute ended first; the solver is slashed once.
		let half = conviction_reward(SOLVER_SLASH) / 2;
		assert_eq!(Balances::balance(&CHALLENGER), first_before + CHALLENGE_BOND + half);
		assert_eq!(Balances::balance(&SECOND_CHALLENGER), second_before + CHALLENGE_BOND + half);
		assert_eq!(solver_bond(SOLVER), SOLVER_BOND - SOLVER_SLASH);
		assert!(UnitDisputes::<Test>::get((id, 0)).is_empty());
		assert!([SOLVER, CHALLENGER, SECOND_CHALLENGER].iter().all(|who| Disputes::disputes_of(who).is_empty()));
	});
}

/// Accounts registered as verifiers in the attestation tests.
const VERIFIERS: [u64; 3] = [6, 7, 8];

/// Registers every one of `VERIFIERS` with `VERIFIER_BOND`.
fn register_verifiers() {
	for who in VERIFIERS {
		register(who, Role::Verifier, VERIFIER_BOND);
	}
}

fn verifier_bond(who: u64) -> u64 {
	<Staking as touchstone_primitives::traits::ComputeNodes<u64, u64>>::bond(&who, Role::Verifier)
}

/// Has every drawn verifier of `job`'s unit 0 commit and then reveal `Match`, advancing
/// through the commit period; the round must be drawn.
fn attest_match(job: u64) {
	use pallet_touchstone_verification::Verdict;
	let drawn = pallet_touchstone_verification::Rounds::<Test>::get((job, 0)).unwrap().drawn.unwrap();
	for who in VERIFIERS {
		let commitment = Verification::commitment(&Verdict::Match, &[who as u8; 32], &who);
		assert_ok!(Verification::commit(RuntimeOrigin::signed(who), job, 0, commitment));
	}
	run_to_block(drawn.commit_ends);
	for who in VERIFIERS {
		assert_ok!(Verification::reveal(RuntimeOrigin::signed(who), job, 0, Verdict::Match, [who as u8; 32]).map(|_| ()));
	}
}

/// The verification pallet's `FalseAttestation` events since the last reset, as
/// (verifier, step, slashed).
fn false_attestations() -> Vec<(u64, u32, u64)> {
	System::events()
		.into_iter()
		.filter_map(|record| match record.event {
			RuntimeEvent::Verification(pallet_touchstone_verification::Event::FalseAttestation {
				verifier, step, slashed, ..
			}) => Some((verifier, step, slashed)),
			_ => None,
		})
		.collect()
}

#[test]
fn verifiers_that_attested_a_lie_they_re_executed_are_slashed_when_it_falls() {
	// Eight steps checkpointed every two: four segments, of which each verifier samples two.
	let mut job = TinyJob::new(8, 1);
	job.spec.hyper.checkpoint_interval = 2;
	job.train.checkpoint_interval = 2;
	let lie_step = 5;
	build_and_execute(|| {
		register_verifiers();
		let id = job.submit();
		let mut liar = Run::train(&job, 0, 8, Some(output_fault(lie_step, 1)));
		let mut honest = Run::train(&job, 0, 8, None);
		prove(id, 0, SOLVER, &liar);
		// Drawn from randomness known only after the proof's block.
		run_to_block(3);
		attest_match(id);
		// A verifier re-executes its segments from the solver's checkpoints, so only the
		// segment holding the lie shows it: the others attested truly.
		let (sampled, unsampled): (Vec<u64>, Vec<u64>) = VERIFIERS
			.into_iter()
			.partition(|who| Verification::samples(id, 0, who).unwrap().contains(&(lie_step / 2)));
		assert!(!sampled.is_empty() && !unsampled.is_empty(), "this draw leaves both kinds: {sampled:?}");

		let dispute = challenge(id, 0, CHALLENGER, &honest);
		let (challenger_before, jackpot_before) = (Balances::balance(&CHALLENGER), Balances::balance(&JACKPOT));
		System::reset_events();
		play(dispute, &mut liar, &mut honest);
		let slashed = false_attestations();
		assert_eq!(ruling(dispute), (Ruling::ChallengerWins, Grounds::Referee));

		let expected: Vec<_> = sampled.iter().map(|who| (*who, lie_step, FALSE_ATTESTATION_SLASH)).collect();
		assert_eq!(slashed, expected);
		for who in &sampled {
			assert_eq!(verifier_bond(*who), VERIFIER_BOND - FALSE_ATTESTATION_SLASH);
		}
		for who in &unsampled {
			assert_eq!(verifier_bond(*who), VERIFIER_BOND);
		}
		// Each slash is shared as the solver's is: the conviction's share to the
		// challenger, the rest to the jackpot.
		let slashes = [SOLVER_SLASH].into_iter().chain(sampled.iter().map(|_| FALSE_ATTESTATION_SLASH));
		let (reward, total) = slashes.fold((0, 0), |(reward, total), slash| (reward + conviction_reward(slash), total + slash));
		assert_eq!(Balances::balance(&CHALLENGER), challenger_before + reward + CHALLENGE_BOND);
		assert_eq!(Balances::balance(&JACKPOT), jackpot_before + total - reward);
		// The round of the overturned proof is gone: nobody is paid for attesting it.
		assert!(pallet_touchstone_verification::Rounds::<Test>::get((id, 0)).is_none());
	});
}

#[test]
fn a_solver_silent_before_the_step_is_found_leaves_its_attesters_to_summonses() {
	let job = TinyJob::new(8, 1);
	build_and_execute(|| {
		register_verifiers();
		let id = job.submit();
		let liar = Run::train(&job, 0, 8, Some(output_fault(5, 1)));
		let mut honest = Run::train(&job, 0, 8, None);
		prove(id, 0, SOLVER, &liar);
		run_to_block(3);
		attest_match(id);
		let dispute = challenge(id, 0, CHALLENGER, &honest);
		// The challenger answers the first round; the solver never does.
		assert_ok!(honest.answer(dispute, CHALLENGER));
		let deadline = DisputeRecords::<Test>::get(dispute).unwrap().deadline;
		run_to_block(deadline + 1);
		System::reset_events();
		assert_ok!(Disputes::time_out(RuntimeOrigin::signed(OWNER), dispute));
		// The silence shows no step wrong, so no attestation is judged false.
		assert!(false_attestations().is_empty());
		assert_eq!(ruling(dispute), (Ruling::ChallengerWins, Grounds::Timeout));
		for who in VERIFIERS {
			assert_eq!(verifier_bond(who), VERIFIER_BOND);
		}
	});
}

#[test]
fn an_overturned_range_rolls_back_the_ranges_that_started_from_it() {
	let job = TinyJob::new(8, 2);
	build_and_execute(|| {
		let id = job.submit();
		let mut liar = Run::train(&job, 0, 4, Some(output_fault(2, 1)));
		let mut honest = Run::train(&job, 0, 4, None);
		prove(id, 0, SOLVER, &liar);
		// The next range starts from the liar's final state, and a second solver proves it.
		let next = pallet_touchstone_tasks::Units::<Test>::get(id, 1).unwrap();
		assert_eq!(next.start_state_root, Some(liar.proof().0.final_state_root));
		// Offered first to the solver that proved range 0, which declines it.
		assert_ok!(Tasks::decline_unit(RuntimeOrigin::signed(SOLVER), id, 1));
		assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(SECOND_SOLVER), id, 1));
		let dispute = challenge(id, 0, CHALLENGER, &honest);
		play(dispute, &mut liar, &mut honest);
		assert_eq!(ruling(dispute), (Ruling::ChallengerWins, Grounds::Referee));
		let next = pallet_touchstone_tasks::Units::<Test>::get(id, 1).unwrap();
		assert_eq!((next.state, next.solver, next.start_state_root), (UnitState::Waiting, None, None));
		assert_eq!(unit_state(id, 0), UnitState::Reassigned);
		// Redone honestly, the first range hands the honest state to the second.
		prove(id, 0, SECOND_SOLVER, &honest);
		let next = pallet_touchstone_tasks::Units::<Test>::get(id, 1).unwrap();
		assert_eq!(next.start_state_root, Some(honest.proof().0.final_state_root));
	});
}

#[test]
fn a_step_range_is_paid_only_after_the_range_it_started_from() {
	let job = TinyJob::new(8, 2);
	build_and_execute(|| {
		let id = job.submit();
		let first = Run::train(&job, 0, 4, None);
		let second = Run::train(&job, 4, 4, None);
		prove(id, 0, SOLVER, &first);
		prove(id, 1, SECOND_SOLVER, &second);
		run_to_block(1 + CHALLENGE_WINDOW);
		assert_noop!(
			Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), id, 1),
			pallet_touchstone_tasks::Error::<Test>::PredecessorNotFinal
		);
		assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), id, 0));
		assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), id, 1));
	});
}

#[test]
fn a_proof_that_does_not_start_from_the_chains_anchor_or_prove_its_end_is_refused() {
	let job = TinyJob::new(4, 1);
	let honest = Run::train(&job, 0, 4, None);
	build_and_execute(|| {
		let id = job.submit();
		assert_ok!(Tasks::claim_unit(RuntimeOrigin::signed(SOLVER), id, 0));
		let (proof, opening) = honest.proof();
		let mut elsewhere = proof;
		elsewhere.start_state_root = [9; 32].into();
		assert_noop!(
			Tasks::submit_proof(RuntimeOrigin::signed(SOLVER), id, 0, elsewhere, opening.clone(), None),
			pallet_touchstone_tasks::Error::<Test>::WrongStartState
		);
		let mut other_end = proof;
		other_end.final_state_root = [9; 32].into();
		assert_noop!(
			Tasks::submit_proof(RuntimeOrigin::signed(SOLVER), id, 0, other_end, opening, None),
			pallet_touchstone_tasks::Error::<Test>::InvalidFinalState
		);
	});
}

/// The acceptance case: a proof that hides one wrong operator output ten thousand
/// steps deep is narrowed in ⌈log₂ 10,000⌉ = 14 rounds over the steps, then over the
/// operators and the pieces, and the referee's ruling is carried out.
#[test]
fn a_lie_ten_thousand_steps_deep_is_found_in_fourteen_plus_log_rounds() {
	let steps = 10_000;
	let mut job = TinyJob::new(steps, 1);
	// 100 segments of 100 steps: seven rounds over the boundaries, seven over the steps.
	job.spec.hyper.checkpoint_interval = 100;
	job.train.checkpoint_interval = 100;
	let operator = 4;
	let mut liar = Run::train(&job, 0, steps, Some(output_fault(9_999, operator)));
	let mut honest = Run::train(&job, 0, steps, None);
	assert_ne!(liar.root(), honest.root());
	build_and_execute(|| {
		let id = job.submit();
		prove(id, 0, SOLVER, &liar);
		let dispute = challenge(id, 0, CHALLENGER, &honest);
		let rounds = play(dispute, &mut liar, &mut honest);
		assert_eq!(depth(100) + depth(100), 14);
		assert_eq!(rounds, expected_rounds(&job, steps, 9_999, operator));
		assert_eq!(ruling(dispute), (Ruling::ChallengerWins, Grounds::Referee));
		assert_eq!(solver_bond(SOLVER), SOLVER_BOND - SOLVER_SLASH);
	});
}

/// Plays `job`'s dispute against a liar with `faults` to the referee's phase and returns
/// what the benchmarks replay (`benchmark_case.rs`), after checking its openings convict.
fn record_case(job: &TinyJob, faults: Vec<Fault>) -> crate::benchmark_case::BenchmarkCase {
	let steps = job.spec.hyper.steps;
	let mut liar = Run::train_with(job, 0, steps, faults);
	let mut honest = Run::train(job, 0, steps, None);
	new_test_ext().execute_with(|| {
		let id = job.submit();
		prove(id, 0, SOLVER, &liar);
		let dispute = challenge(id, 0, CHALLENGER, &honest);
		while DisputeRecords::<Test>::get(dispute).unwrap().phase != Phase::Judge {
			assert_ok!(liar.answer(dispute, SOLVER));
			assert_ok!(honest.answer(dispute, CHALLENGER));
		}
		let info = DisputeRecords::<Test>::get(dispute).unwrap();
		let (step, operator, piece) = (info.step.unwrap(), info.operator.unwrap(), info.piece.unwrap());
		let segment = info.segment.unwrap();
		liar.segment(segment);
		liar.trace(step);
		let trace = &liar.traces[&step];
		let opening = liar.opening(segment);
		let (_, openings) = open_case(&job.graph, trace, &opening, operator as usize, piece as usize).unwrap();
		let (proof, final_state) = liar.proof();
		let segment_binding = liar.segments[&segment]
			.binding(liar.unit.start_opening(segment).unwrap(), liar.unit.opening(segment).unwrap())
			.unwrap();
		let case = crate::benchmark_case::BenchmarkCase {
			model: job.spec.model.clone(),
			hyper: job.spec.hyper.clone(),
			samples: job.spec.dataset.samples,
			dataset_root: job.spec.dataset.root.0,
			initial_state_root: job.spec.initial_state_root.0,
			proof,
			final_state,
			challenger_trace_root: honest.root(),
			segment,
			segment_start: info.segment_start.unwrap(),
			segment_traces: info.segment_traces.unwrap(),
			segment_binding,
			step,
			operator,
			piece,
			operator_roots: info.operator_roots.unwrap(),
			piece_roots: info.piece_roots.unwrap(),
			step_binding: open_step_binding(&job.graph, trace, &opening).unwrap(),
			operator_proof: trace.operators.proof(operator as usize).unwrap(),
			openings,
		};
		// The recorded openings convict the liar.
		assert_ok!(Disputes::resolve(RuntimeOrigin::signed(OWNER), dispute, case.openings.clone()));
		assert_eq!(ruling(dispute), (Ruling::ChallengerWins, Grounds::Referee));
		case
	})
}

/// Checks recording `recording` holds `case` (rewrites it with
/// `TOUCHSTONE_WRITE_BENCHMARK_CASE=1`), and that its openings are `bytes` long, which
/// `resolve`'s weight scales from.
fn check_recording(recording: crate::benchmark_case::Recording, case: crate::benchmark_case::BenchmarkCase, bytes: u32) {
	use codec::Encode;
	assert_eq!(case.openings.encoded_size() as u32, bytes);
	let path = format!("{}/src/{}", env!("CARGO_MANIFEST_DIR"), recording.file());
	if std::env::var_os("TOUCHSTONE_WRITE_BENCHMARK_CASE").is_some() {
		std::fs::write(&path, case.encode()).unwrap();
	}
	assert!(
		recording.case() == Some(case),
		"{path} is stale: rerun this test with TOUCHSTONE_WRITE_BENCHMARK_CASE=1"
	);
}

/// Plays the disputes the benchmarks replay and checks the committed recordings are
/// current: a K-chunk of a digits-sized step, and the largest piece a real step opens (a
/// loss partial at `MAX_CLASSES` classes, larger than any contraction chunk's openings).
#[test]
fn the_benchmark_cases_are_current() {
	use crate::benchmark_case::Recording;
	use touchstone_kernels::{proof::graph::OpKind, referee::MAX_CLASSES};
	let job = TinyJob::shaped(64, 64, 10, 32, 1_437, 4, 1);
	let chunk = touchstone_kernels::ChunkId { tile_row: 0, tile_col: 0, chunk: 1 };
	let fault = Fault::Accumulator { step: 2, operator: 1, chunk, element: 0, bit: 21 };
	check_recording(Recording::KChunk, record_case(&job, vec![fault]), crate::RESOLVE_BENCHMARK_BYTES);

	let job = TinyJob::shaped(1_000, 1_000, MAX_CLASSES, 64, 4_096, 2, 1);
	let loss = job.graph.nodes.iter().position(|node| matches!(node.kind, OpKind::SoftmaxCrossEntropy(_))).unwrap();
	// The liar's second loss partial (which also reads the first) is wrong, and so is the
	// loss it reports: a partial alone changes no output, so no step hash.
	let partial = Fault::Partial { step: 1, operator: loss, piece: 1, element: 0, bit: 21 };
	let case = record_case(&job, vec![partial, output_fault(1, loss)]);
	assert_eq!((case.operator as usize, case.piece), (loss, 1));
	check_recording(Recording::LargestPiece, case, crate::LARGEST_PIECE_BENCHMARK_BYTES);
}

/// Filling a unit's dispute slots with hopeless challenges cannot run its window out: when
/// the last one fails, the window opens again in full.
#[test]
fn the_window_opens_again_when_every_dispute_failed() {
	let job = TinyJob::new(4, 1);
	let mut honest = Run::train(&job, 0, 4, None);
	let mut other = Run::train(&job, 0, 4, Some(output_fault(1, 2)));
	build_and_execute(|| {
		let id = job.submit();
		prove(id, 0, SOLVER, &honest);
		let dispute = challenge(id, 0, CHALLENGER, &other);
		// The dispute outlives the window.
		run_to_block(1 + CHALLENGE_WINDOW + 2);
		play(dispute, &mut honest, &mut other);
		assert_eq!(ruling(dispute), (Ruling::DefenderWins, Grounds::Referee));
		let now = System::block_number();
		assert_noop!(
			Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), id, 0),
			pallet_touchstone_tasks::Error::<Test>::ChallengeWindowOpen
		);
		assert_ok!(Disputes::challenge(RuntimeOrigin::signed(SECOND_CHALLENGER), id, 0, other.root()));
		let second = crate::NextDisputeId::<Test>::get() - 1;
		run_to_block(DisputeRecords::<Test>::get(second).unwrap().deadline + 1);
		assert_ok!(Disputes::time_out(RuntimeOrigin::signed(OWNER), second));
		run_to_block(System::block_number() + CHALLENGE_WINDOW);
		assert!(System::block_number() > now + CHALLENGE_WINDOW);
		assert_ok!(Tasks::finalize_unit(RuntimeOrigin::signed(OWNER), id, 0));
	});
}

/// A challenger that opens a dispute and never answers loses, even if the defender is silent too.
#[test]
fn a_challenge_nobody_plays_is_lost_by_the_challenger() {
	let job = TinyJob::new(4, 1);
	let liar = Run::train(&job, 0, 4, Some(output_fault(1, 2)));
	let honest = Run::train(&job, 0, 4, None);
	build_and_execute(|| {
		let id = job.submit();
		prove(id, 0, SOLVER, &liar);
		let dispute = challenge(id, 0, CHALLENGER, &honest);
		run_to_block(DisputeRecords::<Test>::get(dispute).unwrap().deadline + 1);
		assert_ok!(Disputes::time_out(RuntimeOrigin::signed(OWNER), dispute));
		assert_eq!(ruling(dispute), (Ruling::DefenderWins, Grounds::Timeout));
		assert_eq!(unit_state(id, 0), UnitState::Proven);
	});
}

/// Overturning a range rolls back a later range that was already proven and challenged:
/// its solver is released at no cost and the dispute over it is dismissed, bond returned.
#[test]
fn an_overturn_dismisses_disputes_over_the_ranges_it_rolls_back() {
	let job = TinyJob::new(8, 2);
	build_and_execute(|| {
		let id = job.submit();
		let mut liar = Run::train(&job, 0, 4, Some(output_fault(2, 1)));
		let mut honest = Run::train(&job, 0, 4, None);
		prove(id, 0, SOLVER, &liar);
		// The second range, trained honestly from the liar's end, is proven and disputed too.
		let from_lie = Run::from_state(&job, 4, 4, liar.final_state(), Vec::new());
		prove(id, 1, SECOND_SOLVER, &from_lie);
		let other = Run::from_state(&job, 4, 4, liar.final_state(), vec![output_fault(5, 2)]);
		let later = challenge(id, 1, SECOND_CHALLENGER, &other);
		let first = challenge(id, 0, CHALLENGER, &honest);
		let second_challenger_before = Balances::balance(&SECOND_CHALLENGER);
		play(first, &mut liar, &mut honest);
		assert!(dispute_events().contains(&Event::DisputeDismissed { dispute: later, returned: CHALLENGE_BOND }));
		assert_eq!(Balances::balance(&SECOND_CHALLENGER), second_challenger_before + CHALLENGE_BOND);
		let next = pallet_touchstone_tasks::Units::<Test>::get(id, 1).unwrap();
		assert_eq!((next.state, next.solver, next.proof), (UnitState::Waiting, None, None));
		assert_eq!(solver_bond(SECOND_SOLVER), SOLVER_BOND);
	});
}

/// `DisputesApi`'s view of a dispute follows the game: the stage, the positions found so
/// far and whose answer the chain waits for, until the dispute ends and is no longer listed.
#[test]
fn the_status_follows_the_game_until_the_ruling() {
	use touchstone_primitives::DisputeStage;
	let job = TinyJob::new(8, 1).with_interval(2);
	build_and_execute(|| {
		let id = job.submit();
		let mut liar = Run::train(&job, 0, 8, Some(output_fault(5, 1)));
		let mut honest = Run::train(&job, 0, 8, None);
		prove(id, 0, SOLVER, &liar);
		let dispute = challenge(id, 0, CHALLENGER, &honest);
		assert_eq!(Disputes::unit_disputes(id, 0), vec![dispute]);
		let status = Disputes::status(dispute).unwrap();
		assert_eq!((status.job, status.unit, status.defender, status.challenger), (id, 0, SOLVER, CHALLENGER));
		assert_eq!(status.stage, DisputeStage::Bisect(Level::Segments));
		assert_eq!((status.segment, status.step, status.rounds), (None, None, 0));
		assert_eq!(status.deadline, DisputeRecords::<Test>::get(dispute).unwrap().deadline);
		assert!(status.awaiting_defender && status.awaiting_challenger);
		assert_ok!(liar.answer(dispute, SOLVER));
		let status = Disputes::status(dispute).unwrap();
		assert!(!status.awaiting_defender && status.awaiting_challenger);
		assert_ok!(honest.answer(dispute, CHALLENGER));
		assert_eq!(Disputes::status(dispute).unwrap().rounds, 1);
		// The segment level (four segments of two steps) ends on the lie's segment, and both
		// sides owe their traces of it.
		assert_ok!(liar.answer(dispute, SOLVER));
		assert_ok!(honest.answer(dispute, CHALLENGER));
		let status = Disputes::status(dispute).unwrap();
		assert_eq!((status.stage, status.segment, status.rounds), (DisputeStage::BindSegment, Some(2), 2));
		assert!(status.awaiting_defender && status.awaiting_challenger);
		// Played to the referee's stage: the disputed step, operator and piece are known,
		// and only the defender owes the openings.
		while DisputeRecords::<Test>::get(dispute).unwrap().phase != Phase::Judge {
			assert_ok!(liar.answer(dispute, SOLVER));
			assert_ok!(honest.answer(dispute, CHALLENGER));
		}
		let status = Disputes::status(dispute).unwrap();
		assert_eq!(status.stage, DisputeStage::Judge);
		assert_eq!(status.step, Some(5));
		assert_eq!(status.operator, Some(1));
		assert!(status.piece.is_some());
		assert!(status.awaiting_defender && !status.awaiting_challenger);
		assert_ok!(liar.answer(dispute, SOLVER));
		assert_eq!(Disputes::status(dispute), None);
		assert!(Disputes::unit_disputes(id, 0).is_empty());
		assert_eq!(ruling(dispute), (Ruling::ChallengerWins, Grounds::Referee));
	});
}

/// `resolve_weight` scales the benchmark's execution time, not its storage: the counts it
/// takes off are the ones the generated weights hold, in both of their implementations.
#[test]
fn the_resolve_weight_takes_off_the_benchmarks_own_storage_counts() {
	let (reads, writes) = crate::RESOLVE_BENCHMARK_READS_WRITES;
	let source = include_str!("weights.rs");
	let bodies: Vec<&str> = ["fn resolve() -> Weight {", "fn resolve_largest_piece() -> Weight {"]
		.into_iter()
		.flat_map(|head| source.split(head).skip(1))
		.map(|rest| rest.split('}').next().unwrap())
		.collect();
	assert_eq!(bodies.len(), 4, "both benchmarks, in the runtime's weights and the mocks'");
	for body in bodies {
		assert!(body.contains(&format!(".reads({reads}))")), "{body}");
		assert!(body.contains(&format!(".writes({writes}))")), "{body}");
	}
}
