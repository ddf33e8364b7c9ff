"""The registry of layer kinds: each kind's byte formula is what its built layer really keeps,
caches grow and states do not, and the kinds the course only sizes cannot be built."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from attnlab.configs import (
    PUBLISHED,
    QWEN3_NEXT,
    SOPHIA,
    SOPHIA_NANO,
    SSMConfig,
)
from attnlab.kinds import KINDS, LayerNumbers
from attnlab.memory import layer_numbers

#: Sophia-nano's sizes with a GQA attention layer (4 heads, 2 K/V heads) for every kind.
SMALL = dataclasses.replace(
    SOPHIA_NANO, n_heads=4, head_dim=8, n_kv_heads=2, ssm=SSMConfig(d_inner=32, d_state=4,
                                                                    n_groups=2))
BUILT = [kind for kind, k in KINDS.items() if k.build is not None]


def test_the_course_builds_seven_kinds_and_sizes_six_more():
    assert BUILT == ["attn", "mla", "kda", "gdn", "deltanet", "gla", "linear"]
    assert [k for k in KINDS if k not in BUILT] == ["swa", "chunked", "lightning", "mamba",
                                                    "mamba2", "mlp"]
    labels = [k.label for k in KINDS.values()]
    assert len(set(labels)) == len(labels)
    assert {kind: k.label for kind, k in KINDS.items() if kind in ("attn", "kda", "mla")} == {
        "attn": "softmax attention", "kda": "KDA", "mla": "MLA"}


@pytest.mark.parametrize("kind", BUILT)
@pytest.mark.parametrize("tokens", [1, 7])
def test_a_built_layer_keeps_exactly_what_its_formula_counts(kind, tokens):
    torch.manual_seed(0)
    layer = KINDS[kind].build(SMALL)
    x = torch.randn(2, tokens, SMALL.d_model)
    y, cache = layer(x, use_cache=True)
    assert y.shape == x.shape
    n = layer_numbers(kind, SMALL, tokens)
    assert cache.num_bytes() == 2 * (n.cache + n.state + n.conv) * 4  # batch 2, float32


WINDOWED = dataclasses.replace(SOPHIA, n_kv_heads=4, sliding_window=2000,
                               attention_chunk_size=3000)


@pytest.mark.parametrize("kind", list(KINDS))
def test_caches_grow_with_the_context_and_states_do_not(kind):
    config = PUBLISHED["Nemotron-H 8B"] if KINDS[kind].needs == "ssm" else WINDOWED
    short, long = (KINDS[kind].numbers(config, t) for t in (10, 1000))
    assert isinstance(short, LayerNumbers)
    if KINDS[kind].grows:
        assert long.cache == 100 * short.cache > 0
        assert long.state == short.state == 0 and long.conv == short.conv == 0
    else:
        assert long == short and long.cache == 0
        assert KINDS[kind].window is None


@pytest.mark.parametrize(("kind", "field"), [("swa", "sliding_window"),
                                             ("chunked", "attention_chunk_size")])
def test_a_windowed_cache_stops_growing_at_its_window(kind, field):
    w = getattr(WINDOWED, field)
    assert KINDS[kind].window(WINDOWED) == w and KINDS["attn"].window is None
    per_token = 2 * WINDOWED.n_kv_heads * WINDOWED.head_dim  # K and V of 4 heads of 96
    for tokens, kept in [(0, 0), (1, 1), (w - 1, w - 1), (w, w), (w + 1, w), (10 * w, w)]:
        assert layer_numbers(kind, WINDOWED, tokens) == LayerNumbers(
            cache=per_token * kept, state=0, conv=0)
        assert layer_numbers("attn", WINDOWED, tokens).cache == per_token * tokens


def test_grouped_value_heads_are_sized_but_not_built():
    n = layer_numbers("gdn", QWEN3_NEXT, 1)
    assert n.state == 32 * 128 * 128 and n.conv == 3 * (2 * 16 * 128 + 32 * 128)
    with pytest.raises(ValueError, match="GatedDeltaNetLayer has one value head per key head"):
        KINDS["gdn"].build(QWEN3_NEXT)


def test_a_kind_that_needs_dimensions_refuses_a_config_without_them():
    bare = dataclasses.replace(SOPHIA, layer_pattern=("kda",), mla=None)
    for kind, k in KINDS.items():
        if k.needs is not None:
            with pytest.raises(ValueError, match=f"no dimensions for '{kind}' layers"):
                layer_numbers(kind, bare, 1)
    with pytest.raises(ValueError, match="ModelConfig.ssm: the layer pattern has 'mamba2'"):
        dataclasses.replace(SOPHIA, layer_pattern=("kda", "mamba2"))
    with pytest.raises(ValueError, match="ModelConfig.sliding_window: the layer pattern has"):
        dataclasses.replace(SOPHIA, layer_pattern=("kda", "swa"))
    with pytest.raises(ValueError, match="ModelConfig.sliding_window: expected a positive"):
        dataclasses.replace(SOPHIA, sliding_window=0)
