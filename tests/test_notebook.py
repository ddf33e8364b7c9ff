"""attnbook.notebook: the prose formatting helpers the lessons share."""

import json

import pytest
import torch
from attnbook import notebook
from attnbook.notebook import glue_md, mb_mib, millions, ms, num, sci, vec
from attnlab.i18n import language
from IPython.display import Markdown


def test_glue_md_glues_hidden_markdown(monkeypatch):
    calls = []
    monkeypatch.setattr(notebook, "glue", lambda *a, **kw: calls.append((a, kw)))
    glue_md("l0_key", "**3** heads")
    (args, kwargs), = calls
    assert args[0] == "l0_key" and isinstance(args[1], Markdown) and args[1].data == "**3** heads"
    assert kwargs == {"display": False}


@pytest.mark.parametrize(("key", "text", "name"), [("", "x", "key"), (3, "x", "key"),
                                                   ("k", 3.0, "text")])
def test_glue_md_rejects_bad_arguments(key, text, name):
    with pytest.raises(ValueError, match=f"^{name}:"):
        glue_md(key, text)


@pytest.mark.parametrize(("value", "text"), [(1234567, "1,234,567"), (12, "12"),
                                             (1234.5, "1,234.5"), ("4 × 4", "4 × 4")])
def test_num_is_markdown_with_thousands_separators(value, text):
    out = num(value)
    assert isinstance(out, Markdown) and out.data == text


def test_mb_mib_gives_decimal_and_binary_units():
    assert mb_mib(704_643_072) == "704.64 MB (672.00 MiB)"
    assert mb_mib(0) == "0.00 MB (0.00 MiB)"


@pytest.mark.parametrize(("x", "text"), [(6.6e56, "6.6 × 10⁵⁶"), (2.5e-3, "2.5 × 10⁻³"),
                                         (-1.0e12, "−1.0 × 10¹²"), (1, "1.0 × 10⁰")])
def test_sci_typesets_the_exponent(x, text):
    assert sci(x) == text


@pytest.mark.parametrize(("n", "digits", "english", "chinese"), [
    (18_874_368, 1, "18.9 million", "1890 万"), (9_437_184, 1, "9.4 million", "940 万"),
    (528_482_304, 0, "528 million", "5.28 亿"), (2_621_440, 1, "2.6 million", "260 万"),
    (1_234_567_890, 0, "1,235 million", "12.35 亿")])
def test_millions_says_the_same_number_in_each_language(n, digits, english, chinese):
    assert millions(n, digits) == english
    with language("zh_CN"):
        assert millions(n, digits) == chinese


@pytest.mark.parametrize("digits", [-1, 1.5, True])
def test_millions_rejects_a_bad_number_of_digits(digits):
    with pytest.raises(ValueError, match="^digits: expected a whole number"):
        millions(1e6, digits)


def test_vec_rounds_to_two_decimals_without_negative_zero():
    assert vec([1, -0.5, -0.001]) == "(1.00, −0.50, 0.00)"
    assert vec(torch.tensor([0.25, 2.0])) == "(0.25, 2.00)"


def test_ms_shows_milliseconds():
    assert ms(0.001234) == "1.234 ms"


@pytest.mark.parametrize("fn", [mb_mib, millions, sci, ms])
@pytest.mark.parametrize("bad", ["1", float("nan"), True])
def test_number_formatters_reject_non_numbers(fn, bad):
    with pytest.raises(ValueError, match="expected a"):
        fn(bad)


def _lesson(tmp_path, cells):
    path = tmp_path / "lesson.ipynb"
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    return path


def _md(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def _code(text, *tags):
    return {"cell_type": "code", "metadata": {"tags": list(tags)}, "source": text}


def test_reading_time_counts_the_core_path_only(tmp_path):
    from attnbook.notebook import WORDS_PER_MINUTE, reading_minutes

    core = " ".join(["word"] * 400)
    optional = " ".join(["deeper"] * 1000)
    path = _lesson(tmp_path, [
        _md(f"# Lesson 1 · A title\n\n{core}\n\n$$x = y$$"),
        _code("import torch", "remove-cell"),
        _code("fig = new_figure()\nshow_figure(fig, alt='a')", "remove-input"),
        _code("a = 1\nb = 2\n"),
        _md(f":::{{dropdown}} Going deeper\n{optional}\n:::\n\nafter the dropdown"),
        _md(f"```{{exercise}}\n{optional}\n```"),
        _md(f"## Exercises\n\n{optional}"),
        _md(optional),
    ])
    counted = reading_minutes(path)
    assert counted.words == 4 + 400 + 3  # title, core, "after the dropdown"
    assert (counted.equations, counted.figures, counted.code_lines) == (1, 1, 2)
    assert counted.minutes > 407 / WORDS_PER_MINUTE
    assert str(counted).startswith("about 2 minutes (407 words of prose")


def test_reading_time_also_counts_everything(tmp_path):
    """``.everything`` counts the dropdowns, exercises and solutions too (their code blocks as
    lines of code), and the header gives both times."""
    from attnbook.notebook import reading_minutes

    core = " ".join(["word"] * 400)
    deeper = " ".join(["deeper"] * 600)
    path = _lesson(tmp_path, [
        _md(f"# Lesson 1 · A title\n\n{core}"),
        _code("a = 1", "hide-input"),
        _md(f":::{{dropdown}} Going deeper\n{deeper}\n:::"),
        _md("## Exercises\n\n```{exercise}\n:label: ex\nsome task here\n```"),
        _md("````{solution} ex\n:class: dropdown\n```python\nx = 1\ny = 2\n```\n"
            "done\n````"),
    ])
    counted = reading_minutes(path)
    assert counted.words == 4 + 400 and counted.code_lines == 0
    everything = counted.everything
    assert everything.words == 4 + 400 + 2 + 600 + 1 + 3 + 1  # + "Going deeper", Exercises
    assert everything.code_lines == 1 + 2  # the folded cell and the solution's block
    assert str(counted).endswith(
        f"; about {round(everything.minutes)} minutes with every dropdown, exercise and "
        "solution")
