"""`lifesearch` itself: mistyped commands, Ctrl-C, a closed pipe, and an endpoint's errors as one line and an exit code."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lifesearch_local.cli import main
from lifesearch_local.records import Judgment
from lifesearch_local.rundir.jsonl import read_records
from serving._util.logs import StderrLines
from tests.helpers.inputs import ROOT, SAMPLE, J, judge_inputs, rubric, task, write_jsonl

KEY = "sk-judge-KEY-0123456789abcdef"
ANSWER = {"choices": [{"index": 0, "message": {"role": "assistant", "content": " true"}, "finish_reason": "length",
                       "logprobs": {"content": [{"token": " true", "logprob": -0.1, "top_logprobs": [
                           {"token": " true", "logprob": -0.1}, {"token": " false", "logprob": -2.4}]}]}}]}


class Endpoint:
    """An OpenAI-compatible /v1/chat/completions on loopback: answers `ok_requests` requests, then `status`."""

    def __init__(self, ok_requests: int, status: int, answer: dict = ANSWER):
        self.ok_requests, self.status, self.seen = ok_requests, status, 0
        lock, outer = threading.Lock(), self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    outer.seen += 1
                    ok = outer.seen <= outer.ok_requests
                body = json.dumps(answer if ok else {"error": f"invalid api key {self.headers['authorization']}"}).encode()
                self.send_response(200 if ok else outer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.setenv("LS_JUDGE_KEY", KEY)
    tasks = [task(f"t{i}", [rubric("R1", 0.5), rubric("R2", 0.5)]) for i in range(3)]
    reports = [{"task_id": f"t{i}", "agent": "a", "run": 0, "text": f"Report {i}."} for i in range(3)]
    t, r = write_jsonl(tmp_path / "tasks.jsonl", tasks), write_jsonl(tmp_path / "reports.jsonl", reports)

    def judge(endpoint: Endpoint, mode: str = "choice") -> int:
        cfg = tmp_path / "judge.yaml"
        cfg.write_text(f"judge:\n  id: remote\n  mode: {mode}\n  groups_per_call: 1\n  model:\n    backend: openai\n    model: judge-x\n"
                       f"    base_url: {endpoint.url}\n    api_key_env: LS_JUDGE_KEY\n    max_retries: 2\n"
                       "    retry_base_delay_s: 0.01\n    max_concurrency: 1\n")
        return main(["judge", "--tasks", str(t), "--reports", str(r), "--config", str(cfg), "--out", str(tmp_path / "out"), "--quiet"])

    return judge, tmp_path / "out" / "judgments.jsonl"


@pytest.mark.parametrize("status", [401, 403, 404])
def test_a_configuration_error_is_one_line_exit_2_and_the_run_resumes(setup, capsys, status):
    judge, path = setup
    bad = Endpoint(ok_requests=2, status=status)  # the first report is judged, then the key "expires"
    try:
        assert judge(bad) == 2
    finally:
        bad.close()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"{bad.url}/chat/completions" in err and f"HTTP {status}" in err and KEY not in err
    assert len(read_records(path, Judgment)) == 2  # what was finished is kept
    good = Endpoint(ok_requests=100, status=200)
    try:
        assert judge(good) == 0
    finally:
        good.close()
    js = read_records(path, Judgment)
    assert good.seen == 4 and len(js) == 6 and len({j.key for j in js}) == 6  # only the rest, no duplicate


def test_a_server_error_after_retries_is_one_line_exit_1(setup, capsys):
    judge, path = setup
    down = Endpoint(ok_requests=0, status=503)
    try:
        assert judge(down) == 1
    finally:
        down.close()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "HTTP 503" in err and "failed after 2 attempts" in err and down.url in err, err
    assert 2 <= down.seen <= 4  # bounded: 2 attempts for each of the failing call's 2 requests


def test_an_answer_echoing_the_key_is_not_stored_in_judgments(setup):
    import base64

    judge, path = setup
    verdict = {"satisfied": True, "reason": f"I was called with Bearer {KEY} ({base64.b64encode(KEY.encode()).decode()}, {KEY.upper()})"}
    answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": json.dumps(verdict)}, "finish_reason": "stop"}]}
    echo = Endpoint(ok_requests=100, status=200, answer=answer)
    try:
        assert judge(echo, mode="generate") == 0
    finally:
        echo.close()
    text = path.read_text()
    js = read_records(path, Judgment)
    assert len(js) == 6 and all(j.satisfied for j in js) and all("***" in j.reason for j in js)
    for form in (KEY, KEY.upper(), base64.b64encode(KEY.encode()).decode()):
        assert form not in text


def test_score_json_into_a_closed_pipe_exits_quietly(tmp_path):
    tasks, _ = judge_inputs(tmp_path, 1)
    judgments = write_jsonl(tmp_path / "judgments.jsonl", [{**J, "rubric_id": f"R{k}"} for k in range(2)])
    # the reader goes away before the command writes a byte (`| head` that has what it wanted)
    proc = subprocess.Popen([sys.executable, "-m", "lifesearch_local", "score", "--tasks", str(tasks), "--judgments",
                             str(judgments), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert proc.returncode in (0, 141), proc.returncode


def test_a_mistyped_command_gets_did_you_mean(capsys):
    assert main(["jduge", "--tasks", "x"]) == 2
    assert "unknown command 'jduge'; did you mean 'judge' or 'rejudge'?" in capsys.readouterr().err


def test_ctrl_c_says_a_rerun_resumes(monkeypatch, capsys):
    import lifesearch_local.tasks

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(lifesearch_local.tasks, "load_tasks", interrupted)
    assert main(["validate", str(SAMPLE / "tasks.jsonl")]) == 130
    assert "rerun the same command to resume" in capsys.readouterr().err


# -- main: the library's notices reach stderr in their own words; --debug adds debug records --
def without_log_setup() -> None:
    """Undo the suite's own setup (conftest), so that only what main does is seen."""
    root = logging.getLogger()
    for h in [h for h in root.handlers if isinstance(h, StderrLines)]:
        root.removeHandler(h)
    for name in ("lifesearch_local", "serving"):
        logging.getLogger(name).setLevel(logging.NOTSET)


