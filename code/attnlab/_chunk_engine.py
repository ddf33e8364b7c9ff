"""The fast chunkwise engine behind every public ``*_chunk`` kernel (private: no lesson shows it).

The readable forms are the ``*_chunk_reference`` functions of ``linear``, ``gated``, ``delta``
and ``kda``: one loop over chunks that follows the paper's equations line by line. This module
computes the same numbers (the tests check it in float64 to 1e-10) and is tuned for a CPU:

- every chunk-local term (scores, decayed inputs, the UT transform) is formed for all chunks
  at once, on ``[B, H, N, C, D]`` tensors (``split_chunks``), so only the state update runs
  chunk after chunk;
- the per-channel decays e^(B_i − B_j) are factorised around one reference point per block
  when the block's decay span is small, and split into halves otherwise
  (``channel_decay_terms``): matrix products instead of a ``[C, C, Dk]`` tensor of
  exponentials, with every factor finite for any gate;
- the UT transform 𝒯 = L⁻¹ is inverted blockwise (``unit_lower_inverse``), so each chunk step
  of the delta rules is three fused matrix products (``delta_chunk_loop``).

Shapes: q, k ``[B, H, T, Dk]``; v ``[B, H, T, Dv]``; beta ``[B, H, T]``; log-gates g
``[B, H, T]`` (one per head) or ``[B, H, T, Dk]`` (per key channel); states
``[B, H, Dk, Dv]``. In every function here ``b`` is B, the log-gates summed along a chunk from
its start (B_i = g_1 + … + g_i, the log of the decay over (start, i]), and b_C its last row;
a ``*_decay`` is a factor e^(…) ≤ 1. The public wrappers have checked the inputs.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

MAX_FACTORISED_SPAN = 40.0
"""Largest log-decay inside a block (per channel) for which one reference point serves the
whole block: the factors then lie in e^(±20), far from float32 overflow and underflow."""

INVERSE_BLOCK = 16
"""Blocks up to this size are inverted by one triangular solve; larger ones by halves."""


# --------------------------------------------------------------------------- chunking
def split_chunks(x: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """``[B, H, T, D]`` -> ``[B, H, N, C, D]`` with ``N = ceil(T / C)``; the last chunk is
    zero-padded (a zero key, value, query, β or log-gate changes nothing in any kernel here)."""
    batch, heads, length, width = x.shape
    n_chunks = -(-length // chunk_size)
    if n_chunks * chunk_size > length:
        x = F.pad(x, (0, 0, 0, n_chunks * chunk_size - length))
    return x.reshape(batch, heads, n_chunks, chunk_size, width)


def merge_chunks(x: torch.Tensor, length: int) -> torch.Tensor:
    """``[B, H, N, C, D]`` -> ``[B, H, T, D]``: undo ``split_chunks``, dropping the padding."""
    batch, heads, n_chunks, size, width = x.shape
    return x.reshape(batch, heads, n_chunks * size, width)[:, :, :length]


def _split_per_token(x: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """``[B, H, T]`` (β or a scalar gate) -> ``[B, H, N, C]``."""
    return split_chunks(x.unsqueeze(-1), chunk_size).squeeze(-1)


def chunk_states(
    initial_state: torch.Tensor,
    increments: torch.Tensor,
    chunk_decay: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The state entering every chunk: ``S_[0] = S_0``, ``S_[n+1] = d_n ⊙ S_[n] + U_n``.

    ``initial_state [B, H, Dk, Dv]``; ``increments`` U ``[B, H, N, Dk, Dv]``; ``chunk_decay`` d
    (None means 1) broadcasts against one state, e.g. ``[B, H, N, Dk, 1]``. Returns
    ``(states [B, H, N, Dk, Dv], S_[N])``.
    """
    states = []
    state = initial_state
    for n in range(increments.shape[2]):
        states.append(state)
        if chunk_decay is None:
            state = state + increments[:, :, n]
        else:
            # U + d ⊙ S
            state = torch.addcmul(
                increments[:, :, n], chunk_decay[:, :, n], state
            )
    return torch.stack(states, dim=2), state


# --------------------------------------------------------------------------- decays
def decay_exp(x: torch.Tensor) -> torch.Tensor:
    """exp(x) for a log-decay x <= 0, floored just above the smallest normal float: at
    e^-86.3 (3.3e-38) in float32, e^-707.4 in float64.

    On x86 CPUs, exp of numbers near or below the underflow limit (and of -inf) takes a slow
    path, 10 to 40 times slower (measured with torch 2.13). The floor changes a decay factor
    by less than 3.3e-38 in float32, far below the precision of any sum it enters.
    """
    return torch.exp(x.clamp(min=math.log(torch.finfo(x.dtype).tiny) + 1))


