//! A test runtime: System, Balances and this pallet.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::arithmetic_side_effects)]

use crate as pallet_touchstone_staking;
use polkadot_sdk::{
	frame_support::{
		self, derive_impl, parameter_types,
		traits::{tokens::imbalance::ResolveTo, ConstU32, ConstU64},
	},
	frame_system, pallet_balances, sp_io, sp_runtime,
};
use touchstone_primitives::{traits::ActiveWork, DeviceKind, HardwareProfile, Role};

type Block = frame_system::mocking::MockBlock<Test>;

frame_support::construct_runtime!(
	pub enum Test {
		System: frame_system,
		Balances: pallet_balances,
		Staking: pallet_touchstone_staking,
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
	type ExistentialDeposit = ConstU64<2>;
	type RuntimeHoldReason = RuntimeHoldReason;
}

/// The account slashed funds go to.
pub const JACKPOT: u64 = 999;
/// Minimum solver bond.
pub const MIN_SOLVER_BOND: u64 = 100;
/// Minimum verifier bond.
pub const MIN_VERIFIER_BOND: u64 = 50;
/// Minimum challenger bond.
pub const MIN_CHALLENGER_BOND: u64 = 20;
/// Blocks of unbonding.
pub const UNBONDING_PERIOD: u64 = 10;
/// Blocks without heartbeat before a node is offline.
pub const HEARTBEAT_TIMEOUT: u64 = 20;
/// Most nodes the registry holds.
pub const MAX_NODES: u32 = 40;
/// Blocks without heartbeat before anyone may remove an idle node.
pub const REAP_DELAY: u64 = 50;
/// Value of completed work at which reputation counts in full.
pub const REPUTATION_SATURATION: u64 = 10_000;

parameter_types! {
	pub const Jackpot: u64 = JACKPOT;
	/// Nodes the mock's tasks pallet says have work in hand.
	pub static BusyNodes: Vec<(u64, Role)> = Vec::new();
	/// The collateral the mock's tasks pallet says each node's units need.
	pub static Collateral: Vec<(u64, u64)> = Vec::new();
}

/// Stands in for the tasks and verification pallets: a node has work in a role when
/// `BusyNodes` lists it with that role, and needs the collateral `Collateral` lists for it.
pub struct MockActiveWork;
impl ActiveWork<u64, u64> for MockActiveWork {
	fn active_work(who: &u64, role: Role) -> u32 {
		u32::from(BusyNodes::get().contains(&(*who, role)))
	}
	fn required_collateral(who: &u64) -> u64 {
		Collateral::get().iter().find(|(node, _)| node == who).map_or(0, |(_, amount)| *amount)
	}
}

#[derive_impl(pallet_touchstone_staking::config_preludes::TestDefaultConfig)]
impl pallet_touchstone_staking::Config for Test {
	type Currency = Balances;
	type RuntimeHoldReason = RuntimeHoldReason;
	type SlashDestination = ResolveTo<Jackpot, Balances>;
	type ActiveWork = MockActiveWork;
	type MinSolverBond = ConstU64<MIN_SOLVER_BOND>;
	type MinVerifierBond = ConstU64<MIN_VERIFIER_BOND>;
	type MinChallengerBond = ConstU64<MIN_CHALLENGER_BOND>;
	type UnbondingPeriod = ConstU64<UNBONDING_PERIOD>;
	type HeartbeatTimeout = ConstU64<HEARTBEAT_TIMEOUT>;
	type ReapDelay = ConstU64<REAP_DELAY>;
	type ReputationSaturation = ConstU64<REPUTATION_SATURATION>;
	// Room for the draw's tests (eligible, excluded and lapsed verifiers side by side) and
	// for more lapses in one block than its hook checks.
	type MaxNodes = ConstU32<MAX_NODES>;
}

/// A GPU profile that meets modest requirements.
pub fn gpu_profile() -> HardwareProfile {
	HardwareProfile {
		device: DeviceKind::Gpu,
		model: b"RTX 4090".to_vec().try_into().unwrap(),
		memory_mib: 24_576,
		throughput_gflops: 80_000,
		bandwidth_mbps: 1_000,
		region: b"eu".to_vec().try_into().unwrap(),
	}
}

/// Bonds for the given roles, each at its minimum.
pub fn min_bonds(roles: &[Role]) -> crate::RoleBonds<u64> {
	let bonds: Vec<_> = roles
		.iter()
		.map(|role| (*role, crate::Pallet::<Test>::min_bond(*role)))
		.collect();
	bonds.try_into().unwrap()
}

/// Builds test externalities with funded accounts.
pub struct ExtBuilder {
	balances: Vec<(u64, u64)>,
}

impl Default for ExtBuilder {
	fn default() -> Self {
		Self { balances: (1..=6).map(|who| (who, 10_000)).chain([(JACKPOT, 2)]).collect() }
	}
}

impl ExtBuilder {
	/// Sets an account's free balance.
	pub fn balance(mut self, who: u64, amount: u64) -> Self {
		self.balances.retain(|(account, _)| *account != who);
		self.balances.push((who, amount));
		self
	}

	/// Builds the externalities at block 1.
	pub fn build(self) -> sp_io::TestExternalities {
		let mut storage = frame_system::GenesisConfig::<Test>::default()
			.build_storage()
			.expect("system genesis builds");
		pallet_balances::GenesisConfig::<Test> { balances: self.balances, ..Default::default() }
			.assimilate_storage(&mut storage)
			.expect("balances genesis builds");
		let mut ext = sp_io::TestExternalities::new(storage);
		ext.execute_with(|| System::set_block_number(1));
		ext
	}

	/// Runs `test`, then checks the pallet's invariants.
	pub fn build_and_execute(self, test: impl FnOnce()) {
		self.build().execute_with(|| {
			test();
			Staking::do_try_state().unwrap_or_else(|e| panic!("try_state failed: {e:?}"));
		});
	}
}

/// The pallet's events since the last call.
pub fn staking_events() -> Vec<crate::Event<Test>> {
	let events = System::events()
		.into_iter()
		.filter_map(|record| match record.event {
			RuntimeEvent::Staking(event) => Some(event),
			_ => None,
		})
		.collect();
	System::reset_events();
	events
}

/// Advances to block `n`.
pub fn run_to_block(n: u64) {
	System::run_to_block::<AllPalletsWithSystem>(n);
}

pub use sp_runtime::BuildStorage;
