"""Configurations of real and course models: which layer kinds a stack has and the sizes each
kind reads, with no ``torch.nn`` (so byte arithmetic in :mod:`attnlab.memory` never builds a layer).

The presets (:data:`SOPHIA`, :data:`KIMI_LINEAR_48B_A3B`, :data:`DEEPSEEK_V3`, :data:`LLAMA3_8B`)
carry the numbers that :mod:`attnlab.memory` turns into bytes; :data:`SOPHIA_NANO` is small enough
to train on a CPU in a minute (:class:`attnlab.model.HybridLM` builds a model from any of
them).
Mixture-of-experts feed-forward layers are not modelled: every block has one dense MLP (the MoE
routing does not change what a layer caches while decoding).
"""

from __future__ import annotations

from dataclasses import dataclass

from .checks import check_choice, check_positive_int

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
        for name in (
            "n_heads",
            "qk_nope_head_dim",
            "qk_rope_head_dim",
            "v_head_dim",
            "kv_lora_rank",
        ):
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
            raise ValueError(
                f"ModelConfig.name: expected a non-empty string, got {self.name!r}"
            )
        for name in (
            "vocab_size",
            "d_model",
            "n_heads",
            "head_dim",
            "conv_size",
            "mlp_hidden",
        ):
            check_positive_int(f"ModelConfig.{name}", getattr(self, name))
        _check_field_bool("ModelConfig.rope", self.rope)
        _check_field_bool("ModelConfig.tie_embeddings", self.tie_embeddings)
        pattern = self.layer_pattern
        if (
            isinstance(pattern, str)
            or not isinstance(pattern, tuple | list)
            or not pattern
        ):
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
        if "mla" in self.layer_pattern and not isinstance(
            self.mla, MLAConfig
        ):
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
    n_layers: int,
    full_attn_layers: tuple[int, ...],
    *,
    full: str = "mla",
    linear: str = "kda",
) -> tuple[str, ...]:
    """Layer kinds from a released ``config.json`` that lists its global layers 1-based.

    Kimi Linear's ``linear_attn_config.full_attn_layers = [4, 8, 12, 16, 20, 24, 27]`` with 27
    layers gives ``kda kda kda mla … mla kda kda mla``: 20 KDA and 7 MLA layers.
    """
    check_positive_int("n_layers", n_layers)
    for i in full_attn_layers:
        if (
            isinstance(i, bool)
            or not isinstance(i, int)
            or not 1 <= i <= n_layers
        ):
            raise ValueError(
                f"full_attn_layers: expected 1-based layer numbers in [1, {n_layers}], got {i!r}"
            )
    return tuple(
        full if i + 1 in full_attn_layers else linear for i in range(n_layers)
    )


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
        "The course's source text, lesson 17: 28 layers as [KDA, KDA, KDA, MLA] x 7, 16 heads, "
        "KDA head state 96 x 96. See the Notation appendix, §11."
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
    source="Course choice: Sophia's layout at toy size (the Notation appendix, §11).",
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
    layer_pattern=pattern_from_full_attn_layers(
        27, KIMI_LINEAR_FULL_ATTN_LAYERS
    ),
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
        "The config values are unconfirmed: copied identically in several public "
        "repositories, the Hugging Face original was not reachable. full_attn_layers "
        "[4, 8, 12, 16, 20, 24, 27] gives 20 KDA + 7 MLA layers (20:7, not exactly 3:1), MLA "
        "last. MLA is NoPE (mla_use_nope), so its 64 'rope' key dims are cached unrotated. "
        "The MoE (256 experts, 8 active + 1 shared, moe_intermediate_size 1024) is not "
        "modelled: mlp_hidden is the dense intermediate_size 9216 of the first layer."
    ),
)
"""Kimi Linear 48B-A3B: the released KDA/MLA hybrid (the Notation appendix, §8)."""

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
"""DeepSeek-V3 (671B): MLA in every layer (the Notation appendix, §7)."""

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
    c.name: c
    for c in (
        SOPHIA,
        SOPHIA_NANO,
        KIMI_LINEAR_48B_A3B,
        DEEPSEEK_V3,
        LLAMA3_8B,
    )
}
"""Every preset by its name."""
