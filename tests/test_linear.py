"""Linear attention: the recurrent, parallel and chunkwise forms agree, and the layer decodes."""

from __future__ import annotations

import pytest
import torch
from attnlab.linear import (
    FEATURE_MAPS,
    elu_plus_one,
    identity,
    linear_attention_chunk,
    linear_attention_chunk_reference,
    linear_attention_parallel,
    linear_attention_recurrent,
    linear_attention_step,
)
from conftest import assert_close, seeds, shapes
from hypothesis import example, given, settings
from hypothesis import strategies as st

KERNELS = (linear_attention_recurrent, linear_attention_parallel, linear_attention_chunk)
WITH_REFERENCE = (*KERNELS, linear_attention_chunk_reference)



def random_inputs(seed, shape, dtype=torch.float64, normalize=False, with_state=False):
    """q, k, v (feature-mapped when normalised, so the denominator is positive) and a state."""
    b, h, t, dk, dv = shape
    gen = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(b, h, t, dk, generator=gen, dtype=dtype) for _ in range(2))
    v = torch.randn(b, h, t, dv, generator=gen, dtype=dtype)
    if normalize:
        q, k = elu_plus_one(q), elu_plus_one(k)
    state = None
    if with_state:
        s0 = torch.randn(b, h, dk, dv, generator=gen, dtype=dtype)
        state = (s0, torch.rand(b, h, dk, generator=gen, dtype=dtype) * t) if normalize else s0
    return q, k, v, state




def run(kernel, q, k, v, **kwargs):
    if kernel is linear_attention_chunk:
        return kernel(q, k, v, **kwargs)
    kwargs.pop("chunk_size", None)
    return kernel(q, k, v, **kwargs)


# ---------------------------------------------------------------- the three forms agree
@settings(max_examples=25, deadline=None)
@given(shape=shapes, seed=seeds, chunk=st.integers(1, 64), normalize=st.booleans(),
       with_state=st.booleans())
@example(shape=(1, 1, 1, 3, 2), seed=0, chunk=64, normalize=False, with_state=True)  # T = 1
@example(shape=(2, 1, 65, 2, 5), seed=1, chunk=64, normalize=True, with_state=True)
def test_forms_agree_float64(shape, seed, chunk, normalize, with_state):
    q, k, v, s0 = random_inputs(seed, shape, normalize=normalize, with_state=with_state)
    kw = dict(normalize=normalize, initial_state=s0, output_final_state=True, chunk_size=chunk)
    o_ref, s_ref = run(linear_attention_recurrent, q, k, v, **kw)
    for kernel in (linear_attention_parallel, linear_attention_chunk):
        o, s = run(kernel, q, k, v, **kw)
        assert_close(o, o_ref)
        assert_close(s, s_ref)


@settings(max_examples=15, deadline=None)
@given(shape=shapes, seed=seeds, chunk=st.integers(1, 64), normalize=st.booleans())
def test_forms_agree_float32(shape, seed, chunk, normalize):
    q, k, v, s0 = random_inputs(seed, shape, torch.float32, normalize, with_state=True)
    kw = dict(normalize=normalize, initial_state=s0, output_final_state=True, chunk_size=chunk)
    o_ref, s_ref = run(linear_attention_recurrent, q, k, v, **kw)
    for kernel in (linear_attention_parallel, linear_attention_chunk):
        o, s = run(kernel, q, k, v, **kw)
        assert o.dtype == torch.float32
        assert_close(o, o_ref)
        assert_close(s, s_ref)


@settings(max_examples=12, deadline=None)
@given(shape=shapes.filter(lambda s: s[2] <= 40), seed=seeds, chunk=st.integers(1, 64),
       normalize=st.booleans())
