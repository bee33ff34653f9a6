//! Executing operators: the [`Backend`](backend::Backend) trait every device
//! implements, the CPU reference backend, and the threads it computes on.

pub mod backend;
pub mod cpu;
pub mod graph;
pub mod parallel;
