"""Careless and hostile answers to every self-check (attnlab.selfcheck).

Each answer below gets a diagnosis that names what is wrong: never a pass it did not earn, never
an exception out of the checker, and always within the time limit (the tests give half a second;
the diagnosis may take one more second, the time the check takes to stop the function). The answers
are the ones a learner's notebook can produce: a loop that never ends, ``sys.exit()``, an
exception that cannot even print itself, a complex, integer, half-precision or meta tensor, a
tensor subclass, a broken KV cache, inputs changed in place.
"""

from __future__ import annotations

import signal
import sys
import threading
import time

import pytest
import torch
from attnlab import selfcheck as sc
from attnlab._selfcheck_mistakes import attention_mistakes, block_mistakes, multi_head_mistakes
from attnlab.kda import kda_step
from hypothesis import given
from hypothesis import strategies as st

#: The time limit the tests give a check whose answer never returns (seconds), and the limit
#: every other check gets: so generous that no correct or wrong answer meets it, on any machine
#: however busy (a correct answer checked under a short limit would fail on a slow machine).
LIMIT = 0.5
GENEROUS = 60.0
#: Room on top of a limit for the diagnosis to arrive (stopping the function takes up to a
#: second more); only a stuck answer's diagnosis is timed, never the speed of the checks.
ROOM = 10.0


#: Set after every test, so a learner loop the check failed to stop ends with its test instead
#: of running on behind the rest of the suite.
RELEASE = threading.Event()


@pytest.fixture(autouse=True)
def _release_stuck_learners():
    RELEASE.clear()
    yield
    RELEASE.set()
    deadline = time.perf_counter() + ROOM
    while time.perf_counter() < deadline and any(
        t.name.startswith("self-check") and t.is_alive() for t in threading.enumerate()
    ):
        time.sleep(0.05)


def causal_reference(q, k, v):
    return sc.reference_attention(q, k, v, causal=True)


#: Every checker with a correct answer, and whether that answer is a pair (o, new_state).
CHECKS = {
    "attention": (sc.check_attention, sc.reference_attention, False),
    "causal attention": (sc.check_causal_attention, causal_reference, False),
    "multi-head attention": (sc.check_multi_head_attention,
                             sc.reference_multi_head_attention, False),
    "decode step": (sc.check_decode_step, sc.reference_decode_step, False),
    "pre-norm block": (sc.check_prenorm_block, sc.reference_prenorm_block, False),
    "linear-attention step": (sc.check_linear_attention_step,
                              sc.reference_linear_attention_step, True),
    "GLA step": (sc.check_gla_step, sc.reference_gla_step, True),
    "linear chunk": (sc.check_linear_chunk, sc.reference_linear_chunk, True),
    "delta chunk": (sc.check_delta_chunk, sc.reference_delta_chunk, True),
    "gated delta chunk": (sc.check_gated_delta_chunk, sc.reference_gated_delta_chunk, True),
    "delta step": (sc.check_delta_step, sc.reference_delta_step, True),
    "gated delta step": (sc.check_gated_delta_step, sc.reference_gated_delta_step, True),
    "KDA step": (sc.check_kda_step, kda_step, True),
}
PAIRS = [name for name, (_, _, pair) in CHECKS.items() if pair]
#: The checkers whose function receives a state it must leave as it was.
STATEFUL = PAIRS


def check(name: str, answer, time_limit: float = GENEROUS) -> sc.CheckResult:
    """Run checker ``name`` on ``answer`` under ``time_limit``; its diagnosis must come."""
    start = time.perf_counter()
    result = CHECKS[name][0](answer, time_limit=time_limit)
    seconds = time.perf_counter() - start
    assert seconds < time_limit + ROOM, f"{name}: the diagnosis took {seconds:.1f} s"
    assert isinstance(result, sc.CheckResult) and result.message
    return result


def diagnosed(result: sc.CheckResult, mistake: str) -> None:
    assert not result.ok and result.mistake == mistake, result


@pytest.mark.parametrize("name", CHECKS)
def test_the_correct_answer_passes(name):
    assert check(name, CHECKS[name][1]).ok


# --- wrong kinds of answer: each named, on the output and on the state ---------------------------


class Marked(torch.Tensor):
    """A tensor subclass (its own __torch_function__ rules apply to everything done with it)."""


