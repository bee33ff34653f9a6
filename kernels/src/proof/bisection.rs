//! The bisection game over a Merkle tree whose shape the job fixes: how a
//! dispute narrows two commitments to the first leaf on which they differ, and
//! which party loses when one breaks the rules.
//!
//! The leaf count of every tree in a dispute follows from the job alone: the
//! unit's step count for the step-level tree, the step graph's operator count
//! for the operator-level tree, and the disputed operator's piece count for its
//! piece tree ([`crate::referee::level_leaves`]). A [`Game`] starts from that
//! count, never from what a party claims. Each round, both parties reveal the
//! children of their current node; a reveal that does not hash to the party's
//! node, or whose shape differs from the expected tree's at that position (a
//! right child where the node is promoted, or none where it has two), is a
//! [`Foul`] by that party, and that party loses. A tree of another shape is
//! caught where the game's path reaches the part that differs; where the game
//! never goes there, it ends on a leaf both shapes have, and what the rest of
//! that tree commits plays no part in the outcome. Otherwise the game descends
//! into the left child if the parties' left children differ, else into the
//! right. After `⌈log₂ n⌉` rounds it stands on the **first** leaf where the
//! trees differ: everything to its left is agreed.
//!
//! A dispute plays this three times: over the step-level tree (to a step), over
//! that step's operator-level tree (to an operator), and over that operator's
//! piece tree (to a piece); the referee then judges the piece. Between levels
//! the chain checks that each party's new root belongs to the leaf the last
//! level ended on ([`crate::referee::bind_step`], [`crate::referee::bind_operator`]).
//! [`Game`] is the chain's state of one level; [`bisect`] plays a whole level
//! between two trees held in memory, for tests and for a party simulating it.

use crate::proof::hash::Digest;
use crate::proof::merkle::{depth, MerkleTree, TreeKind};

codec_types! {
	/// What a party reveals in one round: the children of its current node (the
	/// right one absent where the node is promoted).
	#[derive(Clone, Copy, Debug, PartialEq, Eq)]
	#[cfg_attr(feature = "codec", derive(codec::MaxEncodedLen))]
	pub struct Reveal {
		/// Left child.
		pub left: Digest,
		/// Right child, if the node has two.
		pub right: Option<Digest>,
	}

	/// One level of a dispute in progress: the expected tree's leaf count and
	/// the node both parties stand on.
	#[derive(Clone, Copy, Debug, PartialEq, Eq)]
	#[cfg_attr(feature = "codec", derive(codec::MaxEncodedLen))]
	pub struct Game {
		/// Which node function the tree uses, fixed by the level.
		pub kind: TreeKind,
		/// Leaves of the tree, fixed by the job.
		pub leaf_count: u32,
		/// Level of the current node (0 = leaves; the root is at `⌈log₂ leaf_count⌉`).
		pub level: u32,
		/// Index of the current node within its level.
		pub index: u32,
	}

	/// How a party broke the rules of a round.
	#[derive(Clone, Copy, Debug, PartialEq, Eq)]
	#[cfg_attr(feature = "codec", derive(codec::MaxEncodedLen))]
	pub enum Foul {
		/// The reveal does not hash to the party's current node.
		Inconsistent,
		/// The reveal's shape is not the expected tree's at this node.
		Misshapen,
	}

	/// Why a round could not be played.
	#[derive(Clone, Copy, Debug, PartialEq, Eq)]
	#[cfg_attr(feature = "codec", derive(codec::MaxEncodedLen))]
	pub enum BisectionError {
		/// The first party fouled: it loses.
		First(Foul),
		/// The second party fouled: it loses.
		Second(Foul),
		/// The parties' nodes are equal: there is nothing to bisect.
		NoDisagreement,
		/// The game already stands on a leaf.
		Over,
		/// A tree of no leaves, or more than a `u32` indexes.
		InvalidLeafCount,
	}
}

impl Reveal {
	/// The node these children hash to in a tree of `kind`; `is_root` when that
	/// node is the tree's root.
	pub fn parent(&self, kind: TreeKind, is_root: bool) -> Digest {
		match &self.right {
			Some(right) => kind.node(&self.left, right, is_root),
			None => self.left,
		}
	}
}

/// Which child a round descends into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Child {
	/// The left child (index `2i`).
	Left,
	/// The right child (index `2i + 1`).
	Right,
}

/// Nodes at `level` of a tree of `leaf_count` leaves: `⌈leaf_count / 2^level⌉`.
fn width(leaf_count: u32, level: u32) -> u32 {
	// `level` never exceeds the depth, at most 32; shifting by 32 or more is the single root.
	let span = 1u64.checked_shl(level).unwrap_or(u64::MAX);
	u64::from(leaf_count).div_ceil(span).max(1) as u32
}

