"""Kimi Delta Attention (KDA): the delta rule with one decay per key channel.

KDA (Kimi Linear, KL §3) replaces the scalar decay of the gated delta rule by a diagonal one,
``Diag(α_t)`` with ``α_t = exp(g_t) ∈ (0, 1]^{Dk}``, so each key channel forgets at its own,
data-dependent rate::

    S_t = (I − β_t k_t k_tᵀ) Diag(α_t) S_{t-1} + β_t k_t v_tᵀ        o_t = S_tᵀ q_t

i.e. first decay, S' = Diag(α_t) S_{t-1}, then the delta-rule write on the decayed state,
S_t = S' + β_t k_t (v_t − S'ᵀ k_t)ᵀ. The order matters: Diag(α) and k kᵀ do not commute.

``kda_chunk_reference`` is the chunkwise form written out chunk by chunk (Kimi Linear eqs.
6–9); ``kda_chunk`` computes the same numbers with the private fast engine
(``attnlab._chunk_engine``).

Shapes: q, k ``[B, H, T, Dk]``; v ``[B, H, T, Dv]``; per-channel log-gates g ``[B, H, T, Dk]``
(≤ 0); beta ``[B, H, T]``; states ``[B, H, Dk, Dv]``, read as ``o = Sᵀ q``.
"""

from __future__ import annotations

import math

import torch

from . import _chunk_engine as engine
from ._chunk_engine import solve_unit_lower, ut_lower
from .checks import (
    check_finite,
    check_positive_int,
    check_range,
    check_tensor,
    resolve_scale,
)
from .delta import (
    CHANNEL_GATE_DIMS,
    check_beta,
    check_kernel_inputs,
    delta_write,
    read_state,
    start_state,
)


