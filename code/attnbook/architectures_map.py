"""The map of the family (Lesson 20): each mechanism's update rule, traits and memory.

Facts only (no drawing): ``MECHANISMS`` lists the nine mechanisms of the course with their
update rules and the layer kind (:data:`attnlab.kinds.KINDS`) whose memory each has,
``decoding_numbers`` what one layer keeps while decoding, ``memory_picture``
what one head holds after a few random tokens (computed with the package's kernels), and
``map_mib`` the memory curves that ``attnbook.figures.l20_the_map`` draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import torch
import torch.nn.functional as F

from attnlab.configs import ModelConfig
from attnlab.delta import delta_rule_recurrent, gated_delta_rule_recurrent
from attnlab.gated import gla_recurrent, retnet_decay
from attnlab.kda import kda_recurrent
from attnlab.linear import linear_attention_recurrent
from attnlab.memory import BYTES_PER_ELEMENT, layer_numbers
from attnlab.mla import MultiHeadLatentAttention


@dataclass(frozen=True)
class Mechanism:
    """One row of the map: the layer kind whose memory it has, its update rule and traits."""

    name: str
    kind: str
    rule: str
    forget: str
    correct: str
    gate: str
    training: str
    decoding: str


MECHANISMS: dict[str, Mechanism] = {
    a.name: a
    for a in (
        Mechanism(
            "softmax attention",
            "attn",
            r"$K_{1:t}=[K_{1:t-1};k_t^\top],\ V_{1:t}=[V_{1:t-1};v_t^\top]$",
            "no (keeps all)",
            "no",
            "none",
            "O(T² d)",
            "O(T d)",
        ),
        Mechanism(
            "linear attention",
            "linear",
            r"$S_t=S_{t-1}+k_tv_t^\top$",
            "no",
            "no",
            "none",
            "O(T d²) chunkwise",
            "O(d²)",
        ),
        Mechanism(
            "RetNet",
            "gla",
            r"$S_t=\gamma\,S_{t-1}+k_tv_t^\top$",
            "yes, fixed rate",
            "no",
            "fixed scalar per head",
            "O(T d²) chunkwise",
            "O(d²)",
        ),
        Mechanism(
            "Mamba2",
            "gla",
            r"$S_t=\alpha_t\,S_{t-1}+k_tv_t^\top$",
            "yes",
            "no",
            "scalar per head and token",
            "O(T d²) chunkwise",
            "O(d²)",
        ),
        Mechanism(
            "GLA",
            "gla",
            r"$S_t=\mathrm{Diag}(\alpha_t)\,S_{t-1}+k_tv_t^\top$",
            "yes",
            "no",
            "per channel and token",
            "O(T d²) chunkwise",
            "O(d²)",
        ),
        Mechanism(
            "DeltaNet",
            "deltanet",
            r"$S_t=(I-\beta_tk_tk_t^\top)\,S_{t-1}+\beta_tk_tv_t^\top$",
            "only by overwriting",
            "yes",
            "none (β: write strength)",
            "O(T(Cd + d²)) chunkwise (WY)",
            "O(d²)",
        ),
        Mechanism(
            "Gated DeltaNet",
            "gdn",
            r"$S_t=\alpha_t(I-\beta_tk_tk_t^\top)\,S_{t-1}+\beta_tk_tv_t^\top$",
            "yes",
            "yes",
            "scalar per head and token",
            "O(T(Cd + d²)) chunkwise (WY)",
            "O(d²)",
        ),
        Mechanism(
            "KDA",
            "kda",
            r"$S_t=(I-\beta_tk_tk_t^\top)\mathrm{Diag}(\alpha_t)S_{t-1}+\beta_tk_tv_t^\top$",
            "yes",
            "yes",
            "per channel and token",
            "O(T(Cd + d²)) chunkwise (WY)",
            "O(d²)",
        ),
        Mechanism(
            "MLA",
            "mla",
            r"$C_{1:t}=[C_{1:t-1};(c_t^{KV},k^R_t)^\top]$",
            "no (keeps all)",
            "no",
            "none",
            "O(T² d)",
            "O(T (d_c + d_R)) absorbed",
        ),
    )
}
"""The nine mechanisms of the map, in the order of the course."""


def decoding_numbers(arch: str, config: ModelConfig, context: int) -> int:
    """Numbers one layer of ``arch`` keeps after ``context`` tokens with ``config``'s head dims:
    its cache (attention, MLA) or its state (the recurrent kinds), by the formula of its layer
    kind (``memory.layer_numbers``). Short-convolution inputs are left out (a few rows,
    constant, and not part of every design)."""
    if arch not in MECHANISMS:
        raise ValueError(
            f"arch: expected one of {list(MECHANISMS)}, got {arch!r}"
        )
    n = layer_numbers(MECHANISMS[arch].kind, config, context)
    return n.cache + n.state


@cache
def memory_picture(
    arch: str, tokens: int = 16, dim: int = 8, seed: int = 0
) -> torch.Tensor:
    """What one head of ``arch`` holds after ``tokens`` random tokens (dk = dv = ``dim``): the
    state S [dk, dv] for the recurrent kinds (run through the package's kernel), the cache rows
    [T, dk + dv] for softmax attention and [T, d_c + d_R] for MLA. Computed once per set of
    arguments (a slider revisits them): treat the result as read-only."""
    gen = torch.Generator().manual_seed(seed)
    shape = (1, 1, tokens, dim)
    q, k, v = (torch.randn(*shape, generator=gen) for _ in range(3))
    k_unit = F.normalize(k, dim=-1)
    beta = torch.rand(1, 1, tokens, generator=gen)
    g_scalar = -0.5 * torch.rand(1, 1, tokens, generator=gen)
    g_channel = -0.5 * torch.rand(*shape, generator=gen)
    if arch == "softmax attention":
        return torch.cat([k[0, 0], v[0, 0]], dim=-1)
    if arch == "MLA":
        with torch.random.fork_rng(
            devices=[]
        ):  # seeded weights, global generator untouched
            torch.manual_seed(seed)
            layer = MultiHeadLatentAttention(
                dim,
                1,
                dim,
                kv_lora_rank=dim // 2,
                qk_rope_head_dim=dim // 4,
                rope=False,
            )
        with torch.no_grad():
            _, cache = layer(
                torch.randn(1, tokens, dim, generator=gen), use_cache=True
            )
        return torch.cat([cache.c_kv[0], cache.k_rope[0]], dim=-1)
    if arch == "linear attention":
        _, s = linear_attention_recurrent(q, k, v, output_final_state=True)
    elif arch == "RetNet":
        g = retnet_decay(1)[None, :, None, None].expand(*shape).contiguous()
        _, s = gla_recurrent(q, k, v, g=g, output_final_state=True)
    elif arch == "Mamba2":
        _, s = gla_recurrent(
            q,
            k,
            v,
            g=g_scalar[..., None].expand(*shape).contiguous(),
            output_final_state=True,
        )
    elif arch == "GLA":
        _, s = gla_recurrent(q, k, v, g=g_channel, output_final_state=True)
    elif arch == "DeltaNet":
        _, s = delta_rule_recurrent(
            q, k_unit, v, beta=beta, output_final_state=True
        )
    elif arch == "Gated DeltaNet":
        _, s = gated_delta_rule_recurrent(
            q, k_unit, v, g=g_scalar, beta=beta, output_final_state=True
        )
    else:
        _, s = kda_recurrent(
            q, k_unit, v, g=g_channel, beta=beta, output_final_state=True
        )
    return s[0, 0]


MAP_CONTEXTS = (512, 2048, 8192, 32768, 131072, 524288)


@cache
def map_mib(
    config: ModelConfig, contexts: tuple[int, ...] = MAP_CONTEXTS
) -> dict[str, list[float]]:
    """MiB one layer of each mechanism keeps at each of ``contexts`` in bf16 (the map's curves)."""
    return {
        name: [
            decoding_numbers(name, config, t)
            * BYTES_PER_ELEMENT["bf16"]
            / 2**20
            for t in contexts
        ]
        for name in MECHANISMS
    }
