"""The package at its edges, as a careless or hostile caller meets it (issue 24).

First half: every float parameter of a public function (a kernel's or a step's scale, the
normaliser's eps, the RoPE bases, the layers' norm eps, the sampling temperature, the
calculator's bandwidth and overhead, the bytes of a cache entry, a config's norm eps, the
decay initialisation's ranges) is fed NaN, ±inf, 0, negative, huge, tiny and arbitrary values
by hypothesis. Each call either raises a ValueError/TypeError that names the parameter, or
returns a finite answer that is right: a kernel's equals its float64 definition (the
recurrence, or the cached decode for softmax attention) at the same parameter. A last test
checks that the sweep covers every float parameter of the package's public functions.

Second half: the model and the layers at their edges (sampling at any temperature, token ids
of every integer dtype, empty batches, fully masked rows) and the size and memory guards,
which refuse before allocating and whose advice works.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import pkgutil
import re

import attnlab
import pytest
import torch
import torch.nn.functional as F
from attnlab import (
    DEEPSEEK_V3,
    KIMI_LINEAR_48B_A3B,
    LLAMA3_8B,
    SOPHIA_NANO,
    DeltaNetLayer,
    GatedDeltaNetLayer,
    GLALayer,
    HybridLM,
    KDALayer,
    LinearAttentionLayer,
    MultiHeadAttention,
    MultiHeadLatentAttention,
    apply_rope,
    attention,
    attention_scores,
    causal_mask,
    decay_masked_attention,
    delta_rule_chunk,
    delta_rule_chunk_reference,
    delta_rule_parallel,
    delta_rule_recurrent,
    delta_rule_step,
    gated_delta_rule_chunk,
    gated_delta_rule_chunk_reference,
    gated_delta_rule_recurrent,
    gated_delta_rule_step,
    gla_chunk,
    gla_chunk_reference,
    gla_recurrent,
    gla_step,
    kda_chunk,
    kda_chunk_reference,
    kda_parallel,
    kda_recurrent,
    kda_step,
    kv_cache_bytes,
    linear_attention_chunk,
    linear_attention_chunk_reference,
    linear_attention_parallel,
    linear_attention_recurrent,
    linear_attention_step,
    model,
    rope_angles,
    softmax_attention,
    softmax_attention_online,
    stable_softmax,
)
from attnlab.blocks import RMSNorm
from attnlab.gated import init_softplus_decay
from attnlab.kv_cache import decode_with_cache
from attnlab.model import next_token, parameter_count
from attnlab.positions import sinusoidal_positions
from attnlab.serving import (
    H200,
    Deployment,
    Hardware,
    decode_step_bytes,
    largest_batch,
    step_seconds,
    what_if,
)
from hypothesis import given
from hypothesis import strategies as st

# ---------------------------------------------------------------------------- hostile numbers
SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0, -1.0, -1e-300, 1e300, 3.5e38, 1e38,
           1e19, 1e-45, 5e-324, 1e-300, 1, 2, 10**400, True]
#: NaN, ±inf, zeros, negatives, huge (beyond float32 and float64), tiny (subnormals), ints,
#: an integer too large for a float and a bool, then any float at all.
hostile = st.one_of(st.sampled_from(SPECIAL), st.floats(allow_nan=True, allow_infinity=True))


def names(message: str, argument: str) -> bool:
    """Whether ``message`` names ``argument`` as a word (``scale`` in ``"scale, q, k: ..."``)."""
    return re.search(rf"(^|[^\w.]){re.escape(argument)}([^\w]|$)", message) is not None


def refused_or_right(call, argument: str, check) -> None:
    """``call()`` raises ValueError/TypeError naming ``argument``, or ``check(result)`` holds."""
    try:
        result = call()
    except (ValueError, TypeError) as error:
        assert names(str(error), argument), f"does not name {argument!r}: {error}"
        return
    check(result)


def assert_right(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """``actual`` is finite and equals the float64 ``expected`` to float32 rounding, relative
    to the largest entry (plus a floor for answers that underflow to 0 in float32)."""
    assert torch.isfinite(actual).all(), "NaN or inf in the answer"
    error = (actual.double() - expected).abs().max().item()
    assert error <= 1e-3 * expected.abs().max().item() + 1e-30, f"max error {error:.3g}"


# ---------------------------------------------------------------------------- kernel inputs
B, H, T, DK, DV, CHUNK = 1, 2, 7, 4, 3, 4  # T = 7 crosses a chunk of 4


def _inputs() -> dict[str, torch.Tensor]:
    """One set of kernel inputs, float32 values held in float64 (so both dtypes see the same
    numbers)."""
    gen = torch.Generator().manual_seed(24)
    q = torch.randn(B, H, T, DK, generator=gen, dtype=torch.float64)
    k = F.normalize(torch.randn(B, H, T, DK, generator=gen, dtype=torch.float64), dim=-1)
    values = {
        "q": q, "k": k, "v": torch.randn(B, H, T, DV, generator=gen, dtype=torch.float64),
        "g_channel": -torch.rand(B, H, T, DK, generator=gen, dtype=torch.float64),
        "g_scalar": -torch.rand(B, H, T, generator=gen, dtype=torch.float64),
        "beta": torch.rand(B, H, T, generator=gen, dtype=torch.float64),
        "state": 0.3 * torch.randn(B, H, DK, DV, generator=gen, dtype=torch.float64),
        "q_pos": F.elu(q) + 1, "k_pos": F.elu(k) + 1,
        "z": torch.rand(B, H, DK, generator=gen, dtype=torch.float64),
    }
    return {name: x.float().double() for name, x in values.items()}


X64 = _inputs()
X32 = {name: x.float() for name, x in X64.items()}
SEQUENCES = ("q", "k", "v", "g_channel", "g_scalar", "beta")  # the inputs with a time axis

#: family -> (its recurrence, the gate and β it takes)
FAMILIES = {
    "linear": (linear_attention_recurrent, {}),
    "gla": (gla_recurrent, {"g": "g_channel"}),
    "gla_scalar": (gla_recurrent, {"g": "g_scalar"}),
    "delta": (delta_rule_recurrent, {"beta": "beta"}),
    "gated_delta": (gated_delta_rule_recurrent, {"g": "g_scalar", "beta": "beta"}),
    "kda": (kda_recurrent, {"g": "g_channel", "beta": "beta"}),
}
SEQUENCE_KERNELS = {
    linear_attention_recurrent: "linear", linear_attention_parallel: "linear",
    linear_attention_chunk: "linear", linear_attention_chunk_reference: "linear",
    gla_recurrent: "gla", gla_chunk: "gla", gla_chunk_reference: "gla",
    delta_rule_recurrent: "delta", delta_rule_parallel: "delta", delta_rule_chunk: "delta",
    delta_rule_chunk_reference: "delta",
    gated_delta_rule_recurrent: "gated_delta", gated_delta_rule_chunk: "gated_delta",
    gated_delta_rule_chunk_reference: "gated_delta",
    kda_recurrent: "kda", kda_parallel: "kda", kda_chunk: "kda", kda_chunk_reference: "kda",
    decay_masked_attention: "gla_scalar",
}
STEPS = {linear_attention_step: "linear", gla_step: "gla", delta_rule_step: "delta",
         gated_delta_rule_step: "gated_delta", kda_step: "kda"}


def _gates(family: str, x: dict, t: int | None = None) -> dict:
    """The gate and β keywords of ``family`` from ``x`` (token ``t`` only, if given)."""
    gates = {name: x[key] for name, key in FAMILIES[family][1].items()}
    return gates if t is None else {name: g[:, :, t] for name, g in gates.items()}


def _qkv(x: dict, t: int | None = None) -> tuple:
    return tuple(x[n] if t is None else x[n][:, :, t] for n in ("q", "k", "v"))


def _sequence_scale(kernel):
    family = SEQUENCE_KERNELS[kernel]
    extra = {"chunk_size": CHUNK} if "chunk" in kernel.__name__ else {}

    def call(value):
        return kernel(*_qkv(X32), **_gates(family, X32), scale=value, **extra)[0]

    def check(value):
        expected, _ = FAMILIES[family][0](*_qkv(X64), **_gates(family, X64), scale=value)
        return lambda o: assert_right(o, expected)

    return call, check


def _step_scale(step):
    family = STEPS[step]

    def call(value):
        return step(*_qkv(X32, 0), **_gates(family, X32, 0), state=X32["state"],
                    scale=value)[0]

    def check(value):  # the recurrence's first token, from the same state
        first = {name: X64[name][:, :, :1] for name in SEQUENCES}
        expected, _ = FAMILIES[family][0](*_qkv(first), **_gates(family, first),
                                          initial_state=X64["state"], scale=value)
        return lambda o: assert_right(o, expected[:, :, 0])

    return call, check


def _normalised_eps(kernel):
    """Normalised linear attention's eps, on positive features (as the layer's φ gives)."""
    def args(x):
        if kernel is linear_attention_step:
            return ((x["q_pos"][:, :, 0], x["k_pos"][:, :, 0], x["v"][:, :, 0]),
                    {"state": (x["state"].abs(), x["z"])})
        return (x["q_pos"], x["k_pos"], x["v"]), {}

    extra = {"chunk_size": CHUNK} if kernel is linear_attention_chunk else {}

    def call(value):
        tensors, state = args(X32)
        return kernel(*tensors, normalize=True, eps=value, **state, **extra)[0]

    def check(value):
        tensors, state = args(X64)
        definition = kernel if kernel is linear_attention_step else linear_attention_recurrent
        expected, _ = definition(*tensors, normalize=True, eps=value, **state)
        return lambda o: assert_right(o, expected)

    return call, check


def _softmax_scale(kernel):
    def call(value):
        o = kernel(*_qkv(X32), scale=value)
        return o if isinstance(o, torch.Tensor) else o[0]

    def check(value):
        if kernel is decode_with_cache:
            expected, _ = softmax_attention(*_qkv(X64), scale=value)
        else:
            expected = decode_with_cache(*_qkv(X64), scale=value)
        return lambda o: assert_right(o, expected)

    return call, check


def _scores_scale():
    def call(value):
        return attention_scores(X32["q"], X32["k"], scale=value)

    def check(value):
        expected = (value * X64["q"]) @ X64["k"].transpose(-2, -1)
        return lambda s: assert_right(s, expected)

    return call, check


# ---------------------------------------------------------------------------- other parameters
POSITIONS = torch.arange(T)


def _rope_angles_base():
    def call(value):
        return rope_angles(POSITIONS, DK, value)

    def check(value):
        i = torch.arange(DK // 2, dtype=torch.float64)
        expected = POSITIONS.double()[:, None] * float(value) ** (-2 * i / DK)
        return lambda angles: assert_right(angles, expected)

    return call, check


def _sinusoidal_base():
    def call(value):
        return sinusoidal_positions(8, DK, value)

    def check(value):  # P[p, 2i] = sin(p ω_i), P[p, 2i+1] = cos(p ω_i), ω_i = base^(−2i/d)
        angle = torch.arange(8.0, dtype=torch.float64)[:, None] * float(value) ** (
            -torch.arange(0, DK, 2, dtype=torch.float64) / DK)
        expected = torch.stack([angle.sin(), angle.cos()], -1).flatten(-2)
        return lambda table: assert_right(table, expected)

    return call, check


def _apply_rope_base():
    def call(value):
        return apply_rope(X32["q"], POSITIONS, value)

    def pair_norms(x):
        return x.view(*x.shape[:-1], -1, 2).norm(dim=-1)

    def check(value):  # a rotation keeps the norm of every pair
        return lambda y: assert_right(pair_norms(y), pair_norms(X64["q"]))

    return call, check


D_MODEL = 8
X_LAYER = torch.randn(1, 5, D_MODEL, generator=torch.Generator().manual_seed(5))


def _finite(y):
    y = y[0] if isinstance(y, tuple) else y
    assert torch.isfinite(y).all(), "NaN or inf in the answer"


def _layer_option(make, argument: str):
    """A layer built with ``argument=value`` runs x to a finite output."""
    def call(value):
        torch.manual_seed(0)
        return make(**{argument: value})(X_LAYER)

    return call, lambda value: _finite


def _attention_rope_base(make):
    """An attention layer with ``rope_base``: finite, and decoding in two pieces through its
    cache (positions continued from the cache) gives the full pass's output."""
    layer = {}

    def call(value):
        torch.manual_seed(0)
        layer["it"] = make(rope_base=value).double()
        return layer["it"](X_LAYER.double())[0]

    def check(value):
        def same_in_pieces(y):
            first, cache = layer["it"](X_LAYER.double()[:, :2], use_cache=True)
            rest, _ = layer["it"](X_LAYER.double()[:, 2:], cache)
            assert_right(y, torch.cat([first, rest], dim=1))
        return same_in_pieces

    return call, check


