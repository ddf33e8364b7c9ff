"""Gated linear attention: chunkwise equals recurrent (outputs, states, gradients), stays finite
under extreme gates, reduces to linear attention and to RetNet, and the layer decodes."""

from __future__ import annotations

import math

import pytest
import torch
from attnlab._chunk_engine import channel_decay_scores, channel_decay_terms
from attnlab.gated import (
    decay_masked_attention,
    gla_chunk,
    gla_chunk_reference,
    gla_recurrent,
    gla_step,
    init_softplus_decay,
    retnet_decay,
    retnet_gate,
    softplus_decay_gate,
)
from attnlab.linear import linear_attention_chunk, linear_attention_recurrent
from conftest import assert_close, seeds, shapes
from hypothesis import example, given, settings
from hypothesis import strategies as st

gate_kinds = st.sampled_from(["channel", "scalar"])
# typical magnitude of -g per step: near 0 (α ≈ 1), GLA-like, Mamba-like, very fast decay
gate_scales = st.sampled_from([1e-6, 0.05, 1.0, 8.0])


def random_inputs(seed, shape, kind="channel", gate_scale=1.0, dtype=torch.float64,
                  with_state=True):
    """q, k, v, a log-gate g <= 0 (``[B,H,T,Dk]`` or ``[B,H,T]``) and an initial state."""
    b, h, t, dk, dv = shape
    gen = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(b, h, t, dk, generator=gen, dtype=dtype) for _ in range(2))
    v = torch.randn(b, h, t, dv, generator=gen, dtype=dtype)
    gate_shape = (b, h, t, dk) if kind == "channel" else (b, h, t)
    g = -gate_scale * torch.rand(gate_shape, generator=gen, dtype=dtype) * 2
    s0 = torch.randn(b, h, dk, dv, generator=gen, dtype=dtype) if with_state else None
    return q, k, v, g, s0




def gla_oracle(q, k, v, g, scale=None):
    """O_i = Σ_{j<=i} Σ_d s q_id k_jd (Π_{j<m<=i} α_md) v_j with explicit products (no logs)."""
    if g.dim() == 3:
        g = g.unsqueeze(-1).expand_as(q)
    s = q.shape[-1] ** -0.5 if scale is None else scale
    t = q.shape[2]
    alpha = torch.exp(g)
    o = torch.zeros(*q.shape[:3], v.shape[-1], dtype=q.dtype)
    for i in range(t):
        for j in range(i + 1):
            decay = torch.prod(alpha[:, :, j + 1 : i + 1], dim=2)  # empty product = 1 for j = i
            o[:, :, i] += (s * q[:, :, i] * k[:, :, j] * decay).sum(-1, keepdim=True) * v[:, :, j]
    return o


# ---------------------------------------------------------------- chunk = recurrent
@settings(max_examples=25, deadline=None)
@given(shape=shapes, seed=seeds, chunk=st.integers(1, 64), kind=gate_kinds,
       gate_scale=gate_scales, with_state=st.booleans())
@example(shape=(1, 1, 1, 3, 2), seed=0, chunk=64, kind="channel", gate_scale=1.0,
         with_state=True)  # T = 1
@example(shape=(2, 1, 65, 2, 5), seed=1, chunk=64, kind="scalar", gate_scale=8.0,
         with_state=True)  # one full chunk and one of length 1
def test_chunk_equals_recurrent_float64(shape, seed, chunk, kind, gate_scale, with_state):
    q, k, v, g, s0 = random_inputs(seed, shape, kind, gate_scale, with_state=with_state)
    o_ref, s_ref = gla_recurrent(q, k, v, g=g, initial_state=s0, output_final_state=True)
    o, s = gla_chunk(q, k, v, g=g, initial_state=s0, output_final_state=True, chunk_size=chunk)
    assert_close(o, o_ref)
    assert_close(s, s_ref)


@settings(max_examples=15, deadline=None)
@given(shape=shapes, seed=seeds, chunk=st.integers(1, 64), kind=gate_kinds,
       gate_scale=gate_scales)
def test_chunk_equals_recurrent_float32(shape, seed, chunk, kind, gate_scale):
    q, k, v, g, s0 = random_inputs(seed, shape, kind, gate_scale, torch.float32)
    o_ref, s_ref = gla_recurrent(q, k, v, g=g, initial_state=s0, output_final_state=True)
    o, s = gla_chunk(q, k, v, g=g, initial_state=s0, output_final_state=True, chunk_size=chunk)
    assert_close(o, o_ref)
    assert_close(s, s_ref)


