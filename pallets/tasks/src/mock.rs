//! A test runtime: System, Balances, the real staking pallet, and this pallet.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::arithmetic_side_effects)]

use crate as pallet_touchstone_tasks;
use polkadot_sdk::{
	frame_support::{
		self, derive_impl, parameter_types,
		traits::{tokens::imbalance::ResolveTo, ConstU32, ConstU64},
	},
	frame_system, pallet_balances, sp_io,
	sp_runtime::{BoundedVec, BuildStorage, FixedU64},
};
use polkadot_sdk::sp_runtime::DispatchResult;
use touchstone_primitives::{
	traits::ProofLifecycle, JobId, LearningProof, UnitIndex,
	Activation, ContentRef, DatasetRef, Decomposition, DeviceKind, HardwareProfile,
	HardwareRequirements, HyperParams, JobSpec, ModelArch, Optimizer, Role, VerificationMode,
};

type Block = frame_system::mocking::MockBlock<Test>;

frame_support::construct_runtime!(
	pub enum Test {
		System: frame_system,
		Balances: pallet_balances,
		Staking: pallet_touchstone_staking,
		Tasks: pallet_touchstone_tasks,
	}
);

#[derive_impl(frame_system::config_preludes::TestDefaultConfig)]
impl frame_system::Config for Test {
	type Block = Block;
	type AccountData = pallet_balances::AccountData<u64>;
}

#[derive_impl(pallet_balances::config_preludes::TestDefaultConfig)]
impl pallet_balances::Config for Test {
	type AccountStore = System;
	// Above the 1-planck jackpot share of a 10-planck unit, so a drained jackpot cannot take it.
	type ExistentialDeposit = ConstU64<2>;
	type RuntimeHoldReason = RuntimeHoldReason;
}

/// Where slashed funds go.
pub const JACKPOT: u64 = 999;
/// Minimum solver bond.
pub const MIN_SOLVER_BOND: u64 = 100;
/// Blocks an assigned solver has to accept.
pub const ACCEPTANCE_TIMEOUT: u64 = 3;
/// Blocks of the challenge window.
pub const CHALLENGE_WINDOW: u64 = 5;
/// Blocks without heartbeat before a node is offline.
pub const HEARTBEAT_TIMEOUT: u64 = 100;
/// The least a unit may pay.
pub const MIN_PRICE: u64 = 5;
/// A job's storage deposit: a base…
pub const DEPOSIT_BASE: u64 = 3;
/// …and this per unit.
pub const DEPOSIT_PER_UNIT: u64 = 1;
/// The congestion fee of a unit entering a half-full pool.
pub const CONGESTION_FEE: u64 = 10;
/// Blocks a finished job's records stay.
pub const RETENTION: u64 = 10;
/// The test job's initial state root.
pub const INITIAL_STATE_ROOT: [u8; 32] = [6; 32];
/// The pool timeout of the test job.
pub const POOL_TIMEOUT: u32 = 20;

parameter_types! {
	pub const Jackpot: u64 = JACKPOT;
	/// Whether the mock verification pallets hold finalization back.
	pub static HoldFinalization: bool = false;
	/// Whether the mock verification pallets refuse the next proofs.
	pub static RejectProofs: bool = false;
	/// The verifiers the mock verification pallet says attested every unit.
	pub static Attesters: Vec<u64> = Vec::new();
	/// Proofs the mock verification pallets were told about.
	pub static ProofsSeen: Vec<(JobId, UnitIndex)> = Vec::new();
}

/// Stands in for the verification and disputes pallets.
pub struct MockLifecycle;
impl ProofLifecycle<u64> for MockLifecycle {
	fn on_proof_submitted(job: JobId, unit: UnitIndex, _: &u64, _: &LearningProof) -> DispatchResult {
		if RejectProofs::get() {
			return Err(polkadot_sdk::sp_runtime::DispatchError::Other("proof refused"));
		}
		ProofsSeen::mutate(|seen| seen.push((job, unit)));
		Ok(())
	}
	fn can_finalize(_: JobId, _: UnitIndex) -> bool {
		!HoldFinalization::get()
	}
	fn on_finalized(_: JobId, _: UnitIndex) -> Vec<u64> {
		Attesters::get()
	}
}

