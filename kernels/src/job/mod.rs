//! A training job: its model and hyper-parameters, its data, the training
//! loop over any backend that produces the learning proof, and (with `std`)
//! checkpoints and tolerance mode's distances.

#[cfg(feature = "std")]
pub mod checkpoint;
pub mod data;
#[cfg(feature = "std")]
pub mod distance;
pub mod fault;
pub mod model;
pub mod text;
pub mod trace;
pub mod training_data;
pub mod transformer;
