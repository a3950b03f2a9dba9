"""The job driver and the tuning loop: the same closed loop whatever runs the epochs."""

from dataclasses import dataclass, field

import pytest

from flowsim.network import Network
from flowsim.topologies import star
from flowsim.traffic import long_lived
from react.backends.sim.engine import SimBackend
from react.control.backend import JobRun
from react.control.controller import Controller, ControllerConfig, Decision
from react.control.loop import TuningLoop
from react.model.errors import ReactError
from react.model.observation import EpochResult
from react.patterns import allreduce_double_binary_tree, allreduce_ring
from react.run.driver import Job, run_jobs


def result(epoch: int) -> EpochResult:
    return EpochResult(epoch, 1.0, (), 1.0)


@dataclass
class _Config:
    batch_epochs: int = 3
    apply_delay_epochs: int = 2


@dataclass
class ScriptedController:
    """Changes to ``other`` after its first batch and remembers which epochs it was shown."""

    pattern: object
    other: object
    config: _Config = field(default_factory=_Config)
    seen: list = field(default_factory=list)

    def observe(self, batch):
        self.seen.append([r.epoch for r in batch])
        first = len(self.seen) == 1
        if first:
            self.pattern = self.other
        return Decision(len(self.seen) - 1, "try" if first else "keep", self.pattern, "scripted")


def test_tuning_loop_switches_after_the_delay_and_hides_the_delay_epochs():
    # B = 3, delay = 2: epochs 0-2 form batch 0; the new pattern runs from epoch 3 + 2 = 5;
    # epochs 3 and 4 still run the old pattern and are not shown to the controller; the next
    # batch is epochs 5-7.
    a, b = allreduce_ring(4), allreduce_double_binary_tree(4)
    ctl = ScriptedController(a, b)
    loop = TuningLoop(a, ctl)  # type: ignore[arg-type]
    ran = []
    for e in range(9):
        ran.append(loop.pattern_for(e))
        loop.record(e, result(e))
    assert ran == [a] * 5 + [b] * 4
    assert ctl.seen == [[0, 1, 2], [5, 6, 7]]
    assert [d.action for d in loop.decisions] == ["try", "keep"]


def test_tuning_loop_delay_override_and_order_checks():
    a, b = allreduce_ring(4), allreduce_double_binary_tree(4)
    loop = TuningLoop(a, ScriptedController(a, b), apply_delay_epochs=0)  # type: ignore[arg-type]
    for e in range(3):
        loop.pattern_for(e)
        loop.record(e, result(e))
    assert loop.pending is not None and loop.pending.epoch == 3
    with pytest.raises(ReactError, match="expected epoch 3"):
        loop.pattern_for(4)
    with pytest.raises(ReactError, match="non-negative"):
        TuningLoop(a, None, apply_delay_epochs=-1)


class SteppedOnly:
    """A stepped Backend that is not the simulator's: only run_epochs and close."""

    def __init__(self, sim: SimBackend) -> None:
        self._sim = sim

    def run_epochs(self, pattern, epochs):
        return self._sim.run_epochs(pattern, epochs)

    def close(self) -> None:
        pass


def _congested_star_job(wrap: bool) -> Job:
    net = Network(star(16))
    for port in range(2):
        long_lived(net, "h8", "h3", port=port)
    tree = allreduce_double_binary_tree(8)
    sim = SimBackend(net, [f"h{i}" for i in range(8)], 20e6, connections=1)
    backend = SteppedOnly(sim) if wrap else sim
    return Job("tree", backend, tree, 30, Controller(tree, ControllerConfig(apply_delay_epochs=1)))


def test_stepped_backend_runs_the_same_closed_loop_as_the_simulator_driver():
    # Two drivers (SimPy processes vs a thread calling run_epochs) over the same simulated
    # network must give identical epochs, patterns and decisions, and REACT must act here.
    clocked = run_jobs([_congested_star_job(False)])["tree"]
    stepped = run_jobs([_congested_star_job(True)])["tree"]
    assert stepped.times_s() == clocked.times_s()
    assert stepped.patterns == clocked.patterns
    assert [(d.batch, d.action, d.reason) for d in stepped.decisions] == \
        [(d.batch, d.action, d.reason) for d in clocked.decisions]
    assert any(d.changed for d in clocked.decisions)


