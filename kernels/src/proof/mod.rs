//! What a learning proof commits, and the game that narrows a dispute: hashes
//! over canonical bits, Merkle trees, the operator graph of a step and its
//! pieces, the running sums of reductions, the state-hash chain, the BLAKE3
//! state tree, and bisection.

pub mod bisection;
pub mod chain;
pub mod graph;
pub mod hash;
pub mod merkle;
pub mod reduction;
pub mod segments;
pub mod state_tree;
