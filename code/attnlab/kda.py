"""Kimi Delta Attention (KDA): the delta rule with one decay per key channel.

KDA (Kimi Linear, KL §3) replaces the scalar decay of the gated delta rule by a diagonal one,
``Diag(α_t)`` with ``α_t = exp(g_t) ∈ (0, 1]^{Dk}``, so each key channel forgets at its own,
data-dependent rate::

    S_t = (I − β_t k_t k_tᵀ) Diag(α_t) S_{t-1} + β_t k_t v_tᵀ        o_t = S_tᵀ q_t

i.e. first decay, S' = Diag(α_t) S_{t-1}, then the delta-rule write on the decayed state,
S_t = S' + β_t k_t (v_t − S'ᵀ k_t)ᵀ. The order matters: Diag(α) and k kᵀ do not commute.

Inside a chunk (or a whole sequence, in the parallel form) ``B_i = g_1 + … + g_i ∈ R^{Dk}``
sums the log-gates from the start to position i (in the code ``b``), and a write at j reaches
position i decayed by ``γ_(j,i] = exp(B_i − B_j)`` per channel, over the half-open interval
(j, i]: α_j acted before token j wrote. ``log_gamma`` is B_i − B_j, summed as g_(j+1) + … +
g_i (the difference of two sums cancels in float32 after a very negative gate).
Reading the Kimi Linear report's own definition literally (γ over [j, i]) is an index erratum
(the Notation appendix, §6 and §10); ``kda_parallel(..., include_start=True)`` computes it, to
measure the difference.

The forms: ``kda_step`` (one token), ``kda_recurrent`` (the step T times: the definition),
``kda_parallel`` (all positions at once, every decay written out), ``kda_chunk_reference``
(chunk by chunk, Kimi Linear eqs. 6–9) and ``kda_chunk`` (the same numbers from the private
fast engine, ``attnlab._chunk_engine``). Shapes: q, k ``[B, H, T, Dk]``; v ``[B, H, T, Dv]``;
per-channel log-gates g ``[B, H, T, Dk]`` (≤ 0); beta ``[B, H, T]`` with β‖k‖² ≤ 2; states
``[B, H, Dk, Dv]``, read as ``o = Sᵀ q``; the step drops the T axis. Inputs are checked once,
at the public boundary (:func:`attnlab.checks.checked`).
"""

from __future__ import annotations

import math

import torch

from . import _chunk_engine as engine
from ._kernel_checks import (
    SEQUENCE,
    TOKEN,
    check_beta,
    check_flag,
    check_log_gate,
    check_sequences,
    check_tokens,
)
from .checks import checked


# --------------------------------------------------------------------------- input checks
def _sequence_inputs(
    q, k, v, g, beta, scale, initial_state=None, chunk_size=1, **_
):
    sizes = check_sequences(
        q,
        k,
        v,
        initial_state=initial_state,
        scale=scale,
        chunk_size=chunk_size,
    )
    check_beta(beta, k, sizes, SEQUENCE)
    check_log_gate(g, sizes, q, (*SEQUENCE, "Dk"))


def _parallel_inputs(q, k, v, g, beta, scale, include_start):
    _sequence_inputs(q, k, v, g, beta, scale)
    check_flag("include_start", include_start)


def _token_inputs(q, k, v, g, beta, state, scale):
    sizes = check_tokens(q, k, v, state=state, scale=scale)
    check_beta(beta, k, sizes, TOKEN)
    check_log_gate(g, sizes, q, (*TOKEN, "Dk"))


