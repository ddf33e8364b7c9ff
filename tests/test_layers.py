"""The five recurrent mixer layers: cached decoding continues the full pass exactly through each
mechanism's one-token step, the cache does not grow, gates are decays in (0, 1], output gates
gate, and bad input names ``x``/``cache``.
"""

from __future__ import annotations

import pytest
import torch
from attnlab import layers as layers_module
from attnlab.blocks import LAYER_NORM_EPS, RecurrentCache
from attnlab.layers import (
    DeltaNetLayer,
    GatedDeltaNetLayer,
    GLALayer,
    KDALayer,
    LinearAttentionLayer,
)
from conftest import assert_close, decode_in_pieces, seeds
from hypothesis import given, settings
from hypothesis import strategies as st

D_MODEL, N_HEADS, HEAD_DIM = 12, 2, 6

VARIANTS = {
    "linear": (LinearAttentionLayer, {}),
    "linear-unnormalised": (LinearAttentionLayer, {"normalize": False}),
    "linear-identity-conv2": (LinearAttentionLayer,
                              {"feature_map": "identity", "normalize": False, "conv_size": 2}),
    "linear-conv1": (LinearAttentionLayer, {"conv_size": 1}),
    "gla-channel": (GLALayer, {"decay": "channel", "decay_rank": 3}),
    "gla-scalar": (GLALayer, {"decay": "scalar"}),
    "gla-fixed": (GLALayer, {"decay": "fixed"}),
    "deltanet": (DeltaNetLayer, {}),
    "gdn": (GatedDeltaNetLayer, {}),
    "kda": (KDALayer, {}),
    "kda-conv2": (KDALayer, {"conv_size": 2}),
    "kda-no-norm": (KDALayer, {"output_norm": False}),
}


def make_layer(name: str, seed: int = 0, **changes) -> torch.nn.Module:
    cls, options = VARIANTS[name]
    torch.manual_seed(seed)
    sizes = {"d_model": D_MODEL, "n_heads": N_HEADS, "head_dim": HEAD_DIM, **changes}
    return cls(sizes["d_model"], sizes["n_heads"], sizes["head_dim"], **options).double()


