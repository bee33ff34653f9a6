// Contractions: matmul (any operand layout) and the three convolution passes,
// as `out[row][col] = sum_k a(row, k) * b(k, col)` (see `contraction.rs`).
//
// Reduction order (the contract's rule 5): every operand is rounded by
// `quantize_operand` when it is loaded into workgroup memory, so every product
// is exact and a fused or unfused multiply-add gives the same bits. Along k,
// chunk c covers k in [32c, 32c + 32); each output's chunk partial is
// accumulated by one invocation, sequentially in increasing k, from +0; the
// partials are folded into the output sequentially in increasing c, from +0.
// No split-K, no atomics, no subgroup operations: a workgroup owns a 32x32
// output tile and walks the whole depth itself. The tile is a work layout
// only; an element's value depends on the K-chunking alone.
//
// Work layout: 8x8 invocations, each owning a 4x4 block of the tile and
// holding four adjacent columns in a vec4. Vector arithmetic is per
// component, so every output is still its own sequential sum. (Against one
// output per invocation this cuts workgroup-memory loads per product by four,
// which made lavapipe 2.7x faster; on a GPU it is ordinary register blocking.)
//
// KIND selects the index maps (one pipeline per kind):
//   0 matmul, 1 conv2d forward, 2 conv2d input gradient, 3 conv2d weight gradient.

override KIND: u32 = 0u;