def channel_decay_scores(
    q: torch.Tensor, k: torch.Tensor, b: torch.Tensor
) -> torch.Tensor:
    """A_ij = Σ_d q_id k_jd exp(B_id - B_jd) for j <= i (else 0), never forming exp(±B) alone.

    q, k ``[..., C, Dk]``; b ``[..., C, Dk]`` holds B, the cumulative log-gates along C (it only
    decreases). Returns A ``[..., C, C]``. If the span ``B_first - B_last`` is at most
    ``MAX_FACTORISED_SPAN`` in every channel, one reference point serves the whole block
    (``factorised_decay_scores``). Otherwise split it into an earlier half E and a later half L,
    with ``r`` the value of B at the last position of E:

        A = [[A_EE, 0], [A_LE, A_LL]],    exp(B_i - B_j) = exp(B_i - r) · exp(r - B_j)  (i∈L, j∈E)

    Both factors are <= 1, so ``A_LE`` is the matmul of bounded tensors. A_EE and A_LL are
    computed the same way (all blocks of one level in one batched call): at most log2(C)
    levels, finite for any gates.
    """
    size = q.shape[-2]
    if (
        size == 1
        or b.numel() == 0
        or (b[..., 0, :] - b[..., -1, :]).max() <= MAX_FACTORISED_SPAN
    ):
        return factorised_decay_scores(q, k, b)
    if (
        size % 2
    ):  # one more step with a zero query and key and no decay, cropped at the end
        q, k = (F.pad(x, (0, 0, 0, 1)) for x in (q, k))
        b = torch.cat([b, b[..., -1:, :]], dim=-2)
    half = (size + 1) // 2
    reference = b[..., half - 1 : half, :]  # B at the end of the earlier half
    q_later = q[..., half:, :] * decay_exp(b[..., half:, :] - reference)
    k_earlier = k[..., :half, :] * decay_exp(reference - b[..., :half, :])
    cross = q_later @ k_earlier.transpose(-1, -2)  # A_LE
    inner = channel_decay_scores(
        *(x.unflatten(-2, (2, half)) for x in (q, k, b))
    )
    scores = torch.cat(
        [
            # [A_EE, 0]
            torch.cat([inner[..., 0, :, :], torch.zeros_like(cross)], dim=-1),
            torch.cat([cross, inner[..., 1, :, :]], dim=-1),  # [A_LE, A_LL]
        ],
        dim=-2,
    )
    return scores[..., :size, :size]


def factorised_decay_scores(
    q: torch.Tensor, k: torch.Tensor, b: torch.Tensor
) -> torch.Tensor:
    """A = ((Q ⊙ e^(B - r)) (K ⊙ e^(r - B))ᵀ) ⊙ M with one reference point per block and
    channel, r = (B_first + B_last) / 2. Exact, but the factors reach e^(±span/2): safe for
    spans up to ``MAX_FACTORISED_SPAN`` only. Shapes as ``channel_decay_scores``."""
    reference = (b[..., :1, :] + b[..., -1:, :]) / 2
    scores = (q * torch.exp(b - reference)) @ (
        k * torch.exp(reference - b)
    ).transpose(-1, -2)
    return scores.tril_()


