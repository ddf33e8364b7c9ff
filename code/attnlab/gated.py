"""Decayed and gated linear attention (the Notation appendix, §3): the state forgets, channel
by channel.

Before each write the state is multiplied by a decay ``α_t = exp(g_t) ∈ (0, 1]``:

    S_t = Diag(α_t) S_{t-1} + k_t v_tᵀ,        o_t = S_tᵀ (s q_t)

One kernel covers three models, by the shape and origin of the log-gate ``g = log α ≤ 0``:

- RetNet: a fixed scalar per head, ``g_t = log γ_h`` with ``γ_h = 1 - 2^(-5-h)``
  (``retnet_decay``, ``retnet_gate``); ``g`` is ``[B, H, T]``.
- Mamba-2 / SSD: a data-dependent scalar per head and step,
  ``g = -exp(A_log)·softplus(x + dt_bias)`` (``softplus_decay_gate``); ``g`` is ``[B, H, T]``.
- GLA: a data-dependent decay per key channel, ``g`` is ``[B, H, T, Dk]``.

A scalar gate is the per-channel gate broadcast over Dk. The chunkwise form needs the decay
between two positions of a chunk: with ``B_i = g_1 + … + g_i`` the log-gates summed from the
chunk's start (in the code ``b``), a write at j reaches position i decayed by
``γ_(j,i] = exp(B_i − B_j)`` (``log_gamma`` is B_i − B_j). It is always formed as the sum
g_(j+1) + … + g_i of the gates it spans: never ``exp(-B)`` alone, which overflows float32 once
``-B ≳ 88``, and never as the difference of the two sums B_i and B_j, which float32 cannot hold
exactly once a very negative gate (say −1e4) comes before small ones.

The forms: ``gla_step`` (one token), ``gla_recurrent`` (the step T times: the definition),
``gla_chunk_reference`` (chunk by chunk, written out) and ``gla_chunk`` (the same numbers from
the private fast engine, ``attnlab._chunk_engine``); for one decay per head,
``decay_masked_attention`` (the whole sequence as one masked product). Inputs are checked once,
at the public boundary (:func:`attnlab.checks.checked`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from . import _chunk_engine as engine
from ._kernel_checks import (
    SEQUENCE,
    TOKEN,
    check_log_gate,
    check_sequences,
    check_tokens,
)
from .checks import check_finite, check_number, check_positive_int, checked

GLA_GATE_NORMALIZER = 16.0
"""GLA's gate is ``logsigmoid(·) / 16`` (FLA ``gate_logit_normalizer``): decays close to 1."""


# --------------------------------------------------------------------------- input checks
def _sequence_inputs(q, k, v, g, scale, initial_state, chunk_size=1, **_):
    sizes = check_sequences(
        q,
        k,
        v,
        initial_state=initial_state,
        scale=scale,
        chunk_size=chunk_size,
    )
    check_log_gate(g, sizes, q, SEQUENCE, (*SEQUENCE, "Dk"))


def _token_inputs(q, k, v, g, state, scale):
    sizes = check_tokens(q, k, v, state=state, scale=scale)
    check_log_gate(g, sizes, q, (*TOKEN, "Dk"))


# --------------------------------------------------------------------------- kernels
@checked(_token_inputs)
def gla_step(q, k, v, *, g, state, scale=None):
    """One token of gated linear attention. q, k, g [B, H, Dk] (g = log α
    ≤ 0); v [B, H, Dv]; state [B, H, Dk, Dv] -> (o [B, H, Dv], S_t)."""
    q = q * (q.shape[-1] ** -0.5 if scale is None else scale)  # s q_t
    # S_t = Diag(α_t) S_{t-1} + k_t v_tᵀ
    state = g.exp()[..., None] * state + k[..., None] * v[..., None, :]
    return torch.einsum("bhkv,bhk->bhv", state, q), state  # o_t = S_tᵀ q_t


@checked(_sequence_inputs)
def gla_recurrent(
    q, k, v, *, g, scale=None, initial_state=None, output_final_state=False
):
    """Gated linear attention token by token (the definition): the step T
    times. q, k [B, H, T, Dk]; v [B, H, T, Dv]; g [B, H, T, Dk] (GLA) or
    [B, H, T] (one decay per head: Mamba-2, RetNet) -> o, S_T or None."""
    if g.dim() == 3:  # one gate per head: the same decay in every channel
        g = g[..., None].expand_as(k)
    state = initial_state
    if state is None:  # S_0 = 0
        state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])
    outputs = []
    for t in range(q.shape[2]):
        q_t, k_t, v_t, g_t = (x[:, :, t] for x in (q, k, v, g))
        o_t, state = gla_step(q_t, k_t, v_t, g=g_t, state=state, scale=scale)
        outputs.append(o_t)
    return torch.stack(outputs, dim=2), (
        state if output_final_state else None
    )


