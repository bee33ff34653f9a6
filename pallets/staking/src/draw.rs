//! The verifier draw: a Fenwick (binary indexed) sum tree over verifier bonds.
//!
//! Every verifier bonded at least at the minimum holds a slot whose weight is its verifier
//! bond. Tree node `i` (from 1) holds the sum of the slots `(i - lowbit(i), i]`, so a
//! weight changes with `log2 n` writes, and a pick, "the slot under a uniform point of
//! the total", descends the tree with `log2 n` reads. No draw scans or sorts the registry.
//!
//! Only eligible weight is drawn from. A verifier whose heartbeat lapses leaves the tree in
//! the hook of the block it lapses in ([`Lapses`]) and comes back with its next heartbeat.
//! A draw is made without replacement, and the accounts it excludes (the solver, the
//! submitter) are taken out before the first pick: each pick descends the tree less the
//! weights already taken out, so no pick lands on a drawn, excluded or lapsed slot and
//! none is wasted. With at least `count` eligible verifiers a draw always fills.

use crate::pallet::*;
use alloc::vec::Vec;
use codec::Encode;
use polkadot_sdk::{
	frame_support::traits::Get,
	sp_io::hashing::blake2_256,
	sp_runtime::{traits::UniqueSaturatedInto, Weight},
};
use touchstone_primitives::{traits::VerifierDraw, Role};

impl<T: Config> Pallet<T> {
	/// Slots the tree has room for: the capacity it was built for ([`DrawCapacity`]), or,
	/// before it is first written, `MaxNodes` rounded up to a power of two. The root node
	/// `capacity` holds the total.
	pub fn draw_capacity() -> u32 {
		DrawCapacity::<T>::get().unwrap_or_else(Self::capacity_for_max_nodes)
	}

	/// `MaxNodes` rounded up to a power of two: the capacity a tree built now gets.
	pub(crate) fn capacity_for_max_nodes() -> u32 {
		T::MaxNodes::get().max(1).checked_next_power_of_two().unwrap_or(1 << 31)
	}

	/// The weight `who` should have in the draw: its verifier bond if it lists the role, is
	/// online, and the bond meets the minimum (a slashed bond below it does not count until
	/// topped up).
	fn draw_weight_of(who: &T::AccountId) -> u128 {
		let listed = Nodes::<T>::get(who)
			.is_some_and(|node| node.roles.contains(Role::Verifier) && Self::is_node_online(&node));
		let bond = Self::bonded(who, Role::Verifier);
		if listed && bond >= Self::min_bond(Role::Verifier) {
			bond.unique_saturated_into()
		} else {
			0
		}
	}

	/// Brings `who`'s slot in the draw in line with its verifier bond: called after every
	/// change to a verifier bond or role.
	pub(crate) fn sync_draw_weight(who: &T::AccountId) {
		let weight = Self::draw_weight_of(who);
		match DrawSlotOf::<T>::get(who) {
			Some(slot) => {
				let old = DrawSlots::<T>::get(slot).map_or(0, |(_, old)| old);
				if old == weight {
					return;
				}
				Self::tree_add(slot, weight.saturating_sub(old), old.saturating_sub(weight));
				if weight == 0 {
					DrawSlots::<T>::remove(slot);
					DrawSlotOf::<T>::remove(who);
					// Cannot overflow: a freed slot was one of at most `MaxNodes` in use.
					let _ = FreeDrawSlots::<T>::try_mutate(|free| free.try_push(slot));
				} else {
					DrawSlots::<T>::insert(slot, (who.clone(), weight));
				}
			},
			None if weight > 0 => {
				let slot = match FreeDrawSlots::<T>::mutate(|free| free.pop()) {
					Some(slot) => slot,
					None => {
						let slot = DrawSlotsUsed::<T>::get().saturating_add(1);
						// Registered verifiers are at most `MaxNodes`, so a slot is always free.
						if slot > Self::draw_capacity() {
							return;
						}
						DrawSlotsUsed::<T>::put(slot);
						slot
					},
				};
				DrawSlotOf::<T>::insert(who, slot);
				DrawSlots::<T>::insert(slot, (who.clone(), weight));
				Self::tree_add(slot, weight, 0);
			},
			None => {},
		}
	}

	/// Adds `up` and takes `down` from slot `slot`'s weight in the tree, recording the
	/// capacity the tree is built for on its first write.
	fn tree_add(slot: u32, up: u128, down: u128) {
		let capacity = Self::draw_capacity();
		if DrawCapacity::<T>::get().is_none() {
			DrawCapacity::<T>::put(capacity);
		}
		let mut node = slot;
		while node > 0 && node <= capacity {
			DrawTree::<T>::mutate(node, |sum| *sum = sum.saturating_add(up).saturating_sub(down));
			node = node.saturating_add(node & node.wrapping_neg());
		}
	}

	/// The total weight in the draw.
	pub fn draw_total() -> u128 {
		DrawTree::<T>::get(Self::draw_capacity())
	}