@settings(max_examples=12, deadline=None)
@given(shape=shapes.filter(lambda s: s[2] <= 40), seed=seeds, chunk=st.integers(1, 64),
       kind=gate_kinds, gate_scale=gate_scales)
def test_gradients_agree(shape, seed, chunk, kind, gate_scale):
    leaves = random_inputs(seed, shape, kind, gate_scale)
    for x in leaves:
        x.requires_grad_(True)
    q, k, v, g, s0 = leaves
    gen = torch.Generator().manual_seed(seed + 1)
    w_o = torch.randn(*shape[:3], shape[4], generator=gen, dtype=torch.float64)
    w_s = torch.randn(s0.shape, generator=gen, dtype=torch.float64)
    grads = []
    for kernel, kw in ((gla_recurrent, {}), (gla_chunk, dict(chunk_size=chunk))):
        o, s = kernel(q, k, v, g=g, initial_state=s0, output_final_state=True, **kw)
        grads.append(torch.autograd.grad((w_o * o).sum() + (w_s * s).sum(), leaves))
    for mine, ref in zip(*grads, strict=True):
        assert_close(mine, ref)


@settings(max_examples=10, deadline=None)
@given(shape=shapes.filter(lambda s: s[2] <= 20), seed=seeds, kind=gate_kinds,
       chunk=st.integers(1, 24))
def test_both_forms_match_an_explicit_product_oracle(shape, seed, kind, chunk):
    q, k, v, g, _ = random_inputs(seed, shape, kind, with_state=False)
    expected = gla_oracle(q, k, v, g)
    assert_close(gla_recurrent(q, k, v, g=g)[0], expected)
    assert_close(gla_chunk(q, k, v, g=g, chunk_size=chunk)[0], expected)


@settings(max_examples=12, deadline=None)
@given(shape=shapes.filter(lambda s: s[2] >= 2), seed=seeds, chunk=st.integers(1, 64),
       kind=gate_kinds, data=st.data())
def test_split_sequence_with_carried_state(shape, seed, chunk, kind, data):
    q, k, v, g, _ = random_inputs(seed, shape, kind)
    cut = data.draw(st.integers(1, shape[2] - 1), label="cut")
    for kernel, kw in ((gla_recurrent, {}), (gla_chunk, dict(chunk_size=chunk))):
        whole, s_whole = kernel(q, k, v, g=g, output_final_state=True, **kw)
        first, s_first = kernel(q[:, :, :cut], k[:, :, :cut], v[:, :, :cut], g=g[:, :, :cut],
                                output_final_state=True, **kw)
        second, s_second = kernel(q[:, :, cut:], k[:, :, cut:], v[:, :, cut:], g=g[:, :, cut:],
                                  initial_state=s_first, output_final_state=True, **kw)
        assert_close(torch.cat([first, second], dim=2), whole)
        assert_close(s_second, s_whole)


# ---------------------------------------------------------------- special cases
@settings(max_examples=10, deadline=None)
@given(shape=shapes, seed=seeds, chunk=st.integers(1, 64), kind=gate_kinds)
def test_zero_gate_is_linear_attention(shape, seed, chunk, kind):
    q, k, v, g, s0 = random_inputs(seed, shape, kind)
    g = torch.zeros_like(g)
    expected, s_expected = linear_attention_recurrent(q, k, v, initial_state=s0,
                                                      output_final_state=True)
    o, s = gla_chunk(q, k, v, g=g, initial_state=s0, output_final_state=True, chunk_size=chunk)
    assert_close(o, expected)
    assert_close(s, s_expected)
    assert_close(gla_recurrent(q, k, v, g=g, initial_state=s0)[0], expected)
    assert_close(linear_attention_chunk(q, k, v, initial_state=s0, chunk_size=chunk)[0], o)


@settings(max_examples=10, deadline=None)
@given(shape=shapes, seed=seeds, chunk=st.integers(1, 64), gate_scale=gate_scales)
def test_scalar_gate_equals_per_channel_gate_broadcast(shape, seed, chunk, gate_scale):
    q, k, v, g, s0 = random_inputs(seed, shape, "scalar", gate_scale)
    g_channel = g.unsqueeze(-1).expand_as(q).contiguous()
    for kernel, kw in ((gla_recurrent, {}), (gla_chunk, dict(chunk_size=chunk))):
        o, s = kernel(q, k, v, g=g, initial_state=s0, output_final_state=True, **kw)
        o_c, s_c = kernel(q, k, v, g=g_channel, initial_state=s0, output_final_state=True, **kw)
        assert_close(o, o_c)
        assert_close(s, s_c)


