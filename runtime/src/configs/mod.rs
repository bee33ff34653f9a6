//! The configuration of every pallet in the runtime.

// `derive_impl` fills in `RuntimeOrigin`, `RuntimeTask`, `PalletInfo` and the like by name.
use crate::{
	AccountId, Babe, Balance, Balances, Block, Hash, Nonce, PalletInfo, Runtime, RuntimeCall,
	RuntimeEvent, RuntimeFreezeReason, RuntimeHoldReason, RuntimeOrigin, RuntimeTask, Staking,
	System, Tasks, Disputes, Verification, BlockNumber, EPOCH_DURATION_IN_BLOCKS, EXISTENTIAL_DEPOSIT, MILLI_UNIT, MINUTES, SLOT_DURATION, UNIT,
	VERSION,
};
use polkadot_sdk::{
	frame_support::{
		derive_impl, parameter_types,
		traits::{tokens::imbalance::ResolveTo, ConstU128, ConstU32, ConstU64, ConstU8, Get, VariantCountOf},
		dispatch::DispatchClass,
		weights::{
			constants::{ParityDbWeight, WEIGHT_REF_TIME_PER_SECOND},
			ConstantMultiplier, IdentityFee, Weight,
		},
		PalletId,
	},
	frame_system::{self, limits::{BlockLength, BlockWeights}},
	pallet_babe, pallet_balances, pallet_grandpa, pallet_sudo, pallet_timestamp,
	pallet_transaction_payment::{self, ConstFeeMultiplier, FungibleAdapter, Multiplier},
	sp_core::Void,
	sp_runtime::{traits::{AccountIdConversion, One}, Perbill},
	sp_version::RuntimeVersion,
};

/// Share of a block's weight that normal transactions may fill; the rest is kept for
/// operational ones and the hooks.
const NORMAL_DISPATCH_RATIO: Perbill = Perbill::from_percent(75);

parameter_types! {
	/// The runtime version, reported by `System`.
	pub const Version: RuntimeVersion = VERSION;
	/// Two seconds of compute per block, with a 5 MiB proof budget.
	pub RuntimeBlockWeights: BlockWeights = BlockWeights::with_sensible_defaults(
		Weight::from_parts(2u64 * WEIGHT_REF_TIME_PER_SECOND, u64::MAX),
		NORMAL_DISPATCH_RATIO,
	);
	/// Blocks of at most 5 MiB.
	pub RuntimeBlockLength: BlockLength = BlockLength::builder()
		.max_length(5 * 1024 * 1024)
		.modify_max_length_for_class(DispatchClass::Normal, |max| *max = NORMAL_DISPATCH_RATIO * *max)
		.build();
	/// Substrate's generic SS58 prefix.
	pub const SS58Prefix: u8 = 42;
}

#[derive_impl(frame_system::config_preludes::SolochainDefaultConfig)]
impl frame_system::Config for Runtime {
	type Block = Block;
	type BlockWeights = RuntimeBlockWeights;
	type BlockLength = RuntimeBlockLength;
	type AccountId = AccountId;
	type Nonce = Nonce;
	type Hash = Hash;
	type BlockHashCount = ConstU32<2400>;
	// The node stores state in ParityDb.
	type DbWeight = ParityDbWeight;
	type Version = Version;
	type AccountData = pallet_balances::AccountData<Balance>;
	type SS58Prefix = SS58Prefix;
	type MaxConsumers = ConstU32<16>;
}

parameter_types! {
	/// Blocks per BABE epoch.
	pub const EpochDuration: u64 = EPOCH_DURATION_IN_BLOCKS as u64;
	/// Expected milliseconds between blocks.
	pub const ExpectedBlockTime: u64 = SLOT_DURATION;
}

impl pallet_babe::Config for Runtime {
	type EpochDuration = EpochDuration;
	type ExpectedBlockTime = ExpectedBlockTime;
	// The authority set is fixed at genesis; it changes by runtime upgrade.
	type EpochChangeTrigger = pallet_babe::SameAuthoritiesForever;
	type DisabledValidators = ();
	type WeightInfo = ();
	type MaxAuthorities = ConstU32<32>;
	type MaxNominators = ConstU32<0>;
	// No session pallet: equivocations are not reported on chain.
	type KeyOwnerProof = Void;
	type EquivocationReportSystem = ();
}

