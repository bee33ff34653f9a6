//! # Touchstone staking
//!
//! The registry of compute nodes. A node registers with one or more roles (solver,
//! verifier, challenger) and a hardware profile, and bonds funds for each role through
//! `fungible` holds. It proves liveness with heartbeats and accrues a reputation from the
//! work it completes, fails and is slashed for.
//!
//! Other pallets use it through the traits of [`touchstone_primitives::traits`]:
//! [`ComputeNodes`] to find eligible solvers and record outcomes, and [`Slash`] to take
//! bonds for proven dishonesty. A technical failure (a timeout) costs reputation only.
//!
//! ## Calls
//! - [`Pallet::register`]: become a node with a profile and a bond per role.
//! - [`Pallet::update_profile`]: declare new hardware.
//! - [`Pallet::bond_more`]: add to a role's bond, or take up a new role.
//! - [`Pallet::unbond`]: start withdrawing a role's bond; it stays slashable until the
//!   unbonding period ends.
//! - [`Pallet::withdraw_unbonded`]: release matured unbonding funds.
//! - [`Pallet::heartbeat`]: mark the node online.
//! - [`Pallet::deregister`]: leave, once no bond and no work remain.
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub use pallet::*;
pub use weights::WeightInfo;

mod impls;
mod types;
pub mod weights;

#[cfg(feature = "runtime-benchmarks")]
mod benchmarking;
#[cfg(test)]
mod mock;
#[cfg(test)]
mod tests;

pub use types::*;

use polkadot_sdk::{frame_support, frame_system, sp_runtime};

#[frame_support::pallet]
pub mod pallet {
	use super::*;
	use alloc::vec::Vec;
	use frame_support::{
		pallet_prelude::*,
		traits::{
			fungible::{Inspect, InspectHold, Mutate, MutateHold},
			tokens::{imbalance::OnUnbalanced, Precision},
		},
	};
	use frame_system::pallet_prelude::*;
	use sp_runtime::traits::{Saturating, Zero};
	use touchstone_primitives::{traits::ActiveWork, HardwareProfile, Role};

	/// The in-code storage version.
	const STORAGE_VERSION: StorageVersion = StorageVersion::new(0);

	#[pallet::pallet]
	#[pallet::storage_version(STORAGE_VERSION)]
	pub struct Pallet<T>(_);

	#[pallet::config]
	pub trait Config: polkadot_sdk::frame_system::Config {
		/// The currency bonds are held in.
		type Currency: Inspect<Self::AccountId>
			+ Mutate<Self::AccountId>
			+ MutateHold<Self::AccountId, Reason = Self::RuntimeHoldReason>
			+ frame_support::traits::fungible::BalancedHold<Self::AccountId>;

		/// The overarching hold reason.
		type RuntimeHoldReason: From<HoldReason>;

		/// Where slashed funds go (after any reward share): a jackpot or treasury.
		type SlashDestination: OnUnbalanced<CreditOf<Self>>;

		/// Which nodes still have work in hand; they cannot drop their solver role or leave.
		type ActiveWork: ActiveWork<Self::AccountId>;

		/// Minimum bond of a solver.
		#[pallet::constant]
		type MinSolverBond: Get<BalanceOf<Self>>;

		/// Minimum bond of a verifier.
		#[pallet::constant]
		type MinVerifierBond: Get<BalanceOf<Self>>;

		/// Minimum bond of a challenger.
		#[pallet::constant]
		type MinChallengerBond: Get<BalanceOf<Self>>;

		/// Blocks unbonded funds stay held, and slashable, before they can be withdrawn.
		#[pallet::constant]
		type UnbondingPeriod: Get<BlockNumberFor<Self>>;

		/// Blocks after its last heartbeat that a node counts as offline.
		#[pallet::constant]
		type HeartbeatTimeout: Get<BlockNumberFor<Self>>;

		/// Most registered nodes. Bounds every scan of the registry.
		#[pallet::constant]
		type MaxNodes: Get<u32>;

		/// Most unbonding chunks a node may have in flight.
		#[pallet::constant]
		type MaxUnbondingChunks: Get<u32>;

		/// Longest device model string accepted, in bytes.
		#[pallet::constant]
		type MaxDeviceModelLen: Get<u32>;

		/// Longest region tag accepted, in bytes.
		#[pallet::constant]
		type MaxRegionLen: Get<u32>;

		/// Weights of this pallet's calls, from its benchmarks.
		type WeightInfo: WeightInfo;
	}

