"""The MQAR recall sweep: train the 2-layer toy models of ``attnlab.train`` and print a table.

    .venv/bin/python benchmarks/recall_sweep.py                      # the lesson's default run
    .venv/bin/python benchmarks/recall_sweep.py --n-pairs 4 8 16 --seeds 0 1 2 --steps 800

A mixer is a kind (two layers of it) or a pattern joined by '+', e.g. ``kda+attn``. One row per
(mixer, N): accuracy per seed and mean, steps run, wall and CPU seconds per run (with one
thread, CPU time is what the run would take on an idle machine), and the totals.
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
    parser.add_argument("--vocab-size", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--eval-size", type=int, default=512)
    parser.add_argument("--threads", type=int, default=1)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    mixers = [m if "+" not in m else tuple(m.split("+")) for m in args.mixers]
    start = time.perf_counter()
    rows = []
    for n_pairs in args.n_pairs:
        for mixer in mixers:
            for seed in args.seeds:
                cpu = time.process_time()
                (row,) = run_recall_experiment(
                    [mixer], [n_pairs], seeds=[seed], steps=args.steps, d_model=args.d_model,
                    head_dim=args.head_dim, vocab_size=args.vocab_size,
                    batch_size=args.batch_size, lr=args.lr, eval_size=args.eval_size,
                    threads=args.threads, progress=False,
                )
                row["cpu_seconds"] = time.process_time() - cpu
                print(f"  {row['mixer']} N={n_pairs} seed={seed}: accuracy {row['accuracy']:.3f}"
                      f" after {row['steps']} steps, {row['seconds']:.1f} s "
                      f"({row['cpu_seconds']:.1f} s CPU)", flush=True)
                rows.append(row)
    total = time.perf_counter() - start
    groups: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for row in rows:
        groups[row["mixer"], row["n_pairs"]].append(row)
    print(f"MQAR, d_model {args.d_model}, head_dim {args.head_dim or args.d_model}, "
          f"vocab {args.vocab_size}, batch {args.batch_size}, lr {args.lr}, "
          f"≤{args.steps} steps, seeds {args.seeds}")
    print(f"{'mixer':<12} {'N':>3}  {'accuracy per seed':<24} {'mean':>6} {'steps':>12} "
          f"{'s/run':>6} {'CPU s/run':>9}")
    for (mixer, n), runs in groups.items():
        accs = " ".join(f"{r['accuracy']:.3f}" for r in runs)
        mean = sum(r["accuracy"] for r in runs) / len(runs)
        steps = "/".join(str(r["steps"]) for r in runs)
        seconds = sum(r["seconds"] for r in runs) / len(runs)
        cpu = sum(r["cpu_seconds"] for r in runs) / len(runs)
        print(f"{mixer:<12} {n:>3}  {accs:<24} {mean:>6.3f} {steps:>12} {seconds:>6.1f} "
              f"{cpu:>9.1f}")
    print(f"total {total:.1f} s wall, {time.process_time():.1f} s CPU (this process)")


if __name__ == "__main__":
    main()
