"""Configurations of real and course models, and a small hybrid language model that stacks any mix
of mixer layers.

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

The configs (:data:`SOPHIA`, :data:`KIMI_LINEAR_48B_A3B`, :data:`DEEPSEEK_V3`, :data:`LLAMA3_8B`)
carry the numbers that :mod:`attnlab.memory` turns into bytes; :data:`SOPHIA_NANO` is small enough
to train on a CPU in a minute. Mixture-of-experts feed-forward layers are not modelled: every block
here has one dense MLP (the MoE routing does not change what a layer caches while decoding).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import check_choice, check_positive_int
from .attention import MultiHeadAttention
from .blocks import HeadRMSNorm
from .delta import DeltaNetLayer, GatedDeltaNetLayer
from .gated import GLALayer
from .kda import KDALayer
from .linear import LinearAttentionLayer
from .mla import MultiHeadLatentAttention

LAYER_KINDS = ("attn", "mla", "kda", "gdn", "deltanet", "gla", "linear")
"""Every layer kind a :class:`ModelConfig` may list."""

RECURRENT_KINDS = ("kda", "gdn", "deltanet", "gla", "linear")
"""Layer kinds whose decoding cache is a fixed-size state (it does not grow with the context)."""


@dataclass(frozen=True, kw_only=True)
class MLAConfig:
    """The dimensions of a multi-head latent attention layer (DeepSeek-V2 §2.1 names in brackets).

    - ``n_heads`` (n_h): query heads.
    - ``qk_nope_head_dim`` (d_h): per-head query/key part that carries no position.
    - ``qk_rope_head_dim`` (d_h^R): the decoupled key part, one key shared by all heads.
    - ``v_head_dim``: per-head value size.
    - ``kv_lora_rank`` (d_c): size of the compressed latent c^KV that is cached.
    - ``q_lora_rank`` (d_c'): low-rank query path, or None for a full-rank W^Q (Kimi Linear).
    - ``rope``: rotate the d_h^R part (DeepSeek) or not (NoPE, Kimi Linear). With NoPE the d_h^R
      key dims are still projected and cached, just not rotated (as vLLM's Kimi model does).

    Cached per token per layer: ``kv_lora_rank + qk_rope_head_dim`` numbers (:attr:`cache_dim`).
    """

    n_heads: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    kv_lora_rank: int
    q_lora_rank: int | None = None
    rope: bool = True

    def __post_init__(self) -> None:
        for name in ("n_heads", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                     "kv_lora_rank"):
            check_positive_int(f"MLAConfig.{name}", getattr(self, name))
        if self.q_lora_rank is not None:
            check_positive_int("MLAConfig.q_lora_rank", self.q_lora_rank)
        _check_field_bool("MLAConfig.rope", self.rope)

    @property
    def cache_dim(self) -> int:
        """Numbers cached per token per layer: d_c + d_h^R (latent plus the shared rope key)."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """A stack of layers: which kind each layer is, and the sizes every kind reads.

    - ``layer_pattern``: one kind per layer, from :data:`LAYER_KINDS`.
    - ``n_heads``, ``head_dim``: heads of the ``"attn"`` layers and of the recurrent layers
      (for those d_k = d_v = ``head_dim``, so each head's state is ``head_dim × head_dim``).
    - ``n_kv_heads``: key/value heads of ``"attn"`` layers (GQA); None means ``n_heads`` (MHA).
    - ``conv_size``: width of the short causal convolution of the recurrent layers.
    - ``mla``: the MLA dimensions, required when the pattern has an ``"mla"`` layer.
    - ``mlp_hidden``: hidden width of the SwiGLU MLP of every block.
    - ``rope``: rotary positions in the ``"attn"`` layers.
    - ``tie_embeddings``: the LM head reuses the token embedding matrix.
    - ``source``: where the numbers come from; ``notes``: choices and caveats.
    """

    name: str
    vocab_size: int
    d_model: int
    layer_pattern: tuple[str, ...]
    n_heads: int
    head_dim: int
    n_kv_heads: int | None = None
    conv_size: int = 4
    mla: MLAConfig | None = None
    mlp_hidden: int
    rope: bool = True
    tie_embeddings: bool = False
    source: str = ""
    notes: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"ModelConfig.name: expected a non-empty string, got {self.name!r}")
        for name in ("vocab_size", "d_model", "n_heads", "head_dim", "conv_size", "mlp_hidden"):
            check_positive_int(f"ModelConfig.{name}", getattr(self, name))
        _check_field_bool("ModelConfig.rope", self.rope)
        _check_field_bool("ModelConfig.tie_embeddings", self.tie_embeddings)
        pattern = self.layer_pattern
        if isinstance(pattern, str) or not isinstance(pattern, tuple | list) or not pattern:
            raise ValueError(
                "ModelConfig.layer_pattern: expected a non-empty tuple of layer kinds, "
                f"got {pattern!r}"
            )
        for i, kind in enumerate(pattern):
            check_choice(f"ModelConfig.layer_pattern[{i}]", kind, LAYER_KINDS)
        object.__setattr__(self, "layer_pattern", tuple(pattern))
        n_kv = self.n_heads if self.n_kv_heads is None else self.n_kv_heads
        check_positive_int("ModelConfig.n_kv_heads", n_kv)
        if self.n_heads % n_kv:
            raise ValueError(
                f"ModelConfig.n_kv_heads: expected a divisor of n_heads={self.n_heads}, got {n_kv}"
            )
        object.__setattr__(self, "n_kv_heads", n_kv)
        if "mla" in self.layer_pattern and not isinstance(self.mla, MLAConfig):
            raise ValueError(
                "ModelConfig.mla: the layer pattern has 'mla' layers, so an MLAConfig is "
                f"required, got {self.mla!r}"
            )

    @property
    def n_layers(self) -> int:
        """Number of layers."""
        return len(self.layer_pattern)

    def count(self, kind: str) -> int:
        """Number of layers of ``kind``."""
        check_choice("kind", kind, LAYER_KINDS)
        return self.layer_pattern.count(kind)


def _check_field_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name}: expected True or False, got {value!r}")


def pattern_from_full_attn_layers(
    n_layers: int, full_attn_layers: tuple[int, ...], *, full: str = "mla", linear: str = "kda"
) -> tuple[str, ...]:
    """Layer kinds from a released ``config.json`` that lists its global layers 1-based.

    Kimi Linear's ``linear_attn_config.full_attn_layers = [4, 8, 12, 16, 20, 24, 27]`` with 27
    layers gives ``kda kda kda mla … mla kda kda mla``: 20 KDA and 7 MLA layers.
    """
    check_positive_int("n_layers", n_layers)
    for i in full_attn_layers:
        if isinstance(i, bool) or not isinstance(i, int) or not 1 <= i <= n_layers:
            raise ValueError(
                f"full_attn_layers: expected 1-based layer numbers in [1, {n_layers}], got {i!r}"
            )
    return tuple(full if i + 1 in full_attn_layers else linear for i in range(n_layers))


SOPHIA = ModelConfig(
    name="Sophia",
    vocab_size=32000,
    d_model=1536,
    layer_pattern=("kda", "kda", "kda", "mla") * 7,
    n_heads=16,
    head_dim=96,
    conv_size=4,
    mla=MLAConfig(
        n_heads=16,
        qk_nope_head_dim=96,
        qk_rope_head_dim=48,
        v_head_dim=96,
        kv_lora_rank=384,
        q_lora_rank=None,
        rope=False,
    ),
    mlp_hidden=4096,
    tie_embeddings=False,
    source=(
        "Course source text, lesson 17 (seed 000_e722ec2a70d028c2): 28 layers as "
        "[KDA, KDA, KDA, MLA] x 7, 16 heads, KDA head state 96 x 96. See MATH.md §11."
    ),
    notes=(
        "Fixed by the course, not in the source: d_model = 16 x 96 = 1536; vocab_size 32000; "
        "MLA dims by DeepSeek-V3's proportions (d_c = 4 d_h = 384, d_h^R = d_h / 2 = 48, "
        "v_head_dim = d_h = 96, full-rank queries) and NoPE as in Kimi Linear, so an MLA layer "
        "caches 384 + 48 = 432 numbers per token; SwiGLU hidden 4096 = 8/3 x 1536 (the usual "
        "SwiGLU width). The source calls KDA 'Kernel Dynamic Attention': it is Kimi Delta "
        "Attention. Its '688 MB' for 28 attention layers at 4096 tokens does not reproduce: "
        "the bf16 arithmetic gives 704,643,072 B = 704.6 MB = 672 MiB."
    ),
)
"""The course's running example; every lesson reads Sophia's numbers from here.

From the source text: 28 layers as [KDA, KDA, KDA, MLA] × 7 (21 KDA + 7 MLA), 16 heads, a KDA
state of 96 × 96 per head. Not in the source, fixed here once by the course:

- d_model = 16 · 96 = 1536, vocab_size 32000, untied embeddings, SwiGLU hidden 4096 (≈ 8/3 ·
  d_model, the usual SwiGLU width);
- MLA dims by DeepSeek-V3's proportions (there d_c = 512 = 4 · d_h and d_h^R = 64 = d_h / 2 with
  d_h = 128): 16 heads, qk_nope_head_dim = v_head_dim = 96, kv_lora_rank d_c = 4 · 96 = 384,
  qk_rope_head_dim d_h^R = 96 / 2 = 48, full-rank queries, and NoPE as in Kimi Linear. An MLA
  layer thus caches 384 + 48 = 432 numbers per token instead of 2 · 16 · 96 = 3072.
"""

SOPHIA_NANO = ModelConfig(
    name="Sophia-nano",
    vocab_size=256,
    d_model=64,
    layer_pattern=("kda", "kda", "kda", "mla") * 2,
    n_heads=2,
    head_dim=32,
    conv_size=4,
    mla=MLAConfig(
        n_heads=2,
        qk_nope_head_dim=32,
        qk_rope_head_dim=16,
        v_head_dim=32,
        kv_lora_rank=32,
        q_lora_rank=None,
        rope=False,
    ),
    mlp_hidden=128,
    tie_embeddings=True,
    source="Course choice: Sophia's layout at toy size (MATH.md §11).",
    notes=(
        "Byte-level vocabulary (256); 8 layers as [KDA, KDA, KDA, MLA] x 2; 2 heads x 32; "
        "MLA with d_c = 32 and a 16-dim NoPE key part; tied embeddings. Small enough to train "
        "on a CPU for a minute."
    ),
)
"""A tiny Sophia for the CPU lessons: same layout, byte vocabulary, d_model 64."""

KIMI_LINEAR_FULL_ATTN_LAYERS = (4, 8, 12, 16, 20, 24, 27)
"""``linear_attn_config.full_attn_layers`` of the released Kimi-Linear-48B-A3B (1-based)."""

KIMI_LINEAR_48B_A3B = ModelConfig(
    name="Kimi-Linear-48B-A3B",
    vocab_size=163840,
    d_model=2304,
    layer_pattern=pattern_from_full_attn_layers(27, KIMI_LINEAR_FULL_ATTN_LAYERS),
    n_heads=32,
    head_dim=128,
    conv_size=4,
    mla=MLAConfig(
        n_heads=32,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        kv_lora_rank=512,
        q_lora_rank=None,
        rope=False,
    ),
    mlp_hidden=9216,
    tie_embeddings=False,
    source=(
        "Released config.json of moonshotai/Kimi-Linear-48B-A3B (num_hidden_layers 27, "
        "hidden_size 2304, linear_attn_config, MLA fields, vocab_size 163840); Kimi Linear "
        "tech report, arXiv 2510.26692, §4-5."
    ),
    notes=(
        "The config values are [unconfirmed] in MATH.md: copied identically in several public "
        "repositories, the Hugging Face original was not reachable. full_attn_layers "
        "[4, 8, 12, 16, 20, 24, 27] gives 20 KDA + 7 MLA layers (20:7, not exactly 3:1), MLA "
        "last. MLA is NoPE (mla_use_nope), so its 64 'rope' key dims are cached unrotated. "
        "The MoE (256 experts, 8 active + 1 shared, moe_intermediate_size 1024) is not "
        "modelled: mlp_hidden is the dense intermediate_size 9216 of the first layer."
    ),
)
"""Kimi Linear 48B-A3B: the released KDA/MLA hybrid (MATH.md §8)."""

DEEPSEEK_V3 = ModelConfig(
    name="DeepSeek-V3",
    vocab_size=129280,
    d_model=7168,
    layer_pattern=("mla",) * 61,
    n_heads=128,
    head_dim=128,
    mla=MLAConfig(
        n_heads=128,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        kv_lora_rank=512,
        q_lora_rank=1536,
        rope=True,
    ),
    mlp_hidden=18432,
    tie_embeddings=False,
    source=(
        "deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json (n_layers 61, dim 7168, "
        "n_heads 128, kv_lora_rank 512, q_lora_rank 1536, qk_nope_head_dim 128, "
        "qk_rope_head_dim 64, v_head_dim 128, vocab_size 129280)."
    ),
    notes=(
        "All 61 layers are MLA; each caches 512 + 64 = 576 numbers per token. n_heads x head_dim "
        "= 128 x 128 is the multi-head baseline of DeepSeek-V2 Table 1 (2 x 128 x 128 per token "
        "per layer). The MoE (256 routed experts, 8 active, moe_inter_dim 2048) is not "
        "modelled: mlp_hidden is the dense inter_dim 18432 of the first 3 layers."
    ),
)
"""DeepSeek-V3 (671B): MLA in every layer (MATH.md §7)."""

LLAMA3_8B = ModelConfig(
    name="Llama-3-8B",
    vocab_size=128256,
    d_model=4096,
    layer_pattern=("attn",) * 32,
    n_heads=32,
    head_dim=128,
    n_kv_heads=8,
    mlp_hidden=14336,
    rope=True,
    tie_embeddings=False,
    source=(
        "Meta Llama 3 model card and config.json of meta-llama/Meta-Llama-3-8B "
        "(num_hidden_layers 32, hidden_size 4096, num_attention_heads 32, "
        "num_key_value_heads 8, intermediate_size 14336, vocab_size 128256)."
    ),
    notes="Grouped-query attention: 8 KV heads shared by 32 query heads; head_dim 4096 / 32.",
)
"""Llama 3 8B: standard GQA attention in every layer, the usual KV-cache baseline."""

PRESETS: dict[str, ModelConfig] = {
    c.name: c for c in (SOPHIA, SOPHIA_NANO, KIMI_LINEAR_48B_A3B, DEEPSEEK_V3, LLAMA3_8B)
}
"""Every preset by its name."""


_RECURRENT_LAYERS: dict[str, type[nn.Module]] = {
    "kda": KDALayer,
    "gdn": GatedDeltaNetLayer,
    "deltanet": DeltaNetLayer,
    "gla": GLALayer,
    "linear": LinearAttentionLayer,
}


def make_mixer(kind: str, config: ModelConfig) -> nn.Module:
    """The token mixer of one layer of ``kind``, sized by ``config``.

    Every mixer follows the layer protocol: ``forward(x [B, T, d_model], cache=None,
    use_cache=False) -> (y [B, T, d_model], cache_or_None)``.
    """
    check_choice("kind", kind, LAYER_KINDS)
    d, h, dh = config.d_model, config.n_heads, config.head_dim
    if kind == "attn":
        return MultiHeadAttention(d, h, dh, n_kv_heads=config.n_kv_heads, rope=config.rope)
    if kind == "mla":
        m = config.mla
        return MultiHeadLatentAttention(
            d,
            m.n_heads,
            m.qk_nope_head_dim,
            kv_lora_rank=m.kv_lora_rank,
            qk_rope_head_dim=m.qk_rope_head_dim,
            v_head_dim=m.v_head_dim,
            q_lora_rank=m.q_lora_rank,
            rope=m.rope,
        )
    return _RECURRENT_LAYERS[kind](d, h, dh, conv_size=config.conv_size)


class SwiGLU(nn.Module):
    """The feed-forward part of a block (Llama, DeepSeek and Kimi all use it).

    MLP(x) = W_down (SiLU(W_gate x) ⊙ W_up x), no biases.
    Shapes: x ``[B, T, d_model]`` → ``[B, T, d_model]``; hidden width ``hidden``.
    """

    def __init__(self, d_model: int, hidden: int) -> None:
        super().__init__()
        self.gate = nn.Linear(d_model, hidden, bias=False)
        self.up = nn.Linear(d_model, hidden, bias=False)
        self.down = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class HybridBlock(nn.Module):
    """One layer: a pre-norm residual mixer, then a pre-norm residual MLP.

    x ← x + Mixer(RMSNorm(x));  x ← x + SwiGLU(RMSNorm(x)).   Shapes: ``[B, T, d_model]``.
    """

    def __init__(self, kind: str, config: ModelConfig) -> None:
        super().__init__()
        self.kind = kind
        self.mixer_norm = HeadRMSNorm(config.d_model)
        self.mixer = make_mixer(kind, config)
        self.mlp_norm = HeadRMSNorm(config.d_model)
        self.mlp = SwiGLU(config.d_model, config.mlp_hidden)

    def forward(
        self, x: torch.Tensor, cache: object | None = None, use_cache: bool = False
    ) -> tuple[torch.Tensor, object | None]:
        y, cache = self.mixer(self.mixer_norm(x), cache=cache, use_cache=use_cache)
        x = x + y
        return x + self.mlp(self.mlp_norm(x)), cache


@dataclass
class HybridCache:
    """Everything a :class:`HybridLM` keeps between decoding steps: one cache per layer.

    ``layers[i]`` is the cache of layer ``i``'s mixer: K and V for ``"attn"`` (grows with T), the
    latent and rope key for ``"mla"`` (grows with T), a fixed-size state and short-convolution
    inputs for the recurrent kinds. ``seen_tokens`` counts the tokens consumed so far.
    :meth:`HybridLM.forward` continues a cache in place (as every mixer does with its own).
    """

    kinds: tuple[str, ...]
    layers: list[object]
    seen_tokens: int

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


class HybridLM(nn.Module):
    """A decoder-only language model whose layers follow ``config.layer_pattern``.

    logits = W_head · RMSNorm(Block_L(… Block_1(E[input_ids]))).

    The embedding is initialised N(0, 0.02²) (std 1 breaks small recurrent models, see the course's
    experiment notes). The LM head is the embedding matrix itself when ``config.tie_embeddings``,
    a separate bias-free linear map otherwise. Shapes: ``input_ids [B, T]`` (integer token ids)
    → ``logits [B, T, vocab_size]``.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise ValueError(f"config: expected a ModelConfig, got {type(config).__name__}")
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        nn.init.normal_(self.embed.weight, std=0.02)
        self.blocks = nn.ModuleList(HybridBlock(kind, config) for kind in config.layer_pattern)
        self.norm = HeadRMSNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.embed.weight

    def forward(
        self,
        input_ids: torch.Tensor,
        cache: HybridCache | None = None,
        use_cache: bool = False,
    ) -> tuple[torch.Tensor, HybridCache | None]:
        """Logits for every position, and the cache to continue from.

        With ``cache=None`` and ``use_cache=False`` this is the plain parallel pass and returns
        ``(logits, None)``. With ``use_cache`` a new cache is built; a given ``cache`` is
        continued: it grows by the T new tokens in place (like every mixer's cache) and is
        returned. So ``forward(ids[:, :t], use_cache=True)`` then ``forward(ids[:, t:], cache)``
        gives the logits of ``forward(ids)`` for the last positions.
        """
        self._check_input_ids(input_ids)
        keep = use_cache or cache is not None
        layer_caches = [None] * self.config.n_layers if cache is None else self._layers_of(cache)
        x = self.embed(input_ids)
        for i, block in enumerate(self.blocks):
            x, layer_caches[i] = block(x, cache=layer_caches[i], use_cache=keep)
        logits = self.lm_head(self.norm(x))
        if not keep:
            return logits, None
        if cache is None:
            cache = HybridCache(self.config.layer_pattern, layer_caches, 0)
        cache.seen_tokens += input_ids.shape[1]
        return logits, cache

    @torch.no_grad()
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
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or (
            max_new_tokens < 0
        ):
            raise ValueError(
                f"max_new_tokens: expected an integer >= 0, got {max_new_tokens!r}"
            )
        if not isinstance(temperature, int | float) or temperature < 0:
            raise ValueError(f"temperature: expected a number >= 0, got {temperature!r}")
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

    def _check_input_ids(self, input_ids: object) -> None:
        if not isinstance(input_ids, torch.Tensor):
            raise ValueError(f"input_ids: expected a torch.Tensor, got {type(input_ids).__name__}")
        if input_ids.dim() != 2 or input_ids.shape[1] == 0:
            raise ValueError(
                f"input_ids: expected a 2-D tensor [B, T] with T >= 1, got shape "
                f"{tuple(input_ids.shape)}"
            )
        if input_ids.dtype.is_floating_point or input_ids.dtype.is_complex or (
            input_ids.dtype == torch.bool
        ):
            raise ValueError(f"input_ids: expected an integer dtype, got {input_ids.dtype}")
        v = self.config.vocab_size
        if input_ids.numel() and (input_ids.min() < 0 or input_ids.max() >= v):
            raise ValueError(
                f"input_ids: expected token ids in [0, {v}), got min {input_ids.min().item()} "
                f"and max {input_ids.max().item()}"
            )

    def _layers_of(self, cache: object) -> list[object]:
        if not isinstance(cache, HybridCache):
            raise ValueError(f"cache: expected a HybridCache, got {type(cache).__name__}")
        if cache.kinds != self.config.layer_pattern:
            raise ValueError(
                f"cache: expected layer kinds {self.config.layer_pattern}, got {cache.kinds}"
            )
        return cache.layers


def next_token(
    logits: torch.Tensor, temperature: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Pick one token per row of ``logits [B, V]``: argmax if ``temperature == 0``, else a sample
    from softmax(logits / temperature). Returns ``[B, 1]`` token ids."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    probs = torch.softmax(logits / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator)


@torch.no_grad()
def stepwise_logits(model: HybridLM, input_ids: torch.Tensor, prefill: int = 1) -> tuple[
        torch.Tensor, HybridCache]:
    """The logits of ``input_ids [B, T]`` computed the way generation computes them: one pass
    over the first ``prefill`` tokens, then one cached step per remaining token.

    Returns ``(logits [B, T, vocab_size], cache)``. Up to floating-point rounding the logits equal
    ``model(input_ids)[0]``, the parallel pass: comparing the two checks every layer's cache.
    """
    if not isinstance(model, HybridLM):
        raise ValueError(f"model: expected a HybridLM, got {type(model).__name__}")
    model._check_input_ids(input_ids)
    t = input_ids.shape[1]
    if isinstance(prefill, bool) or not isinstance(prefill, int) or not 1 <= prefill <= t:
        raise ValueError(f"prefill: expected an integer in [1, {t}], got {prefill!r}")
    logits, cache = model(input_ids[:, :prefill], use_cache=True)
    out = [logits]
    for i in range(prefill, t):
        logits, cache = model(input_ids[:, i:i + 1], cache=cache)
        out.append(logits)
    return torch.cat(out, dim=1), cache


def train_language_model(
    model: nn.Module,
    token_ids: torch.Tensor,
    *,
    steps: int,
    batch_size: int = 8,
    seq_len: int = 32,
    lr: float = 1e-2,
    weight_decay: float = 0.1,
    seed: int = 0,
    progress: bool = True,
) -> list[float]:
    """Next-token training on one long stream of token ids; returns the loss of every step.

    Each step draws ``batch_size`` windows of ``seq_len + 1`` consecutive ids at random offsets
    (generator seeded by ``seed``) and minimises the mean cross-entropy
    L = −(1 / (B·L)) Σ_{b,t} log softmax(logits_{b,t})[x_{b,t+1}]
    with AdamW (betas 0.9, 0.95; weight decay on matrices only,
    :func:`attnlab.train.parameter_groups`), a warm-up + cosine learning-rate schedule
    (:func:`attnlab.train.warmup_cosine`) and gradients clipped to norm 1.
    Shapes: token_ids ``[N]`` (int64), model ``[B, L] -> logits [B, L, V]`` (or a
    ``(logits, cache)`` pair, as :class:`HybridLM` returns). The model is left in eval mode.
    """
    from tqdm.auto import tqdm

    from .train import parameter_groups, warmup_cosine

    if not isinstance(token_ids, torch.Tensor) or token_ids.dim() != 1 or (
            token_ids.dtype != torch.long):
        raise ValueError("token_ids: expected a 1-D int64 tensor of token ids, got "
                         f"{getattr(token_ids, 'dtype', type(token_ids).__name__)} "
                         f"of shape {tuple(getattr(token_ids, 'shape', ()))}")
    steps = check_positive_int("steps", steps)
    batch_size = check_positive_int("batch_size", batch_size)
    seq_len = check_positive_int("seq_len", seq_len)
    if token_ids.numel() < seq_len + 2:
        raise ValueError(f"token_ids: expected at least seq_len + 2 = {seq_len + 2} ids, "
                         f"got {token_ids.numel()}")
    if not isinstance(lr, int | float) or isinstance(lr, bool) or lr <= 0:
        raise ValueError(f"lr: expected a number > 0, got {lr!r}")
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(parameter_groups(model, weight_decay), lr=lr,
                                  betas=(0.9, 0.95))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: warmup_cosine(s, steps))
    offsets = torch.arange(seq_len + 1)
    losses = []
    model.train()
    bar = tqdm(range(steps), desc="training", disable=not progress)
    for _ in bar:
        starts = torch.randint(0, token_ids.numel() - seq_len, (batch_size, 1),
                               generator=generator)
        window = token_ids[starts + offsets]
        out = model(window[:, :-1])
        logits = out[0] if isinstance(out, tuple) else out
        loss = F.cross_entropy(logits.flatten(0, 1), window[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    model.eval()
    return losses
