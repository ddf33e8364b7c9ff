"""The shared drawing helpers of :mod:`attnbook.plotting`, as a figure's reader sees them."""

import pytest
from attnbook import plotting


@pytest.mark.parametrize(("tokens", "label"), [(0, "0"), (256, "256"), (1000, "1,000"),
                                               (1024, "1k"), (131072, "128k"), (2**20, "1M"),
                                               (3 * 2**20, "3M")])
def test_context_label_names_binary_thousands_and_millions(tokens, label):
    assert plotting.context_label(tokens) == label


def test_fast_bars_draw_one_artist_per_layer_at_the_given_heights():
    fig = plotting.new_figure()
    ax = fig.subplots()
    plotting.fast_bars(ax, [1.0, 2.0], "red")
    plotting.fast_bars(ax, [0.5, 0.5], ["blue", "green"], bottoms=[1.0, 2.0])
    tops = [path.vertices[:, 1].max() for layer in ax.collections for path in layer.get_paths()]
    assert tops == [1.0, 2.0, 1.5, 2.5]
    with pytest.raises(ValueError, match="bottoms"):
        plotting.fast_bars(ax, [1.0, 2.0], "red", bottoms=[0.0])


def test_fixed_axes_leave_no_layout_engine():
    fig = plotting.new_figure()
    axes = plotting.fixed_axes(fig, 2, left=0.1, right=0.9)
    assert len(axes) == 2 and fig.get_layout_engine() is None
    fig = plotting.new_figure()
    (ax,) = plotting.fixed_axes(fig, [(0.1, 0.1, 0.5, 0.5)])
    assert ax.get_position().bounds == pytest.approx((0.1, 0.1, 0.5, 0.5))
    with pytest.raises(ValueError, match="margins"):
        plotting.fixed_axes(fig, [(0.1, 0.1, 0.5, 0.5)], left=0.2)


@pytest.mark.parametrize("cmap", ["Greys", "PuOr", "viridis", "cividis"])
def test_annotations_contrast_with_their_own_cell(cmap):
    """Every annotation is black on a light cell and white on a dark one, whatever the map."""
    import torch
    from matplotlib.colors import to_rgba

    fig = plotting.new_figure()
    ax = fig.subplots()
    values = torch.linspace(-2.5, 2.5, 11)[None]
    plotting.heatmap(ax, values, xlabel="", ylabel="", cmap=cmap, vmin=-2.5, vmax=2.5,
                     annotate=True)
    image = ax.images[0]
    for text, value in zip(ax.texts, values[0].tolist(), strict=True):
        cell = image.cmap(image.norm(value))
        def luminance(rgba):
            return sum(w * (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
                       for w, c in zip((0.2126, 0.7152, 0.0722), rgba[:3], strict=True))
        contrast = [(max(luminance(cell), luminance(to_rgba(c))) + 0.05)
                    / (min(luminance(cell), luminance(to_rgba(c))) + 0.05)
                    for c in ("black", "white")]
        chosen = 0 if text.get_color() == "black" else 1
        assert contrast[chosen] >= contrast[1 - chosen]
        assert contrast[chosen] >= 4.5  # WCAG AA for the text shown


def test_figure_html_is_sized_in_css_px_with_a_2x_png():
    import base64
    import io

    from PIL import Image

    fig = plotting.new_figure(6.4, 3.2)
    fig.subplots().plot([0, 1])
    tag = plotting.figure_html(fig, "a line")
    assert 'width="614" height="307"' in tag and 'alt="a line"' in tag
    png = base64.b64decode(tag.split("base64,")[1].split('"')[0])
    image = Image.open(io.BytesIO(png))
    assert image.size == (1228, 614) and image.mode == "P"  # 2x density, 8-bit palette
    with pytest.raises(ValueError, match="alt"):
        plotting.figure_html(fig, " ")


def test_palette_pngs_keep_the_course_colours_next_to_a_heat_map():
    """A heat map's gradient takes most of an adaptive palette; the thin lines and the legend
    in the course's colours beside it (Lesson 5's RoPE panel) must keep exactly those colours
    (adaptive median cut alone drew the blue legend entry in teal)."""
    import io

    from attnbook.figures.l05_order_and_position import ROPE_BASES, draw_rope_frequencies
    from attnbook.plotting import PALETTE, figure_png, new_figure
    from PIL import Image

    fig = new_figure(6.4, 3.6)
    draw_rope_frequencies(fig, 10000.0)
    image = Image.open(io.BytesIO(figure_png(fig, density=2))).convert("RGB")
    present = {colour for _, colour in image.getcolors(256 * 256)}
    for colour in PALETTE[:len(ROPE_BASES)]:
        rgb = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
        assert rgb in present, f"{colour} was not kept exactly"
