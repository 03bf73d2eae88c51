"""serving._util.logs: log records as the bare stderr lines the library's prints used to write."""

from __future__ import annotations

import logging

from serving._util.logs import StderrLines, log_to_stderr


def test_our_notices_and_every_librarys_warnings_are_bare_lines_on_stderr(capsys):
    log_to_stderr()
    logging.getLogger("lifesearch_local.rundir.manifest").warning("warning: --force-config: %s", "judge/j")
    logging.getLogger("serving.engines.vllm_cpu").info("vllm on CPU: %d cores", 2)
    logging.getLogger("serving.ray.pool").debug("kill replica 0")
    logging.getLogger("somelib").info("chatter")
    logging.getLogger("somelib").warning("somelib is deprecated")
    assert capsys.readouterr() == ("", "warning: --force-config: judge/j\nvllm on CPU: 2 cores\nsomelib is deprecated\n")


def test_set_up_again_it_replaces_itself_and_debug_names_the_logger(capsys):
    log_to_stderr()
    log_to_stderr(logging.DEBUG)
    assert sum(isinstance(h, StderrLines) for h in logging.getLogger().handlers) == 1
    logging.getLogger("serving.ray.pool").debug("kill replica 0")
    logging.getLogger("lifesearch_local.judge.stage").warning("once")
    assert capsys.readouterr().err == "serving.ray.pool: kill replica 0\nonce\n"
    logging.getLogger("somelib").debug("still not shown")
    assert capsys.readouterr().err == ""


def test_it_writes_to_the_stderr_of_the_moment(capsys, monkeypatch):
    import io
    import sys

    log_to_stderr()
    swapped = io.StringIO()
    monkeypatch.setattr(sys, "stderr", swapped)  # after the handler was made
    logging.getLogger("lifesearch_local.x").warning("here")
    assert swapped.getvalue() == "here\n"
