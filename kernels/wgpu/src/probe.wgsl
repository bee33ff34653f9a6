// The adapter conformance probe: the pinned functions and the two hazards of
// the contract, evaluated element-wise so that the host can compare every bit
// with the CPU reference before it trusts the adapter.
//
// Reduction order: none; one invocation per element. `function` selects:
//   0 recip, 1 rsqrt, 2 sqrt, 3 log, 4 exp, 5 tanh (the pinned math);
//   6 mul(x, y) + z: a product that must be rounded on its own before the
//     add; a driver that contracts it into an FMA (defeating the integer
//     mask) gives a different result on cancellation-heavy triples;
//   7 quantize(x) * quantize(y) + z, with the product left bare, as in the
//     contraction loop: exact products, so fused and unfused agree, and tiny
//     operands test that no value below 2^-103 survives.

struct Params {
    len: u32,
    function: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read> z: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256, 1, 1)
fn probe(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let e = flat_index(id, groups, 256u);
    if e >= params.len {
        return;
    }
    let a = x[e];
    var result = 0.0f;
    switch params.function {
        case 0u: { result = recip(a); }
        case 1u: { result = rsqrt(a); }
        case 2u: { result = sqrt_pinned(a); }
        case 3u: { result = log_pinned(a); }
        case 4u: { result = exp_pinned(a); }
        case 5u: { result = tanh_pinned(a); }
        case 6u: { result = mul(a, y[e]) + z[e]; }
        default: { result = quantize_operand(a) * quantize_operand(y[e]) + z[e]; }
    }
    out[e] = result;
}
