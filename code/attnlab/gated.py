"""Decayed and gated linear attention (MATH.md §3): the state forgets, channel by channel.

Before each write the state is multiplied by a decay ``α_t = exp(g_t) ∈ (0, 1]``:

    S_t = Diag(α_t) S_{t-1} + k_t v_tᵀ,        o_t = S_tᵀ (s q_t)

One kernel covers three models, by the shape and origin of the log-gate ``g = log α ≤ 0``:

- RetNet: a fixed scalar per head, ``g_t = log γ_h`` with ``γ_h = 1 - 2^(-5-h)``
  (``retnet_decay``, ``retnet_gate``); ``g`` is ``[B, H, T]``.
- Mamba-2 / SSD: a data-dependent scalar per head and step,
  ``g = -exp(A_log)·softplus(x + dt_bias)``
  (``softplus_decay_gate``); ``g`` is ``[B, H, T]``.
- GLA: a data-dependent decay per key channel, ``g`` is ``[B, H, T, Dk]``.

A scalar gate is the per-channel gate broadcast over Dk. The chunkwise form needs the decay
between two positions, ``exp(B_i - B_j)`` with ``B`` the cumulative log-gate inside a chunk; it is
always formed from differences (never ``exp(-B)`` alone, which overflows float32 once
``-B ≳ 88``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._checks import (
    check_positive_int,
    check_range,
    check_tensor,
    resolve_scale,
)
from .linear import (
    check_qkv,
    chunk_states,
    merge_chunks,
    split_chunks,
)

MAX_FACTORISED_SPAN = 40.0
"""Largest log-decay inside a block (per channel) for which ``channel_decay_scores`` uses one
reference point: the factors then lie in e^(±20), far from float32 overflow and underflow."""

GLA_GATE_NORMALIZER = 16.0
"""GLA's gate is ``logsigmoid(·) / 16`` (FLA ``gate_logit_normalizer``): decays close to 1."""


# --------------------------------------------------------------------------- checks
def check_gate(g: object, sizes: dict[str, int], q: torch.Tensor) -> torch.Tensor:
    """Check a log-gate: ``[B, H, T]`` (scalar per head) or ``[B, H, T, Dk]`` (per channel),
    finite, ``<= 0`` (a decay α = exp(g) <= 1), with q's dtype and device."""
    if isinstance(g, torch.Tensor) and g.dim() == 3:
        check_tensor("g", g, ("B", "H", "T"), sizes, dtype=q.dtype, device=q.device)
    elif isinstance(g, torch.Tensor) and g.dim() != 4:
        raise ValueError(f"g: expected a 3-D tensor [B, H, T] or a 4-D tensor [B, H, T, Dk], "
                         f"got shape {tuple(g.shape)}")
    else:
        check_tensor("g", g, ("B", "H", "T", "Dk"), sizes, dtype=q.dtype, device=q.device)
    if g.numel():
        lowest, highest = torch.aminmax(g)  # one pass; NaN propagates to both
        if highest.isnan():
            raise ValueError("g: contains NaN")
        if highest > 0:
            raise ValueError(f"g: expected log-gates <= 0 (decay α = exp(g) <= 1), "
                             f"got max {highest.item():.4g}")
        if lowest.isinf():
            raise ValueError("g: expected finite log-gates (g = log α, α > 0), got -inf")
    return g


def decay_exp(x: torch.Tensor) -> torch.Tensor:
    """exp(x) for a log-decay x <= 0, floored just above the smallest normal float: at
    e^-86.3 (3.3e-38) in float32, e^-707.4 in float64.

    On x86 CPUs, exp of numbers near or below the underflow limit (and of -inf) takes a slow
    path, 10 to 40 times slower (measured with torch 2.13). The floor changes a decay factor
    by less than 3.3e-38 in float32, far below the precision of any sum it enters.
    """
    return torch.exp(x.clamp(min=math.log(torch.finfo(x.dtype).tiny) + 1))


def _per_channel(g: torch.Tensor) -> torch.Tensor:
    """``[B, H, T]`` -> ``[B, H, T, 1]`` (broadcasts over Dk); a per-channel gate is unchanged."""
    return g.unsqueeze(-1) if g.dim() == 3 else g


