"""Lesson 13's "going deeper" on a GPU: sizing one chunk of the delta rule for an H100 from its
public specifications, and what a low-precision triangular solve does to the pseudo-values.

Arithmetic only, from :func:`attnbook.costs.delta_rule_cost` and the byte sizes of the tensors
one chunk of one head touches; nothing here runs on a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from attnbook.costs import delta_rule_cost
from attnlab.checks import check_positive_int
from attnlab.delta import ut_transform


@dataclass(frozen=True)
class GpuSpec:
    """Public figures of one GPU: streaming multiprocessors, shared memory per SM and per
    thread block (KB = 1,024 bytes, as NVIDIA writes them), HBM bandwidth (TB/s = 10¹² B/s) and
    dense bf16 tensor-core throughput with fp32 accumulation (TFLOP/s = 10¹² FLOP/s)."""

    name: str
    sms: int
    shared_kb_per_sm: int
    shared_kb_per_block: int
    hbm_tb_per_s: float
    bf16_dense_tflops: float


#: NVIDIA H100 SXM5 80 GB: 132 SMs; up to 228 KB of shared memory per SM, 227 KB per thread
#: block (Hopper tuning guide, §1.4.1); 3.35 TB/s of HBM3 and 989 TFLOP/s of dense bf16
#: (datasheet: 1,979 with 2:4 sparsity).
H100_SXM = GpuSpec("H100 SXM", 132, 228, 227, 3.35, 989.0)

BF16, FP32 = 2, 4  # bytes per number


def chunk_hbm_bytes(chunk_size: int, head_dim: int) -> int:
    """Bytes one chunk of one head must read from and write to HBM in the forward pass, at the
    least: Q, K, V in and O out in bf16 (C × d each), β in bf16 (C). The state stays on chip."""
    c = check_positive_int("chunk_size", chunk_size)
    d = check_positive_int("head_dim", head_dim)
    return (4 * c * d + c) * BF16


def chunk_on_chip_bytes(chunk_size: int, head_dim: int) -> dict[str, int]:
    """What one chunk of one head holds on chip at once, by part: the Q, K, V tiles (bf16), the
    state S (d × d, fp32), the C × C matrices A_qk and 𝒯 (fp32, the solve's precision) and the
    C × d blocks W and U (fp32)."""
    c = check_positive_int("chunk_size", chunk_size)
    d = check_positive_int("head_dim", head_dim)
    return {
        "Q, K, V (bf16)": 3 * c * d * BF16,
        "state S (fp32)": d * d * FP32,
        "A_qk and 𝒯 (fp32)": 2 * c * c * FP32,
        "W and U (fp32)": 2 * c * d * FP32,
    }


def chunk_flops(chunk_size: int, head_dim: int) -> int:
    """FLOPs of one chunk of one head, as :func:`attnbook.costs.delta_rule_cost` counts them."""
    return delta_rule_cost("chunk", chunk_size, head_dim, chunk_size).flops


def stored_error(
    chunk_size: int = 64, head_dim: int = 128, seed: int = 0
) -> float:
    """Relative error (max-norm) of the exact pseudo-values U of ``solve_error``'s chunk when
    they are only *stored* in bf16: the floor that any bf16 pipeline pays."""
    k, v, beta = _chunk(chunk_size, head_dim, seed)
    _, exact = ut_transform(
        k[None, None], v[None, None], beta=beta[None, None]
    )
    return (
        (exact.bfloat16().double() - exact).abs().max() / exact.abs().max()
    ).item()


def _chunk(chunk_size: int, head_dim: int, seed: int):
    """One chunk in float64: unit keys [C, d], values [C, d], β uniform in (0, 1) [C]."""
    gen = torch.Generator().manual_seed(seed)
    k = F.normalize(
        torch.randn(chunk_size, head_dim, generator=gen, dtype=torch.float64),
        dim=-1,
    )
    v = torch.randn(chunk_size, head_dim, generator=gen, dtype=torch.float64)
    beta = torch.rand(chunk_size, generator=gen, dtype=torch.float64)
    return k, v, beta


def solve_error(
    dtype: torch.dtype,
    chunk_size: int = 64,
    head_dim: int = 128,
    seed: int = 0,
) -> float:
    """Relative error (max-norm) of the pseudo-values U = 𝒯 diag(β) V when the chunk's unit
    lower-triangular system is solved by forward substitution with every operation rounded to
    ``dtype``, against ``ut_transform`` in float64: unit keys, β uniform in (0, 1), one chunk.
    """
    k, v, beta = _chunk(chunk_size, head_dim, seed)
    _, exact = ut_transform(
        k[None, None], v[None, None], beta=beta[None, None]
    )
    lower = (beta[:, None] * (k @ k.T)).tril(-1).to(dtype)  # L − I
    rhs = (beta[:, None] * v).to(dtype)
    rows = []
    for r in range(chunk_size):  # u_r = β_r v_r − Σ_{i<r} (L − I)[r, i] u_i
        done = torch.stack(rows) if rows else rhs[:0]
        rows.append(rhs[r] - lower[r, :r] @ done)
    u = torch.stack(rows).double()
    return ((u - exact[0, 0]).abs().max() / exact.abs().max()).item()