impl pallet_grandpa::Config for Runtime {
	type RuntimeEvent = RuntimeEvent;
	type WeightInfo = ();
	type MaxAuthorities = ConstU32<32>;
	type MaxNominators = ConstU32<0>;
	type MaxSetIdSessionEntries = ConstU64<0>;
	type KeyOwnerProof = Void;
	type EquivocationReportSystem = ();
}

impl pallet_timestamp::Config for Runtime {
	type Moment = u64;
	type OnTimestampSet = Babe;
	type MinimumPeriod = ConstU64<{ SLOT_DURATION / 2 }>;
	type WeightInfo = ();
}

impl pallet_balances::Config for Runtime {
	type MaxLocks = ConstU32<50>;
	type MaxReserves = ();
	type ReserveIdentifier = [u8; 8];
	type Balance = Balance;
	type RuntimeEvent = RuntimeEvent;
	type DustRemoval = ();
	type ExistentialDeposit = ConstU128<EXISTENTIAL_DEPOSIT>;
	type AccountStore = System;
	type WeightInfo = pallet_balances::weights::SubstrateWeight<Runtime>;
	type FreezeIdentifier = RuntimeFreezeReason;
	type MaxFreezes = VariantCountOf<RuntimeFreezeReason>;
	type RuntimeHoldReason = RuntimeHoldReason;
	type RuntimeFreezeReason = RuntimeFreezeReason;
	type DoneSlashHandler = ();
}

/// What a byte of a transaction costs: a full block's weight fee over its length (two
/// seconds of compute for 5 MiB, about 0.38 µTST a byte, 0.8 TST for 2 MiB).
pub const FEE_PER_BYTE: Balance = (2 * WEIGHT_REF_TIME_PER_SECOND as Balance) / (5 * 1024 * 1024);

parameter_types! {
	/// Fees do not rise with congestion on this chain.
	pub FeeMultiplier: Multiplier = Multiplier::one();
}

impl pallet_transaction_payment::Config for Runtime {
	type RuntimeEvent = RuntimeEvent;
	type OnChargeTransaction = FungibleAdapter<Balances, ()>;
	type OperationalFeeMultiplier = ConstU8<5>;
	type WeightToFee = IdentityFee<Balance>;
	// A block's length costs what its compute costs: a byte is charged the share of a
	// block's weight it takes of a block's length. Filling blocks to crowd out a
	// dispute's 2 MiB `resolve` is no cheaper than filling them with computation.
	type LengthToFee = ConstantMultiplier<Balance, ConstU128<FEE_PER_BYTE>>;
	type FeeMultiplierUpdate = ConstFeeMultiplier<FeeMultiplier>;
	type WeightInfo = pallet_transaction_payment::weights::SubstrateWeight<Runtime>;
}

impl pallet_sudo::Config for Runtime {
	type RuntimeEvent = RuntimeEvent;
	type RuntimeCall = RuntimeCall;
	type WeightInfo = pallet_sudo::weights::SubstrateWeight<Runtime>;
}

parameter_types! {
	/// The protocol's jackpot: slashed funds go here, and later forced-error rewards
	/// come out of it.
	pub const JackpotPalletId: PalletId = PalletId(*b"ts/jackp");
	/// The jackpot's account.
	pub JackpotAccount: AccountId = JackpotPalletId::get().into_account_truncating();
}

