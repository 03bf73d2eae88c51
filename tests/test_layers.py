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


def test_only_the_cli_parses_arguments():
    # command-line code lives in lifesearch_local/cli/; the library takes typed arguments
    assert _violations(lambda name, target, top: target == "argparse" and not _is(name, "lifesearch_local.cli")) == []


def _engine_modules() -> set[str]:
    """The modules the engine factories of serving/engines/__init__.py load (hf, vllm, openai)."""
    return {t for t, _, _ in _imports("serving.engines", MODULES["serving.engines"])
            if _is(t, "serving.engines") and t != "serving.engines"}


def test_no_engine_imports_another_engine():
    # what two engines share lives in a neutral module (serving.chat, engines/real_models.py, ...)
    engines = _engine_modules()
    assert engines == {"serving.engines.hf", "serving.engines.vllm", "serving.engines.openai"}
    assert _violations(lambda name, target, top: name in engines and target in engines - {name}) == []


def _stage_packages() -> set[str]:
    """The packages of lifesearch_local that hold a stage (agent, judge, reporteval, curate)."""
    return {name.rpartition(".")[0] for name in MODULES if name.startswith("lifesearch_local.") and name.endswith(".stage")
            and name.count(".") == 2}


def _loop_through(edges: dict[str, set[str]], node: str, packages: set[str]) -> list[str] | None:
    """A circle through `node` once every module of each package is one vertex (its package), or None."""
    def vertex(m: str) -> str:
        return next((p for p in packages if _is(m, p)), m)

    merged: dict[str, set[str]] = {}
    for src, targets in edges.items():
        merged.setdefault(vertex(src), set()).update(vertex(t) for t in targets if vertex(t) != vertex(src))
    paths, seen = [[node]], {node}
    while paths:  # breadth first from node; a path back to node is the loop
        path = paths.pop(0)
        for nxt in sorted(merged.get(path[-1], ())):
            if nxt == node:
                return path + [node]
            if nxt not in seen:
                seen.add(nxt)
                paths.append(path + [nxt])
    return None


def test_no_loop_between_the_config_and_a_stage_package():
    # lifesearch_local/config.py composes the stages' configs (RunConfig); a stage that imported it
    # back (reporteval once took JudgeConfig from there) makes the two one tangle
    packages = _stage_packages()
    assert {"lifesearch_local.agent", "lifesearch_local.judge", "lifesearch_local.reporteval"} <= packages
    assert _loop_through(_graph(), "lifesearch_local.config", packages) is None


def test_the_loop_finder_sees_a_loop_through_a_package():
    edges = {"cfg": {"pkg.config"}, "pkg.config": set(), "pkg.items": {"cfg"}, "other": {"cfg"}}
    assert _loop_through(edges, "cfg", {"pkg"}) == ["cfg", "pkg", "cfg"]
    assert _loop_through({**edges, "pkg.items": set()}, "cfg", {"pkg"}) is None


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