	/// Why this pallet holds funds.
	#[pallet::composite_enum]
	pub enum HoldReason {
		/// The bond of a solver.
		SolverBond,
		/// The bond of a verifier.
		VerifierBond,
		/// The bond of a challenger.
		ChallengerBond,
		/// Funds unbonded from a role, waiting out the unbonding period.
		Unbonding,
	}

	/// Registered compute nodes.
	#[pallet::storage]
	pub type Nodes<T: Config> =
		CountedStorageMap<_, Blake2_128Concat, T::AccountId, NodeInfo<BlockNumberFor<T>>>;

	/// Funds each node has unbonded and not yet withdrawn.
	#[pallet::storage]
	pub type Unbonding<T: Config> = StorageMap<
		_,
		Blake2_128Concat,
		T::AccountId,
		BoundedVec<UnbondingChunk<BalanceOf<T>, BlockNumberFor<T>>, T::MaxUnbondingChunks>,
		ValueQuery,
	>;

	#[pallet::event]
	#[pallet::generate_deposit(pub(super) fn deposit_event)]
	pub enum Event<T: Config> {
		/// A compute node registered.
		NodeRegistered {
			/// The node's account.
			who: T::AccountId,
			/// The roles it registered for.
			roles: Vec<Role>,
			/// Its declared hardware.
			profile: HardwareProfile,
		},
		/// A node declared new hardware.
		ProfileUpdated {
			/// The node's account.
			who: T::AccountId,
			/// Its new hardware profile.
			profile: HardwareProfile,
		},
		/// A node bonded funds for a role.
		Bonded {
			/// The node's account.
			who: T::AccountId,
			/// The role the funds back.
			role: Role,
			/// The amount added.
			amount: BalanceOf<T>,
		},
		/// A node started unbonding funds from a role.
		Unbonded {
			/// The node's account.
			who: T::AccountId,
			/// The role the funds leave.
			role: Role,
			/// The amount unbonded.
			amount: BalanceOf<T>,
			/// The block from which it can be withdrawn.
			unlock_at: BlockNumberFor<T>,
		},
		/// A node withdrew matured unbonded funds.
		Withdrawn {
			/// The node's account.
			who: T::AccountId,
			/// The amount released.
			amount: BalanceOf<T>,
		},
		/// A node sent a heartbeat.
		Heartbeat {
			/// The node's account.
			who: T::AccountId,
		},
		/// A node left the registry.
		NodeDeregistered {
			/// The node's account.
			who: T::AccountId,
		},
		/// A node's bond was slashed.
		Slashed {
			/// The node's account.
			who: T::AccountId,
			/// The role whose bond was slashed.
			role: Role,
			/// The amount taken.
			amount: BalanceOf<T>,
		},
	}

	#[pallet::error]
	pub enum Error<T> {
		/// The account is already a registered node.
		AlreadyRegistered,
		/// The account is not a registered node.
		NotRegistered,
		/// The registry holds `MaxNodes` nodes already.
		TooManyNodes,
		/// A registration must name at least one role.
		NoRoles,
		/// A role was named twice.
		DuplicateRole,
		/// A bond is below the role's minimum.
		BondBelowMinimum,
		/// The node does not hold a bond for this role.
		RoleNotBonded,
		/// Unbonding would leave a bond above zero but below the role's minimum.
		RemainderBelowMinimum,
		/// The node has `MaxUnbondingChunks` unbonding already; withdraw first.
		TooManyUnbondingChunks,
		/// Nothing has finished unbonding.
		NothingToWithdraw,
		/// The node still holds bonds; unbond them first.
		StillBonded,
		/// The node has units in hand; finish them first.
		HasActiveWork,
		/// The device model string is longer than `MaxDeviceModelLen`.
		DeviceModelTooLong,
		/// The region tag is longer than `MaxRegionLen`.
		RegionTooLong,
		/// A hardware profile must declare non-zero memory and throughput.
		EmptyProfile,
		/// The amount must be above zero.
		ZeroAmount,
		/// The account cannot cover the bond.
		InsufficientBalance,
	}

	#[pallet::hooks]
	impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
		fn integrity_test() {
			assert!(T::MaxNodes::get() > 0, "MaxNodes must be positive");
			assert!(T::MaxUnbondingChunks::get() > 0, "MaxUnbondingChunks must be positive");
			assert!(!T::HeartbeatTimeout::get().is_zero(), "HeartbeatTimeout must be positive");
			for role in Role::ALL {
				assert!(!Pallet::<T>::min_bond(role).is_zero(), "minimum bonds must be positive");
			}
		}

