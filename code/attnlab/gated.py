"""Decayed and gated linear attention (the Notation appendix, §3): the state forgets, channel
by channel.

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
``-B ≳ 88``). ``gla_chunk_reference`` writes it out chunk by chunk; ``gla_chunk`` computes the
same numbers with the private fast engine (``attnlab._chunk_engine``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from . import _chunk_engine as engine
from ._chunk_engine import decay_exp
from .checks import (
    check_positive_int,
    check_range,
    check_tensor,
    resolve_scale,
)
from .linear import check_qkv

GLA_GATE_NORMALIZER = 16.0
"""GLA's gate is ``logsigmoid(·) / 16`` (FLA ``gate_logit_normalizer``): decays close to 1."""


# --------------------------------------------------------------------------- checks
def check_gate(
    g: object, sizes: dict[str, int], q: torch.Tensor
) -> torch.Tensor:
    """Check a log-gate: ``[B, H, T]`` (scalar per head) or ``[B, H, T, Dk]`` (per channel),
    finite, ``<= 0`` (a decay α = exp(g) <= 1), with q's dtype and device."""
    if isinstance(g, torch.Tensor) and g.dim() == 3:
        check_tensor(
            "g", g, ("B", "H", "T"), sizes, dtype=q.dtype, device=q.device
        )
    elif isinstance(g, torch.Tensor) and g.dim() != 4:
        raise ValueError(
            f"g: expected a 3-D tensor [B, H, T] or a 4-D tensor [B, H, T, Dk], "
            f"got shape {tuple(g.shape)}"
        )
    else:
        check_tensor(
            "g",
            g,
            ("B", "H", "T", "Dk"),
            sizes,
            dtype=q.dtype,
            device=q.device,
        )
    if g.numel():
        lowest, highest = torch.aminmax(g)  # one pass; NaN propagates to both
        if highest.isnan():
            raise ValueError("g: contains NaN")
        if highest > 0:
            raise ValueError(
                f"g: expected log-gates <= 0 (decay α = exp(g) <= 1), "
                f"got max {highest.item():.4g}"
            )
        if lowest.isinf():
            raise ValueError(
                "g: expected finite log-gates (g = log α, α > 0), got -inf"
            )
    return g


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

        S_t = Diag(α_t) S_{t-1} + k_t v_tᵀ,   α_t = exp(g_t),
        o_t = S_tᵀ (s q_t)

    q, k ``[B, H, T, Dk]``, v ``[B, H, T, Dv]``, g ``[B, H, T, Dk]`` (GLA: one
    decay per key channel) or ``[B, H, T]`` (one per head: Mamba-2/SSD; a
    constant ``g = log γ`` is RetNet), ``g <= 0``; state ``[B, H, Dk, Dv]``.
    Returns ``(o [B, H, T, Dv], S_T or None)``.
    """
    sizes = check_qkv(q, k, v, initial_state=initial_state)
    g = check_gate(g, sizes, q)
    # [B, H, T, Dk or 1]
    alpha = torch.exp(g.unsqueeze(-1) if g.dim() == 3 else g)
    q = q * resolve_scale(scale, sizes["Dk"])
    state = initial_state
    if state is None:
        state = q.new_zeros(sizes["B"], sizes["H"], sizes["Dk"], sizes["Dv"])
    outputs = []
    for t in range(sizes["T"]):
        q_t, k_t, v_t, alpha_t = (
            q[:, :, t],
            k[:, :, t],
            v[:, :, t],
            alpha[:, :, t],
        )
        # S_t = Diag(α_t) S_{t-1} + k_t v_tᵀ
        state = alpha_t.unsqueeze(-1) * state + k_t.unsqueeze(
            -1
        ) * v_t.unsqueeze(-2)
        # o_t = S_tᵀ q_t
        outputs.append(torch.einsum("bhkv,bhk->bhv", state, q_t))
    return torch.stack(outputs, dim=2), (
        state if output_final_state else None
    )


def segment_decay(b: torch.Tensor) -> torch.Tensor:
    """Γ_ij = exp(b_i - b_j) for j <= i, else 0: the decay from step j to step i.

    b ``[..., C]`` (cumulative log-gates) -> Γ ``[..., C, C]``. The difference is taken first
    and clipped to <= 0 before ``exp`` (above the diagonal it is >= 0 and would overflow), then
    the upper triangle is zeroed.
    """
    diff = (b.unsqueeze(-1) - b.unsqueeze(-2)).clamp(max=0)
    return decay_exp(
        diff
    ).tril()  # tril, not a masked fill: about 10x faster on a CPU


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
    """Gated linear attention chunk by chunk (the Notation appendix, §3b–3c). With B the
    cumulative log-gate inside chunk n (inclusive) and b_C its last row:

        O_[n]   = (s Q ⊙ e^B) S_[n] + A V,     A_ij = Σ_d s q_id k_jd e^(B_id - B_jd) [j <= i]
        S_[n+1] = Diag(e^(b_C)) S_[n] + (K ⊙ e^(b_C - B))ᵀ V

    The numbers of :func:`gla_chunk_reference`, computed by the private fast engine: all
    chunks' decayed scores at once, factorised around a reference point per chunk, so no
    ``[C, C, Dk]`` tensor of exponentials and no exponent above e^20 for any gate. Arguments
    and shapes as ``gla_recurrent``; any T works (the last chunk is padded with zero gates).
    """
    sizes = check_qkv(q, k, v, initial_state=initial_state)
    g = check_gate(g, sizes, q)
    chunk_size = check_positive_int("chunk_size", chunk_size)
    q = q * resolve_scale(scale, sizes["Dk"])
    if initial_state is None:
        initial_state = q.new_zeros(
            sizes["B"], sizes["H"], sizes["Dk"], sizes["Dv"]
        )
    o, state = engine.gla_chunks(
        q, k, v, g=g, state=initial_state, chunk_size=chunk_size
    )
    return o, (state if output_final_state else None)


def gla_chunk_reference(
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
    """Gated linear attention chunk by chunk, written out (GLA, Yang et al. 2024, its
    chunkwise form; the Notation appendix, §3). In chunk n, B_i = g_1 + … + g_i sums the
    log-gates from the chunk's start to position i (inclusive), so a write at j reaches
    position i decayed over the half-open interval (j, i] (α_j acted before k_j v_jᵀ was
    added), and the state entering the chunk is decayed over (0, i]:

        A_ij    = Σ_d q_id k_jd e^(B_id − B_jd)   for j ≤ i, else 0      (decayed scores)
        O_[n]   = (Q ⊙ e^B) S_[n] + A V
        S_[n+1] = Diag(e^(B_C)) S_[n] + (K ⊙ e^(B_C − B))ᵀ V              (B_C: last row of B)

    Every exponent is ≤ 0 (B only decreases, and j > i is masked before ``exp``), so gates of
    any size stay finite. g is ``[B, H, T, Dk]`` or ``[B, H, T]`` (one gate per head); the last
    chunk may be shorter than C. Arguments and shapes as :func:`gla_recurrent`.
    """
    sizes = check_qkv(q, k, v, initial_state=initial_state)
    g = check_gate(g, sizes, q)
    g = g.unsqueeze(-1) if g.dim() == 3 else g  # [B, H, T, Dk or 1]
    chunk_size = check_positive_int("chunk_size", chunk_size)
    q = q * resolve_scale(scale, sizes["Dk"])
    state = initial_state
    if state is None:
        state = q.new_zeros(sizes["B"], sizes["H"], sizes["Dk"], sizes["Dv"])
    outputs = []
    for start in range(0, sizes["T"], chunk_size):
        # the last chunk may be shorter
        chunk = slice(start, start + chunk_size)
        # [B, H, C, D]
        q_n, k_n, v_n = (q[:, :, chunk], k[:, :, chunk], v[:, :, chunk])
        log_decay = g[:, :, chunk].cumsum(dim=2)  # B  [B, H, C, Dk or 1]
        log_last = log_decay[:, :, -1:]  # B_C  [B, H, 1, Dk or 1]
        size = q_n.shape[2]
        causal = torch.ones(
            size, size, dtype=torch.bool, device=q.device
        ).tril()
        # B_i − B_j  [B, H, C, C, ·]
        pair = log_decay[:, :, :, None] - log_decay[:, :, None, :]
        pair_decay = pair.masked_fill(
            ~causal[..., None], -math.inf
        ).exp()  # 0 for j > i
        # A
        scores = torch.einsum("bhid,bhijd,bhjd->bhij", q_n, pair_decay, k_n)
        # O_[n]
        outputs.append((q_n * log_decay.exp()) @ state + scores @ v_n)
        # S_[n+1]
        state = log_last.exp().transpose(-1, -2) * state + (
            (k_n * (log_last - log_decay).exp()).transpose(-1, -2) @ v_n
        )
    return torch.cat(outputs, dim=2), (state if output_final_state else None)


# --------------------------------------------------------------------------- gates
def retnet_decay(
    n_heads: int,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | None = None,
) -> torch.Tensor:
    """RetNet's fixed per-head decays in log space: ``log γ_h`` with ``γ_h = 1 - 2^(-5-h)``.

    Returns ``[H]``: head 0 forgets fastest (γ = 0.96875), each further head twice as slowly.
    """
    exponents = -5.0 - torch.arange(
        check_positive_int("n_heads", n_heads), dtype=torch.float64
    )
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
    return log_gamma[None, :, None].expand(
        check_positive_int("batch", batch),
        n_heads,
        check_positive_int("seq_len", seq_len),
    )


def softplus_decay_gate(
    x: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,  # noqa: N803 (Mamba's name)
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
            raise ValueError(
                f"{name}: expected a float tensor, got {type(t).__name__}"
            )
    for name, t in (("A_log", A_log), ("dt_bias", dt_bias)):
        try:
            shape = torch.broadcast_shapes(x.shape, t.shape)
        except RuntimeError:
            shape = None
        if shape != x.shape:
            raise ValueError(
                f"{name}: expected a shape that broadcasts to x's {tuple(x.shape)}, "
                f"got {tuple(t.shape)}"
            )
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
        math.log(dt_range[0]), math.log(dt_range[1])
    )
    dt = torch.exp(log_dt)
    # softplus⁻¹(Δ) = Δ + log(1 - e^-Δ)
    return torch.log(a), dt + torch.log(-torch.expm1(-dt))


def effective_horizon(g: torch.Tensor | float) -> torch.Tensor:
    """The memory horizon of a decay α = exp(g): ``1 / (1 - α)``, the total weight
    ``Σ_{n>=0} αⁿ`` of a geometric past (infinite for α = 1). Elementwise, any shape."""
    if not isinstance(g, torch.Tensor):
        g = torch.tensor(float(g))
    check_range("g", g, None, 0.0)
    # expm1: exact for α near 1
    return torch.where(g == 0, math.inf, -1.0 / torch.expm1(g))
