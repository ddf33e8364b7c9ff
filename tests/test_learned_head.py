"""Lesson 5b's tools for reading a trained model's heads: attention maps of a HybridLM, the
previous-word share, and the short training run with snapshots."""

from __future__ import annotations

import pytest
import torch
from attnbook.demos.toy_corpus import toy_corpus
from attnbook.figures.l05b_transformer_block import built_previous_word_weights
from attnbook.learned_head import (
    PROBE_SENTENCE,
    previous_word_share,
    tiny_transformer_config,
    train_tiny_transformer,
)
from attnlab.configs import ModelConfig
from attnlab.embedding import WordTokenizer
from attnlab.model import HybridLM, attention_maps
from attnlab.train import train_language_model


def _config(pattern):
    return ModelConfig(name="t", vocab_size=11, d_model=8, layer_pattern=pattern, n_heads=2,
                       head_dim=4, mlp_hidden=16)


def test_maps_cover_the_attention_layers_only_and_are_causal_distributions():
    torch.manual_seed(0)
    model = HybridLM(_config(("attn", "kda", "attn"))).eval()
    maps = attention_maps(model, torch.randint(0, 11, (2, 7)))
    assert sorted(maps) == [0, 2]
    for weights in maps.values():
        assert weights.shape == (2, 2, 7, 7)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 7))
        assert torch.all(weights.triu(diagonal=1) == 0)


def test_maps_read_the_stream_the_forward_pass_builds():
    """Layer 2's map changes when layer 1 changes: it reads layer 1's output, not the embedding."""
    torch.manual_seed(0)
    model = HybridLM(_config(("attn", "attn"))).eval()
    ids = torch.randint(0, 11, (1, 6))
    before = attention_maps(model, ids)
    with torch.no_grad():
        model.blocks[0].mlp.down.weight.mul_(5.0)
    after = attention_maps(model, ids)
    torch.testing.assert_close(before[0], after[0])
    assert not torch.allclose(before[1], after[1])


def test_share_is_one_for_the_built_head_and_one_over_t_for_an_even_head():
    built = built_previous_word_weights(PROBE_SENTENCE)[None, None]  # [1, 1, T, T]
    t = built.shape[-1]
    every = torch.ones(1, t, dtype=torch.bool)
    assert previous_word_share(built, every).item() > 0.99  # sharpness 8: e^8 / (e^8 + t)
    even = torch.ones(t, t).tril()
    even = (even / even.sum(-1, keepdim=True))[None, None]
    only_t3 = torch.zeros(1, t, dtype=torch.bool)
    only_t3[0, 3] = True
    assert previous_word_share(even, only_t3).item() == pytest.approx(1 / 4)


@pytest.mark.parametrize("weights, queries, name", [
    (torch.rand(2, 5, 5), torch.ones(1, 5, dtype=torch.bool), "weights"),
    (torch.rand(1, 2, 5, 5), torch.ones(1, 5), "queries"),
    (torch.rand(1, 2, 5, 5), torch.ones(1, 4, dtype=torch.bool), "queries"),
    (torch.rand(1, 2, 5, 5), torch.tensor([[True, False, False, False, False]]), "queries"),
])
def test_share_refuses_bad_input_naming_the_argument(weights, queries, name):
    with pytest.raises(ValueError, match=name):
        previous_word_share(weights, queries)


def test_maps_refuse_a_model_that_is_not_a_hybrid_lm():
    with pytest.raises(ValueError, match="model"):
        attention_maps(torch.nn.Linear(2, 2), torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="input_ids"):
        attention_maps(HybridLM(_config(("attn",))), torch.zeros(1, 2))


def test_on_step_sees_every_step_in_order():
    torch.manual_seed(0)
    model = HybridLM(_config(("attn",)))
    seen = []
    losses = train_language_model(model, torch.randint(0, 11, (200,)), steps=5, seq_len=8,
                                  on_step=seen.append)
    assert seen == [1, 2, 3, 4, 5] and len(losses) == 5


@pytest.fixture(scope="module")
def toy():
    corpus = toy_corpus(300, seed=0)
    tokenizer = WordTokenizer.from_texts(toy_corpus(2000, seed=0))
    ids = torch.tensor([i for s in corpus for i in tokenizer.encode(s)])
    held = torch.tensor([i for s in toy_corpus(40, seed=1)
                         for i in tokenizer.encode(s)])[: 4 * 32].view(4, 32)
    return tokenizer, ids, held


