"""The shared drawing helpers of :mod:`attnlab.plotting`, as a figure's reader sees them."""

import pytest
from attnlab import plotting


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
