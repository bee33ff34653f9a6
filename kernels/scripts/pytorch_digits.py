#!/usr/bin/env python3
"""Trains the digits MLP of kernels/tests/digits.rs in PyTorch (eager, fp32, CPU)
and prints its test accuracy: the figure the reference's accuracy is compared with.

Same data, same split, same initial weights, same batch order, same optimizer:
everything the reference draws from Philox (the split, the initialisation, the
batch order) is recomputed here bit for bit by a port of kernels/src/rng.rs and
of the reference's `rsqrt`, and the script prints the BLAKE2b-256 content hash of
the initial weights (kernels/src/model.rs `weights_digest`) so that the identity
with the Rust side can be checked. The arithmetic is PyTorch's own: fp32
matmuls, libm exp/log, torch.optim.SGD.

Usage (torch 2.13.0; kernels/scripts/setup-torch.sh installs it):
    source kernels/scripts/torch-env.sh
    kernels/scripts/fetch-datasets.sh
    python3 kernels/scripts/pytorch_digits.py [--steps 1000]
"""
import argparse
import gzip
import hashlib
import os
import struct
import sys

import torch

MASK32 = 0xFFFFFFFF
INIT_STREAM = 1 << 32
BATCH_STREAM = 2 << 32
SPLIT_STREAM = 3 << 32
DIGITS_BLAKE2B_256 = "57a469b180ddc1380145abad65de499dbd489b59c9b5f988138eeed835193c95"


def f32(x):
    """Rounds a Python float to binary32 (exact emulation of one f32 operation:
    binary64 has more than 2*24+2 bits, so rounding twice is innocuous)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def from_bits(b):
    return struct.unpack("<f", struct.pack("<I", b & MASK32))[0]


def flush(x):
    """The contract's flush: |x| < 2^-103 becomes +0."""
    return x if (bits(x) & 0x7F800000) >= 0x0C000000 else 0.0


def mul(a, b):
    return flush(f32(a * b))


def philox4x32_10(counter, key):
    x0, x1, x2, x3 = counter
    k0, k1 = key
    for r in range(10):
        if r > 0:
            k0 = (k0 + 0x9E3779B9) & MASK32
            k1 = (k1 + 0xBB67AE85) & MASK32
        p0 = 0xD2511F53 * x0
        p1 = 0xCD9E8D57 * x2
        x0, x1, x2, x3 = ((p1 >> 32) ^ x1 ^ k0) & MASK32, p1 & MASK32, ((p0 >> 32) ^ x3 ^ k1) & MASK32, p0 & MASK32
    return [x0, x1, x2, x3]