def test_a_short_run_keeps_snapshots_and_is_repeatable(toy):
    tokenizer, ids, held = toy
    torch.set_num_threads(1)
    model, run = train_tiny_transformer(tokenizer, ids, held, seed=3, steps=12, snapshot_every=5)
    assert sorted(run.snapshots) == [0, 5, 10, 12]
    assert model.config == tiny_transformer_config(tokenizer.size)
    t = len(PROBE_SENTENCE)
    assert all(w.shape == (2, t, t) for snap in run.snapshots.values() for w in snap.values())
    assert set(run.share) == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert all(0.0 <= v <= 1.0 for v in [*run.share.values(), *run.share_elsewhere.values()])
    assert run.best_head == max(run.share, key=run.share.get)
    _, again = train_tiny_transformer(tokenizer, ids, held, seed=3, steps=12, snapshot_every=5)
    assert again.losses == run.losses and again.share == run.share


def test_the_probe_sentence_is_in_the_toy_vocabulary(toy):
    tokenizer, _, _ = toy
    assert 0 not in tokenizer.encode(" ".join(PROBE_SENTENCE))  # no <unk>
    assert PROBE_SENTENCE.count("the") == 3


def _run(seed, share, elsewhere=0.1, loss=0.94):
    from attnbook.learned_head import HeadRun
    run = HeadRun(seed, [loss] * 20, {})
    run.share = {(0, 0): 0.01, (1, 1): share}
    run.share_elsewhere = {(0, 0): 0.0, (1, 1): elsewhere}
    return run


def test_the_finding_follows_the_runs():
    from attnbook.learned_head import runs_finding, runs_table
    all_clear = {0: _run(0, 0.99), 1: _run(1, 0.72)}
    assert runs_finding(all_clear).startswith("In all of the 2 runs, one head of layer 2 puts "
                                              "0.72–0.99 of its attention")
    mixed = all_clear | {2: _run(2, 0.3, loss=0.95)}
    text = runs_finding(mixed)
    assert text.startswith("In 2 of the 3 runs") and "In the other 1, no head does (at most 0.30)" \
        in text and "0.940–0.950" in text
    assert runs_finding({0: _run(0, 0.2)}).startswith("In none of the 1 runs")
    table = runs_table(mixed)
    assert table.count("\n") == 4 and "| 2 | layer 2, head 2 | 0.30 |" in table


def test_the_variety_sentence_follows_the_runs():
    from attnbook.learned_head import runs_variety
    same = {0: _run(0, 0.99), 1: _run(1, 0.8)}
    assert runs_variety(same) == "Every seed grew it in the same head."
    moved = same | {2: _run(2, 0.7)}
    moved[2].share = {(1, 0): 0.7}
    moved[2].share_elsewhere = {(1, 0): 0.1}
    assert "in another head" in runs_variety(moved)
    assert runs_variety(moved | {3: _run(3, 0.2)}).endswith(
        "in another head or not at all, as the table shows.")


def test_the_sentences_about_the_runs_speak_chinese_with_the_same_numbers():
    from attnbook.learned_head import head_name, runs_finding, runs_table, runs_variety
    from attnlab.i18n import language

    mixed = {0: _run(0, 0.99), 1: _run(1, 0.72), 2: _run(2, 0.3, loss=0.95)}
    with language("zh_CN"):
        text = runs_finding(mixed)
        assert text.startswith("3 次运行中有 2 次，第 2 层有一个头")
        assert "0.72–0.99" in text and "最多 0.30" in text and "0.940–0.950" in text
        assert runs_finding({0: _run(0, 0.2)}).startswith("1 次运行中，没有一个头")
        assert head_name((1, 1)) == "第 2 层第 2 个头"
        assert "| 2 | 第 2 层第 2 个头 | 0.30 |" in runs_table(mixed)
        assert runs_variety(mixed) == "换一个种子，它可能根本长不出来，见上表。"
    assert runs_finding(mixed).startswith("In 2 of the 3 runs")  # English outside the block
