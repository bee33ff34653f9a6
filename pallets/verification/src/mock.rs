//! A test runtime: System, Balances, and the real staking, tasks, disputes and
//! verification pallets, wired as the runtime wires them, with a randomness source that,
//! like BABE's per-block VRF output, is known from the parent block.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::arithmetic_side_effects)]

use crate as pallet_touchstone_verification;
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

/// The jackpot.
pub const JACKPOT: u64 = 999;
/// The submitter of every test job.
pub const OWNER: u64 = 1;
/// The solver.
pub const SOLVER: u64 = 2;
/// Accounts registered as verifiers (and, with another role, the owner is one too, so
/// the draw must exclude it).
pub const VERIFIERS: [u64; 4] = [6, 7, 8, 9];
/// Enough verifiers for a round of three and, without them, a committee of three.
pub const MANY_VERIFIERS: [u64; 7] = [6, 7, 8, 9, 10, 11, 12];
/// Starting balance of every test account.
pub const BALANCE: u64 = 1_000_000;
/// A verifier's bond.
pub const VERIFIER_BOND: u64 = 100;
/// What a missed reveal costs.
pub const MISSED_REVEAL_SLASH: u64 = 10;
/// Verifiers drawn per proof.
pub const VERIFIERS_PER_UNIT: u32 = 3;
/// Blocks of the commit and reveal periods.
pub const COMMIT_PERIOD: u64 = 3;
pub const REVEAL_PERIOD: u64 = 3;
/// Blocks of the challenge window.
pub const CHALLENGE_WINDOW: u64 = 5;
/// Price of a unit.
pub const PRICE: u64 = 100;
/// Blocks after a proof within which its round must be drawn.
pub const DRAW_TIMEOUT: u64 = 18;
/// Members of an escalation committee.
pub const ESCALATION_COMMITTEE: u32 = 3;
/// Profiled thresholds are the median profile times this.
pub const TOLERANCE_MARGIN: u32 = 2;

parameter_types! {
	pub const Jackpot: u64 = JACKPOT;
	pub const HalfToWinner: Perbill = Perbill::from_percent(50);
	pub const TenthToChallengers: Perbill = Perbill::from_percent(10);
	pub const HundredthOfCeiling: Perbill = Perbill::from_percent(1);
}

parameter_types! {
	/// The chance a unit is forced: zero (off) unless a test turns forced errors on.
	pub static ForcedErrorRate: Perbill = Perbill::zero();
	pub ThirdOfTheJackpot: Perbill = Perbill::from_rational(1u32, 3u32);
	/// Whether the randomness source has stalled (serves nothing newer than genesis).
	pub static RandomnessStalled: bool = false;
	/// Blocks of randomness a seed mixes: one, the parent's, unless a test says more.
	pub static RandomnessBlocks: u32 = 1;
	/// Block authors there are now; one unless a test plays a network of several.
	pub static AuthorityCount: u32 = 1;
	/// Who authors block `n`: one author, `0`, unless a test says otherwise. A block's
	/// randomness (its author's VRF output, on a runtime) is known to its author in advance.
	pub static AuthorOfBlock: fn(u64) -> u8 = |_| 0;
}

/// The current block's author, as [`AuthorOfBlock`] names it.
pub struct CurrentAuthor;
impl polkadot_sdk::frame_support::traits::Get<Option<[u8; 32]>> for CurrentAuthor {
	fn get() -> Option<[u8; 32]> {
		Some([AuthorOfBlock::get()(System::block_number()); 32])
	}
}

