"""`lifesearch cluster wait` (the batch scripts' gate): fails at once when the head is gone, stops at once on SIGTERM."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_wait(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lifesearch_local", "cluster", "wait", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_cluster_wait_fails_at_once_when_the_heads_process_is_gone(tmp_path):
    with open(tmp_path / "head.log", "w") as log:
        head = subprocess.Popen([sys.executable, "-c", "print('ValueError: the head could not start')"], stdout=log)
        head.wait()
    t0 = time.monotonic()
    p = cluster_wait("--nodes", "1", "--timeout", "120", "--address", f"127.0.0.1:{free_port()}",
                     "--head-pid", str(head.pid), "--head-log", str(tmp_path / "head.log"), "--head-name", "the Ray head on n1")
    try:
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=30)
    assert p.returncode == 2 and time.monotonic() - t0 < 60  # at once, not after its --timeout of 120 s
    assert err.strip().splitlines() == [
        f"error: the Ray head on n1 (pid {head.pid}) exited before the cluster came up: "
        f"ValueError: the head could not start; its log: {tmp_path / 'head.log'}"]


def test_cluster_wait_stops_at_once_on_sigterm():
    # nothing listens at the address: Ray's own connection attempts would block for minutes
    p = cluster_wait("--nodes", "1", "--timeout", "300", "--address", f"127.0.0.1:{free_port()}")
    time.sleep(4)  # past the imports, into the wait
    assert p.poll() is None
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=10)
    finally:
        if p.poll() is None:  # it ignored SIGTERM: don't leave it behind
            p.kill()
            p.wait(timeout=30)
    assert time.monotonic() - t0 < 3 and p.returncode == 143


def test_a_node_missing_when_the_time_is_up_is_named_with_its_address_and_log():
    from lifesearch_local.cli.cluster import missing

    expected = [("10.0.0.1", "the Ray head on n1"), ("10.0.0.2", "the Ray worker on n2"), ("10.0.0.3", "the Ray worker on n3")]
    logs = {"the Ray worker on n2": "/logs/ray-7-n2.log", "the Ray worker on n3": None}
    assert missing(["10.0.0.1", "10.0.0.3"], 3, 15, expected, logs) == (
        "the Ray worker on n2 (10.0.0.2) did not join: 2 of 3 Ray nodes joined within 15 s; its log: /logs/ray-7-n2.log")
    assert missing(["10.0.0.1"], 3, 15, expected, logs) == (
        "the Ray worker on n2 (10.0.0.2), the Ray worker on n3 (10.0.0.3) did not join: 1 of 3 Ray nodes joined "
        "within 15 s; its log: /logs/ray-7-n2.log")
    # the nodes expected are not known (or all joined and another left): the count alone
    assert missing(["10.0.0.1"], 2, 15, [], {}) == "only 1 of 2 Ray nodes joined within 15 s"
