"""The self-checks pass correct implementations and name each deliberate mistake."""

import math

import pytest
import torch
from attnlab import selfcheck as sc
from attnlab.kda import kda_step

# --- learner-style implementations of attention, with one knob per mistake -------------------

def attention(q, k, v, *, causal=False, scale="sqrt", axis=-1, stable=True, mask="tril",
              fill=float("-inf"), after=False, softmax=True):
    d = q.shape[-1]
    s = {"sqrt": 1 / math.sqrt(d), "none": 1.0, "d": 1 / d}[scale]
    scores = s * q @ k.transpose(-2, -1)
    t = q.shape[2]
    allowed = {"tril": torch.ones(t, t).tril().bool(), "triu": torch.ones(t, t).triu().bool(),
               "strict": torch.ones(t, t).tril(-1).bool()}[mask]
    if causal and not after:
        scores = scores.masked_fill(~allowed, fill)
    if not softmax:
        return scores @ v
    if stable:
        weights = torch.softmax(scores, dim=axis)
    else:
        e = scores.exp()
        weights = e / e.sum(axis, keepdim=True)
    if causal and after:
        weights = weights * allowed
    return weights @ v


@pytest.mark.parametrize("wrong, mistake", [
    (dict(scale="none"), "no_scale"),
    (dict(scale="d"), "scale_1_over_d"),
    (dict(axis=-2), "softmax_axis"),
    (dict(stable=False), "nonfinite"),
    (dict(softmax=False), "no_softmax"),
    (dict(causal=True), "masked"),
])
def test_attention_checker_names_each_mistake(wrong, mistake):
    assert sc.check_attention(lambda q, k, v: attention(q, k, v))
    result = sc.check_attention(lambda q, k, v: attention(q, k, v, **wrong))
    assert not result.ok and result.mistake == mistake, result
    if mistake == "nonfinite":
        assert "maximum" in result.message


@pytest.mark.parametrize("wrong, mistake", [
    (dict(causal=False), "mask_missing"),
    (dict(mask="triu"), "mask_transposed"),
    (dict(mask="strict"), "mask_strict"),
    (dict(after=True), "mask_after_softmax"),
    (dict(fill=0.0), "mask_with_zero"),
    (dict(scale="none"), "no_scale"),
    (dict(stable=False), "nonfinite"),
])
def test_causal_checker_names_each_mistake(wrong, mistake):
    assert sc.check_causal_attention(lambda q, k, v: attention(q, k, v, causal=True))
    options = dict(causal=True) | wrong
    result = sc.check_causal_attention(lambda q, k, v: attention(q, k, v, **options))
    assert not result.ok and result.mistake == mistake, result


def test_errors_become_diagnoses_not_tracebacks():
    def stub(q, k, v):
        raise NotImplementedError

    def broken(q, k, v):
        return q @ k  # a shape error inside the learner's code

    assert sc.check_attention(stub).mistake == "not_implemented"
    result = sc.check_attention(broken)
    assert result.mistake == "exception" and "RuntimeError" in result.message
    assert sc.check_attention(lambda q, k, v: None).mistake == "type"
    assert sc.check_attention(lambda q, k, v: q).mistake == "shape"


def test_result_reads_well_in_a_notebook():
    good = sc.check_attention(sc.reference_attention)
    assert repr(good).startswith("✓") and "passed" in good._repr_markdown_()
    bad = sc.check_attention(lambda q, k, v: attention(q, k, v, scale="none"))
    assert repr(bad).startswith("✗") and "√d_k" in bad._repr_markdown_()


# --- the cached decode step ---------------------------------------------------------------

def decode(q_t, k_t, v_t, cache, *, append="before", scale="sqrt", square_mask=False):
    if append == "before":
        cache.append(k_t, v_t)
    keys, values = cache.k, cache.v
    if append == "after":
        cache.append(k_t, v_t)
    if append == "twice":
        cache.append(k_t, v_t)
        cache.append(k_t, v_t)
    s = 1 / math.sqrt(q_t.shape[-1]) if scale == "sqrt" else 1.0
    scores = s * q_t @ keys.transpose(-2, -1)
    if square_mask:
        allowed = torch.ones(1, keys.shape[2]).tril().bool()
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, -1) @ values


def after_with_prefix(q_t, k_t, v_t, cache):
    """Attends before appending, but copes with an empty cache (so only the values differ)."""
    if cache.length == 0:
        cache.append(k_t, v_t)
        return v_t.clone()
    return decode(q_t, k_t, v_t, cache, append="after")