#[derive_impl(pallet_touchstone_staking::config_preludes::TestDefaultConfig)]
impl pallet_touchstone_staking::Config for Test {
	type Currency = Balances;
	type RuntimeHoldReason = RuntimeHoldReason;
	type SlashDestination = ResolveTo<Jackpot, Balances>;
	type ActiveWork = Tasks;
	type MinSolverBond = ConstU64<MIN_SOLVER_BOND>;
	type MinVerifierBond = ConstU64<50>;
	type MinChallengerBond = ConstU64<20>;
	type UnbondingPeriod = ConstU64<10>;
	type HeartbeatTimeout = ConstU64<HEARTBEAT_TIMEOUT>;
	type ReapDelay = ConstU64<{ 2 * HEARTBEAT_TIMEOUT }>;
	type ReputationSaturation = ConstU64<1_000>;
	// The runtime's registry bound, so the benchmarks (run as tests) scan a realistic registry.
	type MaxNodes = ConstU32<256>;
}

parameter_types! {
	/// The test default's bound, raised by the tests of rounds jobs, which have more units.
	pub storage MaxUnitsPerJob: u32 = 8;
	/// The test default's bound, raised with `MaxUnitsPerJob`.
	pub storage MaxOpenUnits: u32 = 10;
}

#[derive_impl(pallet_touchstone_tasks::config_preludes::TestDefaultConfig)]
impl pallet_touchstone_tasks::Config for Test {
	type MaxUnitsPerJob = MaxUnitsPerJob;
	type MaxOpenUnits = MaxOpenUnits;
	type Currency = Balances;
	type RuntimeHoldReason = RuntimeHoldReason;
	type Nodes = Staking;
	type ProofLifecycle = MockLifecycle;
	type MinPricePerUnit = ConstU64<MIN_PRICE>;
	type JobDepositBase = ConstU64<DEPOSIT_BASE>;
	type JobDepositPerUnit = ConstU64<DEPOSIT_PER_UNIT>;
	type CongestionFee = ConstU64<CONGESTION_FEE>;
	type Retention = ConstU64<RETENTION>;
	type Jackpot = Jackpot;
	type AcceptanceTimeout = ConstU64<ACCEPTANCE_TIMEOUT>;
	type ChallengeWindow = ConstU64<CHALLENGE_WINDOW>;
	#[cfg(feature = "runtime-benchmarks")]
	type BenchmarkHelper = StakingHelper;
}

/// Registers solvers through the real staking pallet for the benchmarks.
#[cfg(feature = "runtime-benchmarks")]
pub struct StakingHelper;
#[cfg(feature = "runtime-benchmarks")]
impl crate::BenchmarkHelper<u64> for StakingHelper {
	fn register_solver(who: &u64, profile: HardwareProfile) {
		use polkadot_sdk::frame_support::traits::fungible::Mutate;
		Balances::set_balance(who, 1_000_000);
		// Enough bond for the collateral of a full load of the benchmarks' units.
		let bonds = BoundedVec::truncate_from(vec![(Role::Solver, 100_000)]);
		Staking::register(RuntimeOrigin::signed(*who), profile, bonds, 0).expect("solver registers");
	}

	fn register_unfit_solver(who: &u64) {
		Self::register_solver(who, cpu_profile());
	}
}

/// A GPU solver's profile: 24 GiB.
pub fn gpu_profile() -> HardwareProfile {
	HardwareProfile {
		device: DeviceKind::Gpu,
		model: BoundedVec::truncate_from(b"RTX 4090".to_vec()),
		memory_mib: 24_576,
		throughput_gflops: 80_000,
		bandwidth_mbps: 1_000,
		region: BoundedVec::truncate_from(b"eu".to_vec()),
	}
}

/// A CPU solver's profile: 64 GiB.
pub fn cpu_profile() -> HardwareProfile {
	HardwareProfile {
		device: DeviceKind::Cpu,
		model: BoundedVec::truncate_from(b"EPYC".to_vec()),
		memory_mib: 65_536,
		throughput_gflops: 2_000,
		bandwidth_mbps: 1_000,
		region: BoundedVec::truncate_from(b"us".to_vec()),
	}
}

