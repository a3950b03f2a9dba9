"""The controller's state machine on hand-made batches: parameters, try/keep/revert/settle, reasons.

The batches come from ``conftest.py``: every flow at the fair share of the busier of its links
(0.8 ms per share for the 8-rank tree's 10 MB flows), ``p`` background flows into one rank.
Without background the tree takes 8.8 ms; with ``p = 2`` into rank 3, 11.2 ms (two flows into
rank 3 are on the critical path, at step 2 one share of 4 instead of 2, at step 4 one of 3
instead of 1: 4 x 0.8 ms more).
"""

import pytest

from react.control.config import REMOVED_OPTIONS
from react.control.controller import ConfigError, Controller, ControllerConfig, Decision
from react.control.spaces import SpaceCache
from react.model.errors import ReactError
from react.patterns import allgather_recursive_doubling, allreduce_double_binary_tree


def test_config_defaults_are_table_3():
    cfg = ControllerConfig()
    assert (cfg.batch_epochs, cfg.delta1, cfg.delta2, cfg.trials, cfg.epsilon,
            cfg.history_epochs, cfg.exploration_rounds, cfg.revert_threshold) == (
        6, 0.2, 0.15, 15, 0.05, 60, 5, 0.05)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"batch_epochs": 0}, "batch_epochs must be >= 1, got 0"),
        ({"delta1": 1.5}, "delta1 must be a number in"),
        ({"trials": 2.5}, "trials must be an integer"),
        ({"epsilon": "x"}, "epsilon"),
        ({"picture_overlap": 0}, "picture_overlap must be a number in \\(0, 1\\], got 0"),
        ({"unseen_pairs": "magic"}, "unseen_pairs must be one of .*'magic'"),
        ({"concurrency": "time"}, "concurrency must be one of .*'checked'.*'time'"),
        ({"search_slack": -0.1}, "search_slack must be a number in \\[0, 1\\), got -0.1"),
        ({"overestimate_tolerance": -0.1},
         "overestimate_tolerance must be a number in \\[0, 1\\), got -0.1"),
        ({"search_width": 0}, "search_width must be >= 1, got 0"),
        ({"size_aware_detection": 1}, "size_aware_detection must be true or false"),
        ({"history_epochs": 10}, r"history_epochs \(10\) must hold at least two batches"),
    ],
)
def test_config_rejects_bad_values(values, message):
    with pytest.raises(ConfigError, match=message):
        ControllerConfig(**values)


def test_config_from_mapping_rejects_unknown_key():
    expected = "unknown parameter 'batch'; expected one of .*batch_epochs"
    with pytest.raises(ConfigError, match=expected):
        ControllerConfig.from_mapping({"batch": 6}, where="jobs.0.react")


@pytest.mark.parametrize("key", ["failure_memory", "fit_tolerance", "unsettle_batches"])
def test_a_removed_option_is_named_as_removed(key):
    assert key in REMOVED_OPTIONS
    with pytest.raises(ConfigError, match=f"jobs.0.react: parameter '{key}' was removed"):
        ControllerConfig.from_mapping({key: 1}, where="jobs.0.react")


def test_no_congestion_keeps_the_pattern(tree, congested):
    decision = Controller(tree).observe(congested(tree, p=0))
    assert decision.action == "keep" and decision.pattern == tree
    assert "no congestion" in decision.reason
    assert decision.report is None


def test_congestion_leads_to_a_trial_with_a_reason_and_what_it_saw(tree, congested):
    decision = Controller(tree).observe(congested(tree))
    assert decision.action == "try" and decision.swaps
    assert decision.pattern != tree
    assert decision.estimated_gain > 0.05
    # The reason names a congested flow into rank 3, its kind, and the accepted swap.
    assert "->3" in decision.reason and "steady congested" in decision.reason
    assert decision.swaps[0].describe() in decision.reason
    # What it saw: the four flows into rank 3 (steps 2, 2, 4, 6), each slower than its class,
    # so rank 3 is steady congested inbound; no other flow is.
    report = decision.report
    assert sorted((c.flow.src, c.flow.dst, c.flow.step) for c in report.flows) == [
        (1, 3, 2), (2, 3, 6), (5, 3, 2), (7, 3, 4)]
    assert {c.kind for c in report.flows} == {"steady"}
    assert report.steady_inbound == {3} and report.steady_outbound == frozenset()