def inputs(batch: int, t: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(batch, t, D_MODEL, generator=gen, dtype=torch.float64)


# ------------------------------------------------------------------ decoding = the full pass
@settings(max_examples=20, deadline=None)
@given(seed=seeds, t=st.integers(1, 40), name=st.sampled_from(sorted(VARIANTS)), data=st.data())
def test_prefill_then_decode_equals_the_full_pass(seed, t, name, data):
    layer = make_layer(name, seed % 1000)
    x = inputs(2, t, seed)
    full, none = layer(x)
    assert none is None and full.shape == x.shape and full.dtype == x.dtype
    prefill = data.draw(st.integers(1, t), label="prefill")
    y, cache = layer(x[:, :prefill], use_cache=True)
    pieces = [y]
    for i in range(prefill, t):  # one token at a time
        y, cache = layer(x[:, i : i + 1], cache=cache, use_cache=True)
        pieces.append(y)
    assert_close(torch.cat(pieces, dim=1), full)


@pytest.mark.parametrize("name", ["linear", "gla-channel", "deltanet", "gdn", "kda-conv2"])
def test_any_split_continues_the_sequence(name):
    layer = make_layer(name, 1)
    x = inputs(1, 70, 1)
    full, _ = layer(x)
    pieces, _ = decode_in_pieces(layer, x, [1, 2, 7, 66])  # crosses the chunk size 64
    assert_close(pieces, full)


KERNELS = {  # the chunkwise kernel each layer runs on a prompt
    LinearAttentionLayer: "linear_attention_chunk", GLALayer: "gla_chunk",
    DeltaNetLayer: "delta_rule_chunk", GatedDeltaNetLayer: "gated_delta_rule_chunk",
    KDALayer: "kda_chunk",
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_decoding_steps_run_the_one_token_step_not_the_chunkwise_kernel(name, monkeypatch):
    layer = make_layer(name)
    x = inputs(2, 9)
    full, _ = layer(x)
    _, cache = layer(x[:, :4], use_cache=True)

    def refuse(*args, **kwargs):
        raise AssertionError("a decoding step ran the chunkwise kernel")

    monkeypatch.setattr(layers_module, KERNELS[type(layer)], refuse)
    steps = []
    for t in range(4, 9):
        y, cache = layer(x[:, t : t + 1], cache=cache, use_cache=True)
        steps.append(y)
    assert_close(torch.cat(steps, dim=1), full[:, 4:])


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_the_cache_has_a_fixed_size(name):
    layer = make_layer(name)
    conv_inputs = 3 * (layer.q_conv.kernel_size - 1) * N_HEADS * HEAD_DIM
    normalised = isinstance(layer, LinearAttentionLayer) and layer.normalize
    normaliser = N_HEADS * HEAD_DIM if normalised else 0
    numbers = N_HEADS * HEAD_DIM * HEAD_DIM + conv_inputs + normaliser
    for t in (1, 6, 70):
        _, cache = layer(inputs(2, t), use_cache=True)
        assert isinstance(cache, RecurrentCache)
        state = cache.state[0] if normalised else cache.state  # (S, z) when normalised
        assert state.shape == (2, N_HEADS, HEAD_DIM, HEAD_DIM)
        if normalised:
            assert cache.state[1].shape == (2, N_HEADS, HEAD_DIM)
        assert len(cache.conv) == 3 and cache.num_bytes() == 2 * numbers * 8


@pytest.mark.parametrize("name", ["linear", "gla-scalar", "deltanet", "gdn", "kda"])
def test_gradients_reach_every_parameter(name):
    layer = make_layer(name, 3).float()
    y, _ = layer(torch.randn(2, 70, D_MODEL))
    y.square().mean().backward()
    for param_name, p in layer.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), param_name
        assert p.grad.abs().sum() > 0, param_name


# ------------------------------------------------------------------ gates
@pytest.mark.parametrize(("name", "shape"), [
    ("gla-channel", (3, N_HEADS, 7, HEAD_DIM)), ("gla-scalar", (3, N_HEADS, 7)),
    ("gla-fixed", (3, N_HEADS, 7)), ("gdn", (3, N_HEADS, 7)), ("kda", (3, N_HEADS, 7, HEAD_DIM)),
])
def test_log_gate_is_a_decay(name, shape):
    layer = make_layer(name)
    g = layer.log_gate(inputs(3, 7))
    assert g.shape == shape and g.dtype == torch.float64 and (g <= 0).all()


@pytest.mark.parametrize("cls", [GatedDeltaNetLayer, KDALayer])
def test_mamba_decay_starts_close_to_one(cls):
    torch.manual_seed(2)
    layer = cls(16, 4, 8)
    assert ((layer.A_log.exp() >= 1) & (layer.A_log.exp() <= 16)).all()
    alpha0 = torch.exp(layer.log_gate(torch.zeros(1, 1, 16)))  # decays at x = 0
    assert ((alpha0 > 0.15) & (alpha0 < 1)).all() and alpha0.median() > 0.8


def test_kda_decay_is_low_rank_per_channel():
    """One decay per channel (32 = 4 heads x 8), read through a rank-head_dim bottleneck: over
    50 tokens the raw decays span only 8 dimensions."""
    layer = KDALayer(16, 4, 8).double()
    x = torch.randn(1, 50, 16, dtype=torch.float64)
    assert layer.log_gate(x).shape == (1, 4, 50, 8)
    raw = layer.decay_proj(x)[0]  # [50, 32]
    assert torch.linalg.matrix_rank(raw) == 8


@pytest.mark.parametrize(("name", "gate_at_zero"), [("gla-channel", 0.0), ("gdn", 0.5),
                                                    ("kda", 0.5)])
def test_output_gate_scales_the_normalised_output(name, gate_at_zero):
    """GLA's gate is a swish (FLA's default: swish(0) = 0 closes it); GDN's and KDA's a sigmoid
    (sigmoid(0) = 1/2 halves the output)."""
    layer = make_layer(name)
    x = inputs(2, 9)
    with torch.no_grad():
        for p in layer.g_proj.parameters():
            p.zero_()
    normed = []  # the per-head RMSNorm's output, before the gate
    layer.norm.register_forward_hook(lambda module, args, out: normed.append(out))
    y_gated, _ = layer(x)
    (o,) = normed
    ungated = layer.out(o.transpose(1, 2).flatten(2))  # merge heads, W_o
    assert_close(y_gated, gate_at_zero * ungated)


# ------------------------------------------------------------------ upstream parity
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_output_norm_uses_fla_norm_eps(name):
    layer = make_layer(name)
    if layer.norm is None:  # normalised linear attention: the normaliser bounds o, no RMSNorm
        assert isinstance(layer, LinearAttentionLayer) and layer.normalize
        return
    if name == "kda-no-norm":  # the norm switched off: nothing to take an eps
        assert isinstance(layer.norm, torch.nn.Identity)
        return
    assert LAYER_NORM_EPS == 1e-5 and layer.norm.eps == LAYER_NORM_EPS
    tiny = torch.full((1, 1, 1, HEAD_DIM), 1e-3, dtype=torch.float64)  # mean o² = 1e-6
    expected = 1e-3 / (1e-6 + 1e-5) ** 0.5 * layer.norm.weight
    assert_close(layer.norm(tiny)[0, 0, 0], expected)


def test_norm_eps_can_be_chosen():
    layer = KDALayer(8, 2, 4, norm_eps=1e-6)
    assert layer.norm.eps == 1e-6
    with pytest.raises(ValueError, match="norm_eps"):
        KDALayer(8, 2, 4, norm_eps=0)


def test_kda_without_output_norm_drops_the_norm_and_only_the_norm():
    """output_norm=False: no norm weight, every other weight as the full layer's; the output
    then differs, and equals the full layer's with its norm taken out by hand."""
    full, ablated = make_layer("kda"), make_layer("kda-no-norm")
    kept = {n: w for n, w in full.state_dict().items() if not n.startswith("norm.")}
    assert set(ablated.state_dict()) == set(kept)
    ablated.load_state_dict(kept)
    x = inputs(2, 9)
    y_full, y_ablated = full(x)[0], ablated(x)[0]
    assert (y_full - y_ablated).abs().max() > 1e-3
    full.norm = torch.nn.Identity()
    assert_close(full(x)[0], y_ablated)
    with pytest.raises(ValueError, match="output_norm"):
        KDALayer(8, 2, 4, output_norm="no")


def test_a_width_one_convolution_does_not_mix_tokens():
    """conv_size=1 (the ablation's "no short convolution"): q, k, v at t read x_t only."""
    torch.manual_seed(0)
    layer = KDALayer(D_MODEL, N_HEADS, HEAD_DIM, conv_size=1).double()
    conv = layer.q_conv
    assert conv.kernel_size == 1
    x = torch.randn(1, 6, conv.channels, dtype=torch.float64)
    changed = x.clone()
    changed[:, 2] += 1.0
    y, _ = conv(x)
    y_changed, _ = conv(changed)
    differs = (y - y_changed).abs().amax(dim=-1)[0]
    assert differs[2] > 0 and differs[3:].max() == 0
    wide, _ = make_layer("kda").q_conv(x)  # width 4: the next tokens see the change
    wide_changed, _ = make_layer("kda").q_conv(changed)
    assert (wide - wide_changed).abs().amax(dim=-1)[0, 3] > 0


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("name", ["linear", "gla-channel", "deltanet", "gdn", "kda"])
def test_bad_inputs_name_the_callers_argument(name):
    layer = make_layer(name)
    x = inputs(2, 4)
    with pytest.raises(ValueError, match=r"^x: .*d_model"):
        layer(x[..., :11])
    with pytest.raises(ValueError, match=r"^x: "):
        layer(x.float())
    with pytest.raises(ValueError, match=r"^x: expected at least one token"):
        layer(x[:, :0])
    with pytest.raises(ValueError, match=r"^cache: "):
        layer(x, cache=(torch.zeros(2, 2, 6, 6),))
    _, other = make_layer(name, n_heads=3, head_dim=4)(inputs(2, 4), use_cache=True)
    with pytest.raises(ValueError, match=r"^cache.state: "):
        layer(x, cache=other)
    _, cache = layer(x, use_cache=True)
    with pytest.raises(ValueError, match=r"^cache.state: "):
        layer(inputs(3, 1), cache=cache)


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="decay"):
        GLALayer(12, 2, 5, decay="vector")
    with pytest.raises(ValueError, match="feature_map"):
        LinearAttentionLayer(12, 2, 5, feature_map="softmax")
    with pytest.raises(ValueError, match="normalize"):
        LinearAttentionLayer(12, 2, 5, normalize="yes")
    with pytest.raises(ValueError, match="head_dim"):
        DeltaNetLayer(12, 2, 0)


