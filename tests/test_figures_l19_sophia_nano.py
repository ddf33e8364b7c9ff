"""Tests of Lesson 19's figures (attnbook.figures.l19_sophia_nano) and the functions the lesson
added: attnbook.demos.toy_corpus.{matches_template, complete_sentences, template_fraction,
toy_corpus_entropy} and attnlab.model.stepwise_logits and attnlab.train.train_language_model."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from attnbook.demos import toy_corpus as corpus
from attnbook.figures import l19_sophia_nano as l19
from attnbook.plotting import new_figure
from attnlab.configs import SOPHIA_NANO
from attnlab.embedding import WordTokenizer
from attnlab.memory import cache_breakdown
from attnlab.model import HybridLM, stepwise_logits
from attnlab.train import train_language_model

KINDS = SOPHIA_NANO.layer_pattern
TINY = dataclasses.replace(SOPHIA_NANO, vocab_size=20, d_model=16, n_heads=1, n_kv_heads=1,
                           head_dim=8,
                           mlp_hidden=16, layer_pattern=("kda", "mla"),
                           mla=dataclasses.replace(SOPHIA_NANO.mla, n_heads=1,
                                                   qk_nope_head_dim=8, v_head_dim=8,
                                                   kv_lora_rank=8, qk_rope_head_dim=4))


def history(n: int = 120):
    tokens = list(range(1, n + 1))
    rows = [cache_breakdown(SOPHIA_NANO, t, dtype="fp32").bytes_by_layer() for t in tokens]
    return tokens, rows


# ---------------------------------------------------------------- figures


def test_draw_training_loss_draws_with_and_without_floor():
    fig = new_figure()
    l19.draw_training_loss(fig, [3.9, 2.0, 1.1], floor=0.917)
    assert "3.90 → 1.10" in fig.axes[0].get_title()
    loss, floor = fig.axes[0].lines  # the curve and the entropy floor
    assert list(loss.get_ydata()) == [3.9, 2.0, 1.1]
    assert set(floor.get_ydata()) == {0.917}
    l19.draw_training_loss(new_figure(), [1.0])


def test_draw_training_loss_rejects_empty():
    with pytest.raises(ValueError, match="losses"):
        l19.draw_training_loss(new_figure(), [])


def test_draw_cache_growth_one_line_per_layer():
    tokens, rows = history()
    fig = new_figure()
    l19.draw_cache_growth(fig, tokens, rows, KINDS)
    lines = fig.axes[0].lines
    assert len(lines) == len(KINDS)
    kda = [line for line, kind in zip(lines, KINDS, strict=True) if kind == "kda"]
    assert all(len(set(line.get_ydata())) == 1 for line in kda)      # flat
    mla = lines[KINDS.index("mla")].get_ydata()
    assert mla[-1] > mla[0]


def test_draw_cache_growth_rejects_bad_history():
    tokens, rows = history(5)
    with pytest.raises(ValueError, match="layer_bytes"):
        l19.draw_cache_growth(new_figure(), tokens, rows[:-1], KINDS)
    with pytest.raises(ValueError, match="layer_bytes"):
        l19.draw_cache_growth(new_figure(), tokens, [r[:-1] for r in rows], KINDS)
    with pytest.raises(ValueError, match="kinds"):
        l19.draw_cache_growth(new_figure(), tokens, rows, ())
    with pytest.raises(ValueError, match="kinds"):
        l19.draw_cache_growth(new_figure(), tokens, rows, ("kda",) * 7 + ("bogus",))


@pytest.mark.parametrize("tokens", [1, 57, 117, 120])
def test_draw_cache_at_step_defaults_and_extremes(tokens):
    held, rows = history()
    fig = new_figure()
    l19.draw_cache_at_step(fig, tokens, held, rows, KINDS)
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    assert len(heights) == len(KINDS)
    assert heights[0] == pytest.approx(10_496 / 1024)
    assert heights[3] == pytest.approx(tokens * 192 / 1024)
    assert ax.get_ylim()[1] == pytest.approx(23_040 / 1024 * 1.15)   # fixed scale
    assert f"After {tokens} tokens" in ax.get_title()


def test_draw_cache_at_step_rejects_unrecorded_tokens():
    held, rows = history(10)
    with pytest.raises(ValueError, match="tokens"):
        l19.draw_cache_at_step(new_figure(), 11, held, rows, KINDS)


# ---------------------------------------------------------------- toy corpus additions


def test_every_corpus_sentence_matches_a_template():
    assert all(corpus.matches_template(s) for s in corpus.toy_corpus(300, seed=3))


@pytest.mark.parametrize("sentence", [
    "the cat eats bread in the garden .",          # missing the colour slot
    "a dog ran to the garden .",                   # template 5 needs a number, not "a"
    "she painted the likes black .",               # wrong group in a slot
    "the red cat eats bread in the garden",        # no full stop
    "",
])
def test_non_template_sentences_do_not_match(sentence):
    assert not corpus.matches_template(sentence)


def test_complete_sentences_and_template_fraction():
    text = ". the red cat eats bread in the kitchen . . a dog ran to the garden . she painted"
    assert corpus.complete_sentences(text) == [
        "the red cat eats bread in the kitchen .", "a dog ran to the garden ."]
    assert corpus.template_fraction(text) == (1, 2)
    assert corpus.template_fraction("no full stop here") == (0, 0)


def test_toy_corpus_entropy_by_hand():
    expected = (math.log(7) + 19 / 7 * math.log(6)) / (52 / 7)
    assert corpus.toy_corpus_entropy() == pytest.approx(expected, rel=1e-12)


def test_toy_corpus_entropy_is_below_a_bigram_model():
    # A bigram model is a valid predictor, so its cross-entropy bounds the floor from above.
    sentences = corpus.toy_corpus(4000, seed=1)
    tok = WordTokenizer.from_texts(sentences)
    ids = torch.tensor([i for s in sentences for i in tok.encode(s)])
    counts = torch.zeros(tok.size, tok.size, dtype=torch.float64)
    counts.index_put_((ids[:-1], ids[1:]), torch.ones(len(ids) - 1, dtype=torch.float64),
                      accumulate=True)
    p = counts / counts.sum(1, keepdim=True).clamp_min(1)
    bigram = -torch.log(p[ids[:-1], ids[1:]]).mean().item()
    assert corpus.toy_corpus_entropy() < bigram < corpus.toy_corpus_entropy() + 0.5


# ---------------------------------------------------------------- model additions


@pytest.mark.parametrize("prefill", [1, 3, 7])
def test_stepwise_logits_equal_full_pass_float64(prefill):
    torch.manual_seed(0)
    model = HybridLM(TINY).double().eval()
    ids = torch.randint(0, TINY.vocab_size, (2, 7))
    steps, cache = stepwise_logits(model, ids, prefill=prefill)
    full, _ = model(ids)
    assert steps.shape == full.shape
    assert (steps - full).abs().max().item() < 1e-10
    assert cache.seen_tokens == 7


def test_stepwise_logits_rejects_bad_prefill():
    model = HybridLM(TINY)
    ids = torch.zeros(1, 4, dtype=torch.long)
    for bad in (0, 5, 1.0, True):
        with pytest.raises(ValueError, match="prefill"):
            stepwise_logits(model, ids, prefill=bad)
    with pytest.raises(ValueError, match="model"):
        stepwise_logits(torch.nn.Linear(2, 2), ids)


def test_train_language_model_lowers_the_loss():
    torch.manual_seed(0)
    model = HybridLM(TINY)
    ids = torch.arange(400) % 5                         # a periodic stream: easy to predict
    losses = train_language_model(model, ids, steps=30, batch_size=4, seq_len=12, lr=1e-2)
    assert len(losses) == 30
    assert sum(losses[-5:]) / 5 < 0.5 * losses[0]
    assert not model.training


def test_train_language_model_is_reproducible():
    def run():
        torch.manual_seed(0)
        return train_language_model(HybridLM(TINY), torch.arange(100) % 7, steps=3,
                                    batch_size=2, seq_len=8)
    assert run() == run()


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"token_ids": torch.zeros(50)}, "token_ids"),
    ({"token_ids": torch.zeros(2, 50, dtype=torch.long)}, "token_ids"),
    ({"token_ids": torch.zeros(5, dtype=torch.long)}, "token_ids"),
    ({"token_ids": torch.full((50,), 10**6)}, "token_ids: expected ids in"),  # not in the vocab
    ({"steps": 0}, "steps"),
    ({"batch_size": 0}, "batch_size"),
    ({"seq_len": -1}, "seq_len"),
    ({"lr": 0.0}, "lr"),
])
def test_train_language_model_rejects_bad_arguments(kwargs, name):
    args = {"token_ids": torch.zeros(50, dtype=torch.long), "steps": 1, **kwargs}
    ids = args.pop("token_ids")
    with pytest.raises(ValueError, match=name):
        train_language_model(HybridLM(TINY), ids, **args)