def test_the_report_is_detected_with_the_jobs_thresholds(tree, congested):
    # Throughputs (Gb/s; one class per degree, every flow carries half the message): of the
    # 24 degree-2 flows, 1->3 and 5->3 at step 2 get 100/4 = 25, 2->3 at step 6 100/3 = 33.3
    # and the rest 50 (mean 47.2); of the 4 degree-1 flows 7->3 at step 4 gets 33.3 and the
    # rest 100 (mean 83.3). Steady below (1 - delta1) x the mean: at 0.2 (37.8 and 66.7) the
    # four flows into 3; at delta1 = 0.5 (23.6 and 41.7) only 7->3.
    decision = Controller(tree, ControllerConfig(delta1=0.5)).observe(congested(tree))
    assert [(c.flow.src, c.flow.dst, c.flow.step) for c in decision.report.flows] == [(7, 3, 4)]
    # Not every flow into 3 is steady any more: rank 3 is not steady congested inbound.
    assert decision.report.steady_inbound == frozenset()


def test_a_trial_that_does_not_pay_off_is_reverted_and_not_retried(tree, congested):
    ctl = Controller(tree, ControllerConfig(seed=1))
    first = ctl.observe(congested(tree))
    # The tried pattern looks much worse: twelve background flows during its batch.
    second = ctl.observe(congested(first.pattern, p=12))
    assert second.action == "revert" and second.pattern == tree
    assert second.observed_gain < 0 and "reverted" in second.reason
    assert second.report is None  # it judged the trial, it detected nothing
    # The base runs again (a fresh measurement) and the next trial avoids the failed swaps.
    third = ctl.observe(congested(tree))
    assert third.action == "try"
    assert set(third.swaps).isdisjoint(first.swaps)


def test_a_trial_that_pays_off_is_kept(tree, congested):
    ctl = Controller(tree)
    first = ctl.observe(congested(tree))
    second = ctl.observe(congested(first.pattern))
    assert second.observed_gain > 0.05
    assert second.reason.startswith("kept")


def test_settles_until_the_congestion_picture_changes(tree, congested):
    ctl = Controller(tree, ControllerConfig(exploration_rounds=1))
    first = ctl.observe(congested(tree))
    assert first.action == "try"
    second = ctl.observe(congested(first.pattern, p=12))
    assert second.action == "revert" and "settling" in second.reason
    # Same congestion (into rank 3): stays settled, batch after batch, and says what it saw.
    for _ in range(3):
        settled = ctl.observe(congested(tree))
        assert settled.action == "settled" and settled.report.steady_inbound == {3}
    # Congestion moves to rank 5: a new picture, so it explores again.
    moved = ctl.observe(congested(tree, into=5))
    assert "congestion picture changed (3 inbound -> 5 inbound)" in moved.reason
    assert moved.action == "try"


def test_a_settled_job_looks_again_after_30_then_60_epochs_and_never_retries_a_failure(
        tree, congested):
    # The paper's escape from local optima (§5.4.2: explore again after Emax x B quiet epochs),
    # with the wait doubling after each look that finds nothing to keep.
    ctl = Controller(tree, ControllerConfig(exploration_rounds=1, seed=2))
    base = congested(tree)
    first = ctl.observe(base)
    assert ctl.observe(congested(first.pattern, p=12)).action == "revert" and ctl.settled
    tried = [set(first.swaps)]
    actions = []
    for _ in range(20):  # every trial looks much worse than its base
        d = ctl.observe(base if ctl.pattern == tree else congested(ctl.pattern, p=12))
        actions.append(d.action)
        if d.action == "try":
            assert "exploring once more" in d.reason
            assert all(set(d.swaps).isdisjoint(t) for t in tried)  # failures stay excluded
            tried.append(set(d.swaps))
    # Settled after batch 1: quiet for 5 batches (30 epochs), a look (try), its failure
    # (revert, settled again), then 10 batches (60 epochs) before the next look.
    assert actions[:6] == ["settled"] * 4 + ["try", "revert"]
    assert actions[6:15] == ["settled"] * 9 and actions[15] == "try"


def test_reexplore_epochs_zero_settles_until_the_picture_changes(tree, congested):
    ctl = Controller(tree, ControllerConfig(exploration_rounds=1, reexplore_epochs=0))
    first = ctl.observe(congested(tree))
    ctl.observe(congested(first.pattern, p=12))
    base = congested(tree)
    assert all(ctl.observe(base).action == "settled" for _ in range(12))


