"""The Pattern data model: bad input gives a PatternError naming the value; derived views; JSON."""

from __future__ import annotations

import json

import pytest

from react.model.errors import PatternError
from react.model.pattern import Chunk, Flow, Pattern
from react.patterns import allreduce_double_binary_tree, allreduce_ring


def _one_chunk(ranks=(0, 1), flows=(), kind="allreduce", **kw) -> Pattern:
    return Pattern(kind, ranks, (Chunk(0, 1.0),), flows, **kw)


# -- bad input ----------------------------------------------------------------------------------
def test_pattern_rejects_fewer_than_two_ranks():
    with pytest.raises(PatternError, match=r"^Pattern: needs at least 2 ranks, got n=1$"):
        _one_chunk(ranks=(0,))


def test_pattern_rejects_duplicate_ranks():
    with pytest.raises(PatternError, match=r"^Pattern: duplicate rank 1$"):
        _one_chunk(ranks=(0, 1, 1))


def test_pattern_rejects_unknown_kind():
    with pytest.raises(PatternError, match=r"^Pattern: kind='allsum', expected one of"):
        _one_chunk(kind="allsum")


@pytest.mark.parametrize(
    ("flow", "message"),
    [
        (Flow(1, 0, 5, (0,), "reduce"), r"\(step 1, 0 -> 5\) names unknown rank 5; ranks are 0..1"),
        (Flow(1, 0, 1, (3,), "reduce"), r"0 -> 1\) names unknown chunk 3; expected ids 0"),
        (Flow(0, 0, 1, (0,), "reduce"), r"has step=0, expected an integer >= 1"),
        (Flow(1, 0, 1, (0,), "add"), r"has op='add', expected one of \('reduce', 'copy'\)"),  # type: ignore[arg-type]
        (Flow(1, 1, 1, (0,), "copy"), r"flow \(step 1, 1 -> 1\) sends to itself"),
        (Flow(1, 0, 1, (), "copy"), r"carries no chunk"),
    ],
)
def test_pattern_rejects_bad_flows_naming_the_value(flow, message):
    with pytest.raises(PatternError, match=message):
        _one_chunk(flows=(flow,))


@pytest.mark.parametrize(
    ("fractions", "message"),
    [
        ((0.5,), r"chunk fractions sum to 0.5, expected 1"),
        ((-1.0, 2.0), r"chunk 0 has fraction=-1.0, expected a positive number"),
        ((float("nan"),), r"chunk 0 has fraction=nan, expected a positive number"),
        ((1.0, 0.0), r"chunk 1 has fraction=0.0, expected a positive number"),
    ],
)
def test_pattern_rejects_bad_fractions(fractions, message):
    chunks = tuple(Chunk(i, f) for i, f in enumerate(fractions))
    with pytest.raises(PatternError, match=message):
        Pattern("allreduce", (0, 1), chunks, ())


def test_pattern_rejects_a_root_outside_the_ranks():
    with pytest.raises(PatternError, match=r"a broadcast needs a root among its ranks, got root=5"):
        _one_chunk(kind="broadcast", root=5)


def test_pattern_rejects_an_allgather_chunk_without_owner():
    with pytest.raises(PatternError, match=r"chunk 0 of a allgather needs an owner.*owner=None"):
        _one_chunk(kind="allgather")


def test_pattern_json_that_does_not_parse():
    with pytest.raises(PatternError, match=r"^Pattern.from_json: not valid JSON"):
        Pattern.from_json("{not json")


def test_pattern_json_of_the_wrong_shape():
    with pytest.raises(PatternError, match=r"expected a JSON object, got list"):
        Pattern.from_json("[1, 2]")
    with pytest.raises(PatternError, match=r"expected format 'react-pattern/1', got None"):
        Pattern.from_json("{}")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["flows"][0].__setitem__(1, 9), r"names unknown rank 9; ranks are 0..2"),
        (lambda d: d["flows"][0].__setitem__(3, [7]), r"names unknown chunk 7; expected ids 0..2"),
        (lambda d: d["chunks"][0].__setitem__(1, "x"), r"malformed pattern data .*'x'"),
        (lambda d: d.pop("kind"), r"malformed pattern data \(KeyError\('kind'\)\)"),
    ],
)
def test_pattern_json_with_bad_content_names_it(edit, message):
    data = allreduce_ring(3).to_dict()
    edit(data)
    with pytest.raises(PatternError, match=message):
        Pattern.from_json(json.dumps(data))


# -- derived views ------------------------------------------------------------------------------
def test_pattern_views_of_the_dual_tree_n4():
    # n=4: T0 0->{2}, 2->{1,3}; T1 (mirror) 3->{1}, 1->{2,0}. Step 1: 1,3 add into 2 (T0) and
    # 0,2 add into 1 (T1): ranks 1 and 2 have in-degree 2 and out-degree 1 at step 1.
    p = allreduce_double_binary_tree(4)
    assert p.chunk_graphs() == ((0,), (1,))
    assert p.degree(1, 1) == (2, 1) and p.degree(1, 2) == (2, 1) and p.degree(1, 0) == (0, 1)
    assert p.degree(9, 0) == (0, 0)
    # Flow 2 -> 0 at step 2 (T0, chunk 0) waits for the two flows into 2 of chunk 0 at step 1.
    waits = p.dependencies()[p.flow_index(Flow(2, 2, 0, (0,), "reduce"))]
    assert {p.flows[i] for i in waits} == {
        Flow(1, 1, 2, (0,), "reduce"), Flow(1, 3, 2, (0,), "reduce"),
    }
    assert [p.flows[i].chunks for i in p.flows_of_chunk_graph(1)] == [(1,)] * 6


def test_pattern_flow_bytes_are_fractions_of_the_message():
    # Ring over 4 ranks: every flow carries 1/4 of a 1 MB message.
    p = allreduce_ring(4)
    assert {p.flow_bytes(f, 1e6) for f in p.flows} == {250_000.0}


def test_pattern_degree_of_an_unknown_rank_names_it():
    with pytest.raises(PatternError, match=r"unknown rank 9; the pattern's ranks are 0..3"):
        allreduce_ring(4).degree(1, 9)


def test_pattern_json_round_trip_keeps_everything():
    p = Pattern("broadcast", (3, 7, 5), (Chunk(0, 0.25), Chunk(1, 0.75)),
                (Flow(1, 3, 7, (1, 0)), Flow(2, 7, 5, (0, 1))), root=3, name="hand")
    again = Pattern.from_json(p.to_json())
    assert again == p and again.root == 3 and again.name == "hand"
    assert again.flows[0].chunks == (0, 1)  # stored sorted


def test_pattern_describe_is_readable():
    # Header with the name, kind, sizes; then one line per flow grouped by step, "+=" for a
    # reduce and ":=" for a copy.
    text = allreduce_ring(3).describe()
    lines = text.splitlines()
    assert lines[0] == (
        "allreduce_ring: allreduce over 3 ranks, 3 chunk(s), 12 flows in 4 steps, 3 chunk graph(s)"
    )
    assert lines[1] == "  step 1:"
    assert lines[2].split() == ["0", "->", "1", "+=", "chunk", "2", "(graph", "2)"]
    assert "  step 3:" in lines and ":=" in lines[-1]
