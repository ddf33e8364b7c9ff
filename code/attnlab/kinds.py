"""The registry of layer kinds: every kind a model may list, in one place.

For each kind, :data:`KINDS` holds

- ``label``: its name in figures and tables;
- ``grows``: True if what it keeps while decoding grows with the context (a cache),
  False if it is fixed (a recurrent state, or nothing);
- ``window``: for a cache that stops growing, ``window(config)`` gives the context it stops
  at (a sliding window's W tokens); None for a cache that grows with every token and for
  fixed states;
- ``numbers(config, context)``: how many numbers one layer keeps for one sequence after
  ``context`` tokens, as :class:`LayerNumbers` (cache, state, conv);
- ``build(config)``: the layer :class:`attnlab.model.HybridLM` stacks, for the kinds the
  course implements (the kinds it only sizes, from published models, have ``None``);
- ``needs``: the :class:`attnlab.configs.ModelConfig` field of dimensions the kind reads
  beyond the shared ones (``"mla"``, ``"ssm"``, ``"sliding_window"``,
  ``"attention_chunk_size"``), required when a pattern lists the kind.

Numbers one layer keeps for one sequence of T tokens (w the short-convolution width; the
recurrent layers have H_k query/key heads of d_k and H_v value heads of d_v, by default the
model's ``n_heads`` heads of ``head_dim`` for both):

- ``attn`` (MHA, GQA, MQA): cache 2 · n_kv_heads · head_dim · T (K and V).
- ``swa`` (sliding-window attention, the local layers of local/global stacks): a rolling
  cache of the last W tokens, 2 · n_kv_heads · head_dim · min(T, W) (Mistral 7B §2).
- ``chunked`` (chunked attention, Llama 4's local layers): each token attends within its
  chunk of C tokens, so a cache holds at most one chunk, 2 · n_kv_heads · head_dim ·
  min(T, C) (its peak: T mod C tokens between the ends of chunks, C at them).
- ``mla``: cache (d_c + d_h^R) · T (the latent and the shared rope key).
- ``kda``, ``gdn``, ``deltanet``, ``gla``: state H_v · d_k · d_v; conv
  (w − 1)(2 H_k d_k + H_v d_v), the last w − 1 inputs of the short convolutions on q, k and v
  (KL eq. 10; FLA's DeltaNet, GDN and KDA layers).
- ``linear``: the same plus the running key sum z of normalised linear attention, H_k · d_k.
- ``lightning`` (MiniMax-01): state H_v · d_k · d_v, no short convolution.
- ``mamba``: state d_inner · d_state; conv (w − 1) · d_inner.
- ``mamba2``: state d_inner · d_state; conv (w − 1)(d_inner + 2 G d_state), the convolution
  running over x, B and C with G groups.
- ``mlp``: a block without a mixer (Nemotron-H's ``-`` blocks) keeps nothing.

A new mechanism touches three files: its module (the kernels), its layer in
:mod:`attnlab.layers`, and one entry here (a label, its ``numbers`` formula, ``grows``, and
``build``, usually ``_recurrent(TheLayer)``); every list of kinds in the package and the book
reads this one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torch import nn

from .attention import MultiHeadAttention
from .layers import (
    DeltaNetLayer,
    GatedDeltaNetLayer,
    GLALayer,
    KDALayer,
    LinearAttentionLayer,
)
from .mla import MultiHeadLatentAttention

if TYPE_CHECKING:
    from .configs import ModelConfig


@dataclass(frozen=True)
class LayerNumbers:
    """How many numbers one layer keeps for one sequence: ``cache`` grows with
    the context (K and V, MLA's latent), ``state`` (the recurrent memory S) and
    ``conv`` (the last w − 1 inputs of each short convolution) do not."""

    cache: int
    state: int
    conv: int


def attn_numbers(config: ModelConfig, context: int) -> LayerNumbers:
    """Softmax attention (MHA, GQA, MQA) caches K and V of every token:
    2 · n_kv_heads · head_dim · T."""
    cache = 2 * config.n_kv_heads * config.head_dim * context
    return LayerNumbers(cache=cache, state=0, conv=0)


def swa_numbers(config: ModelConfig, context: int) -> LayerNumbers:
    """Sliding-window attention keeps K and V of the last W tokens only (a
    rolling buffer): 2 · n_kv_heads · head_dim · min(T, W)."""
    return attn_numbers(config, min(context, config.sliding_window))


def sliding_window(config: ModelConfig) -> int:
    """The context at which a sliding-window cache stops growing: W."""
    return config.sliding_window


def chunked_numbers(config: ModelConfig, context: int) -> LayerNumbers:
    """Chunked attention keeps K and V of the current chunk of C tokens at
    most: 2 · n_kv_heads · head_dim · min(T, C), the peak it holds."""
    return attn_numbers(config, min(context, config.attention_chunk_size))


def attention_chunk(config: ModelConfig) -> int:
    """The context at which a chunked cache stops growing: C."""
    return config.attention_chunk_size


def mla_numbers(config: ModelConfig, context: int) -> LayerNumbers:
    """MLA caches the latent and the shared rope key: (d_c + d_h^R) · T."""
    return LayerNumbers(cache=config.mla.cache_dim * context, state=0, conv=0)


def recurrent_numbers(config: ModelConfig, context: int) -> LayerNumbers:
    """A d_k × d_v state per value head, the same at any T, and the last
    w − 1 inputs of the convolutions on q, k (H_k · d_k) and v (H_v · d_v)."""
    r, w = config.recurrent_heads, config.conv_size
    hk, dk, hv, dv = r.n_key_heads, r.key_dim, r.n_value_heads, r.value_dim
    state = hv * dk * dv
    conv = (w - 1) * (2 * hk * dk + hv * dv)
    return LayerNumbers(cache=0, state=state, conv=conv)


def linear_numbers(config: ModelConfig, context: int) -> LayerNumbers:
    """Normalised linear attention: the recurrent state and conv inputs,
    plus the running key sum z, one d_k vector per key head."""
    r, n = config.recurrent_heads, recurrent_numbers(config, context)
    z = r.n_key_heads * r.key_dim
    return LayerNumbers(cache=0, state=n.state + z, conv=n.conv)


def lightning_numbers(config: ModelConfig, context: int) -> LayerNumbers:
    """Lightning attention (MiniMax-01): the recurrent state, no short
    convolution."""
    n = recurrent_numbers(config, context)
    return LayerNumbers(cache=0, state=n.state, conv=0)


def mamba_numbers(config: ModelConfig, context: int) -> LayerNumbers:
    """Mamba (selective SSM): d_state numbers per inner channel; the short
    convolution runs over the d_inner channels."""
    s = config.ssm
    conv = (config.conv_size - 1) * s.d_inner
    return LayerNumbers(cache=0, state=s.d_inner * s.d_state, conv=conv)


def mamba2_numbers(config: ModelConfig, context: int) -> LayerNumbers:
    """Mamba-2: d_state numbers per inner channel (heads × head dim); the
    short convolution runs over x, B and C (G groups of d_state)."""
    s = config.ssm
    conv = (config.conv_size - 1) * (s.d_inner + 2 * s.n_groups * s.d_state)
    return LayerNumbers(cache=0, state=s.d_inner * s.d_state, conv=conv)


def nothing_kept(config: ModelConfig, context: int) -> LayerNumbers:
    """A block without a mixer keeps nothing."""
    return LayerNumbers(cache=0, state=0, conv=0)


def _attention(config: ModelConfig) -> nn.Module:
    return MultiHeadAttention(
        config.d_model,
        config.n_heads,
        config.head_dim,
        n_kv_heads=config.n_kv_heads,
        rope=config.rope,
        conv_size=config.conv_size if config.attn_conv else None,
    )


def _latent_attention(config: ModelConfig) -> nn.Module:
    m = config.mla
    return MultiHeadLatentAttention(
        config.d_model,
        m.n_heads,
        m.qk_nope_head_dim,
        kv_lora_rank=m.kv_lora_rank,
        qk_rope_head_dim=m.qk_rope_head_dim,
        v_head_dim=m.v_head_dim,
        q_lora_rank=m.q_lora_rank,
        rope=m.rope,
    )


def _recurrent(
    layer: Callable[..., nn.Module],
) -> Callable[[ModelConfig], nn.Module]:
    """``build`` for a course layer ``layer(d_model, n_heads, head_dim, conv_size=w,
    norm_eps=ε)``, which has one value head per key head and d_v = d_k."""

    def build(config: ModelConfig) -> nn.Module:
        r = config.recurrent_heads
        if (r.n_value_heads, r.value_dim) != (r.n_key_heads, r.key_dim):
            raise ValueError(
                f"config: {layer.__name__} has one value head per key head and d_v = d_k; "
                f"{config.name} has {r.n_key_heads} key heads of {r.key_dim} and "
                f"{r.n_value_heads} value heads of {r.value_dim}"
            )
        return layer(
            config.d_model,
            r.n_key_heads,
            r.key_dim,
            conv_size=config.conv_size,
            norm_eps=config.norm_eps,
        )

    return build


@dataclass(frozen=True)
class Kind:
    """One layer kind: its label, whether its memory grows with the context, the numbers one
    layer keeps, how to build one (None if the course only sizes it), the dimensions it
    needs beyond the shared ones and, for a cache that stops growing, where it stops."""

    label: str
    numbers: Callable[[ModelConfig, int], LayerNumbers]
    grows: bool = False
    build: Callable[[ModelConfig], nn.Module] | None = None
    needs: str | None = None
    window: Callable[[ModelConfig], int] | None = None


KINDS: dict[str, Kind] = {
    "attn": Kind(
        "softmax attention", attn_numbers, grows=True, build=_attention
    ),
    "mla": Kind(
        "MLA", mla_numbers, grows=True, build=_latent_attention, needs="mla"
    ),
    "swa": Kind(
        "sliding-window attention",
        swa_numbers,
        grows=True,
        needs="sliding_window",
        window=sliding_window,
    ),
    "chunked": Kind(
        "chunked attention",
        chunked_numbers,
        grows=True,
        needs="attention_chunk_size",
        window=attention_chunk,
    ),
    "kda": Kind("KDA", recurrent_numbers, build=_recurrent(KDALayer)),
    "gdn": Kind(
        "Gated DeltaNet",
        recurrent_numbers,
        build=_recurrent(GatedDeltaNetLayer),
    ),
    "deltanet": Kind(
        "DeltaNet", recurrent_numbers, build=_recurrent(DeltaNetLayer)
    ),
    "gla": Kind("GLA", recurrent_numbers, build=_recurrent(GLALayer)),
    "linear": Kind(
        "linear attention",
        linear_numbers,
        build=_recurrent(LinearAttentionLayer),
    ),
    "lightning": Kind("lightning attention", lightning_numbers),
    "mamba": Kind("Mamba", mamba_numbers, needs="ssm"),
    "mamba2": Kind("Mamba-2", mamba2_numbers, needs="ssm"),
    "mlp": Kind("MLP only", nothing_kept),
}
"""Every layer kind a :class:`attnlab.configs.ModelConfig` may list, in the order of the
course: the attention kinds (sliding-window and chunked attention, from published models, only
sized), the
recurrent kinds it builds, then the kinds of published models it only sizes."""
