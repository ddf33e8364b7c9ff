"""attnbook.timing: what a caller sees (call counts, no autograd, which summary, bad input)."""

import pytest
import torch
from attnbook import timing
from attnbook.timing import (
    best_seconds,
    median_seconds,
    spread_seconds,
    time_decode_step,
    time_delta_rule,
    time_linear_attention,
)


class Counter:
    def __init__(self) -> None:
        self.calls = 0
        self.grad_enabled: list[bool] = []

    def __call__(self) -> None:
        self.calls += 1
        self.grad_enabled.append(torch.is_grad_enabled())


@pytest.mark.parametrize("summary", [best_seconds, median_seconds, spread_seconds])
@pytest.mark.parametrize(("warmup", "extra"), [(True, 1), (False, 0)])
def test_calls_repeats_plus_warmup_without_autograd(summary, warmup, extra):
    fn = Counter()
    seconds = summary(fn, repeats=3, warmup=warmup)
    assert fn.calls == 3 + extra
    assert not any(fn.grad_enabled)
    assert getattr(seconds, "median", seconds) >= 0.0


def _fake_clock(monkeypatch, durations):
    """Make perf_counter report the given duration for each successive timed call."""
    ticks = [0.0]
    for d in durations:
        ticks += [ticks[-1], ticks[-1] + d]
    clock = iter(ticks[1:])
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))


def test_best_is_the_fastest_and_median_the_middle_call(monkeypatch):
    _fake_clock(monkeypatch, [0.5, 0.1, 0.3])
    assert best_seconds(lambda: None, repeats=3, warmup=False) == pytest.approx(0.1)
    _fake_clock(monkeypatch, [0.5, 0.1, 0.3])
    assert median_seconds(lambda: None, repeats=3, warmup=False) == pytest.approx(0.3)


def test_a_spread_is_the_median_between_the_fastest_and_slowest_call(monkeypatch):
    _fake_clock(monkeypatch, [0.5, 0.1, 0.3])
    spread = spread_seconds(lambda: None, repeats=3, warmup=False)
    assert (spread.median, spread.low, spread.high) == pytest.approx((0.3, 0.1, 0.5))
    assert spread.runs == pytest.approx((0.5, 0.1, 0.3))
    _fake_clock(monkeypatch, [0.6, 0.7, 0.8, 0.51, 0.55, 0.58])
    a = spread_seconds(lambda: None, repeats=3, warmup=False)
    b = spread_seconds(lambda: None, repeats=3, warmup=False)
    assert not a.overlaps(b) and not b.overlaps(a)
    _fake_clock(monkeypatch, [0.45, 0.65])
    c = spread_seconds(lambda: None, repeats=2, warmup=False)  # [0.45, 0.65]
    assert c.overlaps(a) and a.overlaps(c) and c.overlaps(spread)


@pytest.mark.parametrize("summary", [best_seconds, median_seconds])
@pytest.mark.parametrize(("kwargs", "name"), [
    ({"fn": 3, "repeats": 1}, "fn"),
    ({"fn": print, "repeats": 0}, "repeats"),
    ({"fn": print, "repeats": True}, "repeats"),
    ({"fn": print, "repeats": 2, "warmup": 1}, "warmup"),
])
def test_bad_arguments_name_the_argument(summary, kwargs, name):
    kwargs = dict(kwargs)
    fn = kwargs.pop("fn")
    with pytest.raises(ValueError, match=f"^{name}:"):
        summary(fn, **kwargs)


def test_repeats_is_keyword_only():
    with pytest.raises(TypeError):
        best_seconds(print, 3)  # type: ignore[misc]


# ---------------------------------------------------------------- the kernel timings
def _recorder(monkeypatch, name):
    """Replace the kernel ``timing.<name>`` with one that records the shapes it is called on and
    still returns the real kernel's result."""
    real, calls = getattr(timing, name), []

    def kernel(q, k, v, **kwargs):
        calls.append((tuple(q.shape), kwargs.get("chunk_size")))
        return real(q, k, v, **kwargs)

    monkeypatch.setattr(timing, name, kernel)
    return calls