def test_a_forced_resume_warns_on_stderr_in_the_words_it_always_had(tmp_path, capsys):
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [task(f"t{i}", [rubric("R1", 0.5), rubric("R2", 0.5)]) for i in range(2)])
    reports = write_jsonl(tmp_path / "reports.jsonl", [{"task_id": f"t{i}", "agent": "a", "run": 0, "text": f"Report {i}."}
                                                        for i in range(2)])
    base = ["judge", "--tasks", str(tasks), "--reports", str(reports), "--out", str(tmp_path / "run"), "--id", "j",
            "--quiet"]
    without_log_setup()
    assert main([*base, "--model", "tiny-llama", "--limit", "1"]) == 0
    assert main([*base, "--model", "tiny-qwen3"]) == 2
    assert "pass --force-config" in capsys.readouterr().err
    without_log_setup()
    assert main([*base, "--model", "tiny-qwen3", "--force-config"]) == 0
    lines = capsys.readouterr().err.splitlines()
    run = tmp_path / "run"
    assert lines[0].startswith(f"warning: --force-config: {run}: judge/j has records made with other settings (")
    assert lines[1].startswith(f"warning: --force-config: judge/j in {run} continues with another config (hash ")
    assert lines[1].endswith('model.model "tiny-llama" -> "tiny-qwen3"); its records now mix both') and len(lines) == 3
    # another model is another judge: its fingerprint differs too, and the force says so
    assert lines[2].startswith(f"warning: --force-config: {run}: judge/j has judgments made by another judge (weights_hash: ")


def test_debug_shows_the_librarys_debug_records_named_by_logger(tmp_path, capsys, monkeypatch):
    import lifesearch_local.cli.validate as validate

    def run(args):
        logging.getLogger("lifesearch_local.tasks").debug("read %d lines", 3)
        logging.getLogger("lifesearch_local.tasks").info("a notice")
        return 0

    monkeypatch.setattr(validate, "run", run)  # a command whose library logs
    without_log_setup()
    assert main(["validate", "x.jsonl"]) == 0
    assert capsys.readouterr().err == "a notice\n"
    assert main(["--debug", "validate", "x.jsonl"]) == 0
    assert capsys.readouterr().err == "lifesearch_local.tasks: read 3 lines\na notice\n"
