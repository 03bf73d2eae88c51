"""`lifesearch run`'s run directory: a config.yaml this version cannot load is refused in one line."""

from __future__ import annotations

import pytest
import yaml
from conftest import ROOT

from lifesearch_local.cli import main
from lifesearch_local.errors import LifesearchError
from lifesearch_local.run.config import RunConfig
from lifesearch_local.run.pipeline import prepare_run_dir


def _config(tmp_path) -> RunConfig:
    return RunConfig(out=str(tmp_path / "run"), tasks=str(ROOT / "data/sample/tasks.jsonl"),
                     judge={"id": "j", "model": {"model": "tiny-llama"}})


def test_a_config_yaml_of_an_earlier_version_is_refused_in_one_line(tmp_path, capsys):
    cfg = _config(tmp_path)
    prepare_run_dir(cfg)
    path = tmp_path / "run" / "config.yaml"
    old = yaml.safe_load(path.read_text())
    old["judge"]["model"]["tensor_parallel_size"] = 1  # one flat model block held every backend's fields
    path.write_text(yaml.safe_dump(old))
    with pytest.raises(LifesearchError, match=r"config.yaml does not load in this version.*judge\.model\.tensor_parallel_size.*--fresh"):
        prepare_run_dir(cfg)
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    capsys.readouterr()
    assert main(["run", "--config", str(tmp_path / "run.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "--fresh" in err, err