@pytest.mark.parametrize("fn, mistake", [
    (lambda *a: decode(*a, append="none"), "cache_length"),
    (lambda *a: decode(*a, append="twice"), "cache_length"),
    (lambda *a: decode(*a, scale="none"), "no_scale"),
    (lambda *a: decode(*a, square_mask=True), "square_mask"),
    (after_with_prefix, "attend_before_append"),
])
def test_decode_checker_names_each_mistake(fn, mistake):
    assert sc.check_decode_step(decode)
    assert sc.check_decode_step(sc.reference_decode_step)
    result = sc.check_decode_step(fn)
    assert not result.ok and result.mistake == mistake, result


def test_attending_before_appending_to_an_empty_cache_is_explained():
    result = sc.check_decode_step(lambda *a: decode(*a, append="after"))
    assert not result.ok and result.mistake == "attend_before_append", result

    def crashes_on_empty(q_t, k_t, v_t, cache):
        if cache.length == 0:
            raise RuntimeError("softmax over no keys")
        return decode(q_t, k_t, v_t, cache)

    result = sc.check_decode_step(crashes_on_empty)
    assert result.mistake == "exception" and "append (k_t, v_t) before attending" in result.message


# --- recurrent steps ----------------------------------------------------------------------

def step(q, k, v, *, state, beta=None, g=None, mistake=None, per_channel=False):
    """A learner's delta-family step, with one common mistake switched on by name."""
    q = q if mistake == "no_scale" else q / math.sqrt(q.shape[-1])
    if g is None:
        alpha = torch.ones(q.shape[:2] + (1, 1))
    else:
        log = g[..., :, None] if per_channel else g[..., None, None]
        alpha = log if mistake == "gate_not_exp" else log.exp()
    if mistake == "no_decay":
        alpha = torch.ones_like(alpha)
    if mistake == "normalised_keys":
        k = k / k.norm(dim=-1, keepdim=True)
    old = state
    decayed = state if mistake == "decay_after_write" else alpha * state
    if beta is None:  # linear attention (no gate) or GLA: an additive write
        new = decayed + k[..., :, None] * v[..., None, :]
    else:
        b = torch.ones_like(beta) if mistake == "no_beta" else beta
        source = state if mistake == "predict_undecayed" else decayed
        pred = torch.einsum("bhkv,bhk->bhv", source, q if mistake == "predict_with_q" else k)
        error = {"sign_flipped": pred - v, "beta_on_v_only": b[..., None] * v - pred,
                 "no_correction": v}.get(mistake, v - pred)
        weight = 1.0 if mistake == "beta_on_v_only" else b[..., None, None]
        new = decayed + weight * k[..., :, None] * error[..., None, :]
    if mistake == "decay_after_write":
        new = alpha * new
    if mistake == "in_place":
        state += k[..., :, None] * v[..., None, :]
        new = state
    read = old if mistake == "read_before_write" else new
    return torch.einsum("bhkv,bhk->bhv", read, q), new


DELTA_MISTAKES = ["read_before_write", "no_scale", "no_correction", "no_beta", "beta_on_v_only",
                  "sign_flipped", "predict_with_q", "normalised_keys"]
GATE_MISTAKES = ["no_decay", "gate_not_exp", "decay_after_write", "predict_undecayed"]


@pytest.mark.parametrize("mistake", ["read_before_write", "no_scale", "in_place"])
def test_linear_step_checker_names_each_mistake(mistake):
    assert sc.check_linear_attention_step(lambda q, k, v, *, state: step(q, k, v, state=state))
    assert sc.check_linear_attention_step(sc.reference_linear_attention_step)
    result = sc.check_linear_attention_step(
        lambda q, k, v, *, state: step(q, k, v, state=state, mistake=mistake))
    assert not result.ok and result.mistake == mistake, result


def test_linear_step_with_a_transposed_write_gets_the_shape_hint():
    def transposed(q, k, v, *, state):
        return step(q, k, v, state=state)[0], (v[..., :, None] * k[..., None, :])

    result = sc.check_linear_attention_step(transposed)
    assert result.mistake == "shape" and "k vᵀ" in result.message


