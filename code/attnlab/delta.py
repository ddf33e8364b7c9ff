"""The delta rule (DeltaNet) and the gated delta rule (Gated DeltaNet): recurrent and chunkwise.

Linear attention only ever *adds* to its memory, ``S_t = S_{t-1} + k_t v_tᵀ``. The delta rule
first reads what the memory already stores under the key, ``S_{t-1}ᵀ k_t``, and writes only the
correction, a fraction ``β_t`` of the error::

    S_t = S_{t-1} + β_t k_t (v_t − S_{t-1}ᵀ k_t)ᵀ = (I − β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ
    o_t = S_tᵀ q_t

This is one gradient step with learning rate ``β_t`` on ``½‖Sᵀk_t − v_t‖²``. The gated delta
rule decays the memory by a scalar ``α_t = exp(g_t)`` per head before writing. The write is
stable while ``β_t ‖k_t‖² ≤ 2`` (the eigenvalue ``1 − β_t ‖k_t‖²`` of the transition along
``k_t`` stays in [−1, 1]); the kernels refuse anything else.

The chunkwise forms (the WY / UT transform of Yang et al. 2024, :func:`ut_transform`) turn the
product of the ``(I − β_i k_i k_iᵀ)`` factors inside a chunk into one small unit
lower-triangular system per chunk, so a sequence of ``T`` tokens needs ``T / C`` sequential
steps instead of ``T``. The ``*_chunk_reference`` forms write this out chunk by chunk; the
public ``*_chunk`` kernels compute the same numbers with the private fast engine
(``attnlab._chunk_engine``), which inverts the systems for all chunks at once. In the gated
reference ``b_i = g_1 + … + g_i`` sums the log-gates from the chunk's start, and
``Γ_ij = exp(b_i − b_j)`` is the decay from position j to i (``log_gamma`` is b_i − b_j, summed
as g_(j+1) + … + g_i: the difference of the two sums would cancel in float32 once a very
negative gate comes before small ones).

Shapes: q, k ``[B, H, T, Dk]``; v ``[B, H, T, Dv]``; beta ``[B, H, T]``; scalar log-gates g
``[B, H, T]``; states ``[B, H, Dk, Dv]``, read as ``o = Sᵀ q``; the one-token steps drop the T
axis. Inputs are checked once, at the public boundary (:func:`attnlab.checks.checked`).
"""

from __future__ import annotations

import math

import torch

from . import _chunk_engine as engine
from ._kernel_checks import (
    SEQUENCE,
    TOKEN,
    check_beta,
    check_log_gate,
    check_sequences,
    check_tokens,
)
from .checks import check_finite, check_tensor, checked


# --------------------------------------------------------------------------- input checks
def _delta_inputs(
    q,
    k,
    v,
    beta,
    scale,
    initial_state=None,
    chunk_size=1,
    allow_unstable=False,
    **_,
):
    sizes = check_sequences(
        q,
        k,
        v,
        initial_state=initial_state,
        scale=scale,
        chunk_size=chunk_size,
    )
    check_beta(beta, k, sizes, SEQUENCE, allow_unstable=allow_unstable)


def _gated_inputs(q, k, v, g, beta, scale, initial_state, chunk_size=1, **_):
    sizes = check_sequences(
        q,
        k,
        v,
        initial_state=initial_state,
        scale=scale,
        chunk_size=chunk_size,
    )
    check_beta(beta, k, sizes, SEQUENCE)
    check_log_gate(g, sizes, q, SEQUENCE)


def _delta_token_inputs(q, k, v, beta, state, scale):
    sizes = check_tokens(q, k, v, state=state, scale=scale)
    check_beta(beta, k, sizes, TOKEN)


def _gated_token_inputs(q, k, v, g, beta, state, scale):
    sizes = check_tokens(q, k, v, state=state, scale=scale)
    check_beta(beta, k, sizes, TOKEN)
    check_log_gate(g, sizes, q, TOKEN)


