// The contract's arithmetic in WGSL: a line-by-line port of `contract.rs` and
// `math.rs`. The Rust dispatcher prepends this file to every other shader.
//
// Reduction order: none here; these are per-element functions. Every function
// is a fixed sequence of correctly rounded f32 `+`, `-`, `*`, integer and bit
// operations, and comparisons, exactly as in the Rust source:
// - every product goes through `mul` (a rounded product, then an integer mask),
//   so no compiler can contract it into a following addition;
// - no `/`, `sqrt`, `inverseSqrt`, `exp`, `log`, `tanh`, `pow` or `fma` builtin;
// - no literal 1 in a factor `1 ± y` of a product: the host passes 1.0 (see
//   `activation_apply`), so no compiler can distribute the product into an FMA;
// - every constant that is not a small exact literal is a bit pattern copied
//   from the Rust source, and no constant expression combines floats (WGSL
//   evaluates abstract-float constant expressions at higher precision).

const SIGN_MASK: u32 = 0x80000000u;
const EXPONENT_MASK: u32 = 0x7F800000u;
const MANTISSA_BITS: u32 = 23u;
// Exponent field of 2^-103, shifted into place: `flush` keeps |v| >= 2^-103.
const FLUSH_FIELD: u32 = 0x0C000000u;
// Exponent field of 2^-52, shifted into place: `quantize_operand` keeps |v| >= 2^-52.
const OPERAND_FIELD: u32 = 0x25800000u;
// Low mantissa bits that `quantize_operand` rounds away (24 - 12).
const OPERAND_DROPPED_BITS: u32 = 12u;

// contract::flush: values below 2^-103 in magnitude, and -0, become +0.
fn flush(value: f32) -> f32 {
    let bits = bitcast<u32>(value);
    let keep = select(0u, 0xFFFFFFFFu, (bits & EXPONENT_MASK) >= FLUSH_FIELD);
    return bitcast<f32>(bits & keep);
}

// contract::mul: the correctly rounded product, flushed.
fn mul(a: f32, b: f32) -> f32 {
    return flush(a * b);
}

// contract::quantize_operand: 12 significant bits, ties to even; below 2^-52 becomes +0.
fn quantize_operand(value: f32) -> f32 {
    let bits = bitcast<u32>(value);
    let magnitude = bits & ~SIGN_MASK;
    let half = (1u << (OPERAND_DROPPED_BITS - 1u)) - 1u;
    let odd = (magnitude >> OPERAND_DROPPED_BITS) & 1u;
    let rounded = (magnitude + half + odd) & ~((1u << OPERAND_DROPPED_BITS) - 1u);
    if rounded >= OPERAND_FIELD {
        return bitcast<f32>(rounded | (bits & SIGN_MASK));
    }
    return 0.0f;
}

// math::abs.
fn abs_bits(value: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(value) & ~SIGN_MASK);
}

// math::with_sign_of.
fn with_sign_of(magnitude: f32, sign_source: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(magnitude) | (bitcast<u32>(sign_source) & SIGN_MASK));
}

// math::unbiased_exponent.
fn unbiased_exponent(value: f32) -> i32 {
    return i32((bitcast<u32>(value) & EXPONENT_MASK) >> MANTISSA_BITS) - 127;
}

// math::mantissa_times_power_of_two.
fn mantissa_times_power_of_two(value: f32, power: i32) -> f32 {
    let field = u32(127 + power) << MANTISSA_BITS;
    return bitcast<f32>((bitcast<u32>(value) & ~EXPONENT_MASK & ~SIGN_MASK) | field);
}

// math::scale_by_power_of_two: adds k to the exponent field (wrapping, as in Rust).
fn scale_by_power_of_two(value: f32, k: i32) -> f32 {
    return bitcast<f32>(u32(bitcast<i32>(bitcast<u32>(value)) + (k << MANTISSA_BITS)));
}

// math::recip: mantissa guess 24/17 - 8/17 m, three Newton steps, rescale, flush.
fn recip(x: f32) -> f32 {
    let mantissa = mantissa_times_power_of_two(x, 0);
    var estimate = bitcast<f32>(0x3FB4B4B5u) - mul(bitcast<f32>(0x3EF0F0F1u), mantissa);
    for (var step = 0u; step < 3u; step += 1u) {
        let residual = 1.0f - mul(mantissa, estimate);
        estimate = estimate + mul(estimate, residual);
    }
    return flush(with_sign_of(scale_by_power_of_two(estimate, -unbiased_exponent(x)), x));
}

