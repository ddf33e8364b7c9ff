"""Published models as data: what each layer keeps while decoding, read from a ``config.json``.

A Hugging Face ``config.json`` names every dimension the memory arithmetic needs.
:func:`architecture_from_config` turns one (a plain ``dict``) into an :class:`Architecture`: one
:class:`LayerMemory` per layer, in numbers per sequence. The presets below are the published
configs' fields, copied with their sources; the parameter counts are the model cards' (a config
does not state them). No layer is built and nothing here imports ``torch.nn``.

Numbers kept by one layer for one sequence (T tokens; w the short-convolution width):

- ``"attn"`` (MHA, GQA, MQA, gated): 2 · n_kv_heads · head_dim per token (K and V).
- ``"mla"``: kv_lora_rank + qk_rope_head_dim per token (latent and shared rope key).
- ``"kda"``: state H · d_k · d_v; conv (w − 1) · H · (2 d_k + d_v) (q, k, v each convolved).
- ``"gdn"``: state H_v · d_k · d_v (one per value head); conv (w − 1) · (2 H_k d_k + H_v d_v).
- ``"lightning"``: state H · d · d, no convolution.
- ``"mamba"``: state d_inner · d_state; conv (w − 1) · d_inner.
- ``"mamba2"``: state H · head_dim · d_state; conv (w − 1) · (H · head_dim + 2 G d_state), the
  convolution running over x, B and C with G groups.
- ``"mlp"``: a block without a mixer keeps nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .checks import check_positive_int

MIXER_KINDS = (
    "attn",
    "mla",
    "kda",
    "gdn",
    "lightning",
    "mamba",
    "mamba2",
    "mlp",
)
"""Every layer kind an :class:`Architecture` may hold (``"mlp"``: a block without a mixer)."""


@dataclass(frozen=True)
class LayerMemory:
    """Numbers one layer keeps for one sequence: ``per_token`` more for every token (a cache),
    ``state`` and ``conv`` once (a recurrent state and the last w − 1 convolution inputs)."""

    kind: str
    per_token: int = 0
    state: int = 0
    conv: int = 0


@dataclass(frozen=True)
class Architecture:
    """A published model: its layers' memory, its size, and where each number comes from.

    ``params_total`` / ``params_active``: parameters stored / used per token (MoE models use
    ``experts_per_token`` of ``n_experts`` routed experts per MoE layer); ``weight_dtype``: the
    dtype the weights were released in; ``bib``: the
    ``references.bib`` keys of the config and the paper; ``reading``: which reading of an
    ambiguous published figure was taken.
    """

    name: str
    layers: tuple[LayerMemory, ...]
    params_total: int
    params_active: int
    n_experts: int | None = None
    experts_per_token: int | None = None
    weight_dtype: str = "bf16"
    bib: tuple[str, ...] = ()
    reading: str = ""

    def __post_init__(self) -> None:
        check_positive_int("Architecture.params_total", self.params_total)
        check_positive_int("Architecture.params_active", self.params_active)
        if self.params_active > self.params_total:
            raise ValueError(
                f"Architecture.params_active: expected at most params_total="
                f"{self.params_total}, got {self.params_active}"
            )
        if (self.n_experts is None) != (self.experts_per_token is None):
            raise ValueError(
                "Architecture.n_experts: give both n_experts and experts_per_token "
                f"or neither, got {self.n_experts} and {self.experts_per_token}"
            )

    @property
    def n_layers(self) -> int:
        """Number of layers (blocks)."""
        return len(self.layers)

    def count(self, kind: str) -> int:
        """Number of layers whose mixer is ``kind``."""
        return sum(layer.kind == kind for layer in self.layers)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The mixer kinds present, in order of first appearance."""
        return tuple(dict.fromkeys(layer.kind for layer in self.layers))

    @property
    def layout(self) -> str:
        """Layer counts by kind, e.g. ``"20 kda + 7 mla"`` (MLP-only blocks left out)."""
        return " + ".join(
            f"{self.count(k)} {k}" for k in self.kinds if k != "mlp"
        )


def attn_layer(n_kv_heads: int, head_dim: int) -> LayerMemory:
    """Softmax attention (MHA, GQA, MQA, gated): caches K and V, 2 · n_kv_heads · head_dim."""
    return LayerMemory("attn", per_token=2 * n_kv_heads * head_dim)