	/// The slot under `point`, a value below the total less the `removed` slots' weights:
	/// the smallest slot whose prefix sum, without them, exceeds it. A removed slot is never
	/// returned: its weight is not in any sum the descent compares.
	fn slot_at(mut point: u128, removed: &[(u32, u128)]) -> u32 {
		let capacity = Self::draw_capacity();
		let mut position = 0u32;
		let mut step = capacity;
		while step > 0 {
			let next = position.saturating_add(step);
			if next <= capacity {
				// Node `next` sums the slots `(position, next]`, `step` of them.
				let taken: u128 = removed
					.iter()
					.filter(|(slot, _)| *slot > position && *slot <= next)
					.fold(0u128, |sum, (_, weight)| sum.saturating_add(*weight));
				let sum = DrawTree::<T>::get(next).saturating_sub(taken);
				if sum <= point {
					position = next;
					point = point.saturating_sub(sum);
				}
			}
			step >>= 1;
		}
		position.saturating_add(1)
	}

	/// Checks the draw: every slot's weight is its account's, every drawable verifier has
	/// a slot, and the tree holds the sums of the slots.
	#[cfg(any(feature = "try-runtime", feature = "std"))]
	pub(crate) fn draw_try_state() -> Result<(), polkadot_sdk::sp_runtime::TryRuntimeError> {
		use polkadot_sdk::frame_support::ensure;
		let capacity = Self::draw_capacity();
		// A capacity other than `MaxNodes`' means an upgrade changed it without the
		// migration that rebuilds the tree.
		ensure!(capacity == Self::capacity_for_max_nodes(), "the draw tree is built for another MaxNodes");
		let mut weights = alloc::vec![0u128; capacity as usize + 1];
		for (slot, (who, weight)) in DrawSlots::<T>::iter() {
			ensure!(slot >= 1 && slot <= capacity, "draw slot outside the tree");
			ensure!(DrawSlotOf::<T>::get(&who) == Some(slot), "draw slot not indexed by its account");
			ensure!(weight > 0 && weight == Self::draw_weight_of(&who), "draw weight differs from the online verifier bond");
			weights[slot as usize] = weight;
		}
		for (who, slot) in DrawSlotOf::<T>::iter() {
			ensure!(DrawSlots::<T>::get(slot).is_some_and(|(owner, _)| owner == who), "draw index names a foreign slot");
		}
		for (who, _) in Nodes::<T>::iter() {
			ensure!(
				Self::draw_weight_of(&who) == 0 || DrawSlotOf::<T>::contains_key(&who),
				"bonded verifier missing from the draw"
			);
		}
		for node in 1..=capacity {
			let low = node & node.wrapping_neg();
			let sum = ((node - low + 1)..=node).fold(0u128, |acc, slot| acc.saturating_add(weights[slot as usize]));
			ensure!(DrawTree::<T>::get(node) == sum, "draw tree node differs from its slots' sum");
		}
		Ok(())
	}
}

impl<T: Config> VerifierDraw<T::AccountId> for Pallet<T> {
	fn draw_verifiers(seed: &[u8; 32], count: u32, exclude: &[T::AccountId]) -> Vec<T::AccountId> {
		let mut drawn: Vec<T::AccountId> = Vec::new();
		// The slots out of this draw, with their weights: excluded accounts first, then
		// each slot as it is picked.
		let mut removed: Vec<(u32, u128)> = Vec::new();
		for slot in exclude.iter().filter_map(|who| DrawSlotOf::<T>::get(who)) {
			if let Some((_, weight)) = DrawSlots::<T>::get(slot).filter(|_| !removed.iter().any(|(s, _)| *s == slot)) {
				removed.push((slot, weight));
			}
		}
		let mut remaining = removed.iter().fold(Self::draw_total(), |total, (_, weight)| total.saturating_sub(*weight));
		// Every pick takes a slot out, so the picks are bounded by the slots; the attempt
		// budget bounds them all the same, as the weight charged does.
		for attempt in 0..Self::max_attempts(count) {
			if drawn.len() as u32 >= count || remaining == 0 {
				break;
			}
			let pick = blake2_256(&(b"touchstone/draw", seed, attempt).encode());
			let mut point = [0u8; 16];
			point.copy_from_slice(&pick[..16]);
			let slot = Self::slot_at(u128::from_le_bytes(point) % remaining, &removed);
			let Some((who, weight)) = DrawSlots::<T>::get(slot) else { break };
			removed.push((slot, weight));
			remaining = remaining.saturating_sub(weight);
			// A verifier that lapsed in this very block, before the hook took it out.
			if Nodes::<T>::get(&who).is_some_and(|node| Self::is_node_online(&node)) {
				drawn.push(who);
			}
		}
		drawn
	}

	fn draw_weight(count: u32) -> Weight {
		// Per pick: the tree's root and one node per level, the slot, and the node record.
		let levels = Self::capacity_for_max_nodes().trailing_zeros().saturating_add(1);
		let reads = u64::from(Self::max_attempts(count)).saturating_mul(u64::from(levels).saturating_add(3));
		T::DbWeight::get().reads(reads).saturating_add(Weight::from_parts(
			// Hashing and comparing, per pick, measured well under 10 µs.
			10_000_000u64.saturating_mul(u64::from(Self::max_attempts(count))),
			0,
		))
	}
}