def _rms_norm_eps():
    def call(value):
        return RMSNorm(D_MODEL, eps=value)(X_LAYER)

    def check(value):
        x = X_LAYER.double()
        expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + value)
        return lambda y: assert_right(y.detach(), expected)

    return call, check


LOGITS = torch.tensor([[0.5, 2.0, -1.0, 1.9], [3.0, -2.0, 0.0, 2.5]])


def _next_token_temperature():
    def call(value):
        return next_token(LOGITS, value, torch.Generator().manual_seed(0))

    def check(value):
        def a_valid_sample(ids):
            assert ids.shape == (2, 1) and ((ids >= 0) & (ids < 4)).all()
            if value < 1e-3:  # the gaps are >= 0.1: anything but the argmax has p < e^-100
                assert torch.equal(ids, LOGITS.argmax(-1, keepdim=True))
        return a_valid_sample

    return call, check


NANO = HybridLM(SOPHIA_NANO).eval()
PROMPT = torch.tensor([[3, 1, 4, 1]])


def _generate_temperature():
    def call(value):
        return NANO.generate(PROMPT, 2, temperature=value,
                             generator=torch.Generator().manual_seed(0))

    def check(value):
        def continues_the_prompt(ids):
            assert ids.shape == (1, 6) and torch.equal(ids[:, :4], PROMPT)
            assert ((ids >= 0) & (ids < SOPHIA_NANO.vocab_size)).all()
        return continues_the_prompt

    return call, check


