//! The operators of a training step, each to the contract's exact order:
//! the contraction view and its engine, and the element-wise and reduction
//! operators around it.

pub mod activation;
pub mod bias;
pub mod contraction;
pub mod conv2d;
pub mod gather;
pub mod gemm;
pub mod loss;
pub mod matmul;
pub mod optim;
