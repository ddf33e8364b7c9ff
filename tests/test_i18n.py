"""Text that code writes, in the reader's language: ``attnlab.i18n`` and the figures, panels and
glued sentences of the book rendered once per language."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from attnbook.plotting import show_figure
from attnbook.widgets import slider_panel
from attnlab.i18n import current_language, language, rendered_languages, tr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from edition import keep_language  # noqa: E402


def test_language_is_scoped_and_checked():
    assert current_language() == "en"
    with language("zh_CN"):
        assert current_language() == "zh_CN"
    assert current_language() == "en"
    with pytest.raises(ValueError, match="lang: expected one of"):
        with language("fr"):
            pass


def test_rendered_languages_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("ATTNLAB_LANGUAGES", "en,zh_CN")
    assert rendered_languages() == ("en", "zh_CN")
    monkeypatch.setenv("ATTNLAB_LANGUAGES", "en,klingon")
    with pytest.raises(ValueError, match="ATTNLAB_LANGUAGES"):
        rendered_languages()
    monkeypatch.delenv("ATTNLAB_LANGUAGES")
    assert rendered_languages() == ("en",)


def _draw(fig):
    ax = fig.subplots()
    ax.set_title(tr("This frame could not be drawn:"))


def test_a_figure_is_drawn_in_each_built_language_and_a_page_keeps_its_own(monkeypatch):
    monkeypatch.setenv("ATTNLAB_LANGUAGES", "en,zh_CN")
    html = show_figure(_draw, alt=lambda: tr("Not a valid combination:"),
                       size=(3, 2))._repr_html_()
    assert html.count("<img") == 2
    english, chinese = keep_language(html, "en"), keep_language(html, "zh_CN")
    assert english.count("<img") == chinese.count("<img") == 1
    assert 'alt="Not a valid combination:"' in english
    assert 'alt="这组取值无效："' in chinese
    assert "attnlab-lang" not in english + chinese


def test_a_panel_is_rendered_in_each_built_language(monkeypatch):
    monkeypatch.setenv("ATTNLAB_LANGUAGES", "en,zh_CN")
    panel = slider_panel(lambda fig, n: _draw(fig), {"n": [1, 2]},
                         alt=lambda n: tr("Not a valid combination:") + f" {n}",
                         labels={"n": lambda: tr("This frame could not be drawn:")},
                         mode="static", width=3, height=2)
    chinese = keep_language(panel.page_html, "zh_CN")
    assert "这一帧无法绘制：" in chinese and "这组取值无效： 2" in chinese
    assert "这" not in keep_language(panel.page_html, "en")


def test_a_figure_without_a_draw_function_is_refused_by_name():
    with pytest.raises(TypeError, match="fig: expected a Figure or a function"):
        show_figure("not a figure", alt="x")


def test_set_language_holds_outside_blocks_and_blocks_win():
    from attnlab.i18n import set_language

    try:
        set_language("zh_CN")
        assert current_language() == "zh_CN"
        assert tr("Not a valid combination:") == "这组取值无效："
        with language("en"):
            assert current_language() == "en"
        with pytest.raises(ValueError, match="lang: expected one of"):
            set_language("zh")
    finally:
        set_language("en")
    assert current_language() == "en"


def test_a_figure_with_nothing_translated_is_rendered_once_for_both_editions(monkeypatch):
    monkeypatch.setenv("ATTNLAB_LANGUAGES", "en,zh_CN")

    def untranslated(fig):
        fig.subplots().set_title(tr("A title no catalog has"))

    html = show_figure(untranslated, alt="plain", size=(3, 2))._repr_html_()
    assert html.count("<img") == 1 and "attnlab-lang" not in html
    panel = slider_panel(lambda fig, n: untranslated(fig), {"n": [1, 2]}, alt="plain",
                         mode="static", width=3, height=2)
    assert "attnlab-lang" not in panel.page_html
    assert keep_language(panel.page_html, "zh_CN") == panel.page_html


def test_the_environment_chooses_the_language_until_the_notebook_does(monkeypatch):
    """ATTNLAB_LANGUAGE=zh_CN writes Chinese where no set_language() or language() block chose;
    a value it does not know is refused by its name."""
    from attnlab import i18n

    monkeypatch.setattr(i18n, "_default_language", None)  # a fresh kernel: nothing chosen yet
    monkeypatch.setenv("ATTNLAB_LANGUAGE", "zh_CN")
    assert current_language() == "zh_CN"
    assert tr("Not a valid combination:") == "这组取值无效："
    with language("en"):
        assert tr("Not a valid combination:") == "Not a valid combination:"
    i18n.set_language("en")
    assert current_language() == "en"
    monkeypatch.setattr(i18n, "_default_language", None)
    monkeypatch.setenv("ATTNLAB_LANGUAGE", "chinese")
    with pytest.raises(ValueError, match="ATTNLAB_LANGUAGE: expected one of .*got 'chinese'"):
        current_language()
    monkeypatch.delenv("ATTNLAB_LANGUAGE")
    assert current_language() == "en"
