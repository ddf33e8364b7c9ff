"""attnlab: the tested code behind the course *From KV Cache to KDA*.

Every sequence kernel takes tensors ``[B, H, T, D]``, keeps a state ``[B, H, Dk, Dv]`` read as
``o_t = S_tᵀ q_t``, takes gates in log space (``g = log α ≤ 0``) and betas by keyword, and returns
``(o, final_state_or_None)``. The recurrent form of each is its readable definition; the parallel
and chunkwise forms compute the same numbers faster (the tests prove it).

Importing it changes no global state. The book machinery (figures, slider panels, notebook
glue) is the separate package ``attnbook``, which imports this one.
"""

from .attention import (
    MultiHeadAttention,
    apply_rope,
    attention_scores,
    causal_mask,
    merge_heads,
    rope_angles,
    softmax_attention,
    softmax_attention_online,
    split_heads,
    stable_softmax,
)
from .configs import (
    DEEPSEEK_V3,
    KIMI_LINEAR_48B_A3B,
    LLAMA3_8B,
    PRESETS,
    SOPHIA,
    SOPHIA_NANO,
    ModelConfig,
)
from .delta import (
    delta_rule_chunk,
    delta_rule_chunk_reference,
    delta_rule_parallel,
    delta_rule_recurrent,
    delta_rule_step,
    gated_delta_rule_chunk,
    gated_delta_rule_chunk_reference,
    gated_delta_rule_recurrent,
    gated_delta_rule_step,
)
from .gated import (
    decay_masked_attention,
    gla_chunk,
    gla_chunk_reference,
    gla_recurrent,
    gla_step,
)
from .kda import (
    kda_chunk,
    kda_chunk_reference,
    kda_parallel,
    kda_recurrent,
    kda_step,
)
from .kv_cache import KVCache, kv_cache_bytes
from .layers import (
    DeltaNetLayer,
    GatedDeltaNetLayer,
    GLALayer,
    KDALayer,
    LinearAttentionLayer,
)
from .linear import (
    linear_attention_chunk,
    linear_attention_chunk_reference,
    linear_attention_parallel,
    linear_attention_recurrent,
    linear_attention_step,
)
from .memory import cache_breakdown, format_bytes
from .mla import LatentCache, MultiHeadLatentAttention
from .model import HybridLM

__all__ = [
    "DEEPSEEK_V3",
    "KIMI_LINEAR_48B_A3B",
    "LLAMA3_8B",
    "PRESETS",
    "SOPHIA",
    "SOPHIA_NANO",
    "DeltaNetLayer",
    "GLALayer",
    "GatedDeltaNetLayer",
    "HybridLM",
    "KDALayer",
    "KVCache",
    "LatentCache",
    "LinearAttentionLayer",
    "ModelConfig",
    "MultiHeadAttention",
    "MultiHeadLatentAttention",
    "apply_rope",
    "attention_scores",
    "cache_breakdown",
    "causal_mask",
    "decay_masked_attention",
    "delta_rule_chunk",
    "delta_rule_chunk_reference",
    "delta_rule_parallel",
    "delta_rule_recurrent",
    "delta_rule_step",
    "format_bytes",
    "gated_delta_rule_chunk",
    "gated_delta_rule_chunk_reference",
    "gated_delta_rule_recurrent",
    "gated_delta_rule_step",
    "gla_chunk",
    "gla_chunk_reference",
    "gla_recurrent",
    "gla_step",
    "kda_chunk",
    "kda_chunk_reference",
    "kda_parallel",
    "kda_recurrent",
    "kda_step",
    "kv_cache_bytes",
    "linear_attention_chunk",
    "linear_attention_chunk_reference",
    "linear_attention_parallel",
    "linear_attention_recurrent",
    "linear_attention_step",
    "merge_heads",
    "rope_angles",
    "softmax_attention",
    "softmax_attention_online",
    "split_heads",
    "stable_softmax",
]
