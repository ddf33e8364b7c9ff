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
chunk, so a sequence of ``T`` tokens needs ``T / C`` sequential steps instead of ``T``. The
system's inverse 𝒯 is formed for all chunks at once, and each step only multiplies matrices.

Shapes: q, k ``[B, H, T, Dk]``; v ``[B, H, T, Dv]``; beta ``[B, H, T]``; scalar log-gates g
``[B, H, T]``; states ``[B, H, Dk, Dv]``, read as ``o = Sᵀ q``. The layers ``DeltaNetLayer``,
``GatedDeltaNetLayer`` and ``KDALayer`` (``attnlab.layers``) wrap the kernels with projections,
short convolutions, L2-normalised q and k, a per-head β and a per-head RMSNorm on the output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ._checks import (
    check_choice,
    check_positive_int,
    check_range,
    check_tensor,
    resolve_scale,
)
from .gated import (
    channel_decay_terms,
    check_gate,
)
from .linear import check_qkv, merge_chunks, split_chunks

SCALAR_GATE_DIMS = ("B", "H", "T")
CHANNEL_GATE_DIMS = ("B", "H", "T", "Dk")


# ----------------------------------------------------------------------------------------------
# Validation and the pieces shared by the delta-rule kernels (kda.py imports these too)
# ----------------------------------------------------------------------------------------------


def _check_kernel_inputs(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    beta: torch.Tensor,
    g: torch.Tensor | None = None,
    gate_dims: Sequence[str] = (),
    initial_state: torch.Tensor | None = None,
) -> dict[str, int]:
    """Check every input of a delta-rule kernel; return the sizes ``B, H, T, Dk, Dv``.

    beta must be ``[B, H, T]`` in [0, 2]; the log-gates g, if given, must have ``gate_dims``
    and be finite and ≤ 0 (decays α = exp(g) in (0, 1]).
    """
    sizes = check_qkv(q, k, v, initial_state)
    for name, size in sizes.items():
        if size == 0:
            raise ValueError(f"q: expected non-empty axes, got {name}=0 (q {tuple(q.shape)})")
    check_tensor("beta", beta, ("B", "H", "T"), sizes, dtype=q.dtype, device=q.device)
    check_range("beta", beta, 0.0, 2.0)
    if g is not None:
        check_tensor("g", g, gate_dims, sizes, dtype=q.dtype, device=q.device)
        check_gate(g, sizes, q)
    return sizes


def _start_state(initial_state: torch.Tensor | None, sizes: dict[str, int], like: torch.Tensor):
    """S_0: the given initial state, or zeros ``[B, H, Dk, Dv]``."""
    if initial_state is not None:
        return initial_state
    return like.new_zeros(sizes["B"], sizes["H"], sizes["Dk"], sizes["Dv"])