impl Game {
	/// A game at the root of a [`TreeKind::Segments`] tree of `leaf_count` leaves.
	pub fn new(leaf_count: u32) -> Result<Self, BisectionError> {
		Self::new_in(TreeKind::Segments, leaf_count)
	}

	/// A game at the root of a tree of `kind` with `leaf_count` leaves.
	pub fn new_in(kind: TreeKind, leaf_count: u32) -> Result<Self, BisectionError> {
		if leaf_count == 0 {
			return Err(BisectionError::InvalidLeafCount);
		}
		Ok(Self { kind, leaf_count, level: depth(leaf_count as usize), index: 0 })
	}

	/// Rounds a game over `leaf_count` leaves takes: `⌈log₂ leaf_count⌉`.
	pub fn rounds(leaf_count: u32) -> u32 {
		depth(leaf_count as usize)
	}

	/// The leaf the game ended on, once it has.
	pub fn leaf(&self) -> Option<u32> {
		(self.level == 0).then_some(self.index)
	}

	/// Whether the current node has a right child in the expected tree.
	pub fn expects_right(&self) -> bool {
		match self.level.checked_sub(1) {
			Some(children) => self.index.saturating_mul(2).saturating_add(1) < width(self.leaf_count, children),
			None => false,
		}
	}

	/// Checks one party's reveal against that party's current node: it hashes to
	/// the node and has the expected tree's shape there.
	pub fn check(&self, node: &Digest, reveal: &Reveal) -> Result<(), Foul> {
		if reveal.right.is_some() != self.expects_right() {
			return Err(Foul::Misshapen);
		}
		let is_root = self.level == depth(self.leaf_count as usize);
		if reveal.parent(self.kind, is_root) != *node {
			return Err(Foul::Inconsistent);
		}
		Ok(())
	}

	/// Plays one round: checks both reveals against the parties' current nodes,
	/// descends, and returns the parties' new nodes (first, second).
	pub fn play(
		&mut self,
		first_node: &Digest,
		second_node: &Digest,
		first: &Reveal,
		second: &Reveal,
	) -> Result<(Digest, Digest), BisectionError> {
		if self.level == 0 {
			return Err(BisectionError::Over);
		}
		if first_node == second_node {
			return Err(BisectionError::NoDisagreement);
		}
		self.check(first_node, first).map_err(BisectionError::First)?;
		self.check(second_node, second).map_err(BisectionError::Second)?;
		let (child, nodes) = if first.left != second.left {
			(Child::Left, (first.left, second.left))
		} else {
			// Both have a right child (the shapes were checked), and the nodes differ.
			match (first.right, second.right) {
				(Some(a), Some(b)) => (Child::Right, (a, b)),
				_ => return Err(BisectionError::NoDisagreement),
			}
		};
		self.level -= 1;
		self.index = self.index.saturating_mul(2).saturating_add(u32::from(child == Child::Right));
		Ok(nodes)
	}
}

/// The outcome of a whole level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
	/// The first leaf on which the trees differ.
	pub leaf: usize,
	/// Rounds played: `⌈log₂ n⌉` of the expected leaf count.
	pub rounds: u32,
}

/// What `tree` reveals for the node at `(level, index)`: its children, as far
/// as the tree has them.
pub fn reveal(tree: &MerkleTree, level: u32, index: u32) -> Reveal {
	let children = level.saturating_sub(1) as usize;
	let left = 2 * index as usize;
	Reveal { left: tree.node(children, left).unwrap_or_default(), right: tree.node(children, left + 1) }
}

