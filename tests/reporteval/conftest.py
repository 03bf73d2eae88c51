"""Doubles and fixtures for the ReportEval tests: an N-way choice backend and a number-matching fake judge."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from doubles import ScriptedBackend

from serving.protocol import ChatRequest, ChoiceGroup, ChoiceResult

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "reporteval"
CORPUS = ROOT / "data" / "web"
SAMPLE_TASKS = ROOT / "data" / "sample" / "tasks.jsonl"
SAMPLE_REPORTS = ROOT / "data" / "sample" / "reports.jsonl"


def sample_report(task_id: str, agent: str = "sample-thorough") -> str:
    for line in SAMPLE_REPORTS.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if r["task_id"] == task_id and r["agent"] == agent:
            return r["text"]
    raise KeyError(task_id)


def peaked(n: int, k: int, top: float = 0.8) -> list[float]:
    """Probabilities over n choices with `top` on choice k."""
    rest = (1 - top) / (n - 1)
    return [top if i == k else rest for i in range(n)]


class ChoiceBackend(ScriptedBackend):
    """score_choices() returns, for each prompt, `probs_fn(group_key, index, request, choices)`."""

    def __init__(self, probs_fn: Callable[[str, int, object, Sequence[str]], list[float]],
                 texts: Sequence[str] | Callable[[ChatRequest], str] = ()):
        super().__init__(texts)
        self.probs_fn = probs_fn

    def score_choices(self, groups: Sequence[ChoiceGroup], choices: Sequence[str]) -> list[list[ChoiceResult]]:
        self.choice_calls.append(list(groups))
        out = []
        for g in groups:
            row = []
            for i, req in enumerate(g.requests):
                p = self.probs_fn(g.key, i, req, choices)
                row.append(ChoiceResult(probs=p, logprobs=[math.log(x) for x in p]))
            out.append(row)
        return out


_NUM = re.compile(r"\d+(?:\.\d+)?")
_URL = re.compile(r"https?://\S+")


def prompt_parts(content: str) -> tuple[str, str]:
    """(source text, claim) of a factuality prompt."""
    source = content.split("[Web content]\n", 1)[1].split("\n[Sentence from the report]\n", 1)[0]
    source = source.split("\n\n", 1)[1]  # drop the URL / Title / Part header
    claim = content.split("[Sentence from the report]\n", 1)[1].split("\n\nOutput only", 1)[0]
    return source, claim


def fake_support(content: str) -> int:
    """A judge that checks numbers: 1 if every number of the claim is in the source, 0 if some, −1 if none."""
    source, claim = prompt_parts(content)
    have = set(_NUM.findall(_URL.sub("", source)))
    want = set(_NUM.findall(_URL.sub("", claim)))
    hits = len(want & have)
    return 1 if want and hits == len(want) else 0 if hits else -1


def fake_judge_probs(key: str, i: int, req, choices: Sequence[str]) -> list[float]:
    if tuple(choices) == ("1", "0", "-1"):
        return peaked(3, ("1", "0", "-1").index(str(fake_support(req.messages[0]["content"]))))
    return peaked(len(choices), len(choices) - 1)


@pytest.fixture(scope="session")
def tiny_backend():
    """The tiny random Llama through serving.hosting.host_engine, loaded once for the session."""
    from lifesearch_local.llm.models import engine_config
    from serving.config import model_config
    from serving.hosting import host_engine

    with host_engine(engine_config(model_config(model="tiny-llama", device="cpu"))) as backend:
        yield backend