# --------------------------------------------------------------------------- kernels
def gla_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    g: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Gated linear attention token by token, the definition:

        S_t = Diag(α_t) S_{t-1} + k_t v_tᵀ,     α_t = exp(g_t),     o_t = S_tᵀ (s q_t)

    q, k ``[B, H, T, Dk]``, v ``[B, H, T, Dv]``, g ``[B, H, T, Dk]`` (GLA: one decay per key
    channel) or ``[B, H, T]`` (one per head: Mamba-2/SSD; a constant ``g = log γ`` is RetNet),
    ``g <= 0``; state ``[B, H, Dk, Dv]``. Returns ``(o [B, H, T, Dv], S_T or None)``.
    """
    sizes = check_qkv(q, k, v, initial_state)
    alpha = torch.exp(_per_channel(check_gate(g, sizes, q)))  # [B, H, T, Dk or 1]
    q = q * resolve_scale(scale, sizes["Dk"])
    state = initial_state
    if state is None:
        state = q.new_zeros(sizes["B"], sizes["H"], sizes["Dk"], sizes["Dv"])
    outputs = []
    for t in range(sizes["T"]):
        q_t, k_t, v_t, alpha_t = q[:, :, t], k[:, :, t], v[:, :, t], alpha[:, :, t]
        # S_t = Diag(α_t) S_{t-1} + k_t v_tᵀ
        state = alpha_t.unsqueeze(-1) * state + k_t.unsqueeze(-1) * v_t.unsqueeze(-2)
        outputs.append(torch.einsum("bhkv,bhk->bhv", state, q_t))  # o_t = S_tᵀ q_t
    return torch.stack(outputs, dim=2), (state if output_final_state else None)


def segment_decay(b: torch.Tensor) -> torch.Tensor:
    """Γ_ij = exp(b_i - b_j) for j <= i, else 0: the decay from step j to step i.

    b ``[..., C]`` (cumulative log-gates) -> Γ ``[..., C, C]``. The difference is taken first
    and clipped to <= 0 before ``exp`` (above the diagonal it is >= 0 and would overflow), then
    the upper triangle is zeroed.
    """
    diff = (b.unsqueeze(-1) - b.unsqueeze(-2)).clamp(max=0)
    return decay_exp(diff).tril()  # tril, not a masked fill: about 10x faster on a CPU


def channel_decay_scores(q: torch.Tensor, k: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A_ij = Σ_d q_id k_jd exp(B_id - B_jd) for j <= i (else 0), never forming exp(±B) alone.

    q, k ``[..., C, Dk]``; b ``[..., C, Dk]`` holds B, the cumulative log-gates along C (it only
    decreases). Returns A ``[..., C, C]``. If the decay inside the block is small (span
    ``B_first - B_last <= MAX_FACTORISED_SPAN`` in every channel), one reference point serves
    the whole block (``factorised_decay_scores``). Otherwise split it into an earlier half E
    and a later half L, with ``r`` the value of B at the last position of E:

        A = [[A_EE, 0], [A_LE, A_LL]],    exp(B_i - B_j) = exp(B_i - r) · exp(r - B_j)  (i∈L, j∈E)

    Both factors are <= 1, so ``A_LE`` is the matmul of ``q ⊙ exp(B - r)`` and
    ``k ⊙ exp(r - B)``: bounded tensors. A_EE and A_LL are computed the same way (all blocks of
    one level in one batched call). At most log2(C) levels, each one pass over q and k; finite
    for any gates.
    """
    size = q.shape[-2]
    if size == 1 or b.numel() == 0 or (b[..., 0, :] - b[..., -1, :]).max() <= MAX_FACTORISED_SPAN:
        return factorised_decay_scores(q, k, b)
    if size % 2:  # one more step with a zero query and key and no decay, cropped at the end
        q, k = (F.pad(x, (0, 0, 0, 1)) for x in (q, k))
        b = torch.cat([b, b[..., -1:, :]], dim=-2)
    half = (size + 1) // 2
    r = b[..., half - 1 : half, :]  # B at the end of the earlier half
    q_later = q[..., half:, :] * decay_exp(b[..., half:, :] - r)
    k_earlier = k[..., :half, :] * decay_exp(r - b[..., :half, :])
    cross = q_later @ k_earlier.transpose(-1, -2)  # A_LE
    inner = channel_decay_scores(*(x.unflatten(-2, (2, half)) for x in (q, k, b)))
    scores = torch.cat([
        torch.cat([inner[..., 0, :, :], torch.zeros_like(cross)], dim=-1),  # [A_EE, 0]
        torch.cat([cross, inner[..., 1, :, :]], dim=-1),  # [A_LE, A_LL]
    ], dim=-2)
    return scores[..., :size, :size]