def mla_layer(kv_lora_rank: int, qk_rope_head_dim: int) -> LayerMemory:
    """Multi-head latent attention: caches the latent and the shared rope key, d_c + d_h^R."""
    return LayerMemory("mla", per_token=kv_lora_rank + qk_rope_head_dim)


def kda_layer(n_heads: int, head_dim: int, conv_size: int) -> LayerMemory:
    """KDA: state H · d_k · d_v (d_k = d_v = head_dim); q, k, v convolutions of H · d each."""
    width = n_heads * head_dim
    return LayerMemory(
        "kda", state=width * head_dim, conv=(conv_size - 1) * 3 * width
    )


def gdn_layer(
    n_key_heads: int,
    n_value_heads: int,
    key_dim: int,
    value_dim: int,
    conv_size: int,
) -> LayerMemory:
    """Gated DeltaNet with grouped heads: one d_k × d_v state per value head;
    one convolution over the concatenated q, k (H_k · d_k each) and v
    (H_v · d_v)."""
    channels = 2 * n_key_heads * key_dim + n_value_heads * value_dim
    return LayerMemory(
        "gdn",
        state=n_value_heads * key_dim * value_dim,
        conv=(conv_size - 1) * channels,
    )


def lightning_layer(n_heads: int, head_dim: int) -> LayerMemory:
    """Lightning attention (MiniMax-01's linear attention): a d × d state per head, no conv."""
    return LayerMemory("lightning", state=n_heads * head_dim * head_dim)


def mamba_layer(d_inner: int, d_state: int, conv_size: int) -> LayerMemory:
    """Mamba (selective SSM): state d_inner · d_state; convolution over d_inner channels."""
    return LayerMemory(
        "mamba", state=d_inner * d_state, conv=(conv_size - 1) * d_inner
    )


def mamba2_layer(
    n_heads: int, head_dim: int, d_state: int, n_groups: int, conv_size: int
) -> LayerMemory:
    """Mamba-2: state H · head_dim · d_state; convolution over x, B and C."""
    channels = n_heads * head_dim + 2 * n_groups * d_state
    return LayerMemory(
        "mamba2",
        state=n_heads * head_dim * d_state,
        conv=(conv_size - 1) * channels,
    )


def _field(config: dict[str, Any], *names: str) -> Any:
    for name in names:
        if name in config:
            return config[name]
    raise ValueError(
        f"config: expected a field {' or '.join(map(repr, names))} "
        f"(model_type {config.get('model_type')!r}), found none"
    )


def _attention_head_dim(config: dict[str, Any]) -> int:
    if config.get("head_dim") is not None:
        return config["head_dim"]
    if "attention_head_dim" in config:
        return config["attention_head_dim"]
    return _field(config, "hidden_size") // _field(
        config, "num_attention_heads"
    )


def _gqa(config: dict[str, Any]) -> LayerMemory:
    n_kv = config.get("num_key_value_heads") or _field(
        config, "num_attention_heads"
    )
    return attn_layer(n_kv, _attention_head_dim(config))


