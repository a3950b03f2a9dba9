"""Merging every rank's stamps into one epoch: hand-computed cases."""

import pytest

from react.model.pattern import Chunk, Flow, Pattern
from react.runtime.timings import (
    RankEpochTimings,
    RecvTiming,
    SendTiming,
    TimingError,
    epoch_end_s,
    merge_epoch,
)

# one flow 0 -> 1 at step 1: a broadcast from rank 0
PAIR = Pattern("broadcast", (0, 1), (Chunk(0, 1.0),), (Flow(1, 0, 1, (0,)),), root=0)


def records(epoch=0, shift=0.0, base=10.0):
    # rank 0 enters at base, posts its send at +0.1, bytes leave at +0.2 (clear-to-send), leaves
    # at +0.3; rank 1 (clock `shift` ahead) enters at +0.05, posts its receive at +0.15, the data
    # lands at +0.6, leaves at +0.65.
    s = shift
    return [
        RankEpochTimings(0, epoch, base, base + 0.3, (SendTiming(0, base + 0.1, base + 0.2),), ()),
        RankEpochTimings(1, epoch, base + 0.05 + s, base + 0.65 + s, (),
                         (RecvTiming(0, base + 0.15 + s, base + 0.6 + s),)),
    ]


def test_a_flow_starts_when_both_ends_were_ready_and_ends_when_its_data_landed():
    # start = max(0.2 sender's first byte, 0.15 receiver's post) = 0.2; end 0.6; the epoch runs
    # from the first entry (10.0) to the last exit (10.65).
    result = merge_epoch(PAIR, records(), 100.0)
    (flow,) = result.flows
    assert (flow.start_s, flow.end_s) == pytest.approx((0.2, 0.6))
    assert result.collective_time_s == pytest.approx(0.65)
    assert flow.size_bytes == 100.0


def test_offsets_put_every_rank_on_the_leaders_clock():
    result = merge_epoch(PAIR, records(shift=1.0), 100.0, offsets_s={1: -1.0})
    assert result.collective_time_s == pytest.approx(0.65)
    assert (result.flows[0].start_s, result.flows[0].end_s) == pytest.approx((0.2, 0.6))


def test_an_epoch_starts_no_earlier_than_the_previous_one_ended_everywhere():
    # the previous epoch ended on every rank at 10.25, after rank 0 entered (10.0) and after the
    # flow began (10.2): the epoch counts from 10.25 (0.4 s), the flow starts at -0.05.
    result = merge_epoch(PAIR, records(), 100.0, not_before_s=10.25)
    assert result.collective_time_s == pytest.approx(0.4)
    assert (result.flows[0].start_s, result.flows[0].end_s) == pytest.approx((-0.05, 0.35))
    # a bound before the first entry changes nothing
    assert merge_epoch(PAIR, records(), 100.0, not_before_s=9.0) == merge_epoch(
        PAIR, records(), 100.0)


def test_overlapping_epochs_add_up_to_the_wall_time():
    # epoch 1 begins on rank 0 at 10.3 (right after its epoch 0), before rank 1 left epoch 0
    # (10.65): chained with not_before_s, the two epochs take 10.0 .. 10.95 in all.
    e0, e1 = records(0), records(1, base=10.3)
    first = merge_epoch(PAIR, e0, 100.0)
    second = merge_epoch(PAIR, e1, 100.0, not_before_s=epoch_end_s(e0))
    assert first.collective_time_s + second.collective_time_s == pytest.approx(10.95 - 10.0)


def test_missing_ranks_and_flows_reported_by_the_wrong_end_are_refused():
    with pytest.raises(TimingError, match="one record per rank"):
        merge_epoch(PAIR, records()[:1], 100.0)
    wrong = [records()[0], RankEpochTimings(1, 0, 10.0, 10.5, (SendTiming(0, 10.1),), ())]
    with pytest.raises(TimingError, match="as its src"):
        merge_epoch(PAIR, wrong, 100.0)
    with pytest.raises(TimingError, match="malformed"):
        RankEpochTimings.from_dict({"rank": 0})
