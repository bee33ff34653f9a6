//! The bisection game over a Merkle tree: how a dispute narrows two
//! commitments with the same shape to the first leaf on which they differ.
//!
//! Both parties committed roots over the same number of leaves, and the roots
//! differ. Starting at the root, each round both reveal the children of the
//! current node; the referee checks each party's pair against that party's
//! node, then descends into the left child if the parties' left children
//! differ, otherwise into the right. After `⌈log₂ n⌉` rounds (one per level;
//! a promoted node has a single child, which equals it) it stands on the
//! **first** leaf where the trees differ: everything to its left is agreed.
//!
//! A dispute plays this three times: over the step-level tree (to a step),
//! over that step's operator-level tree (to an operator), and over that
//! operator's piece tree (to a chunk); then [`crate::referee`] judges the piece.
//! [`step`] is one round, for the chain; [`bisect`] plays a whole game between
//! two trees held in memory, for tests and for a party simulating the game.

use crate::hash::Digest;
use crate::merkle::{node_hash, MerkleTree};

/// What a party reveals in one round: the children of the current node (the
/// right one absent where the node is promoted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reveal {
	/// Left child.
	pub left: Digest,
	/// Right child, if the node has two.
	pub right: Option<Digest>,
}

impl Reveal {
	/// The node these children hash to.
	pub fn parent(&self) -> Digest {
		match &self.right {
			Some(right) => node_hash(&self.left, right),
			None => self.left,
		}
	}
}

/// Which party broke the game's rules in a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BisectionError {
	/// The first party's reveal does not hash to its node.
	FirstInconsistent,
	/// The second party's reveal does not hash to its node.
	SecondInconsistent,
	/// The parties agree on the node: there is nothing to bisect.
	NoDisagreement,
	/// The trees have different leaf counts.
	ShapeMismatch,
}

/// Which child a round descends into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Child {
	/// The left child (index `2i`).
	Left,
	/// The right child (index `2i + 1`).
	Right,
}

/// One round: checks both reveals against the parties' current nodes and
/// picks the child to descend into.
pub fn step(first_node: &Digest, second_node: &Digest, first: &Reveal, second: &Reveal) -> Result<Child, BisectionError> {
	if first_node == second_node {
		return Err(BisectionError::NoDisagreement);
	}
	if first.parent() != *first_node {
		return Err(BisectionError::FirstInconsistent);
	}
	if second.parent() != *second_node {
		return Err(BisectionError::SecondInconsistent);
	}
	if first.right.is_some() != second.right.is_some() {
		return Err(BisectionError::ShapeMismatch);
	}
	Ok(if first.left != second.left { Child::Left } else { Child::Right })
}

/// The outcome of a whole game.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
	/// The first leaf on which the trees differ.
	pub leaf: usize,
	/// Rounds played: the trees' depth, `⌈log₂ n⌉`.
	pub rounds: u32,
}

/// The reveal of the node at `(level, index)` of `tree` (level 0 = leaves).
fn reveal(tree: &MerkleTree, level: usize, index: usize) -> Option<Reveal> {
	let left = tree.node(level, 2 * index)?;
	Some(Reveal { left, right: tree.node(level, 2 * index + 1) })
}

/// Plays the game between two trees from the root down.
pub fn bisect(first: &MerkleTree, second: &MerkleTree) -> Result<Outcome, BisectionError> {
	if first.len() != second.len() {
		return Err(BisectionError::ShapeMismatch);
	}
	let mut index = 0usize;
	let mut rounds = 0u32;
	for level in (0..first.height()).rev() {
		let first_node = first.node(level + 1, index).ok_or(BisectionError::ShapeMismatch)?;
		let second_node = second.node(level + 1, index).ok_or(BisectionError::ShapeMismatch)?;
		let a = reveal(first, level, index).ok_or(BisectionError::ShapeMismatch)?;
		let b = reveal(second, level, index).ok_or(BisectionError::ShapeMismatch)?;
		index = match step(&first_node, &second_node, &a, &b)? {
			Child::Left => 2 * index,
			Child::Right => 2 * index + 1,
		};
		rounds += 1;
	}
	if first.node(0, index) == second.node(0, index) {
		return Err(BisectionError::NoDisagreement);
	}
	Ok(Outcome { leaf: index, rounds })
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::merkle::{depth, leaf_hash};
	use alloc::vec::Vec;

	#[test]
	fn finds_the_first_differing_leaf_in_depth_rounds() {
		for n in [1usize, 2, 3, 7, 8, 100, 257] {
			let honest: Vec<Digest> = (0..n).map(|i| leaf_hash(&(i as u64).to_le_bytes())).collect();
			for target in [0, n / 2, n - 1] {
				let mut dishonest = honest.clone();
				// Differ at `target` and at every later leaf whose index is odd:
				// the first difference is what the game must find.
				for (i, leaf) in dishonest.iter_mut().enumerate().skip(target) {
					if i == target || i % 2 == 1 {
						leaf[0] ^= 1;
					}
				}
				let a = MerkleTree::new(honest.clone()).unwrap();
				let b = MerkleTree::new(dishonest).unwrap();
				let outcome = bisect(&a, &b).unwrap();
				assert_eq!(outcome, Outcome { leaf: target, rounds: depth(n) });
			}
			let a = MerkleTree::new(honest.clone()).unwrap();
			assert_eq!(bisect(&a, &a.clone()), Err(BisectionError::NoDisagreement));
		}
	}

	#[test]
	fn a_reveal_that_does_not_hash_to_the_node_loses() {
		let leaves: Vec<Digest> = (0..4u8).map(|i| leaf_hash(&[i])).collect();
		let tree = MerkleTree::new(leaves.clone()).unwrap();
		let honest = Reveal { left: tree.node(1, 0).unwrap(), right: tree.node(1, 1) };
		let forged = Reveal { left: [7; 32], right: honest.right };
		let other_root = [9; 32];
		assert_eq!(step(&tree.root(), &other_root, &honest, &forged), Err(BisectionError::SecondInconsistent));
		assert_eq!(step(&other_root, &tree.root(), &forged, &honest), Err(BisectionError::FirstInconsistent));
	}
}
