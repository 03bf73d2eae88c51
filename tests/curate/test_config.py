"""Curate configs: the shipped ones validate, unknown keys are errors naming the field."""

from __future__ import annotations

import pytest

from lifesearch_local.curate.config import load_curate_config
from lifesearch_local.errors import InputError
from tests.helpers.inputs import ROOT

ALL = sorted((ROOT / "configs").glob("*.yaml"))
CURATE = [p for p in ALL if p.name.startswith("curate_")]  # `lifesearch curate` configs, not run configs


@pytest.mark.parametrize("path", CURATE, ids=lambda p: p.name)
def test_shipped_curate_configs_validate(path):
    assert load_curate_config(path).model.model


def test_shipped_config_and_unknown_keys(tmp_path):
    cfg = load_curate_config(ROOT / "configs" / "curate_tiny.yaml")
    assert cfg.model.model == "tiny-llama" and cfg.model.device == "cpu" and cfg.retries <= 1
    bad = tmp_path / "c.yaml"
    bad.write_text("curate:\n  retries: 1\n  max_tokens: {filter: 64, rewirte: 8}\n")
    with pytest.raises(InputError, match=r"max_tokens\.rewirte: Extra inputs are not permitted"):
        load_curate_config(bad)
