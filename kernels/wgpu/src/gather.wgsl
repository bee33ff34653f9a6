// Row gather: destination[r] = source[indices[r]], rows of `row_len` elements; and the
// heads' layouts: split [s, t, heads * d] into [s * heads + h, t, d], merge back.
//
// Reduction order: none; a bit copy. The buffers are read as `u32`, so no
// float load or store can touch the bits (a device that flushes subnormals,
// or canonicalises NaNs, on float moves cannot change a gathered value).

struct Params {
    len: u32,
    // The gather's row length, or the heads' head width d.
    row_len: u32,
    // The heads' positions per sequence and heads (unused by the gather).
    positions: u32,
    heads: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> source: array<u32>;
@group(0) @binding(2) var<storage, read> indices: array<u32>;
@group(0) @binding(3) var<storage, read_write> destination: array<u32>;

@compute @workgroup_size(256, 1, 1)
fn gather_rows(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let e = flat_index(id, groups, 256u);
    if e >= params.len {
        return;
    }
    let row = e / params.row_len;
    let column = e % params.row_len;
    destination[e] = source[indices[row] * params.row_len + column];
}

// [s, t, heads * d] -> [s * heads + h, t, d]: destination element e of the blocked layout.
@compute @workgroup_size(256, 1, 1)
fn split_heads(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let e = flat_index(id, groups, 256u);
    if e >= params.len {
        return;
    }
    let d = params.row_len;
    let row = e / d;
    let position = row % params.positions;
    let block = row / params.positions;
    let head = block % params.heads;
    let sequence = block / params.heads;
    destination[e] = source[((sequence * params.positions + position) * params.heads + head) * d + e % d];
}

// [s * heads + h, t, d] -> [s, t, heads * d]: destination element e of the side-by-side layout.
@compute @workgroup_size(256, 1, 1)
fn merge_heads(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let e = flat_index(id, groups, 256u);
    if e >= params.len {
        return;
    }
    let d = params.row_len;
    let row = e / d;
    let head = row % params.heads;
    let token = row / params.heads;
    let position = token % params.positions;
    let sequence = token / params.positions;
    destination[e] = source[((sequence * params.heads + head) * params.positions + position) * d + e % d];
}
