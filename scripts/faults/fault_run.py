#!/usr/bin/env python3
"""Scripted fault run: `kill -9` of `lifesearch judge` at random points, then two
concurrent runs on one directory, then a resume with another model after `repair` set a damaged
manifest aside (and after the manifest was deleted), then a full disk (a small tmpfs, mounted when
run as root: `judge` and `report` run out of space, then resume), then a tampered web cache
(scripts/faults/fault_cache.py: altered, deleted, FIFO and /dev/zero-symlink blobs, forged rows), then a
hostile model endpoint (scripts/faults/fault_endpoint.py: NaN log-probs, a key echoed back, deep and huge
bodies, a drip, a redirect, SIGTERM mid-call); checks that no judgment is lost or duplicated and
that every tamper and forgery is detected.

    python scripts/faults/fault_run.py                    # 10 kills, tiny-llama, the 10 sample tasks
    python scripts/faults/fault_run.py --kills 10 --limit 10 --seed 1 --also "lifesearch cache verify DIR"
    python scripts/faults/fault_run.py --only disk-full    # one phase (kills, concurrent, repair, disk-full, cache, endpoint)

Each attempt is killed at a random time (uniform in [0, --horizon] s: during model load, inside
model calls, between appends), and reports the work it threw away: seconds since its last saved
judgment. The judge runs with its default `groups_per_call`. After the kills
the same command runs to the end. Expected records are computed from the inputs (every rubric
with weight > 0 of every report of the selected tasks). `--also CMD` runs further checks (e.g.
a tampered web cache) and counts their exit status. Exit 0 when everything holds.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from lifesearch_local.records import Report  # noqa: E402
from lifesearch_local.rundir.jsonl import read_records  # noqa: E402
from lifesearch_local.tasks import load_tasks  # noqa: E402

TASKS, REPORTS = ROOT / "data/sample/tasks.jsonl", ROOT / "data/sample/reports.jsonl"


def judge_cmd(out: Path, model: str, limit: int) -> list[str]:
    return [sys.executable, "-m", "lifesearch_local", "judge", "--tasks", str(TASKS), "--reports", str(REPORTS),
            "--model", model, "--id", "fault", "--out", str(out), "--quiet", "--limit", str(limit)]


def other_model(model: str) -> str:
    return "tiny-qwen3" if model != "tiny-qwen3" else "tiny-llama"


def expected_keys(limit: int) -> set[tuple]:
    tasks = load_tasks(TASKS)[:limit]
    by_id = {t.id: t for t in tasks}
    return {("fault", 0, r.task_id, r.agent, r.run, rub.id) for r in read_records(REPORTS, Report)
            if r.task_id in by_id for rub in by_id[r.task_id].rubrics if rub.weight > 0}


def on_disk(out: Path) -> tuple[list[tuple], int]:
    """Keys of the whole judgment lines in the file, and whether a torn last line is there."""
    path = out / "judgments.jsonl"
    if not path.exists():
        return [], 0
    data = path.read_bytes()
    lines = data.split(b"\n")
    torn = int(bool(lines[-1]))
    keys = []
    for raw in lines[:-1]:
        try:
            j = json.loads(raw)
            keys.append((j["judge"], j["judge_run"], j["task_id"], j["agent"], j["run"], j["rubric_id"]))
        except (ValueError, KeyError):  # a damaged whole line: counts as torn
            torn += 1
    return keys, torn


def count_lines(out: Path) -> int:
    path = out / "judgments.jsonl"
    return path.read_bytes().count(b"\n") if path.exists() else 0


def kill_once(out: Path, model: str, limit: int, delay: float) -> dict:
    """Start the judge and kill -9 it after `delay` seconds (unless it finished). Returns what
    happened, with the seconds of judging the kill threw away (since the attempt's last saved
    judgment; None when it saved none: killed while loading the model or judging its first report)."""
    before = count_lines(out)
    start = time.time()
    proc = subprocess.Popen(judge_cmd(out, model, limit), cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    first_save = None
    while proc.poll() is None and time.time() - start < delay:
        if first_save is None and count_lines(out) > before:
            first_save = time.time() - start
        time.sleep(0.02)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = time.time()
    finished = proc.returncode == 0
    after = count_lines(out)
    path = out / "judgments.jsonl"
    last_save = path.stat().st_mtime if after > before else start
    return {"at_s": round(killed_at - start, 2), "before": before, "after": after, "finished": finished,
            "rc": proc.returncode, "first_save_s": first_save,
            "lost_s": None if finished or after == before else round(killed_at - last_save, 2)}


def check(out: Path, want: set[tuple]) -> dict:
    keys, torn = on_disk(out)
    dup = sum(n - 1 for n in Counter(keys).values() if n > 1)
    return {"records": len(keys), "lost": len(want - set(keys)), "extra": len(set(keys) - want),
            "duplicated": dup, "torn": torn}


def fault_kills(args: argparse.Namespace, want: set[tuple], base: Path) -> bool:
    out = base / "killed"
    rng = random.Random(args.seed)
    print(f"fault run: {args.kills} x kill -9 of `lifesearch judge` at random times "
          f"({args.model}, default groups_per_call, first {args.limit} sample tasks, {len(want)} judgments "
          f"expected) -> {out}")
    lost, early = [], 0
    if args.horizon is None:  # kill inside the run, whatever this machine's speed: time one whole run first
        t0 = time.monotonic()
        subprocess.run(judge_cmd(base / "calibration", args.model, args.limit), cwd=ROOT, capture_output=True)
        args.horizon = round(time.monotonic() - t0, 1)
        print(f"  an uninterrupted run took {args.horizon} s: kill times are uniform in [0, {args.horizon}] s")
    horizon, load_s, per_line = args.horizon, None, None
    for i in range(1, args.kills + 1):
        if load_s is not None and per_line is not None:
            # aim inside what is left, learnt from earlier attempts, and spread it over the kills still
            # to come: otherwise one attempt finishes the run and the rest find nothing to kill
            left = load_s + per_line * max(1, len(want) - count_lines(out)) / (args.kills - i + 1)
            horizon = min(args.horizon, max(1.5 * load_s, left))
        r = kill_once(out, args.model, args.limit, rng.uniform(0.0, horizon))
        if r["first_save_s"] is not None:
            load_s = r["first_save_s"]
            if r["after"] > r["before"] and r["at_s"] > r["first_save_s"]:
                per_line = (r["at_s"] - r["first_save_s"]) / max(1, r["after"] - r["before"])
        if r["finished"]:
            print(f"  kill {i}: finished before the kill ({r['at_s']} s); lines on disk {r['before']} -> {r['after']}")
            continue
        if r["lost_s"] is None:
            early += 1
            print(f"  kill {i}: killed after {r['at_s']} s, before its first save (model load or first report); "
                  f"lines on disk {r['before']}")
            continue
        lost.append(r["lost_s"])
        print(f"  kill {i}: killed after {r['at_s']} s; lines on disk {r['before']} -> {r['after']}; "
              f"{r['lost_s']} s since its last saved judgment")
    killed = check(out, want)
    print(f"  after the kills: {killed['records']} whole lines, {killed['duplicated']} duplicated, "
          f"torn last line: {'yes' if killed['torn'] else 'no'}")
    res = subprocess.run(judge_cmd(out, args.model, args.limit), cwd=ROOT, capture_output=True, text=True)
    final = check(out, want)
    print(f"  final run: rc {res.returncode}; {final['records']} records, lost {final['lost']}, "
          f"duplicated {final['duplicated']}, unexpected {final['extra']}, torn {final['torn']}")
    if lost:
        print(f"  judging thrown away by a kill after a save: max {max(lost)} s, mean "
              f"{sum(lost) / len(lost):.2f} s over {len(lost)} kills; {early} kill(s) before the attempt's first save")
    return (res.returncode == 0 and killed["duplicated"] == 0
            and final == {"records": len(want), "lost": 0, "extra": 0, "duplicated": 0, "torn": 0})


def concurrent(args: argparse.Namespace, want: set[tuple], base: Path) -> bool:
    out = base / "concurrent"
    procs = [subprocess.Popen(judge_cmd(out, args.model, args.limit), cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate() for p in procs]
    codes = [p.returncode for p in procs]
    refusal = next((err.strip() for p, (_, err) in zip(procs, results) if p.returncode == 2), "")
    got = check(out, want)
    print(f"concurrent: two `lifesearch judge` on one directory at once: exit codes {sorted(codes)}; "
          f"{got['records']} records, lost {got['lost']}, duplicated {got['duplicated']}")
    if refusal:
        print(f"  refused: {refusal}")
    return sorted(codes) == [0, 2] and "in use by another lifesearch process (pid" in refusal and \
        got == {"records": len(want), "lost": 0, "extra": 0, "duplicated": 0, "torn": 0}


def repair_then_resume(args: argparse.Namespace, want: set[tuple], base: Path) -> bool:
    """Judge, lose the manifest (damaged then set aside by `repair`, or deleted), resume with another
    model under the same id: refused (exit 2, no line added); the same model then finishes."""
    ok = True
    for how in ("repair", "delete"):
        out = base / f"resume-after-{how}"
        half = max(1, args.limit // 2)
        first = subprocess.run(judge_cmd(out, args.model, half), cwd=ROOT, capture_output=True, text=True)
        if how == "repair":
            (out / "manifest.json").write_text('{"stages": ' + "[" * 100_000 + "]" * 100_000 + "}")
            fixed = subprocess.run([sys.executable, "-m", "lifesearch_local", "repair", str(out)], cwd=ROOT,
                                   capture_output=True, text=True)
            ok &= fixed.returncode == 0 and not (out / "manifest.json").exists()
        else:
            (out / "manifest.json").unlink()
        before = (out / "judgments.jsonl").read_bytes()
        mixed = subprocess.run(judge_cmd(out, other_model(args.model), args.limit), cwd=ROOT, capture_output=True, text=True)
        untouched = (out / "judgments.jsonl").read_bytes() == before
        same = subprocess.run(judge_cmd(out, args.model, args.limit), cwd=ROOT, capture_output=True, text=True)
        got = check(out, want)
        print(f"resume after the manifest was {'set aside by repair' if how == 'repair' else 'deleted'}: first run rc "
              f"{first.returncode}; another model under the same id: rc {mixed.returncode}, judgments "
              f"{'untouched' if untouched else 'CHANGED'} ({mixed.stderr.strip()[:160]}); the same model: rc "
              f"{same.returncode}, {got['records']} records, lost {got['lost']}, duplicated {got['duplicated']}")
        ok &= (first.returncode == 0 and mixed.returncode == 2 and untouched and same.returncode == 0
               and got == {"records": len(want), "lost": 0, "extra": 0, "duplicated": 0, "torn": 0})
    return ok


def _fill(fs: Path, leave: int) -> Path:
    """One file filling the filesystem at `fs` but for about `leave` bytes."""
    import os

    st = os.statvfs(fs)
    filler = fs / "filler.bin"
    with open(filler, "ab") as f:
        try:
            f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
            f.flush()
        except OSError:
            pass
    return filler


def disk_full(args: argparse.Namespace, want: set[tuple], base: Path) -> bool | None:
    """`judge` with its run directory on a small real tmpfs, filled so that it runs out of space at
    several points (nothing free, then room for a few pages of records): each attempt must end in one
    line naming the path and "no space left on device", exit 1, no *.tmp and no torn or duplicated
    line; after space is freed the same command finishes with every judgment once. Then `report`
    on the full disk: exit 1, no report.html.tmp. None when no tmpfs can be mounted (not root)."""
    fs = base / "diskfull-fs"
    fs.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(fs)], capture_output=True, text=True)
    if mounted.returncode:
        print(f"disk full: skipped, no tmpfs could be mounted ({mounted.stderr.strip() or mounted.returncode})")
        return None
    ok, out = True, fs / "run"
    try:
        for leave in (0, 8192, 16384, 32768, 65536):
            filler = _fill(fs, leave)
            res = subprocess.run(judge_cmd(out, args.model, args.limit), cwd=ROOT, capture_output=True, text=True)
            err = res.stderr.strip().splitlines()
            temps = sorted(str(t.relative_to(fs)) for t in fs.rglob("*.tmp"))
            got = check(out, want)
            one_line = len(err) == 1 and "no space left on device" in err[0] and "Traceback" not in res.stderr
            print(f"disk full ({leave // 1024} KiB left): rc {res.returncode}; {got['records']} records, duplicated "
                  f"{got['duplicated']}, torn {got['torn']}; temporaries {temps or 'none'}; "
                  f"{err[-1][:150] if err else '(no message)'}")
            ok &= (res.returncode == 1 and one_line or res.returncode == 0) and not temps \
                and got["duplicated"] == 0 and got["torn"] == 0 and got["extra"] == 0
            filler.unlink()
        res = subprocess.run(judge_cmd(out, args.model, args.limit), cwd=ROOT, capture_output=True, text=True)
        final = check(out, want)
        print(f"disk full: space freed, the same command: rc {res.returncode}; {final['records']} records, lost "
              f"{final['lost']}, duplicated {final['duplicated']}, unexpected {final['extra']}, torn {final['torn']}")
        ok &= res.returncode == 0 and final == {"records": len(want), "lost": 0, "extra": 0, "duplicated": 0, "torn": 0}
        filler = _fill(fs, 0)
        report = [sys.executable, "-m", "lifesearch_local", "report", str(out)]
        full = subprocess.run(report, cwd=ROOT, capture_output=True, text=True)
        left = sorted(p.name for p in out.iterdir() if p.name.startswith("report.html"))
        filler.unlink()
        freed = subprocess.run(report, cwd=ROOT, capture_output=True, text=True)
        print(f"disk full: report on the full disk: rc {full.returncode} ({full.stderr.strip()[:150]}), left "
              f"{left or 'nothing'}; after freeing: rc {freed.returncode}")
        ok &= full.returncode == 1 and left == [] and freed.returncode == 0 and (out / "report.html").is_file()
    finally:
        subprocess.run(["umount", "-l", str(fs)], capture_output=True)
    return ok


def extra_checks(commands: list[str], base: Path) -> bool:
    ok = True
    for cmd in commands:
        res = subprocess.run(cmd.replace("DIR", str(base)), shell=True, cwd=ROOT)
        print(f"also: `{cmd}` -> exit {res.returncode}")
        ok &= res.returncode == 0
    return ok


PHASES = ("kills", "concurrent", "repair", "disk-full", "cache", "endpoint")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kills", type=int, default=10)
    p.add_argument("--limit", type=int, default=10, help="first N sample tasks (2 reports each; the sample has 10)")
    p.add_argument("--model", default="tiny-llama")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--horizon", type=float, help="kill times are uniform in [0, horizon] seconds "
                   "(default: the time of one uninterrupted run, measured first)")
    p.add_argument("--dir", help="work directory (default: a new temp directory)")
    p.add_argument("--also", action="append", default=[], help="extra check command (DIR = the work directory)")
    p.add_argument("--only", action="append", choices=PHASES, help="run only this phase (repeatable; default: all)")
    args = p.parse_args()
    base = Path(args.dir or tempfile.mkdtemp(prefix="fault_run-"))
    want = expected_keys(args.limit)
    t0 = time.monotonic()
    run = set(args.only or PHASES)
    ok = True
    if "kills" in run:
        ok &= fault_kills(args, want, base)
    if "concurrent" in run:
        ok &= concurrent(args, want, base)
    if "repair" in run:
        ok &= repair_then_resume(args, want, base)
    if "disk-full" in run:
        ok &= disk_full(args, want, base) is not False
    extra = [f"{shlex.quote(sys.executable)} scripts/faults/fault_cache.py --dir DIR"] if "cache" in run else []
    if "endpoint" in run:
        extra.append(f"{shlex.quote(sys.executable)} scripts/faults/fault_endpoint.py --dir DIR --limit {min(args.limit, 3)} "
                     f"--seed {args.seed}")
    ok &= extra_checks([*extra, *args.also], base)
    print(f"RESULT: {'PASS' if ok else 'FAIL'} in {time.monotonic() - t0:.0f} s "
          f"({shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