impl pallet_touchstone_staking::Config for Runtime {
	type Currency = Balances;
	type RuntimeHoldReason = RuntimeHoldReason;
	type SlashDestination = ResolveTo<JackpotAccount, Balances>;
	type ActiveWork = (Tasks, Verification);
	type MinSolverBond = ConstU128<{ 100 * UNIT }>;
	type MinVerifierBond = ConstU128<{ 50 * UNIT }>;
	type MinChallengerBond = ConstU128<{ 20 * UNIT }>;
	// Longer than a challenge window and the longest dispute after it (every phase one
	// response window and one segment's re-execution, `MAX_SEGMENT_BLOCKS`), so a solver
	// cannot unbond out of reach of a slash: a day.
	type UnbondingPeriod = ConstU32<{ 24 * 60 * MINUTES }>;
	type HeartbeatTimeout = ConstU32<{ 5 * MINUTES }>;
	// A day offline with nothing in hand, and anyone may free the node's registry slot.
	type ReapDelay = ConstU32<{ 24 * 60 * MINUTES }>;
	// Reputation counts in full once a solver has completed 1,000 TST of work.
	type ReputationSaturation = ConstU128<{ 1_000 * UNIT }>;
	type MaxNodes = ConstU32<256>;
	type MaxUnbondingChunks = ConstU32<8>;
	// A multiaddr with a DNS name, a port and a peer id fits with room to spare.
	type MaxEndpointLength = ConstU32<256>;
	type WeightInfo = pallet_touchstone_staking::weights::SubstrateWeight<Runtime>;
}

parameter_types! {
	/// 10 % of each unit's price funds the jackpot (forced-error rewards), as much as the
	/// verifiers' share: a forced error pays what its unit paid in over the rate, so this
	/// makes the lottery worth, in expectation, the fair pay for checking a unit. It is
	/// also what farming reputation with self-dealt jobs costs.
	pub const JackpotShare: Perbill = Perbill::from_percent(10);
	/// 10 % of each unit's price pays the verifiers that attested its proof.
	pub const VerifierShare: Perbill = Perbill::from_percent(10);
}

impl pallet_touchstone_tasks::Config for Runtime {
	type Currency = Balances;
	type RuntimeHoldReason = RuntimeHoldReason;
	type Nodes = Staking;
	// A unit cannot be finalized before its verification round concludes, nor while a
	// dispute holds it.
	type ProofLifecycle = (Verification, Disputes);
	type MaxUnitsPerJob = ConstU32<64>;
	type MaxOpenUnits = ConstU32<1024>;
	type MaxUnitsPerSolver = ConstU32<16>;
	type MaxAssignmentsPerBlock = ConstU32<16>;
	type MaxTimeoutsPerBlock = ConstU32<16>;
	// With the deposit, filling the 1,024 open units costs at least 1,024 × 10 mTST in
	// escrow and 1,024 × 11 mTST in deposits, all locked for as long as they stay.
	type MinPricePerUnit = ConstU128<{ 10 * MILLI_UNIT }>;
	type JobDepositBase = ConstU128<{ 100 * MILLI_UNIT }>;
	type JobDepositPerUnit = ConstU128<{ 10 * MILLI_UNIT }>;
	// A tenth of a TST to enter a half-full pool, 0.9 TST at nine tenths, 102 TST for the
	// last slot; filling the whole pool from empty costs about 600 TST, none refunded.
	type CongestionFee = ConstU128<{ 100 * MILLI_UNIT }>;
	type MaxPoolWait = ConstU32<{ 24 * 60 * MINUTES }>;
	// A unit's collateral is three times its price, and a wrong proof is slashed at least
	// that: with three verifiers sampling two segments each of at most sixteen, the draw
	// samples a lie with probability 0.33 or more, and 0.33 × (1 + 3) > 1, so a lie loses
	// in expectation at every price (tests/parameters.rs, docs/protocol.md).
	type CollateralPercent = ConstU32<300>;
	type MaxSegmentsPerUnit = ConstU32<16>;
	type ReferenceWorkPerBlock = ConstU64<REFERENCE_WORK_PER_BLOCK>;
	// Ten minutes of re-execution at the reference rate (2 × 10¹² multiply-adds, 2,800
	// steps of a 784 → 1024 → 1024 → 10 MLP at batch 128, one of GPT-2 small at four
	// sequences of 1,024). A round then lasts at most eight of
	// them beyond its floors (an escalation's six flagged segments after its round's two),
	// and a dispute one per phase: the unbonding period outlasts both.
	type MaxSegmentBlocks = ConstU32<{ MAX_SEGMENT_BLOCKS }>;
	type JackpotShare = JackpotShare;
	type VerifierShare = VerifierShare;
	type Jackpot = JackpotAccount;
	type Retention = ConstU32<{ 60 * MINUTES }>;
	type AcceptanceTimeout = ConstU32<{ MINUTES }>;
	// A solver that commits its forced-error secret after its last segment must have the
	// verification pallet's `SECRET_DEADLINE_MARGIN` left (tests/parameters.rs).
	type MinUnitTimeout = ConstU32<20>;
	// Five minutes: time to re-execute a unit's sampled steps and open a dispute.
	type ChallengeWindow = ConstU32<{ 5 * MINUTES }>;
	type MaxAttempts = ConstU32<3>;
	// Three reopenings: lost challenges hold an honest unit's pay at most four windows and
	// the disputes opened inside them.
	type MaxWindowReopenings = ConstU32<3>;
	type WeightInfo = pallet_touchstone_tasks::weights::SubstrateWeight<Runtime>;
	#[cfg(feature = "runtime-benchmarks")]
	type BenchmarkHelper = crate::benchmarks::StakingHelper;
}

