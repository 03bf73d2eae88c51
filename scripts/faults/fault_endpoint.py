#!/usr/bin/env python3
"""Hostile-endpoint phase of the fault run (a judge endpoint is input we do not control): `lifesearch judge`
with the openai backend against an OpenAI-compatible endpoint on 127.0.0.1 that answers well a few times,
then turns hostile.

    python scripts/faults/fault_endpoint.py --limit 3 --seed 0

Each kind of hostility gets a fresh endpoint (NaN, -Infinity and 1e999 log-probs, a log-prob and a
`usage` echoing the API key, non-string content, a body 100 000 levels deep, a 64 MiB body over a
1 MiB cap, a body dripping 4 bytes a second, a 307 redirect) and one `lifesearch judge` run into one
directory; then SIGTERM during a call the server never answers; then a well-behaved endpoint
finishes the run. Checks: every hostile run ends in one stderr line with exit 1 (2 for the
redirect), no traceback, the key (or its last 22 characters) nowhere in what was printed or
written, no run over `timeout_s` + 5 s, the SIGTERM run out within 5 s, and the final records 0
lost, 0 duplicated, 0 torn. Exit 0 when everything holds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fault_run import REPORTS, TASKS, check, expected_keys  # noqa: E402

from tests.helpers.endpoint import CHOICE_ANSWER, Endpoint, Reply, json_reply  # noqa: E402

KEY = "sk-fault-ENDPOINT-0123456789abcdefghijkl"
TIMEOUT_S = 2
CONFIG = f"""judge:
  id: fault
  mode: choice
  groups_per_call: 1
  model: {{backend: openai, model: judge-x, base_url: "URL", api_key_env: LS_FAULT_KEY, max_retries: 1,
           timeout_s: {TIMEOUT_S}, max_response_mib: 1, max_concurrency: 4}}
"""
TOP = '"logprobs": {"content": [{"top_logprobs": [{"token": " true", "logprob": LP}, {"token": " false", "logprob": -2}]}]}'


def with_logprob(value: str) -> Reply:
    return Reply(body=('{"choices": [{"message": {"content": ""}, ' + TOP.replace("LP", value) + "}]}").encode())


def huge() -> list[bytes]:
    return [b'{"choices": [{"message": {"content": "'] + [b"x" * (1 << 20)] * 64 + [b'"}}]}']


KINDS: dict[str, tuple[Reply, int]] = {  # the hostile answer, and the exit code it must give
    "NaN log-prob": (with_logprob("NaN"), 1),
    "-Infinity log-prob": (with_logprob("-Infinity"), 1),
    "1e999 log-prob": (with_logprob("1e999"), 1),
    "log-prob echoing the key": (with_logprob(f'"{KEY}"'), 1),
    "usage echoing the key": (Reply(body=('{"choices": [{"message": {"content": " true"}, ' + TOP.replace("LP", "-0.1")
                                          + '}], "usage": {"prompt_tokens": "' + KEY + '"}}').encode()), 1),
    "content not text": (Reply(body=('{"choices": [{"message": {"content": ["' + KEY + '"]}, '
                                     + TOP.replace("LP", "-0.1") + "}]}").encode()), 1),
    "100 000 levels deep": (Reply(body=b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"), 1),
    "64 MiB body (cap 1 MiB)": (Reply(body=huge, length=False), 1),
    "dripping 4 bytes/s": (Reply(body=b" " * 200 + json.dumps(CHOICE_ANSWER).encode(), drip_s=0.25), 1),
    "307 redirect": (Reply(status=307, headers={"Location": "http://127.0.0.1:9/v1/chat/completions"}), 2),
}


def judge(out: Path, url: str, limit: int) -> subprocess.Popen:
    cfg = out.parent / "endpoint-judge.yaml"
    cfg.write_text(CONFIG.replace("URL", url))
    return subprocess.Popen([sys.executable, "-m", "lifesearch_local", "judge", "--tasks", str(TASKS), "--reports",
                             str(REPORTS), "--config", str(cfg), "--out", str(out), "--quiet", "--limit", str(limit)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "LS_FAULT_KEY": KEY})


def leaked(*texts: str) -> bool:
    return any(KEY in t or KEY[-22:] in t for t in texts)


def written(out: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in out.glob("*") if p.is_file() and p.suffix in (".jsonl", ".json"))


def hostile(out: Path, limit: int, rng: random.Random) -> bool:
    ok = True
    for name, (reply, want) in KINDS.items():
        good = rng.randrange(0, 6)  # answered well first: some records are written before it turns
        with Endpoint(lambda n, body, good=good, reply=reply: json_reply(CHOICE_ANSWER) if n <= good else reply) as ep:
            proc = judge(out, ep.url, limit)
            stdout, stderr = proc.communicate(timeout=300)
            ended = time.monotonic()
        # from the first hostile answer's request to the end of the process (start-up not counted)
        after = ended - ep.arrivals[good] if len(ep.arrivals) > good else float("nan")
        lines = stderr.strip().splitlines()
        fine = (proc.returncode == want and len(lines) == 1 and "Traceback" not in stderr
                and not leaked(stdout, stderr, written(out)) and after < TIMEOUT_S + 5)
        ok &= fine
        print(f"  {name}: {good} good answers, then exit {proc.returncode}, {after:.1f} s after the hostile "
              f"request; {'ok' if fine else 'FAILED'}: {(lines or ['(no message)'])[-1][:160]}")
    return ok


def sigterm(out: Path, limit: int) -> bool:
    with Endpoint(lambda n, body: json_reply(CHOICE_ANSWER, stall_s=0 if n <= 3 else 300)) as ep:
        proc = judge(out, ep.url, limit)
        deadline = time.monotonic() + 120
        while ep.seen < 4 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            stdout, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        waited = time.monotonic() - t0
    fine = waited < 5 and proc.returncode == 0 and "stopped by signal" in stdout and "Traceback" not in stderr
    print(f"  SIGTERM during a call the server never answers: exit {proc.returncode} {waited:.2f} s after the "
          f"signal; {'ok' if fine else 'FAILED'}")
    return fine


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--limit", type=int, default=3, help="first N sample tasks")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dir", help="work directory (default: a new temp directory)")
    args = p.parse_args()
    out = Path(args.dir or tempfile.mkdtemp(prefix="fault_endpoint-")) / "endpoint"
    out.parent.mkdir(parents=True, exist_ok=True)
    want = expected_keys(args.limit)
    print(f"hostile endpoint: `lifesearch judge` (openai backend, timeout_s {TIMEOUT_S}, max_response_mib 1) into "
          f"{out}, {len(want)} judgments expected")
    ok = hostile(out, args.limit, random.Random(args.seed))
    ok &= sigterm(out, args.limit)
    with Endpoint(lambda n, body: json_reply(CHOICE_ANSWER)) as ep:
        proc = judge(out, ep.url, args.limit)
        _, stderr = proc.communicate(timeout=600)
    got = check(out, want)
    print(f"  a well-behaved endpoint then: rc {proc.returncode}; {got['records']} records, lost {got['lost']}, "
          f"duplicated {got['duplicated']}, unexpected {got['extra']}, torn {got['torn']}")
    ok &= proc.returncode == 0 and got == {"records": len(want), "lost": 0, "extra": 0, "duplicated": 0, "torn": 0}
    ok &= not leaked(written(out))
    print(f"hostile endpoint: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
