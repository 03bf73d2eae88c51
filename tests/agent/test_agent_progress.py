"""A resumed agent stage's bar counts the runs an earlier run finished ("N already done")."""

from __future__ import annotations

import io

from doubles import ScriptedBackend

from lifesearch_local.agent.stage import agent_stage
from lifesearch_local.rundir.directory import RunDir

from .conftest import agent_config, web_config


class Terminal(io.StringIO):
    def isatty(self) -> bool:  # stderr as a terminal: the bar is drawn into this buffer
        return True


def test_a_resumed_agent_bar_says_how_many_runs_were_done(tmp_path, sample_tasks, monkeypatch):
    tasks, rd = list(sample_tasks.values())[:4], RunDir(tmp_path)
    cfg = agent_config(tools={"enabled": []})
    answer = ScriptedBackend(lambda req: "The answer.")
    agent_stage(rd, tasks[:2], cfg, answer, web_config(), show=False)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr("sys.stderr", err := Terminal())
    stats = agent_stage(rd, tasks, cfg, answer, web_config(), show=True)
    assert stats["finished"] == 2 and "agent scripted (2 already done)" in err.getvalue() and "4/4" in err.getvalue()
