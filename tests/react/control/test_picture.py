"""The congestion picture (react/control/picture.py): which end of a congested flow is blamed."""

import pytest

from react.control.detect import CongestionReport, FlowCongestion, detect_congestion
from react.control.picture import (
    congestion_picture,
    describe_picture,
    end_evidence,
    same_picture,
)
from react.model.pattern import Flow


def _congested(flow, kind="steady"):
    return FlowCongestion(flow, kind, 1, 1e9, 1e9, 2e9, 0.0)


def test_the_congested_inbound_link_is_blamed_not_the_healthy_senders(tree, congested):
    # Two background flows into rank 3: its four inbound flows are steady congested (all of
    # them: evidence 4/4), while each sender has one slow flow of its four outbound (1/4).
    report = detect_congestion(tree, congested(tree))
    evidence = end_evidence(tree, report)
    assert evidence[(3, "in")] == (1.0, 1.0)
    assert evidence[(1, "out")] == (0.25, 0.25)
    assert congestion_picture(tree, report) == {(3, "in")}


def test_erratic_flows_count_only_without_steady_ones(tree):
    steady, erratic = Flow(2, 1, 3, (1,), "reduce"), Flow(1, 4, 5, (1,), "reduce")
    both = CongestionReport((_congested(steady), _congested(erratic, "erratic")),
                            frozenset(), frozenset())
    assert congestion_picture(tree, both) == {(3, "in")}
    # Erratic alone: 4->5 is one of 4's four outbound flows and of 5's four inbound ones, a
    # tie, which goes to the receiver.
    alone = CongestionReport((_congested(erratic, "erratic"),), frozenset(), frozenset())
    assert end_evidence(tree, alone)[(5, "in")] == end_evidence(tree, alone)[(4, "out")]
    assert congestion_picture(tree, alone) == {(5, "in")}


@pytest.mark.parametrize(("a", "b", "overlap", "same"), [
    (set(), set(), 0.5, True),                                  # both quiet
    ({(3, "in")}, {(3, "in"), (5, "in")}, 0.5, True),           # Jaccard 1/2
    ({(3, "in")}, {(3, "in"), (5, "in")}, 0.6, False),
    ({(3, "in")}, {(3, "out")}, 0.5, False),                    # Jaccard 0
    ({(3, "in")}, set(), 0.1, False),
])
def test_pictures_are_the_same_by_jaccard_similarity(a, b, overlap, same):
    assert same_picture(frozenset(a), frozenset(b), overlap) is same


def test_a_picture_in_words():
    assert describe_picture(frozenset()) == "no congestion"
    assert describe_picture(frozenset({(5, "in"), (3, "out")})) == "3 outbound, 5 inbound"