@pytest.mark.parametrize("mistake", DELTA_MISTAKES)
def test_delta_step_checker_names_each_mistake(mistake):
    def learner(q, k, v, *, beta, state, mistake=None):
        return step(q, k, v, beta=beta, state=state, mistake=mistake)

    assert sc.check_delta_step(learner)
    assert sc.check_delta_step(sc.reference_delta_step)
    result = sc.check_delta_step(lambda *a, **kw: learner(*a, **kw, mistake=mistake))
    assert not result.ok and result.mistake == mistake, result


def test_additive_delta_step_is_told_it_matched_until_the_state_held_something():
    result = sc.check_delta_step(
        lambda q, k, v, *, beta, state: step(q, k, v, beta=beta, state=state,
                                             mistake="no_correction"))
    assert "matches up to token 1 but diverges at token 2" in result.message


@pytest.mark.parametrize("mistake", DELTA_MISTAKES + GATE_MISTAKES)
@pytest.mark.parametrize("per_channel", [False, True])
def test_gated_and_kda_step_checkers_name_each_mistake(mistake, per_channel):
    def learner(q, k, v, *, g, beta, state, mistake=None):
        return step(q, k, v, g=g, beta=beta, state=state, mistake=mistake,
                    per_channel=per_channel)

    check = sc.check_kda_step if per_channel else sc.check_gated_delta_step
    assert check(learner)
    assert check(kda_step if per_channel else sc.reference_gated_delta_step)
    result = check(lambda *a, **kw: learner(*a, **kw, mistake=mistake))
    assert not result.ok and result.mistake == mistake, result


@pytest.mark.parametrize("mistake", ["read_before_write", "no_scale", "no_decay",
                                     "gate_not_exp", "decay_after_write"])
def test_gla_step_checker_names_each_mistake(mistake):
    def learner(q, k, v, *, g, state, mistake=None):
        return step(q, k, v, g=g, state=state, mistake=mistake, per_channel=True)

    assert sc.check_gla_step(learner)
    assert sc.check_gla_step(sc.reference_gla_step)
    result = sc.check_gla_step(lambda *a, **kw: learner(*a, **kw, mistake=mistake))
    assert not result.ok and result.mistake == mistake, result


def test_predicting_from_the_undecayed_state_is_asked_about_the_order():
    result = sc.check_gated_delta_step(
        lambda q, k, v, *, g, beta, state: step(q, k, v, g=g, beta=beta, state=state,
                                                mistake="predict_undecayed"))
    assert "matches up to token 1 but diverges at token 2" in result.message
    assert "decay applied before the correction" in result.message


def test_kda_gate_on_the_value_axis_is_caught():
    def wrong_axis(q, k, v, *, g, beta, state):
        decayed = g.exp()[..., None, :] * state  # decays columns (Dv), not rows (Dk)
        return kda_step(q, k, v, g=torch.zeros_like(g), beta=beta, state=decayed)

    result = sc.check_kda_step(wrong_axis)
    assert not result.ok and "rows (Dk)" in result.message


# --- the pre-norm block (Lesson 5b) --------------------------------------------------------------

@pytest.mark.parametrize("mistake", ["post_norm", "no_mixer_residual", "no_mlp_residual",
                                     "normed_residual", "parallel", "norms_swapped",
                                     "mlp_first"])
def test_block_checker_names_each_mistake(mistake):
    from attnlab._selfcheck_mistakes import block_mistakes

    def wrong(x, mixer, mlp, mixer_norm, mlp_norm):
        return block_mistakes(x, mixer, mlp, mixer_norm, mlp_norm)[mistake][0]()

    result = sc.check_prenorm_block(wrong)
    assert not result.ok and result.mistake == mistake, result


def test_block_checker_passes_the_model_block():
    """The model's own block, its parts handed in, passes."""
    from attnlab.configs import ModelConfig
    from attnlab.model import HybridBlock

    config = ModelConfig(name="t", vocab_size=5, d_model=8, layer_pattern=("attn",),
                         n_heads=2, head_dim=4, mlp_hidden=16)
    block = HybridBlock("attn", config)

    def with_parts(x, mixer, mlp, mixer_norm, mlp_norm):
        block.mixer_norm.forward, block.mlp_norm.forward = mixer_norm, mlp_norm
        block.mixer.forward = lambda h, cache=None, use_cache=False: (mixer(h), None)
        block.mlp.forward = mlp
        return block(x)[0]

    assert sc.check_prenorm_block(with_parts)


# --- one chunk of chunkwise linear attention (Lesson 8) -------------------------------------------

@pytest.mark.parametrize("mistake", ["no_mask", "mask_strict", "mask_transposed", "no_state",
                                     "no_scale", "state_not_carried", "state_unchanged"])