def test_a_settled_job_explores_again_when_its_time_rises(tree, congested):
    ctl = Controller(tree, ControllerConfig(exploration_rounds=1))
    first = ctl.observe(congested(tree))
    ctl.observe(congested(first.pattern, p=12))
    assert ctl.settled
    # Same rank congested, by three flows instead of two: the two flows into rank 3 on the
    # critical path take one share more each, 11.2 ms -> 12.8 ms (+14%, above tau_r = 5%).
    worse = ctl.observe(congested(tree, p=3))
    assert "the collective time rose to 12800.0 us from 11200.0 us" in worse.reason
    assert not ctl.settled


def test_settling_keeps_the_fastest_pattern_of_the_round(tree, congested):
    # A trial that gains less than tau_r is reverted, but if it was the fastest pattern of the
    # round, settling switches to it: its batch is made 3% faster than the base (below 5%).
    ctl = Controller(tree, ControllerConfig(exploration_rounds=1))
    base = congested(tree)
    first = ctl.observe(base)
    faster = congested(first.pattern, scale=1 / 1.03,
                       collective_time_s=base[0].collective_time_s / 1.03)
    second = ctl.observe(faster)
    assert second.action == "keep" and "fastest pattern of this round" in second.reason
    assert second.pattern == first.pattern and ctl.settled


def test_observe_rejects_an_empty_batch_and_foreign_batches(tree, congested):
    ctl = Controller(tree)
    with pytest.raises(ReactError, match="empty"):
        ctl.observe([])
    other = tree.with_flows(tree.flows[:-1])
    with pytest.raises(ReactError, match="did not run this pattern"):
        ctl.observe(congested(other))


def test_same_seed_same_decisions(tree, congested):
    observed = congested(tree)
    a = Controller(tree, ControllerConfig(seed=7)).observe(observed)
    b = Controller(tree, ControllerConfig(seed=7)).observe(observed)
    assert (a.swaps, a.reason) == (b.swaps, b.reason)


def test_overestimate_tolerance_trusts_no_estimate_above_the_running_pattern(tree, congested):
    # The flows' times (which the estimate is built from) as they are, the observed collective
    # times halved: the estimate of the running pattern, 11.2 ms, is 100% above the 5.6 ms
    # observed. With a tolerance of 20% nothing is tried and the batch counts as fruitless; it
    # is one-sided: observed times doubled (the estimate 50% below), the trial happens.
    strict = ControllerConfig(overestimate_tolerance=0.2)

    def first(config, observed_s):
        return Controller(tree, config).observe(congested(tree, collective_time_s=observed_s))

    refused = first(strict, 5.6e-3)
    assert refused.action == "keep" and refused.pattern == tree
    assert ("the estimate of the running pattern, 11200.0 us, is 100% above its observed "
            "5600.0 us (more than 20%)") in refused.reason
    assert first(ControllerConfig(), 5.6e-3).action == "try"
    for observed_s in (11.2e-3, 22.4e-3):
        assert first(strict, observed_s).action == "try"


@pytest.mark.parametrize("generator", [allreduce_double_binary_tree, allgather_recursive_doubling])
def test_swap_spaces_kept_within_a_small_budget_give_the_same_decisions(generator, congested):
    # A budget of 40 flows' worth keeps one 8-rank pattern's space at a time (a tree's 28
    # flows; the recursive doubling's replay of its one chunk graph alone is over it), and the
    # shared replays are held to one: every space and replay the search needs again is rebuilt,
    # and the decisions are those of the default budget, batch after batch (a trial made to
    # fail, the base again, congestion moving).
    base = generator(8)

    def decisions(spaces):
        ctl, pattern, out, kept = Controller(base, ControllerConfig(seed=3), spaces=spaces), \
            base, [], []
        for into, p in ((3, 2), (3, 12), (3, 2), (5, 2)):
            d = ctl.observe(congested(pattern, into=into, p=p))
            out.append((d.action, d.pattern.flows, d.swaps, d.reason))
            kept.append(len(spaces))
            pattern = d.pattern
        return out, kept

    small = SpaceCache(max_bytes=40 * SpaceCache.SPACE_BYTES_PER_FLOW, shared_replay_entries=40)
    unbounded, kept_unbounded = decisions(SpaceCache())
    bounded, kept_bounded = decisions(small)
    assert bounded == unbounded
    assert [a for a, *_ in bounded].count("try") >= 1
    assert max(kept_bounded) == 1 < max(kept_unbounded)
    assert len(small.replays) <= 1


def test_a_decision_is_a_record_a_baseline_can_make_without_a_report(tree):
    # Policies that detect nothing leave the report out.
    d = Decision(batch=0, action="keep", pattern=tree, reason="baseline")
    assert d.report is None and not d.changed
    assert Decision(0, "revert", tree, "back").changed
