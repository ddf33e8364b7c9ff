"""Linear attention (MATH.md §2): one state matrix instead of a growing KV cache.

Replace softmax(q·k) by a plain dot product of (feature-mapped) queries and keys, and causal
attention becomes a recurrence with a fixed-size state ``S [Dk, Dv]`` per head:

    S_t = S_{t-1} + k_t v_tᵀ,       o_t = S_tᵀ q_t                       (recurrent)
    O   = (Q Kᵀ ⊙ M) V                                                  (parallel, M causal)
    O_[n] = Q_[n] S_[n] + (Q_[n] K_[n]ᵀ ⊙ M) V_[n],  S_[n+1] = S_[n] + K_[n]ᵀ V_[n]   (chunkwise)

With ``normalize=True`` a running key sum ``z_t = z_{t-1} + k_t`` divides the output,
``o_t = S_tᵀ q_t / (z_tᵀ q_t + eps)`` (Katharopoulos et al. 2020). Tensors are ``[B, H, T, D]``;
the scale ``s`` (default ``1/sqrt(Dk)``) multiplies q. Kernels take q and k as given: the layer
applies the feature map.

The chunk helpers here (``split_chunks``, ``merge_chunks``, ``chunk_states``) and the input
checks (``check_qkv``) are shared by the gated kernels in ``attnlab.gated``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ._checks import (
    check_choice,
    check_positive_int,
    check_tensor,
    resolve_scale,
)

NORMALIZER_EPS = 1e-6
"""Default ``eps`` added to the denominator ``z_tᵀ q_t`` of normalised linear attention."""

LinearState = torch.Tensor | tuple[torch.Tensor, torch.Tensor]
"""A state ``S [B, H, Dk, Dv]``, or the pair ``(S, z)`` with ``z [B, H, Dk]`` when normalised."""


# --------------------------------------------------------------------------- feature maps
def elu_plus_one(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1 = x + 1 for x > 0, exp(x) otherwise: positive, so φ(q)ᵀφ(k) > 0.

    Computed by cases, because ``F.elu(x) + 1`` rounds to exactly 0 in float32 below x ≈ -17
    (exp(x) - 1 + 1 loses exp(x)), which would let the normaliser reach 0.
    """
    return torch.where(x > 0, x + 1, torch.exp(x.clamp(max=0)))