/// Registers `who` as a solver with `profile` and the minimum bond.
pub fn register_solver(who: u64, profile: HardwareProfile) {
	let bonds = BoundedVec::truncate_from(vec![(Role::Solver, MIN_SOLVER_BOND)]);
	Staking::register(RuntimeOrigin::signed(who), profile, bonds, 0).expect("solver registers");
}

/// A valid job: a small MLP on 1,000 samples, 100 steps in four step ranges of 25,
/// 10 per unit, any GPU.
pub fn job_spec() -> JobSpec<u64> {
	JobSpec {
		model: ModelArch::Mlp {
			inputs: 64,
			hidden: BoundedVec::truncate_from(vec![32]),
			classes: 10,
			activation: Activation::Relu,
		},
		initial_weights: None,
		initial_state_root: INITIAL_STATE_ROOT.into(),
		dataset: DatasetRef {
			content: ContentRef {
				hash: [7u8; 32].into(),
				location: BoundedVec::truncate_from(b"file:///data/digits.csv".to_vec()),
			},
			samples: 1_000,
			root: [8u8; 32].into(),
		},
		hyper: HyperParams {
			steps: 100,
			batch_size: 32,
			learning_rate: FixedU64::from_rational(1, 10),
			optimizer: Optimizer::Sgd { momentum: FixedU64::from_rational(9, 10) },
			grad_clip_norm: None,
			seed: 42,
			checkpoint_interval: 5,
		},
		decomposition: Decomposition::StepRanges { steps_per_unit: 25 },
		verification: VerificationMode::Exact,
		requirements: HardwareRequirements {
			device: Some(DeviceKind::Gpu),
			min_memory_mib: 8_192,
			min_throughput_gflops: 1,
			min_bandwidth_mbps: 0,
			region: None,
		},
		price_per_unit: 10,
		budget: 50,
		unit_timeout: 10,
		pool_timeout: POOL_TIMEOUT,
	}
}

/// Builds test externalities with funded accounts.
#[derive(Default)]
pub struct ExtBuilder {
	solvers: Vec<(u64, HardwareProfile)>,
}

impl ExtBuilder {
	/// Registers a solver at genesis (block 1).
	pub fn solver(mut self, who: u64, profile: HardwareProfile) -> Self {
		self.solvers.push((who, profile));
		self
	}

	/// Builds the externalities at block 1.
	pub fn build(self) -> sp_io::TestExternalities {
		let mut storage = frame_system::GenesisConfig::<Test>::default()
			.build_storage()
			.expect("system genesis builds");
		let balances = (1..=9).map(|who| (who, 10_000)).chain([(JACKPOT, 2)]).collect();
		pallet_balances::GenesisConfig::<Test> { balances, ..Default::default() }
			.assimilate_storage(&mut storage)
			.expect("balances genesis builds");
		let mut ext = sp_io::TestExternalities::new(storage);
		ext.execute_with(|| {
			System::set_block_number(1);
			for (who, profile) in self.solvers {
				register_solver(who, profile);
			}
			System::reset_events();
		});
		ext
	}

	/// Runs `test`, then checks both pallets' invariants and that the test neither
	/// created nor destroyed funds.
	pub fn build_and_execute(self, test: impl FnOnce()) {
		self.build().execute_with(|| {
			let issuance = Balances::total_issuance();
			test();
			Tasks::do_try_state().unwrap_or_else(|e| panic!("tasks try_state failed: {e:?}"));
			Staking::do_try_state().unwrap_or_else(|e| panic!("staking try_state failed: {e:?}"));
			assert_eq!(Balances::total_issuance(), issuance, "total issuance changed");
		});
	}
}

/// The pallet's events since the last call.
pub fn tasks_events() -> Vec<crate::Event<Test>> {
	let events = System::events()
		.into_iter()
		.filter_map(|record| match record.event {
			RuntimeEvent::Tasks(event) => Some(event),
			_ => None,
		})
		.collect();
	System::reset_events();
	events
}

/// Advances to block `n`, running every pallet's hooks.
pub fn run_to_block(n: u64) {
	System::run_to_block::<AllPalletsWithSystem>(n);
}