STEP = decode_step_bytes(LLAMA3_8B, 4096, 8)


def _deployment_fraction():
    def call(value):
        return Deployment(H200, memory_fraction=value)

    def check(value):
        def usable_is_that_share(deployment):
            assert 0 < value <= 1
            assert deployment.usable_bytes == math.floor(value * H200.memory_bytes)
        return usable_is_that_share
    return call, check


def _hardware_bandwidth():
    def call(value):
        return Hardware("a GPU", 80 * 10**9, value)

    def check(value):
        def kept(hardware):
            assert math.isfinite(value) and value > 0
            assert hardware.bandwidth == value
        return kept
    return call, check


def _step_seconds(argument: str):
    def call(value):
        return step_seconds(STEP, **{"bandwidth": 3.35e12, "overhead": 1e-4, argument: value})

    def check(value):
        args = {"bandwidth": 3.35e12, "overhead": 1e-4, argument: value}

        def the_formula(seconds):
            assert math.isfinite(seconds)
            assert seconds == pytest.approx(STEP.total / args["bandwidth"] + args["overhead"])
        return the_formula

    return call, check


def _kv_cache_bytes():
    def call(value):
        return kv_cache_bytes(2, 2, 8, 16, value)

    def check(value):
        def whole_bytes(n):
            bits = round(8 * value)
            assert isinstance(n, int) and n == 2 * 2 * -(-2 * 8 * 16 * bits // 8)
        return whole_bytes

    return call, check


def _config_norm_eps():
    def call(value):
        return dataclasses.replace(SOPHIA_NANO, norm_eps=value)

    def check(value):
        def kept(config):
            assert config.norm_eps == value and math.isfinite(config.norm_eps)
        return kept

    return call, check


def _decay_range(argument: str, pair_of):
    def call(value):
        torch.manual_seed(0)
        return init_softplus_decay(3, 5, **{argument: pair_of(value)})

    def check(value):
        low, high = pair_of(value)

        def inside_the_range(result):
            a_log, dt_bias = result
            assert torch.isfinite(a_log).all() and torch.isfinite(dt_bias).all()
            spread = 1e-5 * high  # rounding of exp(log(.)) in float32
            if argument == "a_range":
                assert (a_log.exp() >= low - spread).all() and (a_log.exp() <= high + spread).all()
            else:
                dt = F.softplus(dt_bias.double())
                assert (dt >= low * (1 - 1e-4)).all() and (dt <= high * (1 + 1e-4)).all()
        return inside_the_range

    return call, check


#: (public function, float parameter) -> (the parameter, call(value), check(value)(result)).
SWEEP = {
    **{(k.__name__, "scale"): ("scale", *_sequence_scale(k)) for k in SEQUENCE_KERNELS},
    **{(s.__name__, "scale"): ("scale", *_step_scale(s)) for s in STEPS},
    **{(k.__name__, "eps"): ("eps", *_normalised_eps(k))
       for k in (linear_attention_recurrent, linear_attention_parallel,
                 linear_attention_chunk, linear_attention_step)},
    **{(k.__name__, "scale"): ("scale", *_softmax_scale(k))
       for k in (softmax_attention, softmax_attention_online, decode_with_cache)},
    ("attention_scores", "scale"): ("scale", *_scores_scale()),
    ("rope_angles", "base"): ("base", *_rope_angles_base()),
    ("apply_rope", "base"): ("base", *_apply_rope_base()),
    ("sinusoidal_positions", "base"): ("base", *_sinusoidal_base()),
    ("MultiHeadAttention", "rope_base"): (
        "rope_base", *_attention_rope_base(lambda **o: MultiHeadAttention(D_MODEL, 2, 4, **o))),
    ("MultiHeadLatentAttention", "rope_base"): ("rope_base", *_attention_rope_base(
        lambda **o: MultiHeadLatentAttention(D_MODEL, 2, 4, kv_lora_rank=6,
                                             qk_rope_head_dim=2, **o))),
    **{(layer.__name__, "norm_eps"): (
        "norm_eps", *_layer_option(lambda layer=layer, **o: layer(D_MODEL, 2, 4, **o),
                                   "norm_eps"))
       for layer in (LinearAttentionLayer, GLALayer, DeltaNetLayer, GatedDeltaNetLayer,
                     KDALayer)},
    ("RMSNorm", "eps"): ("eps", *_rms_norm_eps()),
    ("next_token", "temperature"): ("temperature", *_next_token_temperature()),
    ("HybridLM.generate", "temperature"): ("temperature", *_generate_temperature()),
    ("step_seconds", "bandwidth"): ("bandwidth", *_step_seconds("bandwidth")),
    ("step_seconds", "overhead"): ("overhead", *_step_seconds("overhead")),
    ("Deployment", "memory_fraction"): (
        "Deployment.memory_fraction", *_deployment_fraction()),
    ("Hardware", "bandwidth"): ("Hardware.bandwidth", *_hardware_bandwidth()),
    ("kv_cache_bytes", "bytes_per_element"): ("bytes_per_element", *_kv_cache_bytes()),
    ("ModelConfig", "norm_eps"): ("ModelConfig.norm_eps", *_config_norm_eps()),
    ("init_softplus_decay", "a_range"): ("a_range", *_decay_range(
        "a_range", lambda v: (v, 16.0))),
    ("init_softplus_decay", "dt_range"): ("dt_range", *_decay_range(
        "dt_range", lambda v: (1e-3, v))),
}


@pytest.mark.parametrize("case", list(SWEEP), ids=[".".join(c) for c in SWEEP])
@given(value=hostile)
def test_every_float_parameter_is_refused_by_name_or_gives_the_right_finite_answer(case, value):
    argument, call, check = SWEEP[case]
    refused_or_right(lambda: call(value), argument, lambda result: check(value)(result))


#: Parameters for which 0 has a meaning: no overhead, greedy sampling, no normaliser eps.
ZERO_ALLOWED = {"overhead", "temperature"} | {c[1] for c in SWEEP if c[0].startswith("linear")}


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1.0, 0.0])
@pytest.mark.parametrize("case", list(SWEEP), ids=[".".join(c) for c in SWEEP])
def test_nan_inf_and_negative_are_always_refused_and_zero_where_it_means_nothing(case, value):
    argument, call, _ = SWEEP[case]
    if value == 0 and case[1] in ZERO_ALLOWED:
        return
    with pytest.raises((ValueError, TypeError)) as info:
        call(value)
    assert names(str(info.value), argument), str(info.value)