def _layers(config: dict[str, Any]) -> tuple[LayerMemory, ...]:
    """One :class:`LayerMemory` per layer, by ``model_type``."""
    kind = config.get("model_type")
    n = _field(config, "num_hidden_layers")
    if kind in ("llama", "mistral", "qwen2", "qwen3", None):
        return (_gqa(config),) * n
    if kind in ("deepseek_v2", "deepseek_v3"):
        return (
            mla_layer(config["kv_lora_rank"], config["qk_rope_head_dim"]),
        ) * n
    if kind == "kimi_linear":
        linear = config["linear_attn_config"]
        full = set(linear["full_attn_layers"])  # 1-based
        kda = kda_layer(
            linear["num_heads"],
            linear["head_dim"],
            linear["short_conv_kernel_size"],
        )
        mla = mla_layer(config["kv_lora_rank"], config["qk_rope_head_dim"])
        return tuple(mla if i + 1 in full else kda for i in range(n))
    if kind == "qwen3_next":
        gdn = gdn_layer(
            config["linear_num_key_heads"],
            config["linear_num_value_heads"],
            config["linear_key_head_dim"],
            config["linear_value_head_dim"],
            config["linear_conv_kernel_dim"],
        )
        types = config.get("layer_types") or [
            "full_attention"
            if (i + 1) % config["full_attention_interval"] == 0
            else "linear_attention"
            for i in range(n)
        ]
        return tuple(
            _gqa(config) if t == "full_attention" else gdn for t in types
        )
    if kind in ("minimax", "minimax_text_01", "minimax_m1"):
        linear = lightning_layer(
            config["num_attention_heads"], _attention_head_dim(config)
        )
        return tuple(
            _gqa(config) if t == 1 else linear
            for t in config["attn_type_list"]
        )
    if kind == "jamba":
        mamba = mamba_layer(
            config["mamba_expand"] * config["hidden_size"],
            config["mamba_d_state"],
            config["mamba_d_conv"],
        )
        period, offset = (
            config["attn_layer_period"],
            config["attn_layer_offset"],
        )
        return tuple(
            _gqa(config) if i % period == offset else mamba for i in range(n)
        )
    if kind == "nemotron_h":
        mamba2 = mamba2_layer(
            config["mamba_num_heads"],
            config["mamba_head_dim"],
            _field(config, "ssm_state_size", "mamba_d_state"),
            config["n_groups"],
            config["conv_kernel"],
        )
        by_char = {
            "M": mamba2,
            "*": _gqa(config),
            "-": LayerMemory("mlp"),
            "E": LayerMemory("mlp"),
        }
        return tuple(by_char[c] for c in config["hybrid_override_pattern"])
    raise ValueError(
        f"config: model_type {kind!r} is not one the calculator reads; expected one of llama, "
        "mistral, qwen2, qwen3, deepseek_v3, kimi_linear, qwen3_next, minimax, jamba, nemotron_h"
    )


def architecture_from_config(
    config: dict[str, Any],
    *,
    params_total: int,
    params_active: int | None = None,
    name: str | None = None,
    n_experts: int | None = None,
    experts_per_token: int | None = None,
    weight_dtype: str = "bf16",
    bib: tuple[str, ...] = (),
    reading: str = "",
) -> Architecture:
    """An :class:`Architecture` from the fields of a Hugging Face ``config.json`` (a ``dict``).

    The parameter counts are not in a config: give ``params_total`` (and ``params_active`` for a
    mixture of experts; it defaults to the total). ``n_experts`` and ``experts_per_token``
    default to the config's ``n_routed_experts``/``num_experts``/``num_local_experts`` and
    ``num_experts_per_tok`` (``num_experts_per_token`` in Kimi's configs).
    """
    if not isinstance(config, dict):
        raise ValueError(
            f"config: expected a dict of config.json fields, "
            f"got {type(config).__name__}"
        )
    layers = _layers(config)
    if len(layers) != config["num_hidden_layers"]:
        raise ValueError(
            f"config: the layer pattern gives {len(layers)} layers, "
            f"num_hidden_layers says {config['num_hidden_layers']}"
        )
    if n_experts is None:
        n_experts = next(
            (
                config[k]
                for k in (
                    "n_routed_experts",
                    "num_experts",
                    "num_local_experts",
                )
                if config.get(k)
            ),
            None,
        )
        experts_per_token = (
            next(
                (
                    config[k]
                    for k in ("num_experts_per_tok", "num_experts_per_token")
                    if config.get(k)
                ),
                None,
            )
            if n_experts
            else None
        )
    return Architecture(
        name=name
        or config.get("_name_or_path")
        or str(config.get("model_type")),
        layers=layers,
        params_total=params_total,
        params_active=params_total
        if params_active is None
        else params_active,
        n_experts=n_experts,
        experts_per_token=experts_per_token,
        weight_dtype=weight_dtype,
        bib=bib,
        reading=reading,
    )


# ---------------------------------------------------------------- published configs
# Only the fields the memory arithmetic reads, copied from each model's config.json.

