"""Run directories for the report tests, made from the agree fixtures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.helpers.inputs import AGREE

MANIFEST = {
    "package_version": "0.1.0",
    "git_sha": "abc123",
    "python": "3.11.7",
    "created": "2026-01-01T00:00:00+00:00",
    "updated": "2026-01-01T00:10:00+00:00",
    "stages": {
        "judge": {"decisions": 180, "decisions_per_s": 51.2, "gpu_seconds": 3.5, "tokens": {"prompt": 123456}},
        "web": {"pages_fetched": 10, "pages_cached": 7},
    },
}


def make_run_dir(root: Path, *, labels: bool = True, extras: bool = True) -> Path:
    """A run directory from the agree fixtures, with manifest, config and step logs when `extras`."""
    root.mkdir(parents=True, exist_ok=True)
    for name in ("tasks", "reports", "judgments") + (("labels",) if labels else ()):
        shutil.copy(AGREE / f"{name}.jsonl", root / f"{name}.jsonl")
    if not extras:
        return root
    (root / "manifest.json").write_text(json.dumps(MANIFEST))
    (root / "config.yaml").write_text("judge:\n  model: <b>tiny</b>\n")
    steps = root / "trajectories" / "alpha"
    steps.mkdir(parents=True)
    (steps / "t1_0.jsonl").write_text(
        json.dumps({"step": 1, "tool_calls": [
            {"tool": "web_fetch", "arguments": {"url": "http://a"}, "result": {"failure": "timeout"}},
            {"tool": "web_fetch", "arguments": {"url": "http://b"}, "result": {"ok": True, "status": 200}},
            {"tool": "web_search", "result": {"error": "ignored: not a fetch"}},
        ]}) + "\n"  # fmt: skip
    )
    (root / "trajectories" / "beta").mkdir()
    (root / "trajectories" / "beta" / "t2_1.jsonl").write_text(
        '{"torn line\n' + json.dumps({"name": "web_fetch", "observation": {"ok": False, "kind": "paywall"}}) + "\n"
    )
    return root
