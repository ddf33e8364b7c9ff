"""The delta rule (DeltaNet) and the gated delta rule (Gated DeltaNet): recurrent and chunkwise.

Linear attention only ever *adds* to its memory, ``S_t = S_{t-1} + k_t v_tᵀ``. The delta rule
first reads what the memory already stores under the key, ``S_{t-1}ᵀ k_t``, and writes only the
correction, a fraction ``β_t`` of the error::

    S_t = S_{t-1} + β_t k_t (v_t − S_{t-1}ᵀ k_t)ᵀ = (I − β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ
    o_t = S_tᵀ q_t

This is one gradient step with learning rate ``β_t`` on ``½‖Sᵀk_t − v_t‖²``. The gated delta
rule decays the memory by a scalar ``α_t = exp(g_t)`` per head before writing.

The chunkwise forms (the WY / UT transform of Yang et al. 2024) turn the product of the
``(I − β_i k_i k_iᵀ)`` factors inside a chunk into one small unit lower-triangular system per
chunk, so a sequence of ``T`` tokens needs ``T / C`` sequential steps instead of ``T``.
``delta_rule_chunk_reference`` and ``gated_delta_rule_chunk_reference`` write this out chunk by
chunk; the public ``*_chunk`` kernels compute the same numbers with the private fast engine
(``attnlab._chunk_engine``), which forms the systems' inverses for all chunks at once.

Shapes: q, k ``[B, H, T, Dk]``; v ``[B, H, T, Dv]``; beta ``[B, H, T]``; scalar log-gates g
``[B, H, T]``; states ``[B, H, Dk, Dv]``, read as ``o = Sᵀ q``. The layers ``DeltaNetLayer``,
``GatedDeltaNetLayer`` and ``KDALayer`` (``attnlab.layers``) wrap the kernels with projections,
short convolutions, L2-normalised q and k, a per-head β and a per-head RMSNorm on the output.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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
from .gated import check_gate
from .linear import check_qkv

SCALAR_GATE_DIMS = ("B", "H", "T")
CHANNEL_GATE_DIMS = ("B", "H", "T", "Dk")


# ----------------------------------------------------------------------------------------------
# Validation and the pieces shared by the delta-rule kernels (kda.py imports these too)
# ----------------------------------------------------------------------------------------------


def check_kernel_inputs(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    beta: torch.Tensor,
    g: torch.Tensor | None = None,
    gate_dims: Sequence[str] = (),
    initial_state: torch.Tensor | None = None,
    allow_unstable: bool = False,
) -> dict[str, int]:
    """Check every input of a delta-rule kernel; return the sizes ``B, H, T, Dk, Dv``.

    q, k, v (and S_0) must be finite (``check_qkv``); beta ``[B, H, T]`` must pass
    :func:`check_beta` (only β ≥ 0 when ``allow_unstable``); the log-gates g, if given, must
    have ``gate_dims`` and be finite and ≤ 0 (decays α = exp(g) in (0, 1]).
    """
    sizes = check_qkv(q, k, v, initial_state=initial_state)
    for name, size in sizes.items():
        if size == 0:
            raise ValueError(
                f"q: expected non-empty axes, got {name}=0 (q {tuple(q.shape)})"
            )
    check_tensor(
        "beta", beta, ("B", "H", "T"), sizes, dtype=q.dtype, device=q.device
    )
    if not isinstance(allow_unstable, bool):
        raise ValueError(
            f"allow_unstable: expected True or False, got {allow_unstable!r}"
        )
    if allow_unstable:
        check_range("beta", beta, 0.0, None)
    else:
        check_beta(beta, k)
    if g is not None:
        check_tensor("g", g, gate_dims, sizes, dtype=q.dtype, device=q.device)
        check_gate(g, sizes, q)
    return sizes


def check_beta(beta: torch.Tensor, k: torch.Tensor) -> None:
    """Check the write strengths: β_t ≥ 0 and β_t ‖k_t‖² ≤ 2 for every token (up to rounding).

    The delta rule's transition I − β_t k_t k_tᵀ has the eigenvalue 1 − β_t ‖k_t‖² along k_t
    (and 1 across it): only while that lies in [−1, 1] does the state stay bounded; beyond it
    grows geometrically (with ‖k‖ = 10 and β = 1, to 1e12 within a few tokens). For unit keys
    this is β ∈ [0, 2]. beta ``[...]`` and k ``[..., Dk]`` with the same leading axes.
    """
    check_range("beta", beta, 0.0, None)
    if beta.numel() == 0:
        return
    # β ‖k‖²
    strength = beta * torch.linalg.vector_norm(k.detach(), dim=-1).square()
    worst = strength.max()
    if worst > 2 * (1 + 64 * torch.finfo(k.dtype).eps):
        raise ValueError(
            f"beta, k: expected β‖k‖² <= 2 for every token (the delta rule's "
            f"transition I − β k kᵀ has the eigenvalue 1 − β‖k‖², which must stay "
            f"in [−1, 1]), got β‖k‖² up to {worst.item():.4g}; normalise the keys "
            f"(‖k‖ = 1 allows β in [0, 2]) or lower beta"
        )


def start_state(
    initial_state: torch.Tensor | None,
    sizes: dict[str, int],
    like: torch.Tensor,
):
    """S_0: the given initial state, or zeros ``[B, H, Dk, Dv]``."""
    if initial_state is not None:
        return initial_state
    return like.new_zeros(sizes["B"], sizes["H"], sizes["Dk"], sizes["Dv"])


def read_state(state: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """o = Sᵀ q.  state [B, H, Dk, Dv], q [B, H, Dk] -> o [B, H, Dv]."""
    return torch.einsum("bhkv,bhk->bhv", state, q)


def delta_write(
    state: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    beta: torch.Tensor,
) -> torch.Tensor:
    """S + β k (v − Sᵀk)ᵀ: move what S stores under key k a fraction β of the
    way to v.

    state [B, H, Dk, Dv], k [B, H, Dk], v [B, H, Dv], beta [B, H] ->
    [B, H, Dk, Dv].
    """
    error = v - read_state(state, k)
    return (
        state + beta[..., None, None] * k[..., :, None] * error[..., None, :]
    )


# ----------------------------------------------------------------------------------------------
# The delta rule (DeltaNet)
# ----------------------------------------------------------------------------------------------


def delta_rule_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    allow_unstable: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The delta rule, one token at a time (the definition).

        S_t = S_{t-1} + β_t k_t (v_t − S_{t-1}ᵀ k_t)ᵀ
        o_t = S_tᵀ (scale · q_t)

    q, k [B, H, T, Dk]; v [B, H, T, Dv]; beta [B, H, T] ≥ 0 with β‖k‖² ≤ 2
    (:func:`check_beta`); initial_state S_0 [B, H, Dk, Dv] (zeros if None).
    Returns o [B, H, T, Dv] and S_T (or None). ``allow_unstable=True`` skips
    the β‖k‖² ≤ 2 check, to watch the state grow without bound when it fails
    (Lesson 11's demonstration); no layer or other kernel offers it.
    """
    sizes = check_kernel_inputs(
        q,
        k,
        v,
        beta=beta,
        initial_state=initial_state,
        allow_unstable=allow_unstable,
    )
    q = q * resolve_scale(scale, sizes["Dk"])
    state = start_state(initial_state, sizes, q)
    outputs = []
    for t in range(sizes["T"]):
        state = delta_write(state, k[:, :, t], v[:, :, t], beta=beta[:, :, t])
        outputs.append(read_state(state, q[:, :, t]))
    return torch.stack(outputs, dim=2), (
        state if output_final_state else None
    )


