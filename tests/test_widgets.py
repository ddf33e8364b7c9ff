"""attnbook.widgets and attnbook.plotting: the slider panel's two modes, its frames, its errors, and
the light drawing helpers (text legends, fixed titles, light ticks)."""

import re

import matplotlib.pyplot as plt
import pytest
from attnbook import plotting
from attnbook.demos import toy_attention
from attnbook.figures import l01_token_embeddings as l01
from attnbook.widgets import slider_panel, widget_mode
from hypothesis import given, settings
from hypothesis import strategies as st


def draw_line(fig, slope, intercept=0):
    if slope == 3 and intercept == 2:
        raise ValueError("slope: 3 is not allowed with intercept 2")
    ax = fig.subplots()
    ax.plot([0, 1, 2], [intercept, intercept + slope, intercept + 2 * slope])
    plotting.style_axes(ax, "x (units)", "y (units)")


def alt(slope, intercept=0):
    return f"a line of slope {slope}"


def static_frames(panel) -> dict[str, tuple[bool, str]]:
    """The static page's frames: data-index -> (visible, the frame's HTML)."""
    parts = re.findall(r'<div class="attnlab-frame" data-index="([\d,]*)"( hidden)?>(.*?)</div>',
                       panel.page_html)
    return {index: (not hidden, content) for index, hidden, content in parts}


def test_static_mode_renders_every_frame_with_alt_text_and_shows_the_default():
    panel = slider_panel(draw_line, {"slope": [1, 2, 3], "intercept": [0, 2]}, alt=alt,
                         defaults={"slope": 2}, mode="static")
    frames = static_frames(panel)
    assert len(frames) == 6 and all(content for _, content in frames.values())
    assert 'alt="a line of slope 2"' in frames["1,0"][1]
    assert frames["0,0"][1] != frames["1,0"][1]
    assert [index for index, (visible, _) in frames.items() if visible] == ["1,0"]
    assert 'aria-live="polite">a line of slope 2<' in panel.page_html
    assert panel.widget is None  # no widget library on the website


def test_numbers_get_a_slider_and_categories_toggles_or_a_dropdown():
    import ipywidgets as widgets

    controls = {"slope": [1, 2], "intercept": [0]}
    words = [f"w{i}" for i in range(6)]

    def draw(fig, slope, intercept, colour, word):
        draw_line(fig, slope, intercept)

    grid = {**controls, "colour": ["red", "blue"], "word": words}
    static = slider_panel(draw, grid, alt="a line", mode="static")
    assert static.page_html.count('type="range"') == 2
    assert static.page_html.count('type="radio"') == 2
    assert static.page_html.count("<option") == 6
    assert 'aria-valuetext="1"' in static.page_html
    live = slider_panel(draw, grid, alt="a line", mode="live")
    kinds = [type(control) for control in live.sliders]
    assert kinds == [widgets.SelectionSlider, widgets.SelectionSlider, widgets.ToggleButtons,
                     widgets.Dropdown]
    live.sliders[2].value = "blue"
    assert live.frames[(0, 0, 1, 0)].value


def test_live_mode_renders_on_demand_and_the_figure_changes():
    panel = slider_panel(draw_line, {"slope": [1, 2, 3]}, alt=alt, defaults={"slope": 2},
                         mode="live")
    assert panel.current_index() == (1,)
    assert panel.frames[(1,)].value and not panel.frames[(0,)].value
    before = panel.frames[(1,)].value
    panel.sliders[0].value = 1  # what a reader's drag does in JupyterLab
    assert panel.frames[(0,)].value and panel.frames[(0,)].value != before


def test_rejected_values_show_the_message_and_the_panel_keeps_working():
    panel = slider_panel(draw_line, {"slope": [1, 3], "intercept": [0, 2]}, alt=alt, mode="live")
    panel.sliders[0].value = 3
    panel.sliders[1].value = 2
    message = panel.frames[(1, 1)].value
    assert "not allowed" in message and "Traceback" not in message and "<img" not in message
    panel.sliders[0].value = 1
    assert "<img" in panel.frames[(0, 1)].value