parameter_types! {
	/// A forfeited challenge bond is shared half and half between the defender that won
	/// and the jackpot.
	pub const WinnerShare: Perbill = Perbill::from_percent(50);
	/// A tenth of a convicted liar's slash (and of its false attesters') pays the parties
	/// that convicted it, the rest goes to the jackpot: a liar that reports itself through a
	/// sybil still loses nine tenths (docs/protocol.md, "Attacks considered").
	pub const ConvictionShare: Perbill = Perbill::from_percent(10);
}

/// Blocks each side of a dispute has to answer a phase: one minute.
pub const DISPUTE_RESPONSE_WINDOW: BlockNumber = MINUTES;

/// Multiply-adds of training the chain expects a verifier or a disputing party to
/// re-execute per block (three seconds) on the CPU reference: 10⁹·10, about 3.3 × 10⁹ a
/// second. The reference does 7 to 13 times that on one thread of this project's 2-core
/// machine for dense layers, about 5 times for the character transformer, and 1.3 times
/// for the small CNN, whose convolutions run slower (`docs/performance.md`). Verification rounds and dispute phases are given the
/// blocks their re-execution takes at this rate beyond their floors.
pub const REFERENCE_WORK_PER_BLOCK: u64 = 10_000_000_000;

/// The most blocks one checkpoint segment of a job may take to re-execute at
/// [`REFERENCE_WORK_PER_BLOCK`]: ten minutes.
pub const MAX_SEGMENT_BLOCKS: BlockNumber = 10 * MINUTES;

/// The most rounds of a dispute's two history levels together: over a unit's segments,
/// then over one segment's steps. Both counts are `u32`s, and their depths add to at most
/// 35 (`MAX_HISTORY_ROUNDS`; a test sweeps the extremes).
pub const MAX_HISTORY_ROUNDS: BlockNumber = 35;

/// The most phases a dispute can have: the rounds over segments and steps, 32 over the
/// operators, 32 over the pieces, three bindings and the referee.
pub const MAX_DISPUTE_PHASES: BlockNumber = MAX_HISTORY_ROUNDS + 2 * 32 + 4;

/// What a solver whose proof is shown wrong (by the referee, or by an escalation
/// committee) is slashed: the minimum solver bond, so a solver that lies loses at least the
/// floor it had to post.
pub const INVALID_PROOF_SLASH: Balance = 100 * UNIT;

