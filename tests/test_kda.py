"""Kimi Delta Attention: chunkwise equals the recurrence (outputs, states, gradients), one decode
step at a time equals the recurrence, a channel-broadcast gate is the gated delta rule, the
decay inside a chunk excludes its starting position (the Kimi Linear index erratum), extreme gates
stay finite, bad inputs are refused, and the layer decodes token by token exactly."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from attnlab.delta import gated_delta_rule_chunk, gated_delta_rule_recurrent
from attnlab.kda import kda_chunk, kda_chunk_reference, kda_parallel, kda_recurrent, kda_step
from conftest import assert_close, seeds, shapes
from hypothesis import example, given, settings
from hypothesis import strategies as st

chunk_sizes = st.integers(1, 64)
# magnitude of -g per step and channel: exactly 0, near 0, moderate, very fast, and "mixed"
# (each channel either never forgets or forgets almost at once)
gate_kinds = st.sampled_from([0.0, 1e-6, 0.5, 30.0, "mixed"])
beta_kinds = st.sampled_from(["uniform", "ends", "upto2"])


def random_inputs(seed, shape, gate_kind=0.5, beta_kind="uniform", dtype=torch.float64):
    """q, k (unit norm), v, beta, a per-channel log-gate g ≤ 0 ``[B, H, T, Dk]`` and S_0."""
    b, h, t, dk, dv = shape
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, t, dk, generator=gen, dtype=dtype)
    k = F.normalize(torch.randn(b, h, t, dk, generator=gen, dtype=dtype), dim=-1)
    v = torch.randn(b, h, t, dv, generator=gen, dtype=dtype)
    u = torch.rand(b, h, t, generator=gen, dtype=dtype)
    beta = {"uniform": u, "ends": (u > 0.5).to(dtype), "upto2": 2 * u}[beta_kind]
    r = torch.rand(b, h, t, dk, generator=gen, dtype=dtype)
    if gate_kind == "mixed":
        g = -30.0 * (torch.rand(b, h, 1, dk, generator=gen, dtype=dtype) > 0.5) * r
    else:
        g = -gate_kind * r
    s0 = torch.randn(b, h, dk, dv, generator=gen, dtype=dtype)
    return q, k, v, beta, g, s0




# ------------------------------------------------------------------------- equivalent forms
@given(seed=seeds, shape=shapes, chunk_size=chunk_sizes, gate_kind=gate_kinds,
       beta_kind=beta_kinds, with_state=st.booleans())
@example(seed=0, shape=(1, 1, 1, 3, 5), chunk_size=64, gate_kind=0.5, beta_kind="uniform",
         with_state=True)
@example(seed=1, shape=(2, 1, 65, 4, 3), chunk_size=64, gate_kind="mixed", beta_kind="upto2",
         with_state=True)
@example(seed=2, shape=(1, 2, 48, 8, 2), chunk_size=16, gate_kind=30.0, beta_kind="ends",
         with_state=False)
def test_chunk_equals_recurrent(seed, shape, chunk_size, gate_kind, beta_kind, with_state):
    q, k, v, beta, g, s0 = random_inputs(seed, shape, gate_kind, beta_kind)
    s0 = s0 if with_state else None
    o_r, s_r = kda_recurrent(q, k, v, g=g, beta=beta, initial_state=s0, output_final_state=True)
    o_c, s_c = kda_chunk(q, k, v, g=g, beta=beta, initial_state=s0, output_final_state=True,
                         chunk_size=chunk_size)
    assert_close(o_c, o_r)
    assert_close(s_c, s_r)
    none = kda_chunk(q, k, v, g=g, beta=beta, chunk_size=chunk_size)[1]
    assert none is None


def gradients(kernel, q, k, v, beta, g, s0, **kw):
    """d(loss)/d(q, k, v, beta, g, S_0) for a loss that weighs every output and state entry."""
    leaves = [x.clone().requires_grad_() for x in (q, k, v, beta, g, s0)]
    q, k, v, beta, g, s0 = leaves
    o, s = kernel(q, k, v, g=g, beta=beta, initial_state=s0, output_final_state=True, **kw)
    gen = torch.Generator().manual_seed(0)
    loss = (o * torch.randn(o.shape, generator=gen, dtype=o.dtype)).sum() + (
        s * torch.randn(s.shape, generator=gen, dtype=s.dtype)).sum()
    return torch.autograd.grad(loss, leaves)


@settings(max_examples=12)
@given(seed=seeds, shape=shapes, chunk_size=chunk_sizes, gate_kind=gate_kinds)
def test_gradients_chunk_equal_recurrent(seed, shape, chunk_size, gate_kind):
    inputs = random_inputs(seed, shape, gate_kind)
    expected = gradients(kda_recurrent, *inputs)
    actual = gradients(kda_chunk, *inputs, chunk_size=chunk_size)
    for a, e in zip(actual, expected, strict=True):
        assert_close(a, e)


@settings(max_examples=8)
@given(seed=seeds, shape=shapes, chunk_size=chunk_sizes, gate_kind=gate_kinds)
def test_float32_chunk_equals_recurrent(seed, shape, chunk_size, gate_kind):
    q, k, v, beta, g, s0 = random_inputs(seed, shape, gate_kind, dtype=torch.float32)
    o_r, s_r = kda_recurrent(q, k, v, g=g, beta=beta, initial_state=s0, output_final_state=True)
    o_c, s_c = kda_chunk(q, k, v, g=g, beta=beta, initial_state=s0, output_final_state=True,
                         chunk_size=chunk_size)
    assert o_c.dtype == s_c.dtype == torch.float32
    assert_close(o_c, o_r)
    assert_close(s_c, s_r)


@given(seed=seeds, shape=shapes, gate_kind=gate_kinds, scale=st.sampled_from([None, 0.3]))
def test_step_by_step_equals_recurrent(seed, shape, gate_kind, scale):
    q, k, v, beta, g, s0 = random_inputs(seed, shape, gate_kind)
    o_r, s_r = kda_recurrent(q, k, v, g=g, beta=beta, initial_state=s0, output_final_state=True,
                             scale=scale)
    state, outputs = s0, []
    for t in range(shape[2]):
        o_t, state = kda_step(q[:, :, t], k[:, :, t], v[:, :, t], g=g[:, :, t], beta=beta[:, :, t],
                              state=state, scale=scale)
        outputs.append(o_t)
    assert_close(torch.stack(outputs, dim=2), o_r)
    assert_close(state, s_r)


@settings(max_examples=15)
@given(seed=seeds, shape=shapes, chunk_size=chunk_sizes, split=st.floats(0.0, 1.0))
def test_split_sequence_with_carried_state_equals_whole(seed, shape, chunk_size, split):
    q, k, v, beta, g, s0 = random_inputs(seed, shape, "mixed")
    t = shape[2]
    cut = min(max(1, round(split * t)), t)

    def run(sl, state):
        return kda_chunk(q[:, :, sl], k[:, :, sl], v[:, :, sl], g=g[:, :, sl], beta=beta[:, :, sl],
                         initial_state=state, output_final_state=True, chunk_size=chunk_size)

    o_all, s_all = run(slice(0, t), s0)
    o_1, s_1 = run(slice(0, cut), s0)
    if cut < t:
        o_2, s_1 = run(slice(cut, t), s_1)
        o_1 = torch.cat([o_1, o_2], dim=2)
    assert_close(o_1, o_all)
    assert_close(s_1, s_all)


# ------------------------------------------------------------------------- reductions, erratum
@given(seed=seeds, shape=shapes, chunk_size=chunk_sizes, gate_kind=gate_kinds)
def test_gate_broadcast_over_channels_is_the_gated_delta_rule(seed, shape, chunk_size, gate_kind):
    q, k, v, beta, g, s0 = random_inputs(seed, shape, gate_kind)
    scalar = g[..., 0]
    channel = scalar[..., None].expand_as(g)
    for kda, gdn, extra in ((kda_recurrent, gated_delta_rule_recurrent, {}),
                            (kda_chunk, gated_delta_rule_chunk, {"chunk_size": chunk_size})):
        o_k, s_k = kda(q, k, v, g=channel, beta=beta, initial_state=s0, output_final_state=True,
                       **extra)
        o_g, s_g = gdn(q, k, v, g=scalar, beta=beta, initial_state=s0, output_final_state=True,
                       **extra)
        assert_close(o_k, o_g)
        assert_close(s_k, s_g)


def parallel_form(q, k, v, g, beta, *, exclusive):
    """O = A_qk (I + StrictTril(diag(β) A_kk))⁻¹ diag(β) V with S_0 = 0 (Notation appendix §6),
    built from explicit products of α: γ over (j, i] (exclusive, correct) or over [j, i] (KL's §2.1
    definition read literally)."""
    t, dk = q.shape[-2], q.shape[-1]
    alpha = g.exp()
    gamma = torch.ones(*q.shape[:2], t, t, dk, dtype=q.dtype)  # γ[i, j] for j <= i
    for i in range(t):
        for j in range(i + 1):
            first = j + 1 if exclusive else j
            gamma[:, :, i, j] = alpha[:, :, first : i + 1].prod(dim=2)
    a_qk = torch.einsum("bhid,bhijd,bhjd->bhij", q, gamma, k).tril()
    a_kk = torch.einsum("bhid,bhijd,bhjd->bhij", k, gamma, k).tril(-1)
    lower = torch.eye(t, dtype=q.dtype) + beta[..., :, None] * a_kk
    return a_qk @ torch.linalg.solve_triangular(lower, beta[..., None] * v, upper=False)


def test_decay_inside_a_chunk_excludes_the_starting_position():
    """The Kimi Linear index erratum: γ^{i→r} must be Π_{s=i+1..r} α_s, not Π_{s=i..r}."""
    q, k, v, beta, g, _ = random_inputs(7, (1, 2, 12, 4, 3), 1.0)
    o_chunk, _ = kda_chunk(q, k, v, g=g, beta=beta, scale=1.0, chunk_size=8)
    assert_close(o_chunk, parallel_form(q, k, v, g, beta, exclusive=True))
    error = (o_chunk - parallel_form(q, k, v, g, beta, exclusive=False)).abs().max()
    assert error > 1e-2  # the inclusive reading is a different (wrong) model


@pytest.mark.parametrize("chunk_size", [64, 40])
def test_extreme_gates_stay_finite_and_match_in_float32(chunk_size):
    """g down to -20 per step and channel over T = 1024 (exp(-B) alone would overflow float32
    within 5 steps): outputs, states and gradients are finite and match the recurrence."""
    q, k, v, beta, _, s0 = random_inputs(5, (1, 2, 1024, 16, 16), dtype=torch.float32)
    g = -20 * torch.rand(1, 2, 1024, 16, generator=torch.Generator().manual_seed(1))
    inputs = (q, k, v, beta, g, s0)
    o_r, s_r = kda_recurrent(q, k, v, g=g, beta=beta, initial_state=s0, output_final_state=True)
    o_c, s_c = kda_chunk(q, k, v, g=g, beta=beta, initial_state=s0, output_final_state=True,
                         chunk_size=chunk_size)
    assert_close(o_c, o_r)
    assert_close(s_c, s_r)
    grads = gradients(kda_chunk, *inputs, chunk_size=chunk_size)
    assert all(torch.isfinite(gr).all() for gr in grads)
    if chunk_size == 64:
        for a, e in zip(grads, gradients(kda_recurrent, *inputs), strict=True):
            assert_close(a, e)


# ------------------------------------------------------------------------- bad inputs
def valid_args():
    q, k, v, beta, g, s0 = random_inputs(0, (2, 3, 10, 4, 5), dtype=torch.float32)
    return dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=s0)


def call(kernel, args):
    args = dict(args)
    return kernel(args.pop("q"), args.pop("k"), args.pop("v"), **args)


BAD_VALUES = {
    "q": lambda a: a["q"][0],  # wrong rank
    "k": lambda a: a["k"][:, :, :7],  # T mismatch
    "v": lambda a: a["v"][:1],  # B mismatch
    "g": lambda a: a["g"][..., :3],  # Dk mismatch
    "beta": lambda a: a["beta"][:, :2],  # H mismatch
    "initial_state": lambda a: a["initial_state"][..., :3],  # Dv mismatch
}


@pytest.mark.parametrize("kernel", [kda_recurrent, kda_chunk])
@pytest.mark.parametrize("name", list(BAD_VALUES))
def test_bad_shapes_are_refused_naming_the_argument(kernel, name):
    args = valid_args()
    args[name] = BAD_VALUES[name](args)
    with pytest.raises(ValueError, match=name):
        call(kernel, args)


@pytest.mark.parametrize("kernel", [kda_recurrent, kda_chunk])
def test_bad_dtypes_and_values_are_refused(kernel):
    args = valid_args()
    for name, value in [("k", args["k"].double()), ("v", args["v"].half()),
                        ("q", args["q"].to(torch.int32)), ("beta", args["beta"] + 2.5),
                        ("beta", args["beta"] - 0.1), ("g", args["g"] + 0.5),
                        ("g", args["g"][..., 0]), ("g", args["g"] * float("inf")),
                        ("initial_state", args["initial_state"].double())]:
        with pytest.raises(ValueError, match=name):
            call(kernel, {**args, name: value})
    with pytest.raises(ValueError, match="chunk_size"):
        kda_chunk(args["q"], args["k"], args["v"], g=args["g"], beta=args["beta"], chunk_size=0)


def test_step_refuses_bad_inputs():
    a = valid_args()
    step = dict(q=a["q"][:, :, 0], k=a["k"][:, :, 0], v=a["v"][:, :, 0], g=a["g"][:, :, 0],
                beta=a["beta"][:, :, 0], state=a["initial_state"])
    kda_step(step["q"], step["k"], step["v"], g=step["g"], beta=step["beta"], state=step["state"])
    bad = [("state", step["state"][..., :3, :]), ("state", step["state"][0]),
           ("state", step["state"].double()), ("g", step["g"] + 1.0), ("g", step["g"][..., None]),
           ("beta", step["beta"] * 3.0), ("beta", step["beta"][..., None]), ("q", a["q"]),
           ("v", step["v"][:1])]
    for name, value in bad:
        args = {**step, name: value}
        with pytest.raises(ValueError, match=name):
            kda_step(args.pop("q"), args.pop("k"), args.pop("v"), **args)


# ------------------------------------------------------------------------- the chunkwise reference
@given(seed=seeds, shape=shapes, chunk_size=st.integers(1, 80), gate_kind=gate_kinds,
       beta_kind=st.sampled_from(["uniform", "ends", "upto2", "zeros", "ones"]),
       with_state=st.booleans())
@example(seed=0, shape=(1, 1, 1, 3, 5), chunk_size=64, gate_kind=0.5, beta_kind="uniform",
         with_state=True)  # T = 1, C > T
@example(seed=1, shape=(2, 1, 65, 4, 3), chunk_size=64, gate_kind="mixed", beta_kind="upto2",
         with_state=True)  # a last chunk of 1
@example(seed=2, shape=(1, 2, 48, 8, 2), chunk_size=1, gate_kind=30.0, beta_kind="ones",
         with_state=False)  # C = 1, gates down to -30 per step
def test_reference_equals_recurrent_and_fast_chunk(seed, shape, chunk_size, gate_kind,
                                                   beta_kind, with_state):
    beta_base = {"zeros": "uniform", "ones": "uniform"}.get(beta_kind, beta_kind)
    q, k, v, beta, g, s0 = random_inputs(seed, shape, gate_kind, beta_base)
    if beta_kind in ("zeros", "ones"):
        beta = torch.full_like(beta, float(beta_kind == "ones"))
    kw = dict(g=g, beta=beta, initial_state=s0 if with_state else None, output_final_state=True)
    o_ref, s_ref = kda_chunk_reference(q, k, v, chunk_size=chunk_size, **kw)
    for o, s in (kda_recurrent(q, k, v, **kw), kda_chunk(q, k, v, chunk_size=chunk_size, **kw)):
        assert_close(o_ref, o)
        assert_close(s_ref, s)


@pytest.mark.parametrize("kernel", [kda_recurrent, kda_chunk, kda_chunk_reference])
def test_bad_values_are_refused_naming_the_argument(kernel):
    q, k, v, beta, g, s0 = random_inputs(0, (1, 2, 6, 4, 3), dtype=torch.float32)
    valid = dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=s0)
    for name in ("q", "k", "v", "initial_state"):
        args = {**valid, name: valid[name].clone()}
        args[name].view(-1)[0] = float("nan")
        with pytest.raises(ValueError, match=f"{name}: expected finite"):
            kernel(**args)
    with pytest.raises(ValueError, match="beta, k"):
        kernel(**{**valid, "k": 10 * k, "beta": torch.ones_like(beta)})
    with pytest.raises(ValueError, match="q: expected at least one time step"):
        kernel(**{**valid, **{n: valid[n][:, :, :0] for n in ("q", "k", "v", "g", "beta")}})


def test_step_refuses_nan_and_long_keys():
    q, k, v, beta, g, s0 = random_inputs(0, (1, 2, 1, 4, 3), dtype=torch.float32)
    step = dict(q=q[:, :, 0], k=k[:, :, 0], v=v[:, :, 0], g=g[:, :, 0], beta=beta[:, :, 0],
                state=s0)
    with pytest.raises(ValueError, match="state: expected finite"):
        kda_step(**{**step, "state": torch.full_like(s0, float("inf"))})
    with pytest.raises(ValueError, match="beta, k"):
        kda_step(**{**step, "k": 10 * step["k"], "beta": torch.ones_like(step["beta"])})


# ------------------------------------------------------------------------- the parallel form
@pytest.mark.parametrize("t", [1, 5, 13])
def test_parallel_equals_chunk_and_the_inclusive_reading_differs(t):
    q, k, v, beta, g, _ = random_inputs(t, (1, 2, t, 4, 3), 1.0)
    o_chunk, _ = kda_chunk(q, k, v, g=g, beta=beta, chunk_size=4)
    o_exclusive, none = kda_parallel(q, k, v, g=g, beta=beta)
    assert none is None
    assert_close(o_exclusive, o_chunk)
    o_inclusive, _ = kda_parallel(q, k, v, g=g, beta=beta, include_start=True)
    assert (o_inclusive[:, :, 0] - o_chunk[:, :, 0]).abs().max() > 1e-3  # wrong at once


def test_parallel_inclusive_is_one_extra_decay_on_the_first_token():
    """With one token, the inclusive reading reads q through Diag(α_1) once more."""
    q, k, v, beta, g, _ = random_inputs(9, (1, 2, 1, 4, 3), 1.0)
    o_inclusive, _ = kda_parallel(q, k, v, g=g, beta=beta, include_start=True)
    o_decayed, _ = kda_recurrent(q * g.exp(), k, v, g=g, beta=beta)
    assert_close(o_inclusive, o_decayed)


def test_parallel_matches_the_explicit_product_form():
    q, k, v, beta, g, _ = random_inputs(7, (1, 2, 12, 4, 3), 1.0)
    o, _ = kda_parallel(q, k, v, g=g, beta=beta, scale=1.0)
    assert_close(o, parallel_form(q, k, v, g, beta, exclusive=True))
    o_inclusive, _ = kda_parallel(q, k, v, g=g, beta=beta, scale=1.0, include_start=True)
    assert_close(o_inclusive, parallel_form(q, k, v, g, beta, exclusive=False))


def test_parallel_refuses_bad_inputs():
    q, k, v, beta, g, _ = random_inputs(0, (1, 2, 4, 4, 3))
    with pytest.raises(ValueError, match="include_start"):
        kda_parallel(q, k, v, g=g, beta=beta, include_start=1)
    with pytest.raises(ValueError, match="g"):
        kda_parallel(q, k, v, g=0.5 - g, beta=beta)