def test_panel_reuses_one_figure_and_leaks_none():
    open_before = len(plt.get_fignums())
    panel = slider_panel(draw_line, {"slope": [1, 2, 3]}, alt=alt, mode="static")
    assert len(plt.get_fignums()) == open_before
    assert len(panel.render_seconds) == 3


def draw_line_in_fixed_range(fig, slope):
    draw_line(fig, slope)
    fig.axes[0].set_ylim(0, 10)


def test_later_frames_of_one_shape_keep_the_first_layout():
    panel = slider_panel(draw_line_in_fixed_range, {"slope": [1, 2]}, alt=alt, mode="live")
    first = [ax.get_position().bounds for ax in panel.figure.axes]
    panel.sliders[0].value = 2
    assert [ax.get_position().bounds for ax in panel.figure.axes] == first
    assert panel.figure.get_layout_engine() is None  # placed, not laid out again


def test_a_frame_with_wider_tick_labels_gets_its_own_layout():
    def draw(fig, top):
        draw_line(fig, 1)
        fig.axes[0].set_ylim(0, top)
        fig.axes[0].set_yticks([0, top], ["0", f"{top:,}"])

    panel = slider_panel(draw, {"top": [10, 10_000_000]}, alt="A line", mode="live")
    first = panel.figure.axes[0].get_position().x0
    panel.sliders[0].value = 10_000_000
    assert panel.figure.axes[0].get_position().x0 > first  # room for "10,000,000"


def test_open_panels_are_listed_oldest_first():
    from attnbook.widgets import open_panels

    one = slider_panel(draw_line, {"slope": [1, 2, 3]}, alt=alt, mode="live")
    two = slider_panel(draw_line, {"slope": [1, 2]}, alt=alt, mode="live")
    listed = open_panels()
    assert listed.index(one) < listed.index(two)
    assert one.name == f"draw_line#{one.number}" and one.number < two.number
    assert len(one.render_seconds) == 1  # live: only the frame on display


