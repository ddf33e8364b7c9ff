"""Model sets and byte arithmetic that the memory lessons state (6, 7, 15): the accelerator budget,
Sophia with every layer as linear attention, MLA's bytes per token."""

from __future__ import annotations

import dataclasses

from attnlab.checks import check_choice
from attnlab.configs import SOPHIA, ModelConfig
from attnlab.memory import (
    BYTES_PER_ELEMENT,
    as_all_attention,
    cache_breakdown,
)
from attnlab.mla import mla_cache_elements_per_token

#: The calculator's reference line: the memory of one 24 GiB accelerator.
BUDGET_BYTES = 24 * 2**30


def as_all_linear(config: ModelConfig) -> ModelConfig:
    """The same model with every layer as (normalised) linear attention: the fixed-state
    counterpart of :func:`attnlab.memory.as_all_attention`."""
    return dataclasses.replace(
        config,
        name=f"{config.name} (all linear attention)",
        layer_pattern=("linear",) * config.n_layers,
        mla=None,
        notes=(
            f"Every one of the {config.n_layers} layers of {config.name} as linear attention "
            f"with {config.n_heads} heads, state {config.head_dim} x {config.head_dim}."
        ),
    )


#: The memory panel's three models, by their legend labels.
ALL_ATTENTION = f"all {SOPHIA.n_layers} layers softmax attention (KV cache)"


ALL_LINEAR = f"all {SOPHIA.n_layers} layers linear attention (state)"


AS_BUILT = (
    f"Sophia as built: {SOPHIA.count('kda')} KDA + {SOPHIA.count('mla')} MLA"
)


MEMORY_MODELS: dict[str, ModelConfig] = {
    ALL_ATTENTION: as_all_attention(SOPHIA),
    ALL_LINEAR: as_all_linear(SOPHIA),
    AS_BUILT: SOPHIA,
}


def memory_at(name: str, context: int, dtype: str) -> int:
    """Total bytes kept while decoding (cache + state + conv inputs), batch 1, of the memory
    panel's model ``name`` after ``context`` tokens, everything in ``dtype``."""
    if name not in MEMORY_MODELS:
        raise ValueError(
            f"name: expected one of {list(MEMORY_MODELS)}, got {name!r}"
        )
    dtype = check_choice("dtype", dtype, BYTES_PER_ELEMENT)
    return cache_breakdown(
        MEMORY_MODELS[name], context, dtype=dtype
    ).total_bytes


def mla_sweep_bytes(
    kv_lora_rank: int, rope_dim: int, dtype: str = "bf16"
) -> int:
    """Bytes MLA caches per token per layer: (d_c + d_h^R) · bytes per element."""
    check_choice("dtype", dtype, BYTES_PER_ELEMENT)
    return (
        mla_cache_elements_per_token(kv_lora_rank, rope_dim)
        * BYTES_PER_ELEMENT[dtype]
    )