#: An answer's tensor, transformed: (transform, the mistake it is diagnosed as).
WRONG_KINDS = {
    "complex, the right real part": (lambda t: torch.complex(t, torch.ones_like(t)), "dtype"),
    "complex, no imaginary part": (lambda t: t.to(torch.complex64), "dtype"),
    "on the meta device": (lambda t: t.to("meta"), "device"),
    "integer": (lambda t: t.round().long(), "dtype"),
    "boolean": (lambda t: t > 0, "dtype"),
    "half precision": (lambda t: t.half(), "dtype"),
    "a tensor subclass": (lambda t: t.as_subclass(Marked), "type"),
    "sparse": (lambda t: t.to_sparse(), "layout"),
    "a NumPy array": (lambda t: t.numpy(), "type"),
    "None": (lambda t: None, "type"),
}
CASES = [(name, kind, part) for name in CHECKS for kind in WRONG_KINDS
         for part in ((0, 1) if name in PAIRS else (0,))]


@pytest.mark.parametrize(("name", "kind", "part"), CASES)
def test_a_wrong_kind_of_tensor_is_named(name, kind, part):
    reference = CHECKS[name][1]
    transform, mistake = WRONG_KINDS[kind]

    def answer(*args, **kwargs):
        out = reference(*args, **kwargs)
        if name not in PAIRS:
            return transform(out)
        return tuple(transform(x) if i == part else x for i, x in enumerate(out))

    diagnosed(check(name, answer), mistake)


# --- what the learner's code does: loops, exits, raises ------------------------------------------


def never_returns(*args, **kwargs):
    while not RELEASE.is_set():  # a loop that never ends (until its test is over)
        pass


def exits(*args, **kwargs):
    sys.exit(3)


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("not today")


def raises_unprintable(*args, **kwargs):
    raise Unprintable


class Custom(BaseException):
    pass


def raises_base_exception(*args, **kwargs):
    raise Custom("a BaseException that is not an Exception")


def raises_a_long_message(*args, **kwargs):
    raise ValueError("x" * 100_000)


def returns_a_generator(*args, **kwargs):
    yield from ()


@pytest.mark.parametrize("name", CHECKS)
@pytest.mark.parametrize(("answer", "mistake"), [
    (never_returns, "timeout"),
    (exits, "exit"),
    (raises_unprintable, "exception"),
    (raises_base_exception, "exception"),
    (raises_a_long_message, "exception"),
    (returns_a_generator, "type"),
])
def test_what_the_learners_code_does_becomes_a_diagnosis(name, answer, mistake):
    result = check(name, answer, LIMIT if answer is never_returns else GENEROUS)
    diagnosed(result, mistake)
    assert len(result.message) < 1000
    if answer is never_returns:
        assert f"did not return within {LIMIT:g} s" in result.message
        assert "stopped" in result.message
    if answer is raises_unprintable:
        assert "Unprintable" in result.message and "cannot be shown" in result.message


@pytest.mark.parametrize("name", CHECKS)
def test_an_interrupt_raised_by_the_function_is_not_swallowed(name):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        CHECKS[name][0](interrupted, time_limit=GENEROUS)


def test_interrupting_the_kernel_interrupts_the_check_and_stops_the_function():
    """Ctrl-C (SIGINT to the main thread) while the check waits: KeyboardInterrupt reaches the
    notebook, and the learner's loop does not keep running behind it."""
    main = threading.main_thread().ident
    timer = threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT))
    timer.start()
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        sc.check_attention(never_returns, time_limit=20)
    assert time.perf_counter() - start < ROOM  # not the 20 s limit

    def checks_alive():
        return [t for t in threading.enumerate()
                if t.name.startswith("self-check") and t.is_alive()]

    deadline = time.perf_counter() + ROOM
    while checks_alive() and time.perf_counter() < deadline:
        time.sleep(0.05)
    assert not checks_alive()


def test_a_loop_that_swallows_the_stop_signal_is_reported_honestly():
    """``except BaseException: pass`` inside a loop may catch every attempt to stop it: the
    diagnosis still comes on time, and says whether the function was stopped or still runs."""
    def swallows_everything(q, k, v):
        while not RELEASE.is_set():
            try:
                while not RELEASE.is_set():
                    pass
            except BaseException:  # noqa: BLE001 - hostile on purpose
                pass

    result = check("attention", swallows_everything, LIMIT)
    diagnosed(result, "timeout")
    assert "it was stopped" in result.message or "still running" in result.message


def test_a_function_stuck_inside_one_long_call_is_reported_as_still_running():
    """Python cannot stop ``time.sleep``: the diagnosis comes on time and says to restart."""
    result = check("attention", lambda q, k, v: time.sleep(LIMIT + 2), LIMIT)
    diagnosed(result, "timeout")
    assert "still running" in result.message and "Restart the kernel" in result.message


def test_a_result_instead_of_a_function_is_explained():
    q = torch.zeros(1, 1, 2, 4)
    result = check("attention", sc.reference_attention(q, q, q))
    diagnosed(result, "not_callable")
    assert "without calling it" in result.message


# --- the KV cache: a step that breaks it -------------------------------------------------------


