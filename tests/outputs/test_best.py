"""best.yaml's contents: the winner's config, its figures, the diagnosis, the CPUs' state and
where it was measured; plain YAML that `autotune.load_config` reads back."""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import stored_trial

from autotune import Fingerprint, Noise, Status, TrainConfig, TrialResult, load_config
from autotune.contract.noise import OtherProcess
from autotune.outputs.best import best_document, optimizer_note, yaml_header
from autotune.outputs.decision import spread_warnings
from autotune.study.confirmation.winner import Winner, pick_winner
from autotune.study.search import SearchSettings
from autotune.study.store.records import TrialRecord
from autotune.study.store.study_attrs import ConfirmationEntry, StudyInfo

INFO = StudyInfo(adapter="adapters/mlp.py", unit="images", space="search_spaces/cpu.yaml",
                 device="cpu")
FINGERPRINT = Fingerprint(torch="2.13.0", cpu_count=16, cpus_available=8, cpu_model="EPYC",
                          cgroup_cpu_limit=8.0, gpu="NVIDIA H100", gpu_memory_gb=79.1,
                          driver="580.1", cuda="13.0", cudnn=91000)


def settings(tmp_path: Path, device: str = "cpu") -> SearchSettings:
    return SearchSettings(adapter=Path("a.py"), space_source="s.yaml", device=device,
                          out=tmp_path, storage=str(tmp_path / "s.db"), study_name="t")


def measured(number: int = 1, *, config: TrainConfig | None = None, **fields: Any) -> TrialRecord:
    config = config or TrainConfig(batch_size=8, num_workers=4, expandable_segments=True)
    result = {"status": "ok", "throughput": 300.0, "unit": "samples", "spread": 0.012345678,
              "converged": True, "windows": 4, "step_seconds": 0.0266666, **fields}
    return stored_trial(number, value=300.0, attrs={"config": config.to_dict(), "result": result})


def document(tmp_path: Path, record: TrialRecord, **kw: Any) -> dict[str, Any]:
    winner = Winner(record, 300.0, kw.pop("baseline", 100.0), None)
    return best_document(winner, kw.pop("info", INFO), kw.pop("fingerprint", FINGERPRINT),
                         settings(tmp_path, **kw))