#: Public functions with float parameters the sweep leaves out, and why.
NOT_SWEPT = {
    "checks": "the validators' own bounds (check_range, check_float_in, check_number)",
    "train": "the training loop's settings (tested on their own below)",
    "selfcheck": "the learner self-checks",
}


def _float_parameters():
    """(qualified name, parameter) of every float parameter (annotated float, with a float
    default, or named ``scale``) of a public function, class or method of ``attnlab``'s
    modules."""
    found = set()
    for info in pkgutil.iter_modules(attnlab.__path__):
        if info.name.startswith("_") or info.name in NOT_SWEPT:
            continue
        module = importlib.import_module(f"attnlab.{info.name}")
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            members = [(name, obj)]
            if inspect.isclass(obj):
                members += [(f"{name}.{m}", f) for m, f in vars(obj).items()
                            if inspect.isfunction(f) and not m.startswith("_")]
            for qualified, fn in members:
                if not callable(fn):
                    continue
                for p in inspect.signature(fn).parameters.values():
                    annotation = str(p.annotation)
                    floating = isinstance(p.default, float) or (
                        "float" in annotation and "Tensor" not in annotation)
                    if p.name == "scale" or floating:
                        found.add((qualified, p.name))
    return found


def test_the_sweep_covers_every_float_parameter_of_the_package():
    found = _float_parameters()
    assert len(found) > 40, "the search for float parameters found almost nothing"
    assert found == set(SWEEP), f"not swept: {sorted(found - set(SWEEP))}; no longer there: " \
                                f"{sorted(set(SWEEP) - found)}"


