#!/usr/bin/env python3
"""PyTorch eager baseline for the kernels benchmark (kernels/benches/kernels.rs).

Trains the same MLP as the Rust benchmark's step loop, the idiomatic way:
nn.Sequential of Linear/ReLU, F.cross_entropy, autograd, torch.optim.SGD
with momentum, a loss.item() per step (the Rust loop also reads the loss
back every step). Prints one JSON object: milliseconds per step (median of
repeated timing rounds), the thread count and the torch version.

The benchmark harness runs this itself, in the same run, with the same
shapes and thread count; run it by hand as e.g.
  python3 kernels/scripts/bench_torch.py --widths 64 64 10 --batch 32 --threads 1
after `source kernels/scripts/torch-env.sh`.
"""

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", type=int, nargs="+", required=True,
                        help="layer widths, inputs first and classes last, e.g. 64 64 10")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--samples", type=int, default=2048, help="rows of the random dataset")
    parser.add_argument("--threads", type=int, required=True, help="torch intra-op threads")
    parser.add_argument("--steps", type=int, default=20, help="steps per timing round")
    parser.add_argument("--rounds", type=int, default=5, help="timing rounds; the median is reported")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.9)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    layers = []
    for index, (fan_in, fan_out) in enumerate(zip(args.widths, args.widths[1:])):
        layers.append(torch.nn.Linear(fan_in, fan_out))
        if index + 2 < len(args.widths):
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    features = torch.rand(args.samples, args.widths[0])
    labels = torch.randint(0, args.widths[-1], (args.samples,))
    generator = torch.Generator().manual_seed(1)

    def step() -> float:
        index = torch.randint(0, args.samples, (args.batch,), generator=generator)
        logits = model(features[index])
        loss = F.cross_entropy(logits, labels[index])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.item()

    for _ in range(max(3, args.steps // 4)):
        step()
    rounds = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        rounds.append((time.perf_counter() - start) / args.steps * 1e3)
    print(json.dumps({
        "ms_per_step": statistics.median(rounds),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
