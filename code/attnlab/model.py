"""A small hybrid language model that stacks any mix of mixer layers, and generation with it.

A model is a list of layer kinds. Each layer is a pre-norm residual block

    x ← x + Mixer(RMSNorm(x))
    x ← x + MLP(RMSNorm(x))

where the mixer is one of

====================  =====================================================  ==================
kind                  mixer                                                  decoding cache
====================  =====================================================  ==================
``"attn"``            softmax multi-head / grouped-query attention           K, V: grows with T
``"mla"``             multi-head latent attention (DeepSeek-V2/V3)           latent + rope key
``"kda"``             Kimi Delta Attention                                   state + conv inputs
``"gdn"``             Gated DeltaNet                                         state + conv inputs
``"deltanet"``        DeltaNet (delta rule)                                  state + conv inputs
``"gla"``             gated linear attention (per-channel decay)             state + conv inputs
``"linear"``          linear attention (with its normaliser)                 state + conv inputs
====================  =====================================================  ==================

The sizes come from a :class:`attnlab.configs.ModelConfig` (the presets live there too).
Mixture-of-experts feed-forward layers are not modelled: every block here has one dense MLP (the
MoE routing does not change what a layer caches while decoding). While decoding, MLA layers attend
in the latent space (the absorbed path of Lesson 15); ``mla_decode="naive"`` keeps the
up-projecting path for the comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from .attention import MultiHeadAttention, head_attention_weights
from .blocks import RMSNorm, SwiGLU
from .checks import check_choice, check_int_in, checked
from .configs import LAYER_KINDS, ModelConfig
from .kinds import KINDS

MLA_DECODE_PATHS = ("absorbed", "naive")
"""How :class:`HybridLM` runs its MLA layers on cached decoding steps."""


def make_mixer(kind: str, config: ModelConfig) -> nn.Module:
    """The token mixer of one layer of ``kind``, sized by ``config``: the
    registry's builder (:data:`attnlab.kinds.KINDS`).

    Every mixer follows the layer protocol: ``forward(x [B, T, d_model], cache=None,
    use_cache=False) -> (y [B, T, d_model], cache_or_None)``.
    """
    check_choice("kind", kind, LAYER_KINDS)
    return KINDS[kind].build(config)


class HybridBlock(nn.Module):
    """One layer: a pre-norm residual mixer, then a pre-norm residual MLP.

    x ← x + Mixer(RMSNorm(x));  x ← x + SwiGLU(RMSNorm(x)).   Shapes: ``[B, T, d_model]``.

    An MLA mixer continuing a cache (a decoding step) attends through the absorbed path when
    ``mla_decode == "absorbed"``, through the naive up-projection when ``"naive"``.
    """

    def __init__(
        self, kind: str, config: ModelConfig, mla_decode: str = "absorbed"
    ) -> None:
        super().__init__()
        self.kind = kind
        self.mla_decode = check_choice(
            "mla_decode", mla_decode, MLA_DECODE_PATHS
        )
        self.mixer_norm = RMSNorm(config.d_model)
        self.mixer = make_mixer(kind, config)
        self.mlp_norm = RMSNorm(config.d_model)
        self.mlp = SwiGLU(config.d_model, config.mlp_hidden)

    def forward(
        self,
        x: torch.Tensor,
        cache: object | None = None,
        use_cache: bool = False,
    ) -> tuple[torch.Tensor, object | None]:
        options = {}
        if self.kind == "mla" and cache is not None:
            options["absorb"] = self.mla_decode == "absorbed"
        y, cache = self.mixer(
            self.mixer_norm(x), cache=cache, use_cache=use_cache, **options
        )
        x = x + y
        return x + self.mlp(self.mlp_norm(x)), cache


@dataclass
class HybridCache:
    """Everything a :class:`HybridLM` keeps between decoding steps: one cache per layer.

    ``layers[i]`` is the cache of layer ``i``'s mixer: K and V for ``"attn"`` (grows with T), the
    latent and rope key for ``"mla"`` (grows with T), a fixed-size state and short-convolution
    inputs for the recurrent kinds, for ``batch_size`` sequences. ``seen_tokens`` counts the
    tokens consumed so far. :meth:`HybridLM.forward` continues a cache in place (as every
    mixer does with its own).
    """

    kinds: tuple[str, ...]
    layers: list[object]
    batch_size: int
    seen_tokens: int = 0

    def bytes_by_layer(self) -> list[int]:
        """Bytes held by each layer's cache, in layer order."""
        return [cache.num_bytes() for cache in self.layers]

    def bytes_by_kind(self) -> dict[str, int]:
        """Bytes summed over the layers of each kind (kinds in order of first appearance)."""
        totals: dict[str, int] = {}
        for kind, n in zip(self.kinds, self.bytes_by_layer(), strict=True):
            totals[kind] = totals.get(kind, 0) + n
        return totals

    def num_bytes(self) -> int:
        """Bytes held by all layers' caches."""
        return sum(self.bytes_by_layer())


