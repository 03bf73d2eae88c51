"""Fixtures of the agent tests: the sample tasks, and the BM25 index of the bundled corpus built once."""

from __future__ import annotations

from pathlib import Path

import pytest

from lifesearch_local.records import Task
from lifesearch_local.tasks import load_tasks
from tests.helpers.inputs import CORPUS, ROOT


@pytest.fixture(scope="session")
def sample_tasks() -> dict[str, Task]:
    return {t.id: t for t in load_tasks(ROOT / "data" / "sample" / "tasks.jsonl")}


@pytest.fixture(scope="session")
def corpus_index(tmp_path_factory) -> Path:
    """The BM25 index of the bundled corpus, built once per session."""
    from lifesearch_local.web.search.local import build_index

    return build_index(corpus_dirs=[CORPUS]).save(tmp_path_factory.mktemp("corpus-index"))