@checked(_sequence_inputs)
def gla_chunk_reference(
    q,
    k,
    v,
    *,
    g,
    scale=None,
    initial_state=None,
    output_final_state=False,
    chunk_size=64,
):
    """Gated linear attention chunk by chunk, written out (GLA, Yang et al.
    2024; the Notation appendix, §3). Every exponent is ≤ 0 (j > i is
    masked before exp) and a sum of the gates it spans. Shapes as
    :func:`gla_recurrent`; any T."""
    q = q * (q.shape[-1] ** -0.5 if scale is None else scale)
    if g.dim() == 3:  # one gate per head: broadcast over the channels
        g = g[..., None]
    state = initial_state
    if state is None:  # S_0 = 0
        state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])
    outputs = []
    for start in range(0, q.shape[2], chunk_size):
        chunk = slice(start, start + chunk_size)  # the last may be shorter
        q_n, k_n, v_n = q[:, :, chunk], k[:, :, chunk], v[:, :, chunk]
        g_n = g[:, :, chunk]  # [B, H, C, Dk or 1]
        b = g_n.cumsum(dim=2)  # B  [B, H, C, Dk or 1]
        size = q_n.shape[2]
        later = q_n.new_ones(size, size, dtype=torch.bool).tril(-1)  # s > j
        # B_i − B_j = Σ g_s over j < s ≤ i: a sum from j, never a difference
        log_gamma = (later[..., None] * g_n[:, :, :, None]).cumsum(dim=2)
        future = later.mT  # j > i
        gamma = log_gamma.masked_fill(future[..., None], -math.inf).exp()  # γ
        # A_ij = Σ_d q_id k_jd e^(B_id − B_jd) for j ≤ i: the decayed scores
        scores = torch.einsum("bhid,bhijd,bhjd->bhij", q_n, gamma, k_n)
        # O_[n] = (Q ⊙ e^B) S_[n] + A V
        outputs.append((q_n * b.exp()) @ state + scores @ v_n)
        k_to_end = k_n * gamma[:, :, -1]  # K ⊙ e^(B_C − B): γ's last row
        # S_[n+1] = Diag(e^(B_C)) S_[n] + (K ⊙ e^(B_C − B))ᵀ V
        state = b[:, :, -1:].exp().mT * state + k_to_end.mT @ v_n
    return torch.cat(outputs, dim=2), (state if output_final_state else None)


@checked(_sequence_inputs)
def gla_chunk(
    q,
    k,
    v,
    *,
    g,
    scale=None,
    initial_state=None,
    output_final_state=False,
    chunk_size=64,
):
    """Gated linear attention chunk by chunk: the numbers of
    :func:`gla_chunk_reference`, from the private fast engine (all chunks'
    decayed scores at once, factorised around a reference point per block:
    no [C, C, Dk] tensor of exponentials, no exponent above e^20 for any
    gate, each a sum of the gates it spans, so float32 stays exact under
    any mix of gates). Shapes as :func:`gla_recurrent`; any T.
    """
    o, state = engine.gla_chunks(
        q,
        k,
        v,
        g=g,
        scale=scale,
        initial_state=initial_state,
        chunk_size=chunk_size,
    )
    return o, (state if output_final_state else None)


def _masked_inputs(q, k, v, g, scale):
    sizes = check_sequences(q, k, v, scale=scale)
    check_log_gate(g, sizes, q, SEQUENCE)


