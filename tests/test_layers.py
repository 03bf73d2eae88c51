"""The layer rules, read from the source: serving knows nothing of the benchmark, no import circles."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("serving", "lifesearch_local")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, bool, int]]:
    """(imported module, at module level?, line) for every import statement of a module.
    `from pkg import sub` counts as importing pkg.sub where sub is a module of ours."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    top_level = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, id(node) in top_level, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.append((sub if sub in MODULES else target, id(node) in top_level, node.lineno))
    return out


def _violations(rule) -> list[str]:
    return [f"{name}:{line} imports {target}" for name, path in MODULES.items()
            for target, top, line in _imports(name, path) if rule(name, target, top)]


def _is(target: str, pkg: str) -> bool:
    return target == pkg or target.startswith(pkg + ".")


def test_the_rules_see_every_module_and_its_imports():
    # a walker that found nothing would pass every rule below
    assert {"serving.engines.hf", "serving.ray.pool", "lifesearch_local.judge.stage", "lifesearch_local.cli"} <= set(MODULES)
    assert ("serving.engines", True, 11) in _imports("serving.ray.actor", MODULES["serving.ray.actor"])


def test_serving_never_imports_the_benchmark():
    assert _violations(lambda name, target, top: _is(name, "serving") and _is(target, "lifesearch_local")) == []


def test_the_library_loads_ray_and_vllm_only_inside_functions():
    heavy = ("ray", "vllm")
    assert _violations(lambda name, target, top: _is(name, "lifesearch_local") and top
                       and any(_is(target, h) for h in heavy)) == []


def test_only_the_cli_imports_the_cli():
    def rule(name: str, target: str, top: bool) -> bool:
        return _is(target, "lifesearch_local.cli") and not _is(name, "lifesearch_local.cli") \
            and name != "lifesearch_local.__main__"

    assert _violations(rule) == []


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle of the graph, or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(edges):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(edges[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(edges.get(nxt, ()))))
    return None


def _graph() -> dict[str, set[str]]:
    # imports inside functions count too: a circle hidden in a function is still a circle
    return {name: {t for t, _, _ in _imports(name, path) if t in MODULES and t != name}
            for name, path in MODULES.items()}


def test_the_import_graph_has_no_circle():
    assert _cycle(_graph()) is None


def test_the_circle_finder_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("module", ["serving.hosting", "serving.engines.hf", "lifesearch_local.stage"])
def test_modules_open_with_a_purpose_line(module):
    doc = ast.get_docstring(ast.parse(MODULES[module].read_text(encoding="utf-8")))
    assert doc and "\n" not in doc.split("\n\n")[0]