def test_chunk_checker_names_each_mistake(mistake):
    """A learner's chunk written independently of the checker's own mistake table."""

    def learner(q, k, v, *, state):
        s = 1.0 if mistake == "no_scale" else q.shape[-1] ** -0.5
        scores = q @ k.transpose(-1, -2)
        inside = {"no_mask": scores, "mask_strict": scores.tril(-1),
                  "mask_transposed": scores.triu()}.get(mistake, scores.tril())
        past = 0.0 if mistake == "no_state" else s * q @ state
        write = k.transpose(-1, -2) @ v
        new = {"state_not_carried": write, "state_unchanged": state}.get(mistake, state + write)
        return past + s * inside @ v, new

    result = sc.check_linear_chunk(learner)
    assert not result.ok and result.mistake == mistake, result


def test_chunk_checker_passes_the_reference_and_a_correct_learner():
    def learner(q, k, v, *, state):
        s = q.shape[-1] ** -0.5
        o = s * q @ state + (s * q @ k.transpose(-1, -2)).tril() @ v
        return o, state + k.transpose(-1, -2) @ v

    assert sc.check_linear_chunk(sc.reference_linear_chunk)
    assert sc.check_linear_chunk(learner)


# --- multi-head attention (Lesson 4) --------------------------------------------------------------

def _learner_mha(x, w_q, w_k, w_v, w_o, n_heads, mistake=None):
    """Multi-head attention written from the lesson's equations, one knob per mistake."""
    b, t, d = x.shape
    heads = 1 if mistake == "one_head" else n_heads
    dh = d // heads
    outs = []
    for h in range(heads):
        cols = (slice(h, d, heads) if mistake == "interleaved_heads"
                else slice(h * dh, (h + 1) * dh))
        q, k, v = (x @ w[:, cols] for w in (w_q, w_k, w_v))
        scale = d ** -0.5 if mistake == "scale_d_model" else dh ** -0.5
        scores = scale * q @ k.transpose(-1, -2)
        if mistake != "not_causal":
            scores = scores.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
        outs.append(torch.softmax(scores, dim=-1) @ v)
    if mistake == "interleaved_heads":  # put every column back where it came from
        y = torch.empty(b, t, d)
        for h, o in enumerate(outs):
            y[..., h::heads] = o
    else:
        y = torch.cat(outs, dim=-1)
    return y if mistake == "no_output_projection" else y @ w_o


@pytest.mark.parametrize("mistake", ["one_head", "scale_d_model", "no_output_projection",
                                     "interleaved_heads", "not_causal"])
def test_multi_head_checker_names_each_mistake(mistake):
    assert sc.check_multi_head_attention(_learner_mha)
    assert sc.check_multi_head_attention(sc.reference_multi_head_attention)
    result = sc.check_multi_head_attention(
        lambda *a: _learner_mha(*a, mistake=mistake))
    assert not result.ok and result.mistake == mistake, result


# --- one chunk of the delta rule (Lesson 13) ---------------------------------------------------

def _learner_delta_chunk(q, k, v, *, beta, state, mistake=None):
    """The WY / UT chunk written from Lesson 13's equations with an explicit inverse."""
    q = q if mistake == "no_scale" else q / q.shape[-1] ** 0.5
    c = k.shape[2]
    gram = k @ k.transpose(-1, -2)
    weights = gram if mistake == "l_without_beta" else beta[..., :, None] * gram
    below = torch.ones(c, c).tril(0 if mistake == "l_with_diagonal" else -1)
    t_inv = torch.linalg.inv(torch.eye(c) + weights * below)  # L⁻¹
    w, u = t_inv @ (beta[..., None] * k), t_inv @ (beta[..., None] * v)
    v_new = {"additive_chunk": v, "values_ignore_state": u}.get(mistake, u - w @ state)
    o = q @ state + (q @ k.transpose(-1, -2) * torch.ones(c, c).tril()) @ v_new
    write = k.transpose(-1, -2) @ (v if mistake == "state_from_v" else v_new)
    return o, state if mistake == "state_unchanged" else state + write


@pytest.mark.parametrize("mistake", ["additive_chunk", "values_ignore_state", "l_with_diagonal",
                                     "l_without_beta", "no_scale", "state_from_v",
                                     "state_unchanged"])
