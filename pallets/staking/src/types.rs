//! Storage types of the staking pallet.

use crate::pallet::Config;
use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use polkadot_sdk::{
	frame_support::traits::fungible::{Credit, Inspect},
	sp_core::ConstU32,
	sp_runtime::{BoundedVec},
};
use scale_info::TypeInfo;
use touchstone_primitives::{HardwareProfile, Role};

/// The balance type of the pallet's currency.
pub type BalanceOf<T> = <<T as Config>::Currency as Inspect<
	<T as polkadot_sdk::frame_system::Config>::AccountId,
>>::Balance;

/// Funds taken by a slash, not yet placed anywhere.
pub type CreditOf<T> =
	Credit<<T as polkadot_sdk::frame_system::Config>::AccountId, <T as Config>::Currency>;

/// The roles a node holds, each at most once, in declaration order.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug, Default,
)]
pub struct RoleSet {
	/// Holds the solver role.
	pub solver: bool,
	/// Holds the verifier role.
	pub verifier: bool,
	/// Holds the challenger role.
	pub challenger: bool,
}

impl RoleSet {
	fn flag(&mut self, role: Role) -> &mut bool {
		match role {
			Role::Solver => &mut self.solver,
			Role::Verifier => &mut self.verifier,
			Role::Challenger => &mut self.challenger,
		}
	}

	/// Whether the set holds `role`.
	pub fn contains(&self, role: Role) -> bool {
		match role {
			Role::Solver => self.solver,
			Role::Verifier => self.verifier,
			Role::Challenger => self.challenger,
		}
	}

	/// Adds `role`.
	pub fn insert(&mut self, role: Role) {
		*self.flag(role) = true;
	}

	/// Removes `role`.
	pub fn remove(&mut self, role: Role) {
		*self.flag(role) = false;
	}

	/// Whether no role is held.
	pub fn is_empty(&self) -> bool {
		!(self.solver || self.verifier || self.challenger)
	}

	/// The roles held, in declaration order.
	pub fn to_vec(&self) -> alloc::vec::Vec<Role> {
		Role::ALL.into_iter().filter(|role| self.contains(*role)).collect()
	}
}

/// A node's track record. Work counts by its value (the units' prices), so that many
/// cheap, self-dealt units are worth no more than their price.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug, Default,
)]
pub struct Reputation {
	/// Units it completed and was paid for.
	pub completed: u32,
	/// Units it timed out on after taking them.
	pub failed: u32,
	/// Times its bond was slashed.
	pub slashed: u32,
	/// What the units it completed paid, in total.
	pub completed_value: u128,
	/// What the units it timed out on would have paid, in total.
	pub failed_value: u128,
}

/// A registered compute node.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq,
	Debug,
)]
pub struct NodeInfo<BlockNumber, Balance> {
	/// The roles it is registered for.
	pub roles: RoleSet,
	/// Its declared hardware.
	pub profile: HardwareProfile,
	/// The block it registered in.
	pub registered_at: BlockNumber,
	/// The block of its latest heartbeat.
	pub last_heartbeat: BlockNumber,
	/// Its track record.
	pub reputation: Reputation,
	/// The least it takes per unit as a solver.
	pub min_price: Balance,
}

/// Funds unbonded from a role, waiting out the unbonding period.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug,
)]
pub struct UnbondingChunk<Balance, BlockNumber> {
	/// The role the funds left.
	pub role: Role,
	/// The amount.
	pub amount: Balance,
	/// The block from which it can be withdrawn.
	pub unlock_at: BlockNumber,
}

/// Most roles a registration can name.
pub type MaxRoles = ConstU32<3>;

/// Bonds named at registration: one `(role, amount)` per role.
pub type RoleBonds<Balance> = BoundedVec<(Role, Balance), MaxRoles>;
