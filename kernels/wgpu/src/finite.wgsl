// Rule 7 on the device: sets the flag when any element of `values` is NaN or an
// infinity (exponent field all ones), so that a step needs one read-back of one word,
// not a download of every operator's output.

struct Params {
    len: u32,
    unused_a: u32,
    unused_b: u32,
    unused_c: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> values: array<u32>;
@group(0) @binding(2) var<storage, read_write> flag: array<atomic<u32>>;

@compute @workgroup_size(256, 1, 1)
fn non_finite(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let e = flat_index(id, groups, 256u);
    if e >= params.len {
        return;
    }
    if (values[e] & 0x7f800000u) == 0x7f800000u {
        atomicOr(&flag[0], 1u);
    }
}