/// Plays a whole level between two trees, expecting `leaf_count` leaves: the
/// party whose tree has another shape loses by a [`Foul`]. The trees are of
/// `first`'s kind.
pub fn bisect(leaf_count: u32, first: &MerkleTree, second: &MerkleTree) -> Result<Outcome, BisectionError> {
	let mut game = Game::new_in(first.kind(), leaf_count)?;
	let (mut a, mut b) = (first.root(), second.root());
	let mut rounds = 0u32;
	while game.leaf().is_none() {
		(a, b) = game.play(&a, &b, &reveal(first, game.level, game.index), &reveal(second, game.level, game.index))?;
		rounds += 1;
	}
	if a == b {
		return Err(BisectionError::NoDisagreement);
	}
	Ok(Outcome { leaf: game.index as usize, rounds })
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::proof::merkle::leaf_hash;
	use alloc::vec::Vec;

	fn leaves(n: usize, salt: u8) -> Vec<Digest> {
		(0..n).map(|i| leaf_hash(&[(i as u64).to_le_bytes().as_slice(), &[salt]].concat())).collect()
	}

	#[test]
	fn finds_the_first_differing_leaf_in_depth_rounds() {
		for n in [1usize, 2, 3, 5, 7, 8, 100, 257] {
			let honest = leaves(n, 0);
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
				let outcome = bisect(n as u32, &a, &b).unwrap();
				assert_eq!(outcome, Outcome { leaf: target, rounds: depth(n) });
			}
			let a = MerkleTree::new(honest.clone()).unwrap();
			assert_eq!(bisect(n as u32, &a, &a.clone()), Err(BisectionError::NoDisagreement));
		}
	}

	#[test]
	fn the_expected_shape_matches_the_tree_at_every_node() {
		for kind in [TreeKind::Segments, TreeKind::State] {
			for n in 1u32..=70 {
				let tree = MerkleTree::new_in(kind, leaves(n as usize, 1)).unwrap();
				assert_eq!(tree.height() as u32, Game::rounds(n));
				for level in 1..=Game::rounds(n) {
					for index in 0..width(n, level) {
						let game = Game { kind, leaf_count: n, level, index };
						let node = tree.node(level as usize, index as usize).unwrap();
						assert_eq!(game.check(&node, &reveal(&tree, level, index)), Ok(()), "{kind:?} n {n} level {level} index {index}");
					}
				}
				// A game of the other kind refuses the same reveals at the root.
				if n > 1 {
					let other = if kind == TreeKind::State { TreeKind::Segments } else { TreeKind::State };
					let game = Game::new_in(other, n).unwrap();
					let root = reveal(&tree, game.level, 0);
					assert_eq!(game.check(&tree.root(), &root), Err(Foul::Inconsistent));
				}
			}
		}
	}

	#[test]
	fn a_reveal_that_does_not_hash_to_the_node_loses() {
		let tree = MerkleTree::new(leaves(4, 2)).unwrap();
		let honest = reveal(&tree, 2, 0);
		let forged = Reveal { left: [7; 32], right: honest.right };
		let other_root = [9; 32];
		let (mut first, mut second) = (Game::new(4).unwrap(), Game::new(4).unwrap());
		assert_eq!(first.play(&tree.root(), &other_root, &honest, &forged), Err(BisectionError::Second(Foul::Inconsistent)));
		assert_eq!(second.play(&other_root, &tree.root(), &forged, &honest), Err(BisectionError::First(Foul::Inconsistent)));
	}

	/// A party whose tree has a leaf count other than the job's loses, whichever
	/// side it is on, even though its reveals hash consistently to its own root:
	/// it agrees with the honest tree on every leaf they share, so the game walks
	/// to where the shapes part. (Where the trees differ before that, the game
	/// lands on a leaf both trees have, and the shape of the rest never matters.
	/// A one-leaf level plays no round: its leaf is checked by the binding to the
	/// level below.)
	#[test]
	fn the_party_whose_tree_has_the_wrong_shape_loses() {
		for (expected, wrong) in [(5u32, 4usize), (5, 6), (8, 9), (8, 7), (3, 1), (2, 1), (100, 128), (100, 99), (33, 64)] {
			let honest_leaves = leaves(expected as usize, 3);
			let mut wrong_leaves = leaves(wrong, 4);
			let shared = wrong.min(expected as usize);
			wrong_leaves[..shared].copy_from_slice(&honest_leaves[..shared]);
			let honest = MerkleTree::new(honest_leaves).unwrap();
			let misshapen = MerkleTree::new(wrong_leaves).unwrap();
			let first = bisect(expected, &honest, &misshapen);
			let second = bisect(expected, &misshapen, &honest);
			assert!(matches!(first, Err(BisectionError::Second(_))), "{expected} vs {wrong}: {first:?}");
			assert!(matches!(second, Err(BisectionError::First(_))), "{expected} vs {wrong}: {second:?}");
		}
	}

	#[test]
	fn a_game_over_no_leaves_or_past_its_leaf_is_refused() {
		assert_eq!(Game::new(0), Err(BisectionError::InvalidLeafCount));
		let mut game = Game::new(1).unwrap();
		assert_eq!(game.leaf(), Some(0));
		let reveal = Reveal { left: [1; 32], right: None };
		assert_eq!(game.play(&[1; 32], &[2; 32], &reveal, &reveal), Err(BisectionError::Over));
	}
}
