"""Linear attention (the Notation appendix, §2): one state matrix instead of a growing cache.

Replace softmax(q·k) by a plain dot product of (feature-mapped) queries and keys, and causal
attention becomes a recurrence with a fixed-size state ``S [Dk, Dv]`` per head:

    S_t = S_{t-1} + k_t v_tᵀ,       o_t = S_tᵀ q_t                       (recurrent)
    O   = (Q Kᵀ ⊙ M) V                                                  (parallel, M causal)
    O_[n] = Q_[n] S_[n] + (Q_[n] K_[n]ᵀ ⊙ M) V_[n],  S_[n+1] = S_[n] + K_[n]ᵀ V_[n]   (chunkwise)

With ``normalize=True`` a running key sum ``z_t = z_{t-1} + k_t`` divides the output,
``o_t = S_tᵀ q_t / (z_tᵀ q_t + eps)`` (Katharopoulos et al. 2020). Tensors are ``[B, H, T, D]``;
the scale ``s`` (default ``1/sqrt(Dk)``) multiplies q. Kernels take q and k as given: the layer
applies the feature map.

``linear_attention_chunk_reference`` is the chunkwise form written out chunk by chunk, the one
to read; ``linear_attention_chunk`` computes the same numbers with the private fast engine
(``attnlab._chunk_engine``). The input checks (``check_qkv``) are shared by the gated kernels.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from . import _chunk_engine as engine
from .checks import (
    check_finite,
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
    """φ(x) = elu(x) + 1 = x + 1 for x > 0, exp(x) otherwise: positive, so
    φ(q)ᵀφ(k) > 0.

    Computed by cases, because ``F.elu(x) + 1`` rounds to exactly 0 in float32
    below x ≈ -17 (exp(x) - 1 + 1 loses exp(x)), which would let the
    normaliser reach 0.
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
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    initial_state: torch.Tensor | None = None,
) -> dict[str, int]:
    """Check q, k ``[B, H, T, Dk]``, v ``[B, H, T, Dv]`` and ``initial_state [B, H, Dk, Dv]``.

    All must share q's dtype (float32 or float64) and device, have at least one time step, and
    hold only finite numbers (a NaN or inf would spread to every later output and the state).
    Returns the sizes by name (``B, H, T, Dk, Dv``); raises ``ValueError`` naming the offending
    argument.
    """
    sizes = check_tensor("q", q, ("B", "H", "T", "Dk"))
    if sizes["T"] == 0:
        raise ValueError(
            f"q: expected at least one time step, got shape {tuple(q.shape)}"
        )
    check_tensor(
        "k", k, ("B", "H", "T", "Dk"), sizes, dtype=q.dtype, device=q.device
    )
    check_tensor(
        "v", v, ("B", "H", "T", "Dv"), sizes, dtype=q.dtype, device=q.device
    )
    if initial_state is not None:
        check_tensor(
            "initial_state",
            initial_state,
            ("B", "H", "Dk", "Dv"),
            sizes,
            dtype=q.dtype,
            device=q.device,
        )
    for name, x in (
        ("q", q),
        ("k", k),
        ("v", v),
        ("initial_state", initial_state),
    ):
        if x is not None:
            check_finite(name, x)
    return sizes