def _chunk_inputs(k, v, beta):
    sizes = check_tensor("k", k, ("B", "H", "C", "Dk"))
    like = {"dtype": k.dtype, "device": k.device, "like": "k"}
    check_tensor("v", v, ("B", "H", "C", "Dv"), sizes, **like)
    check_finite("k", k)
    check_finite("v", v)
    check_beta(beta, k, sizes, ("B", "H", "C"))


# --------------------------------------------------------------------------- the delta rule
@checked(_delta_token_inputs)
def delta_rule_step(q, k, v, *, beta, state, scale=None):
    """One token of the delta rule. q, k [B, H, Dk]; v [B, H, Dv];
    beta [B, H]; state [B, H, Dk, Dv] -> (o [B, H, Dv], S_t)."""
    q = q * (q.shape[-1] ** -0.5 if scale is None else scale)  # s q_t
    error = v - torch.einsum("bhkv,bhk->bhv", state, k)  # v_t − S_{t-1}ᵀ k_t
    # S_t = S_{t-1} + β_t k_t (v_t − S_{t-1}ᵀ k_t)ᵀ
    state = state + beta[..., None, None] * k[..., None] * error[..., None, :]
    return torch.einsum("bhkv,bhk->bhv", state, q), state  # o_t = S_tᵀ q_t


# fmt: off
@checked(_delta_inputs)
def delta_rule_recurrent(q, k, v, *, beta, scale=None, initial_state=None,
                         output_final_state=False, allow_unstable=False):
    """The delta rule token by token (the definition): the step T times.
    q, k [B, H, T, Dk]; v [B, H, T, Dv]; beta [B, H, T] with β‖k‖² ≤ 2
    (``allow_unstable=True`` lifts the check, to watch the state blow up)
    -> o [B, H, T, Dv], S_T or None."""
    state = initial_state
    if state is None:  # S_0 = 0
        state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])
    outputs = []
    for t in range(q.shape[2]):
        q_t, k_t, v_t, beta_t = (x[:, :, t] for x in (q, k, v, beta))
        o_t, state = delta_rule_step(
            q_t, k_t, v_t, beta=beta_t, state=state, scale=scale
        )
        outputs.append(o_t)
    return torch.stack(outputs, dim=2), state if output_final_state else None
# fmt: on


@checked(_delta_inputs)
def delta_rule_parallel(q, k, v, *, beta, scale=None):
    """The delta rule for a whole sequence at once, from S_0 = 0: the UT
    transform of the whole sequence as one chunk. Shapes as
    :func:`delta_rule_recurrent` -> (o, None); [T, T] matrices: to see the
    structure, not for long sequences."""
    q = q * (q.shape[-1] ** -0.5 if scale is None else scale)
    _, u = ut_transform(k, v, beta=beta)  # the pseudo-values U
    return (q @ k.mT).tril() @ u, None  # O = (s Q Kᵀ ⊙ M) U


@checked(_chunk_inputs)
def ut_transform(k, v, *, beta):
    """The WY / UT form of one chunk (the Notation appendix, §4): with 𝒯 =
    L⁻¹ the UT transform, the chunk's transitions multiply out to I − Kᵀ W
    and it turns S_0 into S_0 + Kᵀ (U − W S_0). k [B, H, C, Dk];
    v [B, H, C, Dv]; beta [B, H, C] -> (W [B, H, C, Dk], U [B, H, C, Dv])."""
    eye = torch.eye(k.shape[2], dtype=k.dtype, device=k.device)
    # L = I + StrictTril(diag(β) K Kᵀ): unit lower triangular, C × C
    lower = eye + (beta[..., None] * (k @ k.mT)).tril(-1)
    # W = 𝒯 diag(β) K: row by row, w_t = β_t (k_t − Σ_{i<t} w_i k_iᵀ k_t)
    w = torch.linalg.solve_triangular(
        lower, beta[..., None] * k, upper=False, unitriangular=True
    )
    # U = 𝒯 diag(β) V: row by row, u_t = β_t (v_t − Σ_{i<t} u_i k_iᵀ k_t)
    u = torch.linalg.solve_triangular(
        lower, beta[..., None] * v, upper=False, unitriangular=True
    )
    return w, u