def _check_input_ids(input_ids: object, vocab_size: int) -> None:
    """Check token ids ``[B, T]`` (T >= 1, an integer dtype, ids in [0, vocab_size))."""
    if not isinstance(input_ids, torch.Tensor):
        raise ValueError(
            f"input_ids: expected a torch.Tensor, got {type(input_ids).__name__}"
        )
    if input_ids.dim() != 2 or input_ids.shape[1] == 0:
        raise ValueError(
            f"input_ids: expected a 2-D tensor [B, T] with T >= 1, got shape "
            f"{tuple(input_ids.shape)}"
        )
    if (
        input_ids.dtype.is_floating_point
        or input_ids.dtype.is_complex
        or input_ids.dtype == torch.bool
    ):
        raise ValueError(
            f"input_ids: expected an integer dtype, got {input_ids.dtype}"
        )
    if input_ids.numel() and (
        input_ids.min() < 0 or input_ids.max() >= vocab_size
    ):
        raise ValueError(
            f"input_ids: expected token ids in [0, {vocab_size}), got min "
            f"{input_ids.min().item()} and max {input_ids.max().item()}"
        )


def _model_inputs(
    self: HybridLM, input_ids: object, cache: object, use_cache: bool
) -> None:
    config = self.config
    _check_input_ids(input_ids, config.vocab_size)
    conv_attention = config.attn_conv and "attn" in config.layer_pattern
    if conv_attention and (use_cache or cache is not None):
        raise ValueError(
            "use_cache: this model's attention layers read q, k, v through a "
            "short convolution (attn_conv=True), whose inputs a KV cache does "
            "not keep: it runs full passes only"
        )
    if cache is None:
        return
    if not isinstance(cache, HybridCache):
        raise ValueError(
            f"cache: expected a HybridCache, got {type(cache).__name__}"
        )
    if cache.kinds != config.layer_pattern:
        raise ValueError(
            f"cache: expected layer kinds {config.layer_pattern}, got {cache.kinds}"
        )
    if cache.batch_size != input_ids.shape[0]:
        raise ValueError(
            f"cache: expected the cache of {input_ids.shape[0]} sequences (the "
            f"batch of input_ids), got one of {cache.batch_size}"
        )


def _generate_inputs(
    self: HybridLM,
    input_ids: object,
    max_new_tokens: int,
    temperature: float,
    generator: object,
    on_step: object,
) -> None:
    _model_inputs(self, input_ids, None, True)
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, int)
        or max_new_tokens < 0
    ):
        raise ValueError(
            f"max_new_tokens: expected an integer >= 0, got {max_new_tokens!r}"
        )
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or temperature < 0
    ):
        raise ValueError(
            f"temperature: expected a number >= 0, got {temperature!r}"
        )


