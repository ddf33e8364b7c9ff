"""The hybrid LM: shapes, cached decoding = full pass (MLA through both decode paths),
generation, and the cache bytes of a running model = the arithmetic of attnlab.memory."""

from __future__ import annotations

import dataclasses
from functools import cache

import pytest
import torch
from attnlab.blocks import LAYER_NORM_EPS
from attnlab.configs import LAYER_KINDS, SOPHIA_NANO, MLAConfig, ModelConfig
from attnlab.memory import cache_breakdown
from attnlab.mla import MultiHeadLatentAttention
from attnlab.model import HybridCache, HybridLM, make_mixer, next_token, stepwise_logits
from conftest import assert_close
from hypothesis import given, settings
from hypothesis import strategies as st

ZOO = ModelConfig(
    name="zoo",
    vocab_size=50,
    d_model=32,
    layer_pattern=("attn", "mla", "kda", "gdn", "deltanet", "gla", "linear"),
    n_heads=2,
    head_dim=16,
    n_kv_heads=1,
    mla=MLAConfig(n_heads=2, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12,
                  kv_lora_rank=16, q_lora_rank=24, rope=True),
    mlp_hidden=64,
    source="test",
)
"""Every layer kind once, RoPE on, GQA and a low-rank query path: exercises every mixer."""


@cache
def model_for(name: str, dtype: torch.dtype) -> HybridLM:
    config = {"nano": SOPHIA_NANO, "zoo": ZOO}[name]
    torch.manual_seed(0)
    model = HybridLM(config).to(dtype)
    model.eval()
    return model


def random_ids(config: ModelConfig, batch: int, length: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, config.vocab_size, (batch, length), generator=g)


def test_sophia_nano_model_is_small_enough_for_a_cpu():
    assert sum(p.numel() for p in model_for("nano", torch.float32).parameters()) < 500_000


def test_make_mixer_builds_every_kind():
    for kind in LAYER_KINDS:
        mixer = make_mixer(kind, ZOO)
        x = torch.randn(2, 5, ZOO.d_model)
        y, layer_cache = mixer(x, use_cache=True)
        assert y.shape == x.shape and layer_cache.num_bytes() > 0
    with pytest.raises(ValueError, match="kind: expected one of"):
        make_mixer("transformer", ZOO)


# --- the hybrid LM -----------------------------------------------------------------------------


def test_forward_shapes_for_sophia_nano():
    model = model_for("nano", torch.float32)
    ids = random_ids(SOPHIA_NANO, 3, 17, seed=1)
    logits, no_cache = model(ids)
    assert logits.shape == (3, 17, 256) and logits.dtype == torch.float32
    assert no_cache is None and torch.isfinite(logits).all()
    logits_c, layer_caches = model(ids, use_cache=True)
    assert isinstance(layer_caches, HybridCache) and layer_caches.seen_tokens == 17
    assert len(layer_caches.layers) == 8
    torch.testing.assert_close(logits_c, logits, rtol=1e-4, atol=1e-6)


def test_embeddings_are_tied_when_configured():
    nano = model_for("nano", torch.float32)
    assert nano.lm_head.weight is nano.embed.weight
    zoo = model_for("zoo", torch.float32)
    assert zoo.lm_head.weight is not zoo.embed.weight


def test_every_parameter_gets_a_gradient():
    torch.manual_seed(0)
    model = HybridLM(ZOO)
    ids = random_ids(ZOO, 2, 9, seed=2)
    logits, _ = model(ids)
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten()).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def decode_in_pieces(model: HybridLM, ids: torch.Tensor, prefill: int) -> torch.Tensor:
    """Prefill ``prefill`` tokens in one pass, then one token at a time with the cache."""
    logits, layer_caches = model(ids[:, :prefill], use_cache=True)
    pieces = [logits]
    for t in range(prefill, ids.shape[1]):
        logits, layer_caches = model(ids[:, t : t + 1], cache=layer_caches, use_cache=True)
        pieces.append(logits)
    assert layer_caches.seen_tokens == ids.shape[1]
    return torch.cat(pieces, dim=1)


@settings(max_examples=10, deadline=None)
@given(
    name=st.sampled_from(["nano", "zoo"]),
    length=st.integers(1, 24),
    batch=st.integers(1, 2),
    data=st.data(),
)
def test_cached_decoding_equals_the_full_pass_in_float64(name, length, batch, data):
    prefill = data.draw(st.integers(1, length), label="prefill")
    model = model_for(name, torch.float64)
    ids = random_ids(model.config, batch, length, seed=length)
    full, _ = model(ids)
    with torch.no_grad():
        pieces = decode_in_pieces(model, ids, prefill)
    torch.testing.assert_close(pieces, full.detach(), rtol=0, atol=1e-10)


