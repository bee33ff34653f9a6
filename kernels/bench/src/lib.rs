//! The kernels benchmark lives in `benches/kernels.rs`; run it with `kernels/scripts/bench.sh`.
