"""Which node did a pool's work, without a cluster: node names, record counts, the per-node tally."""

from __future__ import annotations

import pytest

from serving.protocol import ChoiceResult, Generation
from serving.ray.nodes import count_records, node_of, tally, where

A = {"hostname": "head", "ip": "10.0.0.1"}
B = {"hostname": "worker", "ip": "10.0.0.2"}


def test_a_replica_is_on_the_node_it_reported_and_unknown_when_it_never_did():
    assert node_of({"pid": 7, "hostname": "worker", "ip": "10.0.0.2"}) == B
    assert node_of({}) == {"hostname": "unknown", "ip": "unknown"}
    assert node_of({"hostname": "worker", "ip": None}) == {"hostname": "worker", "ip": "unknown"}
    assert where(B) == "worker (10.0.0.2)" and where({}) == "unknown (unknown)"


def test_records_count_decisions_of_scored_groups_and_one_per_generation():
    r = ChoiceResult(probs=[0.5, 0.5], logprobs=[-0.7, -0.7])
    assert count_records([[r, r, r], [r]]) == 4
    assert count_records([Generation(text="a"), Generation(text="b")]) == 2
    assert count_records([]) == 0


def test_tally_adds_up_replicas_records_and_failures_per_node_in_a_stable_order():
    got = tally([(B, 5, True), (A, 7, False), (B, 3, False), (A, 0, False)])
    assert got == [{**A, "replicas": 2, "records": 7, "failures": 0},
                   {**B, "replicas": 2, "records": 8, "failures": 1}]
    # two nodes of one host (one machine, several Ray nodes) stay apart by address
    twin = {"hostname": "head", "ip": "10.0.0.9"}
    assert [n["ip"] for n in tally([(twin, 1, False), (A, 1, False)])] == ["10.0.0.1", "10.0.0.9"]
    assert tally([]) == []


def test_a_negative_record_count_is_refused():
    with pytest.raises(ValueError, match="records must be >= 0"):
        tally([(A, -1, False)])