def test_config_figures_and_provenance(tmp_path: Path) -> None:
    doc = document(tmp_path, measured())
    assert doc["config"] == TrainConfig(batch_size=8, num_workers=4,
                                        expandable_segments=True).to_dict()
    # Measured on a CPU: the heap thresholds every measured process held go to production too.
    assert doc["env"] == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                          "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
                          "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}
    assert document(tmp_path, measured(), device="cuda")["env"] == {
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert doc["throughput"] == {"value": 300.0, "unit": "images/s",  # the study's unit
                                 "from": "the search trial's median window"}
    assert doc["baseline"] == {"value": 100.0, "unit": "images/s"}
    assert doc["speedup"] == 3.0
    assert doc["confirmation"] is None and doc["diagnosis"] is None
    m = doc["measurement"]
    assert m["trial"] == 1 and m["windows"] == 4 and m["converged"] is True
    assert m["spread"] == 0.01235 and m["step_seconds"] == 0.02667  # 4 significant digits
    # One window has no spread to tell (it read 0, as if its windows agreed).
    one = document(tmp_path, measured(spread=0.0, windows=1, converged=False))["measurement"]
    assert one["spread"] is None and one["windows"] == 1
    p = doc["provenance"]
    assert p["device"] == "NVIDIA H100" and p["device_kind"] == "cpu"
    assert p["torch"] == "2.13.0" and p["cpus_available"] == 8 and p["cgroup_cpu_limit"] == 8.0
    assert p["space"] == "search_spaces/cpu.yaml" and p["study_name"] == "t"
    assert p["storage"] == str((tmp_path / "s.db").resolve())


def test_without_a_baseline_or_facts(tmp_path: Path) -> None:
    doc = document(tmp_path, measured(), baseline=None, info=None, fingerprint=None)
    assert doc["baseline"] is None and doc["speedup"] is None
    assert doc["throughput"]["unit"] == "samples/s"  # the result's own unit
    assert doc["provenance"]["device"] == "cpu: None" and doc["provenance"]["space"] is None


def test_diagnosis_is_plain_and_rounded(tmp_path: Path) -> None:
    diagnosis = {"verdict": "input-bound", "suggestion": "more workers", "throughput": 300.123456,
                 "loader_rate": 310.98765, "compute_rate": 2000.0, "data_wait_fraction": 0.612345,
                 "gpu_busy_fraction": None, "cpu_busy_fraction": 0.5}
    doc = document(tmp_path, measured(diagnosis=diagnosis))
    assert doc["diagnosis"] == {"verdict": "input-bound", "suggestion": "more workers",
                                "throughput": 300.1, "loader_rate": 311.0, "compute_rate": 2000.0,
                                "data_wait_fraction": 0.6123, "gpu_busy_fraction": None,
                                "cpu_busy_fraction": 0.5, "unreliable": "",
                                "from": "the search trial (its own rates, not the confirmed "
                                        "throughput)"}


def test_an_undiagnosed_winner_takes_its_confirmation_runs_diagnosis(tmp_path: Path) -> None:
    # A search trial that did not beat the best when it ran is not diagnosed; its first fresh
    # confirmation run is, and best.yaml reports that one.
    diagnosis = {"verdict": "compute-bound", "suggestion": "", "throughput": 290.0,
                 "loader_rate": 9000.0, "compute_rate": 300.0, "data_wait_fraction": 0.01,
                 "gpu_busy_fraction": 0.97}
    record = measured()
    runs = {1: (measured(9).result, measured(10, diagnosis=diagnosis).result)}
    entry = ConfirmationEntry(trial=1, baseline=False, search_throughput=300.0,
                              throughputs=(300.0, 300.0), median=300.0, spread=0.0,
                              statuses=("ok", "ok"))
    doc = best_document(Winner(record, 300.0, 100.0, [entry], runs=runs), INFO, FINGERPRINT,
                        settings(tmp_path))
    assert doc["diagnosis"]["verdict"] == "compute-bound"
    assert doc["diagnosis"]["compute_rate"] == 300.0
    assert doc["diagnosis"]["from"] == "a confirmation run of the winner"
    assert document(tmp_path, record)["diagnosis"] is None  # none anywhere: none reported


def test_a_search_reading_far_from_the_confirmed_rate_does_not_describe_the_winner(
        tmp_path: Path) -> None:
    # A held-out user's baseline won a tie (2026-11-28, 2 CPUs): its search trial read 125
    # images/s beside a pytest holding a core, its fresh runs 3.2-3.65k; best.yaml gave the
    # search trial's "the model itself is the limit (128 images/s with data resident)".
    from autotune.study.confirmation.winner import Decision

    slow = {"verdict": "compute-bound", "suggestion": "the model itself is the limit",
            "throughput": 125.0, "loader_rate": 37000.0, "compute_rate": 128.0,
            "data_wait_fraction": 0.004, "gpu_busy_fraction": None}
    fresh = {**slow, "throughput": 3600.0, "compute_rate": 3700.0}
    busy = {"seconds": 2.0, "cpus": 2, "other_cpu_seconds": 2.08,
            "busiest": [{"name": "python3", "pid": 31767, "cpu_seconds": 2.05}]}
    record = measured(0, throughput=125.0, diagnosis=slow, noise=busy)
    entry = ConfirmationEntry(trial=0, baseline=True, search_throughput=125.0,
                              throughputs=(3162.0, 3596.0), median=3596.0, spread=0.13,
                              statuses=("ok", "ok"))
    decision = Decision(confidence="low", verdict="too few runs", runs=2)

    def diagnosis(runs: dict[int, tuple[TrialResult, ...]]) -> dict[str, Any]:
        winner = Winner(record, 3596.0, 3596.0, [entry], decision=decision, runs=runs)
        return best_document(winner, INFO, FINGERPRINT, settings(tmp_path))["diagnosis"]

    # A fresh run was diagnosed: its diagnosis is the winner's.
    got = diagnosis({0: (measured(6, diagnosis=fresh).result,)})
    assert got["compute_rate"] == 3700.0 and got["from"] == "a confirmation run of the winner"
    # None was: the search trial's, said to be 0.035x the confirmed rate, and why.
    got = diagnosis({0: (measured(5).result,)})
    assert got["compute_rate"] == 128.0
    assert got["from"] == ("the search trial, which read 0.035x the confirmed throughput: "
                           "measured while other processes kept 1.0 of the trial's 2 CPUs busy "
                           "(busiest: python3 (pid 31767) 1.0); its rates do not describe the "
                           "winner's runs")
    # Within 1.5x of it: the search trial's, as before.
    near = measured(0, throughput=3000.0, diagnosis={**slow, "throughput": 3000.0})
    winner = Winner(near, 3596.0, 3596.0, [entry], decision=decision,
                    runs={0: (measured(6, diagnosis=fresh).result,)})
    got = best_document(winner, INFO, FINGERPRINT, settings(tmp_path))["diagnosis"]
    assert got["compute_rate"] == 128.0 and got["from"].startswith("the search trial (its own")


def test_host_cpu_goes_into_best_yaml_with_a_steal_warning(tmp_path: Path) -> None:
    def measurement(steal: float) -> dict[str, Any]:
        record = measured(host_cpu={"busy_fraction": 0.96, "steal_fraction": steal})
        return document(tmp_path, record)["measurement"]

    noisy, quiet = measurement(0.12), measurement(0.01)
    assert noisy["cpu_busy_fraction"] == 0.96 and noisy["cpu_steal_fraction"] == 0.12
    assert "12% of the CPUs' time" in noisy["warning"]
    assert quiet["cpu_steal_fraction"] == 0.01
    assert "warning" not in quiet
    assert "cpu_busy_fraction" not in document(tmp_path, measured())["measurement"]


def test_host_cpu_of_a_legacy_result(tmp_path: Path) -> None:
    record = measured(extra={"host_cpu": {"busy_fraction": 0.96, "steal_fraction": 0.12}})
    assert document(tmp_path, record)["measurement"]["cpu_steal_fraction"] == 0.12


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_written_best_yaml_loads_back_with_its_device(tmp_path: Path, device: str) -> None:
    config = TrainConfig(batch_size=16, amp_dtype="bf16")
    doc = document(tmp_path, measured(config=config), device=device)
    path = tmp_path / "best.yaml"
    path.write_text(yaml_header(doc) + yaml.safe_dump(doc, sort_keys=False))
    assert yaml.safe_load(path.read_text()) == doc  # plain YAML
    tuned = load_config(path)
    assert tuned.config == config and tuned.device == device


def test_yaml_header_names_the_speedup_and_how_to_apply_it() -> None:
    header = yaml_header({"speedup": 2.5})
    assert header.splitlines()[0] == "# autotune: fastest measured configuration (2.5x the baseline)."
    assert "autotune apply best.yaml" in header and "load_config" in header
    assert all(line.startswith("#") for line in header.splitlines())
    assert "x the baseline" not in yaml_header({"speedup": None})


def test_yaml_header_says_how_to_apply_a_compiled_loss() -> None:
    scoped = yaml_header({"config": {"compile": "default", "compile_scope": "loss"}})
    assert "cfg.wrap_loss(fn)" in scoped
    assert all(line.startswith("#") for line in scoped.splitlines())
    assert "wrap_loss" not in yaml_header({"config": {"compile": "default",
                                                      "compile_scope": "model"}})


# -- the effective batch ---------------------------------------------------------------------------


def test_an_unchanged_effective_batch_is_stated_without_a_note(tmp_path: Path) -> None:
    record = measured(config=TrainConfig(batch_size=8, grad_accum=4))
    winner = Winner(record, 300.0, 100.0, None)
    doc = best_document(winner, INFO, None, settings(tmp_path), adapter_batch=32)
    assert doc["effective_batch"] == {"value": 32, "adapter": 32}
    assert "Note" not in yaml_header(doc)


@pytest.mark.parametrize(("accum", "factor", "linear", "sqrt"),
                         [(8, 2.0, "lr x 2,", "lr x 1.41,"), (1, 0.25, "lr x 0.25,", "lr x 0.5,")])
def test_a_changed_effective_batch_gets_a_learning_rate_note(
        tmp_path: Path, accum: int, factor: float, linear: str, sqrt: str) -> None:
    record = measured(config=TrainConfig(batch_size=8, grad_accum=accum))
    doc = best_document(Winner(record, 300.0, 100.0, None), INFO, None, settings(tmp_path),
                        adapter_batch=32)
    block = doc["effective_batch"]
    assert block["value"] == 8 * accum and block["adapter"] == 32 and block["factor"] == factor
    note = block["note"]
    assert f"{factor:g}x the adapter's 32" in note
    assert linear in note and "SGD" in note and sqrt in note and "Adam" in note
    assert "re-tune" in note
    assert f"# Note: the effective batch is {factor}x the adapter's" in yaml_header(doc)
    assert yaml.safe_load(yaml_header(doc) + yaml.safe_dump(doc))["effective_batch"] == block


def test_a_changed_batch_an_epoch_barely_holds_is_said(tmp_path: Path) -> None:
    # A held-out search on 500 images picked 256 x 4 (2-CPU VM, 2026-11-28): one batch an
    # epoch, an optimizer step every four epochs, and best.yaml said nothing of it.
    record = measured(config=TrainConfig(batch_size=256, grad_accum=4), epoch_batches=1)
    doc = best_document(Winner(record, 300.0, 100.0, None), INFO, None, settings(tmp_path),
                        adapter_batch=32)
    note = doc["effective_batch"]["note"]
    assert ("An epoch of the dataset is about 256 samples: 0.25 optimizer steps at this batch "
            "against 8 at the adapter's.") in note
    # An epoch of many steps at the new batch: the learning-rate note alone.
    roomy = measured(config=TrainConfig(batch_size=256, grad_accum=4), epoch_batches=400)
    doc = best_document(Winner(roomy, 300.0, 100.0, None), INFO, None, settings(tmp_path),
                        adapter_batch=32)
    assert "epoch" not in doc["effective_batch"]["note"]
    # A smaller effective batch takes more steps an epoch than the adapter's: nothing to say.
    smaller = measured(config=TrainConfig(batch_size=8, grad_accum=1), epoch_batches=4)
    doc = best_document(Winner(smaller, 300.0, 100.0, None), INFO, None, settings(tmp_path),
                        adapter_batch=32)
    assert "epoch" not in doc["effective_batch"]["note"]


def test_without_a_baseline_the_effective_batch_is_stated_alone(tmp_path: Path) -> None:
    doc = best_document(Winner(measured(), 300.0, None, None), INFO, None, settings(tmp_path))
    assert doc["effective_batch"] == {"value": 8, "adapter": None}


# -- confidence --------------------------------------------------------------------------------


def entry(trial: int, *runs: float, search: float, baseline: bool = False) -> ConfirmationEntry:
    return ConfirmationEntry(trial=trial, baseline=baseline, search_throughput=search,
                             throughputs=runs, median=statistics.median(runs), spread=None,
                             statuses=("ok",) * len(runs))


def test_a_search_trial_alone_is_low_confidence(tmp_path: Path) -> None:
    doc = document(tmp_path, measured())
    assert doc["confidence"] == "low" and doc["decision"]["verdict"] == "not confirmed"
    assert doc["study"] == {"best_trial": 1, "value": 300.0}


def test_runs_that_contradict_each_other_say_so(tmp_path: Path) -> None:
    # The numbers: the baseline's runs 55 and 2.8k, the winner's 6.9k and 14.6k.
    recs = [measured(0, config=TrainConfig(batch_size=8), peak_rss_mb=100.0),
            measured(4, config=TrainConfig(batch_size=16), peak_rss_mb=200.0),
            measured(7, config=TrainConfig(batch_size=32), peak_rss_mb=400.0)]
    recs[0] = stored_trial(0, value=2000.0, attrs={"config": TrainConfig(batch_size=8).to_dict(),
                                                   "result": {"status": "ok", "throughput": 2000.0},
                                                   "role": "baseline"})
    winner = pick_winner(recs, [entry(7, 6900.0, 14600.0, search=740.0),
                                entry(4, 5000.0, 9000.0, search=2100.0),
                                entry(0, 55.0, 2800.0, search=2000.0, baseline=True)])
    assert winner is not None
    doc = best_document(winner, INFO, None, settings(tmp_path))
    d = doc["decision"]
    assert doc["confidence"] == "low" and d["verdict"] == "tie within noise"
    assert d["tied"] == [7, 4] and doc["config"] == TrainConfig(batch_size=16).to_dict()
    assert "cheapest" in d["picked"] and "trials 7, 4 are within the noise" in d["note"]
    assert d["interval"][0] < 1.0 < d["interval"][1]
    assert d["speedup_confirmed"] is False
    assert d["speedup_note"] == "not confirmed: the baseline's own runs disagree 50.9x"
    assert d["warnings"][0] == ("trial 7: runs disagree by 2.12x (6.9k to 14.6k images/s): "
                                "something besides the config changed the rate between runs")
    assert d["warnings"][-1].startswith("trial 0: runs disagree by 50.9x (55 to 2.8k images/s)")
    header = yaml_header(doc)
    assert "not confirmed: the baseline's own runs disagree 50.9x" in header.splitlines()[0]
    assert "confidence low: tie within noise" in header.splitlines()[0]
    assert yaml.safe_load(header + yaml.safe_dump(doc, sort_keys=False)) == doc


def test_a_config_run_once_fresh_names_the_cause_measured_during_that_run(tmp_path: Path
                                                                           ) -> None:
    # A 2-CPU VM shared with another search (2026-11-28): the baseline read 736 images/s in the
    # search and 18.2 fresh while another process took a CPU; the warning said only that
    # "something besides the config" changed the rate, though the run had measured what.
    recs = [stored_trial(0, value=736.0, attrs={"config": TrainConfig(batch_size=8).to_dict(),
                                                "result": {"status": "ok", "throughput": 736.0},
                                                "role": "baseline"}),
            measured(4, config=TrainConfig(batch_size=16))]
    winner = pick_winner(recs, [entry(4, 560.0, 570.0, search=1070.0),
                                entry(0, 18.2, search=736.0, baseline=True)])
    assert winner is not None
    busy = Noise(seconds=21.1, cpus=2, other_cpu_seconds=21.2,
                 busiest=(OtherProcess(name="python3", pid=26088, cpu_seconds=20.0),))
    run = TrialResult(status=Status.OK, throughput=18.2, noise=busy)
    warnings = spread_warnings(dataclasses.replace(winner, runs={0: (run,)}), "images")
    assert warnings == ["trial 0: runs disagree by 40.4x (18.2 to 736 images/s counting its "
                        "search trial): likely cause: other processes kept 1.0 of the trial's 2 "
                        "CPUs busy (busiest: python3 (pid 26088) 0.9)"]
    # Nothing measured: the cause is not guessed.
    quiet = dataclasses.replace(run, noise=None)
    warnings = spread_warnings(dataclasses.replace(winner, runs={0: (quiet,)}), "images")
    assert warnings[0].endswith("something besides the config changed the rate between runs")


def test_an_unconfirmed_run_names_optunas_best_trial_when_it_is_another(tmp_path: Path) -> None:
    # A resumed study whose new search ended before confirming: the earlier run's winner trial
    # still holds the study's highest value.
    recs = [measured(0), measured(1, config=TrainConfig(batch_size=16)),
            stored_trial(2, value=350.0, attrs={"config": TrainConfig(batch_size=16).to_dict(),
                                                "role": "winner", "confirms": 1,
                                                "result": {"status": "ok", "throughput": 290.0}})]
    winner = pick_winner(recs, None)
    assert winner is not None and winner.record.number == 0
    study = best_document(winner, INFO, None, settings(tmp_path))["study"]
    assert study["best_trial"] == 2 and study["value"] == 350.0 and study["search_trial"] == 0
    assert "not confirmed" in study["note"]


def test_varying_shapes_and_recompiles_go_into_best_yaml(tmp_path: Path) -> None:
    record = measured(shapes_vary=True, shape_range="input_ids[1] 512-1024", shape_count=437,
                      dynamic_shapes=True, recompiles=1, recompile_seconds=12.3456)
    doc = document(tmp_path, record)
    assert doc["measurement"]["recompiles"] == 1
    assert doc["measurement"]["recompile_seconds"] == 12.35
    shapes = doc["shapes"]
    assert shapes["vary"] and shapes["range"] == "input_ids[1] 512-1024"
    assert shapes["distinct"] == 437 and shapes["dynamic_compile"]
    assert "a multiple of 64 would leave at most 9 sizes" in shapes["note"]  # from the range
    assert "runs eager, which pays nothing per shape" in shapes["note"]  # compile "none"
    compiled = document(tmp_path, measured(config=TrainConfig(batch_size=8, compile="default"),
                                           shapes_vary=True, shape_range="input_ids[1] 512-1024"))
    assert "runs eager" not in compiled["shapes"]["note"]
    counted = document(tmp_path, measured(shapes_vary=True, shape_range="input_ids[1] 512-1024",
                                          shape_count=437, shape_count_padded=7))
    assert "would leave 7 of the 437 shapes seen" in counted["shapes"]["note"]  # the trial's
    fixed = document(tmp_path, measured(shapes_vary=False, shape_count=1))
    assert fixed["shapes"] == {"vary": False}
    assert document(tmp_path, measured())["shapes"] is None  # a result from before shapes


def test_a_default_items_count_that_is_not_the_batch_says_what_it_counted() -> None:
    # A held-out GNN without items(): its batches of 64 graphs counted 2,090 "graphs" (their
    # nodes, the first tensor's rows), and every rate was in nodes (2-CPU VM, 2026-11-28).
    from autotune import Adapter
    from autotune.outputs.best import items_note

    class Graphs(Adapter):
        batch_size = 64

    class Counted(Graphs):
        def items(self, batch: Any) -> int:
            return 64

    def base(items: float) -> TrialRecord:
        return stored_trial(0, value=100.0, attrs={
            "config": TrainConfig(batch_size=64).to_dict(), "role": "baseline",
            "result": {"status": "ok", "throughput": 100.0, "batch_items": items}})

    note = items_note(Graphs, [base(2090.0)], "graphs")
    assert note is not None and note.startswith(
        "items() is not defined, so a batch counted its first tensor's rows: 2090 graphs on "
        "average in a batch of 64 samples.")
    assert items_note(Graphs, [base(64.0)], "graphs") is None  # one row a sample
    assert items_note(Counted, [base(2090.0)], "graphs") is None  # the adapter counts them


def test_an_optimizer_that_takes_no_flag_is_said_where_the_space_searches_them() -> None:
    # A held-out fine-tune (2-CPU VM, 2026-11-28) attached its LR scheduler in optimizer(): every
    # trial ran optimizer_impl default, and nothing said why.
    held = TrialResult(status=Status.OK, throughput=1.0, optimizer_impls=("default",))
    note = optimizer_note(held, ("default", "foreach", "fused"))
    assert note is not None and "an LR scheduler" in note and "stayed at default" in note
    assert optimizer_note(held, ("default",)) is None  # the space did not search it
    takes = TrialResult(status=Status.OK, throughput=1.0,
                        optimizer_impls=("default", "foreach", "fused"))
    assert optimizer_note(takes, ("default", "fused")) is None
    assert optimizer_note(None, ("default", "fused")) is None
