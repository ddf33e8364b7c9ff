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
  exponentials, every factor finite and every exponent a sum of the gates it spans;
- the UT transform 𝒯 = L⁻¹ is inverted blockwise (``unit_lower_inverse``), so each chunk step
  of the delta rules is three fused matrix products (``delta_chunk_loop``).

Shapes: q, k ``[B, H, T, Dk]``; v ``[B, H, T, Dv]``; beta ``[B, H, T]``; log-gates g
``[B, H, T]`` (one per head) or ``[B, H, T, Dk]`` (per key channel); states
``[B, H, Dk, Dv]``. In the equations B is the log-gates summed along a chunk from its start
(B_i = g_1 + … + g_i, the log of the decay over (start, i]) and B_C its last row; a
``*_decay`` is a factor e^(…) ≤ 1. The public wrappers have checked the inputs.
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
    """exp(x) for a log-decay x <= 0, and exactly 0 below √(smallest normal float) (e^-43.7 in
    float32, e^-354 in float64), so that no product of two factors is subnormal: x86 CPUs
    compute with subnormal numbers on a slow path (with a floor at the smallest normal float,
    gates of −20 per step made a chunk kernel 5 to 15 times slower, torch 2.13)."""
    cutoff = math.log(torch.finfo(x.dtype).tiny) / 2
    # exp of x clamped just below the cutoff, then every value under e^cutoff set to 0
    return F.threshold(x.clamp(min=cutoff - 1).exp(), math.exp(cutoff), 0.0)


def gate_sums(g: torch.Tensor, span: str) -> torch.Tensor:
    """Log-gates g ``[..., C, D]`` summed along the block axis, each entry a sum of the gates
    it spans, never the difference of two sums (which float32 cannot hold exactly once a very
    negative gate comes before small ones). By one product with a 0/1 matrix (on a CPU faster
    than ``torch.cumsum`` along this axis):

        "from_start"   B_i = g_1 + … + g_i                 the log-decay over (start, i]
        "from_first"   F_i = g_2 + … + g_i (F_1 = 0)       over (first position, i]
        "to_end"       E_i = g_(i+1) + … + g_C (E_C = 0)   over (i, C]
    """
    ones = g.new_ones(g.shape[-2], g.shape[-2])
    spans = ones.triu_(1) if span == "to_end" else ones.tril_()
    if span == "from_first":
        spans[:, 0] = 0
    return spans @ g


def spans_too_wide(g: torch.Tensor) -> bool:
    """Whether a block of gates g ``[..., C, D]`` decays by more than ``MAX_FACTORISED_SPAN``
    in some channel from its first position to its last, −(g_2 + … + g_C)."""
    return (
        g.numel() > 0 and g[..., 1:, :].sum(-2).min() < -MAX_FACTORISED_SPAN
    )


def channel_decay_scores(
    rows: list[torch.Tensor], k: torch.Tensor, g: torch.Tensor
) -> list[torch.Tensor]:
    """A_x[i, j] = Σ_d x_id k_jd e^(B_id − B_jd) for j <= i (else 0), for each row tensor x.

    rows and k ``[..., C, Dk]``; g ``[..., C, Dk or 1]`` the log-gates of each block. Returns
    [A_x ``[..., C, C]``]. Unless ``spans_too_wide``, one reference point r serves the whole
    block: A_x = ((x ⊙ e^(F − r)) (K ⊙ e^(r − F))ᵀ) ⊙ M, F = ``gate_sums(g, "from_first")``,
    r = F_C / 2 (exact, but the factors reach e^(±span/2)). Otherwise split it into an earlier
    half E and a later half L, h the last position of E:

        A = [[A_EE, 0], [A_LE, A_LL]],   e^(B_i − B_j) = e^(g over (h, i]) · e^(g over (j, h])

    for i in L and j in E: both factors are <= 1 and summed inside their half, so ``A_LE`` is
    the matmul of bounded, accurate tensors. A_EE and A_LL are computed the same way (all
    blocks of one level in one batched call): at most log2(C) levels, finite for any gates.
    """
    size = k.shape[-2]
    if not spans_too_wide(g):  # one reference point, r = F_C / 2
        from_first = gate_sums(g, "from_first")  # F
        up = torch.exp(from_first - from_first[..., -1:, :] / 2)  # e^(F − r)
        return [((x * up) @ (k / up).mT).tril_() for x in rows]
    if size % 2:  # a zero query, key and gate appended, cropped at the end
        rows = [F.pad(x, (0, 0, 0, 1)) for x in rows]
        k, g = (F.pad(x, (0, 0, 0, 1)) for x in (k, g))
    half = (size + 1) // 2
    # e^(g over (h, i]) for i in L; k_j e^(g over (j, h]) for j in E
    to_later = decay_exp(gate_sums(g[..., half:, :], "from_start"))
    k_early = k[..., :half, :] * decay_exp(
        gate_sums(g[..., :half, :], "to_end")
    )
    inner = channel_decay_scores(
        [x.unflatten(-2, (2, half)) for x in rows],
        *(x.unflatten(-2, (2, half)) for x in (k, g)),
    )
    scores = []
    for x, a in zip(rows, inner, strict=True):
        cross = (x[..., half:, :] * to_later) @ k_early.mT  # A_LE
        top = torch.cat([a[..., 0, :, :], torch.zeros_like(cross)], dim=-1)
        bottom = torch.cat([cross, a[..., 1, :, :]], dim=-1)
        scores.append(torch.cat([top, bottom], dim=-2)[..., :size, :size])
    return scores