// math::split_for_root, as two functions: m in [1, 4) and h with x = m 4^h.
fn root_mantissa(x: f32) -> f32 {
    return mantissa_times_power_of_two(x, unbiased_exponent(x) & 1);
}

fn root_half_exponent(x: f32) -> i32 {
    let exponent = unbiased_exponent(x);
    return (exponent - (exponent & 1)) >> 1u;
}

// math::rsqrt_reduced: Lomont's guess and three Newton steps for 1/sqrt(m), m in [1, 4).
fn rsqrt_reduced(mantissa: f32) -> f32 {
    let half_mantissa = mul(0.5f, mantissa);
    var estimate = bitcast<f32>(0x5F375A86u - (bitcast<u32>(mantissa) >> 1u));
    for (var step = 0u; step < 3u; step += 1u) {
        let residual = 0.5f - mul(mul(half_mantissa, estimate), estimate);
        estimate = estimate + mul(estimate, residual);
    }
    return estimate;
}

// math::rsqrt.
fn rsqrt(x: f32) -> f32 {
    return scale_by_power_of_two(rsqrt_reduced(root_mantissa(x)), -root_half_exponent(x));
}

// math::sqrt; +0 for x <= 0, +inf for +inf.
fn sqrt_pinned(x: f32) -> f32 {
    if bitcast<u32>(x) == 0x7f800000u {
        return x;
    }
    if x > 0.0f {
        let mantissa = root_mantissa(x);
        return scale_by_power_of_two(mul(mantissa, rsqrt_reduced(mantissa)), root_half_exponent(x));
    }
    return 0.0f;
}

// math::round_to_i32: halves away from zero, by truncation after +-1/2.
fn round_to_i32(value: f32) -> i32 {
    if value >= 0.0f {
        return i32(value + 0.5f);
    }
    return i32(value - 0.5f);
}

// math::exp: k = round(x log2 e), r = (x - k LN2_HI) - k LN2_LO, degree-7
// Taylor polynomial by Horner's rule, 2^k into the exponent field, flush.
fn exp_pinned(x: f32) -> f32 {
    // `x != x` is the NaN test; NaN is outside the contract.
    if x != x || x < -80.0f {
        return 0.0f;
    }
    if x > 88.0f {
        return bitcast<f32>(0x7F800000u);
    }
    let k = round_to_i32(mul(x, bitcast<f32>(0x3FB8AA3Bu)));
    let k_float = f32(k);
    let r = (x - mul(k_float, bitcast<f32>(0x3F317200u))) - mul(k_float, bitcast<f32>(0x35BFBE8Eu));
    var polynomial = bitcast<f32>(0x39500D01u);                  // 1/7!
    polynomial = mul(polynomial, r) + bitcast<f32>(0x3AB60B61u); // 1/6!
    polynomial = mul(polynomial, r) + bitcast<f32>(0x3C088889u); // 1/5!
    polynomial = mul(polynomial, r) + bitcast<f32>(0x3D2AAAABu); // 1/4!
    polynomial = mul(polynomial, r) + bitcast<f32>(0x3E2AAAABu); // 1/3!
    polynomial = mul(polynomial, r) + bitcast<f32>(0x3F000000u); // 1/2!
    polynomial = mul(polynomial, r) + 1.0f;
    polynomial = mul(polynomial, r) + 1.0f;
    return flush(scale_by_power_of_two(polynomial, k));
}