def _read(state: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """o = Sᵀ q.  state [B, H, Dk, Dv], q [B, H, Dk] -> o [B, H, Dv]."""
    return torch.einsum("bhkv,bhk->bhv", state, q)


def _delta_write(
    state: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor
) -> torch.Tensor:
    """S + β k (v − Sᵀk)ᵀ: move what S stores under key k a fraction β of the way to v.

    state [B, H, Dk, Dv], k [B, H, Dk], v [B, H, Dv], beta [B, H] -> [B, H, Dk, Dv].
    """
    error = v - _read(state, k)
    return state + beta[..., None, None] * k[..., :, None] * error[..., None, :]


def _ut_matrix(a_kk: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """L = I + StrictTril(diag(β) A_kk), whose inverse 𝒯 = L⁻¹ is the UT transform.

    a_kk [..., C, C] (only its strictly lower triangle is read), beta [..., C] -> L [..., C, C].
    """
    lower = (beta[..., :, None] * a_kk).tril_(-1)  # one new tensor, then edited in place
    lower.diagonal(dim1=-2, dim2=-1).fill_(1)
    return lower


#: blocks up to this size are inverted by one triangular solve; larger ones by halves
INVERSE_BLOCK = 16


def unit_lower_inverse(lower: torch.Tensor) -> torch.Tensor:
    """L⁻¹ for unit lower-triangular L [..., C, C], by halves (a blocked triangular inverse):

        [A  0]⁻¹   [     A⁻¹      0  ]
        [B  D]   = [ −D⁻¹ B A⁻¹  D⁻¹ ]

    recursively, until a block of at most ``INVERSE_BLOCK`` rows is inverted by one triangular
    solve against the identity. The same inverse as solving L X = I in one go (up to rounding),
    but most of the work is in the matrix products of the merges, which a CPU runs faster than
    a solve.
    """
    size = lower.shape[-1]
    if size <= INVERSE_BLOCK:
        identity = torch.eye(size, dtype=lower.dtype, device=lower.device).expand_as(lower)
        return _solve_unit_lower(lower, identity)
    half = size // 2
    top = unit_lower_inverse(lower[..., :half, :half])
    bottom = unit_lower_inverse(lower[..., half:, half:])
    inverse = torch.zeros_like(lower)
    inverse[..., :half, :half] = top
    inverse[..., half:, half:] = bottom
    inverse[..., half:, :half] = -(bottom @ lower[..., half:, :half]) @ top
    return inverse


def _solve_unit_lower(lower: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """X = L⁻¹ R for unit lower-triangular L [..., C, C] and R [..., C, D]: one triangular solve.

    Solved as Xᵀ Lᵀ = Rᵀ: the transposed views are column-major, which LAPACK takes without a
    copy (about 1.5x faster on a CPU than the row-major form).
    """
    return torch.linalg.solve_triangular(
        lower.mT, rhs.mT, upper=True, left=False, unitriangular=True
    ).mT


def _chunk_recurrence(
    q_in: torch.Tensor,
    k_in: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    k_out: torch.Tensor,
    lower: torch.Tensor,
    a_qk: torch.Tensor,
    decay: torch.Tensor | None,
    state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sequential part of every chunkwise delta rule: one step per chunk, S entering it.

    First, for all chunks at once, the UT transform 𝒯 = L⁻¹ (:func:`unit_lower_inverse`)
    with β folded in; then one step per chunk:

        V_new = 𝒯 diag(β) (V − K_in S)
        S     ← Diag(decay) S + K_outᵀ V_new
    and again for all chunks at once,
        O     = Q_in S + A_qk V_new

    V − K_in S is what the entering state gets wrong about the chunk's values; 𝒯, the inverse
    of L = I + StrictTril(diag(β) A_kk), adds the interference of the chunk's own writes. So
    V_new = U − W S for the U = 𝒯 diag(β) V and W = 𝒯 diag(β) K_in of the WY / UT form
    (MATH.md §4–§6), without forming U and W: the loop does three matrix products a chunk.

    Shapes (N chunks of C): q_in, k_in, k_out [B, H, N, C, Dk]; v [B, H, N, C, Dv]; beta
    [B, H, N, C]; lower, a_qk [B, H, N, C, C]; decay [B, H, N, 1] (scalar gate), [B, H, N, Dk]
    (per channel) or None; state [B, H, Dk, Dv]. Returns O [B, H, N, C, Dv] and the final state.
    """
    batch, heads, n_chunks, size = lower.shape[:4]
    ut_beta = unit_lower_inverse(lower) * beta[..., None, :]  # 𝒯 diag(β) [B, H, N, C, C]
    # fold B and H into one batch axis for baddbmm: out = input + batch1 @ batch2 in one call
    q_in, k_in, v, ut_beta, k_out, a_qk, state = (
        x.flatten(0, 1) for x in (q_in, k_in, v, ut_beta, k_out, a_qk, state)
    )
    n_decays = [None] * n_chunks if decay is None else decay.flatten(0, 1).unbind(1)
    entering_states, new_values = [], []
    for v_n, k_n, ut_n, k_out_n, decay_n in zip(  # chunk n of each, [B·H, ...]
        v.unbind(1), k_in.unbind(1), ut_beta.unbind(1), k_out.unbind(1), n_decays, strict=True
    ):
        entering_states.append(state)
        v_new = ut_n @ torch.baddbmm(v_n, k_n, state, alpha=-1)  # 𝒯 diag(β) (V − K_in S)
        new_values.append(v_new)
        if decay_n is not None:
            state = decay_n[:, :, None] * state
        state = torch.baddbmm(state, k_out_n.transpose(-1, -2), v_new)  # + K_outᵀ V_new
    states = torch.stack(entering_states, dim=1)  # [B·H, N, Dk, Dv]
    v_new = torch.stack(new_values, dim=1)  # [B·H, N, C, Dv]
    o = torch.baddbmm((q_in @ states).flatten(0, 1), a_qk.flatten(0, 1), v_new.flatten(0, 1))
    return o.view(batch, heads, n_chunks, size, -1), state.unflatten(0, (batch, heads))


def decayed_chunk_recurrence(
    qc: torch.Tensor,
    kc: torch.Tensor,
    vc: torch.Tensor,
    bc: torch.Tensor,
    b: torch.Tensor,
    state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The chunkwise delta rule with a decay, for Gated DeltaNet (one gate per head) and KDA
    (one per channel). B is the cumulative log-gate inside each chunk, b_C its last row, and
    γ_(j,i] = exp(B_i − B_j) the decay from position j to i:

        A_qk[i, j] = q_iᵀ Diag(γ_(j,i]) k_j  (i ≥ j),   A_kk[i, j] = k_iᵀ Diag(γ_(j,i]) k_j  (i > j)
        L = I + StrictTril(diag(β) A_kk)
        V_new = L⁻¹ diag(β) (V − (e^B ⊙ K) S)
        O = (e^B ⊙ Q) S + A_qk V_new
        S ← Diag(e^{b_C}) S + (e^{b_C − B} ⊙ K)ᵀ V_new

    The scores and the three decayed inputs come from ``channel_decay_terms`` (shared with
    GLA), which never forms e^{−B} alone, so gates of −20 per step stay finite in float32; the
    rest is :func:`_chunk_recurrence`. qc, kc [B, H, N, C, Dk]; vc [B, H, N, C, Dv]; bc (β)
    [B, H, N, C]; b [B, H, N, C, Dk], or [B, H, N, C, 1] for one gate shared by the channels;
    state [B, H, Dk, Dv] entering the first chunk. Returns O [B, H, N, C, Dv] and the final state.
    """
    (a_qk, a_kk), (q_in, k_in), k_out = channel_decay_terms((qc, kc), kc, b)
    lower = _ut_matrix(a_kk, bc)
    return _chunk_recurrence(q_in, k_in, vc, bc, k_out, lower, a_qk, b[..., -1, :].exp(), state)


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
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The delta rule, one token at a time (the definition).

        S_t = S_{t-1} + β_t k_t (v_t − S_{t-1}ᵀ k_t)ᵀ        o_t = S_tᵀ (scale · q_t)

    q, k [B, H, T, Dk]; v [B, H, T, Dv]; beta [B, H, T] in [0, 2]; initial_state S_0
    [B, H, Dk, Dv] (zeros if None). Returns o [B, H, T, Dv] and S_T (or None).
    """
    sizes = _check_kernel_inputs(q, k, v, beta=beta, initial_state=initial_state)
    q = q * resolve_scale(scale, sizes["Dk"])
    state = _start_state(initial_state, sizes, q)
    outputs = []
    for t in range(sizes["T"]):
        state = _delta_write(state, k[:, :, t], v[:, :, t], beta[:, :, t])
        outputs.append(_read(state, q[:, :, t]))
    return torch.stack(outputs, dim=2), (state if output_final_state else None)


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
    sizes = _check_kernel_inputs(q, k, v, beta=beta)
    q = q * resolve_scale(scale, sizes["Dk"])
    lower = _ut_matrix(k @ k.transpose(-1, -2), beta)
    pseudo_values = _solve_unit_lower(lower, beta[..., None] * v)
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
    """The delta rule chunk by chunk (WY / UT form, MATH.md §4).

    Within each chunk of C tokens (computed for all chunks at once):

        L = I + StrictTril(diag(β) K Kᵀ),    𝒯 = L⁻¹    (the UT transform)

    then sequentially over chunks, with S the state entering the chunk:

        V_new = 𝒯 diag(β) (V − K S)
        O = Q S + (Q Kᵀ ⊙ M) V_new,                S ← S + Kᵀ V_new

    V_new = U − W S with the W = 𝒯 diag(β) K and U = 𝒯 diag(β) V of the WY form: the same
    numbers, without forming W and U. Same arguments as :func:`delta_rule_recurrent`, plus
    ``chunk_size`` (any T is accepted: the last chunk is padded).
    """
    sizes = _check_kernel_inputs(q, k, v, beta=beta, initial_state=initial_state)
    # a sequence shorter than one chunk is one chunk: no padding work
    chunk_size = min(check_positive_int("chunk_size", chunk_size), sizes["T"])
    q = q * resolve_scale(scale, sizes["Dk"])
    qc, kc, vc = (split_chunks(x, chunk_size) for x in (q, k, v))  # [B, H, N, C, D]
    bc = split_chunks(beta.unsqueeze(-1), chunk_size).squeeze(-1)  # [B, H, N, C]
    lower = _ut_matrix(kc @ kc.transpose(-1, -2), bc)
    a_qk = (qc @ kc.transpose(-1, -2)).tril_()
    state = _start_state(initial_state, sizes, q)
    o, state = _chunk_recurrence(qc, kc, vc, bc, kc, lower, a_qk, None, state)
    return merge_chunks(o, sizes["T"]), (state if output_final_state else None)


def _check_chunk(k: torch.Tensor, beta: torch.Tensor) -> dict[str, int]:
    """k [B, H, C, Dk] and beta [B, H, C] in [0, 2] (like k); return the sizes."""
    sizes = check_tensor("k", k, ("B", "H", "C", "Dk"))
    check_tensor("beta", beta, ("B", "H", "C"), sizes, dtype=k.dtype, device=k.device)
    check_range("beta", beta, 0.0, 2.0)
    return sizes


def ut_transform(
    k: torch.Tensor, v: torch.Tensor, *, beta: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The WY / UT form of one chunk of the delta rule (MATH.md §4): W and the pseudo-values U.

        𝒯 = (I + StrictTril(diag(β) K Kᵀ))⁻¹      (the UT transform: one triangular solve)
        W = 𝒯 diag(β) K,   row by row  w_t = β_t (k_t − Σ_{i<t} w_i k_iᵀ k_t)
        U = 𝒯 diag(β) V,   row by row  u_t = β_t (v_t − Σ_{i<t} u_i k_iᵀ k_t)

    With them the chunk's C factors collapse into one low-rank correction,
    Π_{i=C..1} (I − β_i k_i k_iᵀ) = I − Kᵀ W = I − Σ_i k_i w_iᵀ (compare
    :func:`transition_product`), and the state after the chunk is
    S_C = (I − Kᵀ W) S_0 + Kᵀ U = S_0 + Kᵀ (U − W S_0) (just Kᵀ U when S_0 = 0).
    The whole input is one chunk: k [B, H, C, Dk]; v [B, H, C, Dv]; beta [B, H, C] in [0, 2].
    Returns (W [B, H, C, Dk], U [B, H, C, Dv]).
    """
    sizes = _check_chunk(k, beta)
    check_tensor("v", v, ("B", "H", "C", "Dv"), sizes, dtype=k.dtype, device=k.device)
    lower = _ut_matrix(k @ k.transpose(-1, -2), beta)
    return (_solve_unit_lower(lower, beta[..., None] * k),
            _solve_unit_lower(lower, beta[..., None] * v))


def transition_product(k: torch.Tensor, *, beta: torch.Tensor) -> torch.Tensor:
    """The delta rule's C transition matrices multiplied out, the latest on the left:

        P_C = (I − β_C k_C k_Cᵀ) ⋯ (I − β_1 k_1 k_1ᵀ),   so that S_C = P_C S_0 + (the writes)

    k [B, H, C, Dk]; beta [B, H, C] in [0, 2] -> P_C [B, H, Dk, Dk]. C sequential Dk × Dk
    products: the slow, literal way, to check :func:`ut_transform`'s I − Kᵀ W against.
    """
    sizes = _check_chunk(k, beta)
    eye = torch.eye(sizes["Dk"], dtype=k.dtype, device=k.device)
    product = eye.expand(sizes["B"], sizes["H"], -1, -1)
    for t in range(sizes["C"]):
        k_t = k[:, :, t]
        factor = eye - beta[:, :, t, None, None] * k_t[..., :, None] * k_t[..., None, :]
        product = factor @ product
    return product


DELTA_FORMS = ("recurrent", "chunk")
"""The forms :func:`delta_rule_cost` and :func:`time_delta_rule` know."""


@dataclass(frozen=True)
class DeltaRuleCost:
    """Work of one head of the delta rule: FLOPs with the C × C matrices inside chunks
    (``intra_flops``), FLOPs with the d × d state (``inter_flops``), and how many steps must run
    one after another (``sequential_steps``)."""

    intra_flops: int
    inter_flops: int
    sequential_steps: int

    @property
    def flops(self) -> int:
        """intra + inter FLOPs."""
        return self.intra_flops + self.inter_flops


def delta_rule_cost(
    form: str, length: int, head_dim: int, chunk_size: int = 64
) -> DeltaRuleCost:
    """FLOPs (2 per multiply-add) and sequential steps of the delta rule for one head, counted
    as ``delta_rule_recurrent`` / ``delta_rule_chunk`` compute it, with T = ``length``,
    d = ``head_dim`` = Dk = Dv, C = ``chunk_size``, N = ⌈T / C⌉ (the last chunk is padded).
    Leading terms only (the O(T d) vector operations are left out).

    recurrent (per token): Sᵀk, the rank-1 write β k (v − Sᵀk)ᵀ, and o = Sᵀq: 3 · 2d²,
        so inter = 6 T d², intra = 0, T sequential steps.
    chunk (per chunk): inside the chunk K Kᵀ, Q Kᵀ and A_qk V_new (3 · 2C²d) and the unit
        triangular solve (C(C − 1) d): intra = N (7C² − C) d; with the state K S, Kᵀ V_new and
        Q S (3 · 2Cd²): inter = 6 N C d², the recurrent work again; N sequential steps.

    So the chunkwise form does *more* arithmetic, (7C − 1) / (6d) more, but in matrix products
    and in T / C sequential steps instead of T. These are the algorithm's terms, with each
    chunk's triangular system solved by substitution; ``delta_rule_chunk`` spends a little more
    (it forms 𝒯 = L⁻¹, about 2C³/3, and multiplies by the full C × C matrix, 2C²d instead of
    C(C − 1) d), because on a CPU a matrix product runs several times faster than a solve.
    """
    check_choice("form", form, DELTA_FORMS)
    t = check_positive_int("length", length)
    d = check_positive_int("head_dim", head_dim)
    c = check_positive_int("chunk_size", chunk_size)
    if form == "recurrent":
        return DeltaRuleCost(intra_flops=0, inter_flops=6 * t * d * d, sequential_steps=t)
    n = -(-t // c)
    return DeltaRuleCost(intra_flops=n * (7 * c * c - c) * d, inter_flops=6 * n * c * d * d,
                         sequential_steps=n)


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

        S_t = α_t (I − β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ,   α_t = exp(g_t)   o_t = S_tᵀ q_t

    computed as "decay, then write": S' = α_t S_{t-1}; S_t = S' + β_t k_t (v_t − S'ᵀ k_t)ᵀ
    (the same thing, because a scalar α commutes with everything).
    q, k [B, H, T, Dk]; v [B, H, T, Dv]; g [B, H, T] ≤ 0; beta [B, H, T] in [0, 2];
    initial_state [B, H, Dk, Dv]. Returns o [B, H, T, Dv] and S_T (or None).
    """
    sizes = _check_kernel_inputs(
        q, k, v, beta=beta, g=g, gate_dims=SCALAR_GATE_DIMS, initial_state=initial_state
    )
    q = q * resolve_scale(scale, sizes["Dk"])
    state = _start_state(initial_state, sizes, q)
    outputs = []
    for t in range(sizes["T"]):
        state = g[:, :, t].exp()[..., None, None] * state
        state = _delta_write(state, k[:, :, t], v[:, :, t], beta[:, :, t])
        outputs.append(_read(state, q[:, :, t]))
    return torch.stack(outputs, dim=2), (state if output_final_state else None)


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
    """The gated delta rule chunk by chunk (MATH.md §5).

    With b the within-chunk cumulative sum of g (b_C its last entry) and the decay between two
    positions Γ_ij = exp(b_i − b_j) for i ≥ j:

        L = I + StrictTril(diag(β) (K Kᵀ ⊙ Γ))      (its inverse formed for all chunks at once)
        V_new = L⁻¹ diag(β) (V − (K ⊙ e^b) S)
        O = (Q ⊙ e^b) S + (Q Kᵀ ⊙ Γ) V_new
        S ← e^{b_C} S + (K ⊙ e^{b_C − b})ᵀ V_new

    V_new = U − W S with W = 𝒯̃ (K ⊙ e^b), U = 𝒯̃ V, 𝒯̃ = L⁻¹ diag(β) (MATH.md §5). This is
    ``kda.kda_chunk`` with one gate for all channels: both call
    :func:`decayed_chunk_recurrence`, here with a channel axis of size 1. It never forms e^{−b}
    alone, so gates of −20 per step stay finite in float32.
    Same arguments as :func:`gated_delta_rule_recurrent`, plus ``chunk_size`` (any T).
    """
    sizes = _check_kernel_inputs(
        q, k, v, beta=beta, g=g, gate_dims=SCALAR_GATE_DIMS, initial_state=initial_state
    )
    # a sequence shorter than one chunk is one chunk: no padding work
    chunk_size = min(check_positive_int("chunk_size", chunk_size), sizes["T"])
    q = q * resolve_scale(scale, sizes["Dk"])
    qc, kc, vc = (split_chunks(x, chunk_size) for x in (q, k, v))  # [B, H, N, C, D]
    bc = split_chunks(beta.unsqueeze(-1), chunk_size).squeeze(-1)  # [B, H, N, C]
    b = split_chunks(g.unsqueeze(-1), chunk_size).cumsum(dim=-2)  # b  [B, H, N, C, 1]
    state = _start_state(initial_state, sizes, q)
    o, state = decayed_chunk_recurrence(qc, kc, vc, bc, b, state)
    return merge_chunks(o, sizes["T"]), (state if output_final_state else None)