# ---------------------------------------------------------------------------- softmax edges
def test_stable_softmax_takes_masked_scores_and_refuses_nan_and_plus_inf():
    x = torch.tensor([[1.0, -math.inf, 2.0], [-math.inf, -math.inf, -math.inf]])
    weights = stable_softmax(x)
    assert torch.allclose(weights[0], torch.softmax(torch.tensor([1.0, -1e30, 2.0]), -1))
    assert torch.equal(weights[1], torch.zeros(3))  # a fully masked row: weights 0, not NaN
    for bad, found in ((math.inf, r"\+inf"), (math.nan, "NaN")):
        with pytest.raises(ValueError, match=rf"^x: expected finite scores or -inf .*{found}"):
            stable_softmax(torch.tensor([1.0, bad, 2.0]))
    with pytest.raises(ValueError, match="^dim: "):
        stable_softmax(x, dim=2)


def test_a_huge_scale_is_refused_before_the_scores_overflow():
    q = torch.ones(1, 1, 2, 4)
    with pytest.raises(ValueError, match=r"^scale, q, k: expected scores \|s·q·k\| <= 1.84e\+19"):
        softmax_attention(q, q, q, scale=1e19)
    o, _ = softmax_attention(q, q, q, scale=1e18)  # just inside: finite, and right
    assert torch.equal(o, torch.ones(1, 1, 2, 4))
    with pytest.raises(ValueError, match=r"^scale, q, k: "):
        kda_chunk(q * 1e20, F.normalize(q, dim=-1), q, g=-torch.ones(1, 1, 2, 4),
                  beta=torch.ones(1, 1, 2))


