"""One description of models: which layer kinds a stack has, the sizes each kind reads, and
(for published models) the parameter counts and where every number comes from.

A :class:`ModelConfig` is what :class:`attnlab.model.HybridLM` builds, what
:mod:`attnlab.memory` turns into bytes and what :mod:`attnlab.serving` fits on a GPU. The layer
kinds and their byte formulas live in one registry, :data:`attnlab.kinds.KINDS`.

The course's own models, :data:`SOPHIA` and :data:`SOPHIA_NANO`, are written out here. The
published ones are read from the fields of their released ``config.json`` (kept below as plain
dicts with their sources) by one reader, :func:`architecture_from_config`: Llama-3-8B,
DeepSeek-V3, Kimi Linear, Qwen3-Next, MiniMax-Text-01, Jamba 1.5 Mini and Nemotron-H 8B. The
reader takes any config of the model types in :data:`_MODEL_TYPES` (dense and MoE attention
models with sliding-window, chunked and local/global layers, MLA, KDA, Gated DeltaNet,
lightning, Mamba and Mamba-2 hybrids) and checks every field it reads, refusing a bad one by
its name.
Mixture-of-experts feed-forward layers are counted in the parameters, not built: every block
of a :class:`attnlab.model.HybridLM` has one dense MLP (the routing does not change what a
layer caches while decoding).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .checks import check_choice, check_number, check_positive_int
from .kinds import KINDS
from .mla import mla_cache_elements_per_token

LAYER_KINDS = tuple(kind for kind, k in KINDS.items() if k.build is not None)
"""The layer kinds :class:`attnlab.model.HybridLM` builds (read from the registry)."""


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
        return mla_cache_elements_per_token(
            self.kv_lora_rank, self.qk_rope_head_dim
        )


@dataclass(frozen=True, kw_only=True)
class RecurrentHeads:
    """The heads of the recurrent layers (KDA, GDN, DeltaNet, GLA, linear and lightning
    attention): ``n_key_heads`` query/key heads of ``key_dim`` and ``n_value_heads`` value
    heads of ``value_dim``, one ``key_dim × value_dim`` state per value head. Qwen3-Next's Gated
    DeltaNet has 16 key heads and 32 value heads of 128, the course's layers as many value
    heads as key heads."""

    n_key_heads: int
    key_dim: int
    n_value_heads: int
    value_dim: int

    def __post_init__(self) -> None:
        for name in ("n_key_heads", "key_dim", "n_value_heads", "value_dim"):
            check_positive_int(f"RecurrentHeads.{name}", getattr(self, name))


@dataclass(frozen=True, kw_only=True)
class SSMConfig:
    """The dimensions of a state-space (Mamba, Mamba-2) layer: ``d_inner`` channels (Mamba-2:
    heads × head dim) of ``d_state`` numbers each; Mamba-2's B and C come in ``n_groups`` groups
    of ``d_state`` and pass through the short convolution with x."""

    d_inner: int
    d_state: int
    n_groups: int = 1

    def __post_init__(self) -> None:
        for name in ("d_inner", "d_state", "n_groups"):
            check_positive_int(f"SSMConfig.{name}", getattr(self, name))


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """A model: which kind each layer is, the sizes every kind reads, and its size and sources.

    - ``layer_pattern``: one kind per layer, from :data:`attnlab.kinds.KINDS`.
    - ``n_heads``, ``head_dim``: heads of the ``"attn"`` layers and, unless ``recurrent`` says
      otherwise, of the recurrent layers (one ``head_dim × head_dim`` state per head).
    - ``n_kv_heads``: key/value heads of ``"attn"`` layers (GQA); None means ``n_heads`` (MHA).
    - ``conv_size``: width w of the short causal convolutions (recurrent and Mamba layers).
    - ``attn_conv``: the ``"attn"`` layers read q, k, v through such a convolution too
      (Lesson 17's recall toy, which has no positions); such a model runs full passes only.
    - ``norm_eps``: eps of the recurrent layers' per-head output RMSNorm (FLA's ``norm_eps``).
    - ``mla``, ``recurrent``, ``ssm``: the dimensions of the MLA layers (required when the
      pattern has one), of the recurrent layers when their heads differ from ``n_heads ×
      head_dim`` (:attr:`recurrent_heads`), and of the Mamba layers (required for them).
    - ``sliding_window``: the W tokens a ``"swa"`` layer attends to and caches, and
      ``attention_chunk_size`` the C tokens of a ``"chunked"`` layer's chunks (each required
      when the pattern has such a layer); their heads are the ``"attn"`` layers' heads.
    - ``mlp_hidden``: hidden width of the SwiGLU MLP of every block; ``vocab_size``.
    - ``rope``: rotary positions in the ``"attn"`` layers; ``tie_embeddings``: the LM head
      reuses the token embedding matrix.
    - ``params_total`` / ``params_active``: parameters stored / used per token (published
      models; a mixture of experts uses ``experts_per_token`` of ``n_experts`` routed experts per
      MoE layer), None for the course's models; ``weight_dtype``: the dtype the weights were
      released in.
    - ``source``: where the numbers come from; ``bib``: their ``references.bib`` keys;
      ``notes``: choices, caveats, and which reading of an ambiguous field was taken.
    """

    name: str
    vocab_size: int
    d_model: int
    layer_pattern: tuple[str, ...]
    n_heads: int
    head_dim: int
    n_kv_heads: int | None = None
    conv_size: int = 4
    attn_conv: bool = False
    norm_eps: float = 1e-5
    mla: MLAConfig | None = None
    recurrent: RecurrentHeads | None = None
    ssm: SSMConfig | None = None
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    mlp_hidden: int
    rope: bool = True
    tie_embeddings: bool = False
    params_total: int | None = None
    params_active: int | None = None
    n_experts: int | None = None
    experts_per_token: int | None = None
    weight_dtype: str = "bf16"
    source: str = ""
    bib: tuple[str, ...] = ()
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
        _check_field_bool("ModelConfig.attn_conv", self.attn_conv)
        check_number("ModelConfig.norm_eps", self.norm_eps)
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
            check_choice(f"ModelConfig.layer_pattern[{i}]", kind, KINDS)
        object.__setattr__(self, "layer_pattern", tuple(pattern))
        n_kv = self.n_heads if self.n_kv_heads is None else self.n_kv_heads
        check_positive_int("ModelConfig.n_kv_heads", n_kv)
        if self.n_heads % n_kv:
            raise ValueError(
                f"ModelConfig.n_kv_heads: expected a divisor of n_heads={self.n_heads}, got {n_kv}"
            )
        object.__setattr__(self, "n_kv_heads", n_kv)
        for name in ("sliding_window", "attention_chunk_size"):
            if getattr(self, name) is not None:
                check_positive_int(f"ModelConfig.{name}", getattr(self, name))
        for field, kind in (
            ("mla", MLAConfig),
            ("recurrent", RecurrentHeads),
            ("ssm", SSMConfig),
        ):
            value = getattr(self, field)
            if value is not None and not isinstance(value, kind):
                raise ValueError(
                    f"ModelConfig.{field}: expected {kind.__name__} or None, "
                    f"got {value!r}"
                )
        for kind in dict.fromkeys(self.layer_pattern):
            needs = KINDS[kind].needs
            if needs is not None and getattr(self, needs) is None:
                raise ValueError(
                    f"ModelConfig.{needs}: the layer pattern has {kind!r} layers, so "
                    f"{needs} is required, got None"
                )
        self._check_size()

    def _check_size(self) -> None:
        total, active = self.params_total, self.params_active
        if total is None:
            if active is not None or self.n_experts is not None:
                raise ValueError(
                    "ModelConfig.params_total: expected the total parameter count when "
                    "params_active or n_experts is given, got None"
                )
        else:
            check_positive_int("ModelConfig.params_total", total)
            active = total if active is None else active
            check_positive_int("ModelConfig.params_active", active)
            if active > total:
                raise ValueError(
                    f"ModelConfig.params_active: expected at most params_total={total}, "
                    f"got {active}"
                )
            object.__setattr__(self, "params_active", active)
        experts, per_token = self.n_experts, self.experts_per_token
        if (experts is None) != (per_token is None):
            raise ValueError(
                "ModelConfig.n_experts: give both n_experts and experts_per_token "
                f"or neither, got {experts} and {per_token}"
            )
        if experts is not None:
            check_positive_int("ModelConfig.n_experts", experts)
            check_positive_int("ModelConfig.experts_per_token", per_token)
            if per_token > experts:
                raise ValueError(
                    f"ModelConfig.experts_per_token: expected at most n_experts={experts}, "
                    f"got {per_token}"
                )

    @property
    def n_layers(self) -> int:
        """Number of layers."""
        return len(self.layer_pattern)

    def count(self, kind: str) -> int:
        """Number of layers of ``kind``."""
        check_choice("kind", kind, KINDS)
        return self.layer_pattern.count(kind)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The layer kinds present, in order of first appearance."""
        return tuple(dict.fromkeys(self.layer_pattern))

    @property
    def layout(self) -> str:
        """Layer counts by kind, e.g. ``"20 kda + 7 mla"`` (blocks without a mixer left out)."""
        return " + ".join(
            f"{self.count(k)} {k}" for k in self.kinds if k != "mlp"
        )

    @property
    def recurrent_heads(self) -> RecurrentHeads:
        """The recurrent layers' heads: ``recurrent``, or ``n_heads`` heads of ``head_dim`` for
        keys and values alike."""
        if self.recurrent is not None:
            return self.recurrent
        h, d = self.n_heads, self.head_dim
        return RecurrentHeads(
            n_key_heads=h, key_dim=d, n_value_heads=h, value_dim=d
        )


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


