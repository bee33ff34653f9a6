// Mean softmax cross-entropy and its gradient (see `loss.rs`).
//
// Reduction order: one invocation per row computes, in this order, the row
// maximum (exact, order-free), e_j = exp(z_j - m), s = the chunked sum of e_j
// over j (32-wide chunks, each sequential from +0, folded from +0),
// r = recip(s), the row loss log(s) - (z_t - m), and
// dz_j = ((e_j (x) r) - [j = t]) (x) b with b = recip(rows) from the host.
// Then one invocation folds the row losses in the same chunked order and
// writes (that sum) (x) b. No atomics, no subgroup operations.

struct Params {
    rows: u32,
    classes: u32,
    // recip(rows) as bits, derived on the host.
    batch_scale: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> labels: array<u32>;
@group(0) @binding(3) var<storage, read_write> logits_grad: array<f32>;
@group(0) @binding(4) var<storage, read_write> row_losses: array<f32>;
@group(0) @binding(5) var<storage, read_write> loss: array<f32>;

const CHUNK: u32 = 32u;

@compute @workgroup_size(64, 1, 1)
fn softmax_rows(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let row = flat_index(id, groups, 64u);
    if row >= params.rows {
        return;
    }
    let base = row * params.classes;
    var maximum = bitcast<f32>(0xFF800000u);
    for (var j = 0u; j < params.classes; j += 1u) {
        maximum = max(maximum, logits[base + j]);
    }
    var total = 0.0f;
    var chunk_sum = 0.0f;
    for (var j = 0u; j < params.classes; j += 1u) {
        let e = exp_pinned(logits[base + j] - maximum);
        logits_grad[base + j] = e;
        chunk_sum = chunk_sum + e;
        if (j + 1u) % CHUNK == 0u {
            total = total + chunk_sum;
            chunk_sum = 0.0f;
        }
    }
    if params.classes % CHUNK != 0u {
        total = total + chunk_sum;
    }
    let inverse_sum = recip(total);
    let label = labels[row];
    let label_shifted = logits[base + label] - maximum;
    row_losses[row] = log_pinned(total) - label_shifted;
    let batch_scale = bitcast<f32>(params.batch_scale);
    for (var j = 0u; j < params.classes; j += 1u) {
        let target_value = select(0.0f, 1.0f, j == label);
        logits_grad[base + j] = mul(mul(logits_grad[base + j], inverse_sum) - target_value, batch_scale);
    }
}

@compute @workgroup_size(1, 1, 1)
fn softmax_loss() {
    var total = 0.0f;
    var chunk_sum = 0.0f;
    for (var row = 0u; row < params.rows; row += 1u) {
        chunk_sum = chunk_sum + row_losses[row];
        if (row + 1u) % CHUNK == 0u {
            total = total + chunk_sum;
            chunk_sum = 0.0f;
        }
    }
    if params.rows % CHUNK != 0u {
        total = total + chunk_sum;
    }
    loss[0] = mul(total, bitcast<f32>(params.batch_scale));
}