def _split_normalised_state(
    initial_state: object, normalize: bool
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """``initial_state`` -> ``(S_0, z_0)``: a pair when ``normalize``, else a tensor (z_0 None)."""
    if initial_state is None:
        return None, None
    if not normalize:
        return initial_state, None  # type: ignore[return-value]
    if not (
        isinstance(initial_state, tuple | list) and len(initial_state) == 2
    ):
        raise ValueError(
            "initial_state: with normalize=True expected a pair (S [B, H, Dk, Dv], "
            f"z [B, H, Dk]), got {type(initial_state).__name__}"
        )
    return initial_state[0], initial_state[1]


def _check_linear_inputs(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    initial_state: object,
    normalize: bool,
    eps: float,
) -> tuple[dict[str, int], torch.Tensor, torch.Tensor | None]:
    """Check the inputs of a linear-attention kernel; return sizes and the zero-filled (S_0, z_0).

    ``z_0`` is None unless ``normalize``. Normalising needs non-negative features q, k (and
    z_0): with negative entries the denominator z_tᵀ q_t can cross 0 and the output is
    meaningless, so they are refused.
    """
    s0, z0 = _split_normalised_state(initial_state, normalize)
    sizes = check_qkv(q, k, v, initial_state=s0)
    if normalize and z0 is not None:
        check_tensor(
            "initial_state[1] (z)",
            z0,
            ("B", "H", "Dk"),
            sizes,
            dtype=q.dtype,
            device=q.device,
        )
        check_finite("initial_state[1] (z)", z0)
    if isinstance(eps, bool) or not isinstance(eps, int | float) or eps < 0:
        raise ValueError(f"eps: expected a number >= 0, got {eps!r}")
    if normalize:
        for name, x in (("q", q), ("k", k), ("initial_state[1] (z)", z0)):
            if x is not None and x.numel() and x.min() < 0:
                raise ValueError(
                    f"{name}: normalize=True expects non-negative features (apply "
                    f"a positive feature map such as elu_plus_one), got min "
                    f"{x.min().item():.4g}"
                )
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


# --------------------------------------------------------------------------- kernels
def causal_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Q Kᵀ ⊙ M over the last two axes: q, k ``[..., T, Dk]`` -> ``[..., T, T]``, zero for j > i."""
    return (q @ k.transpose(-1, -2)).tril_()


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

        S_t = S_{t-1} + k_t v_tᵀ,   o_t = S_tᵀ (s q_t)
        normalised:  z_t = z_{t-1} + k_t,
                     o_t = S_tᵀ (s q_t) / (z_tᵀ (s q_t) + eps)

    q, k ``[B, H, T, Dk]``, v ``[B, H, T, Dv]`` -> o ``[B, H, T, Dv]``. The
    state is ``S [B, H, Dk, Dv]``; with ``normalize=True`` both
    ``initial_state`` and the returned final state are the pair ``(S, z)``
    with ``z [B, H, Dk]``. ``s`` (``scale``, default 1/sqrt(Dk)) cancels in
    the normalised form except against ``eps`` (default
    ``NORMALIZER_EPS`` = 1e-6, only there to keep the division defined).
    Normalising assumes positive features (e.g. ``elu_plus_one``) so that the
    denominator stays away from 0.
    """
    sizes, state, z = _check_linear_inputs(
        q, k, v, initial_state=initial_state, normalize=normalize, eps=eps
    )
    q = q * resolve_scale(scale, sizes["Dk"])
    outputs = []
    for t in range(sizes["T"]):
        q_t, k_t, v_t = q[:, :, t], k[:, :, t], v[:, :, t]
        # S_t = S_{t-1} + k_t v_tᵀ
        state = state + k_t.unsqueeze(-1) * v_t.unsqueeze(-2)
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
    """Linear attention for all positions at once, like softmax attention
    without the softmax:

        O = (s Q Kᵀ ⊙ M) V + s Q S_0              M: causal mask [T, T]
        normalised:  O = [(s Q Kᵀ ⊙ M) V + s Q S_0]
                         / [(s Q Kᵀ ⊙ M) 1 + s Q z_0 + eps]
        final state: S_T = S_0 + Kᵀ V,   z_T = z_0 + Kᵀ 1

    Shapes and state format as ``linear_attention_recurrent``. Costs
    ``O(T² D)`` time and a ``[B, H, T, T]`` score matrix, like softmax
    attention.
    """
    sizes, state, z = _check_linear_inputs(
        q, k, v, initial_state=initial_state, normalize=normalize, eps=eps
    )
    q = q * resolve_scale(scale, sizes["Dk"])
    scores = causal_scores(q, k)
    o = scores @ v + q @ state
    if normalize:
        o = o / (
            scores.sum(-1, keepdim=True)
            + (q * z.unsqueeze(2)).sum(-1, keepdim=True)
            + eps
        )
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
    ``linear_attention_recurrent``; cost ``O(T C D + T Dk Dv)``. The numbers of
    :func:`linear_attention_chunk_reference`, from the private fast engine (all chunks' local
    products at once).
    """
    sizes, state, z = _check_linear_inputs(
        q, k, v, initial_state=initial_state, normalize=normalize, eps=eps
    )
    chunk_size = check_positive_int("chunk_size", chunk_size)
    q = q * resolve_scale(scale, sizes["Dk"])
    o, state, z = engine.linear_attention_chunks(
        q, k, v, state=state, normaliser=z, eps=eps, chunk_size=chunk_size
    )
    return o, _final(state, z, output_final_state)


def linear_attention_chunk_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Linear attention chunk by chunk, written out (the chunkwise form of
    Yang et al. 2024, "Gated Linear Attention Transformers"; the Notation
    appendix, §2). For chunk n, with S_[n] the state entering it
    (S_[0] = S_0):

        O_[n]   = Q_[n] S_[n]  +  (Q_[n] K_[n]ᵀ ⊙ M) V_[n]
                  (from earlier chunks + inside)
        S_[n+1] = S_[n] + K_[n]ᵀ V_[n]

    M is the causal mask inside the chunk (j ≤ i). Each chunk is C tokens, the
    last one may be shorter (any T). q, k [B, H, T, Dk]; v [B, H, T, Dv];
    initial_state [B, H, Dk, Dv]. Returns (o [B, H, T, Dv], S_T or None). No
    normaliser: ``linear_attention_chunk`` gets it by the same computation
    with a column of ones appended to V.
    """
    sizes, state, _ = _check_linear_inputs(
        q, k, v, initial_state=initial_state, normalize=False, eps=0.0
    )
    chunk_size = check_positive_int("chunk_size", chunk_size)
    q = q * resolve_scale(scale, sizes["Dk"])
    outputs = []
    for start in range(0, sizes["T"], chunk_size):
        # the last chunk may be shorter
        chunk = slice(start, start + chunk_size)
        # [B, H, C, D]
        q_n, k_n, v_n = (q[:, :, chunk], k[:, :, chunk], v[:, :, chunk])
        inside = (
            q_n @ k_n.transpose(-1, -2)
        ).tril()  # Q Kᵀ ⊙ M  [B, H, C, C]
        outputs.append(q_n @ state + inside @ v_n)  # O_[n]
        state = state + k_n.transpose(-1, -2) @ v_n  # S_[n+1]
    return torch.cat(outputs, dim=2), (state if output_final_state else None)
