//! What a learning proof commits, and the game that narrows a dispute: hashes
//! over canonical bits, Merkle trees, the operator graph of a step and its
//! pieces, the running sums of reductions, the state-hash chain, the BLAKE3
//! state tree, bisection, and the content addresses of artifacts.

pub mod bisection;
pub mod chain;
pub mod content;
pub mod graph;
pub mod hash;
pub mod merkle;
pub mod reduction;
pub mod segments;
pub mod state_tree;