impl pallet_touchstone_disputes::Config for Runtime {
	type Currency = Balances;
	type RuntimeHoldReason = RuntimeHoldReason;
	type Units = Tasks;
	type Nodes = Staking;
	type Slash = Staking;
	type Attestations = Verification;
	type Jackpot = JackpotAccount;
	type ChallengeBond = ConstU128<{ 10 * UNIT }>;
	// A tenth of a challenge: enough that spamming requests costs more than the solver's
	// answer (a few kilobytes), little enough for a verifier that cannot fetch a checkpoint.
	type AvailabilityBond = ConstU128<{ UNIT }>;
	type SolverSlash = ConstU128<INVALID_PROOF_SLASH>;
	type WinnerShare = WinnerShare;
	type ConvictionShare = ConvictionShare;
	type ResponseWindow = ConstU32<DISPUTE_RESPONSE_WINDOW>;
	// Filling every challenger's slot with hopeless challenges costs half of five bonds
	// per window, and the window opens again in full when they fail. Three slots are
	// the drawn verifiers' (`VerifiersPerUnit`): a full unit cannot silence a mismatch.
	type MaxDisputesPerUnit = ConstU32<8>;
	type VerifierSlotsPerUnit = ConstU32<3>;
	// The openings of the costliest piece any accepted job has (`MAX_PIECE_COST`: 70,000
	// words and 52,000 hashes, about 1.9 MB) fit, inside a normal block's 3.75 MiB; judging
	// openings this large is charged under 5 % of a block (tests/parameters.rs).
	type MaxOpeningsLen = ConstU32<{ 2 * 1024 * 1024 }>;
	// Five minutes beyond the segment's re-execution to summon a proof's attesters after a
	// conviction that found no step: a challenger that re-executed the unit knows the
	// first segment the proof got wrong, and summons the verifiers that attested it.
	type SummonsWindow = ConstU32<{ 5 * MINUTES }>;
	// Sixteen losing summonses forfeit 16 × 5 TST to the jackpot, more than the 50 TST
	// false-attestation slash they would delay (tests/parameters.rs).
	type MaxSummonsPerSegment = ConstU32<16>;
	type MaxAttesters = <Runtime as pallet_touchstone_verification::Config>::VerifiersPerUnit;
	type MaxSamplesPerAttester = <Runtime as pallet_touchstone_verification::Config>::SamplesPerVerifier;
	type WeightInfo = pallet_touchstone_disputes::weights::SubstrateWeight<Runtime>;
	#[cfg(feature = "runtime-benchmarks")]
	type BenchmarkHelper = crate::benchmarks::StakingHelper;
}


/// The current block's author, for the verification pallet's beacon: the BABE key of the
/// authority the block's pre-runtime digest names.
pub struct BabeBlockAuthor;

impl Get<Option<[u8; 32]>> for BabeBlockAuthor {
	fn get() -> Option<[u8; 32]> {
		use polkadot_sdk::{frame_support::traits::FindAuthor, sp_core::crypto::ByteArray};
		let digest = frame_system::Pallet::<Runtime>::digest();
		let pre_runtime = digest.logs().iter().filter_map(|item| item.as_pre_runtime());
		let index = <Babe as FindAuthor<u32>>::find_author(pre_runtime)?;
		let authorities = pallet_babe::Authorities::<Runtime>::get();
		let (authority, _) = authorities.get(index as usize)?;
		<[u8; 32]>::try_from(authority.as_slice()).ok()
	}
}

/// How many authorities author blocks this epoch.
pub struct BabeAuthorCount;

impl Get<u32> for BabeAuthorCount {
	fn get() -> u32 {
		pallet_babe::Authorities::<Runtime>::decode_len().unwrap_or(0) as u32
	}
}

/// The verification pallet's randomness: BABE's VRF output of the parent block's author,
/// known since the parent block. Every block carries one (`PrimaryAndSecondaryVRFSlots`);
/// a block without one (the first) gives randomness known since block zero, which no draw
/// accepts.
pub struct ParentVrfRandomness;

impl polkadot_sdk::frame_support::traits::Randomness<Hash, BlockNumber> for ParentVrfRandomness {
	fn random(subject: &[u8]) -> (Hash, BlockNumber) {
		match pallet_babe::ParentBlockRandomness::<Runtime>::random(subject) {
			(Some(random), known_since) => (random, known_since),
			(None, _) => (Hash::zero(), 0),
		}
	}
}

parameter_types! {
	/// The chance that a unit's proof must carry a forced error: one in a hundred. Kept in
	/// storage under `twox_128(":ForcedErrorRate:")`, so a network's governance (sudo, on a
	/// development chain) can tune it without a runtime upgrade; zero turns forced errors off.
	pub storage ForcedErrorRate: Perbill = Perbill::from_percent(1);
	/// Profiled thresholds are at least a hundredth of the submitter's ceilings.
	pub ThresholdFloor: Perbill = Perbill::from_percent(1);
	/// Truebit's cap: one forced error pays out at most a third of the jackpot.
	pub MaxForcedErrorPayout: Perbill = Perbill::from_rational(1u32, 3u32);
}

