"""The toy chunks of Lesson 13 and the per-channel retention experiment of Lesson 14."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attnlab.checks import check_float_in, check_int_in, check_tensor
from attnlab.kda import kda_step


def toy_chunk(
    length: int, head_dim: int, value_dim: int | None = None, seed: int = 0
):
    """A chunk of toy inputs, float64: unit-norm keys k ``[1, 1, length, head_dim]``, values
    ``[1, 1, length, value_dim]`` (default head_dim) and β uniform in (0, 1) ``[1, 1, length]``."""
    gen = torch.Generator().manual_seed(seed)
    k = F.normalize(
        torch.randn(
            1, 1, length, head_dim, generator=gen, dtype=torch.float64
        ),
        dim=-1,
    )
    v = torch.randn(
        1,
        1,
        length,
        value_dim or head_dim,
        generator=gen,
        dtype=torch.float64,
    )
    beta = torch.rand(1, 1, length, generator=gen, dtype=torch.float64)
    return k, v, beta


#: Tokens of Lesson 13's chunk picture: as long as its largest chunk size, so every C changes it.
CHUNK_PICTURE_LENGTH = 128


RETENTION_STEPS = 64


RETENTION_CHANNELS = 16


RETENTION_HALF_LIFE = 16.0


def channel_log_gates(
    n_channels: int, half_life: float, spread: float
) -> torch.Tensor:
    """Per-channel log-decays g_d = log α_d = −ln 2 / h_d, float64 ``[n_channels]``, with
    half-lives h_d = half_life · 2^(spread · z_d) for z_d evenly spaced in [−1, 1]: spread 0
    gives every channel the same decay, spread s spans s octaves either side of ``half_life``.
    Channel 0 forgets fastest."""
    n = check_int_in("n_channels", n_channels, 1, 1024)
    h = check_float_in("half_life", half_life, 1e-3, 1e6)
    s = check_float_in("spread", spread, 0.0, 10.0)
    z = (
        torch.linspace(-1.0, 1.0, n, dtype=torch.float64)
        if n > 1
        else torch.zeros(1, dtype=torch.float64)
    )
    return -math.log(2) / (h * torch.exp2(s * z))


def retention_demo(
    spread: float,
    write_strength: float,
    steps: int = RETENTION_STEPS,
    n_channels: int = RETENTION_CHANNELS,
    half_life: float = RETENTION_HALF_LIFE,
    seed: int = 0,
) -> dict[str, torch.Tensor]:
    """An old association k₀v₀ᵀ (k₀ spread evenly over the channels) in S_0, then ``steps``
    tokens with random unit keys, values orthogonal to v₀ and β = ``write_strength``, under
    constant per-channel gates (``channel_log_gates``). Returns float64 tensors:

    - ``retention`` [steps + 1, Dk]: ``association_retention`` per channel, row 0 = S_0;
    - ``recall`` [steps + 1]: v₀ᵀ S_tᵀ k₀ / ‖v₀‖², what the old key still reads of v₀;
    - ``recall_shared`` [steps + 1]: the same with one gate for all channels, the mean of the
      per-channel log-gates (Gated DeltaNet's scalar gate with the same average decay);
    - ``log_gates`` [Dk].
    """
    t = check_int_in("steps", steps, 1, 4096)
    dk = n_channels
    log_gates = channel_log_gates(dk, half_life, spread)
    beta_value = check_float_in("write_strength", write_strength, 0.0, 1.0)
    gen = torch.Generator().manual_seed(seed)
    dv = dk
    key = torch.full((1, 1, dk), dk**-0.5, dtype=torch.float64)
    value = F.normalize(
        torch.randn(1, 1, dv, generator=gen, dtype=torch.float64), dim=-1
    )
    k = F.normalize(
        torch.randn(1, 1, t, dk, generator=gen, dtype=torch.float64), dim=-1
    )
    v = torch.randn(1, 1, t, dv, generator=gen, dtype=torch.float64)
    v = v - (v @ value[0, 0])[..., None] * value[0, 0]  # orthogonal to v₀
    beta = torch.full((1, 1, t), beta_value, dtype=torch.float64)
    s0 = key[..., :, None] * value[..., None, :]
    out = {"log_gates": log_gates}
    for name, gates in (
        ("", log_gates),
        ("_shared", log_gates.mean().expand(dk)),
    ):
        g = gates.view(1, 1, dk)  # the same gates at every token
        states = [s0]  # S_0 … S_T from the recurrence, one kda_step a token
        for i in range(t):
            k_i, v_i, beta_i = k[:, :, i], v[:, :, i], beta[:, :, i]
            _, state = kda_step(
                k_i, k_i, v_i, g=g, beta=beta_i, state=states[-1]
            )
            states.append(state)
        states = torch.stack(states, dim=2)
        # [T + 1, Dk]
        retention = association_retention(states, key, value)[0, 0]
        if not name:
            out["retention"] = retention
        out["recall" + name] = (retention * key[0, 0] ** 2).sum(-1)
    return out


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
    like = {"dtype": states.dtype, "device": states.device, "like": "states"}
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