def test_live_controls_are_linked_to_the_stacks_in_the_browser():
    import ipywidgets as widgets
    from ipywidgets.widgets.widget_link import Link

    panel = slider_panel(draw_line, {"slope": [1, 2], "intercept": [0, 2]}, alt=alt,
                         mode="live")
    outer = panel.widget.children[-1]
    assert isinstance(outer, widgets.Stack) and len(outer.children) == 2
    assert all(isinstance(child, widgets.Stack) for child in outer.children)
    links = [w for w in widgets.Widget.widgets.values() if isinstance(w, Link)]
    targets = {(id(link.source[0]), id(link.target[0])) for link in links}
    assert (id(panel.sliders[0]), id(outer)) in targets
    for inner in outer.children:
        assert (id(panel.sliders[1]), id(inner)) in targets


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"controls": {"slope": []}}, "slope"),
        ({"controls": {"slope": [1]}, "defaults": {"slope": 5}}, "slope"),
        ({"controls": {"slope": [1]}, "labels": {"nope": "x"}}, "nope"),
        ({"controls": {"slope": list(range(50))}}, "controls"),
        ({"controls": {"slope": [1]}, "mode": "fast"}, "mode"),
    ],
)
def test_bad_panels_are_rejected(kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        slider_panel(draw_line, alt=alt, **kwargs)


def test_mode_follows_the_environment(monkeypatch):
    monkeypatch.delenv("ATTNLAB_WIDGETS", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    assert widget_mode() == "static"
    monkeypatch.setenv("JPY_SESSION_NAME", "chapters/01.ipynb")
    assert widget_mode() == "live"
    monkeypatch.setenv("ATTNLAB_WIDGETS", "static")
    assert widget_mode() == "static"


def test_figures_need_alt_text():
    fig = plotting.new_figure(ncols=1)
    with pytest.raises(ValueError, match="alt"):
        plotting.show_figure(fig, alt=" ")
    html = plotting.show_figure(fig, alt="an empty plot")._repr_html_()
    assert html.startswith("<img") and 'alt="an empty plot"' in html


def test_heatmap_rejects_non_matrices():
    fig = plotting.new_figure(ncols=1)
    with pytest.raises(ValueError, match="matrix"):
        plotting.heatmap(fig.axes[0], [1.0, 2.0], xlabel="x", ylabel="y")


@pytest.mark.parametrize(
    ("draw", "values"),
    [
        (l01.draw_one_hot_lookup, {"token_id": 1}),
        (l01.draw_table_memory, {"vocab_size": 32768, "d_model": 1536}),
        (l01.draw_clusters_emerging, {"n_sentences": 20}),
        (l01.draw_neighbours, {"word": "cat"}),
    ],
)
def test_lesson_1_figures_draw(draw, values):
    fig = plotting.new_figure()
    draw(fig, **values)
    assert fig.axes and plotting.figure_png(fig)[:4] == b"\x89PNG"


def test_table_memory_title_gives_the_parameters_in_mb_and_mib_and_ticks_are_plain_text():
    fig = plotting.new_figure()
    l01.draw_table_memory(fig, 32768, 1536, marker=("Sophia", 32000, 1536))
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()]
    assert "1,536" in ticks and "256k" in ticks and not any("$" in t for t in ticks)
    title = ax.get_title()
    assert "32,768 × 1,536 = 50,331,648 parameters" in title
    assert "100.7 MB = 96.0 MiB" in title
    assert [t.get_text() for t in ax.texts] == [" Sophia: 32,000 × 1,536"]


def test_table_memory_draws_the_table_to_scale_and_the_marker_dashed():
    """The filled rectangle is V tall and d wide, so its area is the parameter count."""
    for vocab, width in [(8192, 512), (262144, 4096)]:
        fig = plotting.new_figure()
        l01.draw_table_memory(fig, vocab, width, marker=("Sophia", 32000, 1536))
        table, outline = fig.axes[0].patches
        assert (table.get_width(), table.get_height()) == (width, vocab)
        assert (outline.get_width(), outline.get_height()) == (1536, 32000)
        assert outline.get_linestyle() == "--" and not outline.get_fill()


def test_clusters_emerge_as_the_table_reads_more_sentences():
    first, *_, last = toy_attention.TRAINING_SENTENCES
    early = toy_attention.same_group_neighbour_fraction(*toy_attention.toy_embeddings_after(first))
    late = toy_attention.same_group_neighbour_fraction(*toy_attention.toy_embeddings_after(last))
    assert early < 0.5 and late == 1.0
    tokenizer, table = toy_attention.toy_embeddings_after(first)
    assert len(toy_attention.seen_words(tokenizer, table)) < len(toy_attention.group_words())
    fig = plotting.new_figure()
    l01.draw_clusters_emerging(fig, first)
    assert f"After {first} sentences" in fig.axes[0].get_title()


def test_growing_table_rejects_counts_outside_the_corpus():
    with pytest.raises(ValueError, match="n_sentences"):
        toy_attention.toy_embeddings_after(0)


def test_neighbours_figure_rejects_unknown_words():
    with pytest.raises(ValueError, match="word"):
        l01.draw_neighbours(plotting.new_figure(), word="zebra")


def test_light_xticks_label_every_position_without_tick_objects():
    fig = plotting.new_figure()
    ax = fig.subplots()
    ax.set_xscale("log", base=2)
    ax.set_xlim(0.5, 2048)
    plotting.light_xticks(ax, [1, 16, 1024], ["1", "16", "1024"])
    ax.set_xlabel("chunk size C (tokens)")
    assert len(ax.get_xticks()) == 0
    assert [(t.get_position()[0], t.get_text()) for t in ax.texts] == [(1, "1"), (16, "16"),
                                                                       (1024, "1024")]
    assert list(ax.lines[0].get_xdata()) == [1, 16, 1024]  # the tick marks
    fig.canvas.draw()
    bottom = ax.get_window_extent().y0
    label = ax.xaxis.label.get_window_extent()
    assert all(label.y1 <= t.get_window_extent().y0 <= bottom for t in ax.texts)
    with pytest.raises(ValueError):
        plotting.light_xticks(ax, [1, 2], ["1"])


def test_text_legend_and_title_at_top():
    fig = plotting.new_figure()
    ax = fig.subplots()
    plotting.title_at_top(ax, "a title")
    plotting.text_legend(ax, [("■ first", "#0072B2"), ("– – second", "#D55E00")])
    assert ax.get_title() == "a title"
    assert [(t.get_text(), t.get_color()) for t in ax.texts] == [("■ first", "#0072B2"),
                                                                 ("– – second", "#D55E00")]
    fig.canvas.draw()
    first, second = (t.get_window_extent() for t in ax.texts)
    assert second.y1 <= first.y0 + 1  # one line under the other, not on top of it


# ---------------------------------------------------------------- cost model


def test_any_error_in_draw_shows_a_message_and_the_panel_keeps_working():
    def draw(fig, slope):
        if slope == 2:
            raise IndexError("list index out of range")
        draw_line(fig, slope)

    panel = slider_panel(draw, {"slope": [1, 2, 3]}, alt="a line", mode="live")
    panel.sliders[0].value = 2
    message = panel.frames[(1,)].value
    assert "IndexError" in message and "out of range" in message and "<img" not in message
    panel.sliders[0].value = 3
    assert panel.frames[(2,)].value.startswith("<img")
    with pytest.raises(ValueError, match="alt"):
        slider_panel(draw_line, {"slope": [1]}, alt="", mode="live")


def test_fast_sliders_changes_no_frame():
    """The opt-in only changes when garbage is collected: a panel draws the same frames."""
    from attnbook.widgets import fast_sliders

    before = slider_panel(draw_line, {"slope": [1, 2]}, alt=alt, mode="static")
    fast_sliders()
    try:
        after = slider_panel(draw_line, {"slope": [1, 2]}, alt=alt, mode="static")
    finally:
        fast_sliders(False)
    assert after.frames.keys() == before.frames.keys()
    assert all(after.frames[key].value == before.frames[key].value for key in before.frames)


# ---------------------------------------------------------------- nothing escapes a panel


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no message")


def alt_fails_at_3(slope, intercept=0):
    if slope == 3:
        raise KeyError("slope 3 has no description")
    return alt(slope)


def alt_cannot_print_its_error(slope, intercept=0):
    raise Unprintable


@pytest.mark.parametrize("mode", ["static", "live"])
@pytest.mark.parametrize(("alt_text", "expected"), [
    (alt_fails_at_3, "KeyError"),
    (alt_cannot_print_its_error, "Unprintable"),
    (lambda slope: 3, "expected a non-empty text"),
])
def test_an_alt_text_that_fails_shows_a_message_in_its_frame(mode, alt_text, expected):
    panel = slider_panel(draw_line, {"slope": [1, 3]}, alt=alt_text, mode=mode)
    if mode == "static":
        frames = static_frames(panel)
        shown = frames["1"][1]
        assert 'aria-live="polite">' in panel.page_html
    else:
        panel.sliders[0].value = 3
        shown = panel.frames[(1,)].value
    assert "attnlab-message" in shown and "alt text" in shown and expected in shown
    assert "<img" not in shown


def test_a_static_frame_announces_its_message_when_the_figure_cannot_be_shown():
    panel = slider_panel(draw_line, {"slope": [3, 1]}, alt=alt_fails_at_3, mode="static")
    status = re.search(r'aria-live="polite">(.*?)</p>', panel.page_html).group(1)
    assert "could not be written" in status and "KeyError" in status


@pytest.mark.parametrize("mode", ["static", "live"])
@pytest.mark.parametrize("fmt", [lambda v: 1 / 0, lambda v: v * 10, lambda v: None])
def test_a_format_function_that_fails_leaves_plain_values_and_says_so(mode, fmt):
    panel = slider_panel(draw_line, {"slope": [1, 2]}, alt=alt, formats={"slope": fmt},
                         mode=mode)
    if mode == "static":
        page = panel.page_html
        assert 'data-values="[&quot;1&quot;, &quot;2&quot;]"' in page
    else:
        import ipywidgets as widgets

        assert panel.sliders[0].options == (("1", 1), ("2", 2))
        notes = [c for c in panel.widget.children if isinstance(c, widgets.HTML)]
        page = "".join(note.value for note in notes)
        panel.sliders[0].value = 2
        assert panel.frames[(1,)].value.startswith("<img")  # the panel keeps working
    assert "This panel has a problem" in page and "format function failed" in page


def test_a_static_panel_says_its_sliders_need_javascript():
    panel = slider_panel(draw_line, {"slope": [1, 2]}, alt=alt, mode="static")
    noscript = re.search(r"<noscript>(.*?)</noscript>", panel.page_html).group(1)
    assert "The sliders need JavaScript; the figure shows its first setting." in noscript


# ---------------------------------------------------------------- live moves: the last one wins


def browser_moves(slider, index: int) -> None:
    """What JupyterLab sends when a reader moves a slider: a comm message with the new index."""
    slider._handle_msg({"content": {"data": {"method": "update", "state": {"index": index},
                                             "buffer_paths": []}}, "buffers": []})


def test_quick_moves_from_the_browser_draw_only_where_the_slider_stops():
    """Seven moves queued while a 0.3 s draw runs: one frame drawn, the last (drawing every
    frame on the way would take 7 × 0.3 s and more)."""
    import asyncio
    import time

    drawn = []

    def slow_draw(fig, step):
        time.sleep(0.3)
        drawn.append(step)
        draw_line(fig, step)

    panel = slider_panel(slow_draw, {"step": list(range(8))}, alt="a line", mode="live")
    drawn.clear()

    async def reader() -> float:
        start = time.perf_counter()
        for index in range(1, 8):
            browser_moves(panel.sliders[0], index)
            await asyncio.sleep(0)  # the kernel handles each message, then the next
        while not panel.frames[(7,)].value:
            await asyncio.sleep(0.01)
        return time.perf_counter() - start

    asyncio.run(reader())
    assert drawn == [7], drawn  # not the six frames on the way
    assert not any(panel.frames[(i,)].value for i in range(1, 7))


def test_a_move_made_in_code_draws_at_once_even_in_a_running_kernel():
    """``make bench`` moves sliders from a cell (an event loop runs): each move draws."""
    import asyncio

    panel = slider_panel(draw_line, {"slope": [1, 2, 3]}, alt=alt, mode="live")

    async def cell() -> None:
        panel.sliders[0].index = 2
        assert panel.frames[(2,)].value.startswith("<img")

    asyncio.run(cell())


# ---------------------------------------------------------------- any failure, any frame

FAILURES = [ValueError, IndexError, KeyError, ZeroDivisionError, RuntimeError, Unprintable,
            MemoryError, RecursionError]


@settings(max_examples=8, deadline=None)
@given(mode=st.sampled_from(["static", "live"]),
       where=st.sampled_from(["draw", "alt", "format"]),
       failure=st.sampled_from(FAILURES),
       at=st.sampled_from([1, 2, 3]))
def test_whatever_a_panel_function_raises_at_any_frame_the_panel_shows_a_message(
        mode, where, failure, at):
    """Property: a draw, alt-text or format function raising any exception at any slider
    position never escapes the panel; the frame (or the panel's note) says what went wrong
    and the other frames still show their figure."""
    def draw(fig, slope):
        if where == "draw" and slope == at:
            raise failure("boom")
        draw_line(fig, slope)

    def alt_text(slope):
        if where == "alt" and slope == at:
            raise failure("boom")
        return alt(slope)

    def fmt(value):
        if where == "format" and value == at:
            raise failure("boom")
        return f"{value}"

    panel = slider_panel(draw, {"slope": [1, 2, 3]}, alt=alt_text, formats={"slope": fmt},
                         mode=mode)
    index = at - 1
    if mode == "static":
        page = panel.page_html
        shown = static_frames(panel)[str(index)][1]
        others = [static_frames(panel)[str(i)][1] for i in range(3) if i != index]
    else:
        import ipywidgets as widgets

        panel.sliders[0].value = at
        shown = panel.frames[(index,)].value
        page = "".join(c.value for c in panel.widget.children if isinstance(c, widgets.HTML))
        others = []
        for i in range(3):
            if i != index:
                panel.sliders[0].value = i + 1
                others.append(panel.frames[(i,)].value)
    if where == "format":
        assert "format function failed" in page and shown.startswith("<img")
    else:
        # a ValueError from draw is a combination it rejects: its own words are the message
        named = "boom" if (where, failure) == ("draw", ValueError) else failure.__name__
        assert "attnlab-message" in shown and named in shown
        assert "<img" not in shown
    assert all("<img" in other for other in others)
