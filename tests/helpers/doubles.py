"""Test doubles at the serving protocol: scripted generations and fixed choice probabilities."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from serving.protocol import ChatRequest, ChoiceGroup, ChoiceResult, Engine, EngineInfo, Generation


class ScriptedBackend(Engine):
    """generate() returns scripted texts in order (or from a function of the request, which may
    also return a whole Generation, e.g. with native tool_calls); score_choices() returns p_true
    from `p_true_fn(group_key, index, request)`. `delay_s` makes each generate call take that long."""

    def __init__(self, texts: Sequence[str] | Callable[[ChatRequest], str | Generation] = (),
                 p_true_fn: Callable[[str, int, object], float] | None = None, delay_s: float = 0.0):
        self.texts = texts if callable(texts) else list(texts)
        self.p_true_fn = p_true_fn or (lambda key, i, req: 0.9 if i % 2 == 0 else 0.2)
        self.delay_s = delay_s
        self.generate_calls: list[list[ChatRequest]] = []
        self.choice_calls: list[list[ChoiceGroup]] = []

    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        self.generate_calls.append(list(requests))
        if self.delay_s:
            time.sleep(self.delay_s)
        out = []
        for r in requests:
            item = self.texts(r) if callable(self.texts) else self.texts.pop(0)
            if isinstance(item, Generation):
                out.append(item)
            else:
                out.append(Generation(text=item, prompt_tokens=10, output_tokens=len(item.split())))
        return out

    def identity(self) -> EngineInfo:
        """Every scripted engine (and its subclasses that fail on cue) is the same judge."""
        return EngineInfo(engine="scripted")

    def score_choices(self, groups: Sequence[ChoiceGroup], choices: Sequence[str]) -> list[list[ChoiceResult]]:
        self.choice_calls.append(list(groups))
        res = []
        for g in groups:
            row = []
            for i, req in enumerate(g.requests):
                p = self.p_true_fn(g.key, i, req)
                row.append(ChoiceResult(probs=[p, 1 - p], logprobs=[math.log(p), math.log(1 - p)]))
            res.append(row)
        return res
