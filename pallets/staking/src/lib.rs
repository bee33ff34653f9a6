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
//! - [`Pallet::register`]: become a node with a profile, a bond per role and the least
//!   it takes per unit as a solver.
//! - [`Pallet::update_profile`]: declare new hardware (not while holding units).
//! - [`Pallet::set_min_price`]: change the least it takes per unit.
//! - [`Pallet::bond_more`]: add to a role's bond, or take up a new role.
//! - [`Pallet::unbond`]: start withdrawing a role's bond; it stays slashable until the
//!   unbonding period ends.
//! - [`Pallet::withdraw_unbonded`]: release matured unbonding funds.
//! - [`Pallet::heartbeat`]: mark the node online.
//! - [`Pallet::set_endpoint`]: advertise (or withdraw) the multiaddr where the node's
//!   worker serves artifacts, so peers find it from the chain alone.
//! - [`Pallet::deregister`]: leave, once no bond and no work remain.
//! - [`Pallet::reap`]: anyone may remove a node that has been offline for `ReapDelay`
//!   blocks with no work in hand; its bonds start unbonding. Free when it succeeds, so
//!   idle registrations cannot hold the bounded registry.
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub use pallet::*;
pub use weights::WeightInfo;

mod draw;
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
	use sp_runtime::traits::{One, Saturating, Zero};
	use touchstone_primitives::{traits::ActiveWork, HardwareProfile, Role, SlashReason};

	/// The in-code storage version.
	const STORAGE_VERSION: StorageVersion = StorageVersion::new(2);

	#[pallet::pallet]
	#[pallet::storage_version(STORAGE_VERSION)]
	pub struct Pallet<T>(_);

	#[pallet::config(with_default)]
	pub trait Config: polkadot_sdk::frame_system::Config {
		/// The currency bonds are held in.
		#[pallet::no_default]
		type Currency: Inspect<Self::AccountId>
			+ Mutate<Self::AccountId>
			+ MutateHold<Self::AccountId, Reason = Self::RuntimeHoldReason>
			+ frame_support::traits::fungible::BalancedHold<Self::AccountId>;

		/// The overarching hold reason.
		#[pallet::no_default]
		type RuntimeHoldReason: From<HoldReason>;

		/// Where slashed funds go (after any reward share): a jackpot or treasury.
		#[pallet::no_default]
		type SlashDestination: OnUnbalanced<CreditOf<Self>>;

		/// Which nodes still have work in hand, and the collateral it needs: they cannot
		/// leave, change hardware, or take their solver bond below that collateral.
		#[pallet::no_default]
		type ActiveWork: ActiveWork<Self::AccountId, BalanceOf<Self>>;

		/// Minimum bond of a solver.
		#[pallet::constant]
		#[pallet::no_default]
		type MinSolverBond: Get<BalanceOf<Self>>;

		/// Minimum bond of a verifier.
		#[pallet::constant]
		#[pallet::no_default]
		type MinVerifierBond: Get<BalanceOf<Self>>;

		/// Minimum bond of a challenger.
		#[pallet::constant]
		#[pallet::no_default]
		type MinChallengerBond: Get<BalanceOf<Self>>;

		/// Blocks unbonded funds stay held, and slashable, before they can be withdrawn.
		#[pallet::constant]
		#[pallet::no_default]
		type UnbondingPeriod: Get<BlockNumberFor<Self>>;

		/// Blocks after its last heartbeat that a node counts as offline.
		#[pallet::constant]
		#[pallet::no_default]
		type HeartbeatTimeout: Get<BlockNumberFor<Self>>;

		/// Blocks after its last heartbeat from which anyone may remove an idle node.
		#[pallet::constant]
		#[pallet::no_default]
		type ReapDelay: Get<BlockNumberFor<Self>>;

		/// Value of completed work at which a solver's reputation counts in full; below it,
		/// reputation counts in proportion, so a new account starts with none.
		#[pallet::constant]
		#[pallet::no_default]
		type ReputationSaturation: Get<BalanceOf<Self>>;

		/// Most registered nodes. Bounds every scan of the registry.
		#[pallet::constant]
		type MaxNodes: Get<u32>;

		/// Most unbonding chunks a node may have in flight.
		#[pallet::constant]
		type MaxUnbondingChunks: Get<u32>;

		/// Longest endpoint a node may advertise, in bytes (a multiaddr as text).
		#[pallet::constant]
		type MaxEndpointLength: Get<u32>;

		/// Weights of this pallet's calls, from its benchmarks.
		type WeightInfo: WeightInfo;
	}

	/// Defaults for the `Config` items that have them, for test runtimes to
	/// `derive_impl` from.
	pub mod config_preludes {
		use super::*;
		use frame_support::derive_impl;

		/// Small bounds for test runtimes.
		pub struct TestDefaultConfig;

		#[derive_impl(frame_system::config_preludes::TestDefaultConfig, no_aggregated_types)]
		impl frame_system::DefaultConfig for TestDefaultConfig {}

		#[frame_support::register_default_impl(TestDefaultConfig)]
		impl DefaultConfig for TestDefaultConfig {
			type MaxNodes = ConstU32<4>;
			type MaxUnbondingChunks = ConstU32<3>;
			type MaxEndpointLength = ConstU32<128>;
			type WeightInfo = ();
		}
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
		CountedStorageMap<_, Blake2_128Concat, T::AccountId, NodeInfo<BlockNumberFor<T>, BalanceOf<T>>>;

	/// Funds each node has unbonded and not yet withdrawn.
	#[pallet::storage]
	pub type Unbonding<T: Config> = StorageMap<
		_,
		Blake2_128Concat,
		T::AccountId,
		BoundedVec<UnbondingChunk<BalanceOf<T>, BlockNumberFor<T>>, UnbondingCapacity<T>>,
		ValueQuery,
	>;

	/// The verifier draw's slots: each verifier bonded at least at the minimum holds one,
	/// with the weight (its verifier bond) the sum tree counts for it.
	#[pallet::storage]
	pub type DrawSlots<T: Config> = StorageMap<_, Twox64Concat, u32, (T::AccountId, u128)>;

	/// Each drawable verifier's slot.
	#[pallet::storage]
	pub type DrawSlotOf<T: Config> = StorageMap<_, Blake2_128Concat, T::AccountId, u32>;

	/// The draw's Fenwick sum tree over slot weights: node `i` (from 1) holds the sum of
	/// slots `(i - lowbit(i), i]`; node `draw_capacity()` holds the total.
	#[pallet::storage]
	pub type DrawTree<T: Config> = StorageMap<_, Twox64Concat, u32, u128, ValueQuery>;

	/// The highest slot ever used; slots above it are fresh.
	#[pallet::storage]
	pub type DrawSlotsUsed<T: Config> = StorageValue<_, u32, ValueQuery>;

	/// Slots freed by verifiers that left the draw, reused first.
	#[pallet::storage]
	pub type FreeDrawSlots<T: Config> = StorageValue<_, BoundedVec<u32, T::MaxNodes>, ValueQuery>;

	/// The capacity the draw's tree was built for (`MaxNodes` rounded up to a power of two,
	/// when it was first written): its root, the total, is node `DrawCapacity`. A runtime
	/// upgrade that changes `MaxNodes` rebuilds the tree for the new capacity
	/// ([`migrations::ResizeDrawTree`]); absent until the tree is first written.
	#[pallet::storage]
	pub type DrawCapacity<T: Config> = StorageValue<_, u32, OptionQuery>;

	/// The most lapses one block's hook checks; the rest are checked in the next block.
	pub const MAX_LAPSES_PER_BLOCK: u32 = 32;

	/// The nodes whose liveness lapses at each block, unless they beat again first: the
	/// first block after a heartbeat's `HeartbeatTimeout`. A lapsed verifier leaves the draw
	/// in that block's hook, so no draw spends a pick on it; its next heartbeat brings it
	/// back. Each node is listed once a block, so `MaxNodes` bounds every entry.
	#[pallet::storage]
	pub type Lapses<T: Config> =
		StorageMap<_, Twox64Concat, BlockNumberFor<T>, BoundedVec<T::AccountId, T::MaxNodes>, ValueQuery>;

	/// Where each node's worker accepts peers: a libp2p multiaddr as UTF-8 text, ending
	/// in `/p2p/<peer id>`. Artifacts (datasets, checkpoints, models) are fetched from it.
	#[pallet::storage]
	pub type Endpoints<T: Config> =
		StorageMap<_, Blake2_128Concat, T::AccountId, BoundedVec<u8, T::MaxEndpointLength>>;

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
			/// The least it takes per unit as a solver.
			min_price: BalanceOf<T>,
		},
		/// A solver changed the least it takes per unit.
		MinPriceSet {
			/// The node's account.
			who: T::AccountId,
			/// The new minimum price per unit.
			min_price: BalanceOf<T>,
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
			/// The amount actually released: matured chunks, less what slashes took.
			amount: BalanceOf<T>,
		},
		/// A node sent a heartbeat.
		Heartbeat {
			/// The node's account.
			who: T::AccountId,
		},
		/// A node advertised where its worker accepts peers, or withdrew it (`None`).
		EndpointSet {
			/// The node's account.
			who: T::AccountId,
			/// The multiaddr, UTF-8; `None` when withdrawn.
			endpoint: Option<Vec<u8>>,
		},
		/// A node left the registry.
		NodeDeregistered {
			/// The node's account.
			who: T::AccountId,
		},
		/// An idle, long-offline node was removed; its bonds are unbonding.
		NodeReaped {
			/// The node's account.
			who: T::AccountId,
			/// Who removed it.
			by: T::AccountId,
			/// What it had bonded, now unbonding.
			unbonding: BalanceOf<T>,
		},
		/// A node's bond was slashed.
		Slashed {
			/// The node's account.
			who: T::AccountId,
			/// The role whose bond was slashed.
			role: Role,
			/// The amount taken.
			amount: BalanceOf<T>,
			/// The proven misbehaviour.
			reason: SlashReason,
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
		/// The node has work in hand in the role (units as a solver, verification rounds as
		/// a verifier, until their units are final); finish it first.
		HasActiveWork,
		/// Unbonding would take the solver bond below the collateral its units need.
		BelowCollateral,
		/// The node sent a heartbeat within `ReapDelay` blocks; it cannot be reaped.
		NodeNotIdle,
		/// A slash cannot reward the account it slashes.
		RewardToSlashed,
		/// A hardware profile must declare non-zero memory and throughput.
		EmptyProfile,
		/// The amount must be above zero.
		ZeroAmount,
		/// The account cannot cover the bond.
		InsufficientBalance,
		/// An endpoint must be a multiaddr in UTF-8 text, starting with `/`.
		InvalidEndpoint,
	}

	#[pallet::hooks]
	impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
		fn on_initialize(now: BlockNumberFor<T>) -> Weight {
			let mut lapsed = Lapses::<T>::take(now).into_inner();
			// A bounded share a block: the rest waits for the next one, checked then.
			let later = lapsed.split_off(lapsed.len().min(MAX_LAPSES_PER_BLOCK as usize));
			for who in &lapsed {
				Self::sync_draw_weight(who);
			}
			let next = now.saturating_add(One::one());
			for who in &later {
				Self::list_lapse(who, next);
			}
			let deferred = T::DbWeight::get().reads_writes(1, 1).saturating_mul(u64::from(!later.is_empty()));
			Self::lapses_weight(lapsed.len() as u32).saturating_add(deferred)
		}

		fn integrity_test() {
			assert!(T::MaxNodes::get() > 0, "MaxNodes must be positive");
			assert!(T::MaxUnbondingChunks::get() > 0, "MaxUnbondingChunks must be positive");
			assert!(!T::HeartbeatTimeout::get().is_zero(), "HeartbeatTimeout must be positive");
			assert!(T::ReapDelay::get() > T::HeartbeatTimeout::get(), "only offline nodes may be reaped");
			// A reaped node that registers again and is reaped again finds its earlier
			// chunks matured, so the room kept for `reap` is always free.
			assert!(T::ReapDelay::get() >= T::UnbondingPeriod::get(), "ReapDelay must outlast UnbondingPeriod");
			assert!(!T::ReputationSaturation::get().is_zero(), "ReputationSaturation must be positive");
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
		/// Register the caller as a compute node with a hardware profile, a bond for each
		/// role it takes, and the least it takes per unit as a solver (the scheduler offers
		/// it only units that pay at least that). Every bond must meet its role's minimum.
		///
		/// Emits `NodeRegistered`, then `Bonded` for each role.
		#[pallet::call_index(0)]
		#[pallet::weight(T::WeightInfo::register())]
		pub fn register(
			origin: OriginFor<T>,
			profile: HardwareProfile,
			bonds: BoundedVec<(Role, BalanceOf<T>), ConstU32<3>>,
			min_price: BalanceOf<T>,
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
					min_price,
				},
			);
			Self::deposit_event(Event::NodeRegistered {
				who: who.clone(),
				roles: roles.to_vec(),
				profile,
				min_price,
			});
			Self::sync_draw_weight(&who);
			Self::schedule_lapse(&who, now);
			for (role, amount) in bonds {
				Self::deposit_event(Event::Bonded { who: who.clone(), role, amount });
			}
			Ok(())
		}

		/// Declare new hardware for the caller's node. Refused while it holds units, which
		/// were matched to the hardware it declared when it took them.
		///
		/// Emits `ProfileUpdated`.
		#[pallet::call_index(1)]
		#[pallet::weight(T::WeightInfo::update_profile())]
		pub fn update_profile(origin: OriginFor<T>, profile: HardwareProfile) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Self::ensure_valid_profile(&profile)?;
			ensure!(T::ActiveWork::active_work(&who, Role::Solver) == 0, Error::<T>::HasActiveWork);
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
			Self::sync_draw_weight(&who);
			Self::deposit_event(Event::Bonded { who, role, amount });
			Ok(())
		}

		/// Start unbonding `amount` of the caller's bond for `role`. What remains must be
		/// zero, which drops the role (refused while the node has work in it: units held
		/// as a solver, rounds drawn in as a verifier), or at least the role's minimum. The
		/// funds stay held, and slashable, for `UnbondingPeriod` blocks.
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
					ensure!(T::ActiveWork::active_work(&who, role) == 0, Error::<T>::HasActiveWork);
					node.roles.remove(role);
				} else {
					ensure!(remainder >= Self::min_bond(role), Error::<T>::RemainderBelowMinimum);
					ensure!(
						role != Role::Solver || remainder >= T::ActiveWork::required_collateral(&who),
						Error::<T>::BelowCollateral
					);
				}
				// A slash may have emptied the bond; then only the role is dropped.
				if !amount.is_zero() {
					Unbonding::<T>::try_mutate(&who, |chunks| -> DispatchResult {
						// `unbond` fills at most `MaxUnbondingChunks`; the rest of the
						// capacity is kept for `reap`, one chunk per role.
						ensure!(
							(chunks.len() as u32) < T::MaxUnbondingChunks::get(),
							Error::<T>::TooManyUnbondingChunks
						);
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
			})?;
			Self::sync_draw_weight(&who);
			Ok(())
		}

		/// Release every unbonding chunk of the caller whose period has ended.
		///
		/// Emits `Withdrawn`.
		#[pallet::call_index(4)]
		#[pallet::weight(T::WeightInfo::withdraw_unbonded(UnbondingCapacity::<T>::get()))]
		pub fn withdraw_unbonded(origin: OriginFor<T>) -> DispatchResultWithPostInfo {
			let who = ensure_signed(origin)?;
			let now = frame_system::Pallet::<T>::block_number();
			let chunk_count = Unbonding::<T>::decode_len(&who).unwrap_or(0) as u32;
			let matured = Unbonding::<T>::get(&who).iter().any(|chunk| chunk.unlock_at <= now);
			ensure!(matured, Error::<T>::NothingToWithdraw);
			let released = Self::release_matured(&who, now)?;
			Self::deposit_event(Event::Withdrawn { who, amount: released });
			Ok(Some(T::WeightInfo::withdraw_unbonded(chunk_count)).into())
		}

		/// Mark the caller's node online. A node with no heartbeat for `HeartbeatTimeout`
		/// blocks counts as offline: it is skipped by scheduling, and a verifier leaves the
		/// draw until it beats again.
		///
		/// Emits `Heartbeat`.
		#[pallet::call_index(5)]
		#[pallet::weight(T::WeightInfo::heartbeat().saturating_add(Pallet::<T>::lapses_weight(1)))]
		pub fn heartbeat(origin: OriginFor<T>) -> DispatchResult {
			let who = ensure_signed(origin)?;
			let now = frame_system::Pallet::<T>::block_number();
			Nodes::<T>::try_mutate(&who, |node| -> DispatchResult {
				node.as_mut().ok_or(Error::<T>::NotRegistered)?.last_heartbeat = now;
				Ok(())
			})?;
			// A verifier that had lapsed comes back into the draw.
			Self::sync_draw_weight(&who);
			Self::schedule_lapse(&who, now);
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
			ensure!(!Self::has_active_work(&who), Error::<T>::HasActiveWork);
			Nodes::<T>::remove(&who);
			Endpoints::<T>::remove(&who);
			Self::deposit_event(Event::NodeDeregistered { who });
			Ok(())
		}

		/// Set the least the caller takes per unit as a solver. Units already held keep
		/// their price.
		///
		/// Emits `MinPriceSet`.
		#[pallet::call_index(7)]
		#[pallet::weight(T::WeightInfo::set_min_price())]
		pub fn set_min_price(origin: OriginFor<T>, min_price: BalanceOf<T>) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Nodes::<T>::try_mutate(&who, |node| -> DispatchResult {
				node.as_mut().ok_or(Error::<T>::NotRegistered)?.min_price = min_price;
				Ok(())
			})?;
			Self::deposit_event(Event::MinPriceSet { who, min_price });
			Ok(())
		}

		/// Remove `who` from the registry: a node without a heartbeat for `ReapDelay`
		/// blocks and with no work in hand. Its bonds move to unbonding, slashable and
		/// withdrawable as usual. Anyone may call it, and pays no fee when it succeeds.
		///
		/// Emits `NodeReaped`.
		#[pallet::call_index(8)]
		#[pallet::weight(T::WeightInfo::reap())]
		pub fn reap(origin: OriginFor<T>, who: T::AccountId) -> DispatchResultWithPostInfo {
			let by = ensure_signed(origin)?;
			let node = Nodes::<T>::get(&who).ok_or(Error::<T>::NotRegistered)?;
			let now = frame_system::Pallet::<T>::block_number();
			ensure!(
				now.saturating_sub(node.last_heartbeat) > T::ReapDelay::get(),
				Error::<T>::NodeNotIdle
			);
			ensure!(!Self::has_active_work(&who), Error::<T>::HasActiveWork);
			// Matured chunks go back to the owner first, as `withdraw_unbonded` would.
			let released = Self::release_matured(&who, now)?;
			let unlock_at = now.saturating_add(T::UnbondingPeriod::get());
			let mut chunks = Unbonding::<T>::get(&who);
			let mut unbonding = BalanceOf::<T>::zero();
			for role in Role::ALL {
				let amount = Self::bonded(&who, role);
				if amount.is_zero() {
					continue;
				}
				// Cannot fail: `unbond` leaves room for one chunk per role.
				chunks
					.try_push(UnbondingChunk { role, amount, unlock_at })
					.map_err(|_| Error::<T>::TooManyUnbondingChunks)?;
				T::Currency::release(&role_hold(role).into(), &who, amount, Precision::Exact)?;
				T::Currency::hold(&HoldReason::Unbonding.into(), &who, amount)?;
				unbonding = unbonding.saturating_add(amount);
			}
			if !chunks.is_empty() {
				Unbonding::<T>::insert(&who, chunks);
			}
			Nodes::<T>::remove(&who);
			Endpoints::<T>::remove(&who);
			Self::sync_draw_weight(&who);
			if !released.is_zero() {
				Self::deposit_event(Event::Withdrawn { who: who.clone(), amount: released });
			}
			Self::deposit_event(Event::NodeReaped { who, by, unbonding });
			Ok(Pays::No.into())
		}

		/// Advertise where the caller's worker accepts peers, as a libp2p multiaddr in UTF-8
		/// text ending in its peer id (`/ip4/203.0.113.7/tcp/30555/p2p/12D3Koo…`), or withdraw
		/// it with `None`. Submitters and other solvers fetch the artifacts this node holds
		/// from there, with nothing but the chain to find it. The chain cannot check that the
		/// address is reachable; it checks its form only.
		///
		/// Emits `EndpointSet`.
		#[pallet::call_index(9)]
		#[pallet::weight(T::WeightInfo::set_endpoint())]
		pub fn set_endpoint(
			origin: OriginFor<T>,
			endpoint: Option<BoundedVec<u8, T::MaxEndpointLength>>,
		) -> DispatchResult {
			let who = ensure_signed(origin)?;
			ensure!(Nodes::<T>::contains_key(&who), Error::<T>::NotRegistered);
			match &endpoint {
				Some(address) => {
					let text = core::str::from_utf8(address).map_err(|_| Error::<T>::InvalidEndpoint)?;
					ensure!(text.len() > 1 && text.starts_with('/'), Error::<T>::InvalidEndpoint);
					Endpoints::<T>::insert(&who, address);
				},
				None => Endpoints::<T>::remove(&who),
			}
			Self::deposit_event(Event::EndpointSet { who, endpoint: endpoint.map(BoundedVec::into_inner) });
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

		/// Whether `who` has work in hand in any role.
		fn has_active_work(who: &T::AccountId) -> bool {
			Role::ALL.iter().any(|&role| T::ActiveWork::active_work(who, role) > 0)
		}

		/// What `who` holds as its bond for `role`.
		pub fn bonded(who: &T::AccountId, role: Role) -> BalanceOf<T> {
			T::Currency::balance_on_hold(&role_hold(role).into(), who)
		}

		/// Lists `who` to lapse at the first block after a heartbeat at `beat` times out.
		pub(crate) fn schedule_lapse(who: &T::AccountId, beat: BlockNumberFor<T>) {
			Self::list_lapse(who, beat.saturating_add(T::HeartbeatTimeout::get()).saturating_add(One::one()));
		}

		/// Lists `who` under block `at` in [`Lapses`], once.
		fn list_lapse(who: &T::AccountId, at: BlockNumberFor<T>) {
			// Each node once a block: at most `MaxNodes`, so the push always fits.
			let _ = Lapses::<T>::try_mutate(at, |due| if due.contains(who) { Ok(()) } else { due.try_push(who.clone()) });
		}

		/// The weight of `count` lapses in a block's hook (or one scheduled by a heartbeat):
		/// each brings a node's draw weight in line with its liveness, one write per level
		/// of the draw's tree at most.
		pub fn lapses_weight(count: u32) -> Weight {
			let levels = u64::from(Self::capacity_for_max_nodes().trailing_zeros().saturating_add(1));
			T::DbWeight::get()
				.reads_writes(levels.saturating_add(6), levels.saturating_add(5))
				.saturating_mul(u64::from(count))
				.saturating_add(T::DbWeight::get().reads_writes(1, 1))
		}

		/// Whether `who`'s last heartbeat is recent enough.
		pub fn is_node_online(node: &NodeInfo<BlockNumberFor<T>, BalanceOf<T>>) -> bool {
			let now = frame_system::Pallet::<T>::block_number();
			now.saturating_sub(node.last_heartbeat) <= T::HeartbeatTimeout::get()
		}

		/// Releases every unbonding chunk of `who` that matured by `now`, less what slashes
		/// took from the unbonding funds; returns the amount released.
		fn release_matured(who: &T::AccountId, now: BlockNumberFor<T>) -> Result<BalanceOf<T>, DispatchError> {
			let mut chunks = Unbonding::<T>::get(who);
			let mut matured = BalanceOf::<T>::zero();
			chunks.retain(|chunk| {
				let ripe = chunk.unlock_at <= now;
				if ripe {
					matured = matured.saturating_add(chunk.amount);
				}
				!ripe
			});
			if matured.is_zero() {
				return Ok(matured);
			}
			// A slash may have taken part of the unbonding funds; release what is left.
			let held = T::Currency::balance_on_hold(&HoldReason::Unbonding.into(), who);
			let still_unbonding =
				chunks.iter().fold(BalanceOf::<T>::zero(), |acc, c| acc.saturating_add(c.amount));
			let releasable = held.saturating_sub(still_unbonding).min(matured);
			let released =
				T::Currency::release(&HoldReason::Unbonding.into(), who, releasable, Precision::BestEffort)?;
			if chunks.is_empty() {
				Unbonding::<T>::remove(who);
			} else {
				Unbonding::<T>::insert(who, chunks);
			}
			Ok(released)
		}

		fn hold(who: &T::AccountId, role: Role, amount: BalanceOf<T>) -> DispatchResult {
			T::Currency::hold(&role_hold(role).into(), who, amount)
				.map_err(|_| Error::<T>::InsufficientBalance.into())
		}

		fn ensure_valid_profile(profile: &HardwareProfile) -> DispatchResult {
			ensure!(
				profile.memory_mib > 0 && profile.throughput_gflops > 0,
				Error::<T>::EmptyProfile
			);
			Ok(())
		}

		/// Checks the pallet's invariants:
		/// - a node holds a bond of at least the minimum for every role it lists, unless a
		///   slash took it below (then it is not eligible until it tops up), and none for a
		///   role it does not list;
		/// - a solver's bond covers the collateral of the units it holds, unless slashed;
		/// - the unbonding hold of an account equals the sum of its unbonding chunks;
		/// - the counted map's counter matches its contents;
		/// - only registered nodes advertise endpoints;
		/// - the verifier draw's sum tree matches the verifier bonds.
		///
		/// Compiled for `try-runtime`, and with `std` so that the tasks pallet's tests,
		/// which run this pallet for real, check it after every test too.
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
						ensure!(
							bonded >= Self::min_bond(role) || node.reputation.slashed > 0,
							"listed role below its minimum bond and never slashed"
						);
					} else {
						ensure!(bonded.is_zero(), "bond held for a role the node does not list");
					}
				}
			}
			for (who, node) in Nodes::<T>::iter() {
				if node.roles.contains(Role::Solver) && node.reputation.slashed == 0 {
					ensure!(
						Self::bonded(&who, Role::Solver) >= T::ActiveWork::required_collateral(&who),
						"solver bond below the collateral of its units"
					);
				}
			}
			ensure!(nodes == Nodes::<T>::count(), "node counter out of sync");
			for (who, _) in Endpoints::<T>::iter() {
				ensure!(Nodes::<T>::contains_key(&who), "endpoint of an account that is not a node");
			}
			ensure!(nodes <= T::MaxNodes::get(), "more nodes than MaxNodes");
			for (who, chunks) in Unbonding::<T>::iter() {
				let listed =
					chunks.iter().fold(BalanceOf::<T>::zero(), |acc, c| acc.saturating_add(c.amount));
				let held = T::Currency::balance_on_hold(&HoldReason::Unbonding.into(), &who);
				ensure!(held == listed, "unbonding hold differs from its chunks");
				ensure!(!chunks.is_empty(), "empty unbonding entry left in storage");
			}
			Self::draw_try_state()
		}
	}
}