impl pallet_touchstone_verification::Config for Runtime {
	type Currency = Balances;
	type Units = Tasks;
	type Draw = Staking;
	type Slash = Staking;
	type Disputes = Disputes;
	type Jackpot = JackpotAccount;
	type ForcedErrorRate = ForcedErrorRate;
	type MaxForcedErrorPayout = MaxForcedErrorPayout;
	type Randomness = ParentVrfRandomness;
	type VerifiersPerUnit = ConstU32<3>;
	type SamplesPerVerifier = ConstU32<2>;
	// Thirty seconds to re-execute two segments and commit, thirty to reveal: a round
	// concludes 24 blocks after its proof (drawn four after it, `RandomnessBlocks`), well
	// inside the five-minute challenge window.
	type CommitPeriod = ConstU32<10>;
	type RevealPeriod = ConstU32<10>;
	type MissedRevealSlash = ConstU128<{ UNIT }>;
	// The minimum verifier bond, as a lying solver's slash is the minimum solver bond: a
	// verifier that attests a lie it re-executed loses at least the floor it posted.
	type FalseAttestationSlash = ConstU128<{ 50 * UNIT }>;
	// As many as there can be open units.
	type MaxPendingDraws = ConstU32<1024>;
	type MaxDrawsPerBlock = ConstU32<16>;
	// Recording a secret's randomness is cheap; 128 a block outpaces the most the open units
	// can commit (1,024 units, each assignment lasting at least `MinUnitTimeout`, 20 blocks).
	type MaxSecretsPerBlock = ConstU32<128>;
	type BlockAuthor = BabeBlockAuthor;
	type AuthorCount = BabeAuthorCount;
	// Three blocks' VRF outputs after each commitment, by at least two authors, decide its
	// draw or designation: no single author knows the seed in advance. Three blocks cost
	// two (six seconds) over the parent block's output alone; two authors cost more only
	// when one author made all three, one time in `V²` on `V` validators of equal stake
	// (docs/protocol.md).
	type RandomnessBlocks = ConstU32<3>;
	type RandomnessAuthors = ConstU32<2>;
	type DrawTimeout = ConstU32<50>;
	// A committee of seven outvotes any round of three; with a third of the verifier stake
	// dishonest, its majority is dishonest with probability about 17 % per escalation, and
	// every dishonest member that loses pays `FalseAttestationSlash` (docs/protocol.md).
	type EscalationCommittee = ConstU32<7>;
	// Three at least, none of the round's own verifiers: no verifier judges a round it sat
	// in, and a committee's majority is at least two.
	type MinEscalationCommittee = ConstU32<3>;
	// Twice the median profile: about the margin the kernels' documented bounds keep over
	// the distances measured between libtorch and the reference (docs/kernels.md).
	type ToleranceMargin = ConstU32<2>;
	// Two profiles at least, so no single verifier sets a job's thresholds; and never
	// below a hundredth of the submitter's ceilings.
	type MinProfiles = ConstU32<2>;
	type ThresholdFloor = ThresholdFloor;
	// Each escalation's conclusion may overturn a proof and roll back a 64-unit job: two a
	// block keep the hook's heaviest block under a fifth of it (tests/parameters.rs).
	type MaxEscalationsPerBlock = ConstU32<2>;
	type MaxThresholdChallenges = ConstU32<2>;
	type InvalidProofSlash = ConstU128<INVALID_PROOF_SLASH>;
	// An escalation's conviction pays its accuser as a dispute's pays its challengers, and
	// a losing verifier's slash pays its winner the same share.
	type WinnerShare = ConvictionShare;
	type Nodes = Staking;
	type WeightInfo = pallet_touchstone_verification::weights::SubstrateWeight<Runtime>;
	#[cfg(feature = "runtime-benchmarks")]
	type BenchmarkHelper = crate::benchmarks::StakingHelper;
}
