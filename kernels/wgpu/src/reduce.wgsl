// Chunked sums: the bias gradient and the global gradient norm of clipping.
//
// Reduction order (the contract's rule 4): a sequence is cut into 32-wide
// chunks; one invocation sums one chunk sequentially, in index order, from +0
// (`chunk_sums`, `square_chunk_sums`); then one invocation per result folds
// that result's chunk sums sequentially, in chunk order, from +0
// (`fold_chunks`, `finish_norm`). The split into two passes changes no
// operation's operands or order, only which invocation performs it. No
// atomics, no subgroup operations, no tree.

struct Params {
    // Elements per sequence (bias: outer * inner; norm: the tensor's length).
    len: u32,
    // Number of sequences (bias: channels; norm: tensors, in `finish_norm`).
    channels: u32,
    // Bias layout's inner extent.
    inner: u32,
    // Norm: where this tensor's chunk sums start in `scratch`.
    offset: u32,
    // finish_norm: max_norm as bits.
    max_norm: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> values: array<f32>;
@group(0) @binding(2) var<storage, read_write> scratch: array<f32>;
@group(0) @binding(3) var<storage, read_write> result: array<f32>;
@group(0) @binding(4) var<storage, read> chunk_counts: array<u32>;

const CHUNK: u32 = 32u;

// Bias gradient, pass 1: scratch[chunk * channels + c] = sum over the chunk's
// positions s of values[(o, c, i)] with (o, i) = (s / inner, s % inner).
@compute @workgroup_size(256, 1, 1)
fn chunk_sums(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let slot = flat_index(id, groups, 256u);
    let chunks = (params.len + CHUNK - 1u) / CHUNK;
    if slot >= chunks * params.channels {
        return;
    }
    let chunk = slot / params.channels;
    let channel = slot % params.channels;
    let start = chunk * CHUNK;
    let end = min(start + CHUNK, params.len);
    var sum = 0.0f;
    for (var s = start; s < end; s += 1u) {
        let outer = s / params.inner;
        let inner = s % params.inner;
        sum = sum + values[(outer * params.channels + channel) * params.inner + inner];
    }
    scratch[slot] = sum;
}

// Bias gradient, pass 2: result[c] = fold of scratch[chunk * channels + c] over chunks.
@compute @workgroup_size(64, 1, 1)
fn fold_chunks(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let channel = flat_index(id, groups, 64u);
    if channel >= params.channels {
        return;
    }
    let chunks = (params.len + CHUNK - 1u) / CHUNK;
    var total = 0.0f;
    for (var chunk = 0u; chunk < chunks; chunk += 1u) {
        total = total + scratch[chunk * params.channels + channel];
    }
    result[channel] = total;
}

// Norm, pass 1 for one tensor: scratch[offset + chunk] = sum of g (x) g over the chunk.
@compute @workgroup_size(256, 1, 1)
fn square_chunk_sums(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let chunk = flat_index(id, groups, 256u);
    let chunks = (params.len + CHUNK - 1u) / CHUNK;
    if chunk >= chunks {
        return;
    }
    let start = chunk * CHUNK;
    let end = min(start + CHUNK, params.len);
    var sum = 0.0f;
    for (var e = start; e < end; e += 1u) {
        sum = sum + mul(values[e], values[e]);
    }
    scratch[params.offset + chunk] = sum;
}

// Norm, pass 2 (one invocation): fold each tensor's chunk sums in chunk
// order, fold the tensors' sums in tensor order, norm = sqrt(total); then
// result[0] = norm and result[1] = max_norm (x) recip(norm + 1e-6).
@compute @workgroup_size(1, 1, 1)
fn finish_norm() {
    var total = 0.0f;
    var at = 0u;
    for (var tensor = 0u; tensor < params.channels; tensor += 1u) {
        var sum = 0.0f;
        for (var chunk = 0u; chunk < chunk_counts[tensor]; chunk += 1u) {
            sum = sum + scratch[at];
            at += 1u;
        }
        total = total + sum;
    }
    let norm = sqrt_pinned(total);
    result[0] = norm;
    result[1] = mul(bitcast<f32>(params.max_norm), recip(norm + bitcast<f32>(0x358637BDu)));
}
