"""Linear attention (the Notation appendix, §2): one state matrix instead of a growing cache.

Replace softmax(q·k) by a plain dot product of (feature-mapped) queries and keys, and causal
attention becomes a recurrence with a fixed-size state ``S [Dk, Dv]`` per head:

    S_t = S_{t-1} + k_t v_tᵀ,       o_t = S_tᵀ q_t                       (recurrent)
    O   = (Q Kᵀ ⊙ M) V                                                  (parallel, M causal)
    O_[n] = Q_[n] S_[n] + (Q_[n] K_[n]ᵀ ⊙ M) V_[n],  S_[n+1] = S_[n] + K_[n]ᵀ V_[n]   (chunkwise)

With ``normalize=True`` a running key sum ``z_t = z_{t-1} + k_t`` divides the output,
``o_t = S_tᵀ q_t / (z_tᵀ q_t + eps)`` (Katharopoulos et al. 2020), and the state is the pair
``(S, z)`` with ``z [B, H, Dk]``. Normalising assumes non-negative features (e.g.
``elu_plus_one``), so that the denominator stays away from 0; ``eps`` (``NORMALIZER_EPS``) only
keeps the division defined, and the scale cancels except against it.

Tensors are ``[B, H, T, D]``; the scale ``s`` (default ``1/sqrt(Dk)``) multiplies q. Kernels
take q and k as given: the layer applies the feature map. The forms:
``linear_attention_step`` (one token), ``linear_attention_recurrent`` (the step T times: the
definition), ``linear_attention_parallel`` (all positions at once),
``linear_attention_chunk_reference`` (chunk by chunk, written out) and
``linear_attention_chunk`` (the same numbers from the private fast engine,
``attnlab._chunk_engine``). Inputs are checked once, at the public boundary
(:func:`attnlab.checks.checked`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from . import _chunk_engine as engine
from ._kernel_checks import check_sequences, check_tokens
from .blocks import check_eps
from .checks import check_finite, check_tensor, checked

NORMALIZER_EPS = 1e-6
"""Default ``eps`` added to the denominator ``z_tᵀ q_t`` of normalised linear attention."""


# --------------------------------------------------------------------------- feature maps
def elu_plus_one(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1: positive, so φ(q)ᵀφ(k) > 0."""
    # x + 1 for x > 0, exp(x) otherwise: by cases, because F.elu(x) + 1
    # rounds to exactly 0 in float32 below x ≈ -17 (exp(x) - 1 + 1 loses
    # exp(x)), which would let the normaliser reach 0
    return torch.where(x > 0, x + 1, torch.exp(x.clamp(max=0)))


