"""Prompt templates under prompts/: one render helper, and the template's hash for the record."""

from __future__ import annotations

import functools
import hashlib
import re

from lifesearch_local.errors import LifesearchError
from lifesearch_local.resources import resource_path

# Only `{name}` with a bare identifier is a placeholder: the JSON examples in the paper's
# prompts keep their braces untouched.
_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


@functools.lru_cache(maxsize=64)
def load_template(name: str) -> tuple[str, str]:
    """(template text, sha256[:16]) of prompts/<name>.txt."""
    text = resource_path("prompts", f"{name}.txt").read_text(encoding="utf-8")
    return text, hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def render(name: str, **values: object) -> tuple[str, str]:
    """Fill a template; every placeholder must be given and every value used. Returns (text, hash)."""
    text, digest = load_template(name)
    wanted = set(_PLACEHOLDER.findall(text))
    missing, unused = wanted - values.keys(), values.keys() - wanted
    if missing or unused:
        raise LifesearchError(f"prompt {name}: missing {sorted(missing)}, unexpected {sorted(unused)}")
    # One pass so that a value containing `{question}` is never substituted again.
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), text), digest


def render_span(name: str, field: str, **values: object) -> tuple[str, str, tuple[int, int]]:
    """`render`, plus the (start, end) characters of `field`'s first substitution in the text:
    the part a backend may elide to fit a long prompt into the model's context."""
    text, digest = render(name, **values)
    template, _ = load_template(name)
    out, last = 0, 0
    for m in _PLACEHOLDER.finditer(template):
        out += m.start() - last
        value = str(values[m.group(1)])
        if m.group(1) == field:
            return text, digest, (out, out + len(value))
        out += len(value)
        last = m.end()
    raise LifesearchError(f"prompt {name}: no placeholder {{{field}}}")