def test_normalised_layer_refuses_a_cache_without_normaliser():
    x = inputs(2, 4)
    _, cache = make_layer("linear-unnormalised")(x, use_cache=True)
    with pytest.raises(ValueError, match="normaliser"):
        make_layer("linear")(x, cache=cache)


def _bad_inputs():
    """Invalid x a caller might pass: wrong rank, width, dtype, empty, not a tensor."""
    return st.one_of(
        st.tuples(st.integers(1, 3), st.integers(1, 5)).map(
            lambda s: torch.randn(*s, dtype=torch.float64)),  # 2-D
        st.tuples(st.integers(1, 2), st.integers(1, 5), st.integers(1, 20)
                  .filter(lambda d: d != D_MODEL)).map(
            lambda s: torch.randn(*s, dtype=torch.float64)),  # wrong d_model
        st.sampled_from([torch.int64, torch.float32, torch.bool]).map(
            lambda dt: torch.zeros(1, 3, D_MODEL, dtype=dt)),  # wrong dtype
        st.integers(1, 3).map(lambda b: torch.zeros(b, 0, D_MODEL, dtype=torch.float64)),
        st.sampled_from([None, 3.0, [[0.0] * D_MODEL]]),
    )


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(VARIANTS)), x=_bad_inputs(), use_cache=st.booleans())
def test_random_bad_inputs_get_a_clear_error_naming_x(name, x, use_cache):
    with pytest.raises(ValueError, match=r"^x: expected"):
        make_layer(name)(x, use_cache=use_cache)