def factorised_decay_scores(q: torch.Tensor, k: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A = ((Q ⊙ e^(B - r)) (K ⊙ e^(r - B))ᵀ) ⊙ M with one reference point per block and
    channel, r = (B_first + B_last) / 2.

    Exact, since e^(B_i - r) e^(r - B_j) = e^(B_i - B_j), but the factors reach
    e^(±span/2) with span = B_first - B_last: safe for spans up to ``MAX_FACTORISED_SPAN``
    only (with -20 per step over 64 steps they overflow float32). Shapes as
    ``channel_decay_scores``.
    """
    r = (b[..., :1, :] + b[..., -1:, :]) / 2
    scores = (q * torch.exp(b - r)) @ (k * torch.exp(r - b)).transpose(-1, -2)
    return scores.tril_()


def channel_decay_terms(
    rows: tuple[torch.Tensor, ...], k: torch.Tensor, b: torch.Tensor
) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
    """Every decayed term a chunkwise kernel with per-channel gates needs, for one or more row
    tensors x (GLA: q; KDA: q and k) against the keys k of the same chunks:

        A_x[i, j] = Σ_d x_id k_jd e^(B_id − B_jd) [j ≤ i],     x ⊙ e^B,     k ⊙ e^(b_C − B)

    rows and k ``[..., C, Dk]``; b ``[..., C, Dk]`` holds B, the cumulative log-gates (b_C its
    last row). Returns ([A_x ``[..., C, C]`` per row tensor], [x ⊙ e^B per row tensor],
    k ⊙ e^(b_C − B)).

    When every block's decay span B_first − B_last is at most ``MAX_FACTORISED_SPAN``, all of
    them come from one exponential, f = e^(B − r) with r = (B_first + B_last) / 2, and 1 / f:

        A_x = ((x ⊙ f) (k ⊙ 1/f)ᵀ) ⊙ M
        x ⊙ e^B = (x ⊙ f) ⊙ e^r
        k ⊙ e^(b_C − B) = (k ⊙ 1/f) ⊙ e^(b_C − r)

    (f and 1/f stay within e^(±span/2)). Otherwise ``channel_decay_scores`` splits the blocks and
    ``decay_exp`` takes the two decays directly; both ways every factor stays finite.
    """
    b_last = b[..., -1:, :]
    if b.shape[-2] > 1 and (b[..., 0, :] - b[..., -1, :]).max() > MAX_FACTORISED_SPAN:
        scores = [channel_decay_scores(x, k, b) for x in rows]
        return scores, [x * decay_exp(b) for x in rows], k * decay_exp(b_last - b)
    r = (b[..., :1, :] + b_last) / 2
    up = torch.exp(b - r)  # f = e^(B − r)
    k_down = k / up  # k ⊙ e^(r − B)
    x_up = [x * up for x in rows]
    scores = [(x @ k_down.transpose(-1, -2)).tril_() for x in x_up]
    from_start = torch.exp(r)  # e^r [..., 1, Dk]
    return scores, [x * from_start for x in x_up], k_down * torch.exp(b_last - r)


def gla_chunk(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    g: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Gated linear attention chunk by chunk (MATH.md §3b–3c). With B the cumulative log-gate
    inside chunk n (inclusive) and b_C its last row:

        O_[n]   = (s Q ⊙ e^B) S_[n] + A V,     A_ij = Σ_d s q_id k_jd e^(B_id - B_jd) [j <= i]
        S_[n+1] = Diag(e^(b_C)) S_[n] + (K ⊙ e^(b_C - B))ᵀ V

    Every exponent in the state path is <= 0. A is built by ``segment_decay`` for a scalar gate
    and by ``channel_decay_scores`` for a per-channel one. Arguments and shapes as
    ``gla_recurrent``; any T works (the last chunk is padded with zero gates).
    """
    sizes = check_qkv(q, k, v, initial_state)
    g = check_gate(g, sizes, q)
    # a sequence shorter than one chunk is one chunk: no padding work
    chunk_size = min(check_positive_int("chunk_size", chunk_size), sizes["T"])
    q = q * resolve_scale(scale, sizes["Dk"])
    if initial_state is None:
        initial_state = q.new_zeros(sizes["B"], sizes["H"], sizes["Dk"], sizes["Dv"])
    qc, kc, vc, gc = (split_chunks(x, chunk_size) for x in (q, k, v, _per_channel(g)))
    b = gc.cumsum(-2)  # B [B, H, N, C, Dk or 1]
    b_last = b[..., -1:, :]  # b_C [B, H, N, 1, Dk or 1]
    if g.dim() == 3:
        scores = (qc @ kc.transpose(-1, -2)) * segment_decay(b.squeeze(-1))
        q_from_start, k_to_end = qc * decay_exp(b), kc * decay_exp(b_last - b)
    else:
        [scores], [q_from_start], k_to_end = channel_decay_terms((qc,), kc, b)
    increments = k_to_end.transpose(-1, -2) @ vc  # [B, H, N, Dk, Dv]
    states, final = chunk_states(initial_state, increments, decay_exp(b_last).transpose(-1, -2))
    o = q_from_start @ states + scores @ vc
    return merge_chunks(o, sizes["T"]), (final if output_final_state else None)


# --------------------------------------------------------------------------- gates
def retnet_decay(
    n_heads: int, *, dtype: torch.dtype = torch.float32, device: torch.device | None = None
) -> torch.Tensor:
    """RetNet's fixed per-head decays in log space: ``log γ_h`` with ``γ_h = 1 - 2^(-5-h)``.

    Returns ``[H]``: head 0 forgets fastest (γ = 0.96875), each further head twice as slowly.
    """
    exponents = -5.0 - torch.arange(check_positive_int("n_heads", n_heads), dtype=torch.float64)
    return torch.log1p(-torch.exp2(exponents)).to(dtype=dtype, device=device)


def retnet_gate(
    batch: int,
    n_heads: int,
    seq_len: int,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | None = None,
) -> torch.Tensor:
    """The scalar gate ``g [B, H, T]`` that makes ``gla_*`` compute RetNet's retention:
    ``g[:, h, :] = log γ_h``, so ``O = (s Q Kᵀ ⊙ D) V`` with ``D_ij = γ^(i-j) [j <= i]``."""
    log_gamma = retnet_decay(n_heads, dtype=dtype, device=device)
    return log_gamma[None, :, None].expand(check_positive_int("batch", batch), n_heads,
                                           check_positive_int("seq_len", seq_len))


def softplus_decay_gate(
    x: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor  # noqa: N803 (Mamba's name)
) -> torch.Tensor:
    """The Mamba-2 decay, shared by Mamba-2, Gated DeltaNet and KDA:

        g = -exp(A_log) · softplus(x + dt_bias)        (= Δ·A with A = -exp(A_log) < 0)

    ``x`` are the raw gate projections; ``A_log`` and ``dt_bias`` broadcast against x's
    trailing axes and must not enlarge it. Scalar gate: x ``[..., H]``, ``A_log [H]``,
    ``dt_bias [H]``. Per channel (KDA): x ``[..., H, Dk]``, ``A_log [H, 1]``, ``dt_bias [H, Dk]``.
    Returns g with x's shape, ``g <= 0``.
    """
    for name, t in (("x", x), ("A_log", A_log), ("dt_bias", dt_bias)):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            raise ValueError(f"{name}: expected a float tensor, got {type(t).__name__}")
    for name, t in (("A_log", A_log), ("dt_bias", dt_bias)):
        try:
            shape = torch.broadcast_shapes(x.shape, t.shape)
        except RuntimeError:
            shape = None
        if shape != x.shape:
            raise ValueError(f"{name}: expected a shape that broadcasts to x's {tuple(x.shape)}, "
                             f"got {tuple(t.shape)}")
    return -torch.exp(A_log) * F.softplus(x + dt_bias)


def init_softplus_decay(
    n_heads: int,
    dt_size: int,
    *,
    a_range: tuple[float, float] = (1.0, 16.0),
    dt_range: tuple[float, float] = (1e-3, 1e-1),
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mamba-2's initial ``(A_log [n_heads], dt_bias [dt_size])`` for ``softplus_decay_gate``:
    ``A ~ U(a_range)``, and ``dt_bias = softplus⁻¹(Δ)`` with Δ log-uniform in ``dt_range``,
    so that at x = 0 the step Δ = softplus(dt_bias) starts in ``dt_range``."""
    a = torch.empty(check_positive_int("n_heads", n_heads)).uniform_(*a_range)
    log_dt = torch.empty(check_positive_int("dt_size", dt_size)).uniform_(
        math.log(dt_range[0]), math.log(dt_range[1]))
    dt = torch.exp(log_dt)
    return torch.log(a), dt + torch.log(-torch.expm1(-dt))  # softplus⁻¹(Δ) = Δ + log(1 - e^-Δ)


def effective_horizon(g: torch.Tensor | float) -> torch.Tensor:
    """The memory horizon of a decay α = exp(g): ``1 / (1 - α)``, the total weight
    ``Σ_{n>=0} αⁿ`` of a geometric past (infinite for α = 1). Elementwise, any shape."""
    if not isinstance(g, torch.Tensor):
        g = torch.tensor(float(g))
    check_range("g", g, None, 0.0)
    return torch.where(g == 0, math.inf, -1.0 / torch.expm1(g))  # expm1: exact for α near 1
