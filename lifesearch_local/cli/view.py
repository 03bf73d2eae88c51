"""`lifesearch view DIR…`: a local, read-only web viewer of run directories and judgments files."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

LOOPBACK = "127.0.0.1"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "view",
        help="browse runs and every judge decision in a local web page",
        description="Serve a read-only web viewer of run directories and judgments files on "
        f"{LOOPBACK} (like `inspect view`): each run's leaderboard with 95% CIs as `score` computes them; "
        "every decision in a table paged on the server, with filters (task, agent, rubric, judge, "
        "verdict, agreement with the labels, report cut) and a text search over criteria and reasons; a "
        "page per decision with the prompt the judge read (rebuilt with the judge's prompt renderer, the "
        "part of a long report it did not read marked), its raw answer, p_true, reason, the label and the "
        "run's replays; the disagreements with the labels, most confident first; and two judges (of one "
        "run, or of two runs) side by side on the decisions both made, by |Δp_true|. DIR is a run "
        "directory, a folder of them, or a judgments file. Only GET is answered and only files under the "
        "directories given are served. On a cluster: run it on the node, then `ssh -L PORT:127.0.0.1:PORT "
        "HOST` from your machine and open the printed URL. Ctrl-C stops it.",
    )
    p.add_argument("paths", nargs="+", metavar="DIR", help="run directory, folder of run directories, or judgments JSONL")
    p.add_argument("--port", type=int, default=7575,
                   help="port to listen on (default 7575; 0: any free port, printed)")
    p.add_argument("--host", default=LOOPBACK,
                   help=f"address to listen on (default {LOOPBACK}: this machine only). Another address exposes "
                   "every decision and report to whoever can reach it; prefer ssh port forwarding")
    p.add_argument("--tasks", help="tasks JSONL for sources that have none of their own (nor in their manifest)")
    p.add_argument("--labels", help="reference labels JSONL for sources that have none of their own")
    p.add_argument("--label-source", metavar="S", help="keep only labels with this source")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lifesearch_local.judge.rubric import CHOICES, judge_prompt_span, report_choice_group
    from lifesearch_local.output.view.server import LOOPBACK as LOCAL_NAMES
    from lifesearch_local.output.view.server import Viewer, make_server
    from lifesearch_local.output.view.sources import Inputs, open_sources

    if not 0 <= args.port <= 65535:
        print(f"error: --port {args.port}: a port number from 0 to 65535", file=sys.stderr)
        return 2
    inputs = Inputs(tasks=Path(args.tasks) if args.tasks else None,
                    labels=Path(args.labels) if args.labels else None, label_source=args.label_source)
    sources = open_sources([Path(p) for p in args.paths], inputs)
    local = args.host in LOCAL_NAMES
    if not local:
        print(f"warning: listening on {args.host}: anyone who can reach it can read every report and decision "
              "shown (no authentication); prefer the default with ssh port forwarding", file=sys.stderr)
    viewer = Viewer(sources, judge_prompt_span, report_choice_group, CHOICES, allowed_hosts=set(LOCAL_NAMES) if local else set())
    server = make_server(viewer, args.host, args.port)
    for src in sources:
        print(f"{src.name}: {len(src.index)} decisions" + "".join(f"\n  note: {p}" for p in src.problems),
              file=sys.stderr)
    serve(server, "127.0.0.1" if local else args.host, hint=local)
    print("lifesearch view: stopped", file=sys.stderr)
    return 0


def serve(server, shown: str, *, hint: bool) -> None:  # noqa: ANN001 (a ViewServer; imported lazily)
    """Print the URL (and the ssh hint), serve until SIGINT or SIGTERM, then close the socket."""
    from lifesearch_local.output.view.server import serve_in_thread

    # the handlers go in before the URL is printed: whoever reads it may stop us at once
    stop = threading.Event()
    old = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    thread = serve_in_thread(server)
    try:
        port = server.server_address[1]
        print(f"lifesearch view: http://{shown}:{port}/", flush=True)
        if hint:
            print(f"from another machine: ssh -L {port}:127.0.0.1:{port} USER@THIS_HOST, then open "
                  f"http://127.0.0.1:{port}/", file=sys.stderr, flush=True)
        stop.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        server.shutdown()
        server.server_close()
        thread.join(10)
