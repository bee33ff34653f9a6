//! How the staking pallet serves the other pallets: the node registry and slashing.

use crate::{pallet::*, role_hold, BalanceOf, NodeInfo};
use alloc::vec::Vec;
use polkadot_sdk::{
	frame_support::traits::{
		Get,
		fungible::{Balanced, BalancedHold},
		tokens::imbalance::{Imbalance, OnUnbalanced},
	},
	frame_system::pallet_prelude::BlockNumberFor,
	sp_runtime::{
		traits::{Saturating, UniqueSaturatedInto, Zero},
		Perbill,
	},
};
use touchstone_primitives::{
	traits::{ComputeNodes, Slash, SolverCandidate},
	HardwareProfile, HardwareRequirements, Role,
};

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
	/// - reputation: the success ratio `(completed + 1) / (completed + failed + 2)`, less
	///   250 points per slash;
	/// - liveness: how much of the heartbeat timeout is left.
	pub fn solver_score(who: &T::AccountId, node: &NodeInfo<BlockNumberFor<T>>) -> u64 {
		let bond: u128 = Self::bonded(who, Role::Solver).unique_saturated_into();
		let minimum: u128 = T::MinSolverBond::get().unique_saturated_into();
		let saturation = minimum.saturating_mul(STAKE_SATURATION_MULTIPLE.into()).max(1);
		let stake = (bond.min(saturation).saturating_mul(FULL_POINTS.into()) / saturation) as u64;

		let reputation = &node.reputation;
		let successes = u64::from(reputation.completed).saturating_add(1);
		let attempts = successes.saturating_add(u64::from(reputation.failed)).saturating_add(1);
		let reputation_points = successes
			.saturating_mul(FULL_POINTS)
			.checked_div(attempts)
			.unwrap_or_default()
			.saturating_sub(u64::from(reputation.slashed).saturating_mul(POINTS_PER_SLASH));

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

	fn is_eligible_solver(who: &T::AccountId, node: &NodeInfo<BlockNumberFor<T>>) -> bool {
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

impl<T: Config> ComputeNodes<T::AccountId> for Pallet<T> {
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

	fn any_solver_meets(requirements: &HardwareRequirements) -> bool {
		// Bounded: the registry never holds more than `MaxNodes` entries.
		Nodes::<T>::iter_values()
			.any(|node| node.roles.contains(Role::Solver) && requirements.is_met_by(&node.profile))
	}

	fn solver_candidates(limit: u32) -> Vec<SolverCandidate<T::AccountId>> {
		let mut candidates: Vec<_> = Nodes::<T>::iter()
			.filter(|(who, node)| Self::is_eligible_solver(who, node))
			.map(|(who, node)| SolverCandidate {
				score: Self::solver_score(&who, &node),
				account: who,
				profile: node.profile,
			})
			.collect();
		// Map iteration order depends on key hashes; sorting by score, then account,
		// makes the result independent of it.
		candidates.sort_by(|a, b| b.score.cmp(&a.score).then_with(|| a.account.cmp(&b.account)));
		candidates.truncate(limit as usize);
		candidates
	}

	fn node_count() -> u32 {
		Nodes::<T>::count()
	}

	fn max_nodes() -> u32 {
		T::MaxNodes::get()
	}

	fn note_completed(who: &T::AccountId) {
		Self::update_reputation(who, |r| r.completed = r.completed.saturating_add(1));
	}

	fn note_failed(who: &T::AccountId) {
		Self::update_reputation(who, |r| r.failed = r.failed.saturating_add(1));
	}
}

impl<T: Config> Slash<T::AccountId, BalanceOf<T>> for Pallet<T> {
	fn slash(
		who: &T::AccountId,
		role: Role,
		amount: BalanceOf<T>,
		reward: Option<(&T::AccountId, Perbill)>,
	) -> BalanceOf<T> {
		let (mut credit, shortfall) = T::Currency::slash(&role_hold(role).into(), who, amount);
		if !shortfall.is_zero() {
			credit.subsume(Self::slash_unbonding(who, role, shortfall));
		}
		let slashed = credit.peek();
		if slashed.is_zero() {
			return slashed;
		}
		let rest = match reward {
			Some((beneficiary, share)) => {
				let (to_beneficiary, rest) = credit.split(share.mul_floor(slashed));
				// An account that cannot receive (below the existential deposit, say)
				// forfeits its share to the slash destination.
				match T::Currency::resolve(beneficiary, to_beneficiary) {
					Ok(()) => rest,
					Err(refused) => rest.merge(refused),
				}
			},
			None => credit,
		};
		T::SlashDestination::on_unbalanced(rest);
		Self::update_reputation(who, |r| r.slashed = r.slashed.saturating_add(1));
		Self::deposit_event(Event::Slashed { who: who.clone(), role, amount: slashed });
		slashed
	}
}
