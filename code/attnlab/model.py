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

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from .attention import (
    MultiHeadAttention,
    check_score_bytes,
    head_attention_weights,
)
from .blocks import RMSNorm, SwiGLU
from .checks import check_choice, check_int_in, check_number, checked
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
        y, cache = self.mix(self.mixer_norm(x), cache, use_cache)
        x = x + y
        return x + self.mlp(self.mlp_norm(x)), cache

    def mix(
        self, x: torch.Tensor, cache: object | None, use_cache: bool
    ) -> tuple[torch.Tensor, object | None]:
        """The mixer on the normalised stream x ``[B, T, d_model]`` → (y, cache).

        An MLA mixer continuing a cache (a decoding step) takes the path that
        ``mla_decode`` names: absorbed or naive (Lesson 15).
        """
        options = {}
        if self.kind == "mla" and cache is not None:
            options["absorb"] = self.mla_decode == "absorbed"
        return self.mixer(x, cache=cache, use_cache=use_cache, **options)


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


INDEX_DTYPES = (torch.int64, torch.int32)
"""The dtypes of token ids the embedding reads (``nn.Embedding``'s index types)."""


def _check_input_ids(
    input_ids: object, vocab_size: int, device: torch.device | None = None
) -> None:
    """Check token ids ``[B, T]`` (B, T >= 1, int64 or int32, on ``device`` if given, ids in
    [0, vocab_size)). The range is compared as Python ints, so no dtype wraps around."""
    if not isinstance(input_ids, torch.Tensor):
        raise ValueError(
            f"input_ids: expected a torch.Tensor, got {type(input_ids).__name__}"
        )
    if input_ids.dim() != 2 or 0 in input_ids.shape:
        raise ValueError(
            f"input_ids: expected a 2-D tensor [B, T] with B >= 1 sequences of "
            f"T >= 1 tokens, got shape {tuple(input_ids.shape)}"
        )
    if input_ids.dtype not in INDEX_DTYPES:
        raise ValueError(
            f"input_ids: expected an integer dtype the embedding reads (int64 or "
            f"int32), got {input_ids.dtype}; convert the ids with input_ids.long()"
        )
    if device is not None and input_ids.device != device:
        raise ValueError(
            f"input_ids: expected token ids on {device} (the model's device), got "
            f"{input_ids.device}"
        )
    lowest, highest = (int(x) for x in torch.aminmax(input_ids.long()))
    if lowest < 0 or highest >= vocab_size:
        raise ValueError(
            f"input_ids: expected token ids in [0, {vocab_size}), got min "
            f"{lowest} and max {highest}"
        )


def _check_runnable(model: HybridLM) -> None:
    """A model built on the meta device has shapes but no numbers: it cannot run."""
    if model.embed.weight.device.type == "meta":
        raise ValueError(
            "model: built on the meta device, it has parameter shapes but no values "
            "and cannot run; build it on a real device (allow_large=True for a large "
            "one) to compute"
        )


def _model_inputs(
    self: HybridLM, input_ids: object, cache: object, use_cache: bool
) -> None:
    config, weight = self.config, self.embed.weight
    _check_runnable(self)
    _check_input_ids(input_ids, config.vocab_size, weight.device)
    conv_attention = config.attn_conv and "attn" in config.layer_pattern
    if conv_attention and (use_cache or cache is not None):
        raise ValueError(
            "use_cache: this model's attention layers read q, k, v through a "
            "short convolution (attn_conv=True), whose inputs a KV cache does "
            "not keep: it runs full passes only"
        )
    _check_attention_size(self, input_ids, cache)
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


def _check_attention_size(
    model: HybridLM, input_ids: torch.Tensor, cache: object
) -> None:
    """Refuse input_ids whose attention layers would form a score matrix larger than
    :data:`attnlab.attention.MAX_SCORE_BYTES` (before anything is allocated)."""
    heads = [
        block.mixer.n_heads
        for block in model.blocks
        if block.kind in ("attn", "mla")
    ]
    if not heads:
        return
    b, t = input_ids.shape
    past = cache.seen_tokens if isinstance(cache, HybridCache) else 0
    if model.config.attn_conv and "attn" in model.config.layer_pattern:
        advice = "use shorter input_ids"
    else:
        advice = (
            "feed input_ids through the cache in pieces of at most {rows} tokens "
            "(model(ids[:, :t], use_cache=True), then model(ids[:, t:], cache))"
        )
    sizes = (b, max(heads), t, past + t)
    check_score_bytes("input_ids", sizes, model.embed.weight.dtype, advice)