# ---------------------------------------------------------------------------- memory guards
def test_the_memory_guards_refuse_before_allocating():
    q = torch.zeros(1, 1, 1, 8).expand(1, 1, 65_536, 8)  # no memory of its own
    with pytest.raises(ValueError, match=r"^q, k: .*\[1, 1, 65536, 65536\] would take 16 GiB .*"
                                         r"at most 4,096 query rows at a time"):
        softmax_attention(q, q, q)
    with pytest.raises(ValueError, match=r"^q, k: .*causal mask \[Tq, Tk\] = \[65536, 65536\]"):
        softmax_attention_online(q, q, q)
    with pytest.raises(ValueError, match=r"^t_q, t_k: .*causal mask"):
        causal_mask(10**6, 10**6)
    with pytest.raises(ValueError, match=r"^dim: the table of RoPE angles \[T, dim/2\]"):
        rope_angles(torch.arange(4), 2 * 10**9)
    with pytest.raises(ValueError, match=r"^x: .*feed x through the cache in pieces of at most"):
        MultiHeadAttention(8, 2, 4)(torch.zeros(1, 1, 8).expand(1, 65_536, 8))


def test_the_advised_pieces_fit_and_give_the_full_result(monkeypatch):
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 2, 40, 4, generator=gen, dtype=torch.float64) for _ in "qkv")
    full, _ = softmax_attention(q, k, v)
    monkeypatch.setattr(attention, "MAX_SCORE_BYTES", 2 * 2 * 40 * 40 * 8 - 1)
    with pytest.raises(ValueError, match="at most 39 query rows") as info:
        softmax_attention(q, k, v)
    rows = int(re.search(r"at most (\d+) query rows", str(info.value)).group(1))
    pieces = [softmax_attention(q[:, :, i:i + rows], k[:, :, :i + rows], v[:, :, :i + rows])[0]
              for i in range(0, 40, rows)]
    assert torch.allclose(torch.cat(pieces, dim=2), full, atol=1e-12)