// math::log: m in [sqrt2/2, sqrt2), z = (m - 1) recip(m + 1), atanh series
// through z^9, then e LN2_HI + (e LN2_LO + ln m). Zero and negatives give -inf.
fn log_pinned(x: f32) -> f32 {
    if x != x || x <= 0.0f {
        return bitcast<f32>(0xFF800000u);
    }
    var exponent = unbiased_exponent(x);
    var mantissa = mantissa_times_power_of_two(x, 0);
    if mantissa > bitcast<f32>(0x3FB504F3u) {
        mantissa = mantissa_times_power_of_two(x, -1);
        exponent += 1;
    }
    let z = mul(mantissa - 1.0f, recip(mantissa + 1.0f));
    let z_squared = mul(z, z);
    var series = bitcast<f32>(0x3DE38E39u);                       // 1/9
    series = mul(series, z_squared) + bitcast<f32>(0x3E124925u);  // 1/7
    series = mul(series, z_squared) + bitcast<f32>(0x3E4CCCCDu);  // 1/5
    series = mul(series, z_squared) + bitcast<f32>(0x3EAAAAABu);  // 1/3
    let two_z = z + z;
    let log_mantissa = two_z + mul(two_z, mul(z_squared, series));
    let exponent_float = f32(exponent);
    return mul(exponent_float, bitcast<f32>(0x3F317200u))
        + (mul(exponent_float, bitcast<f32>(0x35BFBE8Eu)) + log_mantissa);
}

// math::tanh: Taylor series below 1/2, (1 - e) recip(1 + e) with e = exp(-2|x|)
// below 9, 1 beyond; the sign of x last.
fn tanh_pinned(x: f32) -> f32 {
    let magnitude = abs_bits(x);
    var result = 1.0f;
    if magnitude < 0.5f {
        let square = mul(magnitude, magnitude);
        var series = bitcast<f32>(0xBABED1B2u);
        series = mul(series, square) + bitcast<f32>(0x3B6B69E8u);
        series = mul(series, square) + bitcast<f32>(0xBC11371Bu);
        series = mul(series, square) + bitcast<f32>(0x3CB327A4u);
        series = mul(series, square) + bitcast<f32>(0xBD5D0DD1u);
        series = mul(series, square) + bitcast<f32>(0x3E088889u);
        series = mul(series, square) + bitcast<f32>(0xBEAAAAABu);
        result = magnitude + mul(magnitude, mul(square, series));
    } else if magnitude < 9.0f {
        let decay = exp_pinned(-(magnitude + magnitude));
        result = mul(1.0f - decay, recip(1.0f + decay));
    }
    return with_sign_of(result, x);
}

// activation.rs, per element. `kind`: 0 ReLU, 1 tanh, 2 GELU (tanh approximation).
const SQRT_2_OVER_PI: u32 = 0x3F4C422Au;
const GELU_CUBIC: u32 = 0x3D372713u;
const GELU_CUBIC_SLOPE: u32 = 0x3E095D4Fu;

// `one` is 1.0 passed by the host, never a literal, wherever a product takes `1 ± y`:
// NVIDIA's Vulkan compiler (driver 580, on an H100) rewrote `c · (1 + y)` with a literal 1
// as `fma(c, y, c)`, which rounds once where the contract rounds twice, and so differed
// in the last place in a fifth of GELU's slopes. A 1 it cannot see stops the rewrite.
fn activation_apply(kind: u32, x: f32, one: f32) -> f32 {
    if kind == 0u {
        return select(0.0f, x, x > 0.0f);
    }
    if kind == 1u {
        return tanh_pinned(x);
    }
    let square = mul(x, x);
    let inner = mul(bitcast<f32>(SQRT_2_OVER_PI), x + mul(x, mul(bitcast<f32>(GELU_CUBIC), square)));
    return mul(mul(0.5f, x), one + tanh_pinned(inner));
}

fn activation_grad(kind: u32, x: f32, dy: f32, one: f32) -> f32 {
    if kind == 0u {
        return select(0.0f, dy, x > 0.0f);
    }
    if kind == 1u {
        let t = tanh_pinned(x);
        return mul(dy, one - mul(t, t));
    }
    let square = mul(x, x);
    let inner = mul(bitcast<f32>(SQRT_2_OVER_PI), x + mul(x, mul(bitcast<f32>(GELU_CUBIC), square)));
    let half_x = mul(0.5f, x);
    let t = tanh_pinned(inner);
    let inner_slope = mul(bitcast<f32>(SQRT_2_OVER_PI), one + mul(bitcast<f32>(GELU_CUBIC_SLOPE), square));
    let local = mul(0.5f, one + t) + mul(mul(half_x, one - mul(t, t)), inner_slope);
    return mul(dy, local);
}

// The flat index of invocation `id` in a dispatch laid out by the host as
// `x` workgroups of `width` along X and as many rows along Y as needed.
fn flat_index(id: vec3<u32>, groups: vec3<u32>, width: u32) -> u32 {
    return id.x + id.y * groups.x * width;
}