/// How many unbonding chunks storage holds: `MaxUnbondingChunks` that `unbond` may fill,
/// and one per role for `reap`, so no node can make itself impossible to reap.
pub struct UnbondingCapacity<T>(core::marker::PhantomData<T>);

impl<T: Config> polkadot_sdk::frame_support::traits::Get<u32> for UnbondingCapacity<T> {
	fn get() -> u32 {
		T::MaxUnbondingChunks::get().saturating_add(touchstone_primitives::Role::ALL.len() as u32)
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

/// Storage migrations of this pallet.
pub mod migrations {
	use super::*;
	use polkadot_sdk::frame_support::{
		traits::{Get, GetStorageVersion, OnRuntimeUpgrade, StorageVersion},
		weights::Weight,
	};

	/// Version 0 to 1: the draw's tree holds online verifiers only, and each node's lapse is
	/// scheduled ([`Lapses`]). Schedules every registered node's lapse from its last
	/// heartbeat, or brings an already lapsed verifier's weight down now. At most
	/// `MaxNodes` nodes.
	pub struct ScheduleLapses<T>(core::marker::PhantomData<T>);

	impl<T: Config> OnRuntimeUpgrade for ScheduleLapses<T> {
		fn on_runtime_upgrade() -> Weight {
			if Pallet::<T>::on_chain_storage_version() >= 1 {
				return T::DbWeight::get().reads(1);
			}
			let mut nodes = 0u32;
			for (who, node) in Nodes::<T>::iter() {
				Pallet::<T>::schedule_lapse(&who, node.last_heartbeat);
				Pallet::<T>::sync_draw_weight(&who);
				nodes = nodes.saturating_add(1);
			}
			StorageVersion::new(1).put::<Pallet<T>>();
			Pallet::<T>::lapses_weight(nodes).saturating_add(T::DbWeight::get().reads_writes(1, 1))
		}
	}

	/// Version 1 to 2, and every upgrade after: the draw's tree records the capacity it was
	/// built for ([`DrawCapacity`]). When `MaxNodes` no longer rounds to it (or the tree
	/// predates the record), the tree is rebuilt for the new capacity: every slot, index and
	/// sum cleared, then every registered node synced again, which gives each drawable
	/// verifier a fresh slot from 1. At most `MaxNodes` nodes; a no-op read when the
	/// capacity is unchanged.
	pub struct ResizeDrawTree<T>(core::marker::PhantomData<T>);

	impl<T: Config> OnRuntimeUpgrade for ResizeDrawTree<T> {
		fn on_runtime_upgrade() -> Weight {
			let wanted = Pallet::<T>::capacity_for_max_nodes();
			let built = DrawCapacity::<T>::get();
			let mut weight = T::DbWeight::get().reads(2);
			if built != Some(wanted) {
				let limit = T::MaxNodes::get().max(1).saturating_mul(2);
				let _ = DrawTree::<T>::clear(u32::MAX, None);
				let _ = DrawSlots::<T>::clear(limit, None);
				let _ = DrawSlotOf::<T>::clear(limit, None);
				FreeDrawSlots::<T>::kill();
				DrawSlotsUsed::<T>::kill();
				DrawCapacity::<T>::put(wanted);
				let mut nodes = 0u64;
				for (who, _) in Nodes::<T>::iter() {
					Pallet::<T>::sync_draw_weight(&who);
					nodes = nodes.saturating_add(1);
				}
				let old_nodes = u64::from(built.unwrap_or(wanted)).saturating_add(u64::from(limit));
				let per_node = u64::from(wanted.trailing_zeros()).saturating_add(4);
				weight.saturating_accrue(T::DbWeight::get().reads_writes(
					nodes.saturating_mul(per_node),
					nodes.saturating_mul(per_node).saturating_add(old_nodes),
				));
			}
			if Pallet::<T>::on_chain_storage_version() < 2 {
				StorageVersion::new(2).put::<Pallet<T>>();
			}
			weight
		}
	}
}