def test_the_model_refuses_a_too_long_pass_and_takes_it_in_the_advised_pieces(monkeypatch):
    ids = torch.randint(0, SOPHIA_NANO.vocab_size, (1, 24), generator=torch.Generator()
                        .manual_seed(1))
    full, _ = NANO(ids)
    heads = max(b.mixer.n_heads for b in NANO.blocks if b.kind in ("attn", "mla"))
    monkeypatch.setattr(attention, "MAX_SCORE_BYTES", heads * 24 * 24 * 4 - 1)
    with pytest.raises(ValueError, match="^input_ids: .*in pieces of at most 23 tokens") as info:
        NANO(ids)
    size = int(re.search(r"at most (\d+) tokens", str(info.value)).group(1))
    logits, cache = NANO(ids[:, :size], use_cache=True)
    rest, _ = NANO(ids[:, size:], cache)
    assert torch.allclose(torch.cat([logits, rest], dim=1), full, atol=1e-4)


@pytest.mark.parametrize("config", [KIMI_LINEAR_48B_A3B, DEEPSEEK_V3])
def test_a_large_preset_is_refused_before_allocating_and_builds_on_the_meta_device(config):
    with pytest.raises(ValueError, match=rf"^config: {re.escape(config.name)} builds a model "
                                         r"of [\d,]+ parameters, [\d.]+ GiB in torch.float32, "
                                         r"above attnlab.model.MAX_MODEL_BYTES .*"
                                         r'device="meta".*allow_large=True'):
        HybridLM(config)
    meta = HybridLM(config, device="meta")
    assert {p.device.type for p in meta.parameters()} == {"meta"}
    assert sum(p.numel() for p in meta.parameters()) == parameter_count(config) > 10**9


def test_the_size_guard_counts_what_the_model_allocates(monkeypatch):
    n = sum(p.numel() for p in NANO.parameters())
    assert parameter_count(SOPHIA_NANO) == n
    monkeypatch.setattr(model, "MAX_MODEL_BYTES", 4 * n - 1)
    with pytest.raises(ValueError, match=f"^config: Sophia-nano builds a model of {n:,} "):
        HybridLM(SOPHIA_NANO)
    assert sum(p.numel() for p in HybridLM(SOPHIA_NANO, allow_large=True).parameters()) == n
    for bad, argument in (({"allow_large": 1}, "allow_large"), ({"device": "nowhere"}, "device")):
        with pytest.raises(ValueError, match=f"^{argument}: "):
            HybridLM(SOPHIA_NANO, **bad)


