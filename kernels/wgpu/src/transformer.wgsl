// The transformer's row operators: LayerNorm / RMSNorm forward and backward (see
// `norm.rs`) and the causal softmax of attention, forward and backward (see
// `attention.rs`).
//
// Reduction order: one invocation per row. Every row sum is rule 4's chunked sum in
// column order: 32-wide chunks, each sequential from +0, chunk sums folded from +0.
// The gains' and biases' gradients are column sums, one invocation per column, over
// the rows in row order, chunked the same way. A row's maximum is exact and order-free.
// The backward's dx recomputes r and x-hat from x, as the reference does; its d-gamma
// sums the forward's x-hat. No
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
// x-hat: written by the norm forward and the backward's rows (scratch), read by its columns.
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

// A rule-4 chunked sum in progress: the folded chunks, the open chunk's sequential sum
// from +0, and the terms added so far.
struct Fold {
    total: f32,
    chunk: f32,
    terms: u32,
}

fn fold_new() -> Fold {
    return Fold(0.0f, 0.0f, 0u);
}

// Adds the next term to the open chunk, which joins the total once it holds 32.
fn fold_add(state: Fold, value: f32) -> Fold {
    var next = state;
    next.chunk = next.chunk + value;
    next.terms = next.terms + 1u;
    if next.terms % CHUNK == 0u {
        next.total = next.total + next.chunk;
        next.chunk = 0.0f;
    }
    return next;
}

// The sum: the folded chunks, and a last, partial chunk if there is one.
fn fold_sum(state: Fold) -> f32 {
    if state.terms % CHUNK != 0u {
        return state.total + state.chunk;
    }
    return state.total;
}

// Writes x-hat of the row at `base` into out_b and returns r, by `normalise_row`'s
// sequence.
fn normalise_row(base: u32) -> f32 {
    let width = params.width;
    let k = bitcast<f32>(params.k);
    let epsilon = bitcast<f32>(params.scalar);
    if params.mode == LAYER {
        var sum = fold_new();
        for (var j = 0u; j < width; j += 1u) {
            sum = fold_add(sum, in_a[base + j]);
        }
        let mean = mul(fold_sum(sum), k);
        var squares = fold_new();
        for (var j = 0u; j < width; j += 1u) {
            let centred = in_a[base + j] - mean;
            out_b[base + j] = centred;
            squares = fold_add(squares, mul(centred, centred));
        }
        let r = rsqrt(mul(fold_sum(squares), k) + epsilon);
        for (var j = 0u; j < width; j += 1u) {
            out_b[base + j] = mul(out_b[base + j], r);
        }
        return r;
    }
    var squares = fold_new();
    for (var j = 0u; j < width; j += 1u) {
        let value = in_a[base + j];
        squares = fold_add(squares, mul(value, value));
    }
    let r = rsqrt(mul(fold_sum(squares), k) + epsilon);
    for (var j = 0u; j < width; j += 1u) {
        out_b[base + j] = mul(in_a[base + j], r);
    }
    return r;
}

// y = x-hat (x) gamma (+ beta): in_a x, in_b gamma, in_c beta (gamma again for RMSNorm),
// out_a y, out_b x-hat (an output: the backward's parameter gradients read it).
@compute @workgroup_size(64, 1, 1)
fn norm_forward(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let row = flat_index(id, groups, 64u);
    if row >= params.rows {
        return;
    }
    let base = row * params.width;
    normalise_row(base);
    for (var j = 0u; j < params.width; j += 1u) {
        let scaled = mul(out_b[base + j], in_b[j]);
        if params.mode == LAYER {
            out_a[base + j] = scaled + in_c[j];
        } else {
            out_a[base + j] = scaled;
        }
    }
}

// dx per row: in_a x, in_b gamma, in_c dy, out_a dx, out_b x-hat recomputed (scratch).
@compute @workgroup_size(64, 1, 1)
fn norm_backward_rows(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let row = flat_index(id, groups, 64u);
    if row >= params.rows {
        return;
    }
    let width = params.width;
    let k = bitcast<f32>(params.k);
    let base = row * width;
    let r = normalise_row(base);
    var gx = fold_new();
    var g_sum = fold_new();
    for (var j = 0u; j < width; j += 1u) {
        let g = mul(in_c[base + j], in_b[j]);
        gx = fold_add(gx, mul(g, out_b[base + j]));
        g_sum = fold_add(g_sum, g);
    }
    let b = mul(fold_sum(gx), k);
    let a = mul(fold_sum(g_sum), k);
    for (var j = 0u; j < width; j += 1u) {
        let g = mul(in_c[base + j], in_b[j]);
        let x_hat = out_b[base + j];
        var centred = g;
        if params.mode == LAYER {
            centred = g - a;
        }
        out_a[base + j] = mul(r, centred - mul(x_hat, b));
    }
}

// Column sums over rows: in_c dy, out_b the forward's x-hat (read only), out_c d-gamma
// (the sum of dy (x) x-hat), out_d d-beta (LayerNorm).
@compute @workgroup_size(64, 1, 1)
fn norm_backward_columns(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let column = flat_index(id, groups, 64u);
    if column >= params.width {
        return;
    }
    var gamma_grad = fold_new();
    var beta_grad = fold_new();
    for (var row = 0u; row < params.rows; row += 1u) {
        let index = row * params.width + column;
        gamma_grad = fold_add(gamma_grad, mul(in_c[index], out_b[index]));
        beta_grad = fold_add(beta_grad, in_c[index]);
    }
    out_c[column] = fold_sum(gamma_grad);
    if params.mode == LAYER {
        out_d[column] = fold_sum(beta_grad);
    }
}

// The masked keys of a causal row, after its `visible` ones: exact +0 in out_a.
fn zero_masked(base: u32, visible: u32, positions: u32) {
    for (var j = visible; j < positions; j += 1u) {
        out_a[base + j] = 0.0f;
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
    var sum = fold_new();
    for (var j = 0u; j < visible; j += 1u) {
        let e = exp_pinned(out_a[base + j] - maximum);
        out_a[base + j] = e;
        sum = fold_add(sum, e);
    }
    let inverse_sum = recip(fold_sum(sum));
    for (var j = 0u; j < visible; j += 1u) {
        out_a[base + j] = mul(out_a[base + j], inverse_sum);
    }
    zero_masked(base, visible, positions);
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
    var products = fold_new();
    for (var j = 0u; j < visible; j += 1u) {
        products = fold_add(products, mul(in_a[base + j], in_b[base + j]));
    }
    let total = fold_sum(products);
    for (var j = 0u; j < visible; j += 1u) {
        out_a[base + j] = mul(mul(in_a[base + j], in_b[base + j] - total), scale);
    }
    zero_masked(base, visible, positions);
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
    var sum = fold_new();
    for (var i = lookup_starts[v]; i < lookup_starts[v + 1u]; i += 1u) {
        sum = fold_add(sum, in_a[lookup_rows[i] * params.width + column]);
    }
    out_a[e] = fold_sum(sum);
}