def channel_decay_terms(
    rows: tuple[torch.Tensor, ...], k: torch.Tensor, b: torch.Tensor
) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
    """Every decayed term of a chunkwise kernel with gates, for one or more row tensors x
    (GLA: q; the delta rules: q and k) against the keys k of the same chunks:

        A_x[i, j] = Σ_d x_id k_jd e^(B_id − B_jd) [j ≤ i],     x ⊙ e^B,     k ⊙ e^(b_C − B)

    rows and k ``[..., C, Dk]``; b ``[..., C, Dk]`` (or ``[..., C, 1]``: one gate for all
    channels) holds B, the cumulative log-gates, b_C its last row. Returns
    ([A_x ``[..., C, C]``], [x ⊙ e^B], k ⊙ e^(b_C − B)).

    When every block's span B_first − B_last is at most ``MAX_FACTORISED_SPAN``, all of them
    come from one exponential f = e^(B − r), r = (B_first + B_last) / 2, and 1 / f:
    A_x = ((x ⊙ f) (k ⊙ 1/f)ᵀ) ⊙ M, x ⊙ e^B = (x ⊙ f) ⊙ e^r, k ⊙ e^(b_C − B) = (k ⊙ 1/f) ⊙
    e^(b_C − r). Otherwise ``channel_decay_scores`` splits the blocks and ``decay_exp`` takes
    the two decays directly; both ways every factor stays finite.
    """
    b_last = b[..., -1:, :]
    if (
        b.shape[-2] > 1
        and (b[..., 0, :] - b[..., -1, :]).max() > MAX_FACTORISED_SPAN
    ):
        scores = [channel_decay_scores(x, k, b) for x in rows]
        return (
            scores,
            [x * decay_exp(b) for x in rows],
            k * decay_exp(b_last - b),
        )
    reference = (b[..., :1, :] + b_last) / 2
    up = torch.exp(b - reference)  # f = e^(B − r)
    k_down = k / up  # k ⊙ e^(r − B)
    x_up = [x * up for x in rows]
    scores = [(x @ k_down.transpose(-1, -2)).tril_() for x in x_up]
    exp_reference = torch.exp(reference)  # e^r [..., 1, Dk]
    return (
        scores,
        [x * exp_reference for x in x_up],
        k_down * torch.exp(b_last - reference),
    )


