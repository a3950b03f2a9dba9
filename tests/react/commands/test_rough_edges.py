"""What a new user hit when trying the toolkit (issue 13, part 4), each pinned by a test."""

import hashlib
import importlib.util
import tempfile
from pathlib import Path

import pytest

from react.cli import main
from react.commands import run as run_command
from react.control.controller import Decision
from react.model.transforms import global_swap
from react.patterns import GENERATORS, allreduce_ring
from react.run.driver import JobRun
from react.run.metrics import change_fates
from react.run.outdir import experiment_dirs
from react.run.scenario import load_scenario
from react.show.plots import readable_key

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "experiments" / "scenarios"
PNG = b"\x89PNG\r\n\x1a\n"


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    return err


# -- image outputs ---------------------------------------------------------------------------------
def test_draw_to_a_non_image_suffix_is_one_line(tmp_path, capsys):
    assert main(["patterns", "draw", "allreduce_ring", "4", "--out", str(tmp_path / "x.txt")]) == 2
    err = _one_line_error(capsys)
    assert ".txt is not an image format" in err and ".png" in err and ".svg" in err
    assert not (tmp_path / "x.txt").exists()


def test_draw_to_a_bare_name_writes_png_and_says_so(tmp_path, capsys):
    assert main(["patterns", "draw", "allreduce_ring", "4", "--out", str(tmp_path / "x")]) == 0
    assert f"wrote {tmp_path / 'x.png'}" in capsys.readouterr().out
    assert (tmp_path / "x.png").read_bytes()[:8] == PNG


def test_plot_to_a_non_image_suffix_fails_before_reading_the_store(tmp_path, capsys):
    # the store does not even exist: the suffix is checked first
    assert main(["plot", "--store", str(tmp_path / "none.sqlite"), "--out",
                 str(tmp_path / "p.txt")]) == 2
    assert ".txt is not an image format" in _one_line_error(capsys)


# -- experiment quick modes ------------------------------------------------------------------------
def test_quick_runs_default_to_a_fresh_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    docs = ROOT / "docs" / "results"
    out, store = experiment_dirs("fig7", quick=True, out=None, store=None, default_out=docs,
                                 default_store=ROOT / "results" / "fig7.sqlite")
    assert out.parent == tmp_path and out.name.startswith("react-fig7-quick-")
    assert store == out / "fig7.sqlite"
    # asked for: where asked; full runs: the committed folder
    assert experiment_dirs("fig7", quick=True, out=tmp_path / "o", store=None,
                           default_out=docs)[0] == tmp_path / "o"
    assert experiment_dirs("fig7", quick=False, out=None, default_out=docs)[0] == docs


def test_a_quick_script_leaves_the_committed_results_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    committed = ROOT / "docs" / "results" / "fig8.png"
    before = hashlib.sha256(committed.read_bytes()).hexdigest()
    spec = importlib.util.spec_from_file_location("fig8_quick", ROOT / "experiments" / "fig8.py")
    fig8 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fig8)
    assert fig8.main(["--quick"]) == 0
    assert hashlib.sha256(committed.read_bytes()).hexdigest() == before
    made = list(tmp_path.glob("react-fig8-quick-*/fig8-quick.png"))
    assert len(made) == 1 and made[0].read_bytes()[:8] == PNG
    assert list(tmp_path.glob("react-fig8-quick-*/fig8-quick.sqlite"))


# -- scenarios and the run command -----------------------------------------------------------------
def _scenario_with(tmp_path, old, new):
    text = (SCENARIOS / "ring_degraded_spine.toml").read_text()
    assert old in text
    path = tmp_path / "s.toml"
    path.write_text(text.replace(old, new))
    return str(path)


def test_an_absurd_epoch_count_is_refused(tmp_path, capsys):
    path = _scenario_with(tmp_path, "epochs = 60", "epochs = 100000000000")
    assert main(["run", path]) == 2
    assert "jobs[0].epochs = 100000000000: expected an integer <= 100,000" in _one_line_error(
        capsys)
    assert main(["run", str(SCENARIOS / "closed_loop_star.toml"), "--epochs", "10000000"]) == 2
    assert "epochs must be at most 100,000, got 10000000" in _one_line_error(capsys)


def test_ctrl_c_during_run_is_one_line_and_status_130(monkeypatch, capsys):
    def interrupted(args, out):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_command, "cmd_run", interrupted)  # the parser is built inside main
    assert main(["run", "whatever.toml"]) == 130
    assert _one_line_error(capsys) == "react: interrupted"


def test_an_unknown_switch_in_a_link_name_gets_a_hint_listing_switches(tmp_path, capsys):
    path = _scenario_with(tmp_path, 'link = "spine0->leaf1"', 'link = "spine9->leaf1"')
    assert main(["run", path]) == 2
    err = _one_line_error(capsys)
    assert "no node 'spine9'" in err and "switches: leaf0, leaf1, leaf2, leaf3, spine0, spine1" \
        in err


def test_a_link_between_unlinked_nodes_names_the_real_neighbours(tmp_path, capsys):
    path = _scenario_with(tmp_path, 'link = "spine0->leaf1"', 'link = "spine0->h3"')
    assert main(["run", path]) == 2
    assert "spine0 links to leaf0, leaf1, leaf2, leaf3" in _one_line_error(capsys)


