"""Scenario files: validation names the key and the value; shipped scenarios load; runs repeat."""

import copy
from dataclasses import replace
from pathlib import Path

import pytest

from react.model.errors import ReactError
from react.run.scenario import BACKENDS, ScenarioError, load_scenario, parse_scenario
from react.run.scenario_runs import compare_scenario, run_scenario

SCENARIOS = Path(__file__).resolve().parents[3] / "experiments" / "scenarios"
SHIPPED = sorted(SCENARIOS.glob("*.toml"))

BASE = {
    "name": "tiny",
    "seed": 0,
    "connections": 1,
    "topology": {"name": "star", "n": 8},
    "jobs": [
        {
            "name": "tree",
            "collective": "allreduce_double_binary_tree",
            "ranks": 4,
            "placement": "first",
            "message_bytes": 1e6,
            "epochs": 3,
            "react": True,
        }
    ],
    "background": [{"kind": "long_lived", "src": "h7", "dst": "tree:3", "p": 2}],
    "failures": [{"link": "s0->h0", "capacity_bps": 50e9, "at_s": 0.0}],
}


def scenario_with(**changes):
    """BASE with dotted-path changes: {"jobs.0.ranks": 9}; a value of ... deletes the key."""
    data = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        *head, last = dotted.split("__")
        node = data
        for part in head:
            node = node[int(part)] if part.isdigit() else node[part]
        if value is ...:
            del node[last]
        else:
            node[int(last) if last.isdigit() else last] = value
    return data


def test_base_scenario_parses_and_resolves_placement_and_endpoints():
    s = parse_scenario(BASE)
    assert s.jobs[0].hosts == ("h0", "h1", "h2", "h3")
    assert s.background[0].dst == "h3"  # tree:3 is the host of the job's rank 3
    assert s.jobs[0].controller.seed == 0 and s.jobs[0].react
    assert (s.failures[0].src, s.failures[0].dst) == ("s0", "h0")


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"topology__name": "torus"}, ["topology.name", "'torus'", "star"]),
        ({"topology__radix": 4}, ["topology.radix", "n, capacity_bps"]),
        ({"topology__n": -3}, ["topology", "n=-3"]),
        ({"jobs__0__collective": "allreduce_magic"},
         ["jobs[0].collective", "'allreduce_magic'", "allreduce_ring"]),
        ({"jobs__0__ranks": 9}, ["jobs[0].ranks", "9", "at most 8"]),
        ({"jobs__0__ranks": 4.5}, ["jobs[0].ranks", "4.5", "an integer"]),
        ({"jobs__0__placement": ["h0", "s0", "h2", "h3"]},
         ["jobs[0].placement[1]", "'s0'", "not a switch"]),
        ({"jobs__0__placement": ["h0", "h1"]}, ["jobs[0].placement", "4 hosts"]),
        ({"jobs__0__placement": "packed"}, ["jobs[0].placement", "'packed'", "spread"]),
        ({"jobs__0__message_bytes": -1}, ["jobs[0].message_bytes", "-1", "positive"]),
        ({"jobs__0__epochs": "10"}, ["jobs[0].epochs", "'10'", "an integer"]),
        ({"jobs__0__epoch": 10}, ["unknown key", "'jobs[0].epoch'", "epochs"]),
        ({"jobs__0__react": {"batchsize": 3}}, ["jobs[0].react", "'batchsize'", "batch_epochs"]),
        ({"jobs__0__react": {"delta1": 2.0}}, ["jobs[0].react", "delta1", "2.0"]),
        ({"jobs__0__react": "yes"}, ["jobs[0].react", "'yes'"]),
        ({"jobs__0__name": ...}, ["jobs[0].name", "missing"]),
        ({"sede": 3}, ["unknown key", "'sede'", "seed"]),
        ({"backend": "htsim"}, ["backend", "'htsim'", ", ".join(BACKENDS)]),
        ({"background__0__dst": "h99"}, ["background[0].dst", "'h99'"]),
        ({"background__0__dst": "tree:4"}, ["background[0].dst", "'tree:4'", "0..3"]),
        ({"background__0__kind": "bursty"}, ["background[0].kind", "'bursty'", "long_lived"]),
        ({"background__0__kind": "periodic_bulk"}, ["background[0].size_bytes", "missing"]),
        ({"background__0__kind": "ping_pong"}, ["background[0].size_bytes", "missing"]),
        ({"background__0__p": 0}, ["background[0].p", "0", ">= 1"]),
        ({"failures__0__link": "s0-h0"}, ["failures[0].link", "'s0-h0'", "SRC->DST"]),
        ({"failures__0__link": "h0->h1"}, ["failures[0].link", "'h0->h1'", "no link"]),
        ({"failures__0__recover_s": 0.0}, ["failures[0].recover_s", "0.0", "after at_s"]),
        ({"jobs": []}, ["jobs", "at least one"]),
        ({"emu": {"transport": "mpi"}}, ["emu.transport", "'mpi'", "socket, torch"]),
        ({"emu": {"link_rate_bps": 0}}, ["emu.link_rate_bps", "0", "positive"]),
        ({"emu": {"rate": 1e8}}, ["unknown key", "'emu.rate'", "link_rate_bps"]),
        ({"emu": {"apply_delay_epochs": -1}}, ["emu.apply_delay_epochs", ">= 0"]),
        ({"sim": {"execution": "algorithm3"}},
         ["sim.execution", "'algorithm3'", "algorithm2, dataflow"]),
        ({"sim": {"noise_sigma": 0.5}}, ["sim.noise_sigma", "0.5", "[0, 0.3]"]),
        ({"sim": {"noise_sigma": -0.1}}, ["sim.noise_sigma", "-0.1", ">= 0"]),
        ({"sim": {"after_epochs": "wait"}}, ["sim.after_epochs", "'wait'", "stop, continue"]),
        ({"sim": {"switch_cost_s": -1e-3}}, ["sim.switch_cost_s", "-0.001", ">= 0"]),
        ({"sim": {"switch_cost_epochs": "1"}}, ["sim.switch_cost_epochs", "'1'", "number"]),
        ({"sim": {"noise": 0.02}}, ["unknown key", "'sim.noise'", "noise_sigma"]),
    ],
)
def test_invalid_scenario_names_key_and_value(changes, expected):
    with pytest.raises(ScenarioError) as info:
        parse_scenario(scenario_with(**changes), source="bad.toml")
    message = str(info.value)
    assert message.startswith("bad.toml: ")
    for part in expected:
        assert part in message


