"""The one bounded JSON reader: every way outside JSON can be unusable is one JSONError, located."""

from __future__ import annotations

import pytest

from serving._util.jsonread import JSONError, loads

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("raw, message, line, field", [
    (DEEP, "JSON nested deeper than 64 levels", None, None),
    ('{"a": {"b": ' + "[" * 70 + "]" * 70 + "}}", "JSON nested deeper than 64 levels", None, "a"),
    ('{"n": ' + "9" * 5000 + "}", "not a usable JSON value: Exceeds the limit (4300 digits)", None, None),
    ('{"x": NaN}', "NaN is not a JSON number", None, None),
    ('{"x": -Infinity}', "-Infinity is not a JSON number", None, None),
    ('{"x": 1e999}', "1e999 is beyond the range of a float", None, None),
    ('{"x": 1,\n "x": 2}', "duplicate key 'x'", None, "x"),
    (b'{"a": 1,\n "b": "\xff"}', "not UTF-8 text", 2, None),
    ('{"t": "\\ud800"}', "lone surrogate", None, "t"),
    ('{"a": 1,\n oops}', "malformed JSON", 2, None),
])
def test_unusable_json_is_one_located_error(raw, message, line, field):
    with pytest.raises(JSONError) as e:
        loads(raw)
    assert message in e.value.message and (e.value.line, e.value.field) == (line, field)
    assert "\n" not in str(e.value)


def test_ordinary_json_is_read_as_json():
    assert loads(b'{"a": [1, 2.5, -0.0, "\\u00e9"], "b": null, "c": 1e308}') == {"a": [1, 2.5, -0.0, "é"], "b": None,
                                                                                "c": 1e308}
    nested = loads("[" * 64 + "]" * 64)  # 64 levels: read
    for _ in range(63):
        nested = nested[0]
    assert nested == []
    with pytest.raises(JSONError, match="nested deeper than 64 levels"):
        loads("[" * 66 + "]" * 66)
