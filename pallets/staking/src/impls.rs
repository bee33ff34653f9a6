//! How the staking pallet serves the other pallets: the node registry and slashing.

use crate::{pallet::*, role_hold, BalanceOf, NodeInfo};
use alloc::vec::Vec;
use codec::Encode;
use polkadot_sdk::{
	frame_support::{
		ensure,
		traits::{
			Get,
			fungible::{Balanced, BalancedHold},
			tokens::imbalance::{Imbalance, OnUnbalanced},
		},
	},
	frame_system::{self, pallet_prelude::BlockNumberFor},
	sp_io::hashing::blake2_128,
	sp_runtime::{
		traits::{CheckedDiv, Saturating, UniqueSaturatedInto, Zero},
		DispatchError, Perbill,
	},
};
use touchstone_primitives::{
	traits::{ComputeNodes, Slash, SolverCandidate},
	HardwareProfile, HardwareRequirements, Role, SlashReason,
};

/// A stored node.
type NodeOf<T> = NodeInfo<BlockNumberFor<T>, BalanceOf<T>>;

/// Points a full score component is worth.
const FULL_POINTS: u64 = 1_000;
/// Stake points reach their maximum at this multiple of the minimum bond.
const STAKE_SATURATION_MULTIPLE: u64 = 10;
/// Reputation points lost per slash.
const POINTS_PER_SLASH: u64 = 250;

impl<T: Config> Pallet<T> {
	/// The scheduling score of a solver: `stake + 2 × reputation + liveness`, each part
	/// worth 0 to 1000 points, so reputation weighs as much as stake and liveness together.
	///
	/// - stake: the bond as a share of `STAKE_SATURATION_MULTIPLE` minimum bonds;
	/// - reputation: the value-weighted success ratio `completed / (completed + failed)`,
	///   times a confidence that grows with the value completed and is full at
	///   `ReputationSaturation`, less 250 points per slash. A new account has none, so it
	///   never starts above an honest node with a history, and cheap self-dealt units
	///   earn only their price's worth;
	/// - liveness: how much of the heartbeat timeout is left.
	pub fn solver_score(who: &T::AccountId, node: &NodeOf<T>) -> u64 {
		let bond: u128 = Self::bonded(who, Role::Solver).unique_saturated_into();
		let minimum: u128 = T::MinSolverBond::get().unique_saturated_into();
		let saturation = minimum.saturating_mul(STAKE_SATURATION_MULTIPLE.into()).max(1);
		let stake = (bond.min(saturation).saturating_mul(FULL_POINTS.into()) / saturation) as u64;

		let reputation = &node.reputation;
		let done = reputation.completed_value;
		let full = FULL_POINTS as u128;
		let success = done.saturating_mul(full).checked_div(done.saturating_add(reputation.failed_value)).unwrap_or(0);
		let saturation: u128 = T::ReputationSaturation::get().unique_saturated_into();
		let confidence = done.min(saturation).saturating_mul(full).checked_div(saturation).unwrap_or(0);
		let reputation_points = (success.saturating_mul(confidence) / full) as u64;
		let reputation_points =
			reputation_points.saturating_sub(u64::from(reputation.slashed).saturating_mul(POINTS_PER_SLASH));

		let now = polkadot_sdk::frame_system::Pallet::<T>::block_number();
		let timeout: u64 = T::HeartbeatTimeout::get().unique_saturated_into();
		let age: u64 = now.saturating_sub(node.last_heartbeat).unique_saturated_into();
		let liveness = timeout
			.saturating_sub(age)
			.saturating_mul(FULL_POINTS)
			.checked_div(timeout)
			.unwrap_or_default();

		stake.saturating_add(reputation_points.saturating_mul(2)).saturating_add(liveness)
	}

	/// Orders solvers of equal score: a hash of the account under the parent block's hash,
	/// so the order rotates every block and no key can be ground to win every tie.
	fn tie_break(who: &T::AccountId) -> [u8; 16] {
		let parent = frame_system::Pallet::<T>::parent_hash();
		blake2_128(&(parent, who).encode())
	}

	fn is_eligible_solver(who: &T::AccountId, node: &NodeOf<T>) -> bool {
		node.roles.contains(Role::Solver) &&
			Self::bonded(who, Role::Solver) >= T::MinSolverBond::get() &&
			Self::is_node_online(node)
	}

	fn update_reputation(who: &T::AccountId, update: impl FnOnce(&mut crate::Reputation)) {
		Nodes::<T>::mutate(who, |node| {
			if let Some(node) = node {
				update(&mut node.reputation);
			}
		});
	}

	/// Takes up to `amount` from the unbonding funds of `who` that left `role`, newest
	/// chunk first, so a node cannot dodge a slash by unbonding.
	fn slash_unbonding(who: &T::AccountId, role: Role, amount: BalanceOf<T>) -> crate::CreditOf<T> {
		let mut chunks = Unbonding::<T>::get(who);
		let mut from_chunks = BalanceOf::<T>::zero();
		for chunk in chunks.iter_mut().rev().filter(|chunk| chunk.role == role) {
			let take = chunk.amount.min(amount.saturating_sub(from_chunks));
			chunk.amount = chunk.amount.saturating_sub(take);
			from_chunks = from_chunks.saturating_add(take);
		}
		chunks.retain(|chunk| !chunk.amount.is_zero());
		let (credit, _) = T::Currency::slash(&HoldReason::Unbonding.into(), who, from_chunks);
		if chunks.is_empty() {
			Unbonding::<T>::remove(who);
		} else {
			Unbonding::<T>::insert(who, chunks);
		}
		credit
	}
}

