"""Controllers by reference: loading, the interface check, the guard, the two baselines."""

import textwrap

import numpy as np
import pytest

from react.control.controller import Controller, ControllerConfig, Decision
from react.control.policies import (
    CheckedController,
    ControllerFault,
    ControllerInterfaceError,
    ControllerLoadError,
    label,
    load_factory,
    make_controller,
    resolve,
)
from react.control.policies.baselines import NeverChange, RandomSwap
from react.model.errors import PatternError
from react.model.verify import verify
from react.patterns import allgather_ring, allreduce_double_binary_tree, allreduce_ring
from react.run.metrics import change_epochs
from react.run.scenario import ScenarioError, parse_scenario
from react.run.scenario_runs import run_scenario

POLICY = textwrap.dedent("""\
    from react.control.controller import Decision

    class Stubborn:
        def __init__(self, pattern, config):
            self.pattern, self.config, self.n = pattern, config, 0

        def observe(self, batch):
            self.n += 1
            return Decision(self.n - 1, "keep", self.pattern, "stubborn")

    NOT_CALLABLE = 3
    """)


def _scenario(**job_extra):
    job = {"name": "tree", "collective": "allreduce_double_binary_tree", "ranks": 8,
           "message_bytes": 2e6, "epochs": 18, "react": True, **job_extra}
    return {"seed": 0, "connections": 1, "topology": {"name": "star", "n": 9}, "jobs": [job],
            "background": [{"kind": "long_lived", "src": "h8", "dst": "tree:3", "p": 2}]}


def test_resolve_builtin_names_load_their_classes():
    assert load_factory(resolve("react")) is Controller
    assert load_factory(resolve("never")) is NeverChange
    assert load_factory(resolve("random")) is RandomSwap


def test_resolve_file_reference_becomes_absolute_and_loads(tmp_path):
    (tmp_path / "pol.py").write_text(POLICY)
    ref = resolve("pol.py:Stubborn", tmp_path)
    assert ref == f"{tmp_path / 'pol.py'}:Stubborn"
    assert load_factory(ref).__name__ == "Stubborn"
    assert label(ref) == "pol.Stubborn"


@pytest.mark.parametrize("ref, words", [
    ("", "expected"),
    ("no_colon", "expected"),
    ("react.nonexistent_module_xyz:Factory", "cannot import module"),
    ("react.control.controller:NoSuchThing", "has no attribute 'NoSuchThing'"),
    ("react.control.controller:__doc__", "expected a callable"),
    ("missing_dir/pol.py:Stubborn", "does not exist"),
])
def test_resolve_bad_reference_names_it(tmp_path, ref, words):
    with pytest.raises(ControllerLoadError, match=words) as info:
        resolve(ref, tmp_path)
    assert repr(ref)[1:-1] in str(info.value) or ref == ""


def test_resolve_file_that_fails_to_import_is_a_load_error(tmp_path):
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom at import')\n")
    with pytest.raises(ControllerLoadError, match="boom at import"):
        resolve("broken.py:X", tmp_path)


def test_interface_check_names_what_is_missing():
    p = allreduce_double_binary_tree(8)

    class NoObserve:
        def __init__(self, pattern, config):
            self.pattern, self.config = pattern, config

    class BadConfig(NoObserve):
        def observe(self, batch):
            return None

    with pytest.raises(ControllerInterfaceError, match="observe"):
        CheckedController(NoObserve(p, ControllerConfig()), "x:NoObserve", p)
    bad = BadConfig(p, ControllerConfig())
    bad.config = object()
    with pytest.raises(ControllerInterfaceError, match="config.batch_epochs = None"):
        CheckedController(bad, "x:BadConfig", p)
    other = BadConfig(allreduce_ring(8), ControllerConfig())
    with pytest.raises(ControllerInterfaceError, match="starting pattern"):
        CheckedController(other, "x:BadConfig", p)


class _Returns:
    """A controller that decides whatever the test hands it."""

    def __init__(self, pattern, decide):
        self.pattern, self.config, self.decide = pattern, ControllerConfig(), decide

    def observe(self, batch):
        decision = self.decide(self)
        if isinstance(decision, Decision):
            self.pattern = decision.pattern
        return decision