def test_gradients_agree(shape, seed, chunk, normalize):
    q, k, v, s0 = random_inputs(seed, shape, normalize=normalize, with_state=True)
    leaves = [q, k, v, *(s0 if normalize else (s0,))]
    for x in leaves:
        x.requires_grad_(True)
    gen = torch.Generator().manual_seed(seed + 1)
    grads = []
    for kernel in KERNELS:
        o, s = run(kernel, q, k, v, normalize=normalize, initial_state=s0,
                   output_final_state=True, chunk_size=chunk)
        final = s if normalize else (s,)
        weights = [torch.randn(x.shape, generator=gen, dtype=x.dtype) for x in (o, *final)]
        gen.manual_seed(seed + 1)  # the same random readout for every kernel
        loss = sum((w * x).sum() for w, x in zip(weights, (o, *final), strict=True))
        grads.append(torch.autograd.grad(loss, leaves))
    for other in grads[1:]:
        assert_close(tuple(other), tuple(grads[0]))


@settings(max_examples=15, deadline=None)
@given(shape=shapes.filter(lambda s: s[2] >= 2), seed=seeds, chunk=st.integers(1, 64),
       normalize=st.booleans(), data=st.data())
def test_split_sequence_with_carried_state(shape, seed, chunk, normalize, data):
    q, k, v, _ = random_inputs(seed, shape, normalize=normalize)
    cut = data.draw(st.integers(1, shape[2] - 1), label="cut")
    for kernel in (linear_attention_recurrent, linear_attention_chunk):
        kw = dict(normalize=normalize, output_final_state=True, chunk_size=chunk)
        whole, s_whole = run(kernel, q, k, v, **kw)
        first, s_first = run(kernel, q[:, :, :cut], k[:, :, :cut], v[:, :, :cut], **kw)
        second, s_second = run(kernel, q[:, :, cut:], k[:, :, cut:], v[:, :, cut:],
                               initial_state=s_first, **kw)
        assert_close(torch.cat([first, second], dim=2), whole)
        assert_close(s_second, s_whole)


# ---------------------------------------------------------------- values worked by hand
@pytest.mark.parametrize("kernel", KERNELS)
def test_hand_computed_example(kernel):
    # Dk = Dv = 1, scale 1: o_1 = q_1 k_1 v_1 = 15, o_2 = q_2 (k_1 v_1 + k_2 v_2) = 2 * 39 = 78.
    q = torch.tensor([1.0, 2.0], dtype=torch.float64).view(1, 1, 2, 1)
    k = torch.tensor([3.0, 4.0], dtype=torch.float64).view(1, 1, 2, 1)
    v = torch.tensor([5.0, 6.0], dtype=torch.float64).view(1, 1, 2, 1)
    o, s = run(kernel, q, k, v, scale=1.0, output_final_state=True, chunk_size=1)
    assert o.flatten().tolist() == [15.0, 78.0]
    assert s.flatten().tolist() == [39.0]
    # normalised: o_2 = (k_1 v_1 + k_2 v_2) / (k_1 + k_2) = 39 / 7, the key-weighted mean of v
    o, (s, z) = run(kernel, q, k, v, scale=1.0, normalize=True, eps=0.0,
                    output_final_state=True, chunk_size=1)
    assert torch.allclose(o.flatten(), torch.tensor([5.0, 39.0 / 7.0], dtype=torch.float64))
    assert z.flatten().tolist() == [7.0]


def test_default_scale_is_one_over_sqrt_dk():
    q, k, v, _ = random_inputs(0, (1, 2, 9, 4, 3))
    o_default, _ = linear_attention_parallel(q, k, v)
    o_half, _ = linear_attention_parallel(q, k, v, scale=0.5)
    assert_close(o_default, o_half)


@settings(max_examples=10, deadline=None)
@given(shape=shapes, seed=seeds)
def test_normalised_output_is_a_weighted_mean_of_values(shape, seed):
    q, k, v, _ = random_inputs(seed, shape, normalize=True)
    o, _ = linear_attention_chunk(q, k, v, normalize=True, eps=0.0, chunk_size=8)
    assert_close(o[:, :, 0], v[:, :, 0])  # one key: its value, exactly
    running_max = torch.cummax(v, dim=2).values
    running_min = -torch.cummax(-v, dim=2).values
    assert (o <= running_max + 1e-12).all() and (o >= running_min - 1e-12).all()