def test_per_channel_gates_act_per_key_channel():
    # Dk = 2: channel 0 never forgets, channel 1 forgets everything after one step (α = e^-40).
    q = torch.tensor([[1.0, 1.0]] * 3, dtype=torch.float64).view(1, 1, 3, 2)
    k = torch.tensor([[1.0, 2.0], [0.0, 0.0], [0.0, 0.0]], dtype=torch.float64).view(1, 1, 3, 2)
    v = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64).view(1, 1, 3, 1)
    g = torch.tensor([[0.0, -40.0]] * 3, dtype=torch.float64).view(1, 1, 3, 2)
    for o in (gla_recurrent(q, k, v, g=g, scale=1.0)[0], gla_chunk(q, k, v, g=g, scale=1.0)[0]):
        assert o.flatten()[0].item() == pytest.approx(3.0)  # 1·1 + 1·2 at t = 1
        assert o.flatten()[1:].tolist() == pytest.approx([1.0, 1.0], abs=1e-15)


@settings(max_examples=8, deadline=None)
@given(seed=seeds, h=st.integers(1, 4), t=st.integers(1, 90), chunk=st.integers(1, 64))
def test_retnet_closed_form(seed, h, t, chunk):
    """RetNet: O = (s Q Kᵀ ⊙ D) V with D_ij = γ_h^(i-j) for j <= i, γ_h = 1 - 2^(-5-h)."""
    q, k, v, _, _ = random_inputs(seed, (2, h, t, 4, 3), with_state=False)
    gamma = 1 - 2.0 ** (-5 - torch.arange(h, dtype=torch.float64))
    i = torch.arange(t)
    exponent = (i[:, None] - i[None, :]).clamp(min=0).to(torch.float64)
    decay = gamma[:, None, None] ** exponent * (i[:, None] >= i[None, :])  # [H, T, T]
    expected = ((q @ k.transpose(-1, -2)) * 4**-0.5 * decay) @ v
    g = retnet_gate(2, h, t, dtype=torch.float64)
    assert_close(gla_chunk(q, k, v, g=g, chunk_size=chunk)[0], expected)
    assert_close(gla_recurrent(q, k, v, g=g)[0], expected)


# ---------------------------------------------------------------- extreme gates
@pytest.mark.parametrize("kind", ["channel", "scalar"])
@pytest.mark.parametrize("gates", ["constant", "random"])
def test_extreme_gates_stay_finite_and_exact_in_float32(kind, gates):
    """Gates down to -20 per step over T = 1024: Σg reaches -20480, exp(-Σg) would overflow."""
    q, k, v, g, s0 = random_inputs(7, (1, 2, 1024, 8, 4), kind, dtype=torch.float32)
    gen = torch.Generator().manual_seed(8)
    g = torch.full_like(g, -20.0) if gates == "constant" else -20.0 * torch.rand(
        g.shape, generator=gen)
    for x in (q, k, v, g):
        x.requires_grad_(True)
    o_ref, s_ref = gla_recurrent(q, k, v, g=g, initial_state=s0, output_final_state=True)
    for chunk in (64, 37):  # a power of two, and a chunk padded inside channel_decay_scores
        o, s = gla_chunk(q, k, v, g=g, initial_state=s0, output_final_state=True,
                         chunk_size=chunk)
        assert_close(o, o_ref)
        assert_close(s, s_ref)
    grads = torch.autograd.grad(o.square().sum() + s.sum(), (q, k, v, g))
    assert all(torch.isfinite(grad).all() for grad in grads)


def pairwise_scores(q, k, b):
    """A_ij = Σ_d q_id k_jd exp(B_id - B_jd) for j <= i, from all pairwise differences."""
    diff = b.unsqueeze(-2) - b.unsqueeze(-3)  # [..., i, j, Dk]
    causal = torch.ones(diff.shape[-3:-1], dtype=torch.bool).tril()
    decay = torch.exp(diff.masked_fill(~causal.unsqueeze(-1), -math.inf))
    return (q.unsqueeze(-2) * k.unsqueeze(-3) * decay).sum(-1)


