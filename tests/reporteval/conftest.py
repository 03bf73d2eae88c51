"""Fixtures of the ReportEval tests: no network at all, and the tiny random Llama loaded once."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any attempt to reach the network fails the test: sources come from the corpus and the replay cache."""

    async def refuse(self, url, **kw):
        raise AssertionError(f"network fetch attempted: {url}")

    monkeypatch.setattr("lifesearch_local.web.http.HttpClient.get", refuse)


@pytest.fixture(scope="session")
def tiny_backend():
    """The tiny random Llama through serving.hosting.host_engine, loaded once for the session."""
    from lifesearch_local.llm.models import engine_config
    from serving.config import model_config
    from serving.hosting import host_engine

    with host_engine(engine_config(model_config(model="tiny-llama", device="cpu"))) as backend:
        yield backend