@checked(_masked_inputs)
def decay_masked_attention(q, k, v, *, g, scale=None):
    """Scalar-gated linear attention from S_0 = 0 as one masked product:
    the attention form of Mamba-2's state space duality (SSD; the Notation
    appendix, §3b), with b the cumulative sum of g:

        M_ij = e^(b_i − b_j) = α_(j+1) ⋯ α_i for j ≤ i, 0 for j > i
        O = (s Q Kᵀ ⊙ M) V

    q, k [B, H, T, Dk]; v [B, H, T, Dv]; g [B, H, T] ≤ 0 (one decay per
    head) -> (o [B, H, T, Dv], None); [T, T] matrices: short sequences.
    """
    q = q * (q.shape[-1] ** -0.5 if scale is None else scale)  # s Q
    size = q.shape[2]
    later = q.new_ones(size, size, dtype=torch.bool).tril(-1)  # s > j
    # b_i − b_j = Σ g_s over j < s ≤ i: a sum from j, never a difference
    log_mask = (later * g[..., None]).cumsum(dim=2)  # [B, H, T, T]
    mask = log_mask.masked_fill(later.mT, -math.inf).exp()  # M, 0 if j > i
    return (q @ k.mT * mask) @ v, None  # O = (s Q Kᵀ ⊙ M) V


# --------------------------------------------------------------------------- gates
#: More heads than any model has; RetNet's γ_h rounds to 1 long before this.
MAX_HEADS = 1 << 16


def _check_heads(n_heads: object) -> int:
    if check_positive_int("n_heads", n_heads) > MAX_HEADS:
        raise ValueError(
            f"n_heads: expected at most {MAX_HEADS} heads, got {n_heads}"
        )
    return n_heads


def retnet_decay(
    n_heads: int,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | None = None,
) -> torch.Tensor:
    """RetNet's fixed per-head decays in log space: ``log γ_h`` with ``γ_h = 1 - 2^(-5-h)``.

    Returns ``[H]``: head 0 forgets fastest (γ = 0.96875), each further head twice as slowly.
    """
    h = torch.arange(_check_heads(n_heads), dtype=torch.float64)
    return torch.log1p(-torch.exp2(-5.0 - h)).to(dtype=dtype, device=device)


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


def _decay_gate_inputs(x: object, A_log: object, dt_bias: object) -> None:  # noqa: N803
    """x, A_log and dt_bias: finite float tensors; A_log and dt_bias broadcast to x's shape."""
    for name, t in (("x", x), ("A_log", A_log), ("dt_bias", dt_bias)):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            raise ValueError(
                f"{name}: expected a float tensor, got {type(t).__name__}"
            )
        check_finite(name, t)
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


@checked(_decay_gate_inputs)
def softplus_decay_gate(
    x: torch.Tensor,
    A_log: torch.Tensor,  # noqa: N803 (Mamba's name)
    dt_bias: torch.Tensor,
) -> torch.Tensor:
    """The Mamba-2 decay, shared by Mamba-2, Gated DeltaNet and KDA:

        g = -exp(A_log) · softplus(x + dt_bias)        (= Δ·A with A = -exp(A_log) < 0)

    ``x`` are the raw gate projections; ``A_log`` and ``dt_bias`` broadcast against x's
    trailing axes and must not enlarge it. Scalar gate: x ``[..., H]``, ``A_log [H]``,
    ``dt_bias [H]``. Per channel (KDA): x ``[..., H, Dk]``, ``A_log [H, 1]``, ``dt_bias [H, Dk]``.
    Returns g with x's shape, ``g <= 0``.
    """
    return -torch.exp(A_log) * F.softplus(x + dt_bias)


def _check_range_pair(name: str, pair: object) -> None:
    """A pair (low, high) with 1/√max <= low <= high <= √max, max the default dtype's largest
    number: the initial values, their logarithms and exponentials all stay finite."""
    limit = math.sqrt(torch.finfo(torch.get_default_dtype()).max)
    if not isinstance(pair, tuple | list) or len(pair) != 2:
        raise ValueError(f"{name}: expected a pair (low, high), got {pair!r}")
    low = check_number(name, pair[0])
    high = check_number(name, pair[1])
    if not 1 / limit <= low <= high <= limit:
        raise ValueError(
            f"{name}: expected a pair (low, high) with {1 / limit:.3g} <= low <= "
            f"high <= {limit:.3g}, got {pair!r}"
        )


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
    _check_range_pair("a_range", a_range)
    _check_range_pair("dt_range", dt_range)
    a = torch.empty(check_positive_int("n_heads", n_heads)).uniform_(*a_range)
    log_dt = torch.empty(check_positive_int("dt_size", dt_size)).uniform_(
        math.log(dt_range[0]), math.log(dt_range[1])
    )
    dt = torch.exp(log_dt)
    # softplus⁻¹(Δ) = Δ + log(1 - e^-Δ)
    return torch.log(a), dt + torch.log(-torch.expm1(-dt))
