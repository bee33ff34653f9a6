// The state root on the device: BLAKE3 over the state's 1 KiB chunks
// (`touchstone_kernels::proof::state_tree`), so that a boundary sends back 32
// bytes instead of the state. `blake3_compress` is BLAKE3's compression
// function, generated fully unrolled by `lib.rs` and appended to this source.

const BLAKE3_CHUNK_START: u32 = 1u;
const BLAKE3_CHUNK_END: u32 = 2u;
const BLAKE3_PARENT: u32 = 4u;

fn blake3_iv() -> array<u32, 8> {
    return array<u32, 8>(
        0x6A09E667u, 0xBB67AE85u, 0x3C6EF372u, 0xA54FF53Au,
        0x510E527Fu, 0x9B05688Cu, 0x1F83D9ABu, 0x5BE0CD19u,
    );
}

fn rotr(x: u32, n: u32) -> u32 {
    return (x >> n) | (x << (32u - n));
}

struct Params {
    // Invocations' items: a tensor's chunks, or the nodes of the level read.
    count: u32,
    // `chunk_cvs`: words in the tensor.
    len: u32,
    // `chunk_cvs`: index of the tensor's first chunk in the state, the chunk counter's base.
    first_chunk: u32,
    // `merge_level`: flags added to a parent's (ROOT when the level read has two nodes).
    flags: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> input: array<u32>;
@group(0) @binding(2) var<storage, read_write> output: array<u32>;

// One invocation per chunk of one tensor (`input`): the chunk's chaining value,
// from its canonical bits (-0 as +0) padded with zeros past the tensor's end,
// written at the chunk's place in the state (`output`).
@compute @workgroup_size(64, 1, 1)
fn chunk_cvs(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let chunk = flat_index(id, groups, 64u);
    if chunk >= params.count {
        return;
    }
    let counter = params.first_chunk + chunk;
    var cv = blake3_iv();
    for (var block = 0u; block < 16u; block++) {
        var m: array<u32, 16>;
        let base = chunk * 256u + block * 16u;
        for (var k = 0u; k < 16u; k++) {
            var word = 0u;
            if base + k < params.len {
                word = input[base + k];
            }
            // Canonical bits: -0 is +0.
            if word == 0x80000000u {
                word = 0u;
            }
            m[k] = word;
        }
        var flags = 0u;
        if block == 0u {
            flags |= BLAKE3_CHUNK_START;
        }
        if block == 15u {
            flags |= BLAKE3_CHUNK_END;
        }
        cv = blake3_compress(cv, m, counter, 0u, 64u, flags);
    }
    let out = counter * 8u;
    for (var i = 0u; i < 8u; i++) {
        output[out + i] = cv[i];
    }
}

// One invocation per node of the level above the `count` nodes of `input`:
// pairs (2i, 2i+1) merged into a parent chaining value (with ROOT in
// `params.flags` at the top), an odd last node promoted.
@compute @workgroup_size(64, 1, 1)
fn merge_level(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let node = flat_index(id, groups, 64u);
    let width = params.count;
    if node >= (width + 1u) / 2u {
        return;
    }
    let left = 2u * node;
    var out: array<u32, 8>;
    if left + 1u < width {
        var m: array<u32, 16>;
        for (var k = 0u; k < 16u; k++) {
            m[k] = input[left * 8u + k];
        }
        out = blake3_compress(blake3_iv(), m, 0u, 0u, 64u, BLAKE3_PARENT | params.flags);
    } else {
        for (var i = 0u; i < 8u; i++) {
            out[i] = input[left * 8u + i];
        }
    }
    for (var i = 0u; i < 8u; i++) {
        output[node * 8u + i] = out[i];
    }
}
