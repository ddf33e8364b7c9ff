"""Lesson 14's ablation: the recall toy's KDA in full, without short convolution, without
output norm, over seeds.

    .venv/bin/python benchmarks/ablation_study.py                    # the shipped ablation
    .venv/bin/python benchmarks/ablation_study.py --seeds 0 --out /tmp/ablation.json

Every run is one cell of the recall study (``attnbook.recall_study.train_cell``: the same
budget, early stopping, validation and test sets) at N pairs, with the learning rate the shipped
recall study chose for KDA at that N (unless ``--lr``). The results go to a temporary file that
is renamed to ``--out`` at the end; Lesson 14 reads them (``attnbook.ablation.load_ablation``).
One thread.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import torch
from attnbook.ablation import ABLATION_PATH, ABLATION_PATTERN, VARIANTS, ablation_model
from attnbook.recall_study import (
    STUDY_PATH,
    StudyConfig,
    config_dict,
    load_study,
    pattern_label,
    summarize,
    train_cell,
)
from recall_sweep import git_commit, machine


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-pairs", type=int, default=2,
                        help="MQAR pairs (default: 2, where the study's KDA recalls best)")
    parser.add_argument("--lr", type=float, default=None,
                        help="learning rate (default: the shipped recall study's choice)")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(10)))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--out", type=Path, default=ABLATION_PATH)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    config = StudyConfig()
    lr = args.lr
    if lr is None:
        lr = summarize(load_study(STUDY_PATH))[pattern_label(ABLATION_PATTERN), args.n_pairs].lr
    settings = {"pattern": list(ABLATION_PATTERN), "n_pairs": args.n_pairs, "lr": lr,
                "seeds": args.seeds, "variants": args.variants, "config": config_dict(config)}
    meta = {"command": "python benchmarks/ablation_study.py " + shlex.join(sys.argv[1:]),
            "git_commit": git_commit(),
            "started": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine()}
    rows = []
    start = time.perf_counter()
    for seed in args.seeds:
        for variant in args.variants:
            row = train_cell(ABLATION_PATTERN, args.n_pairs, lr, seed, config,
                             make_model=partial(ablation_model, variant))
            rows.append({"variant": variant, **row})
            print(f"{variant:<8} seed={seed}: test {row['accuracy']:.3f} "
                  f"(val {row['val_accuracy']:.3f}), {row['steps']} steps, "
                  f"{row['cpu_seconds']:.1f} s CPU", flush=True)
    meta["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    meta["wall_seconds"] = round(time.perf_counter() - start, 1)
    meta["cpu_seconds"] = round(sum(r["cpu_seconds"] for r in rows), 1)
    temporary = args.out.with_name(args.out.name + ".tmp")
    temporary.write_text(json.dumps({"meta": meta, "settings": settings, "rows": rows},
                                    indent=1) + "\n")
    temporary.replace(args.out)


if __name__ == "__main__":
    main()