@pytest.mark.parametrize(("timer", "form", "kernel"), [
    (time_linear_attention, "parallel", "linear_attention_parallel"),
    (time_linear_attention, "recurrent", "linear_attention_recurrent"),
    (time_linear_attention, "chunk", "linear_attention_chunk"),
    (time_delta_rule, "recurrent", "delta_rule_recurrent"),
    (time_delta_rule, "chunk", "delta_rule_chunk"),
])
def test_a_kernel_timing_is_the_fastest_call_of_the_form_it_names(monkeypatch, timer, form,
                                                                 kernel):
    calls = _recorder(monkeypatch, kernel)
    _fake_clock(monkeypatch, [0.4, 0.2, 0.3])
    seconds = timer(form, 32, n_heads=2, head_dim=8, chunk_size=8, repeats=3, warmup=False)
    assert seconds == pytest.approx(0.2)
    chunk = 8 if form == "chunk" else None
    assert calls == [((1, 2, 32, 8), chunk)] * 3


@pytest.mark.parametrize("timer", [time_linear_attention, time_delta_rule])
def test_a_kernel_timing_summarises_the_runs_as_asked(monkeypatch, timer):
    _fake_clock(monkeypatch, [0.4, 0.2, 0.3])
    spread = timer("chunk", 16, n_heads=1, head_dim=4, chunk_size=8, repeats=3,
                   warmup=False, summary=spread_seconds)
    assert (spread.median, spread.low, spread.high) == pytest.approx((0.3, 0.2, 0.4))


@pytest.mark.parametrize("timer", [time_linear_attention, time_delta_rule])
@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"form": "fast", "length": 8}, "form"),
     ({"form": "chunk", "length": 8, "summary": min}, "summary"),
     ({"form": "chunk", "length": 0}, "length"),
     ({"form": "chunk", "length": 8, "repeats": 0}, "repeats"),
     ({"form": "chunk", "length": 8, "chunk_size": 0}, "chunk_size"),
     ({"form": "chunk", "length": 8, "warmup": 1}, "warmup"),
     ({"form": "chunk", "length": 8, "n_heads": 0}, "n_heads")],
)
def test_kernel_timings_reject_bad_input(timer, kwargs, name):
    with pytest.raises(ValueError, match=f"^{name}:"):
        timer(**kwargs)


# ---------------------------------------------------------------- the decode-step timer
@pytest.mark.parametrize(("cached", "queries"), [(True, 1), (False, 64)])
def test_a_decode_step_attends_from_one_query_with_a_cache_and_from_all_without(
        monkeypatch, cached, queries):
    """With a cache the timed step reads one query against the 64 cached keys; without one it
    recomputes the causal pass over all 64 tokens. The result is the fastest timed call."""
    real, calls = timing.attention.softmax_attention, []

    def attend(q, k, v, **kwargs):
        calls.append((q.shape[2], k.shape[2], kwargs["causal"]))
        return real(q, k, v, **kwargs)

    monkeypatch.setattr(timing.attention, "softmax_attention", attend)
    _fake_clock(monkeypatch, [0.3, 0.1])
    seconds = time_decode_step(64, cached=cached, repeats=2, n_heads=1, head_dim=4)
    assert seconds == pytest.approx(0.1)
    assert calls == [(queries, 64, not cached)] * 3  # a warm-up call and two timed ones


@pytest.mark.parametrize(("kwargs", "name"), [({"context": 0, "cached": True}, "context"),
                                              ({"context": 8, "cached": "yes"}, "cached"),
                                              ({"context": 8, "cached": True, "repeats": 0},
                                               "repeats"),
                                              ({"context": 8, "cached": True, "n_heads": 0},
                                               "n_heads")])
def test_time_decode_step_rejects_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        time_decode_step(**kwargs)


def test_slopes_and_lines_are_fitted_over_all_points():
    from attnbook.timing import linear_fit, loglog_slope, median_and_range

    xs = [1, 2, 4, 8]
    assert loglog_slope(xs, [3 * x**1.5 for x in xs]) == pytest.approx(1.5)
    assert linear_fit(xs, [2 + 0.5 * x for x in xs]) == pytest.approx((2, 0.5))
    assert median_and_range([[1, 5], [3, 4], [2, 6]]) == [(2, 1, 3), (5, 4, 6)]
    with pytest.raises(ValueError, match="xs"):
        linear_fit([1, 1], [2, 3])


def test_time_decode_steps_gives_one_row_per_round(monkeypatch):
    from attnbook.timing import time_decode_steps

    rounds = time_decode_steps([8, 16], cached=True, rounds=3, repeats=1,
                               n_heads=1, head_dim=4)
    assert len(rounds) == 3 and all(len(r) == 2 and min(r) > 0 for r in rounds)
    with pytest.raises(ValueError, match="rounds"):
        time_decode_steps([8], cached=True, rounds=0)