		#[cfg(feature = "try-runtime")]
		fn try_state(_n: BlockNumberFor<T>) -> Result<(), sp_runtime::TryRuntimeError> {
			Self::do_try_state()
		}
	}

	#[pallet::call]
	impl<T: Config> Pallet<T> {
		/// Register the caller as a compute node with a hardware profile and a bond for
		/// each role it takes. Every bond must meet its role's minimum.
		///
		/// Emits `NodeRegistered`, then `Bonded` for each role.
		#[pallet::call_index(0)]
		#[pallet::weight(T::WeightInfo::register())]
		pub fn register(
			origin: OriginFor<T>,
			profile: HardwareProfile,
			bonds: BoundedVec<(Role, BalanceOf<T>), ConstU32<3>>,
		) -> DispatchResult {
			let who = ensure_signed(origin)?;
			ensure!(!Nodes::<T>::contains_key(&who), Error::<T>::AlreadyRegistered);
			ensure!(Nodes::<T>::count() < T::MaxNodes::get(), Error::<T>::TooManyNodes);
			Self::ensure_valid_profile(&profile)?;
			ensure!(!bonds.is_empty(), Error::<T>::NoRoles);
			let mut roles = RoleSet::default();
			for (role, amount) in bonds.iter() {
				ensure!(!roles.contains(*role), Error::<T>::DuplicateRole);
				ensure!(*amount >= Self::min_bond(*role), Error::<T>::BondBelowMinimum);
				roles.insert(*role);
			}
			// Holds are taken only after every check passed, so a failure changes nothing.
			for (role, amount) in bonds.iter() {
				Self::hold(&who, *role, *amount)?;
			}
			let now = frame_system::Pallet::<T>::block_number();
			Nodes::<T>::insert(
				&who,
				NodeInfo {
					roles,
					profile: profile.clone(),
					registered_at: now,
					last_heartbeat: now,
					reputation: Reputation::default(),
				},
			);
			Self::deposit_event(Event::NodeRegistered {
				who: who.clone(),
				roles: roles.to_vec(),
				profile,
			});
			for (role, amount) in bonds {
				Self::deposit_event(Event::Bonded { who: who.clone(), role, amount });
			}
			Ok(())
		}

		/// Declare new hardware for the caller's node.
		///
		/// Emits `ProfileUpdated`.
		#[pallet::call_index(1)]
		#[pallet::weight(T::WeightInfo::update_profile())]
		pub fn update_profile(origin: OriginFor<T>, profile: HardwareProfile) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Self::ensure_valid_profile(&profile)?;
			Nodes::<T>::try_mutate(&who, |node| -> DispatchResult {
				let node = node.as_mut().ok_or(Error::<T>::NotRegistered)?;
				node.profile = profile.clone();
				Ok(())
			})?;
			Self::deposit_event(Event::ProfileUpdated { who, profile });
			Ok(())
		}

		/// Add `amount` to the caller's bond for `role`. A role the node does not hold yet
		/// is taken up if the amount meets its minimum.
		///
		/// Emits `Bonded`.
		#[pallet::call_index(2)]
		#[pallet::weight(T::WeightInfo::bond_more())]
		pub fn bond_more(origin: OriginFor<T>, role: Role, amount: BalanceOf<T>) -> DispatchResult {
			let who = ensure_signed(origin)?;
			ensure!(!amount.is_zero(), Error::<T>::ZeroAmount);
			Nodes::<T>::try_mutate(&who, |node| -> DispatchResult {
				let node = node.as_mut().ok_or(Error::<T>::NotRegistered)?;
				if !node.roles.contains(role) {
					ensure!(amount >= Self::min_bond(role), Error::<T>::BondBelowMinimum);
					node.roles.insert(role);
				}
				Self::hold(&who, role, amount)
			})?;
			Self::deposit_event(Event::Bonded { who, role, amount });
			Ok(())
		}

		/// Start unbonding `amount` of the caller's bond for `role`. What remains must be
		/// zero, which drops the role, or at least the role's minimum. The funds stay held,
		/// and slashable, for `UnbondingPeriod` blocks.
		///
		/// Emits `Unbonded`.
		#[pallet::call_index(3)]
		#[pallet::weight(T::WeightInfo::unbond())]
		pub fn unbond(origin: OriginFor<T>, role: Role, amount: BalanceOf<T>) -> DispatchResult {
			let who = ensure_signed(origin)?;
			ensure!(!amount.is_zero(), Error::<T>::ZeroAmount);
			let now = frame_system::Pallet::<T>::block_number();
			let unlock_at = now.saturating_add(T::UnbondingPeriod::get());
			Nodes::<T>::try_mutate(&who, |node| -> DispatchResult {
				let node = node.as_mut().ok_or(Error::<T>::NotRegistered)?;
				ensure!(node.roles.contains(role), Error::<T>::RoleNotBonded);
				let bonded = Self::bonded(&who, role);
				let amount = amount.min(bonded);
				let remainder = bonded.saturating_sub(amount);
				if remainder.is_zero() {
					ensure!(
						role != Role::Solver || T::ActiveWork::active_units(&who) == 0,
						Error::<T>::HasActiveWork
					);
					node.roles.remove(role);
				} else {
					ensure!(remainder >= Self::min_bond(role), Error::<T>::RemainderBelowMinimum);
				}
				// A slash may have emptied the bond; then only the role is dropped.
				if !amount.is_zero() {
					Unbonding::<T>::try_mutate(&who, |chunks| -> DispatchResult {
						chunks
							.try_push(UnbondingChunk { role, amount, unlock_at })
							.map_err(|_| Error::<T>::TooManyUnbondingChunks)?;
						Ok(())
					})?;
					T::Currency::release(&role_hold(role).into(), &who, amount, Precision::Exact)?;
					T::Currency::hold(&HoldReason::Unbonding.into(), &who, amount)?;
				}
				Self::deposit_event(Event::Unbonded { who: who.clone(), role, amount, unlock_at });
				Ok(())
			})
		}

		/// Release every unbonding chunk of the caller whose period has ended.
		///
		/// Emits `Withdrawn`.
		#[pallet::call_index(4)]
		#[pallet::weight(T::WeightInfo::withdraw_unbonded(T::MaxUnbondingChunks::get()))]
		pub fn withdraw_unbonded(origin: OriginFor<T>) -> DispatchResultWithPostInfo {
			let who = ensure_signed(origin)?;
			let now = frame_system::Pallet::<T>::block_number();
			let mut chunks = Unbonding::<T>::get(&who);
			let chunk_count = chunks.len() as u32;
			let mut matured = BalanceOf::<T>::zero();
			chunks.retain(|chunk| {
				let ripe = chunk.unlock_at <= now;
				if ripe {
					matured = matured.saturating_add(chunk.amount);
				}
				!ripe
			});
			ensure!(!matured.is_zero(), Error::<T>::NothingToWithdraw);
			// A slash may have taken part of the unbonding funds; release what is left.
			let held = T::Currency::balance_on_hold(&HoldReason::Unbonding.into(), &who);
			let still_unbonding =
				chunks.iter().fold(BalanceOf::<T>::zero(), |acc, c| acc.saturating_add(c.amount));
			let released = held.saturating_sub(still_unbonding).min(matured);
			T::Currency::release(&HoldReason::Unbonding.into(), &who, released, Precision::BestEffort)?;
			if chunks.is_empty() {
				Unbonding::<T>::remove(&who);
			} else {
				Unbonding::<T>::insert(&who, chunks);
			}
			Self::deposit_event(Event::Withdrawn { who, amount: released });
			Ok(Some(T::WeightInfo::withdraw_unbonded(chunk_count)).into())
		}

		/// Mark the caller's node online. A node with no heartbeat for `HeartbeatTimeout`
		/// blocks counts as offline and is skipped by scheduling.
		///
		/// Emits `Heartbeat`.
		#[pallet::call_index(5)]
		#[pallet::weight(T::WeightInfo::heartbeat())]
		pub fn heartbeat(origin: OriginFor<T>) -> DispatchResult {
			let who = ensure_signed(origin)?;
			let now = frame_system::Pallet::<T>::block_number();
			Nodes::<T>::try_mutate(&who, |node| -> DispatchResult {
				node.as_mut().ok_or(Error::<T>::NotRegistered)?.last_heartbeat = now;
				Ok(())
			})?;
			Self::deposit_event(Event::Heartbeat { who });
			Ok(())
		}

		/// Leave the registry. Every role must be unbonded and no work left in hand;
		/// funds still unbonding are withdrawn as usual afterwards.
		///
		/// Emits `NodeDeregistered`.
		#[pallet::call_index(6)]
		#[pallet::weight(T::WeightInfo::deregister())]
		pub fn deregister(origin: OriginFor<T>) -> DispatchResult {
			let who = ensure_signed(origin)?;
			let node = Nodes::<T>::get(&who).ok_or(Error::<T>::NotRegistered)?;
			ensure!(node.roles.is_empty(), Error::<T>::StillBonded);
			ensure!(T::ActiveWork::active_units(&who) == 0, Error::<T>::HasActiveWork);
			Nodes::<T>::remove(&who);
			Self::deposit_event(Event::NodeDeregistered { who });
			Ok(())
		}
	}

	impl<T: Config> Pallet<T> {
		/// The minimum bond of `role`.
		pub fn min_bond(role: Role) -> BalanceOf<T> {
			match role {
				Role::Solver => T::MinSolverBond::get(),
				Role::Verifier => T::MinVerifierBond::get(),
				Role::Challenger => T::MinChallengerBond::get(),
			}
		}

		/// What `who` holds as its bond for `role`.
		pub fn bonded(who: &T::AccountId, role: Role) -> BalanceOf<T> {
			T::Currency::balance_on_hold(&role_hold(role).into(), who)
		}

		/// Whether `who`'s last heartbeat is recent enough.
		pub fn is_node_online(node: &NodeInfo<BlockNumberFor<T>>) -> bool {
			let now = frame_system::Pallet::<T>::block_number();
			now.saturating_sub(node.last_heartbeat) <= T::HeartbeatTimeout::get()
		}

		fn hold(who: &T::AccountId, role: Role, amount: BalanceOf<T>) -> DispatchResult {
			T::Currency::hold(&role_hold(role).into(), who, amount)
				.map_err(|_| Error::<T>::InsufficientBalance.into())
		}

		fn ensure_valid_profile(profile: &HardwareProfile) -> DispatchResult {
			ensure!(
				profile.model.len() <= T::MaxDeviceModelLen::get() as usize,
				Error::<T>::DeviceModelTooLong
			);
			ensure!(
				profile.region.len() <= T::MaxRegionLen::get() as usize,
				Error::<T>::RegionTooLong
			);
			ensure!(
				profile.memory_mib > 0 && profile.throughput_gflops > 0,
				Error::<T>::EmptyProfile
			);
			Ok(())
		}

		/// Checks the pallet's invariants:
		/// - a node holds a bond of at least the minimum for every role it lists, and
		///   none for a role it does not list;
		/// - the unbonding hold of an account never exceeds its unbonding chunks;
		/// - the counted map's counter matches its contents.
		#[cfg(any(feature = "try-runtime", feature = "std"))]
		pub fn do_try_state() -> Result<(), sp_runtime::TryRuntimeError> {
			let mut nodes = 0u32;
			for (who, node) in Nodes::<T>::iter() {
				nodes = nodes.saturating_add(1);
				for role in Role::ALL {
					let bonded = Self::bonded(&who, role);
					if node.roles.contains(role) {
						// A slash can take a bond below the minimum; it stays listed until the
						// node unbonds or tops up, and it is not eligible meanwhile.
						ensure!(!bonded.is_zero() || node.reputation.slashed > 0, "listed role without bond");
					} else {
						ensure!(bonded.is_zero(), "bond held for a role the node does not list");
					}
				}
			}
			ensure!(nodes == Nodes::<T>::count(), "node counter out of sync");
			ensure!(nodes <= T::MaxNodes::get(), "more nodes than MaxNodes");
			for (who, chunks) in Unbonding::<T>::iter() {
				let listed =
					chunks.iter().fold(BalanceOf::<T>::zero(), |acc, c| acc.saturating_add(c.amount));
				let held = T::Currency::balance_on_hold(&HoldReason::Unbonding.into(), &who);
				ensure!(held <= listed, "unbonding hold exceeds unbonding chunks");
				ensure!(!chunks.is_empty(), "empty unbonding entry left in storage");
			}
			Ok(())
		}
	}
}

/// The hold reason that backs a role's bond.
pub fn role_hold(role: touchstone_primitives::Role) -> HoldReason {
	use touchstone_primitives::Role;
	match role {
		Role::Solver => HoldReason::SolverBond,
		Role::Verifier => HoldReason::VerifierBond,
		Role::Challenger => HoldReason::ChallengerBond,
	}
}