@settings(max_examples=20, deadline=None)
@given(seed=seeds, c=st.integers(1, 64), dk=st.integers(1, 8),
       per_step=st.sampled_from([0.0, 0.01, 0.5, 2.0, 5.0, 30.0]))
def test_decay_scores_equal_their_definition(seed, c, dk, per_step):
    """channel_decay_scores (one reference point when the span is small, nested halves
    otherwise) against the pairwise scores."""
    gen = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(2, c, dk, generator=gen, dtype=torch.float64) for _ in range(2))
    g = -per_step * torch.rand(2, c, dk, generator=gen, dtype=torch.float64)
    assert_close(channel_decay_scores([q], k, g), [pairwise_scores(q, k, g.cumsum(-2))])


@settings(max_examples=20, deadline=None)
@given(seed=seeds, c=st.integers(1, 64), dk=st.integers(1, 8),
       per_step=st.sampled_from([0.0, 0.01, 0.5, 2.0, 30.0]))
@example(seed=0, c=64, dk=4, per_step=0.01)  # one reference point
@example(seed=0, c=64, dk=4, per_step=30.0)  # the nested split
def test_decay_terms_equal_their_definitions(seed, c, dk, per_step):
    """channel_decay_terms against pairwise scores and e^B, e^(B_C − B), e^(B_C) taken directly,
    on both of its paths (one reference point when the span is small, the nested split
    otherwise)."""
    gen = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(2, c, dk, generator=gen, dtype=torch.float64) for _ in range(2))
    g = -per_step * torch.rand(2, c, dk, generator=gen, dtype=torch.float64)
    b = g.cumsum(-2)
    (a_qk, a_kk), (q_start, k_start), k_end, chunk_decay = channel_decay_terms([q, k], k, g)
    assert_close(a_qk, pairwise_scores(q, k, b))
    assert_close(a_kk, pairwise_scores(k, k, b))
    assert_close(q_start, q * b.exp())
    assert_close(k_start, k * b.exp())
    assert_close(k_end, k * (b[..., -1:, :] - b).exp())
    assert_close(chunk_decay, b[..., -1:, :].exp())


def test_one_reference_point_overflows_where_nested_blocks_do_not():
    """The pitfall of the Notation appendix, §3c: with -20 per step, one reference point per
    64-token chunk gives e^640."""
    gen = torch.Generator().manual_seed(0)
    q, k = (torch.randn(1, 64, 4, generator=gen) for _ in range(2))
    g = torch.full((1, 64, 4), -20.0)
    b = g.cumsum(-2)
    r = (b[..., :1, :] + b[..., -1:, :]) / 2  # one reference point for the whole chunk
    assert not torch.isfinite((q * (b - r).exp()) @ (k * (r - b).exp()).mT).all()
    [nested] = channel_decay_scores([q], k, g)
    assert_close(nested, pairwise_scores(q, k, b))


def test_channel_decay_scores_under_huge_decays():
    """With g = -1000 per step only the diagonal survives: A_ii = q_i · k_i, all else 0."""
    gen = torch.Generator().manual_seed(0)
    q, k = (torch.randn(3, 64, 5, generator=gen) for _ in range(2))
    [scores] = channel_decay_scores([q], k, torch.full((3, 64, 5), -1000.0))
    assert torch.isfinite(scores).all()
    assert_close(scores, torch.diag_embed((q * k).sum(-1)))


# ---------------------------------------------------------------- gates and helpers
def test_retnet_decay():
    gamma = torch.exp(retnet_decay(4, dtype=torch.float64))
    assert gamma.tolist() == pytest.approx([1 - 1 / 32, 1 - 1 / 64, 1 - 1 / 128, 1 - 1 / 256])
    g = retnet_gate(2, 4, 5)
    assert g.shape == (2, 4, 5) and g.dtype == torch.float32
    assert torch.equal(g[1, :, 3], retnet_decay(4))


