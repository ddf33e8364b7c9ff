"""The delta rule and the gated delta rule: chunkwise (WY / UT) equals the recurrence for outputs,
final states and gradients; the special cases (β = 0, β = 1, g = 0) do what the equations say;
extreme gates stay finite; bad inputs are refused; the layers decode token by token exactly."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from attnlab._chunk_engine import unit_lower_inverse
from attnlab.delta import (
    delta_rule_chunk,
    delta_rule_chunk_reference,
    delta_rule_parallel,
    delta_rule_recurrent,
    delta_rule_step,
    gated_delta_rule_chunk,
    gated_delta_rule_chunk_reference,
    gated_delta_rule_recurrent,
    gated_delta_rule_step,
    ut_transform,
)
from conftest import assert_close, seeds, shapes
from hypothesis import example, given, settings
from hypothesis import strategies as st

chunk_sizes = st.integers(1, 64)
# β: the usual (0, 1), the ends 0 and 1 exactly, a mix of both ends, and up to 2 (negative
# eigenvalues 1 - β of the transition along k)
beta_kinds = st.sampled_from(["uniform", "zeros", "ones", "ends", "upto2"])
# typical magnitude of -g per step: exactly 0, near 0 (α ≈ 1), moderate, very fast decay
gate_scales = st.sampled_from([0.0, 1e-6, 0.5, 30.0])


def random_inputs(seed, shape, beta_kind="uniform", gate_scale=0.5, dtype=torch.float64):
    """q, k (unit-norm keys, as the layers give), v, beta, a scalar log-gate g ≤ 0 and S_0."""
    b, h, t, dk, dv = shape
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, t, dk, generator=gen, dtype=dtype)
    k = F.normalize(torch.randn(b, h, t, dk, generator=gen, dtype=dtype), dim=-1)
    v = torch.randn(b, h, t, dv, generator=gen, dtype=dtype)
    u = torch.rand(b, h, t, generator=gen, dtype=dtype)
    beta = {
        "uniform": u,
        "zeros": torch.zeros_like(u),
        "ones": torch.ones_like(u),
        "ends": (u > 0.5).to(dtype),
        "upto2": 2 * u,
    }[beta_kind]
    g = -gate_scale * torch.rand(b, h, t, generator=gen, dtype=dtype)
    s0 = torch.randn(b, h, dk, dv, generator=gen, dtype=dtype)
    return q, k, v, beta, g, s0




def run_both(recurrent, chunk, args, chunk_size, **kw):
    o_r, s_r = recurrent(*args, output_final_state=True, **kw)
    o_c, s_c = chunk(*args, output_final_state=True, chunk_size=chunk_size, **kw)
    return (o_r, s_r), (o_c, s_c)


# ------------------------------------------------------------------------- equivalent forms
@given(seed=seeds, shape=shapes, chunk_size=chunk_sizes, beta_kind=beta_kinds,
       with_state=st.booleans())
@example(seed=0, shape=(1, 1, 1, 3, 5), chunk_size=64, beta_kind="uniform", with_state=True)
@example(seed=1, shape=(2, 1, 65, 4, 3), chunk_size=64, beta_kind="upto2", with_state=True)
@example(seed=2, shape=(1, 2, 64, 8, 2), chunk_size=16, beta_kind="ends", with_state=False)
def test_delta_chunk_equals_recurrent(seed, shape, chunk_size, beta_kind, with_state):
    q, k, v, beta, _, s0 = random_inputs(seed, shape, beta_kind)
    s0 = s0 if with_state else None
    (o_r, s_r), (o_c, s_c) = run_both(delta_rule_recurrent, delta_rule_chunk, (q, k, v),
                                      chunk_size, beta=beta, initial_state=s0)
    assert_close(o_c, o_r)
    assert_close(s_c, s_r)


@given(seed=seeds, shape=shapes, chunk_size=chunk_sizes, beta_kind=beta_kinds,
       gate_scale=gate_scales, with_state=st.booleans())
@example(seed=0, shape=(1, 1, 1, 3, 5), chunk_size=64, beta_kind="uniform", gate_scale=0.5,
         with_state=True)
@example(seed=1, shape=(2, 1, 65, 4, 3), chunk_size=64, beta_kind="upto2", gate_scale=30.0,
         with_state=True)
def test_gated_chunk_equals_recurrent(seed, shape, chunk_size, beta_kind, gate_scale,
                                      with_state):
    q, k, v, beta, g, s0 = random_inputs(seed, shape, beta_kind, gate_scale)
    s0 = s0 if with_state else None
    (o_r, s_r), (o_c, s_c) = run_both(gated_delta_rule_recurrent, gated_delta_rule_chunk,
                                      (q, k, v), chunk_size, g=g, beta=beta, initial_state=s0)
    assert_close(o_c, o_r)
    assert_close(s_c, s_r)


def gradients(kernel, q, k, v, beta, g, s0, **kw):
    """d(loss)/d(q, k, v, beta, g, S_0) for a loss that weighs every output and state entry."""
    leaves = [x.clone().requires_grad_() for x in (q, k, v, beta, g, s0)]
    q, k, v, beta, g, s0 = leaves
    gate = {} if kw.pop("no_gate", False) else {"g": g}
    o, s = kernel(q, k, v, beta=beta, initial_state=s0, output_final_state=True, **gate, **kw)
    gen = torch.Generator().manual_seed(0)
    loss = (o * torch.randn(o.shape, generator=gen, dtype=o.dtype)).sum() + (
        s * torch.randn(s.shape, generator=gen, dtype=s.dtype)).sum()
    grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    return [torch.zeros_like(x) if gr is None else gr for x, gr in zip(leaves, grads, strict=True)]


@settings(max_examples=12)
@given(seed=seeds, shape=shapes, chunk_size=chunk_sizes, gate_scale=gate_scales)
def test_gradients_chunk_equal_recurrent(seed, shape, chunk_size, gate_scale):
    q, k, v, beta, g, s0 = random_inputs(seed, shape, "uniform", gate_scale)
    for recurrent, chunk, gate in ((delta_rule_recurrent, delta_rule_chunk, False),
                                   (gated_delta_rule_recurrent, gated_delta_rule_chunk, True)):
        expected = gradients(recurrent, q, k, v, beta, g, s0, no_gate=not gate)
        actual = gradients(chunk, q, k, v, beta, g, s0, no_gate=not gate, chunk_size=chunk_size)
        for a, e in zip(actual, expected, strict=True):
            assert_close(a, e)


@settings(max_examples=8)
@given(seed=seeds, shape=shapes, chunk_size=chunk_sizes, beta_kind=beta_kinds)
def test_float32_chunk_equals_recurrent(seed, shape, chunk_size, beta_kind):
    q, k, v, beta, g, s0 = random_inputs(seed, shape, beta_kind, 0.5, dtype=torch.float32)
    for recurrent, chunk, gate in ((delta_rule_recurrent, delta_rule_chunk, {}),
                                   (gated_delta_rule_recurrent, gated_delta_rule_chunk,
                                    {"g": g})):
        (o_r, s_r), (o_c, s_c) = run_both(recurrent, chunk, (q, k, v), chunk_size, beta=beta,
                                          initial_state=s0, **gate)
        assert o_c.dtype == torch.float32
        assert_close(o_c, o_r)
        assert_close(s_c, s_r)


@given(seed=seeds, shape=shapes, beta_kind=beta_kinds)
def test_parallel_equals_recurrent(seed, shape, beta_kind):
    q, k, v, beta, _, _ = random_inputs(seed, shape, beta_kind)
    o_p, none = delta_rule_parallel(q, k, v, beta=beta)
    o_r, _ = delta_rule_recurrent(q, k, v, beta=beta)
    assert none is None
    assert_close(o_p, o_r)


@given(seed=seeds, size=st.integers(1, 100), batch=st.integers(1, 3))
def test_unit_lower_inverse_inverts(seed, size, batch):
    """By halves down to blocks of 16, with odd sizes split unevenly: L⁻¹ L = I, and the same
    numbers as one triangular solve against the identity. L is a UT matrix of unit keys and
    β ≤ 1, as the kernels give it (a random triangle's inverse grows like 2^C)."""
    gen = torch.Generator().manual_seed(seed)
    k = F.normalize(torch.randn(batch, size, 8, generator=gen, dtype=torch.float64), dim=-1)
    beta = torch.rand(batch, size, generator=gen, dtype=torch.float64)
    lower = torch.eye(size, dtype=torch.float64) + (beta[:, :, None] * (k @ k.mT)).tril(-1)
    inverse = unit_lower_inverse(lower)
    identity = torch.eye(size, dtype=torch.float64).expand_as(lower)
    solved = torch.linalg.solve_triangular(lower, identity, upper=False, unitriangular=True)
    assert inverse.shape == lower.shape
    assert torch.equal(inverse.triu(1), torch.zeros_like(inverse))
    assert_close(inverse @ lower, identity)
    assert_close(inverse, solved)


def test_unit_lower_inverse_gradient():
    """Its gradient is that of the inverse: torch's numerical gradient check, in float64."""
    gen = torch.Generator().manual_seed(0)
    strict = (0.3 * torch.randn(1, 21, 21, generator=gen, dtype=torch.float64)).tril(-1)
    strict.requires_grad_(True)

    def inverse_of(strict_part):
        return unit_lower_inverse(torch.eye(21, dtype=torch.float64) + strict_part.tril(-1))

    assert torch.autograd.gradcheck(inverse_of, (strict,))


@settings(max_examples=15)
@given(seed=seeds, shape=shapes, chunk_size=chunk_sizes, split=st.floats(0.0, 1.0),
       gated=st.booleans())
def test_split_sequence_with_carried_state_equals_whole(seed, shape, chunk_size, split, gated):
    q, k, v, beta, g, s0 = random_inputs(seed, shape)
    t = shape[2]
    cut = min(max(1, round(split * t)), t - 1) if t > 1 else 1
    kernel = gated_delta_rule_chunk if gated else delta_rule_chunk

    def run(sl, state):
        gate = {"g": g[:, :, sl]} if gated else {}
        return kernel(q[:, :, sl], k[:, :, sl], v[:, :, sl], beta=beta[:, :, sl],
                      initial_state=state, output_final_state=True, chunk_size=chunk_size,
                      **gate)

    o_all, s_all = run(slice(0, t), s0)
    o_1, s_1 = run(slice(0, cut), s0)
    if cut < t:
        o_2, s_2 = run(slice(cut, t), s_1)
        o_1, s_1 = torch.cat([o_1, o_2], dim=2), s_2
    assert_close(o_1, o_all)
    assert_close(s_1, s_all)


# ------------------------------------------------------------------------- special cases
@given(seed=seeds, shape=shapes, chunk_size=chunk_sizes, beta_kind=beta_kinds)
def test_gated_with_zero_gate_is_the_delta_rule(seed, shape, chunk_size, beta_kind):
    q, k, v, beta, g, s0 = random_inputs(seed, shape, beta_kind)
    zero = torch.zeros_like(g)
    for gated, plain in ((gated_delta_rule_recurrent, delta_rule_recurrent),
                         (gated_delta_rule_chunk, delta_rule_chunk)):
        extra = {"chunk_size": chunk_size} if plain is delta_rule_chunk else {}
        o_g, s_g = gated(q, k, v, g=zero, beta=beta, initial_state=s0, output_final_state=True,
                         **extra)
        o_d, s_d = plain(q, k, v, beta=beta, initial_state=s0, output_final_state=True, **extra)
        assert_close(o_g, o_d)
        assert_close(s_g, s_d)


@pytest.mark.parametrize("kernel", [delta_rule_recurrent, delta_rule_chunk])
def test_beta_zero_leaves_the_state_unchanged(kernel):
    q, k, v, beta, _, s0 = random_inputs(3, (2, 2, 19, 5, 4), "zeros")
    o, s = kernel(q, k, v, beta=beta, initial_state=s0, output_final_state=True)
    assert_close(s, s0)
    # o_t = S_0ᵀ (q_t / sqrt(Dk)) for every t
    assert_close(o, torch.einsum("bhkv,bhtk->bhtv", s0, q) / 5**0.5)


@pytest.mark.parametrize("kernel", [delta_rule_recurrent, delta_rule_chunk])
def test_one_step_with_beta_one_and_a_unit_key_writes_v_exactly(kernel):
    q, k, v, beta, _, s0 = random_inputs(4, (2, 3, 1, 6, 5), "ones")
    _, s = kernel(q, k, v, beta=beta, initial_state=s0, output_final_state=True)
    read = torch.einsum("bhkv,bhk->bhv", s, k[:, :, 0])  # S_1ᵀ k_1
    assert_close(read, v[:, :, 0])
    # ... and the old state is unchanged orthogonally to k: S_1 (I - k kᵀ) = S_0 (I - k kᵀ)
    proj = torch.eye(6, dtype=k.dtype) - k[:, :, 0, :, None] * k[:, :, 0, None, :]
    assert_close(proj @ s, proj @ s0)


@pytest.mark.parametrize("chunk_size", [64, 50])
def test_extreme_gates_stay_finite_and_match_in_float32(chunk_size):
    """g down to -20 per step over T = 1024: exp(-b) alone would overflow float32 after ~5 steps."""
    q, k, v, beta, g, s0 = random_inputs(5, (1, 2, 1024, 16, 16), dtype=torch.float32)
    g = -20 * torch.rand(g.shape, generator=torch.Generator().manual_seed(1))
    o_r, s_r = gated_delta_rule_recurrent(q, k, v, g=g, beta=beta, initial_state=s0,
                                          output_final_state=True)
    leaves = [x.clone().requires_grad_() for x in (q, k, v, g, beta)]
    o_c, s_c = gated_delta_rule_chunk(*leaves[:3], g=leaves[3], beta=leaves[4], initial_state=s0,
                                      output_final_state=True, chunk_size=chunk_size)
    assert_close(o_c.detach(), o_r)
    assert_close(s_c.detach(), s_r)
    (o_c.sum() + s_c.sum()).backward()
    assert all(torch.isfinite(x.grad).all() for x in leaves)


# ------------------------------------------------------------------------- bad inputs
KERNELS = [
    (delta_rule_recurrent, False),
    (delta_rule_chunk, False),
    (delta_rule_parallel, False),
    (gated_delta_rule_recurrent, True),
    (gated_delta_rule_chunk, True),
    (delta_rule_chunk_reference, False),
    (gated_delta_rule_chunk_reference, True),
]


def valid_args(dtype=torch.float32):
    q, k, v, beta, g, s0 = random_inputs(0, (2, 3, 10, 4, 5), dtype=dtype)
    return dict(q=q, k=k, v=v, beta=beta, g=g, initial_state=s0)


def call(kernel, gated, args):
    args = dict(args)
    q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
    g = args.pop("g")
    if gated:
        args["g"] = g
    if kernel is delta_rule_parallel:
        args.pop("initial_state")
    return kernel(q, k, v, **args)


BAD = {
    "q": lambda a: a["q"][0],  # wrong rank
    "k": lambda a: a["k"][:, :, :7],  # T mismatch
    "v": lambda a: a["v"][:1],  # B mismatch
    "beta": lambda a: a["beta"][:, :2],  # H mismatch
    "initial_state": lambda a: a["initial_state"][..., :3, :],  # Dk mismatch
}


@pytest.mark.parametrize("kernel,gated,name", [
    (kernel, gated, name) for kernel, gated in KERNELS for name in BAD
    if not (kernel is delta_rule_parallel and name == "initial_state")  # it has none
])
def test_bad_shapes_are_refused_naming_the_argument(kernel, gated, name):
    args = valid_args()
    args[name] = BAD[name](args)
    with pytest.raises(ValueError, match=name):
        call(kernel, gated, args)


@pytest.mark.parametrize("kernel,gated", KERNELS)
def test_bad_dtypes_and_values_are_refused(kernel, gated):
    args = valid_args()
    for name, value in [("k", args["k"].double()), ("v", args["v"].half()),
                        ("beta", args["beta"] + 2.5), ("beta", args["beta"] - 0.1),
                        ("q", args["q"].to(torch.int64)), ("beta", args["beta"] * float("nan"))]:
        with pytest.raises(ValueError, match=name):
            call(kernel, gated, {**args, name: value})
    if gated:
        for value in (args["g"] + 0.5, args["g"][..., None], args["g"] * float("inf")):
            with pytest.raises(ValueError, match="g"):
                call(kernel, gated, {**args, "g": value})


def test_bad_chunk_size_is_refused():
    args = valid_args()
    for chunk_size in (0, -3, 2.5):
        with pytest.raises(ValueError, match="chunk_size"):
            delta_rule_chunk(args["q"], args["k"], args["v"], beta=args["beta"],
                             chunk_size=chunk_size)


# ------------------------------------------------------------------------- the chunkwise references
@given(seed=seeds, shape=shapes, chunk_size=st.integers(1, 80), beta_kind=beta_kinds,
       gate_scale=gate_scales, with_state=st.booleans())
@example(seed=0, shape=(1, 1, 1, 3, 5), chunk_size=64, beta_kind="uniform", gate_scale=0.5,
         with_state=True)  # T = 1, C > T
@example(seed=1, shape=(2, 1, 65, 4, 3), chunk_size=64, beta_kind="upto2", gate_scale=30.0,
         with_state=True)  # gates down to -30 per step, a last chunk of 1
@example(seed=2, shape=(1, 2, 9, 3, 2), chunk_size=1, beta_kind="ends", gate_scale=30.0,
         with_state=False)  # C = 1, β exactly 0 or 1
def test_references_equal_recurrent_and_fast_chunk(seed, shape, chunk_size, beta_kind,
                                                   gate_scale, with_state):
    q, k, v, beta, g, s0 = random_inputs(seed, shape, beta_kind, gate_scale)
    kw = dict(beta=beta, initial_state=s0 if with_state else None, output_final_state=True)
    for recurrent, chunk, reference, gate in (
        (delta_rule_recurrent, delta_rule_chunk, delta_rule_chunk_reference, {}),
        (gated_delta_rule_recurrent, gated_delta_rule_chunk, gated_delta_rule_chunk_reference,
         {"g": g}),
    ):
        o_ref, s_ref = reference(q, k, v, chunk_size=chunk_size, **gate, **kw)
        for o, s in (recurrent(q, k, v, **gate, **kw),
                     chunk(q, k, v, chunk_size=chunk_size, **gate, **kw)):
            assert_close(o_ref, o)
            assert_close(s_ref, s)


@pytest.mark.parametrize("kernel,gated", KERNELS)
def test_nan_and_inf_in_q_k_v_and_state_are_refused(kernel, gated):
    for name in ("q", "k", "v", "initial_state"):
        if kernel is delta_rule_parallel and name == "initial_state":
            continue
        for bad in (float("nan"), float("inf")):
            args = valid_args()
            args[name] = args[name].clone()
            args[name].view(-1)[3] = bad
            with pytest.raises(ValueError, match=f"{name}: expected finite"):
                call(kernel, gated, args)


@pytest.mark.parametrize("kernel,gated", KERNELS)
def test_long_keys_are_refused_by_the_stability_condition(kernel, gated):
    """β ‖k‖² ≤ 2, not β ≤ 2: with ‖k‖ = 10 and β = 1 the recurrence would explode."""
    args = valid_args()
    args["k"] = 10 * args["k"]
    args["beta"] = torch.ones_like(args["beta"])
    with pytest.raises(ValueError, match=r"beta, k: expected β‖k‖² <= 2"):
        call(kernel, gated, args)
    args["beta"] = torch.full_like(args["beta"], 0.02)  # β ‖k‖² = 2: the edge, allowed
    o, _ = call(kernel, gated, args)
    assert torch.isfinite(o).all()


def test_allow_unstable_shows_the_explosion_the_check_prevents():
    args = valid_args(torch.float64)
    q, k, v = args["q"], 10 * args["k"], args["v"]
    beta = torch.ones_like(args["beta"])
    with pytest.raises(ValueError, match="beta, k"):
        delta_rule_recurrent(q, k, v, beta=beta)
    o, _ = delta_rule_recurrent(q, k, v, beta=beta, allow_unstable=True)
    assert o.abs().max() > 1e12  # eigenvalue 1 − 100 along k: the state explodes
    with pytest.raises(ValueError, match="beta"):
        delta_rule_recurrent(q, k, v, beta=-beta, allow_unstable=True)
    with pytest.raises(ValueError, match="allow_unstable"):
        delta_rule_recurrent(q, k, v, beta=beta, allow_unstable="yes")


# ------------------------------------------------------------------------- one token at a time
@given(seed=seeds, shape=shapes, beta_kind=beta_kinds, gate_scale=gate_scales,
       scale=st.sampled_from([None, 0.3]))
def test_step_by_step_equals_recurrent(seed, shape, beta_kind, gate_scale, scale):
    q, k, v, beta, g, s0 = random_inputs(seed, shape, beta_kind, gate_scale)
    for step, recurrent, gate in ((delta_rule_step, delta_rule_recurrent, False),
                                  (gated_delta_rule_step, gated_delta_rule_recurrent, True)):
        gates = {"g": g} if gate else {}
        o_r, s_r = recurrent(q, k, v, beta=beta, initial_state=s0, output_final_state=True,
                             scale=scale, **gates)
        state, outputs = s0, []
        for t in range(shape[2]):
            token = {"g": g[:, :, t]} if gate else {}
            o_t, state = step(q[:, :, t], k[:, :, t], v[:, :, t], beta=beta[:, :, t],
                              state=state, scale=scale, **token)
            outputs.append(o_t)
        assert_close(torch.stack(outputs, dim=2), o_r)
        assert_close(state, s_r)


def test_step_with_beta_one_and_a_unit_key_reads_v_back():
    _, k, v, beta, g, s0 = random_inputs(4, (2, 3, 1, 6, 5), "ones")
    for step, gate in ((delta_rule_step, {}), (gated_delta_rule_step, {"g": g[:, :, 0]})):
        _, state = step(k[:, :, 0], k[:, :, 0], v[:, :, 0], beta=beta[:, :, 0], state=s0,
                        **gate)
        assert_close(torch.einsum("bhkv,bhk->bhv", state, k[:, :, 0]), v[:, :, 0])


@pytest.mark.parametrize("step,gated", [(delta_rule_step, False), (gated_delta_rule_step, True)])
def test_step_refuses_bad_inputs_naming_the_argument(step, gated):
    q, k, v, beta, g, s0 = random_inputs(0, (2, 3, 1, 4, 5), dtype=torch.float32)
    token = dict(q=q[:, :, 0], k=k[:, :, 0], v=v[:, :, 0], beta=beta[:, :, 0], state=s0)
    if gated:
        token["g"] = g[:, :, 0]
    bad = [("q", q), ("k", token["k"][:1]), ("v", token["v"].double()),
           ("beta", token["beta"] + 2.5), ("beta", token["beta"][..., None]),
           ("state", s0[..., :3, :]), ("state", torch.full_like(s0, float("nan"))),
           ("beta, k", None)]
    if gated:
        bad += [("g", token["g"] + 1.0), ("g", token["g"][..., None])]
    for name, value in bad:
        args = dict(token)
        if name == "beta, k":  # a long key: β‖k‖² > 2
            args["k"], args["beta"] = 10 * args["k"], torch.ones_like(args["beta"])
        else:
            args[name] = value
        with pytest.raises(ValueError, match=name):
            step(args.pop("q"), args.pop("k"), args.pop("v"), **args)


# ------------------------------------------------------------------------- the UT transform
@settings(max_examples=25)
@given(seed=seeds, c=st.integers(1, 20), dk=st.integers(1, 9), beta_kind=beta_kinds)
def test_ut_transform_gives_the_chunks_transition_as_identity_minus_kt_w(seed, c, dk,
                                                                        beta_kind):
    """The recurrence is affine in S_0, S_C = P_C S_0 + (the writes): from S_0 = I and S_0 = 0
    it gives P_C = (I − β_C k_C k_Cᵀ) ⋯ (I − β_1 k_1 k_1ᵀ), which the WY form says is I − Kᵀ W."""
    q, k, v, beta, _, _ = random_inputs(seed, (1, 2, c, dk, dk), beta_kind)
    w, _ = ut_transform(k, v, beta=beta)
    eye = torch.eye(dk, dtype=k.dtype).expand(1, 2, dk, dk)
    _, from_eye = delta_rule_recurrent(q, k, v, beta=beta, initial_state=eye,
                                       output_final_state=True)
    _, from_zero = delta_rule_recurrent(q, k, v, beta=beta, output_final_state=True)
    assert w.shape == k.shape
    assert_close(from_eye - from_zero, eye - k.mT @ w)


@settings(max_examples=25)
@given(seed=seeds, c=st.integers(1, 20), dk=st.integers(1, 9), dv=st.integers(1, 6))
def test_pseudo_values_give_the_state_after_the_chunk(seed, c, dk, dv):
    q, k, v, beta, _, s0 = random_inputs(seed, (1, 2, c, dk, dv))
    w, u = ut_transform(k, v, beta=beta)
    _, s_zero = delta_rule_recurrent(q, k, v, beta=beta, output_final_state=True)
    _, s_init = delta_rule_recurrent(q, k, v, beta=beta, initial_state=s0,
                                     output_final_state=True)
    assert_close(k.mT @ u, s_zero)
    assert_close(s0 + k.mT @ (u - w @ s0), s_init)


def test_pseudo_values_follow_their_row_recursion():
    """u_t = β_t (v_t − Σ_{i<t} u_i k_iᵀ k_t), computed row by row."""
    _, k, v, beta, _, _ = random_inputs(3, (1, 2, 9, 5, 3))
    _, u = ut_transform(k, v, beta=beta)
    rows = []
    for t in range(k.shape[2]):
        correction = sum((rows[i] * (k[:, :, i] * k[:, :, t]).sum(-1, keepdim=True)
                          for i in range(t)), torch.zeros_like(v[:, :, t]))
        rows.append(beta[:, :, t, None] * (v[:, :, t] - correction))
    assert_close(torch.stack(rows, dim=2), u)


def test_ut_transform_refuses_bad_inputs_naming_the_argument():
    _, k, v, beta, _, _ = random_inputs(0, (1, 2, 7, 5, 3))
    for name, kwargs in [("k", dict(k=k[0], v=v, beta=beta)),
                         ("v", dict(k=k, v=v[:, :, :3], beta=beta)),
                         ("beta", dict(k=k, v=v, beta=beta + 2.5)),
                         ("beta", dict(k=k, v=v, beta=beta.float())),
                         ("beta, k", dict(k=3 * k, v=v, beta=beta + 0.5))]:
        with pytest.raises(ValueError, match=name):
            ut_transform(kwargs["k"], kwargs["v"], beta=kwargs["beta"])


def test_chunk_of_one_token_is_the_recurrence():
    q, k, v, beta, _, s0 = random_inputs(4, (1, 2, 11, 5, 3))
    o_r, s_r = delta_rule_recurrent(q, k, v, beta=beta, initial_state=s0, output_final_state=True)
    o_c, s_c = delta_rule_chunk(q, k, v, beta=beta, initial_state=s0, output_final_state=True,
                                chunk_size=1)
    assert_close(o_c, o_r)
    assert_close(s_c, s_r)
