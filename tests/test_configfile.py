"""The one YAML loader: a config nested past reason or swollen by aliases is one line, not a traceback."""

from __future__ import annotations

import pytest

from lifesearch_local.configfile import MAX_DEPTH, load_yaml, shape_problem
from lifesearch_local.errors import InputError

LAUGHS = "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcdef", "bcdefg"))


@pytest.mark.parametrize(("text", "why"), [
    ("judge: " + "[" * 100_000 + "]" * 100_000 + "\n", "nested deeper than a config can be"),  # flow style
    ("judge:\n" + "".join("  " * i + "k:\n" for i in range(1, 3000)), "nested deeper than a config can be"),  # block
    ("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + LAUGHS, "more than 1,000,000 values once its aliases are expanded"),
])
def test_a_config_too_deep_or_too_many_once_expanded_is_one_line(tmp_path, text, why):
    p = tmp_path / "config.yaml"
    p.write_text(text)
    with pytest.raises(InputError, match=why) as e:
        load_yaml(p)
    assert str(e.value).startswith(f"{p}: ") and "\n" not in str(e.value)


def test_depth_and_expanded_size_counted_exactly():
    nested: dict = {}
    inner = nested
    for _ in range(MAX_DEPTH - 1):
        inner["k"] = {}
        inner = inner["k"]
    assert shape_problem(nested) is None  # MAX_DEPTH levels: allowed
    inner["k"] = {}
    assert "nested deeper" in shape_problem(nested)
    shared = list(range(999))  # 1,000 values with its list
    assert shape_problem({"a": [shared] * 999}) is None  # 1 + 1 + 999 × 1,000 = 999,002 values
    assert "more than 1,000,000" in shape_problem({"a": [shared] * 1000})