def test_emu_table_and_backend_switch():
    s = parse_scenario(scenario_with(backend="emu", emu={"link_rate_bps": 1e8,
                                                          "transport": "torch"}))
    assert s.backend == "emu"
    assert (s.emu.link_rate_bps, s.emu.transport, s.emu.message_bytes) == (1e8, "torch", 4 * 2**20)
    assert parse_scenario(BASE).with_backend("emu").backend == "emu"
    expected = "'quantum' does not exist; expected one of sim, emu, gpu"
    with pytest.raises(ScenarioError, match=expected):
        parse_scenario(BASE).with_backend("quantum")


def test_sim_table_reaches_every_job_backend():
    from react.run.scenario_runs import open_jobs

    s = parse_scenario(scenario_with(sim={"execution": "dataflow", "switch_cost_s": 1e-3,
                                          "switch_cost_epochs": 0.5, "noise_sigma": 0.02}))
    assert parse_scenario(BASE).sim.execution == "algorithm2"
    with open_jobs(s) as jobs:
        b = jobs[0].backend
        assert (b.execution, b.switch_cost_s, b.switch_cost_epochs, b.noise_sigma) == (
            "dataflow", 1e-3, 0.5, 0.02)


def test_scenario_error_is_react_error_and_value_error():
    assert issubclass(ScenarioError, ReactError) and issubclass(ScenarioError, ValueError)


def test_duplicate_job_names_are_rejected():
    data = scenario_with()
    data["jobs"].append(dict(data["jobs"][0], placement="first"))
    with pytest.raises(ScenarioError, match=r"jobs\[1\]\.name = 'tree'"):
        parse_scenario(data)


def test_load_reports_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(ScenarioError, match="does not exist"):
        load_scenario(tmp_path / "none.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[topology\nname = 'star'\n")
    with pytest.raises(ScenarioError, match="not valid TOML"):
        load_scenario(bad)


def test_topology_file_is_read_relative_to_the_scenario(tmp_path):
    from flowsim.topologies import star

    star(8).save(tmp_path / "fabric.json")
    data = scenario_with(topology={"file": "fabric.json"})
    s = parse_scenario(data, base_dir=tmp_path)
    assert s.topology.hosts == tuple(f"h{i}" for i in range(8))
    with pytest.raises(ScenarioError, match=r"topology\.file = 'missing\.json'"):
        parse_scenario(scenario_with(topology={"file": "missing.json"}), base_dir=tmp_path)


