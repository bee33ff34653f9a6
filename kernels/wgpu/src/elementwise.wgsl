// Element-wise operators: bias add, activations and their gradients, SGD with
// momentum, AdamW, the scaling step of gradient clipping, and the sum of two values.
//
// Reduction order: none. One invocation per element; each element goes
// through exactly the operation sequence of its Rust module (`bias.rs`,
// `activation.rs`, `optim.rs`), using `mul` for every product. Per-step
// scalars (AdamW's corrections, SGD's flushed hyper-parameters) are derived
// on the host and arrive as bit patterns in `params.scalars`.

struct Params {
    len: u32,
    // Activation kind (0 ReLU, 1 tanh, 2 GELU), or SGD's Nesterov flag.
    mode: u32,
    // Bias: channels and inner extent.
    channels: u32,
    inner: u32,
    // Host scalars, as f32 bit patterns; their meaning is per entry point.
    scalars: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> target_a: array<f32>;
@group(0) @binding(2) var<storage, read> source_a: array<f32>;
@group(0) @binding(3) var<storage, read> source_b: array<f32>;
@group(0) @binding(4) var<storage, read_write> target_b: array<f32>;
@group(0) @binding(5) var<storage, read_write> target_c: array<f32>;

const WIDTH: u32 = 256u;

fn scalar(index: u32) -> f32 {
    return bitcast<f32>(params.scalars[index / 4u][index % 4u]);
}

// values[o,c,i] += bias[c]: target_a = values, source_a = bias.
@compute @workgroup_size(256, 1, 1)
fn bias_add(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let e = flat_index(id, groups, WIDTH);
    if e >= params.len {
        return;
    }
    target_a[e] = target_a[e] + source_a[(e / params.inner) % params.channels];
}

// target_a = f(source_a).
@compute @workgroup_size(256, 1, 1)
fn activation_forward(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let e = flat_index(id, groups, WIDTH);
    if e >= params.len {
        return;
    }
    // Host scalar 0 is 1.0: see `activation_apply`.
    target_a[e] = activation_apply(params.mode, source_a[e], scalar(0u));
}

// target_a = source_b * f'(source_a): source_a is the forward input, source_b the output gradient.
@compute @workgroup_size(256, 1, 1)
fn activation_backward(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let e = flat_index(id, groups, WIDTH);
    if e >= params.len {
        return;
    }
    target_a[e] = activation_grad(params.mode, source_a[e], source_b[e], scalar(0u));
}

// SGD with momentum: target_a = params, source_a = grads, target_b = velocity.
// Scalars: 0 learning rate, 1 momentum, 2 weight decay (validated and flushed).
@compute @workgroup_size(256, 1, 1)
fn sgd_momentum(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let e = flat_index(id, groups, WIDTH);
    if e >= params.len {
        return;
    }
    let learning_rate = scalar(0u);
    let momentum = scalar(1u);
    let weight_decay = scalar(2u);
    let p = target_a[e];
    let g = source_a[e] + mul(weight_decay, p);
    let v = mul(momentum, target_b[e]) + g;
    target_b[e] = v;
    var update = v;
    if params.mode != 0u {
        update = g + mul(momentum, v);
    }
    target_a[e] = p - mul(learning_rate, update);
}

// AdamW: target_a = params, source_a = grads, target_b = first moment,
// target_c = second moment. Scalars in `AdamWScalars` field order: decay,
// beta1, 1 - beta1, beta2, 1 - beta2, step size, second-moment scale, epsilon.
@compute @workgroup_size(256, 1, 1)
fn adamw(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let e = flat_index(id, groups, WIDTH);
    if e >= params.len {
        return;
    }
    let g = source_a[e];
    let p = mul(target_a[e], scalar(0u));
    let m = mul(scalar(1u), target_b[e]) + mul(scalar(2u), g);
    let v = mul(scalar(3u), target_c[e]) + mul(scalar(4u), mul(g, g));
    target_b[e] = m;
    target_c[e] = v;
    let denominator = mul(sqrt_pinned(v), scalar(6u)) + scalar(7u);
    target_a[e] = p - mul(scalar(5u), mul(m, recip(denominator)));
}

// Clipping's scaling step: target_a = grads, source_a[1] = the coefficient
// written by `finish_norm`; scales only when the coefficient is below 1.
@compute @workgroup_size(256, 1, 1)
fn scale_below_one(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let e = flat_index(id, groups, WIDTH);
    if e >= params.len {
        return;
    }
    let coefficient = source_a[1];
    if coefficient < 1.0f {
        target_a[e] = mul(target_a[e], coefficient);
    }
}

// into += other (`residual.rs`): target_a into, source_a other.
@compute @workgroup_size(256, 1, 1)
fn add_assign(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let e = flat_index(id, groups, WIDTH);
    if e >= params.len {
        return;
    }
    target_a[e] = target_a[e] + source_a[e];
}
