"""The Part I self-checks name the commonest bugs of Lessons 3-6 and 5b by what went wrong.

Each learner function below is written the way a learner writes it — plain code with one bug,
not a knob of the checker's table of mistakes — and each check must answer with that bug's own
diagnosis (its ``mistake`` name and the fix in words), never the generic "differs from the
reference".
"""

import pytest
import torch
from attnlab import selfcheck as sc

# --- Lesson 3: scaled dot-product attention ------------------------------------------------------


def scaled_by_dv(q, k, v):
    scores = q @ k.transpose(-2, -1) / v.shape[-1] ** 0.5  # √D_v, not √D_k
    return torch.softmax(scores, dim=-1) @ v


def max_over_columns(q, k, v):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    scores = scores - scores.amax(dim=-2, keepdim=True)  # each column's max
    weights = scores.exp()
    return weights / weights.sum(dim=-1, keepdim=True) @ v


def max_without_keepdim(q, k, v):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    scores = scores - scores.max(dim=-1).values  # [B, H, Tq]: broadcast over the wrong axis
    weights = scores.exp()
    return weights / weights.sum(dim=-1, keepdim=True) @ v


def transposed_with_dot_t(q, k, v):
    scores = q @ k.T / q.shape[-1] ** 0.5  # .T reverses all four axes
    return torch.softmax(scores, dim=-1) @ v


@pytest.mark.parametrize(("fn", "mistake", "words"), [
    (scaled_by_dv, "scale_dv", "d_k"),
    (max_over_columns, "max_wrong_axis", "keepdim=True"),
    (max_without_keepdim, "broadcast", "keepdim=True"),
    (transposed_with_dot_t, "dot_T", "transpose(-2, -1)"),
])
def test_attention_bugs_are_named(fn, mistake, words):
    result = sc.check_attention(fn)
    assert not result.ok and result.mistake == mistake, result
    assert words in result.message and "differs from the reference" not in result.message


# --- Lesson 5: causal attention ------------------------------------------------------------------


def mask_after_then_renormalise(q, k, v):
    t = q.shape[2]
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    weights = torch.softmax(scores, dim=-1)
    weights = weights * torch.ones(t, t).tril()  # the future removed after the softmax
    weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights @ v


def causal_with_dot_t(q, k, v):
    t = q.shape[2]
    scores = q @ k.T / q.shape[-1] ** 0.5
    scores = scores.masked_fill(torch.ones(t, t).triu(1).bool(), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def test_mask_after_softmax_then_renormalise_is_named_for_its_underflow():
    result = sc.check_causal_attention(mask_after_then_renormalise)
    assert not result.ok and result.mistake == "mask_after_renormalised", result
    assert "underflow" in result.message and "-inf" in result.message
    assert "maximum" not in result.message  # the max trick is not its problem


def test_dot_t_is_named_in_causal_attention():
    result = sc.check_causal_attention(causal_with_dot_t)
    assert not result.ok and result.mistake == "dot_T", result


# --- Lesson 4: multi-head attention --------------------------------------------------------------


def _causal_heads(q, k, v):
    t = q.shape[2]
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(torch.ones(t, t).triu(1).bool(), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def merged_without_transpose(x, w_q, w_k, w_v, w_o, n_heads):
    b, t, d = x.shape
    q, k, v = ((x @ w).view(b, t, n_heads, d // n_heads).transpose(1, 2)
               for w in (w_q, w_k, w_v))
    o = _causal_heads(q, k, v)  # [B, H, T, d_h]
    return o.reshape(b, t, d) @ w_o  # heads never moved back next to each other


def heads_by_plain_reshape(x, w_q, w_k, w_v, w_o, n_heads):
    b, t, d = x.shape
    q, k, v = ((x @ w).reshape(b, n_heads, t, d // n_heads) for w in (w_q, w_k, w_v))
    o = _causal_heads(q, k, v)
    return o.transpose(1, 2).reshape(b, t, d) @ w_o


@pytest.mark.parametrize(("fn", "mistake", "words"), [
    (merged_without_transpose, "merge_without_transpose", "transpose(1, 2)"),
    (heads_by_plain_reshape, "split_by_reshape", "transpose(1, 2)"),
])
def test_multi_head_bugs_are_named(fn, mistake, words):
    result = sc.check_multi_head_attention(fn)
    assert not result.ok and result.mistake == mistake, result
    assert words in result.message


# --- Lesson 5b: one pre-norm residual block -----------------------------------------------------


def residual_on_mixer_only(x, mixer, mlp, mixer_norm, mlp_norm):
    h = x + mixer(mixer_norm(x))
    return mlp(mlp_norm(h))


def residual_on_mlp_only(x, mixer, mlp, mixer_norm, mlp_norm):
    h = mixer(mixer_norm(x))
    return h + mlp(mlp_norm(h))


@pytest.mark.parametrize(("fn", "mistake"), [
    (residual_on_mixer_only, "no_mlp_residual"),
    (residual_on_mlp_only, "no_mixer_residual"),
])
def test_residual_on_one_branch_only_is_named(fn, mistake):
    result = sc.check_prenorm_block(fn)
    assert not result.ok and result.mistake == mistake, result


# --- Lesson 6: one cached decoding step ---------------------------------------------------------


def decode_scaled_by_dv(q_t, k_t, v_t, cache):
    keys, values = cache.append(k_t, v_t)
    scores = q_t @ keys.transpose(-2, -1) / values.shape[-1] ** 0.5
    return torch.softmax(scores, dim=-1) @ values


def decode_with_dot_t(q_t, k_t, v_t, cache):
    keys, values = cache.append(k_t, v_t)
    scores = q_t @ keys.T / q_t.shape[-1] ** 0.5
    return torch.softmax(scores, dim=-1) @ values


@pytest.mark.parametrize(("fn", "mistake"), [
    (decode_scaled_by_dv, "scale_dv"),
    (decode_with_dot_t, "dot_T"),
])
def test_decode_step_bugs_are_named(fn, mistake):
    result = sc.check_decode_step(fn)
    assert not result.ok and result.mistake == mistake, result
