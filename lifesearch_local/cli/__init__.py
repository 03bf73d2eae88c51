"""The `lifesearch` command line: a registry of subcommands, each imported on use."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import LifesearchError

# name -> "module:register"; a module's register(subparsers) adds its parser. Modules keep
# heavy imports (torch, ray, vllm) inside the functions that run, so `--help` stays fast.
COMMANDS: dict[str, str] = {
    "validate": "lifesearch_local.cli.validate:register",
    "score": "lifesearch_local.cli.score:register",
    "judge": "lifesearch_local.cli.judge:register",
    "run": "lifesearch_local.cli.run:register",
    "agent": "lifesearch_local.cli.run:register_agent",
    "demo": "lifesearch_local.cli.demo:register",
    "sweep": "lifesearch_local.cli.sweep:register",
    "cluster": "lifesearch_local.cli.cluster:register",
    "bench": "lifesearch_local.cli.bench:register",
    "fetch": "lifesearch_local.web.cli:register_fetch",
    "search": "lifesearch_local.web.cli:register_search",
    "corpus": "lifesearch_local.web.cli:register_corpus",
    "agree": "lifesearch_local.cli.agree:register",
    "report": "lifesearch_local.cli.report:register",
    "reporteval": "lifesearch_local.cli.reporteval:register",
    "import": "lifesearch_local.cli.importer:register",
    "curate": "lifesearch_local.cli.curate:register",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lifesearch",
        description="Self-hosted LifeSearch: run deep-research agents, judge their reports against "
        "expert rubrics with open models, and score them as the paper does.",
    )
    parser.add_argument("--version", action="version", version=f"lifesearch-local {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for target in COMMANDS.values():
        module, attr = target.split(":")
        getattr(importlib.import_module(module), attr)(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except LifesearchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