def test_guard_rejects_a_pattern_that_loses_a_contribution():
    p = allreduce_double_binary_tree(8)
    # without its first flow a rank's contribution never reaches the reduction: verify fails
    broken = p.with_flows(p.flows[1:])
    with pytest.raises(PatternError):
        verify(broken)
    inner = _Returns(p, lambda c: Decision(0, "try", broken, "bad"))
    guard = CheckedController(inner, "t:Bad", p)
    with pytest.raises(ControllerFault, match="batch 0: decided an invalid pattern"):
        guard.observe([])


def test_guard_rejects_another_collective_a_non_decision_and_a_raise():
    p = allreduce_double_binary_tree(8)
    # a ring AllReduce is a valid replacement (same collective, same ranks); an AllGather is not
    ring = allreduce_ring(8)
    assert CheckedController(_Returns(p, lambda c: Decision(0, "try", ring, "x")), "t:R",
                             p).observe([]).pattern == ring
    gather = allgather_ring(8)
    with pytest.raises(ControllerFault, match="decided a allgather .* expected a allreduce"):
        CheckedController(_Returns(p, lambda c: Decision(0, "try", gather, "x")), "t:G",
                          p).observe([])
    with pytest.raises(ControllerFault, match="returned a str"):
        CheckedController(_Returns(p, lambda c: "keep"), "t:S", p).observe([])

    def boom(c):
        raise ValueError("policy bug")

    with pytest.raises(ControllerFault, match="observe raised ValueError: policy bug"):
        CheckedController(_Returns(p, boom), "t:B", p).observe([])


def test_make_controller_wraps_a_raising_factory(tmp_path):
    (tmp_path / "f.py").write_text("def Bad(pattern, config):\n    raise KeyError('nope')\n")
    with pytest.raises(ControllerFault, match="factory raised KeyError"):
        make_controller(resolve("f.py:Bad", tmp_path), allreduce_ring(4), ControllerConfig())


def test_scenario_controller_key_runs_the_named_policy(tmp_path):
    (tmp_path / "pol.py").write_text(POLICY)
    scenario = parse_scenario(_scenario(controller="pol.py:Stubborn"), base_dir=tmp_path)
    assert scenario.jobs[0].controller_factory.endswith("pol.py:Stubborn")
    run = run_scenario(scenario)["tree"]
    # 18 epochs in batches of 6: three decisions, all the stub's
    assert [d.reason for d in run.decisions] == ["stubborn"] * 3


def test_scenario_controller_key_that_does_not_load_names_the_key(tmp_path):
    with pytest.raises(ScenarioError, match=r"jobs\[0\]\.controller = 'nope\.py:X'"):
        parse_scenario(_scenario(controller="nope.py:X"), base_dir=tmp_path)


def test_never_change_keeps_the_initial_pattern_every_epoch():
    scenario = parse_scenario(_scenario(controller="never"))
    run = run_scenario(scenario)["tree"]
    start = allreduce_double_binary_tree(8)
    assert all(p == start for p in run.patterns)
    assert [d.action for d in run.decisions] == ["keep"] * 3


def test_random_swap_tries_viable_swaps_and_keeps_only_what_pays():
    scenario = parse_scenario(_scenario(controller="random", epochs=60))
    run = run_scenario(scenario)["tree"]
    times = np.array(run.times_s())
    for pattern in {p.flows: p for p in run.patterns}.values():
        verify(pattern)  # every pattern it ran computes the AllReduce
    tried = [i for i, d in enumerate(run.decisions) if d.action == "try"]
    assert tried, "the baseline should try swaps on a congested job"
    for i in tried:
        if i + 1 >= len(run.decisions):
            continue
        # batch i ran the old pattern, batch i+1 the trial (apply delay 0); keep iff faster by 5%
        before = times[6 * i: 6 * i + 6].mean()
        trial = times[6 * (i + 1): 6 * (i + 1) + 6].mean()
        kept = run.decisions[i + 1].action != "revert"
        assert kept == (trial * 1.05 <= before)


def test_example_greedy_controller_runs_through_the_guard():
    # experiments/controllers/greedy.py is the example of docs/regress.md; the guard verifies
    # every pattern it decides, so a run to the end means all of them computed the AllReduce
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    scenario = parse_scenario(_scenario(controller="experiments/controllers/greedy.py:Greedy"),
                              base_dir=root)
    run = run_scenario(scenario)["tree"]
    assert [d.action for d in run.decisions] == ["try"] * 3
    # batches end at epochs 5, 11, 17; the first two changes take effect at once (no delay)
    assert change_epochs(run) == [6, 12]