def test_placement_rules_spread_random_and_disjoint_jobs():
    data = scenario_with(topology={"name": "fat_tree", "k": 8}, background=[], failures=[])
    data["jobs"][0].update(ranks=8, placement="spread")
    second = dict(data["jobs"][0], name="other", placement="first", ranks=4)
    third = dict(data["jobs"][0], name="third", placement="random", ranks=6, seed=7)
    data["jobs"] += [second, third]
    s = parse_scenario(data)
    # 128 hosts, 8 ranks: one per pod, h0, h16, ..., h112 (as tests/react/run/test_closed_loop.py)
    assert s.jobs[0].hosts == tuple(f"h{16 * i}" for i in range(8))
    # rules skip hosts an earlier job took
    assert s.jobs[1].hosts == ("h1", "h2", "h3", "h4")
    rnd = s.jobs[2].hosts
    assert len(set(rnd)) == 6 and not set(rnd) & set(s.jobs[0].hosts + s.jobs[1].hosts)
    assert parse_scenario(data).jobs[2].hosts == rnd  # seeded


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_scenario_loads(path):
    s = load_scenario(path)
    assert s.jobs and s.description
    for job in s.jobs:
        assert len(job.hosts) == job.ranks
        assert all(s.topology.is_host(h) for h in job.hosts)


def test_the_paper_settings_are_shipped():
    names = {p.stem for p in SHIPPED}
    assert {"worked_example", "closed_loop_star", "closed_loop_fat_tree", "ring_degraded_spine",
            "rd_allgather_fat_tree", "two_jobs_star"} <= names


def test_closed_loop_star_runs_the_test_setting():
    # tests/react/run/test_closed_loop.py: without congestion the six steps of the 8-rank tree take
    # 1602+1602+802+802+1602+1602 = 8012 us (10 MB per tree at 100 Gb/s = 800 us, +2 us per flow,
    # fan-in 2 doubling a step); with p = 2 into rank 3 the simulator gives 11744 us.
    s = load_scenario(SCENARIOS / "closed_loop_star.toml").with_epochs(2)
    quiet = run_scenario(replace(s, background=()), react=False)["tree"]
    busy = run_scenario(s, react=False)["tree"]
    assert quiet.times_s() == pytest.approx([8012e-6] * 2, rel=1e-9)
    assert busy.times_s() == pytest.approx([11744e-6] * 2, rel=1e-9)
    assert busy.decisions == []


def test_compare_runs_the_same_scenario_with_and_without_react():
    s = load_scenario(SCENARIOS / "closed_loop_fat_tree.toml").with_epochs(12)
    both = compare_scenario(s)
    off, on = both.off["tree"], both.on["tree"]
    # identical seeds: the first batch (before any decision) is the same epoch for epoch
    assert off.times_s()[:6] == on.times_s()[:6]
    assert off.decisions == [] and len(on.decisions) == 2
    again = compare_scenario(s).on["tree"]
    assert again.times_s() == on.times_s()
    assert [d.reason for d in again.decisions] == [d.reason for d in on.decisions]


def test_failure_slows_the_job_and_recovery_restores_it():
    s = load_scenario(SCENARIOS / "ring_degraded_spine.toml").with_epochs(1)
    degraded = run_scenario(s, react=False)["ring"].times_s()[0]
    healthy = run_scenario(replace(s, failures=()), react=False)["ring"].times_s()[0]
    recovered = replace(s.failures[0], recover_s=1e-12)  # back to 100 Gb/s before any byte moves
    quick = run_scenario(replace(s, failures=(recovered,)), react=False)["ring"].times_s()[0]
    assert degraded > 1.5 * healthy
    assert quick == pytest.approx(healthy, rel=1e-6)


def test_with_epochs_rejects_bad_counts():
    s = parse_scenario(BASE)
    with pytest.raises(ScenarioError, match="epochs must be a positive integer, got 0"):
        s.with_epochs(0)


def test_after_epochs_continue_keeps_a_short_job_running_through_a_long_one():
    doc = {"name": "two", "seed": 0, "connections": 1, "topology": {"name": "star", "n": 4},
           "jobs": [{"name": "short", "collective": "allreduce_ring", "ranks": 2,
                     "placement": ["h0", "h1"], "message_bytes": 4e6, "epochs": 2},
                    {"name": "long", "collective": "allreduce_ring", "ranks": 2,
                     "placement": ["h0", "h2"], "message_bytes": 40e6, "epochs": 6}]}
    assert parse_scenario(doc).sim.after_epochs == "stop"
    stop = run_scenario(parse_scenario(doc))
    keep = run_scenario(parse_scenario({**doc, "sim": {"after_epochs": "continue"}}))
    assert keep["short"].times_s() == stop["short"].times_s()
    assert keep["long"].times_s()[-1] > stop["long"].times_s()[-1] * 1.05
    assert keep["short"].info["epochs_after_own"] > 0