# fmt: off
@checked(_delta_inputs)
def delta_rule_chunk_reference(q, k, v, *, beta, scale=None,
                               initial_state=None, output_final_state=False,
                               chunk_size=64):
    """The delta rule chunk by chunk, written out (the WY / UT form of Yang
    et al. 2024; the Notation appendix, §4). Shapes as
    :func:`delta_rule_recurrent`; any T."""
    q = q * (q.shape[-1] ** -0.5 if scale is None else scale)
    state = initial_state
    if state is None:  # S_0 = 0
        state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])
    outputs = []
    for start in range(0, q.shape[2], chunk_size):
        chunk = slice(start, start + chunk_size)  # the last may be shorter
        q_n, k_n, v_n = q[:, :, chunk], k[:, :, chunk], v[:, :, chunk]
        w, u = ut_transform(k_n, v_n, beta=beta[:, :, chunk])  # W, U
        # U − W S: row t is β_t (v_t − S_{t−1}ᵀ k_t), the error token t fixes
        v_new = u - w @ state
        inside = (q_n @ k_n.mT).tril()  # Q Kᵀ ⊙ M
        outputs.append(q_n @ state + inside @ v_new)  # O_[n]
        state = state + k_n.mT @ v_new  # S_[n+1] = S + Kᵀ (U − W S)
    return torch.cat(outputs, dim=2), (state if output_final_state else None)
# fmt: on


@checked(_delta_inputs)
def delta_rule_chunk(
    q,
    k,
    v,
    *,
    beta,
    scale=None,
    initial_state=None,
    output_final_state=False,
    chunk_size=64,
):
    """The delta rule chunk by chunk: the numbers of
    :func:`delta_rule_chunk_reference`, from the private fast engine (𝒯 for
    all chunks at once by a blocked inverse, then three fused matrix
    products per chunk). Shapes as :func:`delta_rule_recurrent`; any T.
    """
    o, state = engine.delta_rule_chunks(
        q,
        k,
        v,
        beta=beta,
        scale=scale,
        initial_state=initial_state,
        chunk_size=chunk_size,
    )
    return o, (state if output_final_state else None)


# --------------------------------------------------------------------------- gated delta rule
@checked(_gated_token_inputs)
def gated_delta_rule_step(q, k, v, *, g, beta, state, scale=None):
    """One token of the gated delta rule. q, k [B, H, Dk]; v [B, H, Dv];
    g, beta [B, H] (g = log α ≤ 0); state [B, H, Dk, Dv] -> (o, S_t)."""
    decayed = g.exp()[..., None, None] * state  # S' = α_t S_{t-1}
    # then the delta rule's step: S_t = S' + β_t k_t (v_t − S'ᵀ k_t)ᵀ
    return delta_rule_step(q, k, v, beta=beta, state=decayed, scale=scale)


# fmt: off
@checked(_gated_inputs)
def gated_delta_rule_recurrent(q, k, v, *, g, beta, scale=None,
                               initial_state=None, output_final_state=False):
    """The gated delta rule token by token (the definition): the step T
    times. q, k [B, H, T, Dk]; v [B, H, T, Dv]; g [B, H, T] ≤ 0;
    beta [B, H, T] -> o [B, H, T, Dv], S_T or None."""
    state = initial_state
    if state is None:  # S_0 = 0
        state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])
    outputs = []
    for t in range(q.shape[2]):
        q_t, k_t, v_t, g_t, beta_t = (x[:, :, t] for x in (q, k, v, g, beta))
        o_t, state = gated_delta_rule_step(
            q_t, k_t, v_t, g=g_t, beta=beta_t, state=state, scale=scale
        )
        outputs.append(o_t)
    return torch.stack(outputs, dim=2), state if output_final_state else None
