// The transformer's row operators: LayerNorm / RMSNorm forward and backward (see
// `norm.rs`) and the causal softmax of attention, forward and backward (see
// `attention.rs`).
//
// Reduction order: one invocation per row. Every row sum is rule 4's chunked sum in
// column order: 32-wide chunks, each sequential from +0, chunk sums folded from +0.
// The gains' and biases' gradients are column sums, one invocation per column, over
// the rows in row order, chunked the same way. A row's maximum is exact and order-free.
// r and x-hat are recomputed from x in the backward, as the reference does. No
// atomics, no subgroup operations, no builtin exp, sqrt or division.
//
// Also the embedding's backward, a scatter-add without atomics: the host sorts the
// lookups by table row (a stable counting sort, `rows_by_index`), and one invocation per
// table element sums that row's lookups in row order, chunked as above.

struct Params {
    // Rows: batch x positions for a norm, blocks x positions for the softmax.
    rows: u32,
    // Elements per row: the width for a norm, the positions for the softmax.
    width: u32,
    // 0 LayerNorm, 1 RMSNorm.
    mode: u32,
    // recip(width) as bits, derived on the host.
    k: u32,
    // The norm's epsilon, or the softmax's scale, as bits.
    scalar: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// x (norms), scores or probs (softmax).
@group(0) @binding(1) var<storage, read> in_a: array<f32>;
// gamma (norms), probs_grad (softmax).
@group(0) @binding(2) var<storage, read> in_b: array<f32>;
// beta (norm forward), dy (norm backward).
@group(0) @binding(3) var<storage, read> in_c: array<f32>;
// y, dx, probs or scores_grad.
@group(0) @binding(4) var<storage, read_write> out_a: array<f32>;
// x-hat, then dy (x) x-hat (norm backward).
@group(0) @binding(5) var<storage, read_write> out_b: array<f32>;
// d-gamma.
@group(0) @binding(6) var<storage, read_write> out_c: array<f32>;
// d-beta.
@group(0) @binding(7) var<storage, read_write> out_d: array<f32>;

// The lookups of each table row: rows[starts[v]..starts[v + 1]] (scatter-add).
@group(0) @binding(8) var<storage, read> lookup_starts: array<u32>;
@group(0) @binding(9) var<storage, read> lookup_rows: array<u32>;

const CHUNK: u32 = 32u;
const LAYER: u32 = 0u;

// Writes x-hat of the row at `base` into out_a (into_b false) or out_b (into_b true)
// and returns r, by `normalise_row`'s sequence.
fn normalise_row(base: u32, into_b: bool) -> f32 {
    let width = params.width;
    let k = bitcast<f32>(params.k);
    let epsilon = bitcast<f32>(params.scalar);
    var total = 0.0f;
    var chunk_sum = 0.0f;
    if params.mode == LAYER {
        for (var j = 0u; j < width; j += 1u) {
            chunk_sum = chunk_sum + in_a[base + j];
            if (j + 1u) % CHUNK == 0u {
                total = total + chunk_sum;
                chunk_sum = 0.0f;
            }
        }
        if width % CHUNK != 0u {
            total = total + chunk_sum;
        }
        let mean = mul(total, k);
        total = 0.0f;
        chunk_sum = 0.0f;
        for (var j = 0u; j < width; j += 1u) {
            let centred = in_a[base + j] - mean;
            if into_b {
                out_b[base + j] = centred;
            } else {
                out_a[base + j] = centred;
            }
            chunk_sum = chunk_sum + mul(centred, centred);
            if (j + 1u) % CHUNK == 0u {
                total = total + chunk_sum;
                chunk_sum = 0.0f;
            }
        }
        if width % CHUNK != 0u {
            total = total + chunk_sum;
        }
        let r = rsqrt(mul(total, k) + epsilon);
        for (var j = 0u; j < width; j += 1u) {
            if into_b {
                out_b[base + j] = mul(out_b[base + j], r);
            } else {
                out_a[base + j] = mul(out_a[base + j], r);
            }
        }
        return r;
    }
    for (var j = 0u; j < width; j += 1u) {
        let value = in_a[base + j];
        chunk_sum = chunk_sum + mul(value, value);
        if (j + 1u) % CHUNK == 0u {
            total = total + chunk_sum;
            chunk_sum = 0.0f;
        }
    }
    if width % CHUNK != 0u {
        total = total + chunk_sum;
    }
    let r = rsqrt(mul(total, k) + epsilon);
    for (var j = 0u; j < width; j += 1u) {
        let scaled = mul(in_a[base + j], r);
        if into_b {
            out_b[base + j] = scaled;
        } else {
            out_a[base + j] = scaled;
        }
    }
    return r;
}

// y = x-hat (x) gamma (+ beta): in_a x, in_b gamma, in_c beta (gamma again for RMSNorm), out_a y.
@compute @workgroup_size(64, 1, 1)
fn norm_forward(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let row = flat_index(id, groups, 64u);
    if row >= params.rows {
        return;
    }
    let base = row * params.width;
    normalise_row(base, false);
    for (var j = 0u; j < params.width; j += 1u) {
        let scaled = mul(out_a[base + j], in_b[j]);
        if params.mode == LAYER {
            out_a[base + j] = scaled + in_c[j];
        } else {
            out_a[base + j] = scaled;
        }
    }
}

// dx per row: in_a x, in_b gamma, in_c dy, out_a dx, out_b x-hat and then dy (x) x-hat.
@compute @workgroup_size(64, 1, 1)
fn norm_backward_rows(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let row = flat_index(id, groups, 64u);
    if row >= params.rows {
        return;
    }
    let width = params.width;
    let k = bitcast<f32>(params.k);
    let base = row * width;
    let r = normalise_row(base, true);
    var b_total = 0.0f;
    var b_chunk = 0.0f;
    var a_total = 0.0f;
    var a_chunk = 0.0f;
    for (var j = 0u; j < width; j += 1u) {
        let g = mul(in_c[base + j], in_b[j]);
        b_chunk = b_chunk + mul(g, out_b[base + j]);
        a_chunk = a_chunk + g;
        if (j + 1u) % CHUNK == 0u {
            b_total = b_total + b_chunk;
            b_chunk = 0.0f;
            a_total = a_total + a_chunk;
            a_chunk = 0.0f;
        }
    }
    if width % CHUNK != 0u {
        b_total = b_total + b_chunk;
        a_total = a_total + a_chunk;
    }
    let b = mul(b_total, k);
    let a = mul(a_total, k);
    for (var j = 0u; j < width; j += 1u) {
        let g = mul(in_c[base + j], in_b[j]);
        let x_hat = out_b[base + j];
        var centred = g;
        if params.mode == LAYER {
            centred = g - a;
        }
        out_a[base + j] = mul(r, centred - mul(x_hat, b));
        out_b[base + j] = mul(in_c[base + j], x_hat);
    }
}

// Column sums over rows: in_c dy, out_b dy (x) x-hat, out_c d-gamma, out_d d-beta (LayerNorm).
@compute @workgroup_size(64, 1, 1)
fn norm_backward_columns(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let column = flat_index(id, groups, 64u);
    if column >= params.width {
        return;
    }
    var gamma_total = 0.0f;
    var gamma_chunk = 0.0f;
    var beta_total = 0.0f;
    var beta_chunk = 0.0f;
    for (var row = 0u; row < params.rows; row += 1u) {
        let index = row * params.width + column;
        gamma_chunk = gamma_chunk + out_b[index];
        beta_chunk = beta_chunk + in_c[index];
        if (row + 1u) % CHUNK == 0u {
            gamma_total = gamma_total + gamma_chunk;
            gamma_chunk = 0.0f;
            beta_total = beta_total + beta_chunk;
            beta_chunk = 0.0f;
        }
    }
    if params.rows % CHUNK != 0u {
        gamma_total = gamma_total + gamma_chunk;
        beta_total = beta_total + beta_chunk;
    }
    out_c[column] = gamma_total;
    if params.mode == LAYER {
        out_d[column] = beta_total;
    }
}

// Causal softmax per row: in_a scores, out_a probs. Row i of a block keeps keys j <= i.
@compute @workgroup_size(64, 1, 1)
fn causal_softmax(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let row = flat_index(id, groups, 64u);
    if row >= params.rows {
        return;
    }
    let positions = params.width;
    let scale = bitcast<f32>(params.scalar);
    let base = row * positions;
    let visible = row % positions + 1u;
    var maximum = bitcast<f32>(0xFF800000u);
    for (var j = 0u; j < visible; j += 1u) {
        let s = mul(in_a[base + j], scale);
        out_a[base + j] = s;
        maximum = max(maximum, s);
    }
    var total = 0.0f;
    var chunk_sum = 0.0f;
    for (var j = 0u; j < visible; j += 1u) {
        let e = exp_pinned(out_a[base + j] - maximum);
        out_a[base + j] = e;
        chunk_sum = chunk_sum + e;
        if (j + 1u) % CHUNK == 0u {
            total = total + chunk_sum;
            chunk_sum = 0.0f;
        }
    }
    if visible % CHUNK != 0u {
        total = total + chunk_sum;
    }
    let inverse_sum = recip(total);
    for (var j = 0u; j < visible; j += 1u) {
        out_a[base + j] = mul(out_a[base + j], inverse_sum);
    }
    for (var j = visible; j < positions; j += 1u) {
        out_a[base + j] = 0.0f;
    }
}

// Its backward per row: in_a probs, in_b probs_grad, out_a scores_grad.
@compute @workgroup_size(64, 1, 1)
fn causal_softmax_grad(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let row = flat_index(id, groups, 64u);
    if row >= params.rows {
        return;
    }
    let positions = params.width;
    let scale = bitcast<f32>(params.scalar);
    let base = row * positions;
    let visible = row % positions + 1u;
    var total = 0.0f;
    var chunk_sum = 0.0f;
    for (var j = 0u; j < visible; j += 1u) {
        chunk_sum = chunk_sum + mul(in_a[base + j], in_b[base + j]);
        if (j + 1u) % CHUNK == 0u {
            total = total + chunk_sum;
            chunk_sum = 0.0f;
        }
    }
    if visible % CHUNK != 0u {
        total = total + chunk_sum;
    }
    for (var j = 0u; j < visible; j += 1u) {
        out_a[base + j] = mul(mul(in_a[base + j], in_b[base + j] - total), scale);
    }
    for (var j = visible; j < positions; j += 1u) {
        out_a[base + j] = 0.0f;
    }
}

// dtable[v][c] from in_a dy: one invocation per table element; out_a dtable. rows is the
// table's rows, width the row length.
@compute @workgroup_size(64, 1, 1)
fn scatter_add_rows(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let e = flat_index(id, groups, 64u);
    if e >= params.rows * params.width {
        return;
    }
    let v = e / params.width;
    let column = e % params.width;
    let first = lookup_starts[v];
    let end = lookup_starts[v + 1u];
    var total = 0.0f;
    var chunk_sum = 0.0f;
    for (var i = first; i < end; i += 1u) {
        chunk_sum = chunk_sum + in_a[lookup_rows[i] * params.width + column];
        if (i - first + 1u) % CHUNK == 0u {
            total = total + chunk_sum;
            chunk_sum = 0.0f;
        }
    }
    if (end - first) % CHUNK != 0u {
        total = total + chunk_sum;
    }
    out_a[e] = total;
}
