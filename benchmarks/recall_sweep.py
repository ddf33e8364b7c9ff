"""The MQAR recall sweep: train the 2-layer toy models of ``attnlab.train`` and print a table.

    .venv/bin/python benchmarks/recall_sweep.py                      # the lesson's default run
    .venv/bin/python benchmarks/recall_sweep.py --n-pairs 4 8 16 --seeds 0 1 2 --steps 800

A mixer is a kind (two layers of it) or a pattern joined by '+', e.g. ``kda+attn``. One row per
(mixer, N): accuracy per seed and mean, steps run, seconds (mean per run) and total time.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

from attnlab.train import run_recall_experiment

DEFAULT_MIXERS = ["attn", "deltanet", "gdn", "kda", "linear", "kda+attn"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mixers", nargs="+", default=DEFAULT_MIXERS)
    parser.add_argument("--n-pairs", nargs="+", type=int, default=[8])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--head-dim", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--eval-size", type=int, default=512)
    parser.add_argument("--threads", type=int, default=1)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    mixers = [m if "+" not in m else tuple(m.split("+")) for m in args.mixers]
    start = time.perf_counter()
    rows = run_recall_experiment(
        mixers, args.n_pairs, seeds=args.seeds, steps=args.steps, d_model=args.d_model,
        head_dim=args.head_dim, batch_size=args.batch_size, lr=args.lr,
        eval_size=args.eval_size, threads=args.threads, progress=False,
    )
    total = time.perf_counter() - start
    groups: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for row in rows:
        groups[row["mixer"], row["n_pairs"]].append(row)
    print(f"MQAR, d_model {args.d_model}, head_dim {args.head_dim or args.d_model}, "
          f"batch {args.batch_size}, lr {args.lr}, ≤{args.steps} steps, seeds {args.seeds}")
    print(f"{'mixer':<12} {'N':>3}  {'accuracy per seed':<24} {'mean':>6} {'steps':>12} "
          f"{'s/run':>6}")
    for (mixer, n), runs in groups.items():
        accs = " ".join(f"{r['accuracy']:.3f}" for r in runs)
        mean = sum(r["accuracy"] for r in runs) / len(runs)
        steps = "/".join(str(r["steps"]) for r in runs)
        seconds = sum(r["seconds"] for r in runs) / len(runs)
        print(f"{mixer:<12} {n:>3}  {accs:<24} {mean:>6.3f} {steps:>12} {seconds:>6.1f}")
    print(f"total {total:.1f} s")


if __name__ == "__main__":
    main()