def channel_decay_terms(
    rows: list[torch.Tensor], k: torch.Tensor, g: torch.Tensor
) -> tuple[
    list[torch.Tensor], list[torch.Tensor], torch.Tensor, torch.Tensor
]:
    """Every decayed term of a chunkwise kernel with gates, for one or more row tensors x
    (GLA: q; the delta rules: q and k) against the keys k of the same chunks:

        A_x[i, j] = Σ_d x_id k_jd e^(B_id − B_jd) [j ≤ i],   x ⊙ e^B,   k ⊙ e^(B_C − B),   e^(B_C)

    rows and k ``[..., C, Dk]``; g ``[..., C, Dk]`` (or ``[..., C, 1]``: one gate for all
    channels) the log-gates of each chunk, B their cumulative sum, B_C its last row. Returns
    ([A_x ``[..., C, C]``], [x ⊙ e^B], k ⊙ e^(B_C − B), e^(B_C) ``[..., 1, Dk]``).

    Unless ``spans_too_wide``, all come from one exponential f = e^(F − r) and 1 / f (as in
    ``channel_decay_scores``; B = g_1 + F): x ⊙ e^B = (x ⊙ f) ⊙ e^(r + g_1) and k ⊙ e^(B_C − B)
    = (k ⊙ 1/f) ⊙ e^r. Otherwise ``channel_decay_scores`` splits the chunks, and the decays
    come directly from sums over (0, i] and (i, C]. Both ways every factor stays finite.
    """
    if spans_too_wide(g):
        b = gate_sums(g, "from_start")  # B
        from_start = decay_exp(b)
        return (
            channel_decay_scores(rows, k, g),
            [x * from_start for x in rows],
            k * decay_exp(gate_sums(g, "to_end")),
            decay_exp(b[..., -1:, :]),
        )
    from_first = gate_sums(g, "from_first")  # F
    reference = from_first[..., -1:, :] / 2  # r [..., 1, Dk]
    up = torch.exp(from_first - reference)  # f = e^(F − r)
    k_down = k / up  # k ⊙ e^(r − F)
    x_up = [x * up for x in rows]
    to_start = decay_exp(reference + g[..., :1, :])  # e^(r + g_1)
    return (
        [(x @ k_down.mT).tril_() for x in x_up],
        [x * to_start for x in x_up],
        k_down * torch.exp(reference),
        decay_exp(g[..., :1, :] + from_first[..., -1:, :]),  # e^(g_1 + F_C)
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
    inside each chunk and B_C its last row:

        O_[n] = (Q ⊙ e^B) S_[n] + A V,    S_[n+1] = Diag(e^(B_C)) S_[n] + (K ⊙ e^(B_C − B))ᵀ V

    with A from ``channel_decay_terms``. Returns (o, S_T).
    """
    length = q.shape[2]
    chunk_size = min(chunk_size, length)
    q, state = _scaled_and_start(q, v, scale, initial_state)
    qc, kc, vc, gc = (
        split_chunks(x, chunk_size) for x in (q, k, v, _per_channel(g))
    )
    [scores], [q_from_start], k_to_end, chunk_decay = channel_decay_terms(
        [qc], kc, gc
    )
    increments = k_to_end.transpose(-1, -2) @ vc  # [B, H, N, Dk, Dv]
    # e^(B_C) as [B, H, N, Dk or 1, 1]
    states, state = chunk_states(state, increments, chunk_decay.mT)
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
    (g [B, H, T, Dk]). With B the cumulative log-gate inside each chunk and B_C its last row:

        A_qk[i, j] = q_iᵀ Diag(e^(B_i − B_j)) k_j (i ≥ j),  A_kk[i, j] the same with k_i (i > j)
        V_new = L⁻¹ diag(β) (V − (e^B ⊙ K) S),   L = I + StrictTril(diag(β) A_kk)
        O = (e^B ⊙ Q) S + A_qk V_new,            S ← Diag(e^(B_C)) S + (e^(B_C − B) ⊙ K)ᵀ V_new

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
    (a_qk, a_kk), (q_from_start, k_from_start), k_to_end, chunk_decay = (
        channel_decay_terms([qc, kc], kc, gc)
    )
    o, state = delta_chunk_loop(
        q_from_start=q_from_start,
        k_from_start=k_from_start,
        v=vc,
        beta=beta_c,
        k_to_end=k_to_end,
        lower=ut_lower(a_kk, beta_c),
        a_qk=a_qk,
        chunk_decay=chunk_decay.squeeze(-2),  # e^(B_C)
        state=state,
    )
    return merge_chunks(o, length), state