def test_delta_chunk_checker_names_each_mistake(mistake):
    assert sc.check_delta_chunk(_learner_delta_chunk)
    assert sc.check_delta_chunk(sc.reference_delta_chunk)
    result = sc.check_delta_chunk(
        lambda *a, **kw: _learner_delta_chunk(*a, **kw, mistake=mistake))
    assert not result.ok and result.mistake == mistake, result


# --- one chunk of the gated delta rule (Lesson 12) ---------------------------------------------

def _learner_gated_chunk(q, k, v, *, g, beta, state, mistake=None):
    """One gated chunk written from Lesson 12's derivation, independently of the checker's
    table: every decay a product of α's in a loop, and an explicit inverse."""
    alpha = g.exp()  # [B, H, C]
    c = k.shape[2]
    q = q if mistake == "no_scale" else q / q.shape[-1] ** 0.5
    shift = 1 if mistake == "decay_off_by_one" else 0  # stop one token early

    def gates(lo, hi):  # α_lo ⋯ α_hi over tokens 0 … C − 1; an empty product is 1
        out = torch.ones_like(alpha[..., 0])
        for s in range(lo, hi + 1):
            out = out * alpha[..., s]
        return out

    def between(i, j):  # the decay of a write at j when token i reads it
        if mistake == "no_decay_inside":
            return torch.ones_like(alpha[..., 0])
        first = j if mistake == "decay_includes_start" else j + 1
        return gates(first - shift, i - shift)

    gamma = torch.zeros(*alpha.shape, c, dtype=alpha.dtype)
    for i in range(c):
        for j in range(i + 1):
            gamma[..., i, j] = between(i, j)
    from_start = torch.stack([gates(0, i - shift) for i in range(c)], dim=-1)[..., None]
    b = beta[..., None]
    below = (b * (k @ k.transpose(-1, -2)) * gamma) * torch.ones(c, c).tril(-1)
    t_inv = torch.linalg.inv(torch.eye(c) + below)
    keys = k if mistake == "keys_not_decayed" else from_start * k
    w, u = t_inv @ (b * keys), t_inv @ (b * v)
    v_new = u - w @ state
    reads = q if mistake == "queries_not_decayed" else from_start * q
    o = reads @ state + (q @ k.transpose(-1, -2) * gamma) @ v_new
    end = torch.stack([between(c - 1, j) for j in range(c)], dim=-1)[..., None]
    to_end = k if mistake == "keys_to_end_not_decayed" else end * k
    carried = (state if mistake == "state_not_decayed"
               else gates(0, c - 1 - shift)[..., None, None] * state)
    return o, carried + to_end.transpose(-1, -2) @ v_new


GATED_CHUNK_MISTAKES = ["decay_off_by_one", "decay_includes_start", "no_decay_inside",
                        "keys_not_decayed", "queries_not_decayed", "no_scale",
                        "state_not_decayed", "keys_to_end_not_decayed"]


def test_gated_chunk_checker_passes_correct_answers():
    assert sc.check_gated_delta_chunk(_learner_gated_chunk)
    assert sc.check_gated_delta_chunk(sc.reference_gated_delta_chunk)


@pytest.mark.parametrize("mistake", GATED_CHUNK_MISTAKES)
def test_gated_chunk_checker_names_each_mistake(mistake):
    result = sc.check_gated_delta_chunk(
        lambda *a, **kw: _learner_gated_chunk(*a, **kw, mistake=mistake))
    assert not result.ok and result.mistake == mistake, result


def test_gated_chunk_checker_names_the_overflow_of_exp_minus_b():
    """A chunk that forms e^(b_i) · e^(−b_j) overflows under very negative gates."""
    def split_exponentials(q, k, v, *, g, beta, state):
        b = g.cumsum(-1)
        gamma = (b.exp()[..., :, None] * (-b).exp()[..., None, :]).tril()
        c = k.shape[2]
        q = q / q.shape[-1] ** 0.5
        bt = beta[..., None]
        t_inv = torch.linalg.inv(torch.eye(c) + (bt * (k @ k.mT) * gamma).tril(-1))
        w, u = t_inv @ (bt * b.exp()[..., None] * k), t_inv @ (bt * v)
        v_new = u - w @ state
        o = b.exp()[..., None] * q @ state + (q @ k.mT * gamma) @ v_new
        to_end = gamma[..., -1, :, None] * k
        return o, b[..., -1:, None].exp() * state + to_end.mT @ v_new

    result = sc.check_gated_delta_chunk(split_exponentials)
    assert not result.ok and result.mistake == "nonfinite", result
    assert "g = -30" in result.message
