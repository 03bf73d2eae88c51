"""Premature clarification (paper §4.4): a final message that asks the user instead of answering.

The harness calls `is_clarification` only on a final decision, i.e. a model turn with no
tool call. The message is split into sentences (on . ! ? 。！？ and line breaks; a point
inside a number such as 4.10 does not split). A sentence *asks the user* when it ends in a
question mark (? or ？) or contains a request addressed to the user ("please confirm",
"could you", "let me know", "before I start", "I need more information"; 请确认, 请问, 您希望,
是否需要, 能否, 在开始之前, …). The message is a clarification when it is short (at most
MAX_UNITS words, a CJK character counting as one word — a report is longer) and the asking
sentences make up at least half of it, weighted by their words. So "Which year do you mean?
Please confirm." is one; "The APY is 4.10% as of 30 June 2026. Want more details?" is not
(mostly an answer), and neither is a long report that ends with an offer to elaborate.
"""

from __future__ import annotations

import re

MAX_UNITS = 400
MIN_SHARE = 0.5

_SPLIT = re.compile(r"(?<=[!?。！？])|(?<=\.)(?!\d)|\n+")
_UNIT = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[A-Za-z0-9]+")
_QUESTION = re.compile(r"[?？][\s\"'”’)）*_]*$")
_ASK_EN = re.compile(
    r"\b(?:please|kindly)\s+(?:confirm|clarify|specify|provide|share|tell|let\s+me\s+know|advise|indicate|choose|select)\b"
    r"|\blet\s+me\s+know\b|\b(?:could|can|would|will)\s+you\b|\bdo\s+you\s+(?:want|prefer|mean|need|have)\b"
    r"|\bbefore\s+i\s+(?:begin|start|proceed|continue|dive)\b"
    r"|\bi\s+(?:need|would\s+need|'d\s+need|require)\s+(?:some\s+|a\s+few\s+|more\s+|additional\s+|further\s+)*"
    r"(?:information|details|context|clarification)\b"
    r"|\b(?:to\s+confirm|confirm\s+(?:the|a\s+few|some)\s+details)\b",
    re.I,
)
_ASK_ZH = re.compile(r"请确认|请问|请您|请告诉|请提供|请说明|请补充|请明确|请告知|您希望|您是否|您想|您需要|你希望|你是否|是否需要|能否|可否|"
                     r"确认一下|跟您确认|向您确认|需要您|麻烦您|在开始之前|开始之前|开始研究之前|以便我")


def _units(s: str) -> int:
    return len(_UNIT.findall(s))


def asks_user(sentence: str) -> bool:
    """A question, or a request addressed to the user."""
    s = sentence.strip()
    return bool(_QUESTION.search(s) or _ASK_EN.search(s) or _ASK_ZH.search(s))


def is_clarification(text: str) -> bool:
    """True when a final message is mainly questions to the user (see the module docstring)."""
    sentences = [s for s in _SPLIT.split(text or "") if s and _units(s)]
    total = sum(_units(s) for s in sentences)
    if not total or total > MAX_UNITS:
        return False
    asking = sum(_units(s) for s in sentences if asks_user(s))
    return asking / total >= MIN_SHARE