# ---------------------------------------------------------------- the course's models

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


# ---------------------------------------------------------------- the reader

_ATTENTION_TYPES = (
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "gemma",
    "gemma2",
    "gemma3_text",
    "llama4_text",
)
_QWEN_TYPES = ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe")
_MODEL_TYPES = (
    *_ATTENTION_TYPES,
    "gemma3",
    "llama4",
    "deepseek_v2",
    "deepseek_v3",
    "kimi_linear",
    "qwen3_next",
    "minimax",
    "minimax_text_01",
    "minimax_m1",
    "jamba",
    "nemotron_h",
    "mamba2",
)
"""The ``model_type`` values :func:`architecture_from_config` reads (a config without one is
read as a dense attention model, like Llama's)."""

_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma": {"tie_word_embeddings": True},
    "gemma2": {"tie_word_embeddings": True},
    "gemma3_text": {
        "tie_word_embeddings": True,
        "vocab_size": 262_208,
        "sliding_window_pattern": 6,
    },
    "llama4_text": {"no_rope_layer_interval": 4},
}
"""Fields a released config may leave out because transformers' config class fills them in
(``Gemma3TextConfig``: vocab_size 262208, one global layer in ``sliding_window_pattern`` = 6;
Gemma ties its embeddings; ``Llama4TextConfig``: a NoPE global layer every
``no_rope_layer_interval`` = 4): the class defaults, not guesses."""

_NESTED = {"gemma3": "gemma3_text", "llama4": "llama4_text"}
"""Multimodal model types whose language model's fields nest in ``text_config``."""

_LAYER_WORDS = {
    "full_attention": "attn",
    "sliding_attention": "swa",
    "chunked_attention": "chunked",
}
"""``layer_types`` words of the attention models (transformers' names) and their kinds."""

_NEMOTRON_CHARS = {"M": "mamba2", "*": "attn", "-": "mlp", "E": "mlp"}
"""Nemotron-H's ``hybrid_override_pattern``: Mamba-2, attention, MLP, MoE-MLP blocks."""

_REQUIRED = object()