/// Randomness determined by the parent block, as BABE's VRF output of the parent's author.
pub struct ParentRandomness;
impl Randomness<H256, u64> for ParentRandomness {
	fn random(subject: &[u8]) -> (H256, u64) {
		let parent = if RandomnessStalled::get() { 0 } else { System::block_number().saturating_sub(1) };
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
	type MaxNodes = ConstU32<16>;
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
	type ChallengeBond = ConstU64<200>;
	type AvailabilityBond = ConstU64<20>;
	type SolverSlash = ConstU64<500>;
	type WinnerShare = HalfToWinner;
	type ConvictionShare = TenthToChallengers;
	type ResponseWindow = ConstU64<10>;
	type MaxDisputesPerUnit = ConstU32<6>;
	type VerifierSlotsPerUnit = ConstU32<3>;
	type MaxOpeningsLen = ConstU32<{ 1 << 20 }>;
	type SummonsWindow = ConstU64<20>;
	type MaxSummonsPerSegment = ConstU32<4>;
	type MaxAttesters = ConstU32<VERIFIERS_PER_UNIT>;
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
	type VerifiersPerUnit = ConstU32<VERIFIERS_PER_UNIT>;
	type SamplesPerVerifier = ConstU32<2>;
	type CommitPeriod = ConstU64<COMMIT_PERIOD>;
	type RevealPeriod = ConstU64<REVEAL_PERIOD>;
	type MissedRevealSlash = ConstU64<MISSED_REVEAL_SLASH>;
	type FalseAttestationSlash = ConstU64<{ 4 * MISSED_REVEAL_SLASH }>;
	// Room for every open unit (the tasks pallet's `MaxOpenUnits`).
	type MaxPendingDraws = ConstU32<10>;
	type MaxDrawsPerBlock = ConstU32<2>;
	type MaxSecretsPerBlock = ConstU32<10>;
	type BlockAuthor = CurrentAuthor;
	type AuthorCount = AuthorityCount;
	type RandomnessBlocks = RandomnessBlocks;
	type RandomnessAuthors = ConstU32<2>;
	type DrawTimeout = ConstU64<DRAW_TIMEOUT>;
	type EscalationCommittee = ConstU32<ESCALATION_COMMITTEE>;
	type MinEscalationCommittee = ConstU32<ESCALATION_COMMITTEE>;
	type ToleranceMargin = ConstU32<TOLERANCE_MARGIN>;
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
/// benchmarks (run as tests here).
#[cfg(feature = "runtime-benchmarks")]
pub struct BenchmarkHelper;

#[cfg(feature = "runtime-benchmarks")]
impl pallet_touchstone_tasks::BenchmarkHelper<u64> for BenchmarkHelper {
	fn register_solver(who: &u64, _: HardwareProfile) {
		<Self as touchstone_primitives::traits::ProofSetup<u64, u64>>::register(who, Role::Solver);
	}
	fn register_unfit_solver(who: &u64) {
		<Self as touchstone_primitives::traits::ProofSetup<u64, u64>>::register(who, Role::Solver);
	}
}

#[cfg(feature = "runtime-benchmarks")]
impl touchstone_primitives::traits::ProofSetup<u64, u64> for BenchmarkHelper {
	fn register(who: &u64, role: Role) {
		use polkadot_sdk::frame_support::traits::fungible::Mutate;
		Balances::set_balance(who, BALANCE);
		register(*who, &[(role, 1_000)]);
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
		spec.price_per_unit = PRICE;
		spec.budget = PRICE * u64::from(spec.hyper.steps / spec.hyper.checkpoint_interval.max(1)).max(1);
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

/// Registers `who` with `bonds`.
pub fn register(who: u64, bonds: &[(Role, u64)]) {
	let bonds = BoundedVec::truncate_from(bonds.to_vec());
	Staking::register(RuntimeOrigin::signed(who), profile(), bonds, 0).expect("node registers");
}

/// Builds test externalities at block 1: funded accounts, the solver, and verifiers (the
/// owner among them, which the draw must skip for its own job).
pub fn new_test_ext(verifiers: &[u64]) -> sp_io::TestExternalities {
	let mut storage = frame_system::GenesisConfig::<Test>::default().build_storage().expect("system genesis builds");
	let balances = (1..=12).map(|who| (who, BALANCE)).chain([(JACKPOT, 1)]).collect();
	pallet_balances::GenesisConfig::<Test> { balances, ..Default::default() }
		.assimilate_storage(&mut storage)
		.expect("balances genesis builds");
	let mut ext = sp_io::TestExternalities::new(storage);
	let verifiers = verifiers.to_vec();
	ext.execute_with(|| {
		System::set_block_number(1);
		register(SOLVER, &[(Role::Solver, 1_000)]);
		for who in verifiers {
			register(who, &[(Role::Verifier, VERIFIER_BOND)]);
		}
		System::reset_events();
	});
	ext
}

/// Runs `test` with `verifiers` registered, then checks every pallet's invariants and
/// that the test neither created nor destroyed funds.
pub fn build_and_execute(verifiers: &[u64], test: impl FnOnce()) {
	new_test_ext(verifiers).execute_with(|| {
		let issuance = Balances::total_issuance();
		test();
		Verification::do_try_state().unwrap_or_else(|e| panic!("verification try_state failed: {e:?}"));
		Disputes::do_try_state().unwrap_or_else(|e| panic!("disputes try_state failed: {e:?}"));
		Tasks::do_try_state().unwrap_or_else(|e| panic!("tasks try_state failed: {e:?}"));
		Staking::do_try_state().unwrap_or_else(|e| panic!("staking try_state failed: {e:?}"));
		assert_eq!(Balances::total_issuance(), issuance, "total issuance changed");
	});
}

/// This pallet's events since the last call.
pub fn verification_events() -> Vec<crate::Event<Test>> {
	let events = System::events()
		.into_iter()
		.filter_map(|record| match record.event {
			RuntimeEvent::Verification(event) => Some(event),
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