struct Params {
    rows: u32,
    cols: u32,
    depth: u32,
    // Matmul: operand layouts (0 or 1).
    lhs_transposed: u32,
    rhs_transposed: u32,
    // Convolution geometry.
    in_channels: u32,
    out_channels: u32,
    height: u32,
    width: u32,
    kernel_height: u32,
    kernel_width: u32,
    out_height: u32,
    out_width: u32,
    // First tile row and column of this dispatch (the host splits outputs
    // with more tiles than a dispatch dimension allows).
    tile_row_offset: u32,
    tile_col_offset: u32,
    // A batched matmul's block strides: block z (the dispatch's third dimension)
    // reads and writes its operands' and output's block z. Zero for one contraction.
    lhs_block: u32,
    rhs_block: u32,
    out_block: u32,
    // First block of this dispatch (the host splits more blocks than a dispatch allows).
    block_offset: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> lhs: array<f32>;
@group(0) @binding(2) var<storage, read> rhs: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const TILE: u32 = 32u;
const CHUNK: u32 = 32u;
// Invocations per workgroup edge; each computes a 4x4 block of the 32x32 tile.
const THREADS: u32 = 8u;

// The first element of this workgroup's block of each operand (batched matmuls).
var<private> lhs_base: u32;
var<private> rhs_base: u32;

var<workgroup> lhs_tile: array<f32, 1024>;       // [row][k], 32 x 32
var<workgroup> rhs_tile: array<vec4<f32>, 256>;  // [k][column / 4], 32 x 8 vectors of 4 columns

// Conv2dShape::input_index_at: x index read by output position (n, oy, ox) at tap (ci, ky, kx).
fn input_index_at(position: u32, tap: u32) -> u32 {
    let n = position / (params.out_height * params.out_width);
    let oy = (position / params.out_width) % params.out_height;
    let ox = position % params.out_width;
    let ci = tap / (params.kernel_height * params.kernel_width);
    let ky = (tap / params.kernel_width) % params.kernel_height;
    let kx = tap % params.kernel_width;
    return ((n * params.in_channels + ci) * params.height + oy + ky) * params.width + ox + kx;
}

// Conv2dShape::output_index: y index of output position (n, oy, ox) and channel co.
fn output_index(position: u32, out_channel: u32) -> u32 {
    let n = position / (params.out_height * params.out_width);
    let oy = (position / params.out_width) % params.out_height;
    let ox = position % params.out_width;
    return ((n * params.out_channels + out_channel) * params.out_height + oy) * params.out_width + ox;
}

// a(row, k), quantized; +0 outside the operand.
fn load_lhs(row: u32, k: u32) -> f32 {
    if row >= params.rows || k >= params.depth {
        return 0.0f;
    }
    var index = 0u;
    if KIND == 0u {
        index = select(row * params.depth + k, k * params.rows + row, params.lhs_transposed != 0u);
    } else if KIND == 1u {
        index = input_index_at(row, k);
    } else if KIND == 2u {
        // dy[n, co, iy - ky, ix - kx], or +0 where that lies outside dy.
        let n = row / (params.height * params.width);
        let iy = (row / params.width) % params.height;
        let ix = row % params.width;
        let co = k / (params.kernel_height * params.kernel_width);
        let ky = (k / params.kernel_width) % params.kernel_height;
        let kx = k % params.kernel_width;
        if iy < ky || ix < kx || iy - ky >= params.out_height || ix - kx >= params.out_width {
            return 0.0f;
        }
        index = ((n * params.out_channels + co) * params.out_height + iy - ky) * params.out_width + ix - kx;
    } else {
        index = output_index(k, row);
    }
    return quantize_operand(lhs[lhs_base + index]);
}

// b(k, col), quantized; +0 outside the operand.
fn load_rhs(k: u32, col: u32) -> f32 {
    if k >= params.depth || col >= params.cols {
        return 0.0f;
    }
    var index = 0u;
    if KIND == 0u {
        index = select(k * params.cols + col, col * params.depth + k, params.rhs_transposed != 0u);
    } else if KIND == 1u {
        index = col * params.depth + k;
    } else if KIND == 2u {
        let co = k / (params.kernel_height * params.kernel_width);
        let ky = (k / params.kernel_width) % params.kernel_height;
        let kx = k % params.kernel_width;
        index = ((co * params.in_channels + col) * params.kernel_height + ky) * params.kernel_width + kx;
    } else {
        index = input_index_at(k, col);
    }
    return quantize_operand(rhs[rhs_base + index]);
}

// Where out[row][col] lives in the output tensor.
fn store_index(row: u32, col: u32) -> u32 {
    if KIND == 0u {
        return row * params.cols + col;
    }
    if KIND == 1u {
        return output_index(row, col);
    }
    if KIND == 2u {
        let n = row / (params.height * params.width);
        let iy = (row / params.width) % params.height;
        let ix = row % params.width;
        return ((n * params.in_channels + col) * params.height + iy) * params.width + ix;
    }
    return row * params.cols + col;
}

@compute @workgroup_size(8, 8, 1)
fn contract(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_id) local: vec3<u32>) {
    let block = group.z + params.block_offset;
    lhs_base = block * params.lhs_block;
    rhs_base = block * params.rhs_block;
    let out_base = block * params.out_block;
    let row0 = (group.y + params.tile_row_offset) * TILE;
    let col0 = (group.x + params.tile_col_offset) * TILE;
    let flat = local.y * THREADS + local.x;
    // This invocation's outputs: rows 4 ty .. 4 ty + 3, columns 4 tx .. 4 tx + 3 of the tile.
    let ty = local.y;
    let tx = local.x;
    var total = array<vec4<f32>, 4>(vec4<f32>(0.0f), vec4<f32>(0.0f), vec4<f32>(0.0f), vec4<f32>(0.0f));
    for (var k0 = 0u; k0 < params.depth; k0 += CHUNK) {
        // Each of the 64 invocations loads 16 elements of each 32x32 operand block.
        for (var i = 0u; i < 16u; i += 1u) {
            let element = flat + i * 64u;
            lhs_tile[element] = load_lhs(row0 + element / TILE, k0 + element % TILE);
        }
        for (var i = 0u; i < 4u; i += 1u) {
            let vector = flat + i * 64u;
            let k = k0 + vector / 8u;
            let column = col0 + (vector % 8u) * 4u;
            rhs_tile[vector] = vec4<f32>(
                load_rhs(k, column),
                load_rhs(k, column + 1u),
                load_rhs(k, column + 2u),
                load_rhs(k, column + 3u),
            );
        }
        workgroupBarrier();
        let chunk_len = min(CHUNK, params.depth - k0);
        var partial = array<vec4<f32>, 4>(vec4<f32>(0.0f), vec4<f32>(0.0f), vec4<f32>(0.0f), vec4<f32>(0.0f));
        for (var kk = 0u; kk < chunk_len; kk += 1u) {
            let b = rhs_tile[kk * 8u + tx];
            // Exact products of 12-bit operands: contraction cannot change these
            // sums, and each component is its own output's sequential sum.
            partial[0] = partial[0] + lhs_tile[(ty * 4u) * TILE + kk] * b;
            partial[1] = partial[1] + lhs_tile[(ty * 4u + 1u) * TILE + kk] * b;
            partial[2] = partial[2] + lhs_tile[(ty * 4u + 2u) * TILE + kk] * b;
            partial[3] = partial[3] + lhs_tile[(ty * 4u + 3u) * TILE + kk] * b;
        }
        for (var i = 0u; i < 4u; i += 1u) {
            total[i] = total[i] + partial[i];
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i += 1u) {
        let row = row0 + ty * 4u + i;
        for (var j = 0u; j < 4u; j += 1u) {
            let col = col0 + tx * 4u + j;
            if row < params.rows && col < params.cols {
                out[out_base + store_index(row, col)] = total[i][j];
            }
        }
    }
}