def kda_update(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One KDA token, the definition (q already scaled; no checks:
    :func:`kda_step` checks):

        S' = Diag(exp(g)) S    S_new = S' + β k (v − S'ᵀ k)ᵀ    o = S_newᵀ q

    q, k, g [B, H, Dk]; v [B, H, Dv]; beta [B, H]; state [B, H, Dk, Dv]
    -> (o [B, H, Dv], S_new).
    """
    decayed = g.exp()[..., :, None] * state
    state = delta_write(decayed, k, v, beta=beta)
    return read_state(state, q), state


def kda_step(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One decoding step of KDA: read the new token into the state, then answer its query.

        S' = Diag(α) S,  α = exp(g)     S_new = S' + β k (v − S'ᵀ k)ᵀ     o = S_newᵀ (scale · q)

    q, k [B, H, Dk]; v [B, H, Dv]; g [B, H, Dk] ≤ 0; beta [B, H] with β‖k‖² ≤ 2
    (``delta.check_beta``); state [B, H, Dk, Dv]; all finite. Returns (o [B, H, Dv], new state
    [B, H, Dk, Dv]).
    """
    sizes = check_tensor("q", q, ("B", "H", "Dk"))
    like_q = {"dtype": q.dtype, "device": q.device}
    check_tensor("k", k, ("B", "H", "Dk"), sizes, **like_q)
    check_tensor("v", v, ("B", "H", "Dv"), sizes, **like_q)
    check_tensor("g", g, ("B", "H", "Dk"), sizes, **like_q)
    check_tensor("beta", beta, ("B", "H"), sizes, **like_q)
    check_tensor("state", state, ("B", "H", "Dk", "Dv"), sizes, **like_q)
    for name, x in (("q", q), ("k", k), ("v", v), ("state", state)):
        check_finite(name, x)
    check_beta(beta, k)
    check_range("g", g, None, 0.0)
    if torch.isinf(g).any():
        raise ValueError(
            "g: expected finite log-gates (g = log α, α > 0), got -inf"
        )
    q = q * resolve_scale(scale, sizes["Dk"])
    return kda_update(q, k, v, g=g, beta=beta, state=state)


def kda_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """KDA one token at a time (the definition): the step of :func:`kda_step`, T times.

        S'  = Diag(α_t) S_{t-1},   α_t = exp(g_t)
        S_t = S' + β_t k_t (v_t − S'ᵀ k_t)ᵀ          o_t = S_tᵀ (scale · q_t)

    q, k [B, H, T, Dk]; v [B, H, T, Dv]; g [B, H, T, Dk] ≤ 0; beta [B, H, T] (``delta.check_beta``);
    initial_state [B, H, Dk, Dv] (zeros if None). Returns o [B, H, T, Dv] and S_T (or None).
    """
    sizes = check_kernel_inputs(
        q,
        k,
        v,
        beta=beta,
        g=g,
        gate_dims=CHANNEL_GATE_DIMS,
        initial_state=initial_state,
    )
    q = q * resolve_scale(scale, sizes["Dk"])
    state = start_state(initial_state, sizes, q)
    outputs = []
    for t in range(sizes["T"]):
        o_t, state = kda_update(
            q[:, :, t],
            k[:, :, t],
            v[:, :, t],
            g=g[:, :, t],
            beta=beta[:, :, t],
            state=state,
        )
        outputs.append(o_t)
    return torch.stack(outputs, dim=2), (
        state if output_final_state else None
    )


def kda_chunk(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """KDA chunk by chunk (KL eqs. 6–9; the Notation appendix, §6), with the index erratum
    fixed: the decay from position j to i excludes j, γ_(j,i] = exp(B_i − B_j).

        A_kk[i, j] = k_iᵀ Diag(γ_(j,i]) k_j (i > j),    A_qk[i, j] = q_iᵀ Diag(γ_(j,i]) k_j (i ≥ j)
        L = I + StrictTril(diag(β) A_kk)
        V_new = L⁻¹ diag(β) (V − (e^B ⊙ K) S)              (= U − W S, KL's W and U)
        O = (e^B ⊙ Q) S + A_qk V_new
        S ← Diag(e^{b_C}) S + (e^{b_C − B} ⊙ K)ᵀ V_new

    The numbers of :func:`kda_chunk_reference`, computed by the private fast engine (shared
    with Gated DeltaNet): all chunks' A_kk and A_qk by matrix products, factorised around one
    reference point per chunk (or per half, quarter, … when a chunk decays by more than e^40),
    the UT inverse for all chunks at once, then three fused products per chunk. No exponent
    exceeds e^20, so gates of −30 per step stay finite in float32, and so do the gradients.
    Same arguments as :func:`kda_recurrent`, plus ``chunk_size`` (any T is accepted).
    """
    sizes = check_kernel_inputs(
        q,
        k,
        v,
        beta=beta,
        g=g,
        gate_dims=CHANNEL_GATE_DIMS,
        initial_state=initial_state,
    )
    chunk_size = check_positive_int("chunk_size", chunk_size)
    q = q * resolve_scale(scale, sizes["Dk"])
    o, state = engine.decayed_delta_rule_chunks(
        q,
        k,
        v,
        g=g,
        beta=beta,
        state=start_state(initial_state, sizes, q),
        chunk_size=chunk_size,
    )
    return o, (state if output_final_state else None)


def kda_chunk_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """KDA chunk by chunk, written out (Kimi Linear eqs. 6–9, with the index
    erratum fixed; the Notation appendix, §6). In chunk n, B_i = g_1 + … + g_i
    ∈ R^Dk sums the log-gates from the chunk's start to position i, so the
    decay from a write at j to position i is γ_(j,i] = exp(B_i − B_j), over
    the half-open interval (j, i]: α_j acted on the state before token j
    wrote. With S = S_[n] the state entering the chunk:

        A_qk[i, j] = q_iᵀ Diag(γ_(j,i]) k_j  (j ≤ i),
        A_kk[i, j] = k_iᵀ Diag(γ_(j,i]) k_j  (j < i)
        L = I + StrictTril(diag(β) A_kk)
        W = L⁻¹ diag(β) (e^B ⊙ K),   U = L⁻¹ diag(β) V   (triangular solves)
        O_[n] = (e^B ⊙ Q) S + A_qk (U − W S)
        S_[n+1] = Diag(e^(B_C)) S + (e^(B_C − B) ⊙ K)ᵀ (U − W S)

    One decay per channel: A_qk is not one product Q Kᵀ times a C × C matrix,
    so it is summed here over a [C, C, Dk] tensor of decays. Every exponent
    is ≤ 0 (j > i is masked before ``exp``), so any gate stays finite; the
    last chunk may be shorter. Same arguments as :func:`kda_recurrent`, plus
    ``chunk_size``.
    """
    sizes = check_kernel_inputs(
        q,
        k,
        v,
        beta=beta,
        g=g,
        gate_dims=CHANNEL_GATE_DIMS,
        initial_state=initial_state,
    )
    chunk_size = check_positive_int("chunk_size", chunk_size)
    q = q * resolve_scale(scale, sizes["Dk"])
    state = start_state(initial_state, sizes, q)
    outputs = []
    for start in range(0, sizes["T"], chunk_size):
        # the last chunk may be shorter
        chunk = slice(start, start + chunk_size)
        # [B, H, C, D]
        q_n, k_n, v_n = (q[:, :, chunk], k[:, :, chunk], v[:, :, chunk])
        beta_n = beta[:, :, chunk, None]  # [B, H, C, 1]
        log_decay = g[:, :, chunk].cumsum(dim=2)  # B  [B, H, C, Dk]
        log_last = log_decay[:, :, -1:]  # B_C  [B, H, 1, Dk]
        size = k_n.shape[2]
        causal = torch.ones(
            size, size, dtype=torch.bool, device=q.device
        ).tril()
        # B_i − B_j  [B, H, C, C, Dk]
        pair = log_decay[:, :, :, None] - log_decay[:, :, None, :]
        gamma = pair.masked_fill(
            ~causal[..., None], -math.inf
        ).exp()  # γ_(j,i], 0 for j > i
        # (1) A_qk
        a_qk = torch.einsum("bhid,bhijd,bhjd->bhij", q_n, gamma, k_n)
        # (1) A_kk
        a_kk = torch.einsum("bhid,bhijd,bhjd->bhij", k_n, gamma, k_n)
        lower = torch.eye(size, dtype=q.dtype, device=q.device) + (
            beta_n * a_kk
        ).tril(-1)  # L
        # (2) W
        w = torch.linalg.solve_triangular(
            lower,
            beta_n * log_decay.exp() * k_n,
            upper=False,
            unitriangular=True,
        )
        # (3) U
        u = torch.linalg.solve_triangular(
            lower, beta_n * v_n, upper=False, unitriangular=True
        )
        v_new = u - w @ state  # U − W S
        # (4) O_[n]
        outputs.append((log_decay.exp() * q_n) @ state + a_qk @ v_new)
        to_end = (log_last - log_decay).exp()  # e^(B_C − B)  [B, H, C, Dk]
        state = (
            log_last.exp().transpose(-1, -2) * state  # (4) S_[n+1]
            + (to_end * k_n).transpose(-1, -2) @ v_new
        )
    return torch.cat(outputs, dim=2), (state if output_final_state else None)


def kda_parallel(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    include_start: bool = False,
) -> tuple[torch.Tensor, None]:
    """KDA for a whole sequence at once, from S_0 = 0, with every decay written out (the
    Notation appendix, §6).

        γ_(j,i] = Π_{s=j+1..i} α_s = exp(B_i − B_j)      the decay from token j to token i
        A_qk[i, j] = q_iᵀ Diag(γ_(j,i]) k_j  (j ≤ i)
        A_kk[i, j] = k_iᵀ Diag(γ_(j,i]) k_j  (j < i)
        O = A_qk (I + diag(β) A_kk)⁻¹ diag(β) V

    with B the cumulative sum of g over the whole sequence. ``include_start=True`` uses
    γ_[j,i] = Π_{s=j..i} α_s instead: the Kimi Linear report's own definition
    γ^{i→j} := Π_{k=i..j} α_k (its §2.1) read literally in its chunk equations. That is the
    report's index erratum (the Notation appendix, §6 and §10): a different model, which
    already fails at the first token (o_1 would be read through Diag(α_1) once more). Kept to
    measure the difference. q, k [B, H, T, Dk]; v [B, H, T, Dv]; g [B, H, T, Dk] ≤ 0; beta
    [B, H, T] (``delta.check_beta``).
    Returns (o [B, H, T, Dv], None). Holds [B, H, T, T, Dk] decays: short sequences only.
    """
    sizes = check_kernel_inputs(
        q, k, v, beta=beta, g=g, gate_dims=CHANNEL_GATE_DIMS
    )
    if not isinstance(include_start, bool):
        raise ValueError(
            f"include_start: expected True or False, got {include_start!r}"
        )
    q = q * resolve_scale(scale, sizes["Dk"])
    b = g.cumsum(dim=-2)  # [B, H, T, Dk]
    # B_i − B_j  [B, H, T(i), T(j), Dk]
    log_decay = b[..., :, None, :] - b[..., None, :, :]
    if include_start:
        log_decay = log_decay + g[..., None, :, :]  # one more factor: α_j
    t = sizes["T"]
    future = ~torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
    gamma = log_decay.masked_fill(
        future[..., None], -math.inf
    ).exp()  # 0 for j > i
    a_qk = torch.einsum("bhid,bhijd,bhjd->bhij", q, gamma, k)
    a_kk = torch.einsum("bhid,bhijd,bhjd->bhij", k, gamma, k)
    pseudo_values = solve_unit_lower(
        ut_lower(a_kk, beta), beta[..., None] * v
    )
    return a_qk @ pseudo_values, None


def kda_states(
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor | None = None,
) -> torch.Tensor:
    """Every state of the KDA recurrence, S_1 … S_T (to look at the memory over time):

        S_t = (I − β_t k_t k_tᵀ) Diag(α_t) S_{t−1} + β_t k_t v_tᵀ,   α_t = exp(g_t)

    k [B, H, T, Dk]; v [B, H, T, Dv]; g [B, H, T, Dk] ≤ 0; beta [B, H, T] (``delta.check_beta``);
    initial_state S_0 [B, H, Dk, Dv] (zeros if None). Returns [B, H, T, Dk, Dv]: T times the
    memory of one state, so for short sequences.
    """
    sizes = check_kernel_inputs(
        k,
        k,
        v,
        beta=beta,
        g=g,
        gate_dims=CHANNEL_GATE_DIMS,
        initial_state=initial_state,
    )
    state = start_state(initial_state, sizes, k)
    states = []
    for t in range(sizes["T"]):
        state = delta_write(
            g[:, :, t].exp()[..., :, None] * state,
            k[:, :, t],
            v[:, :, t],
            beta=beta[:, :, t],
        )
        states.append(state)
    return torch.stack(states, dim=2)


def _check_transition_inputs(
    k: torch.Tensor, g: torch.Tensor, beta: torch.Tensor
) -> dict:
    """k [B, H, C, Dk] (finite), g [B, H, C, Dk] (finite, ≤ 0), beta [B, H, C]
    (``delta.check_beta``); the sizes."""
    sizes = check_tensor("k", k, ("B", "H", "C", "Dk"))
    like = {"dtype": k.dtype, "device": k.device}
    check_tensor("g", g, ("B", "H", "C", "Dk"), sizes, **like)
    check_tensor("beta", beta, ("B", "H", "C"), sizes, **like)
    check_finite("k", k)
    check_beta(beta, k)
    check_range("g", g, None, 0.0)
    if not torch.isfinite(g).all():
        raise ValueError("g: expected finite log-gates (g = log α, α > 0)")
    return sizes


def kda_transition_products(
    k: torch.Tensor, *, g: torch.Tensor, beta: torch.Tensor
) -> torch.Tensor:
    """KDA's transition matrices multiplied out literally, the latest on the left:

        P^r = (I − β_r k_r k_rᵀ) Diag(α_r) ⋯ (I − β_1 k_1 k_1ᵀ) Diag(α_1),   α_i = exp(g_i)

    so that S_r = P^r S_0 + (the writes). k, g [B, H, C, Dk]; beta [B, H, C].
    Returns P^1 … P^C stacked, [B, H, C, Dk, Dk]: the reference for :func:`kda_wy_transitions`.
    """
    sizes = _check_transition_inputs(k, g, beta)
    eye = torch.eye(sizes["Dk"], dtype=k.dtype, device=k.device)
    product = eye.expand(sizes["B"], sizes["H"], -1, -1)
    out = []
    for r in range(sizes["C"]):
        k_r = k[:, :, r]
        erase = (
            eye
            - beta[:, :, r, None, None]
            * k_r[..., :, None]
            * k_r[..., None, :]
        )
        product = erase @ (g[:, :, r].exp()[..., :, None] * product)
        out.append(product)
    return torch.stack(out, dim=2)


def kda_wy_transitions(
    k: torch.Tensor,
    *,
    g: torch.Tensor,
    beta: torch.Tensor,
    include_start: bool = False,
) -> torch.Tensor:
    """P^1 … P^C from the WY representation of the Kimi Linear report (KL eqs.
    3–5):

        P^r = Diag(γ^r) − Σ_{i≤r} Diag(γ^{i→r}) k_i w_iᵀ
        w_r = β_r ( Diag(γ^r) k_r − Σ_{i<r} w_i (k_iᵀ Diag(γ^{i→r}) k_r) )

    with γ^r = Π_{s=1..r} α_s. The decay from token i to r must exclude i,
    γ^{i→r} = Π_{s=i+1..r} α_s = exp(B_r − B_i) (B the cumulative sum of g):
    this is what FLA implements as exp(g_last − g_i), and then the result
    equals :func:`kda_transition_products`. ``include_start=True`` reads
    γ^{i→r} with the report's own §2.1 definition, Π_{s=i..r} α_s, which
    already fails at r = 1 (the Notation appendix, §6 and §10: the index
    erratum). k, g [B, H, C, Dk]; beta [B, H, C]. Returns [B, H, C, Dk, Dk].
    """
    sizes = _check_transition_inputs(k, g, beta)
    if not isinstance(include_start, bool):
        raise ValueError(
            f"include_start: expected True or False, got {include_start!r}"
        )
    b = g.cumsum(dim=2)  # B  [B, H, C, Dk]

    def decay(i: int, r: int) -> torch.Tensor:  # γ^{i→r}  [B, H, Dk]
        log = b[:, :, r] - b[:, :, i] + (g[:, :, i] if include_start else 0.0)
        return log.exp()

    ws: list[torch.Tensor] = []
    out = []
    for r in range(sizes["C"]):
        k_r = k[:, :, r]
        w_r = b[:, :, r].exp() * k_r
        for i in range(r):
            # k_iᵀ Diag(γ) k_r
            overlap = (k[:, :, i] * decay(i, r) * k_r).sum(-1, keepdim=True)
            w_r = w_r - ws[i] * overlap
        ws.append(beta[:, :, r, None] * w_r)
        p_r = torch.diag_embed(b[:, :, r].exp())
        for i in range(r + 1):
            p_r = (
                p_r
                - (decay(i, r) * k[:, :, i])[..., :, None]
                * ws[i][..., None, :]
            )
        out.append(p_r)
    return torch.stack(out, dim=2)


def association_retention(
    states: torch.Tensor, key: torch.Tensor, value: torch.Tensor
) -> torch.Tensor:
    """How much of an old association ``key valueᵀ`` each key channel of the state still holds:

        r_t[d] = (S_t value)[d] / (key[d] · ‖value‖²)

    If S_0 = key valueᵀ and every later value is orthogonal to ``value``, S_t value is exactly
    what is left of the old association, so r_0 = 1 in every channel, and r_t[d] is the fraction
    surviving in channel d (decay shrinks it; the delta rule's erasures along later keys shrink
    it and move it between channels).
    states [B, H, T, Dk, Dv]; key [B, H, Dk] with no zero entry; value [B, H, Dv], not zero.
    Returns r [B, H, T, Dk].
    """
    sizes = check_tensor("states", states, ("B", "H", "T", "Dk", "Dv"))
    like = {"dtype": states.dtype, "device": states.device}
    check_tensor("key", key, ("B", "H", "Dk"), sizes, **like)
    check_tensor("value", value, ("B", "H", "Dv"), sizes, **like)
    if (key == 0).any():
        raise ValueError(
            "key: expected no zero entry (each channel's share is divided by it)"
        )
    norm2 = value.square().sum(-1)  # [B, H]
    if (norm2 == 0).any():
        raise ValueError("value: expected a non-zero vector")
    along = torch.einsum("bhtkv,bhv->bhtk", states, value)
    return along / (key[:, :, None, :] * norm2[:, :, None, None])
