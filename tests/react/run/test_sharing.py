"""The ``[sim] sharing`` key: exact max-min by default, the TCP-aware mode on request."""

from __future__ import annotations

import pytest

from flowsim.tcp import TcpNetwork
from react.run.scenario import ScenarioError, parse_scenario
from react.run.scenario_runs import run_scenario
from react.run.worlds.sim import build_network

DOC = {
    "seed": 0, "connections": 1,
    "topology": {"name": "star", "n": 3},
    "jobs": [{"name": "pair", "collective": "allreduce_ring", "ranks": 2,
              "message_bytes": 2e6, "epochs": 1}],
}


def test_sharing_defaults_to_exact_max_min():
    scenario = parse_scenario(DOC)
    assert scenario.sim.sharing == "maxmin"
    assert not isinstance(build_network(scenario), TcpNetwork)


def test_tcp_sharing_runs_on_the_tcp_aware_network():
    scenario = parse_scenario({**DOC, "sim": {"sharing": "tcp"}})
    net = build_network(scenario)
    assert isinstance(net, TcpNetwork)
    # 2-rank ring, 2 MB: two steps of one 1 MB flow each way. Max-min: 80 µs + 2 µs per step.
    # TCP-aware: 1 MB / goodput at the pair cap (reverse_share of the link: the two flows of a
    # step run both ways between the same hosts), plus the start-up, per step.
    model = net.model
    step = model.startup_s + 2e-6 + 8e6 / (model.goodput * model.reverse_share * 100e9)
    (time,) = run_scenario(scenario)["pair"].times_s()
    assert time == pytest.approx(2 * step, rel=1e-9)
    (exact,) = run_scenario(parse_scenario(DOC))["pair"].times_s()
    assert exact == pytest.approx(2 * 82e-6, rel=1e-9)


def test_top_level_sharing_still_works_and_warns_where_it_moved():
    moved = r"write it in the \[sim\] table: \[sim\] sharing = 'tcp'"
    with pytest.warns(FutureWarning, match=moved):
        scenario = parse_scenario({**DOC, "sharing": "tcp"})
    assert scenario.sim.sharing == "tcp"
    assert isinstance(build_network(scenario), TcpNetwork)
    # the table's own key wins over the old one
    with pytest.warns(FutureWarning):
        both = parse_scenario({**DOC, "sharing": "tcp", "sim": {"sharing": "maxmin"}})
    assert both.sim.sharing == "maxmin"


def test_bad_sharing_is_named():
    with pytest.raises(ScenarioError, match=r"sim.sharing = 'fair': expected one of maxmin, tcp"):
        parse_scenario({**DOC, "sim": {"sharing": "fair"}})
    with pytest.raises(ScenarioError, match=r"sharing = 'fair': expected one of maxmin, tcp"):
        parse_scenario({**DOC, "sharing": "fair"})
    with pytest.raises(ScenarioError, match="sharing 'x' does not exist"):
        parse_scenario(DOC).with_sharing("x")