def _check_sampling(
    temperature: object, generator: object, dtype: torch.dtype
) -> None:
    """A temperature, 0 (greedy) or a finite number no smaller than ``dtype``'s smallest
    normal number (a smaller one divides the logits by 0 in ``dtype``), and a
    torch.Generator or None."""
    t = check_number("temperature", temperature, inclusive=True)
    tiny = torch.finfo(dtype).tiny
    if 0 < t < tiny:
        raise ValueError(
            f"temperature: expected 0 (greedy) or a number >= {tiny:.3g} (the smallest "
            f"normal {dtype} number; any smaller temperature samples the argmax, as 0 "
            f"does), got {temperature!r}"
        )
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(
            f"generator: expected a torch.Generator or None, got "
            f"{type(generator).__name__}"
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
    _check_sampling(temperature, generator, self.embed.weight.dtype)
    if on_step is not None and not callable(on_step):
        raise ValueError(
            f"on_step: expected a function of the cache or None, got "
            f"{type(on_step).__name__}"
        )


MAX_MODEL_BYTES = 2**31
"""The largest model :class:`HybridLM` allocates unless asked (``allow_large=True``): 2 GiB of
parameters, about what a Binder session holds. Kimi Linear's preset is 12.9 GiB in float32,
DeepSeek-V3's 140 GiB (one dense MLP a block); ``device="meta"`` builds any of them without
memory, to count and inspect their parameters."""


def parameter_count(config: ModelConfig) -> int:
    """Parameters of ``HybridLM(config)``, counted on the meta device: nothing is allocated."""
    model = HybridLM(config, device="meta")
    return sum(p.numel() for p in model.parameters())


def _check_build(
    config: object, mla_decode: object, device: object, allow_large: object
) -> torch.device | None:
    """A ModelConfig, an MLA decode path, a device (or None) and a flag; a model too large
    for :data:`MAX_MODEL_BYTES` is refused before anything is allocated. Returns the device."""
    if not isinstance(config, ModelConfig):
        raise ValueError(
            f"config: expected a ModelConfig, got {type(config).__name__}"
        )
    check_choice("mla_decode", mla_decode, MLA_DECODE_PATHS)
    if not isinstance(allow_large, bool):
        raise ValueError(
            f"allow_large: expected True or False, got {allow_large!r}"
        )
    try:
        device = None if device is None else torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(
            f"device: expected a torch.device, a device name or None, got {device!r}"
        ) from None
    if allow_large or (device is not None and device.type == "meta"):
        return device
    n = parameter_count(config)
    dtype = torch.get_default_dtype()
    n_bytes = n * dtype.itemsize
    if n_bytes > MAX_MODEL_BYTES:
        raise ValueError(
            f"config: {config.name} builds a model of {n:,} parameters, "
            f"{n_bytes / 2**30:.3g} GiB in {dtype}, above "
            f"attnlab.model.MAX_MODEL_BYTES ({MAX_MODEL_BYTES / 2**30:.3g} GiB); pass "
            'device="meta" to build it without memory (shapes and counts), or '
            "allow_large=True to allocate it"
        )
    return device


class HybridLM(nn.Module):
    """A decoder-only language model whose layers follow ``config.layer_pattern``.

    logits = W_head · RMSNorm(Block_L(… Block_1(E[input_ids]))).

    The embedding is initialised N(0, 0.02²) (std 1 breaks small recurrent models). The LM head
    is the embedding matrix itself when ``config.tie_embeddings``, a separate bias-free linear
    map otherwise. Shapes: ``input_ids [B, T]`` (integer token ids) → ``logits [B, T,
    vocab_size]``. ``mla_decode`` picks the MLA path of cached decoding steps: ``"absorbed"``
    (attention in the latent space, Lesson 15's "how MLA decodes") or ``"naive"`` (up-project
    the latent to per-head keys and values); both give the same logits.

    The parameters are created on ``device`` (None: torch's default). A model above
    :data:`MAX_MODEL_BYTES` (2 GiB) is refused before anything is allocated, unless
    ``allow_large=True``; ``device="meta"`` builds any size without memory
    (:func:`parameter_count` counts them that way).
    """

    def __init__(
        self,
        config: ModelConfig,
        *,
        mla_decode: str = "absorbed",
        device: torch.device | str | None = None,
        allow_large: bool = False,
    ) -> None:
        super().__init__()
        device = _check_build(config, mla_decode, device, allow_large)
        self.config = config
        place = contextlib.nullcontext() if device is None else device
        with place:  # every parameter is created on ``device``
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


def _next_token_inputs(
    logits: object, temperature: object, generator: object
) -> None:
    """logits ``[B, V]`` (B, V >= 1), floating-point and finite; a valid temperature and
    generator."""
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        got = getattr(logits, "dtype", type(logits).__name__)
        raise ValueError(
            f"logits: expected a floating-point tensor [B, V], got {got}"
        )
    if logits.dim() != 2 or 0 in logits.shape:
        raise ValueError(
            f"logits: expected a 2-D tensor [B, V] with B, V >= 1, got shape "
            f"{tuple(logits.shape)}"
        )
    if not torch.isfinite(logits).all():
        raise ValueError("logits: expected finite values, got NaN or inf")
    _check_sampling(temperature, generator, logits.dtype)


@checked(_next_token_inputs)
def next_token(
    logits: torch.Tensor,
    temperature: float,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """logits [B, V] -> ids [B, 1]: argmax, or sample at a temperature."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    shifted = logits - logits.amax(dim=-1, keepdim=True)  # <= 0: no overflow
    probs = torch.softmax(shifted / temperature, dim=-1)
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
    _check_input_ids(
        input_ids, model.config.vocab_size, model.embed.weight.device
    )
    _check_attention_size(model, input_ids, None)


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
