"""The report page's node tables: per stage each node's work, each lost replica with its node, text escaped."""

from __future__ import annotations

from lifesearch_local.output.report.nodes import section_nodes


def test_each_stage_lists_its_nodes_and_lost_replicas():
    stages = {
        "agent/a": {"wall_s": 3.0, "nodes": [{"hostname": "head", "ip": "10.0.0.1", "replicas": 1, "records": 1200,
                                              "failures": 0}]},
        "judge/j": {"nodes": [{"hostname": "head", "ip": "10.0.0.1", "replicas": 1, "records": 30, "failures": 0},
                              {"hostname": "w<1>", "ip": "10.0.0.2", "replicas": 1, "records": 12, "failures": 1}],
                    "replicas_lost": [{"replica": "judge-x-1", "hostname": "w<1>", "ip": "10.0.0.2",
                                       "error": "ActorDiedError: <node died>"}]},
        "curate": {"wall_s": 1.0},
    }
    html = section_nodes(stages)
    rows = html.split('id="nodes"')[1].split("</table>")[0].split("<tr>")[2:]
    assert len(rows) == 3
    assert ">agent/a<" in rows[0] and ">1,200<" in rows[0]
    assert ">w&lt;1&gt;<" in rows[2] and ">10.0.0.2<" in rows[2] and rows[2].count(">1<") == 2
    lost = html.split('id="replicas-lost"')[1]
    assert "judge-x-1" in lost and "w&lt;1&gt;" in lost and "&lt;node died&gt;" in lost and "<node died>" not in html


def test_nothing_when_no_stage_ran_on_ray():
    assert section_nodes({"judge/j": {"decisions": 4}, "agent/a": {"nodes": []}}) == ""
    assert 'id="replicas-lost"' not in section_nodes(
        {"judge/j": {"nodes": [{"hostname": "h", "ip": "1.2.3.4", "replicas": 2, "records": 5, "failures": 0}]}})