# --------------------------------------------------------------------------- the UT transform
def ut_lower(a_kk: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """L = I + StrictTril(diag(β) A_kk), whose inverse 𝒯 = L⁻¹ is the UT transform.

    a_kk [..., C, C] (only its strictly lower triangle is read), beta [..., C] -> L [..., C, C].
    """
    # one new tensor, then edited in place
    lower = (beta[..., :, None] * a_kk).tril_(-1)
    lower.diagonal(dim1=-2, dim2=-1).fill_(1)
    return lower


def solve_unit_lower(lower: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """X = L⁻¹ R for unit lower-triangular L [..., C, C] and R [..., C, D]: one triangular solve.

    Solved as Xᵀ Lᵀ = Rᵀ: the transposed views are column-major, which LAPACK takes without a
    copy (about 1.5x faster on a CPU than the row-major form).
    """
    return torch.linalg.solve_triangular(
        lower.mT, rhs.mT, upper=True, left=False, unitriangular=True
    ).mT


def unit_lower_inverse(lower: torch.Tensor) -> torch.Tensor:
    """L⁻¹ for unit lower-triangular L [..., C, C], by halves (a blocked triangular inverse):

        [A  0]⁻¹   [     A⁻¹      0  ]
        [B  D]   = [ −D⁻¹ B A⁻¹  D⁻¹ ]

    recursively, until a block of at most ``INVERSE_BLOCK`` rows is inverted by one triangular
    solve against the identity. Most of the work is in the products of the merges, which a CPU
    runs faster than a solve.
    """
    size = lower.shape[-1]
    if size <= INVERSE_BLOCK:
        identity = torch.eye(
            size, dtype=lower.dtype, device=lower.device
        ).expand_as(lower)
        return solve_unit_lower(lower, identity)
    half = size // 2
    top = unit_lower_inverse(lower[..., :half, :half])
    bottom = unit_lower_inverse(lower[..., half:, half:])
    inverse = torch.zeros_like(lower)
    inverse[..., :half, :half] = top
    inverse[..., half:, half:] = bottom
    inverse[..., half:, :half] = -(bottom @ lower[..., half:, :half]) @ top
    return inverse


def delta_chunk_loop(
    *,
    q_from_start: torch.Tensor,
    k_from_start: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    k_to_end: torch.Tensor,
    lower: torch.Tensor,
    a_qk: torch.Tensor,
    chunk_decay: torch.Tensor | None,
    state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sequential part of every chunkwise delta rule: one step per chunk, S entering it.

    First, for all chunks at once, 𝒯 diag(β) with 𝒯 = L⁻¹ (``unit_lower_inverse``); then one
    step per chunk, and again for all chunks at once the outputs:

        V_new = 𝒯 diag(β) (V − K_from_start S)           (= U − W S of the WY / UT form)
        S     ← Diag(chunk_decay) S + K_to_endᵀ V_new
        O     = Q_from_start S + A_qk V_new

    without forming U and W: three matrix products a chunk. Shapes (N chunks of C):
    q_from_start, k_from_start, k_to_end [B, H, N, C, Dk]; v [B, H, N, C, Dv]; beta
    [B, H, N, C]; lower, a_qk [B, H, N, C, C]; chunk_decay [B, H, N, Dk or 1] or None (no
    decay); state [B, H, Dk, Dv]. Returns O [B, H, N, C, Dv] and the final state.
    """
    batch, heads, n_chunks, size = lower.shape[:4]
    # 𝒯 diag(β) [B, H, N, C, C]
    ut_beta = unit_lower_inverse(lower) * beta[..., None, :]
    # fold B and H into one batch axis for baddbmm: out = input + batch1 @ batch2 in one call
    q_in, k_in, v, ut_beta, k_out, a_qk, state = (
        x.flatten(0, 1)
        for x in (
            q_from_start,
            k_from_start,
            v,
            ut_beta,
            k_to_end,
            a_qk,
            state,
        )
    )
    decays = (
        [None] * n_chunks
        if chunk_decay is None
        else chunk_decay.flatten(0, 1).unbind(1)
    )
    entering_states, new_values = [], []
    for (
        v_n,
        k_n,
        ut_n,
        k_out_n,
        decay_n,
    ) in zip(  # chunk n of each, [B·H, ...]
        v.unbind(1),
        k_in.unbind(1),
        ut_beta.unbind(1),
        k_out.unbind(1),
        decays,
        strict=True,
    ):
        entering_states.append(state)
        # 𝒯 diag(β) (V − K_in S)
        v_new = ut_n @ torch.baddbmm(v_n, k_n, state, alpha=-1)
        new_values.append(v_new)
        if decay_n is not None:
            state = decay_n[:, :, None] * state
        # + K_outᵀ V_new
        state = torch.baddbmm(state, k_out_n.transpose(-1, -2), v_new)
    states = torch.stack(entering_states, dim=1)  # [B·H, N, Dk, Dv]
    v_new = torch.stack(new_values, dim=1)  # [B·H, N, C, Dv]
    o = torch.baddbmm(
        (q_in @ states).flatten(0, 1), a_qk.flatten(0, 1), v_new.flatten(0, 1)
    )
    return o.view(batch, heads, n_chunks, size, -1), state.unflatten(
        0, (batch, heads)
    )


# --------------------------------------------------------------------------- the kernels
def _per_channel(g: torch.Tensor) -> torch.Tensor:
    """``[B, H, T]`` -> ``[B, H, T, 1]`` (broadcasts over Dk); a per-channel gate is unchanged."""
    return g.unsqueeze(-1) if g.dim() == 3 else g


def _scaled_and_start(
    q: torch.Tensor,
    v: torch.Tensor,
    scale: float | None,
    initial_state: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``s q`` (``s`` = ``scale``, default 1/sqrt(Dk)) and S_0 (``initial_state``, or zeros)."""
    q = q * (q.shape[-1] ** -0.5 if scale is None else scale)
    if initial_state is None:
        initial_state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])
    return q, initial_state


def linear_attention_chunks(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None,
    normalize: bool,
    eps: float,
    initial_state: torch.Tensor | tuple[torch.Tensor, torch.Tensor] | None,
    chunk_size: int,
) -> tuple[torch.Tensor, torch.Tensor | tuple[torch.Tensor, torch.Tensor]]:
    """Linear attention chunkwise, all chunk-local products at once:

        O_[n] = Q_[n] S_[n] + (Q_[n] K_[n]ᵀ ⊙ M) V_[n],      S_[n+1] = S_[n] + K_[n]ᵀ V_[n]

    With ``normalize`` the state is the pair (S, z), z [B, H, Dk], and the same computation
    runs with a column of ones appended to V (and z to S): the last output column is then the
    denominator. Returns (o, S_T) or (o, (S_T, z_T)).
    """
    length = q.shape[2]
    # a sequence shorter than one chunk is one chunk
    chunk_size = min(chunk_size, length)
    state, normaliser = initial_state, None
    if normalize and initial_state is not None:
        state, normaliser = initial_state
    q, state = _scaled_and_start(q, v, scale, state)
    if normalize:
        if normaliser is None:
            normaliser = q.new_zeros(q.shape[:2] + q.shape[-1:])
        v = torch.cat([v, torch.ones_like(v[..., :1])], dim=-1)
        state = torch.cat([state, normaliser.unsqueeze(-1)], dim=-1)
    # [B, H, N, C, D]
    qc, kc, vc = (split_chunks(x, chunk_size) for x in (q, k, v))
    states, state = chunk_states(state, kc.transpose(-1, -2) @ vc)
    o = merge_chunks(
        qc @ states + (qc @ kc.transpose(-1, -2)).tril_() @ vc, length
    )
    if not normalize:
        return o, state
    return o[..., :-1] / (o[..., -1:] + eps), (
        state[..., :-1],
        state[..., -1],
    )


def gla_chunks(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    g: torch.Tensor,
    scale: float | None,
    initial_state: torch.Tensor | None,
    chunk_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gated linear attention chunkwise (scalar or per-channel gate g), B the cumulative log-gate
    inside each chunk and b_C its last row:

        O_[n] = (Q ⊙ e^B) S_[n] + A V,    S_[n+1] = Diag(e^(b_C)) S_[n] + (K ⊙ e^(b_C − B))ᵀ V

    with A from ``channel_decay_terms``. Returns (o, S_T).
    """
    length = q.shape[2]
    chunk_size = min(chunk_size, length)
    q, state = _scaled_and_start(q, v, scale, initial_state)
    qc, kc, vc, gc = (
        split_chunks(x, chunk_size) for x in (q, k, v, _per_channel(g))
    )
    b = gc.cumsum(-2)  # B [B, H, N, C, Dk or 1]
    [scores], [q_from_start], k_to_end = channel_decay_terms((qc,), kc, b)
    increments = k_to_end.transpose(-1, -2) @ vc  # [B, H, N, Dk, Dv]
    # e^(b_C) [B, H, N, Dk or 1, 1]
    chunk_decay = decay_exp(b[..., -1:, :]).transpose(-1, -2)
    states, state = chunk_states(state, increments, chunk_decay)
    return merge_chunks(q_from_start @ states + scores @ vc, length), state


def delta_rule_chunks(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    beta: torch.Tensor,
    scale: float | None,
    initial_state: torch.Tensor | None,
    chunk_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The delta rule chunkwise: L = I + StrictTril(diag(β) K Kᵀ) and A_qk = Q Kᵀ ⊙ M for all
    chunks at once, then ``delta_chunk_loop`` with no decay. Returns (o, S_T)."""
    length = q.shape[2]
    chunk_size = min(chunk_size, length)
    q, state = _scaled_and_start(q, v, scale, initial_state)
    # [B, H, N, C, D]
    qc, kc, vc = (split_chunks(x, chunk_size) for x in (q, k, v))
    beta_c = _split_per_token(beta, chunk_size)  # [B, H, N, C]
    o, state = delta_chunk_loop(
        q_from_start=qc,
        k_from_start=kc,
        v=vc,
        beta=beta_c,
        k_to_end=kc,
        lower=ut_lower(kc @ kc.transpose(-1, -2), beta_c),
        a_qk=(qc @ kc.transpose(-1, -2)).tril_(),
        chunk_decay=None,
        state=state,
    )
    return merge_chunks(o, length), state


def decayed_delta_rule_chunks(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None,
    initial_state: torch.Tensor | None,
    chunk_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The delta rule with a decay, chunkwise: Gated DeltaNet (g [B, H, T]) and KDA
    (g [B, H, T, Dk]). With B the cumulative log-gate inside each chunk and b_C its last row:

        A_qk[i, j] = q_iᵀ Diag(e^(B_i − B_j)) k_j (i ≥ j),  A_kk[i, j] the same with k_i (i > j)
        V_new = L⁻¹ diag(β) (V − (e^B ⊙ K) S),   L = I + StrictTril(diag(β) A_kk)
        O = (e^B ⊙ Q) S + A_qk V_new,            S ← Diag(e^(b_C)) S + (e^(b_C − B) ⊙ K)ᵀ V_new

    The decayed terms come from ``channel_decay_terms``, the rest from ``delta_chunk_loop``.
    Returns (o, S_T).
    """
    length = q.shape[2]
    chunk_size = min(chunk_size, length)
    q, state = _scaled_and_start(q, v, scale, initial_state)
    qc, kc, vc, gc = (
        split_chunks(x, chunk_size) for x in (q, k, v, _per_channel(g))
    )
    beta_c = _split_per_token(beta, chunk_size)  # [B, H, N, C]
    b = gc.cumsum(dim=-2)  # B [B, H, N, C, Dk or 1]
    (a_qk, a_kk), (q_from_start, k_from_start), k_to_end = (
        channel_decay_terms((qc, kc), kc, b)
    )
    o, state = delta_chunk_loop(
        q_from_start=q_from_start,
        k_from_start=k_from_start,
        v=vc,
        beta=beta_c,
        k_to_end=k_to_end,
        lower=ut_lower(a_kk, beta_c),
        a_qk=a_qk,
        chunk_decay=b[..., -1, :].exp(),
        state=state,
    )
    return merge_chunks(o, length), state
