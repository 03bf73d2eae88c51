"""Per-run step logs: `trajectories/<task>__<agent>__r<run>-<hash>.jsonl`, one JSON line per step, fsynced."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from lifesearch_local.agent.observation import Observation
from lifesearch_local.agent.toolcalls import CallError, ToolCall
from lifesearch_local.rundir.files import empty_file
from lifesearch_local.rundir.jsonl import append_lines

_UNSAFE = re.compile(r"[^\w.-]+")


def trajectory_name(task_id: str, agent: str, run: int) -> str:
    """Path of a run's log relative to the run directory. The readable part folds unsafe
    characters (`a/b`, `a b` and `a_b` all read `a_b`); the hash of the exact ids keeps names
    apart. Reports record the path, which readers follow (they never rebuild the name)."""
    digest = hashlib.sha256(f"{task_id}\0{agent}".encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"trajectories/{_readable(task_id)}__{_readable(agent)}__r{run}-{digest}.jsonl"


# A file name holds 255 bytes (not characters: a 100-character CJK id is 300 bytes in UTF-8). Each
# readable part is cut to this many bytes; the hash of the exact ids keeps cut names apart.
READABLE_BYTES = 80


def _readable(text: str) -> str:
    folded = _UNSAFE.sub("_", text)
    data = folded.encode("utf-8", "surrogatepass")
    if len(data) <= READABLE_BYTES:
        return folded
    return data[:READABLE_BYTES].decode("utf-8", "ignore") + "~"  # never half a character


class TrajectoryLog:
    """The step log of one (task, agent, run); `reset` starts it over (an unfinished run restarts from scratch)."""

    def __init__(self, run_dir: str | Path, task_id: str, agent: str, run: int):
        self.rel = trajectory_name(task_id, agent, run)
        self.path = Path(run_dir) / self.rel

    def reset(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        empty_file(self.path)

    def write(self, record: dict[str, Any]) -> None:
        append_lines(self.path, [record])


def call_record(call: ToolCall, obs: Observation, start_s: float, end_s: float) -> dict[str, Any]:
    """One executed tool call. `tool` + `ok`/`failure` is what the HTML report counts for web_fetch."""
    return {"id": call.id, "tool": call.name, "arguments": call.arguments, "ok": obs.ok, "failure": obs.failure,
            "summary": obs.summary, "data": obs.data, "start_s": round(start_s, 4), "end_s": round(end_s, 4),
            "seconds": round(end_s - start_s, 4)}


def error_record(err: CallError) -> dict[str, Any]:
    # `called`, not `name`/`tool`: a call that never ran must not count as a fetch in the report.
    return {"message": err.message, "raw": err.raw, "called": err.name}
