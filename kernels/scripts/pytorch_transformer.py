#!/usr/bin/env python3
"""Trains the character transformer of a reference run in PyTorch, from the same weights.

Reads the directory the kernels' `transformer` example wrote (config.json, init.f32,
batches.u32, validation.u32, rates.f32, losses.f32), builds the same pre-norm decoder the
idiomatic PyTorch way (nn.Embedding, nn.LayerNorm, nn.Linear, F.gelu(approximate="tanh"),
a causal softmax, F.cross_entropy, the head tied to the token embedding), loads the
reference's initial weights, and trains it on the same windows at the same per-step rates
with torch.optim.AdamW (decay on matrices only, as the reference) and clip_grad_norm_.
Prints one JSON object: the validation loss before and after, milliseconds per step (the
median), the largest gap between the two runs' training losses, and the relative gap of
the final validation losses.

Run by `scripts/bench-transformer.sh`; by hand after `source kernels/scripts/torch-env.sh`:
  python3 kernels/scripts/pytorch_transformer.py /tmp/gpt
"""

import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, width, heads, mlp_ratio, eps):
        super().__init__()
        self.heads = heads
        self.attention_norm = nn.LayerNorm(width, eps=eps)
        self.query = nn.Linear(width, width)
        self.key = nn.Linear(width, width)
        self.value = nn.Linear(width, width)
        self.output = nn.Linear(width, width)
        self.mlp_norm = nn.LayerNorm(width, eps=eps)
        self.up = nn.Linear(width, width * mlp_ratio)
        self.down = nn.Linear(width * mlp_ratio, width)

    def forward(self, h):
        batch, positions, width = h.shape
        d = width // self.heads
        a = self.attention_norm(h)
        split = lambda x: x.view(batch, positions, self.heads, d).transpose(1, 2)
        q, k, v = split(self.query(a)), split(self.key(a)), split(self.value(a))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        mask = torch.ones(positions, positions, dtype=torch.bool).tril()
        probs = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        attended = (probs @ v).transpose(1, 2).reshape(batch, positions, width)
        h = h + self.output(attended)
        return h + self.down(F.gelu(self.up(self.mlp_norm(h)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.tokens = nn.Embedding(c["vocab"], c["width"])
        self.positions = nn.Embedding(c["context"], c["width"])
        self.blocks = nn.ModuleList(
            Block(c["width"], c["heads"], c["mlp_ratio"], c["norm_epsilon"]) for _ in range(c["layers"])
        )
        self.final_norm = nn.LayerNorm(c["width"], eps=c["norm_epsilon"])

    def forward(self, x):
        h = self.tokens(x) + self.positions(torch.arange(x.shape[1]))
        for block in self.blocks:
            h = block(h)
        return self.final_norm(h) @ self.tokens.weight.T

    def ordered(self):
        """The parameters in the reference's order, each with whether it is a matrix
        stored [inputs, outputs] there (nn.Linear stores [outputs, inputs])."""
        out = [(self.tokens.weight, False), (self.positions.weight, False)]
        for b in self.blocks:
            out += [(b.attention_norm.weight, False), (b.attention_norm.bias, False)]
            for linear in (b.query, b.key, b.value, b.output):
                out += [(linear.weight, True), (linear.bias, False)]
            out += [(b.mlp_norm.weight, False), (b.mlp_norm.bias, False)]
            for linear in (b.up, b.down):
                out += [(linear.weight, True), (linear.bias, False)]
        out += [(self.final_norm.weight, False), (self.final_norm.bias, False)]
        return out


def read(path, dtype):
    """A file of little-endian 4-byte words as a flat tensor (this machine is little-endian)."""
    return torch.frombuffer(bytearray(path.read_bytes()), dtype=dtype)


def loss_of(model, windows):
    logits = model(windows[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), windows[:, 1:].reshape(-1))


def main():
    run = Path(sys.argv[1] if len(sys.argv) > 1 else "transformer-run")
    c = json.loads((run / "config.json").read_text())
    torch.set_num_threads(c["threads"])
    model = Gpt(c)
    init = read(run / "init.f32", torch.float32)
    offset = 0
    with torch.no_grad():
        for tensor, linear in model.ordered():
            rows, cols = (tensor.shape[1], tensor.shape[0]) if linear else (tensor.numel(), 1)
            values = init[offset : offset + tensor.numel()]
            tensor.copy_(values.view(rows, cols).T if linear else values.view(tensor.shape))
            offset += tensor.numel()
    if offset != init.numel():
        sys.exit(f"init.f32 holds {init.numel()} values, the model {offset}")
    window = c["context"] + 1
    # Token ids are below 2³¹, so reading them as int32 is exact.
    batches = read(run / "batches.u32", torch.int32).long().view(c["steps"], c["batch"], window)
    validation = read(run / "validation.u32", torch.int32).long().view(-1, window)
    rates = read(run / "rates.f32", torch.float32).tolist()
    reference_losses = read(run / "losses.f32", torch.float32).tolist()
    matrices = [p for p, _ in model.ordered() if p.dim() == 2]
    others = [p for p, _ in model.ordered() if p.dim() != 2]
    optimizer = torch.optim.AdamW(
        [{"params": matrices, "weight_decay": c["weight_decay"]}, {"params": others, "weight_decay": 0.0}],
        lr=rates[0], betas=(c["beta1"], c["beta2"]), eps=c["epsilon"],
    )
    with torch.no_grad():
        before = loss_of(model, validation).item()
    losses, seconds = [], []
    for step in range(c["steps"]):
        for group in optimizer.param_groups:
            group["lr"] = rates[step]
        started = time.perf_counter()
        loss = loss_of(model, batches[step])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), c["clip_norm"])
        optimizer.step()
        losses.append(loss.item())
        seconds.append(time.perf_counter() - started)
    with torch.no_grad():
        after = loss_of(model, validation).item()
    gaps = [abs(a - b) for a, b in zip(losses, reference_losses)]
    print(json.dumps({
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "initial_validation_loss": before,
        "validation_loss": after,
        "ms_per_step": round(statistics.median(seconds) * 1e3, 1),
        "largest_training_loss_gap": max(gaps) if gaps else 0.0,
        "reference_validation_loss": c["validation_loss"],
        "relative_gap": abs(c["validation_loss"] - after) / after,
    }))


if __name__ == "__main__":
    main()