class RandomStream:
    """kernels/src/rng.rs RandomStream: word i is lane i%4 of the block at counter
    [lo(i/4), hi(i/4), lo(stream), hi(stream)], keyed by the seed."""

    def __init__(self, seed, stream):
        self.key = [seed & MASK32, (seed >> 32) & MASK32]
        self.stream = stream

    def block(self, b):
        return philox4x32_10([b & MASK32, (b >> 32) & MASK32, self.stream & MASK32, (self.stream >> 32) & MASK32], self.key)

    def word(self, i):
        return self.block(i // 4)[i % 4]

    def fill_uniform(self, low, high, n):
        width = f32(high - low)
        out = []
        for b in range((n + 3) // 4):
            for w in self.block(b):
                out.append(f32(low + mul(width, (w >> 8) * 2.0**-24)))
        return [flush(v) for v in out[:n]]

    def permutation(self, n):
        order = list(range(n))
        for draw, position in enumerate(range(n - 1, 0, -1)):
            pick = (self.word(draw) * (position + 1)) >> 32
            order[position], order[pick] = order[pick], order[position]
        return order


FEISTEL_ROUNDS = 8


class RandomPermutation:
    """kernels/src/rng.rs RandomPermutation: a Feistel network on ceil(log2 n) bits
    keyed by the stream, with cycle-walking; random access to element i."""

    def __init__(self, stream, n):
        self.stream, self.n = stream, n
        self.bits = 0 if n <= 1 else (n - 1).bit_length()

    def get(self, index):
        value = index
        while True:
            value = self.encrypt(value)
            if value < self.n:
                return value

    def encrypt(self, value):
        left_bits, right_bits = self.bits // 2, self.bits - self.bits // 2
        left, right = value >> right_bits, value & ((1 << right_bits) - 1)
        for rnd in range(FEISTEL_ROUNDS):
            f = self.stream.block((rnd << 32) | right)[0] & ((1 << left_bits) - 1)
            left, right = right, left ^ f
            left_bits, right_bits = right_bits, left_bits
        return (left << right_bits) | right


def rsqrt(x):
    """kernels/src/math.rs rsqrt, operation for operation."""
    b = bits(x)
    exponent = ((b & 0x7F800000) >> 23) - 127
    odd = exponent & 1
    mantissa = from_bits((b & 0x007FFFFF) | ((127 + odd) << 23))
    half_exponent = (exponent - odd) >> 1
    half_mantissa = mul(0.5, mantissa)
    estimate = from_bits((0x5F375A86 - (bits(mantissa) >> 1)) & MASK32)
    for _ in range(3):
        residual = f32(0.5 - mul(mul(half_mantissa, estimate), estimate))
        estimate = f32(estimate + mul(estimate, residual))
    return from_bits(bits(estimate) + ((-half_exponent) << 23))


def weights_digest(tensors):
    """kernels/src/model.rs weights_digest."""
    words = [len(tensors)]
    for t in tensors:
        words.append(len(t))
        words.extend(0 if v == 0.0 else bits(v) for v in t)
    return hashlib.blake2b(b"touchstone/model/v1" + struct.pack("<%dI" % len(words), *words), digest_size=32).hexdigest()


def load_digits():
    path = os.path.join(os.environ.get("TOUCHSTONE_DATA", os.path.expanduser("~/.cache/touchstone/data")), "digits.csv.gz")
    if not os.path.exists(path):
        sys.exit(f"{path} is missing: run kernels/scripts/fetch-datasets.sh")
    raw = open(path, "rb").read()
    if hashlib.blake2b(raw, digest_size=32).hexdigest() != DIGITS_BLAKE2B_256:
        sys.exit(f"{path} has the wrong hash: delete it and rerun kernels/scripts/fetch-datasets.sh")
    features, labels = [], []
    for line in gzip.decompress(raw).decode().splitlines():
        if line.strip():
            fields = [int(float(v)) for v in line.split(",")]
            features.append([v * 0.0625 for v in fields[:64]])
            labels.append(fields[64])
    return features, labels


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--test", type=int, default=360)
    args = parser.parse_args()
    torch.set_num_threads(1)

    features, labels = load_digits()
    order = RandomStream(args.seed, SPLIT_STREAM).permutation(len(labels))
    test_idx, train_idx = order[: args.test], order[args.test :]
    x_train = torch.tensor([features[i] for i in train_idx], dtype=torch.float32)
    y_train = torch.tensor([labels[i] for i in train_idx], dtype=torch.int64)
    x_test = torch.tensor([features[i] for i in test_idx], dtype=torch.float32)
    y_test = torch.tensor([labels[i] for i in test_idx], dtype=torch.int64)

    # Parameters in the reference's order and layout: W1 [64, h], b1, W2 [h, 10], b2,
    # each uniform in [-rsqrt(fan_in), rsqrt(fan_in)) from stream INIT_STREAM + i.
    shapes = [((64, args.hidden), 64), ((args.hidden,), 64), ((args.hidden, 10), args.hidden), ((10,), args.hidden)]
    init = []
    for i, (shape, fan_in) in enumerate(shapes):
        bound = rsqrt(float(fan_in))
        n = 1
        for d in shape:
            n *= d
        init.append(RandomStream(args.seed, INIT_STREAM + i).fill_uniform(-bound, bound, n))
    print(f"init_weights_blake2b_256 {weights_digest(init)}")

    model = torch.nn.Sequential(torch.nn.Linear(64, args.hidden), torch.nn.ReLU(), torch.nn.Linear(args.hidden, 10))
    with torch.no_grad():
        # torch.nn.Linear stores [out, in]: the transpose of the reference's [in, out].
        model[0].weight.copy_(torch.tensor(init[0]).reshape(64, args.hidden).t())
        model[0].bias.copy_(torch.tensor(init[1]))
        model[2].weight.copy_(torch.tensor(init[2]).reshape(args.hidden, 10).t())
        model[2].bias.copy_(torch.tensor(init[3]))
    optimizer = torch.optim.SGD(model.parameters(), lr=f32(args.lr), momentum=f32(args.momentum))
    loss_fn = torch.nn.CrossEntropyLoss()

    steps_per_epoch = len(train_idx) // args.batch
    epoch_order, epoch = None, -1
    for step in range(args.steps):
        if step // steps_per_epoch != epoch:
            epoch = step // steps_per_epoch
            epoch_order = RandomPermutation(RandomStream(args.seed, BATCH_STREAM + epoch), len(train_idx))
        start = (step % steps_per_epoch) * args.batch
        batch = torch.tensor([epoch_order.get(i) for i in range(start, start + args.batch)], dtype=torch.int64)
        optimizer.zero_grad()
        loss = loss_fn(model(x_train[batch]), y_train[batch])
        loss.backward()
        optimizer.step()

    with torch.no_grad():
        accuracy = (model(x_test).argmax(dim=1) == y_test).float().mean().item()
        correct = int((model(x_test).argmax(dim=1) == y_test).sum().item())
    print(f"torch {torch.__version__} steps {args.steps} final_train_loss {loss.item():.6f}")
    print(f"test_accuracy {accuracy:.6f} ({correct}/{len(test_idx)})")


if __name__ == "__main__":
    main()
