"""One truth, checked against the tools that read the study: optuna-dashboard's own app (called
in this process through WSGI, as a browser would call its API), `optuna.load_study`, trials.csv
and `autotune show` name best.yaml's winner with best.yaml's numbers."""

from __future__ import annotations

import io
import json
import re
import wsgiref.util
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from helpers import FakeRunner, csv_rows
from rich.console import Console

from autotune import Adapter, MeasureSettings, Status, TrainConfig, TrialResult
from autotune.contract.fmt import human
from autotune.contract.request import TrialRequest
from autotune.outputs.display import QuietListener
from autotune.outputs.report import write_outputs
from autotune.outputs.show import show
from autotune.study.search import Search, SearchSettings
from autotune.study.space.file import parse_space
from autotune.study.store.storage import open_storage

optuna_dashboard = pytest.importorskip(
    "optuna_dashboard", reason="the dashboard check needs it: pip install -e '.[test]'")

SPACE = {"batch_size": {"factors": [1, 2, 4]}, "amp_dtype": {"choices": ["fp32", "bf16"]}}


class Tiny(Adapter):
    batch_size = 8
    vary_global_batch = True


def lucky_search(call: int, request: TrialRequest) -> TrialResult:
    """Larger batches are faster; the search's one window reads 10% high (a lucky window), the
    fresh confirmation runs read the true rate, a little apart from run to run."""
    rate = 100.0 * request.config.batch_size * (1.1 if request.diagnose else 1.0 - 0.01 * (call % 3))
    return TrialResult(status=Status.OK, throughput=rate, duration_seconds=1.0,
                       peak_rss_mb=50.0 + request.config.batch_size)


def api(app: Any, path: str) -> Any:
    """GET `path` from a WSGI app, the JSON it answers."""
    environ: dict[str, Any] = {"PATH_INFO": path, "REQUEST_METHOD": "GET"}
    wsgiref.util.setup_testing_defaults(environ)
    status: list[str] = []
    body = b"".join(app(environ, lambda s, headers, exc_info=None: status.append(s)))
    assert status and status[0].startswith("200"), (path, status, body[:200])
    return json.loads(io.BytesIO(body).read())


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> tuple[SearchSettings, dict[str, Any]]:
    """A finished search with confirmation, its outputs written; (settings, best.yaml)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    tmp = tmp_path_factory.mktemp("dashboard")
    settings = SearchSettings(adapter=Path("tests/adapters/tiny.py"), space_source="space.yaml",
                              device="cpu", out=tmp / "out", storage=str(tmp / "study.db"),
                              study_name="one-truth", trials=5, seed=0, confirm=2,
                              measure=MeasureSettings(window_seconds=0.02, budget_seconds=0.2))
    space = parse_space(SPACE, source="space.yaml", adapter=Tiny, device_type="cpu", cpus=2)
    Search(settings, space, Tiny, runner=FakeRunner(lucky_search), listener=QuietListener(),
           on_change=lambda study: write_outputs(study, settings, plot=False)).run()
    return settings, yaml.safe_load((settings.out / "best.yaml").read_text())


def test_the_dashboard_shows_best_yamls_winner(searched: tuple[SearchSettings, Any]) -> None:
    settings, best = searched
    app = optuna_dashboard.wsgi(open_storage(settings.storage))
    (study,) = [s for s in api(app, "/api/studies")["study_summaries"]
                if s["study_name"] == "one-truth"]
    detail = api(app, f"/api/studies/{study['study_id']}")
    (shown,) = detail["best_trials"]
    attrs = {a["key"]: a["value"] for a in shown["user_attrs"]}
    assert shown["number"] == best["study"]["best_trial"]
    assert shown["values"] == [best["study"]["value"]]
    assert attrs["role"] == "winner" and int(attrs["confirms"]) == best["measurement"]["trial"]
    assert json.loads(attrs["config"]) == best["config"]
    # The dashboard cuts an attribute past 1024 characters (optuna-dashboard's
    # MAX_ATTR_LENGTH): a result's throughput comes early in it, and is read from the prefix.
    shown_rate = re.search(r'"throughput": ([0-9.e+-]+)', attrs["result"])
    assert shown_rate is not None and float(shown_rate.group(1)) == pytest.approx(
        best["throughput"]["value"], rel=1e-3)
    assert {p["name"]: p["param_external_value"] for p in shown["params"]} == {
        "batch_size": str(best["config"]["batch_size"]), "amp_dtype": best["config"]["amp_dtype"]}
    # Every confirmation run is listed as a trial of its own, with its value.
    runs = [t for t in detail["trials"]
            if {"key": "role", "value": "confirm"} in t["user_attrs"]]
    assert len(runs) == sum(len(c["runs"]) for c in best["confirmation"])
    assert all(t["state"] == "Complete" and t["values"] for t in runs)


def test_the_search_read_more_than_the_confirmation(searched: tuple[SearchSettings, Any]) -> None:
    # What makes this test bite: a search trial's lucky window is above the confirmed rate, and
    # still the winner is the study's best trial (its told value says why in best.yaml).
    _, best = searched
    assert best["confirmation"][0]["search"] > best["throughput"]["value"]
    assert best["study"]["value"] > best["throughput"]["value"]
    assert "raised" in best["study"]["note"]


def test_load_study_best_trial_carries_the_winner(searched: tuple[SearchSettings, Any]) -> None:
    settings, best = searched
    study = optuna.load_study(study_name="one-truth", storage=open_storage(settings.storage))
    assert study.best_trial.number == best["study"]["best_trial"]
    assert study.best_value == best["study"]["value"]
    assert study.best_trial.user_attrs["config"] == best["config"]
    assert TrainConfig(**study.best_trial.user_attrs["config"]).batch_size == 32
    assert best["decision"]["verdict"] == "clear lead"
    # The fake's diagnosed run reads 10% high: the winner's own runs, 11% apart, are warned
    # about and leave the confidence low.
    assert best["confidence"] == "low" and best["decision"]["warnings"]


def test_trials_csv_and_show_name_the_same_winner(searched: tuple[SearchSettings, Any]) -> None:
    settings, best = searched
    rows = csv_rows(settings.out / "trials.csv")
    (marked,) = [r for r in rows if r["winner"] == "True"]
    assert int(marked["number"]) == best["study"]["best_trial"]
    assert marked["role"] == "winner" and marked["confidence"] == best["confidence"]
    assert float(marked["throughput"]) == pytest.approx(best["throughput"]["value"], rel=1e-3)
    searched_row = next(r for r in rows if r["number"] == str(best["measurement"]["trial"]))
    assert float(searched_row["confirmed_median"]) == pytest.approx(
        best["throughput"]["value"], rel=1e-3)
    console = Console(record=True, width=300)
    show(settings.out, console=console)
    text = console.export_text()
    line = next(line for line in text.splitlines() if line.startswith("winner:"))
    assert (f"trial {best['measurement']['trial']} (confirmed, recorded in the study as trial "
            f"{best['study']['best_trial']})") in line
    assert f"{human(best['throughput']['value'])} samples/s" in line
    assert f"confidence {best['confidence']}" in line
    assert f"{best['speedup']:.2f}x the baseline" in line
    warned = [line for line in text.splitlines() if line.startswith("warning: ")]
    assert warned == [f"warning: {w}" for w in best["decision"].get("warnings", [])]