def identity(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = x: no feature map (plain linear attention on the raw q and k)."""
    return x


FEATURE_MAPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "elu+1": elu_plus_one,
    "identity": identity,
}
"""Feature maps by name, for ``LinearAttentionLayer(feature_map=...)``."""


# --------------------------------------------------------------------------- input checks
def _split_state(
    name: str, state: object, normalize: object, eps: object
) -> tuple[object, object]:
    """``state`` split into ``(S, z)``: a pair when ``normalize``, else ``(state, None)``."""
    if not isinstance(normalize, bool):
        raise ValueError(
            f"normalize: expected True or False, got {normalize!r}"
        )
    check_eps("eps", eps, inclusive=True)
    if not normalize or state is None:
        return state, None
    if not (isinstance(state, tuple | list) and len(state) == 2):
        raise ValueError(
            f"{name}: with normalize=True expected a pair (S [B, H, Dk, Dv], "
            f"z [B, H, Dk]), got {type(state).__name__}"
        )
    return state[0], state[1]


def _check_normalised(
    name: str, z: object, sizes: dict, q: torch.Tensor, k: torch.Tensor
) -> None:
    """z ``[B, H, Dk]`` (if given) like q and finite; q, k and z non-negative (with negative
    features the denominator z_tᵀ q_t can cross 0 and the output is meaningless)."""
    if z is not None:
        dims = ("B", "H", "Dk")
        check_tensor(name, z, dims, sizes, dtype=q.dtype, device=q.device)
        check_finite(name, z)
    for label, x in (("q", q), ("k", k), (name, z)):
        if x is not None and x.numel() and x.min() < 0:
            raise ValueError(
                f"{label}: normalize=True expects non-negative features (apply "
                f"a positive feature map such as elu_plus_one), got min "
                f"{x.min().item():.4g}"
            )


def _sequence_inputs(
    q, k, v, scale, initial_state, normalize=False, eps=0.0, chunk_size=1, **_
):
    s0, z0 = _split_state("initial_state", initial_state, normalize, eps)
    sizes = check_sequences(
        q, k, v, initial_state=s0, scale=scale, chunk_size=chunk_size
    )
    if normalize:
        _check_normalised("initial_state[1] (z)", z0, sizes, q, k)


def _token_inputs(q, k, v, state, scale, normalize, eps):
    s, z = _split_state("state", state, normalize, eps)
    sizes = check_tokens(q, k, v, state=s, scale=scale)
    if normalize:
        _check_normalised("state[1] (z)", z, sizes, q, k)


# --------------------------------------------------------------------------- kernels
@checked(_token_inputs)
def linear_attention_step(
    q, k, v, *, state, scale=None, normalize=False, eps=NORMALIZER_EPS
):
    """One token of linear attention. q, k [B, H, Dk]; v [B, H, Dv]; state
    S [B, H, Dk, Dv], or (S, z) with z [B, H, Dk] when normalised
    -> (o [B, H, Dv], the new state)."""
    q = q * (q.shape[-1] ** -0.5 if scale is None else scale)  # s q_t
    if normalize:
        state, z = state
    state = state + k[..., None] * v[..., None, :]  # S_t = S_{t-1} + k_t v_tᵀ
    o = torch.einsum("bhkv,bhk->bhv", state, q)  # o_t = S_tᵀ (s q_t)
    if not normalize:
        return o, state
    z = z + k  # z_t = z_{t-1} + k_t
    # normalised: o_t = S_tᵀ (s q_t) / (z_tᵀ (s q_t) + eps)
    return o / ((z * q).sum(-1, keepdim=True) + eps), (state, z)


def _zero_state(q, v, normalize):
    """S_0 = 0 ``[B, H, Dk, Dv]``, and z_0 = 0 ``[B, H, Dk]`` when normalised."""
    state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])
    return (state, q.new_zeros(state.shape[:-1])) if normalize else state


# fmt: off
@checked(_sequence_inputs)
def linear_attention_recurrent(q, k, v, *, scale=None, normalize=False,
                               eps=NORMALIZER_EPS, initial_state=None,
                               output_final_state=False):
    """Linear attention token by token (the definition): the step T times.

    q, k [B, H, T, Dk]; v [B, H, T, Dv] -> o [B, H, T, Dv], S_T or None.
    """
    state = initial_state
    if state is None:
        state = _zero_state(q, v, normalize)
    outputs = []
    for t in range(q.shape[2]):
        o_t, state = linear_attention_step(
            q[:, :, t],
            k[:, :, t],
            v[:, :, t],
            state=state,
            scale=scale,
            normalize=normalize,
            eps=eps,
        )
        outputs.append(o_t)
    return torch.stack(outputs, dim=2), state if output_final_state else None
# fmt: on


# fmt: off
@checked(_sequence_inputs)
def linear_attention_parallel(q, k, v, *, scale=None, normalize=False,
                              eps=NORMALIZER_EPS, initial_state=None,
                              output_final_state=False):
    """Linear attention for all positions at once: softmax attention without
    the softmax, O(T² D). Shapes as :func:`linear_attention_recurrent`."""
    q = q * (q.shape[-1] ** -0.5 if scale is None else scale)  # s Q
    if initial_state is None:
        initial_state = _zero_state(q, v, normalize)
    state, z = initial_state if normalize else (initial_state, None)
    scores = (q @ k.mT).tril()  # s Q Kᵀ ⊙ M, M the causal mask [T, T]
    o = scores @ v + q @ state  # O = (s Q Kᵀ ⊙ M) V + s Q S_0
    state = state + k.mT @ v  # S_T = S_0 + Kᵀ V
    if normalize:  # O / ((s Q Kᵀ ⊙ M) 1 + s Q z_0 + eps),  z_T = z_0 + Kᵀ 1
        o = o / (scores.sum(-1, keepdim=True) + q @ z[..., None] + eps)
        state = (state, z + k.sum(2))
    return o, (state if output_final_state else None)
# fmt: on


# fmt: off
@checked(_sequence_inputs)
def linear_attention_chunk_reference(q, k, v, *, scale=None,
                                     initial_state=None,
                                     output_final_state=False, chunk_size=64):
    """Linear attention chunk by chunk, written out (GLA's chunkwise form,
    Yang et al. 2024; the Notation appendix, §2). Shapes as
    :func:`linear_attention_recurrent`, without the normaliser; any T."""
    q = q * (q.shape[-1] ** -0.5 if scale is None else scale)
    state = initial_state
    if state is None:  # S_0 = 0
        state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])
    outputs = []
    for start in range(0, q.shape[2], chunk_size):
        chunk = slice(start, start + chunk_size)  # the last may be shorter
        q_n, k_n, v_n = q[:, :, chunk], k[:, :, chunk], v[:, :, chunk]
        inside = (q_n @ k_n.mT).tril()  # Q_[n] K_[n]ᵀ ⊙ M  [B, H, C, C]
        # O_[n] = Q_[n] S_[n] + (Q_[n] K_[n]ᵀ ⊙ M) V_[n]
        outputs.append(q_n @ state + inside @ v_n)
        state = state + k_n.mT @ v_n  # S_[n+1] = S_[n] + K_[n]ᵀ V_[n]
    return torch.cat(outputs, dim=2), (state if output_final_state else None)
# fmt: on


@checked(_sequence_inputs)
def linear_attention_chunk(
    q,
    k,
    v,
    *,
    scale=None,
    normalize=False,
    eps=NORMALIZER_EPS,
    initial_state=None,
    output_final_state=False,
    chunk_size=64,
):
    """Linear attention chunk by chunk: the numbers of
    :func:`linear_attention_chunk_reference` (and of the normalised form, by the
    same computation with a column of ones appended to V), from the private
    fast engine, all chunks' local products at once. Shapes and state as
    :func:`linear_attention_recurrent`; any T; O(T C D + T Dk Dv).
    """
    o, state = engine.linear_attention_chunks(
        q,
        k,
        v,
        scale=scale,
        normalize=normalize,
        eps=eps,
        initial_state=initial_state,
        chunk_size=chunk_size,
    )
    return o, (state if output_final_state else None)