# --------------------------------------------------------------------------- kernels
@checked(_token_inputs)
def kda_step(q, k, v, *, g, beta, state, scale=None):
    """One token of KDA. q, k, g [B, H, Dk] (g = log α ≤ 0); v [B, H, Dv];
    beta [B, H]; state [B, H, Dk, Dv] -> (o [B, H, Dv], S_t)."""
    q = q * (q.shape[-1] ** -0.5 if scale is None else scale)  # s q_t
    state = g.exp()[..., None] * state  # S' = Diag(α_t) S_{t-1}
    error = v - torch.einsum("bhkv,bhk->bhv", state, k)  # v_t − S'ᵀ k_t
    # S_t = S' + β_t k_t (v_t − S'ᵀ k_t)ᵀ
    state = state + beta[..., None, None] * k[..., None] * error[..., None, :]
    return torch.einsum("bhkv,bhk->bhv", state, q), state  # o_t = S_tᵀ q_t


@checked(_sequence_inputs)
def kda_recurrent(
    q,
    k,
    v,
    *,
    g,
    beta,
    scale=None,
    initial_state=None,
    output_final_state=False,
):
    """KDA token by token (the definition): :func:`kda_step` T times.
    q, k, g [B, H, T, Dk] (g ≤ 0); v [B, H, T, Dv]; beta [B, H, T]
    -> o [B, H, T, Dv], S_T or None."""
    state = initial_state
    if state is None:  # S_0 = 0
        state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])
    outputs = []
    for t in range(q.shape[2]):
        q_t, k_t, v_t, g_t, beta_t = (x[:, :, t] for x in (q, k, v, g, beta))
        o_t, state = kda_step(
            q_t, k_t, v_t, g=g_t, beta=beta_t, state=state, scale=scale
        )
        outputs.append(o_t)
    return torch.stack(outputs, dim=2), (
        state if output_final_state else None
    )


@checked(_parallel_inputs)
def kda_parallel(q, k, v, *, g, beta, scale=None, include_start=False):
    """KDA for a whole sequence at once, from S_0 = 0, every decay written
    out (the Notation appendix, §6), B the cumulative sum of g:

        γ_(j,i] = Π_{s=j+1..i} α_s = exp(B_i − B_j)
        A_qk[i, j] = q_iᵀ Diag(γ_(j,i]) k_j  (j ≤ i)
        A_kk[i, j] = k_iᵀ Diag(γ_(j,i]) k_j  (j < i)
        O = A_qk (I + StrictTril(diag(β) A_kk))⁻¹ diag(β) V

    ``include_start=True`` uses γ_[j,i] = Π_{s=j..i} α_s instead: the
    report's erratum, a different model that already fails at the first
    token. Shapes as :func:`kda_recurrent` -> (o, None); holds
    [B, H, T, T, Dk] decays: short sequences only.
    """
    q = q * (q.shape[-1] ** -0.5 if scale is None else scale)
    size = q.shape[2]
    later = q.new_ones(size, size, dtype=torch.bool).tril(-1)  # s > j
    # B_i − B_j = Σ g_s over j < s ≤ i: a sum from j, never a difference
    log_gamma = (later[..., None] * g[:, :, :, None]).cumsum(dim=2)
    if include_start:
        log_gamma = log_gamma + g[:, :, None]  # one more factor: α_j
    future = later.mT  # j > i
    gamma = log_gamma.masked_fill(future[..., None], -math.inf).exp()
    a_qk = torch.einsum("bhid,bhijd,bhjd->bhij", q, gamma, k)
    a_kk = torch.einsum("bhid,bhijd,bhjd->bhij", k, gamma, k)
    eye = torch.eye(size, dtype=q.dtype, device=q.device)
    lower = eye + (beta[..., None] * a_kk).tril(-1)
    u = torch.linalg.solve_triangular(
        lower, beta[..., None] * v, upper=False, unitriangular=True
    )
    return a_qk @ u, None


