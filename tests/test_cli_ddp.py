"""`autotune search --nproc-per-node 2` as a real subprocess on a CPU: the trials run as two gloo
ranks, the DDP knobs join the space, best.yaml says the layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers import run_autotune


@pytest.mark.slow  # a search process, a launcher and two ranks
def test_search_with_two_ranks(tmp_path: Path, tiny_adapter: Path) -> None:
    out = tmp_path / "out"
    proc = run_autotune("search", "--adapter", tiny_adapter, "--device", "cpu",
                        "--nproc-per-node", "2", "--trials", "1", "--confirm", "0",
                        "--measure-seconds", "0.5", "--out", out)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    best = yaml.safe_load((out / "best.yaml").read_text())
    assert best["provenance"]["nproc_per_node"] == 2
    assert {"bucket_cap_mb", "gradient_as_bucket_view", "static_graph"} <= set(best["config"])
    request = json.loads((out / "trials" / "0" / "request.json").read_text())
    assert request["nproc_per_node"] == 2
    assert sorted(p.name for p in (out / "trials" / "0" / "ranks").glob("*.json")) == [
        "0.json", "1.json"]


@pytest.mark.slow  # the CLI as a subprocess
def test_nproc_per_node_must_be_positive(tmp_path: Path, tiny_adapter: Path) -> None:
    proc = run_autotune("search", "--adapter", tiny_adapter, "--nproc-per-node", "0",
                        "--out", tmp_path)
    assert proc.returncode == 1
    assert "--nproc-per-node" in proc.stderr and "greater than 0" in proc.stderr