impl<T: Config> ComputeNodes<T::AccountId, BalanceOf<T>> for Pallet<T> {
	fn is_bonded_for(who: &T::AccountId, role: Role) -> bool {
		Nodes::<T>::get(who).is_some_and(|node| {
			node.roles.contains(role) && Self::bonded(who, role) >= Self::min_bond(role)
		})
	}

	fn is_registered(who: &T::AccountId) -> bool {
		Nodes::<T>::contains_key(who)
	}

	fn is_online(who: &T::AccountId) -> bool {
		Nodes::<T>::get(who).is_some_and(|node| Self::is_node_online(&node))
	}

	fn profile(who: &T::AccountId) -> Option<HardwareProfile> {
		Nodes::<T>::get(who).map(|node| node.profile)
	}

	fn bond(who: &T::AccountId, role: Role) -> BalanceOf<T> {
		Self::bonded(who, role)
	}

	fn min_price(who: &T::AccountId) -> Option<BalanceOf<T>> {
		Nodes::<T>::get(who).map(|node| node.min_price)
	}

	fn any_solver_meets(requirements: &HardwareRequirements, price: BalanceOf<T>) -> bool {
		// Bounded: the registry never holds more than `MaxNodes` entries.
		// Only an online solver counts: an offline one, a sybil's say, would let jobs
		// nobody can run wait out the pool and hold its slots.
		Nodes::<T>::iter().any(|(who, node)| {
			node.roles.contains(Role::Solver) &&
				Self::is_node_online(&node) &&
				node.min_price <= price &&
				requirements.is_met_by(&node.profile) &&
				Self::bonded(&who, Role::Solver) >= T::MinSolverBond::get()
		})
	}

	fn solver_candidates(limit: u32) -> Vec<SolverCandidate<T::AccountId, BalanceOf<T>>> {
		let mut candidates: Vec<_> = Nodes::<T>::iter()
			.filter(|(who, node)| Self::is_eligible_solver(who, node))
			.map(|(who, node)| {
				(
					Self::tie_break(&who),
					SolverCandidate {
						score: Self::solver_score(&who, &node),
						bond: Self::bonded(&who, Role::Solver),
						account: who,
						profile: node.profile,
						min_price: node.min_price,
					},
				)
			})
			.collect();
		// Map iteration order depends on key hashes; sorting by score, then the rotating
		// tie-break, makes the result independent of it.
		candidates.sort_by(|(a_tie, a), (b_tie, b)| b.score.cmp(&a.score).then_with(|| a_tie.cmp(b_tie)));
		candidates.into_iter().take(limit as usize).map(|(_, candidate)| candidate).collect()
	}

	fn node_count() -> u32 {
		Nodes::<T>::count()
	}

	fn max_nodes() -> u32 {
		T::MaxNodes::get()
	}

	fn note_completed(who: &T::AccountId, value: BalanceOf<T>) {
		let value: u128 = value.unique_saturated_into();
		Self::update_reputation(who, |r| {
			r.completed = r.completed.saturating_add(1);
			r.completed_value = r.completed_value.saturating_add(value);
		});
	}

	fn note_failed(who: &T::AccountId, value: BalanceOf<T>) {
		let value: u128 = value.unique_saturated_into();
		Self::update_reputation(who, |r| {
			r.failed = r.failed.saturating_add(1);
			r.failed_value = r.failed_value.saturating_add(value);
		});
	}
}

impl<T: Config> Slash<T::AccountId, BalanceOf<T>> for Pallet<T> {
	fn slash(
		who: &T::AccountId,
		role: Role,
		amount: BalanceOf<T>,
		reason: SlashReason,
		reward: Option<(&[T::AccountId], Perbill)>,
	) -> Result<BalanceOf<T>, DispatchError> {
		ensure!(
			reward.is_none_or(|(beneficiaries, _)| !beneficiaries.contains(who)),
			Error::<T>::RewardToSlashed
		);
		let (mut credit, shortfall) = T::Currency::slash(&role_hold(role).into(), who, amount);
		if !shortfall.is_zero() {
			credit.subsume(Self::slash_unbonding(who, role, shortfall));
		}
		let slashed = credit.peek();
		if slashed.is_zero() {
			return Ok(slashed);
		}
		let mut rest = credit;
		if let Some((beneficiaries, share)) = reward {
			let count = BalanceOf::<T>::from(u32::try_from(beneficiaries.len()).unwrap_or(u32::MAX));
			let each = share.mul_floor(slashed).checked_div(&count).unwrap_or_else(Zero::zero);
			for beneficiary in beneficiaries {
				let (to_beneficiary, remaining) = rest.split(each);
				// An account that cannot receive (below the existential deposit, say)
				// forfeits its share to the slash destination.
				rest = match T::Currency::resolve(beneficiary, to_beneficiary) {
					Ok(()) => remaining,
					Err(refused) => remaining.merge(refused),
				};
			}
		}
		T::SlashDestination::on_unbalanced(rest);
		Self::update_reputation(who, |r| r.slashed = r.slashed.saturating_add(1));
		Self::sync_draw_weight(who);
		Self::deposit_event(Event::Slashed { who: who.clone(), role, amount: slashed, reason });
		Ok(slashed)
	}
}
