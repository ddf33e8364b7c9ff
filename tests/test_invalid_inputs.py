"""Bad input, as a caller sends it, to every public function and layer of ``attnlab``.

Hypothesis draws valid sizes for every sequence kernel and layer, and each kind of mistake is
tried on each (a missing dimension, an integer tensor, NaN or inf, an empty sequence, batch or
head axis, mismatched lengths, a gate or β out of range, a bad chunk size, a NaN or zero scale);
the other public functions get a table of typical mistakes, issue 24's among them. Every case
must end in a ``ValueError`` or ``TypeError`` whose message names an argument the caller
passed: never a traceback from inside torch, never a silent NaN.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from attnlab import (
    KIMI_LINEAR_48B_A3B,
    LLAMA3_8B,
    SOPHIA,
    SOPHIA_NANO,
    DeltaNetLayer,
    GatedDeltaNetLayer,
    GLALayer,
    HybridLM,
    KDALayer,
    KVCache,
    LatentCache,
    LinearAttentionLayer,
    MultiHeadAttention,
    MultiHeadLatentAttention,
    apply_rope,
    attention_scores,
    cache_breakdown,
    causal_mask,
    delta_rule_chunk,
    delta_rule_parallel,
    delta_rule_recurrent,
    format_bytes,
    gated_delta_rule_chunk,
    gated_delta_rule_recurrent,
    gla_chunk,
    gla_recurrent,
    kda_chunk,
    kda_recurrent,
    kda_step,
    kv_cache_bytes,
    linear_attention_chunk,
    linear_attention_parallel,
    linear_attention_recurrent,
    merge_heads,
    rope_angles,
    softmax_attention,
    softmax_attention_online,
    split_heads,
    stable_softmax,
)
from attnlab.blocks import RMSNorm, ShortConvolution
from attnlab.delta import delta_rule_chunk_reference, gated_delta_rule_chunk_reference
from attnlab.gated import decay_masked_attention, gla_chunk_reference
from attnlab.kda import kda_chunk_reference
from attnlab.layers import l2_normalise
from attnlab.linear import linear_attention_chunk_reference
from attnlab.model import next_token
from attnlab.serving import decode_step_bytes, step_seconds, what_if
from hypothesis import given, settings
from hypothesis import strategies as st

#: kernel -> the gate it takes ("none", "scalar" [B, H, T], "channel" [B, H, T, Dk]) and β.
KERNELS = {
    softmax_attention: ("none", False),
    linear_attention_recurrent: ("none", False),
    linear_attention_parallel: ("none", False),
    linear_attention_chunk: ("none", False),
    linear_attention_chunk_reference: ("none", False),
    gla_recurrent: ("channel", False),
    gla_chunk: ("channel", False),
    gla_chunk_reference: ("channel", False),
    decay_masked_attention: ("scalar", False),
    delta_rule_recurrent: ("none", True),
    delta_rule_parallel: ("none", True),
    delta_rule_chunk: ("none", True),
    delta_rule_chunk_reference: ("none", True),
    gated_delta_rule_recurrent: ("scalar", True),
    gated_delta_rule_chunk: ("scalar", True),
    gated_delta_rule_chunk_reference: ("scalar", True),
    kda_recurrent: ("channel", True),
    kda_chunk: ("channel", True),
    kda_chunk_reference: ("channel", True),
}
MISTAKES = ("missing_dim", "int_dtype", "nan", "inf", "empty", "length_mismatch",
            "positive_gate", "beta_out_of_range", "bad_chunk_size", "nan_scale", "zero_scale",
            "empty_batch", "empty_heads")


def kernel_arguments(kernel, b, h, t, dk, dv) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    gate, has_beta = KERNELS[kernel]
    args = {"q": torch.randn(b, h, t, dk, generator=gen),
            "k": F.normalize(torch.randn(b, h, t, dk, generator=gen), dim=-1),
            "v": torch.randn(b, h, t, dv, generator=gen)}
    if gate == "scalar":
        args["g"] = -torch.rand(b, h, t, generator=gen)
    elif gate == "channel":
        args["g"] = -torch.rand(b, h, t, dk, generator=gen)
    if has_beta:
        args["beta"] = torch.rand(b, h, t, generator=gen)
    return args


def applies(kernel, mistake: str) -> bool:
    """Whether ``mistake`` can be made in a call of ``kernel`` (a gate, a β or a chunk size to
    spoil); the grid holds only the pairs where it can, so every case asserts."""
    gate, has_beta = KERNELS[kernel]
    return {"positive_gate": gate != "none", "beta_out_of_range": has_beta,
            "bad_chunk_size": "chunk" in kernel.__name__}.get(mistake, True)


def spoil(args: dict, mistake: str, target: str) -> dict:
    """``args`` with one mistake in ``target`` (or in the gate, β, chunk size it concerns)."""
    args = dict(args)
    x = args[target]
    if mistake == "missing_dim":
        args[target] = x.reshape(-1)  # flattened: a shape no argument accepts
    elif mistake == "int_dtype":
        args[target] = x.to(torch.int64)
    elif mistake in ("nan", "inf"):
        x = x.clone()
        x.view(-1)[0] = float("nan") if mistake == "nan" else float("inf")
        args[target] = x
    elif mistake == "empty":
        args = {name: value[:, :, :0] for name, value in args.items()}
    elif mistake == "length_mismatch":
        args[target] = x[:, :, :-1]
    elif mistake == "positive_gate":
        args["g"] = args["g"].abs() + 0.5
    elif mistake == "beta_out_of_range":
        args["beta"] = args["beta"] + 2.5
    elif mistake == "bad_chunk_size":
        args["chunk_size"] = 0
    elif mistake in ("nan_scale", "zero_scale"):
        args["scale"] = float("nan") if mistake == "nan_scale" else 0.0
    elif mistake == "empty_batch":
        args = {name: value[:0] for name, value in args.items()}
    elif mistake == "empty_heads":
        args = {name: value[:, :0] for name, value in args.items()}
    return args


def assert_clear_error(call, names) -> None:
    """``call()`` raises ValueError/TypeError naming one of ``names`` (the caller's arguments)."""
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    message = str(info.value)
    named = [n for n in names if re.search(rf"(^|[^\w]){re.escape(n)}([^\w]|$)", message)]
    assert named, f"{type(info.value).__name__} names none of {sorted(names)}: {message!r}"


KERNEL_CASES = [(kernel, mistake) for kernel in KERNELS for mistake in MISTAKES
                if applies(kernel, mistake)]


def test_the_grid_holds_every_applicable_mistake():
    assert len(KERNEL_CASES) == 220  # 19 kernels x 13 mistakes, less the 27 that cannot apply
    assert not applies(softmax_attention, "positive_gate")
    assert applies(kda_chunk, "bad_chunk_size") and not applies(kda_recurrent, "bad_chunk_size")


@pytest.mark.parametrize(("kernel", "mistake"), KERNEL_CASES,
                         ids=[f"{k.__name__}-{m}" for k, m in KERNEL_CASES])
@settings(max_examples=6, deadline=None)
@given(sizes=st.tuples(st.integers(1, 2), st.integers(1, 2), st.integers(1, 9),
                       st.integers(1, 5), st.integers(1, 5)), data=st.data())
def test_every_kernel_refuses_bad_input_naming_the_argument(kernel, mistake, sizes, data):
    b, h, t, dk, dv = sizes
    if mistake == "length_mismatch":
        t = max(t, 2)  # a token to cut
    args = kernel_arguments(kernel, b, h, t, dk, dv)
    targets = sorted(args)
    if mistake == "length_mismatch" and kernel is softmax_attention:
        targets = ["k", "v"]  # fewer queries than keys is a decoding step, not a mistake
    target = data.draw(st.sampled_from(targets))
    bad = spoil(args, mistake, target)
    q, k, v = bad.pop("q"), bad.pop("k"), bad.pop("v")
    named = {"scale"} if mistake.endswith("_scale") else {"q", "k", "v", *bad}
    assert_clear_error(lambda: kernel(q, k, v, **bad), named)


D_MODEL = 12
LAYERS = {
    "linear": lambda: LinearAttentionLayer(D_MODEL, 2, 4),
    "gla": lambda: GLALayer(D_MODEL, 2, 4),
    "deltanet": lambda: DeltaNetLayer(D_MODEL, 2, 4),
    "gdn": lambda: GatedDeltaNetLayer(D_MODEL, 2, 4),
    "kda": lambda: KDALayer(D_MODEL, 2, 4),
    "mha": lambda: MultiHeadAttention(D_MODEL, 2, 4),
    "mla": lambda: MultiHeadLatentAttention(D_MODEL, 2, 4, kv_lora_rank=6, qk_rope_head_dim=2),
}
LAYER_MISTAKES = ("missing_dim", "wrong_width", "int_dtype", "nan", "inf", "empty",
                  "empty_batch")


@pytest.fixture(scope="module")
def layers():
    torch.manual_seed(0)
    return {name: make() for name, make in LAYERS.items()}


@pytest.mark.parametrize("mistake", LAYER_MISTAKES)
@pytest.mark.parametrize("name", list(LAYERS))
@settings(max_examples=4, deadline=None)
@given(b=st.integers(1, 2), t=st.integers(1, 6))
def test_every_layer_refuses_bad_input_naming_x(layers, name, mistake, b, t):
    x = torch.randn(b, t, D_MODEL)
    if mistake == "missing_dim":
        x = x[0]
    elif mistake == "wrong_width":
        x = torch.randn(b, t, D_MODEL + 1)
    elif mistake == "int_dtype":
        x = x.to(torch.int64)
    elif mistake in ("nan", "inf"):
        x[0, 0, 0] = float("nan") if mistake == "nan" else float("inf")
    elif mistake == "empty":
        x = x[:, :0]
    elif mistake == "empty_batch":
        x = x[:0]
    assert_clear_error(lambda: layers[name](x), {"x"})


def _x(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def _nan(*shape):
    x = torch.randn(*shape)
    x.view(-1)[0] = float("nan")
    return x


STATE = torch.zeros(1, 2, 4, 3)
#: The other public functions of ``attnlab``: (call, the argument its error must name).
OTHER_CALLS = {
    "stable_softmax: integer scores": (lambda: stable_softmax(torch.ones(3, dtype=torch.int64)),
                                       "x"),
    "attention_scores: k of another width": (
        lambda: attention_scores(_x(1, 1, 2, 4), _x(1, 1, 2, 3)), "k"),
    "softmax_attention_online: NaN in v": (
        lambda: softmax_attention_online(_x(1, 1, 2, 4), _x(1, 1, 2, 4), _nan(1, 1, 2, 3)), "v"),
    "causal_mask: zero queries": (lambda: causal_mask(0, 3), "t_q"),
    "rope_angles: odd width": (lambda: rope_angles(torch.arange(4), 5), "dim"),
    "apply_rope: NaN position": (
        lambda: apply_rope(_x(1, 1, 2, 4), torch.tensor([0.0, float("nan")])), "positions"),
    "apply_rope: too few positions": (lambda: apply_rope(_x(1, 1, 3, 4), torch.arange(2)),
                                      "positions"),
    "split_heads: width not divisible": (lambda: split_heads(_x(1, 2, 6), 4), "n_heads"),
    "merge_heads: a 3-D tensor": (lambda: merge_heads(_x(1, 2, 6)), "x"),
    "kda_step: a sequence instead of one token": (
        lambda: kda_step(_x(1, 2, 5, 4), _x(1, 2, 5, 4), _x(1, 2, 5, 3), g=-torch.rand(1, 2, 4),
                         beta=torch.rand(1, 2), state=STATE), "q"),
    "kda_step: NaN in the state": (
        lambda: kda_step(_x(1, 2, 4), F.normalize(_x(1, 2, 4), dim=-1), _x(1, 2, 3),
                         g=-torch.rand(1, 2, 4), beta=torch.rand(1, 2),
                         state=_nan(1, 2, 4, 3)), "state"),
    "kv_cache_bytes: negative context": (lambda: kv_cache_bytes(2, 2, 4, -1, 2), "context"),
    "kv_cache_bytes: a fraction of a bit": (lambda: kv_cache_bytes(2, 2, 4, 8, 0.3),
                                             "bytes_per_element"),
    "cache_breakdown: not a config": (lambda: cache_breakdown("Sophia", 4096), "config"),
    "cache_breakdown: unknown dtype": (lambda: cache_breakdown(SOPHIA, 4096, dtype="fp7"),
                                       "dtype"),
    "format_bytes: a float": (lambda: format_bytes(1.5), "n"),
    "KVCache: k and v of different lengths": (lambda: KVCache(_x(1, 1, 2, 4), _x(1, 1, 3, 4)),
                                              "v"),
    "HybridLM: token ids out of range": (
        lambda: HybridLM(SOPHIA_NANO)(torch.tensor([[SOPHIA_NANO.vocab_size]])), "input_ids"),
    # issue 24: NaN and inf parameters, and the model and layers at their edges
    "softmax_attention: a NaN scale": (
        lambda: softmax_attention(_x(1, 1, 2, 4), _x(1, 1, 2, 4), _x(1, 1, 2, 3),
                                  scale=float("nan")), "scale"),
    "softmax_attention: an infinite scale": (
        lambda: softmax_attention(_x(1, 1, 2, 4), _x(1, 1, 2, 4), _x(1, 1, 2, 3),
                                  scale=float("inf")), "scale"),
    "softmax_attention_online: a NaN scale": (
        lambda: softmax_attention_online(_x(1, 1, 2, 4), _x(1, 1, 2, 4), _x(1, 1, 2, 3),
                                         scale=float("nan")), "scale"),
    "softmax_attention: Dk = 0": (
        lambda: softmax_attention(_x(1, 1, 2, 0), _x(1, 1, 2, 0), _x(1, 1, 2, 3)), "q"),
    "softmax_attention: T = 65,536 (a 16 GiB score matrix)": (
        lambda: softmax_attention(*[torch.zeros(1, 1, 1, 8).expand(1, 1, 65_536, 8)] * 3),
        "q"),
    "stable_softmax: a +inf score": (
        lambda: stable_softmax(torch.tensor([1.0, float("inf"), 2.0])), "x"),
    "stable_softmax: a NaN score": (
        lambda: stable_softmax(torch.tensor([1.0, float("nan"), 2.0])), "x"),
    "apply_rope: base 0": (lambda: apply_rope(_x(1, 1, 2, 4), torch.arange(2), 0.0), "base"),
    "apply_rope: a negative base": (
        lambda: apply_rope(_x(1, 1, 2, 4), torch.arange(2), -10.0), "base"),
    "rope_angles: a NaN base": (
        lambda: rope_angles(torch.arange(4), 4, float("nan")), "base"),
    "MultiHeadAttention: rope_base 0": (
        lambda: MultiHeadAttention(D_MODEL, 2, 4, rope_base=0), "rope_base"),
    "MultiHeadAttention: conv_size 0": (
        lambda: MultiHeadAttention(D_MODEL, 2, 4, conv_size=0), "conv_size"),
    "KDALayer: conv_size 0": (lambda: KDALayer(D_MODEL, 2, 4, conv_size=0), "conv_size"),
    "KDALayer: output_norm not a bool": (
        lambda: KDALayer(D_MODEL, 2, 4, output_norm=1), "output_norm"),
    "RMSNorm: a NaN eps": (lambda: RMSNorm(4, eps=float("nan")), "eps"),
    "kv_cache_bytes: NaN bytes per element": (
        lambda: kv_cache_bytes(2, 2, 4, 8, float("nan")), "bytes_per_element"),
    "what_if: context 0": (lambda: what_if(LLAMA3_8B, 0, 1, 80 * 10**9), "context"),
    "step_seconds: a NaN bandwidth": (
        lambda: step_seconds(decode_step_bytes(LLAMA3_8B, 16), float("nan")), "bandwidth"),
    "next_token: a NaN temperature": (
        lambda: next_token(torch.zeros(1, 4), float("nan")), "temperature"),
    "HybridLM.generate: a NaN temperature": (
        lambda: HybridLM(SOPHIA_NANO).generate(torch.zeros(1, 2, dtype=torch.long), 2,
                                               temperature=float("nan")), "temperature"),
    "HybridLM.generate: temperature 1e-45 (0 in float32)": (
        lambda: HybridLM(SOPHIA_NANO).generate(torch.zeros(1, 2, dtype=torch.long), 2,
                                               temperature=1e-45), "temperature"),
    "HybridLM.generate: a [0, 5] prompt": (
        lambda: HybridLM(SOPHIA_NANO).generate(torch.zeros(0, 5, dtype=torch.long), 2),
        "input_ids"),
    "HybridLM: int16 token ids": (
        lambda: HybridLM(SOPHIA_NANO)(torch.zeros(1, 2, dtype=torch.int16)), "input_ids"),
    "HybridLM: uint8 token ids": (
        lambda: HybridLM(SOPHIA_NANO)(torch.full((1, 2), 255, dtype=torch.uint8)),
        "input_ids"),
    "HybridLM: Kimi Linear's preset (12.9 GiB in float32)": (
        lambda: HybridLM(KIMI_LINEAR_48B_A3B), "config"),
    "KVCache: NaN keys": (lambda: KVCache(_nan(1, 1, 2, 4), _x(1, 1, 2, 4)), "k"),
    "LatentCache: a NaN latent": (lambda: LatentCache(_nan(1, 2, 6), _x(1, 2, 2)), "c_kv"),
    "ShortConvolution: NaN x": (lambda: ShortConvolution(4)(_nan(1, 3, 4)), "x"),
    "RMSNorm: NaN x": (lambda: RMSNorm(4)(_nan(1, 3, 4)), "x"),
    "l2_normalise: NaN x": (lambda: l2_normalise(_nan(1, 2, 3, 4)), "x"),
    "KDALayer: a cache whose state is NaN": (lambda: _continue_with_a_nan_state(), "cache.state"),
}


def _continue_with_a_nan_state():
    layer = KDALayer(D_MODEL, 2, 4)
    _, cache = layer(_x(1, 3, D_MODEL), use_cache=True)
    cache.state = torch.full_like(cache.state, float("nan"))
    layer(_x(1, 1, D_MODEL), cache)


@pytest.mark.parametrize("case", list(OTHER_CALLS))
def test_the_other_public_functions_refuse_bad_input_naming_the_argument(case):
    call, name = OTHER_CALLS[case]
    assert_clear_error(call, {name})