class HybridLM(nn.Module):
    """A decoder-only language model whose layers follow ``config.layer_pattern``.

    logits = W_head · RMSNorm(Block_L(… Block_1(E[input_ids]))).

    The embedding is initialised N(0, 0.02²) (std 1 breaks small recurrent models). The LM head
    is the embedding matrix itself when ``config.tie_embeddings``, a separate bias-free linear
    map otherwise. Shapes: ``input_ids [B, T]`` (integer token ids) → ``logits [B, T,
    vocab_size]``. ``mla_decode`` picks the MLA path of cached decoding steps: ``"absorbed"``
    (attention in the latent space, Lesson 15's "how MLA decodes") or ``"naive"`` (up-project
    the latent to per-head keys and values); both give the same logits.
    """

    def __init__(
        self, config: ModelConfig, *, mla_decode: str = "absorbed"
    ) -> None:
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise ValueError(
                f"config: expected a ModelConfig, got {type(config).__name__}"
            )
        check_choice("mla_decode", mla_decode, MLA_DECODE_PATHS)
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        nn.init.normal_(self.embed.weight, std=0.02)
        self.blocks = nn.ModuleList(
            HybridBlock(kind, config, mla_decode)
            for kind in config.layer_pattern
        )
        self.norm = RMSNorm(config.d_model)
        self.lm_head = nn.Linear(
            config.d_model, config.vocab_size, bias=False
        )
        if config.tie_embeddings:
            self.lm_head.weight = self.embed.weight

    @checked(_model_inputs)
    def forward(
        self,
        input_ids: torch.Tensor,
        cache: HybridCache | None = None,
        use_cache: bool = False,
    ) -> tuple[torch.Tensor, HybridCache | None]:
        """input_ids [B, T] -> (logits [B, T, V], cache or None).

        ``use_cache`` starts a cache; a given ``cache`` is continued in place:
        ``ids[:, :t]``, then ``ids[:, t:]``, give the logits of ``ids``.
        """
        kinds = self.config.layer_pattern
        if use_cache and cache is None:  # a new cache, one entry per layer
            cache = HybridCache(kinds, [None] * len(kinds), len(input_ids))
        layer_caches = [None] * len(kinds) if cache is None else cache.layers
        x = self.embed(input_ids)
        for i, block in enumerate(self.blocks):
            x, layer_caches[i] = block(
                x, cache=layer_caches[i], use_cache=cache is not None
            )
        logits = self.lm_head(self.norm(x))
        if cache is not None:
            cache.seen_tokens += input_ids.shape[1]
        return logits, cache

    @torch.no_grad()
    @checked(_generate_inputs)
    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int,
        *,
        temperature: float = 0.0,
        generator: torch.Generator | None = None,
        on_step: Callable[[HybridCache], None] | None = None,
    ) -> torch.Tensor:
        """Continue ``input_ids [B, T]`` by ``max_new_tokens`` tokens using the cache.

        The prompt is read in one pass (prefill); then each new token is one cached step.
        ``temperature == 0`` picks the most likely token (greedy, deterministic); a positive
        temperature samples from softmax(logits / temperature) with ``generator``.
        ``on_step(cache)`` is called after the prefill and after every decoding step, e.g. to
        record the cache bytes per layer as the sequence grows.
        Returns ``[B, T + max_new_tokens]``.
        """
        logits, cache = self(input_ids, use_cache=True)
        tokens = [input_ids]
        for step in range(max_new_tokens):
            if on_step is not None:
                on_step(cache)
            next_ids = next_token(logits[:, -1], temperature, generator)
            tokens.append(next_ids)
            if step + 1 < max_new_tokens:
                logits, cache = self(next_ids, cache=cache, use_cache=True)
        return torch.cat(tokens, dim=1)


def next_token(
    logits: torch.Tensor,
    temperature: float,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """logits [B, V] -> ids [B, 1]: argmax, or sample at a temperature."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    probs = torch.softmax(logits / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator)


def _stepwise_inputs(model: object, input_ids: object, prefill: int) -> None:
    if not isinstance(model, HybridLM):
        raise ValueError(
            f"model: expected a HybridLM, got {type(model).__name__}"
        )
    _model_inputs(model, input_ids, None, True)
    check_int_in("prefill", prefill, 1, input_ids.shape[1])


@torch.no_grad()
@checked(_stepwise_inputs)
def stepwise_logits(
    model: HybridLM, input_ids: torch.Tensor, prefill: int = 1
) -> tuple[torch.Tensor, HybridCache]:
    """The logits [B, T, V] as generation computes them (a prefill, then
    one cached step per token), and the cache. They equal the parallel pass's
    up to rounding."""
    logits, cache = model(input_ids[:, :prefill], use_cache=True)
    out = [logits]
    for i in range(prefill, input_ids.shape[1]):
        logits, cache = model(input_ids[:, i : i + 1], cache=cache)
        out.append(logits)
    return torch.cat(out, dim=1), cache


def _maps_inputs(model: object, input_ids: object) -> None:
    if not isinstance(model, HybridLM):
        raise ValueError(
            f"model: expected a HybridLM, got {type(model).__name__}"
        )
    _check_input_ids(input_ids, model.config.vocab_size)


@torch.no_grad()
@checked(_maps_inputs)
def attention_maps(
    model: HybridLM, input_ids: torch.Tensor
) -> dict[int, torch.Tensor]:
    """The attention weights of every softmax-attention layer of ``model``.

    Runs the blocks as ``model(input_ids)`` does and, at each ``"attn"``
    layer i, computes A = softmax(s · q kᵀ + log M) of every head on that
    layer's normed input (:func:`attnlab.attention.head_attention_weights`).
    input_ids ``[B, T]`` → ``{i: weights [B, H, T, T]}`` (rows sum to 1).
    """
    maps = {}
    x = model.embed(input_ids)
    for i, block in enumerate(model.blocks):
        if isinstance(block.mixer, MultiHeadAttention):
            maps[i] = head_attention_weights(block.mixer, block.mixer_norm(x))
        x, _ = block(x)
    return maps
