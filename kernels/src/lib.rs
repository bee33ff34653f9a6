//! Reproducible training kernels (being written).
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod contract;
pub mod error;
pub mod math;
pub mod hash;
