//! Philox 4×32-10 against Random123's published known-answer vectors, and the stream conventions.

use touchstone_kernels::arith::rng::uniform_from_word;
use touchstone_kernels::{philox4x32_10, RandomStream};

#[test]
fn philox_matches_random123_known_answers() {
	// From Random123's kat_vectors: counter (4 words), key (2 words), expected output.
	let vectors: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
		([0, 0, 0, 0], [0, 0], [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]),
		([0xffff_ffff; 4], [0xffff_ffff; 2], [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]),
		(
			[0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
			[0xa409_3822, 0x299f_31d0],
			[0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1],
		),
	];
	for (counter, key, expected) in vectors {
		assert_eq!(philox4x32_10(counter, key), expected, "counter {counter:08x?} key {key:08x?}");
	}
}

#[test]
fn stream_words_follow_the_counter_layout() {
	let seed = 0x0123_4567_89ab_cdef_u64;
	let stream = RandomStream::new(seed, 0x0000_0005_0000_0009);
	let block = philox4x32_10([3, 0, 9, 5], [0x89ab_cdef, 0x0123_4567]);
	assert_eq!(stream.block(3), block);
	for lane in 0..4 {
		assert_eq!(stream.word(12 + lane), block[lane as usize]);
	}
	assert_ne!(RandomStream::new(seed, 1).block(0), RandomStream::new(seed, 2).block(0));
	assert_ne!(RandomStream::new(1, 0).block(0), RandomStream::new(2, 0).block(0));
}

#[test]
fn uniform_floats_are_exact_and_in_range() {
	assert_eq!(uniform_from_word(0), 0.0);
	assert_eq!(uniform_from_word(u32::MAX), 1.0 - 2f32.powi(-24));
	assert_eq!(uniform_from_word(1 << 8), 2f32.powi(-24));
	let stream = RandomStream::new(42, 7);
	let mut values = vec![0.0; 1001];
	stream.fill_uniform(-0.25, 0.25, &mut values);
	for (index, &value) in values.iter().enumerate() {
		assert!((-0.25..=0.25).contains(&value));
		let expected = -0.25 + touchstone_kernels::arith::mul(0.5, stream.uniform(index as u64));
		assert_eq!(value.to_bits(), expected.to_bits());
	}
	let mean = values.iter().map(|&v| f64::from(v)).sum::<f64>() / values.len() as f64;
	assert!(mean.abs() < 0.02, "mean {mean}");
}

#[test]
fn permutations_are_permutations_and_depend_on_the_stream() {
	let first = RandomStream::new(42, 0).permutation(1000);
	let mut sorted = first.clone();
	sorted.sort_unstable();
	assert_eq!(sorted, (0..1000).collect::<Vec<u32>>());
	assert_eq!(first, RandomStream::new(42, 0).permutation(1000));
	assert_ne!(first, RandomStream::new(42, 1).permutation(1000));
	assert!(RandomStream::new(42, 0).permutation(0).is_empty());
	assert_eq!(RandomStream::new(42, 0).permutation(1), vec![0]);
	// The documented Fisher–Yates draw: position n−1 swaps with (word₀ · n) >> 32.
	let stream = RandomStream::new(9, 3);
	let order = stream.permutation(2);
	let pick = (u64::from(stream.word(0)) * 2) >> 32;
	assert_eq!(order, if pick == 1 { vec![0, 1] } else { vec![1, 0] });
}

/// The batch order's random-access permutation is a permutation of `0..n` for
/// every `n` (powers of two, one past them, and odd sizes), different per
/// stream, and spreads the positions: no position keeps its place far more
/// often than chance.
#[test]
fn the_feistel_permutation_permutes_every_size() {
	use touchstone_kernels::arith::rng::RandomPermutation;
	for n in (0u32..=130).chain([255, 256, 257, 1023, 1024, 1025, 1797, 60_000]) {
		let permutation = RandomPermutation::new(RandomStream::new(7, 2 << 32), n);
		let mut seen = vec![false; n as usize];
		for index in 0..n {
			let value = permutation.get(index).unwrap();
			assert!(!seen[value as usize], "n {n}: {value} twice");
			seen[value as usize] = true;
		}
		assert_eq!(permutation.get(n), None);
	}
	let n = 4096u32;
	let a = RandomPermutation::new(RandomStream::new(7, 2 << 32), n);
	let b = RandomPermutation::new(RandomStream::new(7, (2 << 32) + 1), n);
	let moved = (0..n).filter(|&i| a.get(i) != b.get(i)).count();
	assert!(moved > 4000, "two epochs share {} positions of {n}", n as usize - moved);
	let fixed = (0..n).filter(|&i| a.get(i) == Some(i)).count();
	assert!(fixed < 20, "{fixed} fixed points of {n} (about one expected)");
}

/// One element of a permutation of millions is drawn alone, cycle-walking
/// included (2²¹ + 1 is just past a power of two, so about half of all values
/// walk).
#[test]
fn the_feistel_permutation_draws_one_element_without_the_rest() {
	use touchstone_kernels::arith::rng::RandomPermutation;
	let large = RandomPermutation::new(RandomStream::new(42, 2 << 32), (1 << 21) + 1);
	let values: Vec<u32> = (0..128).map(|i| large.get(i * 16_381).unwrap()).collect();
	assert!(values.iter().all(|&v| v <= 1 << 21));
	let distinct: std::collections::BTreeSet<u32> = values.iter().copied().collect();
	assert_eq!(distinct.len(), values.len());
}

/// Box–Muller draws have the standard normal's moments and mass within one and two
/// deviations; a draw read alone equals the same draw of a filled slice, and scaling is
/// `mean + deviation ⊗ z`; the extreme words give finite draws (u = 1 gives exactly 0).
#[test]
fn normal_draws_are_standard_normal_and_random_access() {
	use touchstone_kernels::arith::mul;
	use touchstone_kernels::arith::rng::normal_pair_from_words;
	let stream = RandomStream::new(42, 3);
	let count = 200_000u64;
	let draws: Vec<f64> = (0..count).map(|index| f64::from(stream.normal(index))).collect();
	let mean = draws.iter().sum::<f64>() / count as f64;
	let variance = draws.iter().map(|z| (z - mean) * (z - mean)).sum::<f64>() / count as f64;
	let within = |bound: f64| draws.iter().filter(|z| z.abs() < bound).count() as f64 / count as f64;
	assert!(mean.abs() < 0.01, "mean {mean}");
	assert!((variance - 1.0).abs() < 0.02, "variance {variance}");
	assert!((within(1.0) - 0.6827).abs() < 0.005, "within one deviation: {}", within(1.0));
	assert!((within(2.0) - 0.9545).abs() < 0.003, "within two deviations: {}", within(2.0));

	let mut filled = vec![0.0f32; 37];
	stream.fill_normal(0.0, 0.02, &mut filled);
	for (index, &value) in filled.iter().enumerate() {
		assert_eq!(value.to_bits(), (0.0 + mul(0.02, stream.normal(index as u64))).to_bits(), "draw {index}");
	}
	assert_eq!(normal_pair_from_words(0, 0x1234_5678), (0.0, 0.0));
	let (far, other) = normal_pair_from_words(u32::MAX, 0);
	assert!(far.is_finite() && other.is_finite() && far.abs() > 5.0, "{far} {other}");
}