def test_feature_maps():
    x = torch.tensor([-2.0, 0.0, 3.0], dtype=torch.float64)
    expected = torch.tensor([torch.e**-2.0, 1.0, 4.0], dtype=torch.float64)
    assert torch.allclose(elu_plus_one(x), expected)
    assert (elu_plus_one(torch.linspace(-30, 30, 101)) > 0).all()
    assert identity(x) is x
    assert FEATURE_MAPS == {"elu+1": elu_plus_one, "identity": identity}


def test_kernels_compute_in_the_input_dtype():
    for dtype in (torch.float32, torch.float64):
        q, k, v, s0 = random_inputs(1, (1, 1, 5, 2, 3), dtype, with_state=True)
        for kernel in KERNELS:
            o, s = kernel(q, k, v, initial_state=s0, output_final_state=True)
            assert o.dtype == dtype and s.dtype == dtype


def test_state_size_does_not_grow_with_t():
    for t in (1, 10, 100):
        q, k, v, _ = random_inputs(2, (1, 2, t, 4, 3), normalize=True)
        _, (s, z) = linear_attention_chunk(q, k, v, normalize=True, output_final_state=True)
        assert s.shape == (1, 2, 4, 3) and z.shape == (1, 2, 4)


# ---------------------------------------------------------------- bad inputs
def _bad_cases():
    q, k, v, s0 = random_inputs(3, (1, 2, 5, 4, 3), torch.float32, with_state=True)
    z0 = torch.zeros(1, 2, 4)
    return [
        ("q", dict(q=q[0])),  # wrong rank
        ("k", dict(k=k[:, :, :4])),  # mismatched T
        ("k", dict(k=k[:, :1])),  # mismatched H
        ("v", dict(v=v.double())),  # wrong dtype
        ("q", dict(q=q.long())),  # not a float
        ("v", dict(v=v[:, :, :3])),  # mismatched T
        ("initial_state", dict(initial_state=s0[:, :, :3])),
        ("initial_state", dict(initial_state=s0.double())),
        ("initial_state", dict(initial_state=s0, normalize=True)),  # needs (S, z)
        (r"initial_state\[1\]", dict(initial_state=(s0, z0[:, :, :2]), normalize=True)),
        ("scale", dict(scale="big")),
        ("eps", dict(eps=-1.0, normalize=True)),
    ]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("name,override", _bad_cases())
def test_bad_inputs_raise_value_error_naming_the_argument(kernel, name, override):
    q, k, v, _ = random_inputs(3, (1, 2, 5, 4, 3), torch.float32)
    args = dict(q=q, k=k, v=v) | override
    with pytest.raises(ValueError, match=name):
        kernel(**args)


@pytest.mark.parametrize("chunk_size", [0, -3, 2.5, True])
def test_bad_chunk_size(chunk_size):
    q, k, v, _ = random_inputs(3, (1, 2, 5, 4, 3))
    with pytest.raises(ValueError, match="chunk_size"):
        linear_attention_chunk(q, k, v, chunk_size=chunk_size)


# ---------------------------------------------------------------- the chunkwise reference
@given(shape=shapes, seed=seeds, chunk=st.integers(1, 80), with_state=st.booleans())
@example(shape=(1, 1, 1, 3, 2), seed=0, chunk=64, with_state=True)  # T = 1, C > T
@example(shape=(2, 1, 65, 2, 5), seed=1, chunk=64, with_state=True)  # a last chunk of 1
@example(shape=(1, 2, 7, 3, 3), seed=2, chunk=1, with_state=False)  # C = 1
def test_reference_equals_recurrent_and_fast_chunk(shape, seed, chunk, with_state):
    q, k, v, s0 = random_inputs(seed, shape, with_state=with_state)
    kw = dict(initial_state=s0, output_final_state=True)
    o_ref, s_ref = linear_attention_chunk_reference(q, k, v, chunk_size=chunk, **kw)
    for o, s in (linear_attention_recurrent(q, k, v, **kw),
                 linear_attention_chunk(q, k, v, chunk_size=chunk, **kw)):
        assert_close(o_ref, o)
        assert_close(s_ref, s)


