"""Which node did a pool's work: each replica's host, and per node its replicas, records and failures (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

UNKNOWN = "unknown"


def node_of(info: Mapping[str, Any]) -> dict[str, str]:
    """The node a replica runs on, from what it reported when ready (`hostname`, `ip`); a replica
    that never reported (it died loading its model) is on an `unknown` node."""
    return {"hostname": str(info.get("hostname") or UNKNOWN), "ip": str(info.get("ip") or UNKNOWN)}


def where(node: Mapping[str, str]) -> str:
    """`host (ip)`, as logs name a node."""
    return f"{node.get('hostname') or UNKNOWN} ({node.get('ip') or UNKNOWN})"


def count_records(results: Sequence[Any]) -> int:
    """Records in one call's results: a scored group counts its decisions (one per choice list),
    a generation counts one."""
    return sum(len(r) if isinstance(r, list) else 1 for r in results)


def tally(replicas: Iterable[tuple[Mapping[str, str], int, bool]]) -> list[dict[str, Any]]:
    """Per node, from (node, records, failed) of each replica: `{hostname, ip, replicas, records,
    failures}`, ordered by hostname then ip."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for node, records, failed in replicas:
        if records < 0:
            raise ValueError(f"records must be >= 0, got {records}")
        key = (node.get("hostname") or UNKNOWN, node.get("ip") or UNKNOWN)
        row = out.setdefault(key, {"hostname": key[0], "ip": key[1], "replicas": 0, "records": 0, "failures": 0})
        row["replicas"] += 1
        row["records"] += records
        row["failures"] += int(failed)
    return [out[k] for k in sorted(out)]