def identity(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = x: no feature map (plain linear attention on the raw q and k)."""
    return x


FEATURE_MAPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "elu+1": elu_plus_one,
    "identity": identity,
}
"""Feature maps by name, for ``LinearAttentionLayer(feature_map=...)``."""


# --------------------------------------------------------------------------- shared checks
def check_qkv(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, initial_state: torch.Tensor | None = None
) -> dict[str, int]:
    """Check q, k ``[B, H, T, Dk]``, v ``[B, H, T, Dv]`` and ``initial_state [B, H, Dk, Dv]``.

    All must share q's dtype (float32 or float64) and device. Returns the sizes by name
    (``B, H, T, Dk, Dv``); raises ``ValueError`` naming the offending argument.
    """
    sizes = check_tensor("q", q, ("B", "H", "T", "Dk"))
    if sizes["T"] == 0:
        raise ValueError(f"q: expected at least one time step, got shape {tuple(q.shape)}")
    check_tensor("k", k, ("B", "H", "T", "Dk"), sizes, dtype=q.dtype, device=q.device)
    check_tensor("v", v, ("B", "H", "T", "Dv"), sizes, dtype=q.dtype, device=q.device)
    if initial_state is not None:
        check_tensor("initial_state", initial_state, ("B", "H", "Dk", "Dv"), sizes,
                     dtype=q.dtype, device=q.device)
    return sizes


def _split_normalised_state(
    initial_state: object, normalize: bool
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """``initial_state`` -> ``(S_0, z_0)``: a pair when ``normalize``, else a tensor (z_0 None)."""
    if initial_state is None:
        return None, None
    if not normalize:
        return initial_state, None  # type: ignore[return-value]
    if not (isinstance(initial_state, tuple | list) and len(initial_state) == 2):
        raise ValueError("initial_state: with normalize=True expected a pair (S [B, H, Dk, Dv], "
                         f"z [B, H, Dk]), got {type(initial_state).__name__}")
    return initial_state[0], initial_state[1]


def _check_linear_inputs(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, initial_state: object, normalize: bool,
    eps: float,
) -> tuple[dict[str, int], torch.Tensor, torch.Tensor | None]:
    """Check the inputs of a linear-attention kernel; return sizes and the zero-filled (S_0, z_0).

    ``z_0`` is None unless ``normalize``.
    """
    s0, z0 = _split_normalised_state(initial_state, normalize)
    sizes = check_qkv(q, k, v, s0)
    if normalize and z0 is not None:
        check_tensor("initial_state[1] (z)", z0, ("B", "H", "Dk"), sizes, dtype=q.dtype,
                     device=q.device)
    if isinstance(eps, bool) or not isinstance(eps, int | float) or eps < 0:
        raise ValueError(f"eps: expected a number >= 0, got {eps!r}")
    b, h, dk, dv = sizes["B"], sizes["H"], sizes["Dk"], sizes["Dv"]
    if s0 is None:
        s0 = q.new_zeros(b, h, dk, dv)
    if normalize and z0 is None:
        z0 = q.new_zeros(b, h, dk)
    return sizes, s0, z0


def _final(
    state: torch.Tensor, z: torch.Tensor | None, output_final_state: bool
) -> LinearState | None:
    """What a kernel returns as its final state: None, ``S`` or ``(S, z)``."""
    if not output_final_state:
        return None
    return state if z is None else (state, z)


# --------------------------------------------------------------------------- chunk helpers
def split_chunks(x: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """``[B, H, T, D]`` -> ``[B, H, N, C, D]`` with ``N = ceil(T / C)``; the last chunk is
    zero-padded (a zero key, value, query or log-gate changes nothing in any kernel here)."""
    b, h, t, d = x.shape
    n = -(-t // chunk_size)
    if n * chunk_size > t:
        x = F.pad(x, (0, 0, 0, n * chunk_size - t))
    return x.reshape(b, h, n, chunk_size, d)


def merge_chunks(x: torch.Tensor, length: int) -> torch.Tensor:
    """``[B, H, N, C, D]`` -> ``[B, H, T, D]``: undo ``split_chunks``, dropping the padding."""
    b, h, n, c, d = x.shape
    return x.reshape(b, h, n * c, d)[:, :, :length]


def chunk_states(
    initial_state: torch.Tensor, increments: torch.Tensor, decay: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The state entering every chunk: ``S_[0] = S_0``, ``S_[n+1] = decay_n ⊙ S_[n] + U_n``.

    ``initial_state [B, H, Dk, Dv]``; ``increments`` U ``[B, H, N, Dk, Dv]``; ``decay`` (None
    means 1) broadcasts against one state, e.g. ``[B, H, N, Dk, 1]`` for a per-key-channel decay.
    Returns ``(states [B, H, N, Dk, Dv], S_[N])``. This loop over chunks is the only sequential
    part of a chunkwise kernel.
    """
    states = []
    state = initial_state
    for n in range(increments.shape[2]):
        states.append(state)
        if decay is None:
            state = state + increments[:, :, n]
        else:
            state = torch.addcmul(increments[:, :, n], decay[:, :, n], state)  # U + decay ⊙ S
    return torch.stack(states, dim=2), state


def causal_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Q Kᵀ ⊙ M over the last two axes: q, k ``[..., T, Dk]`` -> ``[..., T, T]``, zero for j > i."""
    return (q @ k.transpose(-1, -2)).tril_()


# --------------------------------------------------------------------------- kernels
def linear_attention_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None = None,
    normalize: bool = False,
    eps: float = NORMALIZER_EPS,
    initial_state: LinearState | None = None,
    output_final_state: bool = False,
) -> tuple[torch.Tensor, LinearState | None]:
    """Linear attention token by token, the definition:

        S_t = S_{t-1} + k_t v_tᵀ,      o_t = S_tᵀ (s q_t)
        normalised:  z_t = z_{t-1} + k_t,   o_t = S_tᵀ (s q_t) / (z_tᵀ (s q_t) + eps)

    q, k ``[B, H, T, Dk]``, v ``[B, H, T, Dv]`` -> o ``[B, H, T, Dv]``. The state is
    ``S [B, H, Dk, Dv]``; with ``normalize=True`` both ``initial_state`` and the returned final
    state are the pair ``(S, z)`` with ``z [B, H, Dk]``. ``s`` (``scale``, default 1/sqrt(Dk))
    cancels in the normalised form except against ``eps`` (default ``NORMALIZER_EPS`` = 1e-6,
    only there to keep the division defined). Normalising assumes positive features (e.g.
    ``elu_plus_one``) so that the denominator stays away from 0.
    """
    sizes, state, z = _check_linear_inputs(q, k, v, initial_state, normalize, eps)
    q = q * resolve_scale(scale, sizes["Dk"])
    outputs = []
    for t in range(sizes["T"]):
        q_t, k_t, v_t = q[:, :, t], k[:, :, t], v[:, :, t]
        state = state + k_t.unsqueeze(-1) * v_t.unsqueeze(-2)  # S_t = S_{t-1} + k_t v_tᵀ
        o_t = torch.einsum("bhkv,bhk->bhv", state, q_t)  # S_tᵀ q_t
        if normalize:
            z = z + k_t  # z_t = z_{t-1} + k_t
            o_t = o_t / ((z * q_t).sum(-1, keepdim=True) + eps)
        outputs.append(o_t)
    return torch.stack(outputs, dim=2), _final(state, z, output_final_state)


def linear_attention_parallel(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None = None,
    normalize: bool = False,
    eps: float = NORMALIZER_EPS,
    initial_state: LinearState | None = None,
    output_final_state: bool = False,
) -> tuple[torch.Tensor, LinearState | None]:
    """Linear attention for all positions at once, like softmax attention without the softmax:

        O = (s Q Kᵀ ⊙ M) V + s Q S_0                                  M: causal mask [T, T]
        normalised:  O = [(s Q Kᵀ ⊙ M) V + s Q S_0] / [(s Q Kᵀ ⊙ M) 1 + s Q z_0 + eps]
        final state: S_T = S_0 + Kᵀ V,   z_T = z_0 + Kᵀ 1

    Shapes and state format as ``linear_attention_recurrent``. Costs ``O(T² D)`` time and a
    ``[B, H, T, T]`` score matrix, like softmax attention.
    """
    sizes, state, z = _check_linear_inputs(q, k, v, initial_state, normalize, eps)
    q = q * resolve_scale(scale, sizes["Dk"])
    scores = causal_scores(q, k)
    o = scores @ v + q @ state
    if normalize:
        o = o / (scores.sum(-1, keepdim=True) + (q * z.unsqueeze(2)).sum(-1, keepdim=True) + eps)
        z = z + k.sum(2)
    return o, _final(state + k.transpose(-1, -2) @ v, z, output_final_state)


def linear_attention_chunk(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None = None,
    normalize: bool = False,
    eps: float = NORMALIZER_EPS,
    initial_state: LinearState | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
) -> tuple[torch.Tensor, LinearState | None]:
    """Linear attention chunk by chunk: parallel inside a chunk, recurrent across chunks.

        O_[n] = s Q_[n] S_[n] + (s Q_[n] K_[n]ᵀ ⊙ M) V_[n],      S_[n+1] = S_[n] + K_[n]ᵀ V_[n]

    ``S_[n]`` is the state entering chunk n (``S_[0] = S_0``). The normaliser is the same
    computation with a column of ones appended to V: its last output column is
    ``(s Q_[n] K_[n]ᵀ ⊙ M) 1 + s Q_[n] z_[n]`` and the last column of the state is z.
    Any T works (the last chunk is padded). Shapes and state format as
    ``linear_attention_recurrent``; cost ``O(T C D + T Dk Dv)``.
    """
    sizes, state, z = _check_linear_inputs(q, k, v, initial_state, normalize, eps)
    # a sequence shorter than one chunk is one chunk: no padding work
    chunk_size = min(check_positive_int("chunk_size", chunk_size), sizes["T"])
    q = q * resolve_scale(scale, sizes["Dk"])
    if normalize:
        v = torch.cat([v, torch.ones_like(v[..., :1])], dim=-1)
        state = torch.cat([state, z.unsqueeze(-1)], dim=-1)
    qc, kc, vc = (split_chunks(x, chunk_size) for x in (q, k, v))  # [B, H, N, C, D]
    scores = causal_scores(qc, kc)
    states, state = chunk_states(state, kc.transpose(-1, -2) @ vc)
    o = merge_chunks(qc @ states + scores @ vc, sizes["T"])
    if normalize:
        o = o[..., :-1] / (o[..., -1:] + eps)
        state, z = state[..., :-1], state[..., -1]
    return o, _final(state, z, output_final_state)


# --------------------------------------------------------------------------- cost of the forms
LINEAR_FORMS = ("parallel", "recurrent", "chunk")
"""The three ways to compute causal linear attention, named as in ``linear_attention_<form>``."""


@dataclass(frozen=True)
class FormCost:
    """The work of one form of linear attention for one head and one sequence.

    - ``flops``: 2 × the multiply-adds of its matrix products (the feature map, the scale, the
      mask and the sums of partial outputs are not counted).
    - ``score_numbers``: entries of the score matrices ``Q Kᵀ ⊙ M`` it holds at once.
    - ``sequential_steps``: steps that must run one after another (its loop over time or chunks).
    """

    flops: int
    score_numbers: int
    sequential_steps: int


def linear_attention_cost(
    form: str, length: int, head_dim: int, chunk_size: int = 64
) -> FormCost:
    """FLOPs, score-matrix size and sequential steps of ``form`` for one head, as the kernels of
    this module compute it, with T = ``length``, d = ``head_dim`` = Dk = Dv, C = ``chunk_size``
    and S_0 = 0:

    ==========  ===============================================  ===========  ================
    form        FLOPs                                            scores held  sequential steps
    ==========  ===============================================  ===========  ================
    parallel    4 T² d         (Q Kᵀ, then the T × T scores · V)  T²           1
    recurrent   4 T d²         (k_t v_tᵀ, then S_tᵀ q_t)          0            T
    chunk       4 N C (C d + d²)   N = ⌈T / C⌉ chunks             N C²         N
    ==========  ===============================================  ===========  ================

    Chunkwise, each chunk multiplies Q Kᵀ and the scores by V inside the chunk (2 C² d
    multiply-adds) and Q by the state and Kᵀ by V (2 C d²); the last chunk is padded to C
    tokens, as ``linear_attention_chunk`` does. So ``chunk_size=1`` costs the recurrent work plus
    4 T d, and ``chunk_size=T`` the parallel work plus 4 T d². The parallel kernel multiplies
    the full T × T matrix (a kernel that skipped the masked upper half would do about half); it
    also computes Q S_0 and the final state's Kᵀ V, 4 T d² more, which are not counted here.
    """
    check_choice("form", form, LINEAR_FORMS)
    t = check_positive_int("length", length)
    d = check_positive_int("head_dim", head_dim)
    c = check_positive_int("chunk_size", chunk_size)
    if form == "parallel":
        return FormCost(flops=4 * t * t * d, score_numbers=t * t, sequential_steps=1)
    if form == "recurrent":
        return FormCost(flops=4 * t * d * d, score_numbers=0, sequential_steps=t)
    n = -(-t // c)
    return FormCost(flops=4 * n * c * (c * d + d * d), score_numbers=n * c * c,
                    sequential_steps=n)
