"""Chunkwise kernels against their token-by-token recurrences, on this CPU.

B = 1, H = 4, Dk = Dv = 64, float32, T in {256, 1024, 4096}, with torch's default number of
threads (one per core: what a notebook gets) and again on one thread. For each kernel: time of
the recurrent and chunkwise forms (best of a few runs), the speed-up, the largest difference
between their outputs, and the achieved GFLOP/s for the *nominal* work of the recurrence
(the multiply-adds of its update and read-out, counted the same for both forms), next to this
machine's measured float32 matmul GFLOP/s: one 512 × 512 product, and 256 batched 64 × 64 ones
(the chunkwise kernels' own kind of work, and the reading that moves with the neighbours).

Before measuring, glibc's malloc is told to keep freed memory for reuse (``keep_freed_memory``):
by default it returns every large block to the system, and the next tensor of that size then
page-faults its memory in again, which adds a random 0–100 % to the chunkwise times depending on
the heap's history. Both forms run under the same setting.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

import attnlab as al
import torch
from attnbook.timing import best_seconds

B, H, D = 1, 4, 64
LENGTHS = (256, 1024, 4096)

#: multiply-adds × 2 per token per head, per unit Dk·Dv, of each recurrence
#: (update k vᵀ, read-out Sᵀq, plus the decay and the delta rule's retrieval Sᵀk)
NOMINAL_FLOPS_PER_DKDV = {"linear": 4, "gla": 5, "delta": 6, "gated_delta": 7, "kda": 7}


def inputs(t: int, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, t, D, generator=g) for _ in range(3))
    k = k / k.norm(dim=-1, keepdim=True)
    return {
        "q": q, "k": k, "v": v,
        "g_channel": -torch.rand(B, H, t, D, generator=g) * 0.1,
        "g_scalar": -torch.rand(B, H, t, generator=g) * 0.1,
        "beta": torch.rand(B, H, t, generator=g),
    }


def kernels(x: dict[str, torch.Tensor]) -> dict[str, tuple[Callable, Callable]]:
    q, k, v = x["q"], x["k"], x["v"]
    gc, gs, beta = x["g_channel"], x["g_scalar"], x["beta"]
    return {
        "linear": (lambda: al.linear_attention_recurrent(q, k, v),
                   lambda: al.linear_attention_chunk(q, k, v)),
        "gla": (lambda: al.gla_recurrent(q, k, v, g=gc), lambda: al.gla_chunk(q, k, v, g=gc)),
        "delta": (lambda: al.delta_rule_recurrent(q, k, v, beta=beta),
                  lambda: al.delta_rule_chunk(q, k, v, beta=beta)),
        "gated_delta": (lambda: al.gated_delta_rule_recurrent(q, k, v, g=gs, beta=beta),
                        lambda: al.gated_delta_rule_chunk(q, k, v, g=gs, beta=beta)),
        "kda": (lambda: al.kda_recurrent(q, k, v, g=gc, beta=beta),
                lambda: al.kda_chunk(q, k, v, g=gc, beta=beta)),
    }


def best_time(fn: Callable, repeats: int) -> tuple[float, torch.Tensor]:
    """``attnbook.timing.best_seconds`` of ``repeats`` calls (no warm-up), and the output
    ``fn()[0]`` of the last call (to compare the two forms without running them again)."""
    outputs = []
    seconds = best_seconds(lambda: outputs.append(fn()[0]), repeats=repeats, warmup=False)
    return seconds, outputs[-1]


def matmul_gflops(n: int = 512, repeats: int = 10) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    seconds, _ = best_time(lambda: (a @ b,), repeats)
    return 2 * n**3 / seconds / 1e9


def batched_matmul_gflops(batch: int = 256, n: int = 64, repeats: int = 10) -> float:
    """GFLOP/s of ``batch`` independent n × n float32 products in one call: the chunkwise
    kernels' typical operation at T = 4096 (B·H·N = 4 · 64 chunks of 64 tokens), 4 MiB per
    operand. Unlike the 512 × 512 product, whose operands fit in a core's own cache, this one
    reads and writes the cache and memory the machine shares with its neighbours, so on a
    shared machine its rate can drop while the 512 × 512 rate holds: read the chunkwise times
    against it."""
    a, b = torch.randn(batch, n, n), torch.randn(batch, n, n)
    seconds, _ = best_time(lambda: (a @ b,), repeats)
    return 2 * batch * n**3 / seconds / 1e9


def keep_freed_memory() -> bool:
    """Keep freed blocks up to 32 MiB in the heap, and never trim it (glibc ``mallopt``);
    False where there is no glibc."""
    path = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(path)
        m_trim_threshold, m_mmap_threshold = -1, -3
        return bool(libc.mallopt(m_mmap_threshold, 32 * 2**20)
                    and libc.mallopt(m_trim_threshold, 2**30))
    except (OSError, AttributeError, TypeError):
        return False


def measure(threads: int, rounds: int = 3) -> list[dict]:
    """Every kernel at every length, on ``threads`` threads: the best time of each form over
    ``rounds`` rounds that visit every kernel in turn, so that both forms get several chances
    spread over a minute (this machine's speed drifts with its neighbours)."""
    torch.set_num_threads(threads)
    best: dict[tuple[str, int], dict] = {}
    for _ in range(rounds):
        for t in LENGTHS:
            for name, (recurrent, chunk) in kernels(inputs(t)).items():
                t_rec, o_rec = best_time(recurrent, 1)
                t_chunk, o_chunk = best_time(chunk, 3)
                row = best.setdefault((name, t), {"kernel": name, "T": t, "recurrent_ms": 1e9,
                                                  "chunk_ms": 1e9})
                row["recurrent_ms"] = min(row["recurrent_ms"], t_rec * 1000)
                row["chunk_ms"] = min(row["chunk_ms"], t_chunk * 1000)
                row["max_abs_diff"] = float((o_rec - o_chunk).abs().max())
    for (name, t), row in best.items():
        row["speedup"] = row["recurrent_ms"] / row["chunk_ms"]
        flops = NOMINAL_FLOPS_PER_DKDV[name] * B * H * t * D * D
        row["chunk_gflops"] = flops / (row["chunk_ms"] / 1000) / 1e9
    return list(best.values())


def main() -> dict:
    """Rows at the default thread count, each with its one-thread speed-up beside it."""
    tuned = keep_freed_memory()
    threads = torch.get_num_threads()
    matmul, batched, results = {}, {}, {}
    for n in (threads, 1):
        torch.set_num_threads(n)
        matmul[n], batched[n] = matmul_gflops(), batched_matmul_gflops()
        results[n] = measure(n)
    torch.set_num_threads(threads)
    for row, single in zip(results[threads], results[1], strict=True):
        row["speedup_1_thread"] = single["speedup"]
    return {"threads": threads, "malloc_tuned": tuned, "matmul_gflops": matmul,
            "batched_matmul_gflops": batched, "rows": results[threads]}


if __name__ == "__main__":
    report = main()
    print({k: v for k, v in report.items() if k != "rows"})
    for row in report["rows"]:
        print(row)