def test_cached_decoding_equals_the_full_pass_across_chunks_in_float64():
    # 70 tokens: the chunkwise prefill crosses a 64-token chunk boundary; then 5 decode steps
    model = model_for("nano", torch.float64)
    ids = random_ids(SOPHIA_NANO, 1, 75, seed=3)
    with torch.no_grad():
        full, _ = model(ids)
        pieces = decode_in_pieces(model, ids, 70)
    torch.testing.assert_close(pieces, full, rtol=0, atol=1e-10)


def test_a_wrong_cache_changes_the_result():
    # the cache really carries the past: continuing from another prefix gives other logits
    model = model_for("nano", torch.float64)
    ids = random_ids(SOPHIA_NANO, 1, 12, seed=4)
    other = random_ids(SOPHIA_NANO, 1, 11, seed=5)
    with torch.no_grad():
        full, _ = model(ids)
        _, other_cache = model(other, use_cache=True)
        wrong, _ = model(ids[:, 11:], cache=other_cache)
    assert (wrong[:, -1] - full[:, -1]).abs().max() > 1e-3


@pytest.mark.parametrize(("name", "length", "batch"), [("nano", 1, 1), ("nano", 23, 3),
                                                       ("zoo", 9, 2)])
def test_cache_bytes_of_a_running_model_equal_the_memory_arithmetic(name, length, batch):
    model = model_for(name, torch.float32)
    ids = random_ids(model.config, batch, length, seed=6)
    with torch.no_grad():
        _, layer_caches = model(ids, use_cache=True)
        expected = cache_breakdown(model.config, length, batch=batch, dtype="fp32")
        assert layer_caches.bytes_by_layer() == expected.bytes_by_layer()
        assert layer_caches.num_bytes() == expected.total_bytes
        assert layer_caches.bytes_by_kind() == expected.bytes_by_kind()
        _, layer_caches = model(ids[:, :1], cache=layer_caches)
    assert layer_caches.num_bytes() == cache_breakdown(
        model.config, length + 1, batch=batch, dtype=torch.float32
    ).total_bytes


def test_generate_greedy_is_deterministic_and_matches_uncached_argmax():
    model = model_for("nano", torch.float64)
    prompt = random_ids(SOPHIA_NANO, 2, 5, seed=7)
    out = model.generate(prompt, 6)
    assert out.shape == (2, 11) and torch.equal(out[:, :5], prompt)
    assert torch.equal(model.generate(prompt, 6), out)
    # the same continuation, recomputed without any cache, one full pass per token
    ids = prompt
    with torch.no_grad():
        for _ in range(6):
            logits, _ = model(ids)
            ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(ids, out)
    assert torch.equal(model.generate(prompt, 0), prompt)


def test_generate_samples_reproducibly_with_a_generator():
    model = model_for("nano", torch.float32)
    prompt = random_ids(SOPHIA_NANO, 1, 4, seed=8)
    a = model.generate(prompt, 20, temperature=1.0, generator=torch.Generator().manual_seed(1))
    b = model.generate(prompt, 20, temperature=1.0, generator=torch.Generator().manual_seed(1))
    c = model.generate(prompt, 20, temperature=1.0, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.min() >= 0 and a.max() < 256


def test_generate_reports_the_cache_after_every_step():
    model = model_for("nano", torch.float32)
    seen, kda_bytes, mla_bytes = [], [], []

    def record(layer_caches: HybridCache) -> None:
        seen.append(layer_caches.seen_tokens)
        per_kind = layer_caches.bytes_by_kind()
        kda_bytes.append(per_kind["kda"])
        mla_bytes.append(per_kind["mla"])

    model.generate(random_ids(SOPHIA_NANO, 1, 3, seed=9), 4, on_step=record)
    assert seen == [3, 4, 5, 6]
    assert len(set(kda_bytes)) == 1  # fixed-size states
    per_token = 2 * (32 + 16) * 4  # 2 MLA layers × (d_c + d_R) × fp32
    assert [b - mla_bytes[0] for b in mla_bytes] == [0, per_token, 2 * per_token, 3 * per_token]


def test_next_token_greedy_and_sampled():
    logits = torch.tensor([[0.0, 5.0, 1.0], [3.0, 0.0, -1.0]])
    assert next_token(logits, 0).tolist() == [[1], [0]]
    peaked = next_token(logits * 100, 1.0, torch.Generator().manual_seed(0))
    assert peaked.tolist() == [[1], [0]]


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        (torch.zeros(2, 3), "input_ids: expected an integer dtype"),
        (torch.zeros(3, dtype=torch.long), r"input_ids: expected a 2-D tensor \[B, T\]"),
        (torch.zeros(2, 0, dtype=torch.long), r"input_ids: expected a 2-D tensor \[B, T\]"),
        (torch.full((1, 2), 256), r"input_ids: expected token ids in \[0, 256\)"),
        (torch.full((1, 2), -1), r"input_ids: expected token ids in \[0, 256\)"),
        ([[1, 2]], "input_ids: expected a torch.Tensor"),
    ],
)
def test_bad_input_ids_raise_clear_errors(ids, message):
    with pytest.raises(ValueError, match=message):
        model_for("nano", torch.float32)(ids)