@pytest.mark.parametrize("kernel", WITH_REFERENCE)
@pytest.mark.parametrize("name", ["q", "k", "v", "initial_state"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nan_and_inf_are_refused_naming_the_argument(kernel, name, bad):
    q, k, v, s0 = random_inputs(3, (1, 2, 5, 4, 3), torch.float32, with_state=True)
    args = dict(q=q, k=k, v=v, initial_state=s0)
    args[name] = args[name].clone()
    args[name].view(-1)[2] = bad
    with pytest.raises(ValueError, match=f"{name}: expected finite"):
        kernel(**args)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("name", ["q", "k"])
def test_normalising_negative_features_is_refused(kernel, name):
    q, k, v, _ = random_inputs(3, (1, 2, 5, 4, 3), normalize=True)
    args = dict(q=q, k=k, v=v)
    args[name] = args[name] - 2.0
    with pytest.raises(ValueError, match=f"{name}: normalize=True expects non-negative"):
        kernel(**args, normalize=True)
    kernel(**args)  # without the normaliser negative features are fine


@pytest.mark.parametrize("kernel", WITH_REFERENCE)
def test_empty_sequence_is_refused_naming_q(kernel):
    q, k, v, _ = random_inputs(3, (1, 2, 5, 4, 3))
    with pytest.raises(ValueError, match="q: expected at least one time step"):
        kernel(q[:, :, :0], k[:, :, :0], v[:, :, :0])


# ---------------------------------------------------------------- one token at a time
@given(shape=shapes, seed=seeds, normalize=st.booleans(), scale=st.sampled_from([None, 0.3]))
def test_step_by_step_equals_recurrent(shape, seed, normalize, scale):
    q, k, v, s0 = random_inputs(seed, shape, normalize=normalize, with_state=True)
    kw = dict(normalize=normalize, scale=scale)
    o_r, s_r = linear_attention_recurrent(q, k, v, initial_state=s0, output_final_state=True,
                                          **kw)
    state, outputs = s0, []
    for t in range(shape[2]):
        o_t, state = linear_attention_step(q[:, :, t], k[:, :, t], v[:, :, t], state=state,
                                           **kw)
        outputs.append(o_t)
    assert_close(torch.stack(outputs, dim=2), o_r)
    assert_close(state, s_r)


def test_step_refuses_bad_inputs_naming_the_argument():
    q, k, v, s0 = random_inputs(3, (1, 2, 1, 4, 3), torch.float32, with_state=True)
    token = dict(q=q[:, :, 0], k=k[:, :, 0], v=v[:, :, 0], state=s0)
    z0 = torch.zeros(1, 2, 4)
    for name, override in [
        ("q", dict(q=q)),  # a sequence, not one token
        ("k", dict(k=token["k"][:, :1])),
        ("v", dict(v=token["v"].double())),
        ("state", dict(state=s0[..., :2])),
        ("state", dict(state=torch.full_like(s0, float("inf")))),
        ("state", dict(state=s0, normalize=True)),  # needs (S, z)
        (r"state\[1\]", dict(state=(s0, z0[..., :2]), normalize=True)),
        ("k: normalize=True", dict(state=(s0, z0), q=token["q"].abs(), k=-token["k"].abs(),
                                   normalize=True)),
        ("eps", dict(eps=-1.0)),
        ("scale", dict(scale="big")),
    ]:
        args = token | override
        with pytest.raises(ValueError, match=name):
            linear_attention_step(args.pop("q"), args.pop("k"), args.pop("v"), **args)
