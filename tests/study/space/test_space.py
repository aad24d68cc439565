"""Search spaces: parsing, every validation error, binding to an adapter, and sampling."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest

from autotune import Adapter, InputError, TrainConfig, load_adapter
from autotune.study.space.file import SearchSpace, find_space, load_space, parse_space

SOURCE = "spaces/my_space.yaml"


class Plain(Adapter):
    batch_size = 32


class Global(Adapter):
    """Tuning must keep batch_size * grad_accum == 32."""

    batch_size = 8
    global_batch_size = 32


class Free(Adapter):
    """Lets the search change the effective batch (larger batches, free accumulation)."""

    batch_size = 32
    vary_global_batch = True


def parse(raw: Any, *, adapter: type[Adapter] = Plain, device: str = "cpu", cpus: int = 4,
          vary: bool = False) -> SearchSpace:
    return parse_space(raw, source=SOURCE, adapter=adapter, device_type=device, cpus=cpus,
                       vary_global_batch=vary)


def parse_error(raw: Any, *, key: str, device: str = "cpu", adapter: type[Adapter] = Plain) -> str:
    """The InputError message for `raw`, checked to name the file and the key."""
    with pytest.raises(InputError) as excinfo:
        parse(raw, device=device, adapter=adapter)
    message = str(excinfo.value)
    assert SOURCE in message, message
    assert key in message, message
    return message


def sample(space: SearchSpace, n: int, seed: int = 0) -> list[tuple[TrainConfig, dict[str, Any]]]:
    """`n` configs drawn by a random sampler, each with the Optuna params that produced it."""
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    drawn = []
    for _ in range(n):
        trial = study.ask()
        config = space.suggest(trial)
        study.tell(trial, 1.0)
        drawn.append((config, dict(trial.params)))
    return drawn


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


# -- parsing what is valid -----------------------------------------------------------------------


def test_parse_choices_range_factors_and_description() -> None:
    space = parse({
        "description": "ignored text",
        "num_workers": {"low": 0, "high": "cores"},
        "batch_size": {"factors": [0.5, 1, 2]},
        "amp_dtype": {"choices": ["fp32", "bf16"]},
    }, cpus=3, adapter=Free)
    knobs = {k.name: k for k in space.knobs}
    assert set(knobs) == {"num_workers", "batch_size", "amp_dtype"}
    assert (knobs["num_workers"].low, knobs["num_workers"].high) == (0, 3)  # "cores" = cpus
    assert knobs["batch_size"].choices == (16, 32, 64)
    assert knobs["amp_dtype"].choices == ("fp32", "bf16")
    assert space.source == SOURCE
    assert space.baseline == TrainConfig(batch_size=32)
    assert space.global_batch_size is None


def test_batch_size_choices_always_include_the_adapters_size() -> None:
    space = parse({"batch_size": {"factors": [2, 4]}}, adapter=Free)
    assert space.knobs[0].choices == (32, 64, 128)


def test_duplicate_choices_are_dropped() -> None:
    space = parse({"batch_size": {"factors": [1, 1, 2]}, "grad_accum": {"choices": [1, 2, 2]}},
                  adapter=Free)
    knobs = {k.name: k for k in space.knobs}
    assert knobs["batch_size"].choices == (32, 64)
    assert knobs["grad_accum"].choices == (1, 2)


def test_builtin_spaces_load(repo_root: Path) -> None:
    cpu = load_space(find_space("cpu"), adapter=Plain, device_type="cpu", cpus=2)
    assert "compile" in {k.name for k in cpu.knobs}
    default = load_space(find_space("default"), adapter=Plain, device_type="cuda", cpus=2)
    assert {k.name for k in default.knobs} >= {"pin_memory", "expandable_segments", "checkpoint",
                                               "memory_format", "cudnn_benchmark"}
    assert find_space("cpu").resolve() == (repo_root / "search_spaces" / "cpu.yaml").resolve()


@pytest.mark.parametrize("example", ["mlp", "gpt", "resnet", "tinyblocks"])
@pytest.mark.parametrize("vary", [False, True], ids=["keep-batch", "vary-batch"])
def test_builtin_spaces_load_with_the_examples(repo_root: Path, example: str, vary: bool) -> None:
    adapter = load_adapter(repo_root / "adapters" / f"{example}.py")
    for name, device in (("cpu", "cpu"), ("default", "cuda"), ("full", "cuda")):
        space = load_space(find_space(name), adapter=adapter, device_type=device, cpus=2,
                           vary_global_batch=vary)
        sizes = space.batch_sizes()
        assert adapter.batch_size in sizes
        if vary or adapter.vary_global_batch:
            assert max(sizes) > adapter.batch_size, (name, sizes)
        else:
            kept = space.baseline.effective_batch
            assert all(space.with_batch(space.baseline, b).effective_batch == kept
                       for b in sizes), (name, sizes)


def test_kernel_knobs_of_strings_keep_their_cuda_only_values_off_a_cpu() -> None:
    raw = {"sdpa_backend": {"choices": ["default", "flash", "efficient"]}}
    assert "['efficient'] only mean(s) something on CUDA" in parse_error(raw, key="sdpa_backend")
    assert "cudnn_benchmark" in parse_error({"cudnn_benchmark": {"choices": [False, True]}},
                                            key="cudnn_benchmark")
    cpu = load_space(find_space("cpu"), adapter=Plain, device_type="cpu", cpus=2)
    assert cpu.values("optimizer_impl") == ("default", "foreach", "fused")
    assert cpu.values("sdpa_backend") == ("default",)  # not searched: PyTorch's choice
    full = load_space(find_space("full"), adapter=Plain, device_type="cuda", cpus=2)
    assert full.values("sdpa_backend") == ("default", "flash", "efficient", "cudnn", "math")


def test_builtin_default_space_is_refused_on_cpu() -> None:
    with pytest.raises(InputError, match="pin_memory"):
        load_space(find_space("default"), adapter=Plain, device_type="cpu", cpus=2)


def test_find_space_unknown_name_lists_builtin_spaces() -> None:
    with pytest.raises(InputError, match=r"no such space.*'cpu'.*'default'"):
        find_space("nonexistent")


def test_find_space_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "missing.yaml"
    with pytest.raises(InputError, match="file not found"):
        find_space(str(path))


def test_load_space_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "space.yaml"
    path.write_text("num_workers: {low: 0, high: 2}\namp_dtype: {choices: [fp32, bf16]}\n")
    space = load_space(path, adapter=Plain, device_type="cpu", cpus=2)
    assert space.source == str(path)
    assert [k.name for k in space.knobs] == ["num_workers", "amp_dtype"]


# -- every validation error names the file and the key ---------------------------------------------


def test_unknown_knob() -> None:
    message = parse_error({"num_wrokers": {"low": 0, "high": 2}}, key="num_wrokers")
    assert "known knobs" in message and "num_workers" in message


def test_unknown_field_in_a_knob() -> None:
    parse_error({"amp_dtype": {"choices": ["fp32"], "low": 0}}, key="amp_dtype")


def test_knob_body_must_be_a_mapping() -> None:
    parse_error({"amp_dtype": ["fp32", "bf16"]}, key="amp_dtype")


def test_not_a_mapping_at_all() -> None:
    with pytest.raises(InputError, match=SOURCE):
        parse(["num_workers"])
    with pytest.raises(InputError, match=SOURCE):
        parse({})


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"persistent_workers": {"choices": [False, "maybe"]}}, "persistent_workers"),
        ({"num_workers": {"low": 0.5, "high": 2}}, "num_workers"),
        ({"num_workers": {"low": 0, "high": "many"}}, "num_workers"),
        ({"grad_accum": {"choices": [1, "2"]}}, "grad_accum"),
        ({"grad_accum": {"choices": [1, True]}}, "grad_accum"),
        ({"checkpoint": {"choices": [0.0, 2.0]}}, "checkpoint"),
        ({"batch_size": {"factors": [1, "two"]}}, "batch_size"),
        ({"batch_size": {"factors": [1, 1 / 3]}}, "batch_size"),
        ({"num_workers": {"low": 0, "high": 2, "log": "yes"}}, "num_workers"),
        ({"amp_dtype": {"choices": "fp32"}}, "amp_dtype"),
    ],
    ids=["bool-with-string", "float-low", "string-high", "string-int", "bool-as-int",
         "fraction-above-1", "string-factor", "fractional-size", "log-not-bool", "choices-not-list"],
)
def test_wrong_type(raw: dict[str, Any], key: str) -> None:
    parse_error(raw, key=key, adapter=Free)  # Free: grad_accum is searched, not derived


def test_empty_choices() -> None:
    message = parse_error({"amp_dtype": {"choices": []}}, key="amp_dtype")
    assert "empty" in message


def test_choices_and_range_together() -> None:
    parse_error({"num_workers": {"choices": [0], "low": 0, "high": 1}}, key="num_workers")


def test_range_needs_both_bounds() -> None:
    message = parse_error({"num_workers": {"low": 0}}, key="num_workers")
    assert "'high' is missing" in message


def test_range_low_above_high() -> None:
    message = parse_error({"num_workers": {"low": 4, "high": 2}}, key="num_workers")
    assert "low=4" in message and "high=2" in message


def test_range_below_the_knobs_minimum() -> None:
    parse_error({"batch_size": {"low": 0, "high": 64}}, key="batch_size")
    parse_error({"num_workers": {"low": 1, "high": 2}, "prefetch_factor": {"low": 0, "high": 2}},
                key="prefetch_factor")


def test_log_range_needs_positive_low() -> None:
    parse_error({"num_workers": {"low": 0, "high": 4, "log": True}}, key="num_workers")


def test_value_not_in_allowed_set() -> None:
    message = parse_error({"amp_dtype": {"choices": ["fp32", "fp8"]}}, key="amp_dtype")
    assert "'fp8'" in message and "bf16" in message  # says what is allowed


def test_compile_mode_not_in_allowed_set() -> None:
    parse_error({"compile": {"choices": ["none", "fastest"]}}, key="compile")


def test_ranges_not_allowed_for_categorical_knobs() -> None:
    parse_error({"amp_dtype": {"low": 0, "high": 1}}, key="amp_dtype")


def test_baseline_default_missing_from_choices() -> None:
    message = parse_error({"amp_dtype": {"choices": ["bf16"]}}, key="amp_dtype")
    assert "'fp32'" in message and "baseline" in message


def test_baseline_default_missing_from_range() -> None:
    parse_error({"num_workers": {"low": 1, "high": 2}}, key="num_workers")
    parse_error({"grad_accum": {"low": 2, "high": 4}}, key="grad_accum", adapter=Free)


def test_the_baselines_accumulation_is_always_measurable() -> None:
    # Like the adapter's batch size: trial 0 runs at the adapter's batch and accumulation.
    assert parse({"grad_accum": {"choices": [2, 4]}}, adapter=Free).knobs[0].choices == (1, 2, 4)
    space = parse({"grad_accum": {"choices": [1, 2]}}, adapter=Global, vary=True)
    assert space.baseline == TrainConfig(batch_size=8, grad_accum=4)
    assert space.knobs[0].choices == (4, 1, 2)


@pytest.mark.parametrize(
    ("key", "choices"),
    [
        ("pin_memory", [False, True]),
        ("expandable_segments", [False, True]),
        ("amp_dtype", ["fp32", "fp16"]),
        ("amp_dtype", ["fp32", "tf32"]),
        ("max_split_size_mb", [None, 128]),
    ],
)
def test_cuda_only_values_refused_on_cpu(key: str, choices: list[Any]) -> None:
    raw = {key: {"choices": choices}}
    message = parse_error(raw, key=key, device="cpu")
    assert "CUDA" in message
    space = parse(raw, device="cuda")  # the same values are fine on a GPU
    assert space.knobs[0].choices == tuple(choices)


def test_max_split_size_below_allocator_minimum() -> None:
    parse_error({"max_split_size_mb": {"choices": [None, 16]}}, key="max_split_size_mb",
                device="cuda")


@pytest.mark.parametrize("key", ["pin_memory", "persistent_workers", "expandable_segments"])
def test_bool_knob_refuses_an_int_range(key: str) -> None:
    parse_error({"num_workers": {"low": 0, "high": 2}, key: {"low": 0, "high": 1}}, key=key)


def test_condition_on_unknown_knob() -> None:
    message = parse_error(
        {"compile": {"choices": ["none", "default"], "when": "precision == bf16"}}, key="compile"
    )
    assert "'precision'" in message


@pytest.mark.parametrize(
    "when",
    ["num_workers ~ 0", "num_workers", "> 0", 5, ["num_workers > 0", 3],
     "amp_dtype in bf16", "num_workers > [unclosed"],
    ids=["bad-op", "no-op", "no-knob", "not-a-string", "list-with-int", "in-without-list",
         "bad-yaml-value"],
)
def test_unparseable_condition(when: Any) -> None:
    raw = {"num_workers": {"low": 0, "high": 2},
           "compile": {"choices": ["none", "default"], "when": when}}
    parse_error(raw, key="compile")


def test_condition_value_not_a_value_of_the_knob() -> None:
    message = parse_error(
        {"amp_dtype": {"choices": ["fp32", "bf16"]},
         "compile": {"choices": ["none", "default"], "when": "amp_dtype == fp8"}},
        key="compile",
    )
    assert "fp8" in message


def test_condition_value_of_wrong_type() -> None:
    parse_error(
        {"num_workers": {"low": 0, "high": 2},
         "compile": {"choices": ["none", "default"], "when": "num_workers > two"}},
        key="compile",
    )


def test_condition_on_itself() -> None:
    parse_error({"num_workers": {"low": 0, "high": 2, "when": "num_workers > 0"}},
                key="num_workers")


def test_conditions_in_a_cycle() -> None:
    with pytest.raises(InputError, match=rf"{SOURCE}.*cycle") as excinfo:
        parse({
            "amp_dtype": {"choices": ["fp32", "bf16"], "when": "compile == default"},
            "compile": {"choices": ["none", "default"], "when": "amp_dtype == bf16"},
        })
    assert "amp_dtype" in str(excinfo.value) and "compile" in str(excinfo.value)


def test_global_batch_size_no_divisor() -> None:
    message = parse_error({"batch_size": {"factors": [3]}}, key="batch_size", adapter=Global)
    assert "global_batch_size=32" in message


# -- YAML files ------------------------------------------------------------------------------------


def test_load_space_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text("amp_dtype: {choices: [fp32, fp8]}\n")
    with pytest.raises(InputError) as excinfo:
        load_space(path, adapter=Plain, device_type="cpu", cpus=2)
    assert str(path) in str(excinfo.value) and "amp_dtype" in str(excinfo.value)


def test_load_space_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "missing.yaml"
    with pytest.raises(InputError, match="missing.yaml"):
        load_space(path, adapter=Plain, device_type="cpu", cpus=2)


def test_load_space_invalid_yaml(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("num_workers: {low: 0, high: 2\n")
    with pytest.raises(InputError, match="not valid YAML") as excinfo:
        load_space(path, adapter=Plain, device_type="cpu", cpus=2)
    assert str(path) in str(excinfo.value)


def test_load_space_uses_safe_yaml(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    path = tmp_path / "evil.yaml"
    path.write_text(
        f'num_workers: !!python/object/apply:os.system ["touch {marker}"]\n'
    )
    with pytest.raises(InputError) as excinfo:
        load_space(path, adapter=Plain, device_type="cpu", cpus=2)
    assert str(path) in str(excinfo.value)
    assert not marker.exists(), "the YAML tag was executed: the space is not read with safe_load"


# -- binding to the adapter: global batch size -------------------------------------------------------


def test_global_batch_size_keeps_divisors_and_derives_grad_accum() -> None:
    space = parse({
        "batch_size": {"factors": [0.5, 1, 2, 4, 8]},  # 4, 8, 16, 32, 64
        "grad_accum": {"choices": [1, 2, 4]},  # ignored: derived from the global batch
    }, adapter=Global)
    assert [k.name for k in space.knobs] == ["batch_size"]
    assert set(space.knobs[0].choices or ()) == {4, 8, 16, 32}
    assert space.baseline == TrainConfig(batch_size=8, grad_accum=4)
    assert space.global_batch_size == 32
    drawn = sample(space, 30)
    assert {c.batch_size for c, _ in drawn} == {4, 8, 16, 32}
    for config, _ in drawn:
        assert config.batch_size * config.grad_accum == 32, config


def test_global_batch_size_with_a_range_keeps_divisors() -> None:
    space = parse({"batch_size": {"low": 1, "high": 64}}, adapter=Global)
    assert space.knobs[0].choices == (1, 2, 4, 8, 16, 32)


# -- binding to the adapter: the effective batch is kept unless varying it is asked for -----------


def test_by_default_the_batch_size_is_the_effective_batch_and_accumulation_follows() -> None:
    space = parse({
        "batch_size": {"factors": [0.25, 0.5, 1, 2, 4, 8]},  # 8, 16, 32, 64, 128, 256
        "grad_accum": {"choices": [1, 2, 4]},  # ignored: derived from the effective batch
    })
    assert [k.name for k in space.knobs] == ["batch_size"]
    assert space.knobs[0].choices == (8, 16, 32)  # larger ones cannot keep 32 per step
    assert space.global_batch_size == 32
    drawn = sample(space, 30)
    assert {c.batch_size for c, _ in drawn} == {8, 16, 32}
    for config, _ in drawn:
        assert config.effective_batch == 32, config
    assert space.with_batch(space.baseline, 8) == TrainConfig(batch_size=8, grad_accum=4)
    assert all(c.effective_batch == 32 for c in space.enumerate())


def test_sizes_that_do_not_divide_the_effective_batch_are_dropped() -> None:
    space = parse({"batch_size": {"choices": [12, 16, 24, 32, 48]}})
    assert space.knobs[0].choices == (16, 32)


def test_no_divisor_of_the_effective_batch_says_how_to_vary_it() -> None:
    message = parse_error({"batch_size": {"factors": [2, 4]}}, key="batch_size")
    assert "batch_size=32" in message and "--vary-global-batch" in message


@pytest.mark.parametrize("how", ["flag", "attribute"])
def test_varying_the_effective_batch_is_asked_for(how: str) -> None:
    raw = {"batch_size": {"factors": [0.5, 1, 2]}, "grad_accum": {"choices": [1, 2]}}
    space = parse(raw, vary=True) if how == "flag" else parse(raw, adapter=Free)
    assert space.global_batch_size is None
    knobs = {k.name: k for k in space.knobs}
    assert knobs["batch_size"].choices == (16, 32, 64)
    assert knobs["grad_accum"].choices == (1, 2)
    assert {c.effective_batch for c in space.enumerate()} == {16, 32, 64, 128}


def test_varying_a_global_batch_searches_accumulation_from_its_baseline() -> None:
    space = parse({"batch_size": {"factors": [1, 2]}, "grad_accum": {"choices": [1, 2, 4]}},
                  adapter=Global, vary=True)
    assert space.baseline == TrainConfig(batch_size=8, grad_accum=4)
    assert {k.name: k.choices for k in space.knobs} == {"batch_size": (8, 16),
                                                        "grad_accum": (1, 2, 4)}
    assert {c.effective_batch for c in space.enumerate()} == {8, 16, 32, 64}


class Contrastive(Adapter):
    """In-batch negatives: 64 samples a step, 63 negatives each; two micro-batches of 32
    accumulated compute another loss (31 negatives each)."""

    batch_size = 64
    samples_interact = True


class ContrastiveAccum(Contrastive):
    batch_size = 16
    global_batch_size = 64  # the user's own accumulation: 4 micro-batches of 16


def test_samples_that_interact_keep_their_micro_batch() -> None:
    # A held-out two-tower model (2-CPU VM, 2026-11-28) ran bs=32 accum=2 for its batch of 64
    # under a contrastive loss, while best.yaml's plot said the effective batch was kept.
    raw = {"batch_size": {"factors": [0.25, 0.5, 1, 2]}, "grad_accum": {"choices": [1, 2, 4]},
           "num_workers": {"choices": [0, 1]}}
    space = parse(raw, adapter=Contrastive)
    assert {c.batch_size for c in space.enumerate()} == {64}
    assert {c.grad_accum for c in space.enumerate()} == {1}
    # The user's own accumulation is theirs, kept as it is.
    space = parse(raw, adapter=ContrastiveAccum)
    assert {(c.batch_size, c.grad_accum) for c in space.enumerate()} == {(16, 4)}
    # Varying the effective batch varies the batch, never splitting it into micro-batches.
    space = parse(raw, adapter=Contrastive, vary=True)
    assert {(c.batch_size, c.grad_accum) for c in space.enumerate()} == {
        (16, 1), (32, 1), (64, 1), (128, 1)}


# -- sampling ----------------------------------------------------------------------------------------


def test_conditions_are_respected_when_sampling() -> None:
    space = parse({
        "amp_dtype": {"choices": ["fp32", "bf16"]},
        "compile": {"choices": ["none", "default"], "when": "amp_dtype == bf16"},
    })
    drawn = sample(space, 40)
    for config, params in drawn:
        if config.amp_dtype == "fp32":
            assert "compile" not in params and config.compile == "none", (config, params)
        else:
            assert "compile" in params
    assert any(c.compile == "default" for c, _ in drawn)  # the condition did let it through


def test_conditions_joined_by_and_and_list_form() -> None:
    for when in ("amp_dtype == bf16 and num_workers > 0", ["amp_dtype == bf16", "num_workers > 0"]):
        space = parse({
            "num_workers": {"low": 0, "high": 2},
            "amp_dtype": {"choices": ["fp32", "bf16"]},
            "compile": {"choices": ["none", "default"], "when": when},
        })
        drawn = sample(space, 40)
        for config, params in drawn:
            active = config.amp_dtype == "bf16" and config.num_workers > 0
            assert ("compile" in params) == active, (when, config, params)
        assert any("compile" in p for _, p in drawn)


def test_in_and_not_in_conditions() -> None:
    space = parse({
        "amp_dtype": {"choices": ["fp32", "bf16"]},
        "compile": {"choices": ["none", "default"], "when": "amp_dtype in [bf16]"},
        "grad_accum": {"choices": [1, 2], "when": "amp_dtype not in [bf16]"},
    }, adapter=Free)
    for config, params in sample(space, 30):
        assert ("compile" in params) == (config.amp_dtype == "bf16")
        assert ("grad_accum" in params) == (config.amp_dtype == "fp32")


def test_conditional_knob_sampled_after_the_knob_it_reads() -> None:
    # num_workers comes first in the file and in the built-in order, but depends on amp_dtype.
    space = parse({
        "num_workers": {"low": 0, "high": 2, "when": "amp_dtype == bf16"},
        "amp_dtype": {"choices": ["fp32", "bf16"]},
    })
    assert [k.name for k in space.knobs] == ["amp_dtype", "num_workers"]
    for config, params in sample(space, 30):
        assert ("num_workers" in params) == (config.amp_dtype == "bf16")


def test_prefetch_and_persistence_never_sampled_without_workers() -> None:
    space = parse({
        "num_workers": {"low": 0, "high": 2},
        "prefetch_factor": {"choices": [2, 4]},
        "persistent_workers": {"choices": [False, True]},
    })
    drawn = sample(space, 60)
    for config, params in drawn:
        if config.num_workers == 0:
            assert "prefetch_factor" not in params and "persistent_workers" not in params
            assert config.prefetch_factor is None and config.persistent_workers is False
        else:
            assert {"prefetch_factor", "persistent_workers"} <= set(params)
    assert any(c.num_workers == 0 for c, _ in drawn)
    assert any(c.prefetch_factor == 4 and c.persistent_workers for c, _ in drawn)


def test_params_round_trip_through_configs() -> None:
    space = parse({
        "num_workers": {"low": 0, "high": 2},
        "prefetch_factor": {"choices": [2, 4]},
        "batch_size": {"factors": [1, 2]},
        "amp_dtype": {"choices": ["fp32", "bf16"]},
    })
    for config, params in sample(space, 20):
        assert space.config_from_params(params) == config
        assert space.params_for(config) == params


def test_baseline_is_sampled_from_its_enqueued_params() -> None:
    space = parse({
        "num_workers": {"low": 0, "high": 2},
        "prefetch_factor": {"choices": [2, 4]},
        "batch_size": {"factors": [0.5, 2]},
        "amp_dtype": {"choices": ["fp32", "bf16"]},
    })
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    study.enqueue_trial(space.params_for(space.baseline))
    trial = study.ask()
    assert space.suggest(trial) == space.baseline == TrainConfig(batch_size=32)


# -- DDP knobs --------------------------------------------------------------------------------------

DDP_KNOBS = {"bucket_cap_mb": {"choices": [None, 10, 100]},
             "gradient_as_bucket_view": {"choices": [False, True]},
             "static_graph": {"choices": [False, True]}}


def test_ddp_knobs_are_searched_only_across_ranks() -> None:
    raw = {"num_workers": {"choices": [0, 1]}, **DDP_KNOBS}
    one = parse(raw)
    assert [k.name for k in one.knobs] == ["num_workers"]  # one process: nothing to all-reduce
    assert {c.bucket_cap_mb for c in one.enumerate()} == {None}
    two = parse_space(raw, source=SOURCE, adapter=Plain, device_type="cpu", cpus=4, nproc=2)
    assert {k.name for k in two.knobs} == {"num_workers", *DDP_KNOBS}
    assert len(two.enumerate()) == 2 * 3 * 2 * 2
    assert two.baseline.bucket_cap_mb is None  # DDP's own default buckets


def test_ddp_knobs_are_validated_even_for_one_process() -> None:
    message = parse_error({"bucket_cap_mb": {"choices": [None, 0]}}, key="bucket_cap_mb")
    assert "at least 1" in message
    message = parse_error({"bucket_cap_mb": {"choices": [10, 100]}}, key="bucket_cap_mb")
    assert "null" in message  # the baseline's DDP default must be measurable


@pytest.mark.parametrize("name", ["default", "full", "cpu"])
def test_builtin_spaces_search_the_ddp_knobs_across_ranks(name: str) -> None:
    device = "cpu" if name == "cpu" else "cuda"
    space = load_space(find_space(name), adapter=Plain, device_type=device, cpus=4, nproc=2)
    assert set(DDP_KNOBS) <= {k.name for k in space.knobs}


def test_thread_counts_above_the_cpus_are_left_out() -> None:
    # On a 2-CPU VM 4 torch threads beside 2 loader workers ran 466 images/s against 7.6k with
    # one (quick start, 2026-11-26): more threads than CPUs only oversubscribes them.
    raw = {"intra_op_threads": {"choices": [None, 1, 2, 4, 8]}}
    knobs = {k.name: k for k in parse(raw, cpus=2).knobs}
    assert knobs["intra_op_threads"].choices == (None, 1, 2)
    knobs = {k.name: k for k in parse(raw, cpus=16).knobs}
    assert knobs["intra_op_threads"].choices == (None, 1, 2, 4, 8)