class FakeTuned:
    """A TunedBackend: runs the whole job itself and returns its record."""

    def __init__(self, time_s: float) -> None:
        self.time_s = time_s

    def run_job(self, name, pattern, epochs, controller, on_epoch=None):
        run = JobRun(name)
        for e in range(epochs):
            run.results.append(EpochResult(e, self.time_s, (), 1.0))
            run.patterns.append(pattern)
            if on_epoch:
                on_epoch(name, e)
        return run

    def close(self) -> None:
        pass


def test_tuned_backends_run_side_by_side_and_report_progress():
    ring = allreduce_ring(4)
    ticks = []
    runs = run_jobs([Job("a", FakeTuned(1.0), ring, 3), Job("b", FakeTuned(2.0), ring, 2)],
                    on_epoch=lambda job, e: ticks.append((job, e)))
    assert runs["a"].times_s() == [1.0] * 3 and runs["b"].times_s() == [2.0] * 2
    assert sorted(ticks) == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]


def test_driver_rejects_mixed_clocks_and_non_backends():
    ring = allreduce_ring(4)
    sim = _congested_star_job(False)
    with pytest.raises(ReactError, match="cannot run in one call"):
        run_jobs([sim, Job("x", FakeTuned(1.0), sim.pattern, 1)])
    with pytest.raises(ReactError, match="neither run_epochs"):
        Job("bad", object(), ring, 1)  # type: ignore[arg-type]


def test_errors_in_a_job_thread_reach_the_caller():
    class Broken(FakeTuned):
        def run_job(self, *args, **kwargs):
            raise ReactError("rank 2 failed")

    ring = allreduce_ring(4)
    with pytest.raises(ReactError, match="rank 2 failed"):
        run_jobs([Job("a", Broken(1.0), ring, 1), Job("b", FakeTuned(1.0), ring, 1)])


def _sharing_jobs(keep_running):
    """A short-epoch job (2 epochs) and a long one (6 epochs) whose ranks share host h0."""
    net = Network(star(4))
    short = Job("short", SimBackend(net, ["h0", "h1"], 4e6, connections=1),
                allreduce_ring(2), 2)
    long = Job("long", SimBackend(net, ["h0", "h2"], 40e6, connections=1),
               allreduce_ring(2), 6)
    return run_jobs([short, long], keep_running=keep_running)


def test_keep_running_loads_the_network_until_every_job_is_done():
    alone = run_jobs([Job("long", SimBackend(Network(star(4)), ["h0", "h2"], 40e6,
                                             connections=1), allreduce_ring(2), 6)])["long"]
    solo = alone.times_s()[-1]
    stop, keep = _sharing_jobs(False), _sharing_jobs(True)
    # Stopping: once the short job is done, the long job runs as if alone.
    assert stop["long"].times_s()[-1] == pytest.approx(solo, rel=1e-12)
    # Continuing: every epoch of the long job shares h0 with the short job's flows.
    assert all(t > solo * 1.05 for t in keep["long"].times_s())
    # The short job records the same epochs either way and says how many more it ran.
    assert keep["short"].times_s() == stop["short"].times_s()
    assert keep["short"].info["epochs_after_own"] > 0
    assert keep["long"].info["epochs_after_own"] == 0


def test_keep_running_is_refused_for_jobs_not_on_the_simulator():
    @dataclass
    class Stepped:
        def run_epochs(self, pattern, epochs):
            return [result(0)]

        def close(self):
            pass

    tree = allreduce_double_binary_tree(4)
    with pytest.raises(ReactError, match="keep_running applies to simulator jobs only"):
        run_jobs([Job("a", Stepped(), tree, 1)], keep_running=True)
