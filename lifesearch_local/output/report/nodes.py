"""The report page's "where the work ran": per stage, the nodes that did it and the replicas lost with their node."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lifesearch_local.output.report.markup import e, table


def section_nodes(stages: Mapping[str, Mapping[str, Any]]) -> str:
    """Two tables from the manifest's stages: each node's replicas, records and failures per stage,
    and each replica lost (its node and why); empty when no stage ran on Ray."""
    rows = [[e(stage), e(n.get("hostname")), e(n.get("ip")), f"{int(n.get('replicas') or 0):,}",
             f"{int(n.get('records') or 0):,}", f"{int(n.get('failures') or 0):,}"]
            for stage, vals in stages.items() for n in vals.get("nodes") or []]
    if not rows:
        return ""
    out = ["<h3>Nodes (where each stage's work ran)</h3>",
           table(["Stage", "Host", "Address", "Replicas", "Records", "Failures"], rows, tid="nodes", num_from=3)]
    lost = [[e(stage), e(r.get("replica")), e(r.get("hostname")), e(r.get("ip")), e(r.get("error"))]
            for stage, vals in stages.items() for r in vals.get("replicas_lost") or []]
    if lost:
        out.append(table(["Stage", "Replica lost", "Host", "Address", "Why"], lost, tid="replicas-lost", num_from=5))
    return "".join(out)
