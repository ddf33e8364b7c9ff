"""The self-checks of Lessons 3–7 diagnose in Chinese under ``language("zh_CN")``.

Each known wrong answer (the ones the English tests use) is checked twice, in English and in
Chinese: the Chinese diagnosis contains Chinese, names the same ``mistake``, and keeps every code
identifier, shape and formula of the English one (``k.transpose(-2, -1)``, ``[B, H, T, D]``,
``keepdim=True``, ``√d_k``) exactly.
"""

from __future__ import annotations

import re

import pytest
import torch
from attnlab import selfcheck as sc
from attnlab.i18n import language
from test_selfcheck import _learner_mha, attention, decode, step
from test_selfcheck_part1_bugs import (
    decode_scaled_by_dv,
    heads_by_plain_reshape,
    mask_after_then_renormalise,
    max_over_columns,
    max_without_keepdim,
    residual_on_mixer_only,
    transposed_with_dot_t,
)

CHINESE = re.compile(r"[\u4e00-\u9fff]")

#: What must come through a translation unchanged: code in backticks, shapes and tuples in
#: brackets, calls (``scores.amax(dim=-1, keepdim=True)``), keyword arguments, square roots,
#: dotted and snake_case names.
CODE = [
    re.compile(r"`[^`]+`"),
    re.compile(r"\[[^\[\]]+\]"),
    re.compile(r"\(\d+(?:, \d+)+\)"),
    re.compile(r"[\w.]*\w\((?:[^()]|\([^()]*\))*\)"),
    re.compile(r"\w+=-?\w+"),
    re.compile(r"√\w+"),
    re.compile(r"\b\w+(?:\.\w+)+(?:\(\))?"),
    re.compile(r"\b[a-zA-Z]\w*_\w+"),
]
#: Words of English prose the patterns above also catch.
NOT_CODE = {"e.g"}


def code_of(message: str) -> set[str]:
    found = {m.group() for pattern in CODE for m in pattern.finditer(message)}
    return found - NOT_CODE


def causal(**wrong):
    return lambda q, k, v: attention(q, k, v, **({"causal": True} | wrong))


def linear(mistake=None):
    return lambda q, k, v, *, state: step(q, k, v, state=state, mistake=mistake)


def stub(*args, **kwargs):
    raise NotImplementedError


def wrong_block_wiring(x, mixer, mlp, mixer_norm, mlp_norm):  # post-norm
    h = mixer_norm(x + mixer(x))
    return mlp_norm(h + mlp(h))


def replaces_the_cache(q_t, k_t, v_t, cache):
    cache.k = None
    return v_t


def transposed_write(q, k, v, *, state):
    return step(q, k, v, state=state)[0], v[..., :, None] * k[..., None, :]


#: (check, wrong answer, the mistake it is named by): every check of Lessons 3–7, then the
#: shared diagnoses (not implemented, an exception, wrong type, shape and dtype, NaN, an input
#: changed in place, not callable).
CASES = {
    # Lesson 3
    "attention: no scale": (sc.check_attention, lambda q, k, v: attention(q, k, v, scale="none"),
                            "no_scale"),
    "attention: max over columns": (sc.check_attention, max_over_columns, "max_wrong_axis"),
    "attention: .T": (sc.check_attention, transposed_with_dot_t, "dot_T"),
    "attention: no keepdim": (sc.check_attention, max_without_keepdim, "broadcast"),
    "attention: overflow": (sc.check_attention,
                            lambda q, k, v: attention(q, k, v, stable=False), "nonfinite"),
    # Lesson 4
    "multi-head: one head": (sc.check_multi_head_attention,
                             lambda *a: _learner_mha(*a, mistake="one_head"), "one_head"),
    "multi-head: plain reshape": (sc.check_multi_head_attention, heads_by_plain_reshape,
                                  "split_by_reshape"),
    # Lesson 5
    "causal: transposed mask": (sc.check_causal_attention, causal(mask="triu"),
                                "mask_transposed"),
    "causal: strict mask": (sc.check_causal_attention, causal(mask="strict"), "mask_strict"),
    "causal: renormalised": (sc.check_causal_attention, mask_after_then_renormalise,
                             "mask_after_renormalised"),
    # Lesson 5b
    "block: post-norm": (sc.check_prenorm_block, wrong_block_wiring, "post_norm"),
    "block: one residual": (sc.check_prenorm_block, residual_on_mixer_only, "no_mlp_residual"),
    # Lesson 6
    "decode: scaled by D_v": (sc.check_decode_step, decode_scaled_by_dv, "scale_dv"),
    "decode: appended twice": (sc.check_decode_step, lambda *a: decode(*a, append="twice"),
                               "cache_length"),
    "decode: cache replaced": (sc.check_decode_step, replaces_the_cache, "cache_broken"),
    # Lesson 7
    "linear step: read first": (sc.check_linear_attention_step, linear("read_before_write"),
                                "read_before_write"),
    "linear step: in place": (sc.check_linear_attention_step, linear("in_place"), "in_place"),
    "linear step: transposed write": (sc.check_linear_attention_step, transposed_write, "shape"),
    # shared
    "not implemented": (sc.check_attention, stub, "not_implemented"),
    "an exception": (sc.check_attention, lambda q, k, v: q @ k, "exception"),
    "not a tensor": (sc.check_attention, lambda q, k, v: None, "type"),
    "integers": (sc.check_attention, lambda q, k, v: q.long(), "dtype"),
    "meta device": (sc.check_causal_attention,
                    lambda q, k, v: torch.empty_like(q, device="meta"), "device"),
    "not a pair": (sc.check_linear_attention_step, lambda q, k, v, *, state: q, "type"),
    "not callable": (sc.check_prenorm_block, 42, "not_callable"),
}