class _Fields:
    """The fields of one ``config.json`` dict (or a dict inside one), each read with its type
    and range checked. A refusal names the field as the caller wrote it, e.g.
    ``config['linear_attn_config']['num_heads']``, with what was expected and what came:
    ``TypeError`` for a wrong type (a bool, float, string or list where an integer belongs),
    ``ValueError`` for a wrong value or a missing field."""

    def __init__(
        self, config: object, where: str, model_type: object = None
    ) -> None:
        if not isinstance(config, dict):
            raise TypeError(
                f"{where}: expected a dict of config.json fields, "
                f"got {type(config).__name__}"
            )
        self.config, self.where, self.model_type = config, where, model_type
        self.defaults = _DEFAULTS.get(model_type, {})

    def name(self, key: str) -> str:
        """How a refusal names the field: ``config['key']``."""
        return f"{self.where}[{key!r}]"

    def given(self, key: str) -> bool:
        """Whether the field is there and not ``null``."""
        return self.config.get(key) is not None

    def value(self, key: str, default: Any = _REQUIRED) -> Any:
        """The field (a JSON ``null`` counts as absent), else the model type's class default
        (:data:`_DEFAULTS`), else ``default``; a required field missing is refused."""
        if self.given(key):
            return self.config[key]
        default = self.defaults.get(key, default)
        if default is _REQUIRED:
            raise ValueError(
                f"{self.where}: expected a field {key!r} "
                f"(model_type {self.model_type!r}), found none"
            )
        return default

    def integer(
        self, key: str, *, low: int = 1, default: Any = _REQUIRED
    ) -> Any:
        """The field as an integer >= ``low`` (``default`` if absent)."""
        value = self.value(key, default)
        if value is None or (not self.given(key) and value is default):
            return value
        return _integer(self.name(key), value, low)

    def integer_of(self, keys: tuple[str, ...], *, low: int = 1) -> int:
        """One integer that configs spell several ways (the original remote-code name and
        transformers' name); both given must agree."""
        found = {k: self.integer(k, low=low) for k in keys if self.given(k)}
        if not found:
            raise ValueError(
                f"{self.where}: expected a field "
                f"{' or '.join(map(repr, keys))} "
                f"(model_type {self.model_type!r}), found none"
            )
        if len(set(found.values())) > 1:
            raise ValueError(
                f"{', '.join(map(self.name, found))}: expected one value, "
                f"got {', '.join(map(str, found.values()))}"
            )
        return next(iter(found.values()))

    def flag(self, key: str, default: bool) -> bool:
        """The field as true or false (``default`` if absent)."""
        value = self.value(key, default)
        if not isinstance(value, bool):
            raise TypeError(
                f"{self.name(key)}: expected true or false, got {value!r}"
            )
        return value

    def items(self, key: str) -> list:
        """The field as a list (a JSON array)."""
        value = self.value(key)
        if not isinstance(value, list | tuple):
            raise TypeError(
                f"{self.name(key)}: expected a list, got {value!r}"
            )
        return list(value)

    def string(self, key: str) -> str:
        """The field as a string."""
        value = self.value(key)
        if not isinstance(value, str):
            raise TypeError(
                f"{self.name(key)}: expected a string, got {value!r}"
            )
        return value

    def sub(self, key: str) -> _Fields:
        """The fields of a dict nested in this one."""
        return _Fields(self.value(key), self.name(key), self.model_type)


