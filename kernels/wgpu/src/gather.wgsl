// Row gather: destination[r] = source[indices[r]], rows of `row_len` elements.
//
// Reduction order: none; a bit copy. The buffers are read as `u32`, so no
// float load or store can touch the bits (a device that flushes subnormals,
// or canonicalises NaNs, on float moves cannot change a gathered value).

struct Params {
    len: u32,
    row_len: u32,
    _pad0: u32,
    _pad1: u32,
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