# fmt: on


@checked(_gated_inputs)
def gated_delta_rule_chunk_reference(
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
    """The gated delta rule chunk by chunk, written out (Gated DeltaNet,
    Yang, Kautz and Hatamizadeh 2025; the Notation appendix, §5). In chunk
    n, b_i = g_1 + … + g_i, b_C its last entry, Γ_ij = e^(b_i − b_j) the
    decay over (j, i] (j ≤ i), S = S_[n] the state entering it:

        L = I + StrictTril(diag(β) (K Kᵀ ⊙ Γ))
        W = L⁻¹ diag(β) (K ⊙ e^b),   U = L⁻¹ diag(β) V
        O_[n] = (Q ⊙ e^b) S + (Q Kᵀ ⊙ Γ) (U − W S)
        S_[n+1] = e^(b_C) S + (K ⊙ e^(b_C − b))ᵀ (U − W S)

    Every exponent is ≤ 0 (j > i is masked before exp) and a sum of the
    gates it spans. Shapes as :func:`gated_delta_rule_recurrent`; any T.
    """
    q = q * (q.shape[-1] ** -0.5 if scale is None else scale)
    state = initial_state
    if state is None:  # S_0 = 0
        state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])
    outputs = []
    for start in range(0, q.shape[2], chunk_size):
        chunk = slice(start, start + chunk_size)  # the last may be shorter
        q_n, k_n, v_n = q[:, :, chunk], k[:, :, chunk], v[:, :, chunk]
        g_n = g[:, :, chunk, None]  # [B, H, C, 1]
        beta_n = beta[:, :, chunk, None]  # [B, H, C, 1]
        b = g_n.cumsum(dim=2)  # b  [B, H, C, 1]
        size = q_n.shape[2]
        later = q_n.new_ones(size, size, dtype=torch.bool).tril(-1)  # s > j
        # b_i − b_j = Σ g_s over j < s ≤ i: a sum from j, never a difference
        log_gamma = (later * g_n).cumsum(dim=2)  # [B, H, C, C]
        future = later.mT  # j > i
        gamma = log_gamma.masked_fill(future, -math.inf).exp()  # Γ
        eye = torch.eye(size, dtype=q.dtype, device=q.device)
        lower = eye + (beta_n * (k_n @ k_n.mT * gamma)).tril(-1)  # L
        w = torch.linalg.solve_triangular(
            lower, beta_n * k_n * b.exp(), upper=False, unitriangular=True
        )
        u = torch.linalg.solve_triangular(
            lower, beta_n * v_n, upper=False, unitriangular=True
        )
        v_new = u - w @ state  # U − W S
        inside = q_n @ k_n.mT * gamma  # Q Kᵀ ⊙ Γ
        outputs.append((q_n * b.exp()) @ state + inside @ v_new)  # O_[n]
        k_to_end = k_n * gamma[:, :, -1:].mT  # K ⊙ e^(b_C − b): Γ's last row
        state = b[:, :, -1:].exp() * state + k_to_end.mT @ v_new  # S_[n+1]
    return torch.cat(outputs, dim=2), (state if output_final_state else None)


@checked(_gated_inputs)
def gated_delta_rule_chunk(
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
    """The gated delta rule chunk by chunk: the numbers of
    :func:`gated_delta_rule_chunk_reference`, from the private fast engine,
    on KDA's path (a channel axis of size 1). No exponent in it exceeds
    e^20 and each is a sum of the gates it spans, so float32 stays finite
    and exact for any gates (−30 per step, or −1e30 among −0.01). Shapes
    as :func:`gated_delta_rule_recurrent`; any T.
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