def sets_the_keys_to_none(q_t, k_t, v_t, cache):
    o = sc.reference_decode_step(q_t, k_t, v_t, cache)
    cache.k = None
    return o


def deletes_the_values(q_t, k_t, v_t, cache):
    o = sc.reference_decode_step(q_t, k_t, v_t, cache)
    del cache.v
    return o


def moves_the_cache_to_meta(q_t, k_t, v_t, cache):
    o = sc.reference_decode_step(q_t, k_t, v_t, cache)
    cache.k, cache.v = cache.k.to("meta"), cache.v.to("meta")
    return o


def replaces_append(q_t, k_t, v_t, cache):
    cache.append = lambda *args: (cache.k, cache.v)
    return sc.reference_decode_step(q_t, k_t, v_t, cache)


@pytest.mark.parametrize(("answer", "mistake"), [
    (sets_the_keys_to_none, "cache_broken"),
    (deletes_the_values, "cache_broken"),
    (moves_the_cache_to_meta, "cache_broken"),
    (replaces_append, "exception"),  # the reference then attends over an empty cache
])
def test_a_step_that_breaks_the_cache_is_told_so(answer, mistake):
    result = check("decode step", answer)
    diagnosed(result, mistake)
    if mistake == "cache_broken":
        assert "cache.append(k_t, v_t)" in result.message


# --- inputs changed in place: the diagnosis is the one of the answer, not of the vandalism -------


def vandalise(tensors, how: str, factor: float) -> None:
    for t in tensors:
        if how == "scale":
            t.mul_(factor)
        elif how == "zero":
            t.zero_()
        elif how == "nan":
            t.fill_(float("nan"))
        else:
            t.resize_(0)


def tensors_of(args, kwargs, *, skip=("state",)):
    return [x for x in (*args, *(v for n, v in kwargs.items() if n not in skip))
            if isinstance(x, torch.Tensor)]


HOW = st.sampled_from(["scale", "zero", "nan", "resize"])
FACTOR = st.floats(-4, 4, allow_nan=False)


@given(name=st.sampled_from(list(CHECKS)), how=HOW, factor=FACTOR)
def test_a_correct_answer_that_then_changes_its_inputs_still_passes(name, how, factor):
    reference = CHECKS[name][1]

    def answer(*args, **kwargs):
        out = reference(*args, **kwargs)
        if isinstance(out, tuple):  # the state handed on must not alias an input
            out = tuple(x.clone() for x in out)
        vandalise(tensors_of(args, kwargs), how, factor)
        return out

    assert check(name, answer).ok


@given(name=st.sampled_from(STATEFUL), how=HOW, factor=FACTOR)
def test_changing_the_state_in_place_is_diagnosed_as_such(name, how, factor):
    reference = CHECKS[name][1]

    def answer(*args, **kwargs):
        o, new = (x.clone() for x in reference(*args, **kwargs))
        vandalise([kwargs["state"]], how, factor if factor != 1 else 2.0)
        return o, new

    diagnosed(check(name, answer), "in_place")


def mistaken(name: str, mistake: str):
    """An answer with one known mistake, computed from its arguments by the checker's table."""
    tables = {
        "attention": lambda q, k, v: attention_mistakes(q, k, v, causal=False),
        "causal attention": lambda q, k, v: attention_mistakes(q, k, v, causal=True),
        "multi-head attention": multi_head_mistakes,
        "pre-norm block": block_mistakes,
    }
    return lambda *args: tables[name](*args)[mistake][0]()


MISTAKES = [("attention", "no_scale"), ("causal attention", "mask_missing"),
            ("multi-head attention", "scale_d_model"), ("multi-head attention", "one_head"),
            ("pre-norm block", "post_norm")]


@given(case=st.sampled_from(MISTAKES), how=HOW, factor=FACTOR)
def test_changing_the_inputs_after_a_mistake_does_not_change_its_diagnosis(case, how, factor):
    name, mistake = case
    plain = mistaken(name, mistake)

    def answer(*args):
        out = plain(*args).clone()
        vandalise(tensors_of(args, {}), how, factor)
        return out

    result = check(name, answer)
    assert result == check(name, plain) and result.mistake == mistake, result


def test_scaling_w_q_in_place_is_diagnosed_as_scaling_it():
    def in_place(x, w_q, w_k, w_v, w_o, n_heads):
        w_q.mul_(2)
        return sc.reference_multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads)

    def out_of_place(x, w_q, w_k, w_v, w_o, n_heads):
        return sc.reference_multi_head_attention(x, 2 * w_q, w_k, w_v, w_o, n_heads)

    result = check("multi-head attention", in_place)
    assert not result.ok and result == check("multi-head attention", out_of_place)
