"""Pictures of a pattern's time-expanded network, for teaching (paper Figs. 1, 2, 9).

Steps run left to right and ranks top to bottom: vertex ``(t, r)`` is rank ``r`` after step
``t`` (§5.1), so a flow of step ``t`` is an arrow from column ``t - 1`` to column ``t``. Each
chunk graph has its own colour (independent sub-patterns, §5.3.1); a reduce is a solid arrow and
a copy a dashed one. Highlighted flows and ranks (congested ones, say) are drawn in red;
:func:`draw_swap` puts a pattern before and after a swap side by side, the swapped ranks marked.

Only the Agg backend is used and nothing is shown on screen: library code must not open
windows. Save with ``path=`` or use the returned figure.

Examples
--------
>>> from react.patterns import allreduce_ring
>>> fig = draw(allreduce_ring(4), highlight=[2])
>>> len(fig.axes)
1
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # never a window from library code (a no-op if pyplot already chose)

from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import FancyArrowPatch  # noqa: E402

from react.model.errors import PatternError  # noqa: E402
from react.model.pattern import Flow, Pattern  # noqa: E402
from react.model.transforms import Swap  # noqa: E402

__all__ = ["draw", "draw_swap"]

HIGHLIGHT = "#d62728"  # red: congested flows and ranks
MARK = "#1f77b4"  # blue: the two ranks of a swap
_PALETTE = ("#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#e377c2", "#7f7f7f",
            "#bcbd22", "#1f77b4", "#aec7e8")


def draw(
    pattern: Pattern,
    highlight: Iterable[Flow | int] = (),
    ax: Axes | None = None,
    path: str | Path | None = None,
    *,
    title: str | None = None,
    marked: Iterable[int] = (),
    emphasised: Iterable[Flow] = (),
) -> Figure:
    """Draw ``pattern``'s TEN.

    Parameters
    ----------
    pattern : Pattern
    highlight : iterable of Flow or int
        Flows (drawn red and thick) and ranks (red vertices and label), e.g. congested ones.
    ax : matplotlib Axes, optional
        Draw into it; otherwise a new figure sized for the pattern is made.
    path : str or Path, optional
        Save the figure there (PNG, or any format matplotlib infers from the suffix).
    title : str, optional
        Defaults to the pattern's name, kind and size.
    marked : iterable of int
        Ranks to mark in blue (the two ranks of a swap, in :func:`draw_swap`).
    emphasised : iterable of Flow
        Flows drawn thicker in their own colour (the flows a swap rewrote).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    PatternError
        If a highlighted or marked rank is not in the pattern, or a highlighted flow is not one
        of its flows.
    """
    flows_hl, ranks_hl = _split_highlight(pattern, highlight)
    marked_ranks = set()
    for r in marked:
        pattern._check_rank(r)
        marked_ranks.add(r)
    bold = set(emphasised)
    if ax is None:
        steps = max(pattern.num_steps, 1)
        fig = Figure(figsize=(1.6 + 0.95 * steps, 1.4 + 0.42 * pattern.n), dpi=110)
        ax = fig.add_subplot()
    else:
        fig = ax.figure  # type: ignore[assignment]
    _draw_into(ax, pattern, flows_hl, ranks_hl, marked_ranks, bold, title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path)
    return fig


def draw_swap(
    before: Pattern,
    after: Pattern,
    swap: Swap,
    path: str | Path | None = None,
    *,
    highlight: Iterable[Flow | int] = (),
) -> Figure:
    """Before and after a swap, side by side (like the paper's Figs. 1 and 9).

    The swap's two ranks are marked blue in both panels; on the right, the flows the swap
    rewrote are drawn thicker. ``highlight`` (congested flows or ranks) is drawn red on the left.
    """
    if before.ranks != after.ranks:
        raise PatternError(
            f"draw_swap: before and after must have the same ranks, got {before.n} and {after.n}"
        )
    steps = max(before.num_steps, after.num_steps, 1)
    fig = Figure(figsize=(2 * (1.6 + 0.95 * steps), 1.6 + 0.42 * before.n), dpi=110)
    left, right = fig.subplots(1, 2, sharey=True)
    draw(before, highlight, ax=left, marked=(swap.x, swap.y), title="before")
    changed = set(after.flows) - set(before.flows)
    draw(after, (), ax=right, marked=(swap.x, swap.y), emphasised=changed,
         title=f"after {swap.describe()}")
    fig.suptitle(f"{before.name or 'pattern'} ({before.kind}, n={before.n})")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path)
    return fig


def _split_highlight(
    pattern: Pattern, highlight: Iterable[Flow | int]
) -> tuple[set[Flow], set[int]]:
    flows: set[Flow] = set()
    ranks: set[int] = set()
    for item in highlight:
        if isinstance(item, Flow):
            pattern.flow_index(item)  # raises PatternError naming the flow
            flows.add(item)
        else:
            pattern._check_rank(item)  # raises PatternError naming the rank
            ranks.add(item)
    return flows, ranks


def _draw_into(
    ax: Axes,
    pattern: Pattern,
    flows_hl: set[Flow],
    ranks_hl: set[int],
    marked: set[int],
    bold: set[Flow],
    title: str | None,
) -> None:
    row = {r: i for i, r in enumerate(pattern.ranks)}
    graphs = pattern.chunk_graphs()
    colours = [_PALETTE[g % len(_PALETTE)] for g in range(len(graphs))]
    _draw_vertices(ax, pattern.num_steps, row, ranks_hl, marked)
    _draw_flows(ax, pattern, row, colours, flows_hl, bold)
    _label_axes(ax, pattern, ranks_hl, marked, title)
    _legend(ax, pattern.n, colours, highlighted=bool(flows_hl or ranks_hl), marked=bool(marked))


def _draw_vertices(
    ax: Axes, steps: int, row: dict[int, int], ranks_hl: set[int], marked: set[int]
) -> None:
    """A light dot per (step, rank); red or blue rows for highlighted / marked ranks."""
    for r, i in row.items():
        colour = HIGHLIGHT if r in ranks_hl else MARK if r in marked else "#555555"
        size = 22 if (r in ranks_hl or r in marked) else 9
        ax.scatter(range(steps + 1), [i] * (steps + 1), s=size, color=colour, zorder=3,
                   linewidths=0)


def _draw_flows(
    ax: Axes,
    pattern: Pattern,
    row: dict[int, int],
    colours: list[str],
    flows_hl: set[Flow],
    bold: set[Flow],
) -> None:
    """One arrow per flow; once some flows are emphasised, the others fade so that they stand
    out."""
    # Several flows between the same two vertices (one per chunk graph) bend apart.
    parallel: dict[tuple[int, int, int], list[Flow]] = {}
    for f in pattern.flows:
        parallel.setdefault((f.step, f.src, f.dst), []).append(f)
    for group in parallel.values():
        for k, f in enumerate(group):
            g = pattern.chunk_graph_of_flow(f)
            hot = f in flows_hl
            width = 2.8 if hot else 1.9 if f in bold else 1.0
            arrow = FancyArrowPatch(
                (f.step - 1, row[f.src]), (f.step, row[f.dst]),
                arrowstyle="-|>", mutation_scale=9 if not hot else 12,
                color=HIGHLIGHT if hot else colours[g], linewidth=width,
                linestyle="-" if f.op == "reduce" else (0, (4, 2)),
                connectionstyle=f"arc3,rad={0.12 * (k - (len(group) - 1) / 2):.3f}",
                shrinkA=3, shrinkB=3, zorder=4 if hot else 2,
                alpha=1.0 if (hot or f in bold or not bold) else 0.55,
            )
            ax.add_patch(arrow)


def _label_axes(
    ax: Axes, pattern: Pattern, ranks_hl: set[int], marked: set[int], title: str | None
) -> None:
    """Steps along x, ranks down y (rank 0 on top, as in the paper), no frame."""
    steps = pattern.num_steps
    ax.set_xlim(-0.4, steps + 0.4)
    ax.set_ylim(pattern.n - 0.5, -0.5)  # rank 0 on top
    ax.set_xticks(range(steps + 1))
    ax.set_xlabel("step t (vertex (t, r) = rank r after step t)")
    ax.set_yticks(range(pattern.n))
    ax.set_yticklabels([str(r) for r in pattern.ranks])
    for label, r in zip(ax.get_yticklabels(), pattern.ranks, strict=False):  # none if shared
        if r in ranks_hl:
            label.set_color(HIGHLIGHT)
            label.set_fontweight("bold")
        elif r in marked:
            label.set_color(MARK)
            label.set_fontweight("bold")
    ax.set_ylabel("rank")
    ax.tick_params(length=0)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.grid(axis="x", color="#eeeeee", zorder=0)
    if title is None:
        title = f"{pattern.name or 'pattern'} ({pattern.kind}, n={pattern.n})"
    ax.set_title(title, fontsize=10)


def _legend(ax: Axes, n: int, colours: list[str], *, highlighted: bool, marked: bool) -> None:
    """Below the axes; one entry per chunk graph only while there are few enough to tell
    apart."""
    handles = [
        Line2D([], [], color="#333333", linestyle="-", label="reduce"),
        Line2D([], [], color="#333333", linestyle=(0, (4, 2)), label="copy"),
    ]
    if len(colours) <= 4:
        handles += [
            Line2D([], [], color=colours[g], linewidth=2, label=f"chunk graph {g}")
            for g in range(len(colours))
        ]
    else:
        handles.append(Line2D([], [], color="none", label=f"{len(colours)} chunk graphs, "
                                                           "one colour each"))
    if highlighted:
        handles.append(Line2D([], [], color=HIGHLIGHT, linewidth=2.5, label="highlighted"))
    if marked:
        handles.append(Line2D([], [], color=MARK, marker="o", linestyle="none",
                              label="swapped ranks"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.09 - 0.3 / n),
              ncol=min(len(handles), 4), fontsize=8, frameon=False)
