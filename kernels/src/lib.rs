//! Reproducible training kernels (placeholder, being written).
#![cfg_attr(not(feature = "std"), no_std)]