def test_softplus_decay_gate_scalar_and_per_channel():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 7, 3, generator=gen, dtype=torch.float64)  # [B, T, H]
    a_log = torch.randn(3, generator=gen, dtype=torch.float64)
    dt_bias = torch.randn(3, generator=gen, dtype=torch.float64)
    g = softplus_decay_gate(x, a_log, dt_bias)
    expected = -torch.exp(a_log) * torch.log1p(torch.exp(x + dt_bias))
    assert g.shape == x.shape and torch.allclose(g, expected) and (g <= 0).all()
    x4 = torch.randn(2, 7, 3, 4, generator=gen, dtype=torch.float64)  # [B, T, H, Dk]
    dt4 = torch.randn(3, 4, generator=gen, dtype=torch.float64)
    g4 = softplus_decay_gate(x4, a_log[:, None], dt4)
    assert g4.shape == x4.shape
    assert torch.allclose(g4[..., 2, 1], -a_log[2].exp() * torch.nn.functional.softplus(
        x4[..., 2, 1] + dt4[2, 1]))
    with pytest.raises(ValueError, match="A_log"):
        softplus_decay_gate(x, torch.zeros(4), dt_bias)
    with pytest.raises(ValueError, match="dt_bias"):
        softplus_decay_gate(x, a_log, torch.zeros(2, 7, 3, 1))  # would enlarge x
    with pytest.raises(ValueError, match="x"):
        softplus_decay_gate(x.long(), a_log, dt_bias)


def test_init_softplus_decay_ranges():
    torch.manual_seed(0)
    a_log, dt_bias = init_softplus_decay(64, 256)
    assert a_log.shape == (64,) and dt_bias.shape == (256,)
    assert (a_log.exp() >= 1).all() and (a_log.exp() <= 16).all()
    dt = torch.nn.functional.softplus(dt_bias)
    assert (dt >= 1e-3 * 0.999).all() and (dt <= 1e-1 * 1.001).all()


# ---------------------------------------------------------------- bad inputs
def _bad_cases():
    q, k, v, g, s0 = random_inputs(3, (1, 2, 5, 4, 3), dtype=torch.float32)
    return [
        ("q", dict(q=q[0])),  # wrong rank
        ("k", dict(k=k[:, :, :4])),  # mismatched T
        ("v", dict(v=v.double())),  # wrong dtype
        ("initial_state", dict(initial_state=s0[:, :, :2])),
        ("g", dict(g=-g.abs() + 0.5)),  # positive gates
        ("g", dict(g=g[:, :, :4])),  # mismatched T
        ("g", dict(g=g[:, :, :, :3])),  # wrong Dk
        ("g", dict(g=g[0, 0])),  # wrong rank
        ("g", dict(g=g.double())),  # wrong dtype
        ("g", dict(g=torch.full_like(g, math.nan))),
        ("g", dict(g=torch.full_like(g, -math.inf))),
        ("g", dict(g=[0.0])),
        ("scale", dict(scale="x")),
    ]


@pytest.mark.parametrize("kernel", [gla_recurrent, gla_chunk, gla_chunk_reference])
@pytest.mark.parametrize("name,override", _bad_cases())
def test_bad_inputs_raise_value_error_naming_the_argument(kernel, name, override):
    q, k, v, g, _ = random_inputs(3, (1, 2, 5, 4, 3), dtype=torch.float32)
    args = dict(q=q, k=k, v=v, g=g) | override
    with pytest.raises(ValueError, match=name):
        kernel(**args)


def test_bad_chunk_size():
    q, k, v, g, _ = random_inputs(3, (1, 2, 5, 4, 3))
    with pytest.raises(ValueError, match="chunk_size"):
        gla_chunk(q, k, v, g=g, chunk_size=0)


def test_gate_is_keyword_only():
    q, k, v, g, _ = random_inputs(3, (1, 2, 5, 4, 3))
    with pytest.raises(TypeError):
        gla_chunk(q, k, v, g)  # type: ignore[misc]


# ---------------------------------------------------------------- the chunkwise reference
@given(shape=shapes, seed=seeds, chunk=st.integers(1, 80), kind=gate_kinds,
       gate_scale=st.sampled_from([0.0, 1e-6, 1.0, 15.0]), with_state=st.booleans())
@example(shape=(1, 1, 1, 3, 2), seed=0, chunk=64, kind="channel", gate_scale=1.0,
         with_state=True)  # T = 1, C > T
@example(shape=(2, 1, 65, 4, 3), seed=1, chunk=64, kind="channel", gate_scale=15.0,
         with_state=True)  # gates down to -30 per step, a last chunk of 1
@example(shape=(1, 2, 9, 3, 3), seed=2, chunk=1, kind="scalar", gate_scale=15.0,
         with_state=False)  # C = 1