def delta_rule_parallel(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    beta: torch.Tensor,
    scale: float | None = None,
) -> tuple[torch.Tensor, None]:
    """The delta rule for a whole sequence at once, starting from S_0 = 0 (the UT form).

        O = (Q Kᵀ ⊙ M) (I + M⁻ ⊙ diag(β) K Kᵀ)⁻¹ diag(β) V

    M is the causal mask with the diagonal, M⁻ without. U = (I + …)⁻¹ diag(β) V are the
    "pseudo-values": u_t = β_t (v_t − Σ_{i<t} u_i k_iᵀ k_t), and S_t = Σ_{i≤t} k_i u_iᵀ.
    q, k [B, H, T, Dk]; v [B, H, T, Dv]; beta [B, H, T]. Returns (o [B, H, T, Dv], None).
    Costs [T, T] matrices: use it to see the structure, not for long sequences.
    """
    sizes = check_kernel_inputs(q, k, v, beta=beta)
    q = q * resolve_scale(scale, sizes["Dk"])
    lower = ut_lower(k @ k.transpose(-1, -2), beta)
    pseudo_values = solve_unit_lower(lower, beta[..., None] * v)
    return (q @ k.transpose(-1, -2)).tril() @ pseudo_values, None


def delta_rule_chunk(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The delta rule chunk by chunk (WY / UT form, the Notation appendix, §4).

    Within each chunk of C tokens, with S the state entering the chunk:

        L = I + StrictTril(diag(β) K Kᵀ),    𝒯 = L⁻¹    (the UT transform)
        V_new = 𝒯 diag(β) (V − K S)                      (= U − W S of the WY form)
        O = Q S + (Q Kᵀ ⊙ M) V_new,                S ← S + Kᵀ V_new

    The numbers of :func:`delta_rule_chunk_reference`, computed by the private fast engine: 𝒯
    for all chunks at once by a blocked inverse, then three fused matrix products per chunk.
    Same arguments as :func:`delta_rule_recurrent`, plus ``chunk_size`` (any T is accepted:
    the last chunk is padded).
    """
    sizes = check_kernel_inputs(
        q, k, v, beta=beta, initial_state=initial_state
    )
    chunk_size = check_positive_int("chunk_size", chunk_size)
    q = q * resolve_scale(scale, sizes["Dk"])
    o, state = engine.delta_rule_chunks(
        q,
        k,
        v,
        beta=beta,
        state=start_state(initial_state, sizes, q),
        chunk_size=chunk_size,
    )
    return o, (state if output_final_state else None)


def delta_rule_chunk_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The delta rule chunk by chunk, written out: the WY / UT form of Yang et
    al. 2024, "Parallelizing Linear Transformers with the Delta Rule over
    Sequence Length", its chunkwise form (the Notation appendix, §4). In chunk
    n, with S = S_[n] the state entering it:

        L = I + StrictTril(diag(β) K Kᵀ)      unit lower triangular, C × C
        W = L⁻¹ diag(β) K,  U = L⁻¹ diag(β) V  the UT transform: triangular
                                               solves
        V_new = U − W S                        what the chunk's writes add,
                                               given S
        O_[n] = Q S + (Q Kᵀ ⊙ M) V_new         read S, plus the chunk's own
                                               writes
        S_[n+1] = S + Kᵀ V_new

    Row by row, u_t − w_t S = β_t (v_t − S_{t−1}ᵀ k_t): the error the token
    corrects, with the chunk's earlier writes folded into S_{t−1} by the
    solve. The last chunk may be shorter (any T). Same arguments as
    :func:`delta_rule_recurrent`, plus ``chunk_size``.
    """
    sizes = check_kernel_inputs(
        q, k, v, beta=beta, initial_state=initial_state
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
        eye = torch.eye(k_n.shape[2], dtype=q.dtype, device=q.device)
        lower = eye + (beta_n * (k_n @ k_n.transpose(-1, -2))).tril(-1)  # L
        w = torch.linalg.solve_triangular(
            lower, beta_n * k_n, upper=False, unitriangular=True
        )
        u = torch.linalg.solve_triangular(
            lower, beta_n * v_n, upper=False, unitriangular=True
        )
        v_new = u - w @ state  # U − W S  [B, H, C, Dv]
        inside = (q_n @ k_n.transpose(-1, -2)).tril()  # Q Kᵀ ⊙ M
        outputs.append(q_n @ state + inside @ v_new)  # O_[n]
        state = state + k_n.transpose(-1, -2) @ v_new  # S_[n+1]
    return torch.cat(outputs, dim=2), (state if output_final_state else None)


def _check_chunk(k: torch.Tensor, beta: torch.Tensor) -> dict[str, int]:
    """k [B, H, C, Dk] (finite) and beta [B, H, C] (like k, :func:`check_beta`); the sizes."""
    sizes = check_tensor("k", k, ("B", "H", "C", "Dk"))
    check_tensor(
        "beta", beta, ("B", "H", "C"), sizes, dtype=k.dtype, device=k.device
    )
    check_finite("k", k)
    check_beta(beta, k)
    return sizes


def ut_transform(
    k: torch.Tensor, v: torch.Tensor, *, beta: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The WY / UT form of one chunk of the delta rule (the Notation
    appendix, §4): W and U.

        𝒯 = (I + StrictTril(diag(β) K Kᵀ))⁻¹   (the UT transform: one
                                               triangular solve)
        W = 𝒯 diag(β) K,   row by row  w_t = β_t (k_t − Σ_{i<t} w_i k_iᵀ k_t)
        U = 𝒯 diag(β) V,   row by row  u_t = β_t (v_t − Σ_{i<t} u_i k_iᵀ k_t)

    With them the chunk's C factors collapse into one low-rank correction,
    Π_{i=C..1} (I − β_i k_i k_iᵀ) = I − Kᵀ W = I − Σ_i k_i w_iᵀ (compare
    :func:`transition_product`), and the state after the chunk is
    S_C = (I − Kᵀ W) S_0 + Kᵀ U = S_0 + Kᵀ (U − W S_0) (just Kᵀ U when
    S_0 = 0). The whole input is one chunk: k [B, H, C, Dk]; v [B, H, C, Dv];
    beta [B, H, C] (:func:`check_beta`). Returns (W [B, H, C, Dk], U
    [B, H, C, Dv]).
    """
    sizes = _check_chunk(k, beta)
    check_tensor(
        "v", v, ("B", "H", "C", "Dv"), sizes, dtype=k.dtype, device=k.device
    )
    check_finite("v", v)
    lower = ut_lower(k @ k.transpose(-1, -2), beta)
    return (
        solve_unit_lower(lower, beta[..., None] * k),
        solve_unit_lower(lower, beta[..., None] * v),
    )


def transition_product(
    k: torch.Tensor, *, beta: torch.Tensor
) -> torch.Tensor:
    """The delta rule's C transition matrices multiplied out, the latest on the left:

        P_C = (I − β_C k_C k_Cᵀ) ⋯ (I − β_1 k_1 k_1ᵀ),   so that S_C = P_C S_0 + (the writes)

    k [B, H, C, Dk]; beta [B, H, C] (:func:`check_beta`) -> P_C [B, H, Dk, Dk]. C sequential Dk × Dk
    products: the slow, literal way, to check :func:`ut_transform`'s I − Kᵀ W against.
    """
    sizes = _check_chunk(k, beta)
    eye = torch.eye(sizes["Dk"], dtype=k.dtype, device=k.device)
    product = eye.expand(sizes["B"], sizes["H"], -1, -1)
    for t in range(sizes["C"]):
        k_t = k[:, :, t]
        factor = (
            eye
            - beta[:, :, t, None, None]
            * k_t[..., :, None]
            * k_t[..., None, :]
        )
        product = factor @ product
    return product


# ----------------------------------------------------------------------------------------------
# The gated delta rule (Gated DeltaNet): a scalar decay α_t = exp(g_t) per head and token
# ----------------------------------------------------------------------------------------------


def gated_delta_rule_recurrent(
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
    """The gated delta rule, one token at a time (the definition).

        S_t = α_t (I − β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ,   α_t = exp(g_t)
        o_t = S_tᵀ q_t

    computed as "decay, then write": S' = α_t S_{t-1}; S_t = S' + β_t k_t
    (v_t − S'ᵀ k_t)ᵀ (the same thing, because a scalar α commutes with
    everything). q, k [B, H, T, Dk]; v [B, H, T, Dv]; g [B, H, T] ≤ 0; beta
    [B, H, T] (:func:`check_beta`); initial_state [B, H, Dk, Dv]. Returns o
    [B, H, T, Dv] and S_T (or None).
    """
    sizes = check_kernel_inputs(
        q,
        k,
        v,
        beta=beta,
        g=g,
        gate_dims=SCALAR_GATE_DIMS,
        initial_state=initial_state,
    )
    q = q * resolve_scale(scale, sizes["Dk"])
    state = start_state(initial_state, sizes, q)
    outputs = []
    for t in range(sizes["T"]):
        state = g[:, :, t].exp()[..., None, None] * state
        state = delta_write(state, k[:, :, t], v[:, :, t], beta=beta[:, :, t])
        outputs.append(read_state(state, q[:, :, t]))
    return torch.stack(outputs, dim=2), (
        state if output_final_state else None
    )


def gated_delta_rule_chunk(
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
    """The gated delta rule chunk by chunk (the Notation appendix, §5).

    With b the within-chunk cumulative sum of g (b_C its last entry) and the decay between two
    positions Γ_ij = exp(b_i − b_j) for i ≥ j:

        L = I + StrictTril(diag(β) (K Kᵀ ⊙ Γ))
        V_new = L⁻¹ diag(β) (V − (K ⊙ e^b) S)
        O = (Q ⊙ e^b) S + (Q Kᵀ ⊙ Γ) V_new
        S ← e^{b_C} S + (K ⊙ e^{b_C − b})ᵀ V_new

    The numbers of :func:`gated_delta_rule_chunk_reference`, computed by the private fast
    engine, on the same path as ``kda.kda_chunk`` (a channel axis of size 1). No exponent in
    it exceeds e^20, so gates of −30 per step stay finite in float32.
    Same arguments as :func:`gated_delta_rule_recurrent`, plus ``chunk_size`` (any T).
    """
    sizes = check_kernel_inputs(
        q,
        k,
        v,
        beta=beta,
        g=g,
        gate_dims=SCALAR_GATE_DIMS,
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


def gated_delta_rule_chunk_reference(
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
    """The gated delta rule chunk by chunk, written out (Gated DeltaNet, Yang, Kautz and
    Hatamizadeh 2025, its chunkwise form; the Notation appendix, §5). In chunk n,
    b_i = g_1 + … + g_i sums the log-gates from the chunk's start to position i, so
    Γ_ij = e^(b_i − b_j) (j ≤ i) is the decay over the half-open interval (j, i]: α_j acted on
    the state before token j wrote.
    With S = S_[n] the state entering the chunk (decayed by e^(b_i) when position i reads it):

        L = I + StrictTril(diag(β) (K Kᵀ ⊙ Γ))
        W = L⁻¹ diag(β) (K ⊙ e^b),   U = L⁻¹ diag(β) V     (triangular solves)
        V_new = U − W S
        O_[n] = (Q ⊙ e^b) S + (Q Kᵀ ⊙ Γ) V_new
        S_[n+1] = e^(b_C) S + (K ⊙ e^(b_C − b))ᵀ V_new

    One gate per head: the decayed scores are one product Q Kᵀ times the C × C matrix Γ.
    Every exponent is ≤ 0 (j > i is masked before ``exp``), so any gate stays finite; the
    last chunk may be shorter. Same arguments as :func:`gated_delta_rule_recurrent`.
    """
    sizes = check_kernel_inputs(
        q,
        k,
        v,
        beta=beta,
        g=g,
        gate_dims=SCALAR_GATE_DIMS,
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
        log_decay = g[:, :, chunk].cumsum(dim=-1)  # b  [B, H, C]
        log_last = log_decay[..., -1:, None]  # b_C  [B, H, 1, 1]
        size = k_n.shape[2]
        causal = torch.ones(
            size, size, dtype=torch.bool, device=q.device
        ).tril()
        # Γ  [B, H, C, C], 0 for j > i
        gamma = (
            (log_decay[..., :, None] - log_decay[..., None, :])
            .masked_fill(~causal, -math.inf)
            .exp()
        )
        lower = torch.eye(size, dtype=q.dtype, device=q.device) + (
            beta_n * (k_n @ k_n.transpose(-1, -2) * gamma)
        ).tril(-1)  # L
        from_start = log_decay[..., None].exp()  # e^b  [B, H, C, 1]
        w = torch.linalg.solve_triangular(
            lower, beta_n * k_n * from_start, upper=False, unitriangular=True
        )
        u = torch.linalg.solve_triangular(
            lower, beta_n * v_n, upper=False, unitriangular=True
        )
        v_new = u - w @ state  # U − W S
        outputs.append(
            (q_n * from_start) @ state
            + (q_n @ k_n.transpose(-1, -2) * gamma) @ v_new
        )
        to_end = (
            log_last - log_decay[..., None]
        ).exp()  # e^(b_C − b)  [B, H, C, 1]
        # S_[n+1]
        state = (
            log_last.exp() * state + (k_n * to_end).transpose(-1, -2) @ v_new
        )
    return torch.cat(outputs, dim=2), (state if output_final_state else None)
