"""Trajectory file names: injective, stable, and within the file system's 255 bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from lifesearch_local.agent.trajectory import trajectory_name


@pytest.mark.parametrize("task_id,agent", [("长" * 100, "a"), ("t", "代理" * 60), ("é" * 200, "x" * 300)])
def test_a_long_task_id_gets_a_trajectory_file(tmp_path, task_id, agent):
    from lifesearch_local.agent.trajectory import TrajectoryLog, trajectory_name

    log = TrajectoryLog(tmp_path, task_id, agent, 0)
    log.reset()
    log.write({"step": 1})
    assert log.path.read_text().strip() == '{"step":1}'
    assert len(Path(trajectory_name(task_id, agent, 0)).name.encode()) <= 255
    assert trajectory_name(task_id, agent, 0) != trajectory_name(task_id + "长", agent, 0)  # cut names stay apart


def test_trajectory_names_are_injective():
    names = {trajectory_name(t, a, 0) for t, a in [("a/b", "x"), ("a_b", "x"), ("a b", "x"), ("a", "b/x"), ("a", "b_x")]}
    assert len(names) == 5
    assert all(n.startswith("trajectories/") and "/" not in n.removeprefix("trajectories/") for n in names)
    assert trajectory_name("a/b", "x", 0) == trajectory_name("a/b", "x", 0)  # stable: a resume finds its log