def both_languages(check, answer):
    english = check(answer)
    with language("zh_CN"):
        chinese = check(answer)
    return english, chinese


@pytest.mark.parametrize("case", CASES)
def test_a_diagnosis_speaks_chinese_and_keeps_its_code(case):
    check, answer, mistake = CASES[case]
    english, chinese = both_languages(check, answer)
    assert not english.ok and not chinese.ok
    assert english.mistake == chinese.mistake == mistake, (english, chinese)
    assert not CHINESE.search(english.message), english.message
    assert CHINESE.search(chinese.message), chinese.message
    missing = {code for code in code_of(english.message) if code not in chinese.message}
    assert not missing, (missing, english.message, chinese.message)


def read_after_calling(fn):
    """A check's body that runs the learner's function once, then cannot read what it got."""

    def body():
        sc._call(fn, "random inputs, T = 5")
        raise ValueError("cannot read it")

    return body


def test_an_unreadable_answer_is_told_in_chinese():
    english = sc._run("attention", stub, read_after_calling(lambda: None), 60.0)
    with language("zh_CN"):
        chinese = sc._run("attention", stub, read_after_calling(lambda: None), 60.0)
    assert english.mistake == chinese.mistake == "unreadable"
    assert english.message.startswith("the check could not read your answer (random inputs")
    assert chinese.message.startswith("检查无法读取你的答案（用例：随机输入，T = 5）："), (
        chinese.message
    )
    for code in ("ValueError: cannot read it", "float32", "(o, new_state)"):
        assert code in chinese.message


def test_a_stuck_answer_is_told_in_chinese():
    def never_returns(q, k, v):
        while True:
            pass

    with language("zh_CN"):
        result = sc.check_attention(never_returns, time_limit=0.2)
    assert result.mistake == "timeout" and "0.2 秒" in result.message, result.message
    assert "while" in result.message and "随机输入，T = 5" in result.message


def test_a_pass_names_its_cases_in_chinese_and_keeps_them_english_for_the_page():
    with language("zh_CN"):
        result = sc.check_decode_step(sc.reference_decode_step)
    assert result.ok and result.message.startswith("在全部 5 个用例中"), result.message
    assert "从空缓存开始解码 1 步" in result.message
    assert result.cases[0] == "one step from an empty cache"


def test_a_result_shown_in_chinese_names_the_check_and_its_cases_in_chinese():
    """A notebook set to Chinese shows the verdict, the check's name and the cases in Chinese,
    in Jupyter's Markdown view as on the page."""
    result = sc.check_linear_attention_step(sc.reference_linear_attention_step)
    with language("zh_CN"):
        markdown, page = result._repr_markdown_(), result._repr_html_()
    for shown in (markdown, page):
        assert "✓ 通过" in shown and "线性注意力的一步" in shown, shown
        assert "从空状态开始的 1 个 Token" in shown and "empty state" not in shown, shown


def test_the_code_patterns_find_what_a_diagnosis_must_keep():
    message = ("your function raised RuntimeError: x (T = 1). Your code uses .T: k.T of k "
               "[B, H, T, D] is [D, T, H, B]; write k.transpose(-2, -1), keepdim=True, "
               "1/√d_k, torch.float32, mixer_norm, (1, 2, 6).")
    assert {"[B, H, T, D]", "k.transpose(-2, -1)", "keepdim=True", "√d_k", "torch.float32",
            "mixer_norm", "(1, 2, 6)"} <= code_of(message)