def test_the_alibaba_fabric_scenario_loads():
    scenario = load_scenario(SCENARIOS / "alibaba_two_jobs.toml")
    assert len(scenario.topology.hosts) == 720
    one, two = scenario.jobs
    assert not set(one.hosts) & set(two.hosts)
    rack = {h: scenario.topology.link_by_id(scenario.topology.out_links(h)[0]).dst
            for h in one.hosts + two.hosts}
    assert {rack[h] for h in one.hosts} == {rack[h] for h in two.hosts}
    assert (one.react, two.react) == (True, False)


def test_react_demo_folder_is_ignored_by_git():
    assert "/react-demo/" in (ROOT / ".gitignore").read_text().split()


# -- words -----------------------------------------------------------------------------------------
def test_one_entry_is_singular(tmp_path):
    from react.run.sweep import SweepError, parse_spec

    def grid_error(entries: int, key: str) -> str:
        background = "".join('[[background]]\nkind = "long_lived"\nsrc = "h2"\ndst = "h0"\n'
                             for _ in range(entries))
        (tmp_path / "base.toml").write_text(
            '[topology]\nname = "star"\nn = 3\n[[jobs]]\nname = "j"\n'
            'collective = "allreduce_ring"\nranks = 2\nmessage_bytes = 1e6\nepochs = 1\n'
            + background)
        with pytest.raises(SweepError) as err:
            parse_spec({"base": "base.toml", "grid": {key: [1, 2]}}, spec_dir=tmp_path)
        return str(err.value)

    assert "has 1 entry in background;" in grid_error(1, "background.3.p")
    assert "has 2 entries" in grid_error(2, "background.5")


@pytest.mark.parametrize("action", ["show", "verify", "draw", "export"])
def test_pattern_help_has_an_example_and_the_names(action, capsys):
    assert main(["patterns", action, "--help"]) == 0
    text = capsys.readouterr().out
    assert "Example: react patterns " + action in text
    assert all(name in text.replace("\n", " ") for name in GENERATORS)


def test_grid_keys_are_labelled_in_words():
    assert readable_key("background.0.p") == \
        "external flows per congested pair (p) [background.0.p]"
    assert readable_key("congested_flows") == "congested flows"


def test_fig5_variants_have_their_own_titles():
    spec = importlib.util.spec_from_file_location("fig5_titles", ROOT / "experiments" / "fig5.py")
    fig5 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fig5)
    titles = {fig5.variant_title("in", "spread"), fig5.variant_title("out", "spread"),
              fig5.variant_title("in", "random")}
    assert len(titles) == 3


def test_bars_of_zero_show_in_the_legend_and_keep_their_colour(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    from react.show.plots import plot_improvement

    seen = {}
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: seen.setdefault("fig", self))

    class Row:
        def __init__(self, cap, x, gain):
            self.job, self.react, self.params, self.gain = "tree", "on", {
                "failed_links": x, "capacity_gbps": cap}, gain

    rows = [Row(c, x, g) for x in (1, 2) for c, g in ((30, 0.1), (80, 0.0))]
    plot_improvement(tmp_path / "f.png", rows, x="failed_links", series="capacity_gbps",
                     series_format="links at {} Gb/s")
    ax = seen["fig"].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["links at 30 Gb/s",
                      "links at 80 Gb/s, no change at any point (|mean| < 0.05%)"]
    zero = [b for b in ax.patches if b.get_height() == 0]
    assert len(zero) == 2 and all(b.get_linewidth() > 0 for b in zero)
    assert zero[0].get_edgecolor() == zero[0].get_facecolor()


# -- the demo's pictures ---------------------------------------------------------------------------
def test_timeline_changes_are_classified_by_what_became_of_them():
    # epochs 0-5 A, 6-11 B (a try), 12-17 A (the revert), 18-23 C (a try), kept at batch 3
    a = allreduce_ring(4)
    b, c = global_swap(a, 0, 1), global_swap(a, 1, 2)
    patterns = [a] * 6 + [b] * 6 + [a] * 6 + [c] * 6
    decisions = [Decision(0, "try", b, ""), Decision(1, "revert", a, ""),
                 Decision(2, "try", c, ""), Decision(3, "keep", c, "")]
    run = JobRun("j", [], patterns, decisions)
    assert change_fates(run) == [(6, "undone"), (12, "reverted"), (18, "kept")]
    run.decisions = decisions[:3]
    assert change_fates(run)[-1] == (18, "open")


def test_demo_picture_highlights_the_congested_flows(tmp_path, monkeypatch):
    import react.show.draw
    from react.show.demo import narrate

    calls = []
    real = react.show.draw.draw_swap
    monkeypatch.setattr(react.show.draw, "draw_swap",
                        lambda *a, **k: calls.append(k.get("highlight")) or real(*a, **k))
    text = "\n".join(narrate(tmp_path, epochs=7))
    (highlight,) = calls
    flows = {(f.src, f.dst, f.step) for f in highlight if not isinstance(f, int)}
    # step 4 of the story: flows 1->3 and 5->3 at step 2 are steadily congested
    assert flows == {(1, 3, 2), (5, 3, 2)} and 3 in highlight
    assert "flow 1->3 at step 2" in text
    # one name per move, as in the README: chunk-local in step 5, position swap in the loop
    assert "chunk-local swap" in text and "position swap" in text
