"""Tests for react.show.draw: figures are made, saved, highlight in red, and reject bad input."""

import matplotlib.colors as mcolors
import pytest
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch

from react.model.errors import PatternError
from react.model.pattern import Flow
from react.model.transforms import ChunkLocalSwap
from react.patterns import allreduce_double_binary_tree, allreduce_ring
from react.show.draw import HIGHLIGHT, draw, draw_swap


def _red_arrows(fig):
    red = mcolors.to_rgba(HIGHLIGHT)
    return [
        p for ax in fig.axes for p in ax.patches
        if isinstance(p, FancyArrowPatch) and mcolors.to_rgba(p.get_edgecolor()) == red
    ]


def test_draw_returns_a_figure_with_one_arrow_per_flow():
    pattern = allreduce_ring(4)
    fig = draw(pattern)
    assert isinstance(fig, Figure)
    arrows = [p for p in fig.axes[0].patches if isinstance(p, FancyArrowPatch)]
    assert len(arrows) == len(pattern.flows)
    assert _red_arrows(fig) == []


def test_draw_writes_a_png(tmp_path):
    path = tmp_path / "tree.png"
    draw(allreduce_double_binary_tree(8), path=path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_highlighted_flows_are_red():
    pattern = allreduce_double_binary_tree(8)
    congested = [f for f in pattern.flows if f.dst == 3 and f.op == "reduce"]
    assert len(congested) == 2  # 3 aggregates 5 and 1 in tree T1
    fig = draw(pattern, highlight=congested)
    assert len(_red_arrows(fig)) == 2


def test_highlighted_rank_label_is_red():
    fig = draw(allreduce_double_binary_tree(8), highlight=[3])
    labels = {t.get_text(): t.get_color() for t in fig.axes[0].get_yticklabels()}
    assert mcolors.to_rgba(labels["3"]) == mcolors.to_rgba(HIGHLIGHT)
    assert mcolors.to_rgba(labels["2"]) != mcolors.to_rgba(HIGHLIGHT)


def test_draw_into_given_axes():
    outer = Figure()
    ax = outer.add_subplot()
    assert draw(allreduce_ring(3), ax=ax) is outer


def test_draw_swap_has_two_panels_and_emphasises_the_rewritten_flows(tmp_path):
    before = allreduce_double_binary_tree(16)
    swap = ChunkLocalSwap(1, 3, 2)
    after = swap.apply(before)
    path = tmp_path / "swap.png"
    fig = draw_swap(before, after, swap, path=path, highlight=[3])
    assert len(fig.axes) == 2 and path.stat().st_size > 10_000
    changed = set(after.flows) - set(before.flows)
    thick = [p for p in fig.axes[1].patches
             if isinstance(p, FancyArrowPatch) and p.get_linewidth() > 1.5]
    assert len(thick) == len(changed) > 0


@pytest.mark.parametrize(
    "highlight, message",
    [([42], "rank 42"), ([Flow(1, 0, 1, (0,), "copy")], "not in this pattern")],
)
def test_bad_highlight_raises(highlight, message):
    with pytest.raises(PatternError, match=message):
        draw(allreduce_ring(4), highlight=highlight)
