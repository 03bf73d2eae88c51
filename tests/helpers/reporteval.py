"""ReportEval doubles: an N-way choice backend, a number-matching fake judge, the fixture items and web."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence

from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.records import Report
from lifesearch_local.reporteval.config import ReportEvalConfig
from lifesearch_local.reporteval.items import ReportItem
from lifesearch_local.reporteval.stage import report_items
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from lifesearch_local.web.config import WebConfig
from serving.protocol import ChatRequest, ChoiceGroup, ChoiceResult
from tests.helpers.doubles import ScriptedBackend
from tests.helpers.inputs import CORPUS, FIXTURES, SAMPLE

REPORTEVAL_FIXTURES = FIXTURES / "reporteval"
SAMPLE_TASKS = SAMPLE / "tasks.jsonl"
SAMPLE_REPORTS = SAMPLE / "reports.jsonl"


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


REPORT = "# R\n\n" + "\n\n".join(f"## Part {i}\nFact number {i} is here." for i in range(9))
ITEMS = [ReportItem(Report(task_id=f"t{i}", agent="a", text=REPORT), f"Question {i}?") for i in range(2)]
CHOICE = JudgeConfig(id="j")
GEN = JudgeConfig(id="g", mode="generate", retries=1)
RCFG = ReportEvalConfig()


def web(tmp_path) -> WebConfig:
    return WebConfig(mode="replay", cache_dir=tmp_path / "cache", corpus_dirs=[CORPUS])


def items():
    return report_items(read_records(REPORTEVAL_FIXTURES / "reports.jsonl", Report), load_tasks(SAMPLE_TASKS))