LLAMA3_8B_CONFIG = {  # meta-llama/Meta-Llama-3-8B, config.json [llama3_8b_config]
    "model_type": "llama",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
}
DEEPSEEK_V3_CONFIG = {  # deepseek-ai/DeepSeek-V3, config.json [deepseekv3_config]
    "model_type": "deepseek_v3",
    "num_hidden_layers": 61,
    "hidden_size": 7168,
    "num_attention_heads": 128,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "n_routed_experts": 256,
    "num_experts_per_tok": 8,
}
KIMI_LINEAR_CONFIG = {  # moonshotai/Kimi-Linear-48B-A3B-Instruct, config.json [kimi_linear_config]
    "model_type": "kimi_linear",
    "num_hidden_layers": 27,
    "hidden_size": 2304,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "num_experts": 256,
    "num_experts_per_token": 8,
    "linear_attn_config": {
        "full_attn_layers": [4, 8, 12, 16, 20, 24, 27],
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
}

LLAMA3_8B = architecture_from_config(
    LLAMA3_8B_CONFIG,
    name="Llama-3-8B",
    params_total=8_030_000_000,
    bib=("llama3_8b_config", "grattafiori2024llama3"),
    reading="8.03B parameters (model card: 8B). Dense GQA: 8 KV heads of 128 in all 32 layers.",
)
DEEPSEEK_V3 = architecture_from_config(
    DEEPSEEK_V3_CONFIG,
    name="DeepSeek-V3",
    params_total=671_000_000_000,
    params_active=37_000_000_000,
    weight_dtype="fp8",
    bib=("deepseekv3_config", "deepseek2024v3"),
    reading="671B total / 37B active as in the report (the 14B multi-token-prediction module "
    "of the 685B checkpoint is left out: it is not used for plain decoding). Weights "
    "in fp8, as released (config.json quantization_config: fp8).",
)
KIMI_LINEAR = architecture_from_config(
    KIMI_LINEAR_CONFIG,
    name="Kimi Linear 48B-A3B",
    params_total=48_000_000_000,
    params_active=3_000_000_000,
    bib=("kimi_linear_config", "kimi2025linear"),
    reading="full_attn_layers is 1-based: 7 MLA (layers 4, 8, …, 24, 27) and 20 KDA layers. "
    "The 64 rope dims of the NoPE MLA layers are still cached.",
)
QWEN3_NEXT = architecture_from_config(
    QWEN3_NEXT_CONFIG,
    name="Qwen3-Next 80B-A3B",
    params_total=80_000_000_000,
    params_active=3_000_000_000,
    bib=("qwen3next_config", "qwen2025next"),
    reading="full_attention_interval 4: layers 4, 8, …, 48 (1-based) are gated softmax "
    "attention (12), the other 36 Gated DeltaNet with 32 value heads sharing 16 q/k "
    "heads; one d_k × d_v state per value head.",
)
MINIMAX_TEXT_01 = architecture_from_config(
    MINIMAX_TEXT_01_CONFIG,
    name="MiniMax-Text-01",
    params_total=456_000_000_000,
    params_active=45_900_000_000,
    bib=("minimax_config", "minimax2025minimax01"),
    reading="attn_type_list: 0 = lightning (linear) attention, 1 = softmax; 70 : 10. The "
    "lightning state counted as one 128 × 128 matrix per head, no short convolution.",
)
JAMBA_15_MINI = architecture_from_config(
    JAMBA_15_MINI_CONFIG,
    name="Jamba 1.5 Mini",
    params_total=52_000_000_000,
    params_active=12_000_000_000,
    bib=("jamba15_config", "lieber2024jamba", "jamba2024v15"),
    reading="Attention where layer % 8 == 4 (0-based): 4 of 32. Mamba-1 layers with "
    "d_inner = 2 · 4096, d_state 16. 16 experts, 2 per token, in every other layer; the "
    "expert share of the weights is spread evenly over them here.",
)
NEMOTRON_H_8B = architecture_from_config(
    NEMOTRON_H_8B_CONFIG,
    name="Nemotron-H 8B",
    params_total=8_000_000_000,
    bib=("nemotronh_config", "nvidia2025nemotronh"),
    reading="hybrid_override_pattern: M = Mamba-2, * = attention, - = MLP-only block: 24 + 4 + "
    "24 = 52 blocks. 8B as the model is named (the paper's size class).",
)

PRESETS: dict[str, Architecture] = {
    a.name: a
    for a in (
        KIMI_LINEAR,
        QWEN3_NEXT,
        MINIMAX_TEXT_01,
        JAMBA_15_MINI,
        NEMOTRON_H_8B,
        LLAMA3_8B,
        DEEPSEEK_V3,
    )
}
"""The published models of Lesson 16b by display name: five hybrids, then two baselines."""