def test_a_meta_model_is_refused_to_run_and_ids_must_be_on_the_models_device():
    meta = HybridLM(SOPHIA_NANO, device="meta")
    with pytest.raises(ValueError, match=r"^model: built on the meta device"):
        meta(PROMPT.to("meta"))
    with pytest.raises(ValueError, match=r"^input_ids: expected token ids on cpu"):
        NANO(PROMPT.to("meta"))


# ---------------------------------------------------------------------------- the model's edges
def test_sampling_at_a_vanishing_temperature_is_greedy():
    greedy = NANO.generate(PROMPT, 5)
    for temperature in (1e-30, 2e-38):  # logits / T overflow to -inf: still a valid sample
        assert torch.equal(NANO.generate(PROMPT, 5, temperature=temperature), greedy)
    for temperature in (1e-45, 5e-324):  # 0 in float32: refused, with the advice to pass 0
        with pytest.raises(ValueError, match=r"^temperature: expected 0 \(greedy\) or a number "
                                             r">= 1.18e-38 .* as 0 does\), got"):
            NANO.generate(PROMPT, 5, temperature=temperature)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_token_ids_of_either_index_dtype_give_the_same_logits(dtype):
    assert torch.equal(NANO(PROMPT.to(dtype))[0], NANO(PROMPT)[0])


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.bool,
                                   torch.float32])
def test_other_id_dtypes_are_refused_naming_input_ids_and_the_fix(dtype):
    ids = torch.tensor([[255 if dtype is torch.uint8 else 1, 0]]).to(dtype)
    with pytest.raises(ValueError, match=rf"^input_ids: expected an integer dtype .* got "
                                         rf"{dtype}; convert the ids with input_ids.long\(\)"):
        NANO(ids)


def test_ids_are_compared_with_the_vocabulary_as_python_ints():
    with pytest.raises(ValueError, match=r"^input_ids: expected token ids in \[0, 256\), got "
                                         r"min 0 and max 256"):
        NANO(torch.tensor([[0, 256]], dtype=torch.int32))


@pytest.mark.parametrize("shape", [(0, 5), (2, 0), (0, 0)])
def test_an_empty_prompt_is_refused_naming_input_ids(shape):
    with pytest.raises(ValueError, match=r"^input_ids: expected a 2-D tensor \[B, T\] with "
                                         r"B >= 1 sequences of T >= 1 tokens"):
        NANO.generate(torch.zeros(shape, dtype=torch.long), 2)


def test_the_calculator_refuses_an_empty_context_instead_of_contradicting_itself():
    for call in (lambda: what_if(LLAMA3_8B, 0, 1, 80 * 10**9),
                 lambda: largest_batch(LLAMA3_8B, 0, 80 * 10**9)):
        with pytest.raises(ValueError, match=r"^context: expected a number of tokens >= 1"):
            call()
    answer = str(what_if(LLAMA3_8B, 1, 1, 80 * 10**9))
    assert ": fits" in answer and "largest batch at 1 tokens: 0" not in answer




@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0, 0.0])
@pytest.mark.parametrize("argument", ["lr", "weight_decay", "warmup_fraction", "clip_norm"])
def test_the_training_loop_refuses_a_non_finite_or_negative_setting_by_name(argument, value):
    """The optimiser settings are checked before the first step (NaN would train to NaN)."""
    from attnlab.train import train

    if value == 0.0 and argument in ("weight_decay", "warmup_fraction"):
        return  # no decay, no warm-up: both mean something
    model = torch.nn.Linear(2, 2)

    def make_batch(generator):
        return torch.randn(4, 2, generator=generator), torch.zeros(4, dtype=torch.long)

    with pytest.raises(ValueError) as info:
        train(model, make_batch, steps=1, **{argument: value})
    assert names(str(info.value), argument), str(info.value)


def test_retnet_decay_refuses_more_heads_than_it_can_make():
    from attnlab.gated import retnet_decay

    for n_heads in (10**30, (1 << 16) + 1):
        with pytest.raises(ValueError, match="n_heads"):
            retnet_decay(n_heads)
