"""The `lifesearch` command line: one module per subcommand, each adding its parser."""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from collections.abc import Callable, Sequence

from lifesearch_local import __version__
from lifesearch_local.cli import (
    agree,
    bench,
    certify,
    cluster,
    curate,
    demo,
    estimate,
    importer,
    judge,
    leaderboard,
    panel,
    plan_labels,
    rejudge,
    repair,
    report,
    reporteval,
    run,
    score,
    sweep,
    validate,
    view,
)
from lifesearch_local.cli import web as web_cli
from lifesearch_local.errors import LifesearchError

# name -> register(subparsers). The command modules keep heavy imports (torch, ray, vllm)
# inside the functions that run, so importing them all keeps `--help` fast.
COMMANDS: dict[str, Callable[[argparse._SubParsersAction], None]] = {
    "validate": validate.register,
    "score": score.register,
    "leaderboard": leaderboard.register,
    "judge": judge.register,
    "run": run.register,
    "estimate": estimate.register,
    "agent": run.register_agent,
    "demo": demo.register,
    "sweep": sweep.register,
    "cluster": cluster.register,
    "bench": bench.register,
    "fetch": web_cli.register_fetch,
    "search": web_cli.register_search,
    "corpus": web_cli.register_corpus,
    "cache": web_cli.register_cache,
    "agree": agree.register,
    "certify": certify.register,
    "panel": panel.register,
    "plan-labels": plan_labels.register,
    "rejudge": rejudge.register,
    "report": report.register,
    "reporteval": reporteval.register,
    "import": importer.register,
    "curate": curate.register,
    "repair": repair.register,
    "view": view.register,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lifesearch",
        description="Self-hosted LifeSearch: run deep-research agents, judge their reports against "
        "expert rubrics with open models, and score them as the paper does.",
    )
    parser.add_argument("--version", action="version", version=f"lifesearch-local {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of setup and input errors (normally one line) and the "
                        "library's debug log records")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in COMMANDS.values():
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv_given, argv = argv, list(sys.argv[1:] if argv is None else argv)
    unknown = unknown_command(argv)
    if unknown:
        print(f"error: {unknown}", file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    wide = bool(getattr(args, "wide", False))
    if wide or "lifesearch_local.output.terminal" in sys.modules:
        from lifesearch_local.output import terminal

        terminal.WIDE = wide  # per command: an in-process caller's earlier --wide does not stick
    from serving import EndpointError, install_log_redaction, log_to_stderr, plan_process_threads, redact

    plan_process_threads()  # before anything imports torch: OpenMP reads its wait policy once, at start

    install_log_redaction()
    # The library logs; here its notices and warnings become stderr lines, worded as they are
    # (--debug adds our debug records). Library output that is the command's own goes through `say`.
    log_to_stderr(logging.DEBUG if args.debug else logging.INFO)
    from lifesearch_local.runtime.signals import command_stop

    try:
        # SIGTERM after the command has begun work lets it finish (exit 0), even just after its last record
        with command_stop(program=argv_given is None):
            code = int(args.func(args) or 0)
            sys.stdout.flush()  # here, not at exit: a reader that closed the pipe is handled below
        return code
    except BrokenPipeError:  # `lifesearch score --json | head`: the reader has what it wanted
        _quiet_stdout()
        return 141  # what a shell reports for a writer stopped by SIGPIPE
    except LifesearchError as e:
        if args.debug:
            traceback.print_exc()
        print(f"error: {redact(str(e))}", file=sys.stderr)
        return e.exit_code  # 2: the user must change something; 1 (a full disk): the same command can pass later
    except EndpointError as e:  # one line; a wrong key/URL/model (401/403/404) is the user's to fix
        if args.debug:
            traceback.print_exc()
        again = "fix the configuration and rerun" if e.config_error else "rerun the same command"
        print(f"error: {redact(str(e))}; what was finished is saved, {again} to resume", file=sys.stderr)
        return 2 if e.config_error else 1
    except KeyboardInterrupt:
        if args.debug:
            traceback.print_exc()
        print("interrupted: what was finished is saved; rerun the same command to resume", file=sys.stderr)
        return 130


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's flush at exit cannot raise again."""
    import contextlib
    import os

    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def unknown_command(argv: Sequence[str]) -> str | None:
    """The message for a mistyped subcommand (with the closest names), or None."""
    import difflib

    words = [a for a in argv if not a.startswith("-")]
    if not words or words[0] in COMMANDS or argv[0].startswith("-") and argv[0] not in ("--debug",):
        return None
    close = difflib.get_close_matches(words[0], list(COMMANDS), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return f"unknown command {words[0]!r}{hint} (commands: {', '.join(COMMANDS)})"


if __name__ == "__main__":
    sys.exit(main())
