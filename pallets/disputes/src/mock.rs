//! A test runtime: System, Balances, the real staking, tasks and verification pallets, and
//! this pallet, wired as the runtime wires them. Verifiers are drawn only in tests that
//! register some; elsewhere a proof's round finds none and leaves it to its challengers.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::arithmetic_side_effects)]

use crate as pallet_touchstone_disputes;
use codec::Encode;
use polkadot_sdk::{
	frame_support::{
		self, derive_impl, parameter_types,
		traits::{tokens::imbalance::ResolveTo, ConstU32, ConstU64, Randomness},
	},
	frame_system, pallet_balances,
	sp_core::H256,
	sp_io::{self, hashing::blake2_256},
	sp_runtime::{BoundedVec, BuildStorage, Perbill},
};
use touchstone_primitives::{DeviceKind, HardwareProfile, Role};

type Block = frame_system::mocking::MockBlock<Test>;

frame_support::construct_runtime!(
	pub enum Test {
		System: frame_system,
		Balances: pallet_balances,
		Staking: pallet_touchstone_staking,
		Tasks: pallet_touchstone_tasks,
		Disputes: pallet_touchstone_disputes,
		Verification: pallet_touchstone_verification,
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
	type ExistentialDeposit = ConstU64<1>;
	type RuntimeHoldReason = RuntimeHoldReason;
}

/// The jackpot: slashes and forfeited bonds not paid to a winner go here.
pub const JACKPOT: u64 = 999;
/// The submitter of every test job.
pub const OWNER: u64 = 1;
/// Solvers.
pub const SOLVER: u64 = 2;
/// A second solver, to redo overturned units.
pub const SECOND_SOLVER: u64 = 3;
/// Challengers.
pub const CHALLENGER: u64 = 4;
/// A second challenger.
pub const SECOND_CHALLENGER: u64 = 5;
/// Starting balance of every test account.
pub const BALANCE: u64 = 1_000_000;
/// A solver's bond.
pub const SOLVER_BOND: u64 = 1_000;
/// A challenger's bond (its role bond, not the per-dispute challenge bond).
pub const CHALLENGER_ROLE_BOND: u64 = 100;
/// The bond posted with each challenge.
pub const CHALLENGE_BOND: u64 = 200;
/// The bond of a request for a chunk of a committed state.
pub const AVAILABILITY_BOND: u64 = 20;
/// What a solver that loses a dispute is slashed.
pub const SOLVER_SLASH: u64 = 500;
/// Blocks of the challenge window.
pub const CHALLENGE_WINDOW: u64 = 5;
/// Blocks each side has to answer.
pub const RESPONSE_WINDOW: u64 = 10;
/// A verifier's bond.
pub const VERIFIER_BOND: u64 = 300;
/// What a verifier that attested a lie it re-executed is slashed.
pub const FALSE_ATTESTATION_SLASH: u64 = 100;
/// Blocks of the verifiers' commit period; their reveal period is twice as long. A round
/// drawn two blocks after its proof has its reveals in before the challenge window ends.
pub const COMMIT_PERIOD: u64 = 1;

parameter_types! {
	/// The chance a unit is forced: zero (off) unless a test turns forced errors on.
	pub static ForcedErrorRate: Perbill = Perbill::zero();
	pub ThirdOfTheJackpot: Perbill = Perbill::from_rational(1u32, 3u32);
	pub const Jackpot: u64 = JACKPOT;
	pub const HalfToWinner: Perbill = Perbill::from_percent(50);
	pub const TenthToChallengers: Perbill = Perbill::from_percent(10);
	pub const HundredthOfCeiling: Perbill = Perbill::from_percent(1);
}

/// Randomness determined by the parent block, as BABE's VRF output of the parent's author.
pub struct ParentRandomness;
impl Randomness<H256, u64> for ParentRandomness {
	fn random(subject: &[u8]) -> (H256, u64) {
		let parent = System::block_number().saturating_sub(1);
		(H256(blake2_256(&(subject, parent).encode())), parent)
	}
}

#[derive_impl(pallet_touchstone_staking::config_preludes::TestDefaultConfig)]
impl pallet_touchstone_staking::Config for Test {
	type Currency = Balances;
	type RuntimeHoldReason = RuntimeHoldReason;
	type SlashDestination = ResolveTo<Jackpot, Balances>;
	type ActiveWork = (Tasks, Verification);
	type MinSolverBond = ConstU64<100>;
	type MinVerifierBond = ConstU64<50>;
	type MinChallengerBond = ConstU64<20>;
	type UnbondingPeriod = ConstU64<1_000>;
	type HeartbeatTimeout = ConstU64<100_000>;
	type ReapDelay = ConstU64<200_000>;
	type ReputationSaturation = ConstU64<1_000>;
	type MaxNodes = ConstU32<64>;
}

#[derive_impl(pallet_touchstone_tasks::config_preludes::TestDefaultConfig)]
impl pallet_touchstone_tasks::Config for Test {
	type Currency = Balances;
	type RuntimeHoldReason = RuntimeHoldReason;
	type Nodes = Staking;
	type ProofLifecycle = (Verification, Disputes);
	type MinPricePerUnit = ConstU64<5>;
	type JobDepositBase = ConstU64<3>;
	type JobDepositPerUnit = ConstU64<1>;
	type CongestionFee = ConstU64<0>;
	type Retention = ConstU64<1_000>;
	type Jackpot = Jackpot;
	type AcceptanceTimeout = ConstU64<3>;
	type ChallengeWindow = ConstU64<CHALLENGE_WINDOW>;
	#[cfg(feature = "runtime-benchmarks")]
	type BenchmarkHelper = BenchmarkHelper;
}

impl pallet_touchstone_disputes::Config for Test {
	type Currency = Balances;
	type RuntimeHoldReason = RuntimeHoldReason;
	type Units = Tasks;
	type Nodes = Staking;
	type Slash = Staking;
	type Attestations = Verification;
	type Jackpot = Jackpot;
	type ChallengeBond = ConstU64<CHALLENGE_BOND>;
	type AvailabilityBond = ConstU64<AVAILABILITY_BOND>;
	type SolverSlash = ConstU64<SOLVER_SLASH>;
	type WinnerShare = HalfToWinner;
	type ConvictionShare = TenthToChallengers;
	type ResponseWindow = ConstU64<RESPONSE_WINDOW>;
	type MaxDisputesPerUnit = ConstU32<6>;
	type VerifierSlotsPerUnit = ConstU32<3>;
	type MaxOpeningsLen = ConstU32<{ 1 << 20 }>;
	type SummonsWindow = ConstU64<20>;
	type MaxSummonsPerSegment = ConstU32<4>;
	type MaxAttesters = ConstU32<3>;
	type MaxSamplesPerAttester = ConstU32<2>;
	type WeightInfo = ();
	#[cfg(feature = "runtime-benchmarks")]
	type BenchmarkHelper = BenchmarkHelper;
}

impl pallet_touchstone_verification::Config for Test {
	type Currency = Balances;
	type Units = Tasks;
	type Draw = Staking;
	type Slash = Staking;
	type Disputes = Disputes;
	type Jackpot = Jackpot;
	type ForcedErrorRate = ForcedErrorRate;
	type MaxForcedErrorPayout = ThirdOfTheJackpot;
	type Randomness = ParentRandomness;
	type VerifiersPerUnit = ConstU32<3>;
	type SamplesPerVerifier = ConstU32<2>;
	type CommitPeriod = ConstU64<COMMIT_PERIOD>;
	type RevealPeriod = ConstU64<{ 2 * COMMIT_PERIOD }>;
	type MissedRevealSlash = ConstU64<10>;
	type FalseAttestationSlash = ConstU64<FALSE_ATTESTATION_SLASH>;
	type MaxPendingDraws = ConstU32<16>;
	type MaxDrawsPerBlock = ConstU32<4>;
	type MaxSecretsPerBlock = ConstU32<16>;
	// The mock's blocks name no author.
	type BlockAuthor = ();
	type AuthorCount = ConstU32<0>;
	type RandomnessBlocks = ConstU32<1>;
	type RandomnessAuthors = ConstU32<1>;
	type DrawTimeout = ConstU64<18>;
	type EscalationCommittee = ConstU32<3>;
	type MinEscalationCommittee = ConstU32<3>;
	type ToleranceMargin = ConstU32<2>;
	type MinProfiles = ConstU32<2>;
	type ThresholdFloor = HundredthOfCeiling;
	type MaxEscalationsPerBlock = ConstU32<1>;
	type MaxThresholdChallenges = ConstU32<1>;
	type InvalidProofSlash = ConstU64<500>;
	type WinnerShare = HalfToWinner;
	type Nodes = Staking;
	type WeightInfo = ();
	#[cfg(feature = "runtime-benchmarks")]
	type BenchmarkHelper = BenchmarkHelper;
}

/// Registers nodes and proves units through the real staking and tasks pallets, for the
/// benchmarks.
#[cfg(feature = "runtime-benchmarks")]
pub struct BenchmarkHelper;

#[cfg(feature = "runtime-benchmarks")]
impl pallet_touchstone_tasks::BenchmarkHelper<u64> for BenchmarkHelper {
	fn register_solver(who: &u64, _: HardwareProfile) {
		<Self as crate::BenchmarkHelper<u64, u64>>::register(who, Role::Solver);
	}
	fn register_unfit_solver(who: &u64) {
		<Self as crate::BenchmarkHelper<u64, u64>>::register(who, Role::Solver);
	}
}

#[cfg(feature = "runtime-benchmarks")]
impl crate::BenchmarkHelper<u64, u64> for BenchmarkHelper {
	fn register(who: &u64, role: Role) {
		use polkadot_sdk::frame_support::traits::fungible::Mutate;
		Balances::set_balance(who, BALANCE);
		register(*who, role, SOLVER_BOND);
	}

	fn prove(
		owner: &u64,
		spec: touchstone_primitives::JobSpec<u64>,
		solver: &u64,
		proof: touchstone_primitives::LearningProof,
		final_state: touchstone_primitives::referee::BoundaryOpening,
	) -> Option<touchstone_primitives::JobId> {
		let job = Self::take(owner, spec, solver)?;
		Tasks::submit_proof(RuntimeOrigin::signed(*solver), job, 0, proof, final_state, None).ok()?;
		Some(job)
	}

	fn take(owner: &u64, mut spec: touchstone_primitives::JobSpec<u64>, solver: &u64) -> Option<touchstone_primitives::JobId> {
		use polkadot_sdk::frame_support::traits::fungible::Mutate;
		Balances::set_balance(owner, BALANCE);
		spec.price_per_unit = 10;
		spec.budget = 10 * 8;
		let job = pallet_touchstone_tasks::NextJobId::<Test>::get();
		Tasks::submit_job(RuntimeOrigin::signed(*owner), spec).ok()?;
		Tasks::claim_unit(RuntimeOrigin::signed(*solver), job, 0).ok()?;
		Some(job)
	}
}

/// A CPU node's profile.
pub fn profile() -> HardwareProfile {
	HardwareProfile {
		device: DeviceKind::Cpu,
		model: BoundedVec::truncate_from(b"EPYC".to_vec()),
		memory_mib: 65_536,
		throughput_gflops: 2_000,
		bandwidth_mbps: 1_000,
		region: BoundedVec::truncate_from(b"eu".to_vec()),
	}
}

/// Registers `who` for `role` with `bond`.
pub fn register(who: u64, role: Role, bond: u64) {
	let bonds = BoundedVec::truncate_from(vec![(role, bond)]);
	Staking::register(RuntimeOrigin::signed(who), profile(), bonds, 0).expect("node registers");
}

/// Builds test externalities: funded accounts, two solvers and two challengers at block 1.
pub fn new_test_ext() -> sp_io::TestExternalities {
	let mut storage = frame_system::GenesisConfig::<Test>::default().build_storage().expect("system genesis builds");
	let balances = (1..=9).map(|who| (who, BALANCE)).chain([(JACKPOT, 1)]).collect();
	pallet_balances::GenesisConfig::<Test> { balances, ..Default::default() }
		.assimilate_storage(&mut storage)
		.expect("balances genesis builds");
	let mut ext = sp_io::TestExternalities::new(storage);
	ext.execute_with(|| {
		System::set_block_number(1);
		register(SOLVER, Role::Solver, SOLVER_BOND);
		register(SECOND_SOLVER, Role::Solver, SOLVER_BOND);
		register(CHALLENGER, Role::Challenger, CHALLENGER_ROLE_BOND);
		register(SECOND_CHALLENGER, Role::Challenger, CHALLENGER_ROLE_BOND);
		System::reset_events();
	});
	ext
}

/// Runs `test` in fresh externalities, then checks every pallet's invariants and that
/// the test neither created nor destroyed funds.
pub fn build_and_execute(test: impl FnOnce()) {
	new_test_ext().execute_with(|| {
		let issuance = Balances::total_issuance();
		test();
		Disputes::do_try_state().unwrap_or_else(|e| panic!("disputes try_state failed: {e:?}"));
		Tasks::do_try_state().unwrap_or_else(|e| panic!("tasks try_state failed: {e:?}"));
		Staking::do_try_state().unwrap_or_else(|e| panic!("staking try_state failed: {e:?}"));
		Verification::do_try_state().unwrap_or_else(|e| panic!("verification try_state failed: {e:?}"));
		assert_eq!(Balances::total_issuance(), issuance, "total issuance changed");
	});
}

/// This pallet's events since the last call.
pub fn dispute_events() -> Vec<crate::Event<Test>> {
	let events = System::events()
		.into_iter()
		.filter_map(|record| match record.event {
			RuntimeEvent::Disputes(event) => Some(event),
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