# fmt: off
@checked(_sequence_inputs)
def kda_chunk_reference(q, k, v, *, g, beta, scale=None, initial_state=None,
                        output_final_state=False, chunk_size=64):
    """KDA chunk by chunk, written out: Kimi Linear eqs. 6–9, (1)–(4) below,
    with the index erratum fixed (the Notation appendix, §6). One decay per
    channel: the scores are summed over a [C, C, Dk] tensor of decays.
    Shapes as :func:`kda_recurrent`; any T."""
    q = q * (q.shape[-1] ** -0.5 if scale is None else scale)
    state = initial_state
    if state is None:  # S_0 = 0
        state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])
    outputs = []
    for start in range(0, q.shape[2], chunk_size):
        chunk = slice(start, start + chunk_size)  # the last may be shorter
        q_n, k_n, v_n = q[:, :, chunk], k[:, :, chunk], v[:, :, chunk]
        g_n = g[:, :, chunk]  # [B, H, C, Dk]
        beta_n = beta[:, :, chunk, None]  # [B, H, C, 1]
        b = g_n.cumsum(dim=2)  # B  [B, H, C, Dk]
        size = q_n.shape[2]
        later = q_n.new_ones(size, size, dtype=torch.bool).tril(-1)  # s > j
        # B_i − B_j = Σ g_s over j < s ≤ i: a sum from j, never a difference
        log_gamma = (later[..., None] * g_n[:, :, :, None]).cumsum(dim=2)
        future = later.mT  # j > i
        gamma = log_gamma.masked_fill(future[..., None], -math.inf).exp()  # γ
        # (1) A_qk[i, j] = q_iᵀ Diag(γ_(j,i]) k_j, A_kk the same with k_i
        a_qk = torch.einsum("bhid,bhijd,bhjd->bhij", q_n, gamma, k_n)
        a_kk = torch.einsum("bhid,bhijd,bhjd->bhij", k_n, gamma, k_n)
        eye = torch.eye(size, dtype=q.dtype, device=q.device)
        lower = eye + (beta_n * a_kk).tril(-1)  # L = I + StrictTril(β A_kk)
        # (2) W = L⁻¹ diag(β) (e^B ⊙ K)
        w = torch.linalg.solve_triangular(
            lower, beta_n * b.exp() * k_n, upper=False, unitriangular=True
        )
        # (3) U = L⁻¹ diag(β) V
        u = torch.linalg.solve_triangular(
            lower, beta_n * v_n, upper=False, unitriangular=True
        )
        v_new = u - w @ state  # U − W S
        # (4) O_[n] = (e^B ⊙ Q) S + A_qk (U − W S)
        outputs.append((b.exp() * q_n) @ state + a_qk @ v_new)
        # (4) S_[n+1] = Diag(e^(B_C)) S + (e^(B_C − B) ⊙ K)ᵀ (U − W S)
        k_to_end = gamma[:, :, -1] * k_n  # γ's last row: e^(B_C − B_j) ⊙ k_j
        state = b[:, :, -1:].exp().mT * state + k_to_end.mT @ v_new
    return torch.cat(outputs, dim=2), (state if output_final_state else None)
# fmt: on


@checked(_sequence_inputs)
def kda_chunk(
    q,
    k,
    v,
    *,
    g,
    beta,
    scale=None,
    initial_state=None,
    output_final_state=False,
    chunk_size=64,
):
    """KDA chunk by chunk: the numbers of :func:`kda_chunk_reference`, from
    the private fast engine (shared with Gated DeltaNet): all chunks' A_kk
    and A_qk by matrix products, factorised around one reference point per
    chunk (or per half, quarter, … when a chunk decays by more than e^40),
    the UT inverse for all chunks at once, then three fused products per
    chunk. No exponent exceeds e^20 and each is a sum of the gates it
    spans: float32 stays exact for any gates (−30 per step, or −1e30 among
    −0.01), gradients too. Shapes as :func:`kda_recurrent`; any T.
    """
    o, state = engine.decayed_delta_rule_chunks(
        q,
        k,
        v,
        g=g,
        beta=beta,
        scale=scale,
        initial_state=initial_state,
        chunk_size=chunk_size,
    )
    return o, (state if output_final_state else None)