def test_reference_equals_recurrent_and_fast_chunk(shape, seed, chunk, kind, gate_scale,
                                                   with_state):
    q, k, v, g, s0 = random_inputs(seed, shape, kind, gate_scale, with_state=with_state)
    kw = dict(g=g, initial_state=s0, output_final_state=True)
    o_ref, s_ref = gla_chunk_reference(q, k, v, chunk_size=chunk, **kw)
    for o, s in (gla_recurrent(q, k, v, **kw), gla_chunk(q, k, v, chunk_size=chunk, **kw)):
        assert_close(o_ref, o)
        assert_close(s_ref, s)


@pytest.mark.parametrize("kernel", [gla_recurrent, gla_chunk, gla_chunk_reference])
@pytest.mark.parametrize("name", ["q", "k", "v", "initial_state"])
def test_nan_and_inf_are_refused_naming_the_argument(kernel, name):
    q, k, v, g, s0 = random_inputs(3, (1, 2, 5, 4, 3), dtype=torch.float32)
    for bad in (math.nan, math.inf):
        args = dict(q=q, k=k, v=v, g=g, initial_state=s0)
        args[name] = args[name].clone()
        args[name].view(-1)[1] = bad
        with pytest.raises(ValueError, match=f"{name}: expected finite"):
            kernel(**args)


# ---------------------------------------------------------------- one token at a time
@given(shape=shapes, seed=seeds, gate_scale=gate_scales, scale=st.sampled_from([None, 0.3]))
def test_step_by_step_equals_recurrent(shape, seed, gate_scale, scale):
    q, k, v, g, s0 = random_inputs(seed, shape, "channel", gate_scale)
    o_r, s_r = gla_recurrent(q, k, v, g=g, initial_state=s0, output_final_state=True,
                             scale=scale)
    state, outputs = s0, []
    for t in range(shape[2]):
        o_t, state = gla_step(q[:, :, t], k[:, :, t], v[:, :, t], g=g[:, :, t], state=state,
                              scale=scale)
        outputs.append(o_t)
    assert_close(torch.stack(outputs, dim=2), o_r)
    assert_close(state, s_r)


def test_step_refuses_bad_inputs_naming_the_argument():
    q, k, v, g, s0 = random_inputs(3, (1, 2, 1, 4, 3), dtype=torch.float32)
    token = dict(q=q[:, :, 0], k=k[:, :, 0], v=v[:, :, 0], g=g[:, :, 0], state=s0)
    for name, value in [("q", q), ("v", token["v"][:, :1]), ("g", token["g"][..., 0]),
                        ("g", 0.5 - token["g"]), ("g", torch.full_like(token["g"], -math.inf)),
                        ("state", s0.double()), ("state", s0[..., :2, :])]:
        args = {**token, name: value}
        with pytest.raises(ValueError, match=name):
            gla_step(args.pop("q"), args.pop("k"), args.pop("v"), **args)


# ------------------------------------------------------------ the decay-masked (SSD) form
@settings(max_examples=20, deadline=None)
@given(seed=seeds, shape=shapes, gate_scale=gate_scales)
def test_decay_masked_attention_equals_the_recurrence(seed, shape, gate_scale):
    """O = (s Q Kᵀ ⊙ M) V with M_ij = e^(b_i − b_j) is scalar-gated linear attention from 0."""
    q, k, v, g, _ = random_inputs(seed, shape, "scalar", gate_scale, with_state=False)
    o_masked, none = decay_masked_attention(q, k, v, g=g)
    o_rec, _ = gla_recurrent(q, k, v, g=g)
    assert none is None
    assert_close(o_masked, o_rec)


def test_decay_masked_attention_is_retnet_with_a_fixed_gate():
    """With g = log γ_h the mask is RetNet's D_ij = γ^(i − j) [j ≤ i]."""
    q, k, v, _, _ = random_inputs(3, (1, 2, 6, 4, 3), "scalar", with_state=False)
    g = retnet_gate(1, 2, 6, dtype=torch.float64)
    o, _ = decay_masked_attention(q, k, v, g=g, scale=1.0)
    gamma = retnet_decay(2, dtype=torch.float64).exp()
    i, j = torch.arange(6)[:, None], torch.arange(6)[None, :]
    d = torch.where(j <= i, gamma[:, None, None] ** (i - j), 0.0)
    assert_close(o, (q @ k.mT * d) @ v)


def test_decay_masked_attention_refuses_a_per_channel_gate():
    q, k, v, g, _ = random_inputs(0, (1, 2, 5, 4, 3), "channel", with_state=False)
    with pytest.raises(ValueError, match="g"):
        decay_masked_attention(q, k, v, g=g)