def test_bad_caches_and_generation_arguments_raise_clear_errors():
    nano = model_for("nano", torch.float32)
    ids = random_ids(SOPHIA_NANO, 1, 3, seed=10)
    with pytest.raises(ValueError, match="cache: expected a HybridCache"):
        nano(ids, cache=[None] * 8)
    _, two_sequences = nano(random_ids(SOPHIA_NANO, 2, 3, seed=10), use_cache=True)
    with pytest.raises(ValueError, match="cache: expected the cache of 1 sequences"):
        nano(ids, cache=two_sequences)
    _, zoo_cache = model_for("zoo", torch.float32)(random_ids(ZOO, 1, 3, seed=10),
                                                   use_cache=True)
    with pytest.raises(ValueError, match="cache: expected layer kinds"):
        nano(ids, cache=zoo_cache)
    with pytest.raises(ValueError, match="max_new_tokens: expected an integer >= 0"):
        nano.generate(ids, -1)
    with pytest.raises(ValueError, match="temperature: expected a finite number >= 0"):
        nano.generate(ids, 2, temperature=-0.5)
    with pytest.raises(ValueError, match="config: expected a ModelConfig"):
        HybridLM({"d_model": 64})


# --- MLA decoding: the absorbed path (Lesson 15's "how MLA decodes") -------------------------
def test_mla_decodes_through_the_absorbed_path_with_the_naive_paths_logits(monkeypatch):
    torch.manual_seed(0)
    absorbed = HybridLM(ZOO).double().eval()
    naive = HybridLM(ZOO, mla_decode="naive").double().eval()
    naive.load_state_dict(absorbed.state_dict())
    ids = random_ids(ZOO, 2, 9, seed=4)
    full, _ = absorbed(ids)
    logits_naive, _ = stepwise_logits(naive, ids, prefill=3)
    assert_close(logits_naive, full)
    # decoding steps of the absorbed model never up-project the latent
    prefill_done = []

    def refuse_naive(self, *args):
        if prefill_done:
            raise AssertionError("a decoding step used the naive MLA path")
        return original(self, *args)

    original = MultiHeadLatentAttention.attend_naive
    monkeypatch.setattr(MultiHeadLatentAttention, "attend_naive", refuse_naive)
    _, cache = absorbed(ids[:, :3], use_cache=True)
    prefill_done.append(True)
    steps = [absorbed(ids[:, t : t + 1], cache=cache)[0] for t in range(3, 9)]
    logits_absorbed = torch.cat([full[:, :3], *steps], dim=1)
    assert_close(logits_absorbed, logits_naive)


def test_mla_decode_path_is_checked():
    with pytest.raises(ValueError, match="mla_decode"):
        HybridLM(ZOO, mla_decode="fast")


# --- attention with a short convolution (Lesson 17's recall toy) ----------------------------
CONV_ATTN = dataclasses.replace(ZOO, layer_pattern=("attn", "kda"), rope=False, attn_conv=True,
                                norm_eps=1e-6)


def test_conv_attention_is_causal_and_runs_full_passes_only():
    torch.manual_seed(0)
    model = HybridLM(CONV_ATTN).double()
    assert model.blocks[0].mixer.q_conv is not None  # the convolution is there
    ids = random_ids(CONV_ATTN, 2, 12, seed=11)
    logits, none = model(ids)
    assert none is None and logits.shape == (2, 12, CONV_ATTN.vocab_size)
    changed = ids.clone()
    changed[:, 7:] = 0  # the future changes: earlier logits do not
    assert_close(model(changed)[0][:, :7], logits[:, :7])
    with pytest.raises(ValueError, match="use_cache: .*short convolution"):
        model(ids, use_cache=True)
    with pytest.raises(ValueError, match="use_cache: .*short convolution"):
        model.generate(ids, 2)
    with pytest.raises(ValueError, match="use_cache: .*short convolution"):
        model.blocks[0].mixer(torch.randn(1, 3, CONV_ATTN.d_model).double(), use_cache=True)


def test_the_configs_norm_eps_is_the_layers_default():
    """ModelConfig.norm_eps defaults to FLA's 1e-5, the layers' own default, and reaches them."""
    assert ModelConfig.__dataclass_fields__["norm_eps"].default == LAYER_NORM_EPS
    assert model_for("zoo", torch.float32).blocks[2].mixer.norm.eps == LAYER_NORM_EPS
    assert HybridLM(CONV_ATTN).blocks[1].mixer.norm.eps == 1e-6