def _integer(name: str, value: object, low: int) -> int:
    """``value`` if it is an integer >= ``low``: bools, floats (NaN and inf too) and strings
    are refused, as are values below ``low``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{name}: expected an integer >= {low}, got {value!r} "
            f"({type(value).__name__})"
        )
    if value < low:
        raise ValueError(f"{name}: expected an integer >= {low}, got {value}")
    return value


def _layer_indices(f: _Fields, key: str, n: int, *, first: int) -> list[int]:
    """A list of distinct layer numbers in [first, first + n - 1] (``first`` 1 or 0)."""
    items = f.items(key)
    for i, item in enumerate(items):
        _integer(f"{f.name(key)}[{i}]", item, first)
        if item > n - 1 + first:
            raise ValueError(
                f"{f.name(key)}[{i}]: expected a layer number in "
                f"[{first}, {n - 1 + first}] (num_hidden_layers={n}), got {item}"
            )
    if len(set(items)) != len(items):
        raise ValueError(
            f"{f.name(key)}: expected distinct layer numbers, got {items}"
        )
    return items


def _words(
    f: _Fields, key: str, n: int, kinds: dict[str, str]
) -> tuple[str, ...]:
    """The layer kinds of a list of ``n`` words (e.g. ``layer_types``), every word known."""
    words = f.items(key)
    if len(words) != n:
        raise ValueError(
            f"{f.name(key)}: expected num_hidden_layers={n} entries, "
            f"got {len(words)}"
        )
    for i, word in enumerate(words):
        if not isinstance(word, str) or word not in kinds:
            raise ValueError(
                f"{f.name(key)}[{i}]: expected one of {list(kinds)}, got {word!r}"
            )
    return tuple(kinds[word] for word in words)


def _head_dim(f: _Fields, heads: int, *keys: str) -> int:
    """``head_dim`` (or the type's own key) if given, else hidden_size / heads exactly."""
    for key in (*keys, "head_dim"):
        if f.given(key):
            return f.integer(key)
    hidden = f.integer("hidden_size")
    if hidden % heads:
        raise ValueError(
            f"{f.name('hidden_size')}: without a head_dim field, expected a "
            f"multiple of num_attention_heads={heads}, got {hidden}"
        )
    return hidden // heads


def _attention(f: _Fields, *head_dim_keys: str) -> dict[str, Any]:
    """The softmax-attention heads: n_heads, head_dim and the key/value heads of GQA (a
    config without ``num_key_value_heads`` has one per query head, as transformers reads it)."""
    heads = f.integer("num_attention_heads")
    kv = f.integer("num_key_value_heads", default=heads)
    if heads % kv:
        raise ValueError(
            f"{f.name('num_key_value_heads')}: expected a divisor of "
            f"num_attention_heads={heads}, got {kv}"
        )
    return {
        "n_heads": heads,
        "head_dim": _head_dim(f, heads, *head_dim_keys),
        "n_kv_heads": kv,
    }


def _local_global(f: _Fields, n: int, kind: str) -> dict[str, Any]:
    """Which attention layers are sliding-window (``"swa"``) and the window W.

    ``layer_types`` when given; else Mistral and Mixtral slide in every layer if
    ``sliding_window`` is set; Qwen2/3 only with ``use_sliding_window``, in layers from
    ``max_window_layers`` on; Gemma-2 alternates, local first; Gemma-3 has one global layer
    in ``sliding_window_pattern`` (transformers' rules).
    """
    window = f.integer("sliding_window", default=None)
    if kind in _QWEN_TYPES:
        if not f.flag("use_sliding_window", False):
            window = None
        first_sliding = (
            n if window is None else f.integer("max_window_layers", low=0)
        )
    if f.given("layer_types"):
        pattern = _words(f, "layer_types", n, _LAYER_WORDS)
    elif kind in ("mistral", "mixtral"):
        pattern = ("attn" if window is None else "swa",) * n
    elif kind in _QWEN_TYPES:
        pattern = tuple(
            "swa" if window is not None and i >= first_sliding else "attn"
            for i in range(n)
        )
    elif kind == "gemma2":
        pattern = tuple("swa" if (i + 1) % 2 else "attn" for i in range(n))
    elif kind == "gemma3_text":
        every = f.integer("sliding_window_pattern")
        pattern = tuple(
            "swa" if (i + 1) % every else "attn" for i in range(n)
        )
    elif kind == "llama4_text":
        pattern = _llama4_layers(f, n)
    elif kind is None and window is not None:
        raise ValueError(
            f"{f.name('sliding_window')}: a config without a model_type is read "
            f"as Llama's, which has no sliding window, got {window}; give its "
            "model_type (or layer_types)"
        )
    else:
        pattern = ("attn",) * n
    found = {"layer_pattern": pattern}
    if "chunked" in pattern:
        found["attention_chunk_size"] = f.integer("attention_chunk_size")
    if "swa" not in pattern:
        return found
    if window is None:
        raise ValueError(
            f"{f.name('sliding_window')}: the config has sliding-window layers, "
            "so expected a window (an integer >= 1), found none"
            + (
                " (use_sliding_window is false)"
                if kind in _QWEN_TYPES
                else ""
            )
        )
    return {**found, "sliding_window": window}


def _llama4_layers(f: _Fields, n: int) -> tuple[str, ...]:
    """Llama 4: the layers with RoPE (``no_rope_layers`` entry 1) attend within chunks, the
    NoPE ones (0) to everything; an empty or absent list means one NoPE layer every
    ``no_rope_layer_interval``."""
    flags = f.items("no_rope_layers") if f.given("no_rope_layers") else []
    if not flags:
        every = f.integer("no_rope_layer_interval")
        flags = [int((i + 1) % every != 0) for i in range(n)]
    if len(flags) != n:
        raise ValueError(
            f"{f.name('no_rope_layers')}: expected num_hidden_layers={n} "
            f"entries, got {len(flags)}"
        )
    for i, flag in enumerate(flags):
        if (
            isinstance(flag, bool)
            or flag not in (0, 1)
            or not isinstance(flag, int)
        ):
            raise ValueError(
                f"{f.name('no_rope_layers')}[{i}]: expected 0 (NoPE, global) or "
                f"1 (RoPE, chunked), got {flag!r}"
            )
    return tuple("chunked" if flag else "attn" for flag in flags)


def _mla(f: _Fields) -> MLAConfig:
    return MLAConfig(
        n_heads=f.integer("num_attention_heads"),
        qk_nope_head_dim=f.integer("qk_nope_head_dim"),
        qk_rope_head_dim=f.integer("qk_rope_head_dim"),
        v_head_dim=f.integer("v_head_dim"),
        kv_lora_rank=f.integer("kv_lora_rank"),
        q_lora_rank=f.integer("q_lora_rank", default=None),
        rope=not f.flag("mla_use_nope", False),
    )


def _kimi(f: _Fields, n: int) -> dict[str, Any]:
    linear = f.sub("linear_attn_config")
    full = _layer_indices(linear, "full_attn_layers", n, first=1)
    if linear.given("kda_layers"):
        kda = _layer_indices(linear, "kda_layers", n, first=1)
        if sorted(full + kda) != list(range(1, n + 1)):
            raise ValueError(
                f"{linear.name('kda_layers')}, {linear.name('full_attn_layers')}: "
                f"expected each of the layers 1..{n} (num_hidden_layers={n}) in "
                "exactly one list, got "
                f"{sorted(kda)} and {sorted(full)}"
            )
    return {
        "layer_pattern": pattern_from_full_attn_layers(n, tuple(full)),
        "n_heads": linear.integer("num_heads"),
        "head_dim": linear.integer("head_dim"),
        "conv_size": linear.integer("short_conv_kernel_size"),
        "mla": _mla(f),
    }


def _qwen3_next(f: _Fields, n: int) -> dict[str, Any]:
    if f.given("layer_types"):
        pattern = _words(
            f,
            "layer_types",
            n,
            {"full_attention": "attn", "linear_attention": "gdn"},
        )
    else:
        every = f.integer("full_attention_interval")
        pattern = tuple(
            "attn" if (i + 1) % every == 0 else "gdn" for i in range(n)
        )
    return {
        "layer_pattern": pattern,
        **_attention(f),
        "conv_size": f.integer("linear_conv_kernel_dim"),
        "recurrent": RecurrentHeads(
            n_key_heads=f.integer("linear_num_key_heads"),
            key_dim=f.integer("linear_key_head_dim"),
            n_value_heads=f.integer("linear_num_value_heads"),
            value_dim=f.integer("linear_value_head_dim"),
        ),
    }


def _minimax(f: _Fields, n: int) -> dict[str, Any]:
    types = f.items("attn_type_list")
    if len(types) != n:
        raise ValueError(
            f"{f.name('attn_type_list')}: expected num_hidden_layers={n} "
            f"entries, got {len(types)}"
        )
    for i, t in enumerate(types):
        if isinstance(t, bool) or t not in (0, 1) or not isinstance(t, int):
            raise ValueError(
                f"{f.name('attn_type_list')}[{i}]: expected 0 (lightning) or "
                f"1 (softmax), got {t!r}"
            )
    return {
        "layer_pattern": tuple("attn" if t else "lightning" for t in types),
        **_attention(f),
    }


def _jamba(f: _Fields, n: int) -> dict[str, Any]:
    period = f.integer("attn_layer_period")
    offset = f.integer("attn_layer_offset", low=0)
    if offset >= period:
        raise ValueError(
            f"{f.name('attn_layer_offset')}: expected less than "
            f"attn_layer_period={period}, got {offset}"
        )
    return {
        "layer_pattern": tuple(
            "attn" if i % period == offset else "mamba" for i in range(n)
        ),
        **_attention(f),
        "conv_size": f.integer("mamba_d_conv"),
        "ssm": SSMConfig(
            d_inner=f.integer("mamba_expand") * f.integer("hidden_size"),
            d_state=f.integer("mamba_d_state"),
        ),
    }


def _mamba2_heads(
    f: _Fields, heads: str, head_dim: str, groups: tuple[str, ...]
) -> tuple[int, int]:
    """d_inner = heads · head_dim and the groups of B and C, which divide the heads (the
    fields named ``heads``, ``head_dim`` and one of ``groups``)."""
    n_heads, n_groups = f.integer(heads), f.integer_of(groups)
    if n_heads % n_groups:
        raise ValueError(
            f"{' or '.join(map(f.name, groups))}: expected a divisor of "
            f"{heads}={n_heads}, got {n_groups}"
        )
    return n_heads * f.integer(head_dim), n_groups


def _nemotron_h(f: _Fields, n: int) -> dict[str, Any]:
    chars = f.string("hybrid_override_pattern")
    for i, c in enumerate(chars):
        if c not in _NEMOTRON_CHARS:
            raise ValueError(
                f"{f.name('hybrid_override_pattern')}[{i}]: expected one of "
                f"{list(_NEMOTRON_CHARS)}, got {c!r}"
            )
    d_inner, n_groups = _mamba2_heads(
        f, "mamba_num_heads", "mamba_head_dim", ("n_groups", "mamba_n_groups")
    )
    return {
        "layer_pattern": tuple(_NEMOTRON_CHARS[c] for c in chars),
        **_attention(f, "attention_head_dim"),
        "conv_size": f.integer_of(("conv_kernel", "mamba_d_conv")),
        "ssm": SSMConfig(
            d_inner=d_inner,
            d_state=f.integer_of(("ssm_state_size", "mamba_d_state")),
            n_groups=n_groups,
        ),
    }


def _mamba2(f: _Fields, n: int) -> dict[str, Any]:
    d_inner, n_groups = _mamba2_heads(
        f, "num_heads", "head_dim", ("n_groups",)
    )
    if (
        f.given("expand")
        and f.integer("expand") * f.integer("hidden_size") != d_inner
    ):
        raise ValueError(
            f"{f.name('expand')}: expected expand · hidden_size = num_heads · "
            f"head_dim = {d_inner}, got {f.integer('expand')} · "
            f"{f.integer('hidden_size')}"
        )
    return {
        "layer_pattern": ("mamba2",) * n,
        "n_heads": f.integer("num_heads"),
        "head_dim": f.integer("head_dim"),
        "conv_size": f.integer("conv_kernel"),
        "ssm": SSMConfig(
            d_inner=d_inner,
            d_state=f.integer("state_size"),
            n_groups=n_groups,
        ),
        "mlp_hidden": f.integer("intermediate_size", default=d_inner),
    }


def _layers(f: _Fields, n: int) -> dict[str, Any]:
    """The layer pattern and the dimensions its kinds read, by ``model_type``."""
    kind = f.model_type
    if kind == "llama4_text":  # intermediate_size is the experts' width
        dense = {"mlp_hidden": f.integer("intermediate_size_mlp")}
        return {**_local_global(f, n, kind), **_attention(f), **dense}
    if kind in _ATTENTION_TYPES or kind is None:
        return {**_local_global(f, n, kind), **_attention(f)}
    if kind in ("deepseek_v2", "deepseek_v3"):
        # n_heads × head_dim: the multi-head baseline (DeepSeek-V2 Table 1), d_h = qk_nope_head_dim
        return {
            "layer_pattern": ("mla",) * n,
            "n_heads": f.integer("num_attention_heads"),
            "head_dim": f.integer("qk_nope_head_dim"),
            "mla": _mla(f),
        }
    readers = {
        "kimi_linear": _kimi,
        "qwen3_next": _qwen3_next,
        "minimax": _minimax,
        "minimax_text_01": _minimax,
        "minimax_m1": _minimax,
        "jamba": _jamba,
        "nemotron_h": _nemotron_h,
        "mamba2": _mamba2,
    }
    return readers[kind](f, n)


def _experts(f: _Fields) -> tuple[int | None, int | None]:
    """The routed experts and how many each token uses, from whichever field the model type
    names them by (``n_routed_experts``/``num_experts``/``num_local_experts`` and
    ``num_experts_per_tok``/``num_experts_per_token``); (None, None) for a dense model."""
    counts = ("n_routed_experts", "num_experts", "num_local_experts")
    per_tokens = ("num_experts_per_tok", "num_experts_per_token")
    if not any(f.given(k) for k in counts):
        return None, None
    experts, per_token = f.integer_of(counts), f.integer_of(per_tokens)
    if per_token > experts:
        raise ValueError(
            f"{' or '.join(map(f.name, filter(f.given, per_tokens)))}: expected "
            f"at most the experts ({' or '.join(filter(f.given, counts))} = "
            f"{experts}), got {per_token}"
        )
    return experts, per_token


def _text_fields(config: object) -> _Fields:
    """The fields that describe the language model: the config itself, or the nested
    ``text_config`` of Gemma-3 and Llama 4 (:data:`_NESTED`)."""
    top = _Fields(config, "config")
    kind = top.value("model_type", None)
    if kind is not None and (
        not isinstance(kind, str) or kind not in _MODEL_TYPES
    ):
        raise ValueError(
            f"config['model_type']: model_type {kind!r} is not one the calculator "
            f"reads; expected one of {', '.join(_MODEL_TYPES)}"
        )
    if kind not in _NESTED:
        return _Fields(config, "config", kind)
    text, inner = top.sub("text_config"), _NESTED[kind]
    if text.value("model_type", inner) != inner:
        raise ValueError(
            f"{text.name('model_type')}: expected {inner!r}, "
            f"got {text.value('model_type')!r}"
        )
    return _Fields(text.config, text.where, inner)


_COUNTED_TYPES = tuple(t for t in _ATTENTION_TYPES if t != "llama4_text")
"""The model types whose weights :func:`parameters_from_config` counts from the config."""


def _moe_layers(f: _Fields, n: int) -> set[int]:
    """The layers (0-based) that route tokens to experts: every layer of Mixtral; in Qwen's
    MoE models every ``decoder_sparse_step``-th layer not in ``mlp_only_layers``."""
    if f.model_type == "mixtral":
        return set(range(n))
    if f.model_type not in ("qwen2_moe", "qwen3_moe"):
        return set()
    step = f.integer("decoder_sparse_step", default=1)
    dense = (
        _layer_indices(f, "mlp_only_layers", n, first=0)
        if f.given("mlp_only_layers")
        else []
    )
    return {i for i in range(n) if (i + 1) % step == 0 and i not in dense}


def parameters_from_config(config: dict[str, Any]) -> tuple[int, int]:
    """Parameters (stored, used per token) of a decoder whose every weight its config sizes:
    the model types of :data:`_COUNTED_TYPES` (Llama, Mistral, Mixtral, Qwen2/3 and their MoE,
    Gemma 1-3 text models).

    Per layer: attention W_q, W_k, W_v, W_o (d · h·d_h, 2 · d · h_kv·d_h, h·d_h · d; Qwen2's
    q, k, v biases; Qwen3's and Gemma-3's q/k norms, d_h each), its norms (2 a layer, 4 in
    Gemma-2/3, d each), and a SwiGLU/GeGLU MLP 3 · d · d_ff, or in a MoE layer a router
    d · E and E experts of 3 · d · d_moe (Qwen2-MoE adds a shared expert 3 · d · d_shared and
    its gate d), of which a token uses k. Plus the embedding V · d, the LM head V · d unless
    tied, and the final norm d. Llama-3-8B: 8,030,261,248; Mixtral-8x7B: 46,702,792,704 of
    which 12,879,925,248 per token.
    """
    f = _text_fields(config)
    if config.get("model_type") in _NESTED:
        raise ValueError(
            f"config['model_type']: a {config['model_type']!r} checkpoint holds a "
            "vision tower too, whose weights its config does not size; expected a "
            "text model's config (give params_total for this one)"
        )
    if f.model_type not in (*_COUNTED_TYPES, None):
        raise ValueError(
            f"config['model_type']: the weights of a {f.model_type!r} model are not "
            f"counted from its config; expected one of {', '.join(_COUNTED_TYPES)} "
            "(or give params_total)"
        )
    n, d = f.integer("num_hidden_layers"), f.integer("hidden_size")
    heads = _attention(f)
    q = heads["n_heads"] * heads["head_dim"]
    kv = heads["n_kv_heads"] * heads["head_dim"]
    attention = 2 * d * q + 2 * d * kv
    if f.model_type in ("qwen2", "qwen2_moe") or f.flag(
        "attention_bias", False
    ):
        attention += q + 2 * kv
    if f.model_type in ("qwen3", "qwen3_moe", "gemma3_text"):
        attention += 2 * heads["head_dim"]  # q and k RMSNorm
    norms = (4 if f.model_type in ("gemma2", "gemma3_text") else 2) * d
    total = active = 0
    moe = _moe_layers(f, n)
    for i in range(n):
        if i in moe:
            experts, per_token = _experts(f)
            if experts is None:
                raise ValueError(
                    f"{f.where}: a {f.model_type!r} model routes tokens to experts, "
                    "expected a field 'n_routed_experts' or 'num_experts' or "
                    "'num_local_experts', found none"
                )
            width = (
                f.integer("intermediate_size")
                if f.model_type == "mixtral"
                else f.integer("moe_intermediate_size")
            )
            expert = 3 * d * width
            shared = d * experts  # the router
            if f.model_type == "qwen2_moe":
                shared += (
                    3 * d * f.integer("shared_expert_intermediate_size") + d
                )
            total += attention + norms + shared + experts * expert
            active += attention + norms + shared + per_token * expert
        else:
            mlp = 3 * d * f.integer("intermediate_size")
            total += attention + norms + mlp
            active += attention + norms + mlp
    embeddings = f.integer("vocab_size") * d
    if not f.flag("tie_word_embeddings", False):
        embeddings *= 2
    return total + embeddings + d, active + embeddings + d


def architecture_from_config(
    config: dict[str, Any],
    *,
    params_total: int | None = None,
    params_active: int | None = None,
    name: str | None = None,
    n_experts: int | None = None,
    experts_per_token: int | None = None,
    weight_dtype: str = "bf16",
    source: str = "",
    bib: tuple[str, ...] = (),
    notes: str = "",
) -> ModelConfig:
    """A :class:`ModelConfig` from the fields of a Hugging Face ``config.json`` (a ``dict``).

    The layer pattern and dimensions come from the fields each ``model_type`` uses: the
    attention models' ``layer_types`` or their sliding-window fields (Mistral's
    ``sliding_window``, Qwen's ``use_sliding_window``/``max_window_layers``, Gemma-2's
    alternation, Gemma-3's ``sliding_window_pattern``, Llama 4's chunked layers by
    ``no_rope_layers`` and ``attention_chunk_size``; Gemma-3's and Llama 4's fields nest in
    ``text_config``), Kimi's ``linear_attn_config``, Qwen3-Next's ``layer_types`` or
    ``full_attention_interval`` and ``linear_*`` heads, MiniMax's ``attn_type_list``, Jamba's
    ``attn_layer_period``/``attn_layer_offset``, Nemotron-H's ``hybrid_override_pattern``,
    Mamba-2's heads; ``d_model``, ``vocab_size`` and ``mlp_hidden`` from ``hidden_size``,
    ``vocab_size`` and the dense ``intermediate_size`` (a Mamba-2 model, which has no MLP,
    gets its inner width d_inner). Positions are read only where they change what is cached
    (MLA's ``mla_use_nope``): ``rope`` keeps its default.

    Every field read is checked: its type (an integer is not a bool, a float, NaN or a
    string), its range (sizes >= 1) and the rules between fields (key/value heads divide the
    heads; layer numbers within ``num_hidden_layers``; every layer-type word known; Jamba's
    offset below its period; MiniMax's types 0 or 1). A refusal is a ``TypeError`` or
    ``ValueError`` naming the field, what was expected and what came; nothing is guessed.
    Fields a released config may omit take transformers' class defaults (:data:`_DEFAULTS`).

    The parameter counts: ``params_total`` (and ``params_active`` for a mixture of experts; it
    defaults to the total) as given, or, when ``params_total`` is None, counted from the
    config by :func:`parameters_from_config` for the model types whose weights it sizes
    (the others must give them). ``n_experts`` and ``experts_per_token`` default to the
    config's ``n_routed_experts``/``num_experts``/``num_local_experts`` and
    ``num_experts_per_tok`` (``num_experts_per_token`` in Kimi's configs).
    """
    f = _text_fields(config)
    n = f.integer("num_hidden_layers")
    layers = _layers(f, n)
    if len(layers["layer_pattern"]) != n:
        field = (
            "hybrid_override_pattern"
            if f.model_type == "nemotron_h"
            else "layer pattern"
        )
        raise ValueError(
            f"config: the {field} gives {len(layers['layer_pattern'])} layers, "
            f"num_hidden_layers says {n}"
        )
    if n_experts is None:
        n_experts, experts_per_token = _experts(f)
    if params_total is None:
        if params_active is not None:
            raise ValueError(
                "params_active: expected it with params_total, or neither (both "
                f"counted from the config), got params_active={params_active!r} alone"
            )
        params_total, params_active = parameters_from_config(config)
    if name is None:
        top = _Fields(config, "config")
        given = top.given("_name_or_path") and top.string("_name_or_path")
        name = given or str(f.model_type)
    return ModelConfig(
        name=name,
        vocab_size=f.integer("vocab_size"),
        d_model=f.integer("hidden_size"),
        mlp_hidden=layers.pop("mlp_hidden", None)
        or f.integer("intermediate_size"),
        tie_embeddings=f.flag("tie_word_embeddings", False),
        **layers,
        params_total=params_total,
        params_active=params_active,
        n_experts=n_experts,
        experts_per_token=experts_per_token,
        weight_dtype=weight_dtype,
        source=source,
        bib=bib,
        notes=notes,
    )


# ---------------------------------------------------------------- published configs
# The fields the reader uses, copied from each model's released config.json.

LLAMA3_8B_CONFIG = {  # meta-llama/Meta-Llama-3-8B, config.json [llama3_8b_config]
    "model_type": "llama",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
}
DEEPSEEK_V3_CONFIG = {  # deepseek-ai/DeepSeek-V3, config.json [deepseekv3_config]
    "model_type": "deepseek_v3",
    "num_hidden_layers": 61,
    "hidden_size": 7168,
    "num_attention_heads": 128,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "intermediate_size": 18432,
    "vocab_size": 129280,
    "n_routed_experts": 256,
    "num_experts_per_tok": 8,
}
KIMI_LINEAR_CONFIG = {  # moonshotai/Kimi-Linear-48B-A3B-Instruct, config.json [kimi_linear_config]
    "model_type": "kimi_linear",
    "num_hidden_layers": 27,
    "hidden_size": 2304,
    "num_attention_heads": 32,
    "kv_lora_rank": 512,
    "q_lora_rank": None,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "mla_use_nope": True,
    "intermediate_size": 9216,
    "vocab_size": 163840,
    "num_experts": 256,
    "num_experts_per_token": 8,
    "linear_attn_config": {
        "full_attn_layers": [4, 8, 12, 16, 20, 24, 27],
        "kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19]
        + [21, 22, 23, 25, 26],
        "num_heads": 32,
        "head_dim": 128,
        "short_conv_kernel_size": 4,
    },
}
QWEN3_NEXT_CONFIG = {  # Qwen/Qwen3-Next-80B-A3B-Instruct, config.json [qwen3next_config]
    "model_type": "qwen3_next",
    "num_hidden_layers": 48,
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "full_attention_interval": 4,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "intermediate_size": 5120,
    "vocab_size": 151936,
    "num_experts": 512,
    "num_experts_per_tok": 10,
}
MINIMAX_TEXT_01_CONFIG = {  # MiniMaxAI/MiniMax-Text-01, config.json [minimax_config]
    "model_type": "minimax_text_01",
    "num_hidden_layers": 80,
    "hidden_size": 6144,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "attn_type_list": [0, 0, 0, 0, 0, 0, 0, 1] * 10,
    "intermediate_size": 9216,
    "vocab_size": 200064,
    "num_local_experts": 32,
    "num_experts_per_tok": 2,
}
JAMBA_15_MINI_CONFIG = {  # ai21labs/AI21-Jamba-1.5-Mini, config.json [jamba15_config]
    "model_type": "jamba",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "attn_layer_period": 8,
    "attn_layer_offset": 4,
    "mamba_d_state": 16,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "intermediate_size": 14336,
    "vocab_size": 65536,
    "num_experts": 16,
    "num_experts_per_tok": 2,
}
NEMOTRON_H_8B_CONFIG = {  # nvidia/Nemotron-H-8B-Base-8K, config.json [nemotronh_config]
    "model_type": "nemotron_h",
    "num_hidden_layers": 52,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "attention_head_dim": 128,
    "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
    "mamba_num_heads": 128,
    "mamba_head_dim": 64,
    "ssm_state_size": 128,
    "n_groups": 8,
    "conv_kernel": 4,
    "intermediate_size": 21504,
    "vocab_size": 131072,
}

# ---------------------------------------------------------------- published models

LLAMA3_8B = architecture_from_config(
    LLAMA3_8B_CONFIG,
    name="Llama-3-8B",
    params_total=8_030_000_000,
    source="config.json of meta-llama/Meta-Llama-3-8B; the Meta Llama 3 model card.",
    bib=("llama3_8b_config", "grattafiori2024llama3"),
    notes="Grouped-query attention in all 32 layers: 8 KV heads of 128 shared by 32 query "
    "heads (head_dim 4096 / 32). 8.03B parameters (model card: 8B).",
)
"""Llama 3 8B: standard GQA attention in every layer, the usual KV-cache baseline."""

DEEPSEEK_V3 = architecture_from_config(
    DEEPSEEK_V3_CONFIG,
    name="DeepSeek-V3",
    params_total=671_000_000_000,
    params_active=37_000_000_000,
    weight_dtype="fp8",
    source="config.json of deepseek-ai/DeepSeek-V3; the DeepSeek-V3 technical report.",
    bib=("deepseekv3_config", "deepseek2024v3"),
    notes="All 61 layers are MLA; each caches 512 + 64 = 576 numbers per token. n_heads x "
    "head_dim = 128 x 128 (head_dim read as qk_nope_head_dim) is the multi-head baseline of "
    "DeepSeek-V2 Table 1 (2 x 128 x 128 per token per layer). 671B total / 37B active as in "
    "the report (the 14B multi-token-prediction module of the 685B checkpoint is left out: "
    "it is not used for plain decoding). Weights in fp8, as released (config.json "
    "quantization_config: fp8). The MoE (256 routed experts, 8 active, moe_intermediate_size "
    "2048) is not built: mlp_hidden is the dense intermediate_size 18432 of the first 3 "
    "layers.",
)
"""DeepSeek-V3 (671B): MLA in every layer (the Notation appendix, §7)."""

KIMI_LINEAR_48B_A3B = architecture_from_config(
    KIMI_LINEAR_CONFIG,
    name="Kimi-Linear-48B-A3B",
    params_total=48_000_000_000,
    params_active=3_000_000_000,
    source="config.json of moonshotai/Kimi-Linear-48B-A3B-Instruct; Kimi Linear tech report, "
    "arXiv 2510.26692, §4-5.",
    bib=("kimi_linear_config", "kimi2025linear"),
    notes="The config values match the released config.json as its derivative checkpoints "
    "copy it (e.g. Firworks/Kimi-Linear-48B-A3B-Instruct-nvfp4, whose architecture fields are "
    "the original's) and as several public repositories quote it; the moonshotai file itself "
    "was not read directly. full_attn_layers is 1-based: "
    "[4, 8, 12, 16, 20, 24, 27] gives 20 KDA + 7 MLA layers (20:7, not exactly 3:1), MLA "
    "last. The KDA heads are linear_attn_config's 32 x 128. MLA is NoPE (mla_use_nope), so "
    "its 64 'rope' key dims are cached unrotated. The MoE (256 experts, 8 active + 1 shared, "
    "moe_intermediate_size 1024) is not built: mlp_hidden is the dense intermediate_size 9216 "
    "of the first layer.",
)
"""Kimi Linear 48B-A3B: the released KDA/MLA hybrid (the Notation appendix, §8)."""

QWEN3_NEXT = architecture_from_config(
    QWEN3_NEXT_CONFIG,
    name="Qwen3-Next 80B-A3B",
    params_total=80_000_000_000,
    params_active=3_000_000_000,
    source="config.json of Qwen/Qwen3-Next-80B-A3B-Instruct; the Qwen3-Next release notes.",
    bib=("qwen3next_config", "qwen2025next"),
    notes="full_attention_interval 4: layers 4, 8, …, 48 (1-based) are gated softmax "
    "attention (12), the other 36 Gated DeltaNet with 32 value heads sharing 16 q/k "
    "heads; one d_k × d_v state per value head.",
)
"""Qwen3-Next 80B-A3B: Gated DeltaNet and gated attention, 3 : 1."""

MINIMAX_TEXT_01 = architecture_from_config(
    MINIMAX_TEXT_01_CONFIG,
    name="MiniMax-Text-01",
    params_total=456_000_000_000,
    params_active=45_900_000_000,
    source="config.json of MiniMaxAI/MiniMax-Text-01; the MiniMax-01 report.",
    bib=("minimax_config", "minimax2025minimax01"),
    notes="attn_type_list: 0 = lightning (linear) attention, 1 = softmax; 70 : 10. The "
    "lightning state counted as one 128 × 128 matrix per head, no short convolution.",
)
"""MiniMax-Text-01: lightning attention with a softmax layer every eighth."""

JAMBA_15_MINI = architecture_from_config(
    JAMBA_15_MINI_CONFIG,
    name="Jamba 1.5 Mini",
    params_total=52_000_000_000,
    params_active=12_000_000_000,
    source="config.json of ai21labs/AI21-Jamba-1.5-Mini; the Jamba and Jamba-1.5 reports.",
    bib=("jamba15_config", "lieber2024jamba", "jamba2024v15"),
    notes="Attention where layer % 8 == 4 (0-based): 4 of 32. Mamba-1 layers with "
    "d_inner = 2 · 4096, d_state 16. 16 experts, 2 per token, in every other layer; the "
    "expert share of the weights is spread evenly over them here.",
)
"""Jamba 1.5 Mini: Mamba with attention in one layer of eight."""

NEMOTRON_H_8B = architecture_from_config(
    NEMOTRON_H_8B_CONFIG,
    name="Nemotron-H 8B",
    params_total=8_000_000_000,
    source="config.json of nvidia/Nemotron-H-8B-Base-8K; the Nemotron-H report.",
    bib=("nemotronh_config", "nvidia2025nemotronh"),
    notes="hybrid_override_pattern: M = Mamba-2, * = attention, - = MLP-only block: 24 + 4 + "
    "24 = 52 blocks. Mamba-2 with 128 heads of 64 (d_inner 8192), d_state 128, 8 groups. 8B "
    "as the model is named (the paper's size class).",
)
"""Nemotron-H 8B: mostly Mamba-2, four attention layers."""

PUBLISHED: dict[str, ModelConfig] = {
    c.name: c
    for c in (
        KIMI_LINEAR_48B_A3B,
        QWEN3_NEXT,
        MINIMAX_TEXT_01,
        JAMBA_15_MINI,
        NEMOTRON_H_8B,
        LLAMA3_8B,
        DEEPSEEK_V3,
    )
}
"""The published models by name (Lesson 16b's seven): five hybrids, then two baselines."""

PRESETS: dict[str, ModelConfig] = {
    c.name: c for c in (SOPHIA, SOPHIA_NANO, *PUBLISHED.values())
}
"""Every preset by its name: the course's two models and the published ones."""
