"""The knob table: every `TrainConfig` field is a knob declared once, and the rules it carries
(types, bounds, "only with workers") are enforced from that one declaration."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from autotune import Adapter, TrainConfig
from autotune.contract.config import KNOB, KNOBS, describe_config
from autotune.contract.knobs import AMP_DTYPES, COMPILE_MODES, MIN_SPLIT_SIZE_MB, KnobSpec, knob
from autotune.study.space.bound import Condition
from autotune.study.space.file import parse_space

FULL = TrainConfig(batch_size=64, grad_accum=2, num_workers=3, prefetch_factor=4, pin_memory=True,
                   persistent_workers=True, amp_dtype="bf16", compile="max-autotune",
                   checkpoint=0.5, expandable_segments=True, max_split_size_mb=512)


# -- the table ------------------------------------------------------------------------------------


def test_every_field_is_a_knob_in_declaration_order() -> None:
    # but `params`, the adapter's own knobs (contract.params says why)
    fields = [f for f in dataclasses.fields(TrainConfig) if f.name != "params"]
    assert [spec.name for spec in KNOBS] == [f.name for f in fields]
    assert list(KNOB) == [f.name for f in fields]
    for field in fields:
        assert isinstance(field.metadata.get("knob"), KnobSpec), field.name
        assert KNOB[field.name].name == field.name


def test_kinds_come_from_the_annotations() -> None:
    kinds = {spec.name: spec.kind for spec in KNOBS}
    assert kinds == {
        "batch_size": int, "grad_accum": int, "num_workers": int, "prefetch_factor": int,
        "pin_memory": bool, "persistent_workers": bool, "intra_op_threads": int,
        "amp_dtype": str, "compile": str, "compile_scope": str, "checkpoint": float,
        "expandable_segments": bool,
        "max_split_size_mb": int,
        "bucket_cap_mb": int, "gradient_as_bucket_view": bool, "static_graph": bool,
        "optimizer_impl": str, "memory_format": str, "sdpa_backend": str, "cudnn_benchmark": bool,
    }


def test_defaults_are_the_fields_defaults() -> None:
    defaults = TrainConfig(batch_size=8).to_dict()
    for spec in KNOBS:
        if spec.name == "batch_size":
            assert spec.default is None  # the adapter's, not PyTorch's
        else:
            assert spec.default == defaults[spec.name], spec.name


def test_allowed_values_and_bounds() -> None:
    assert KNOB["amp_dtype"].allowed == AMP_DTYPES
    assert KNOB["compile"].allowed == COMPILE_MODES
    assert KNOB["max_split_size_mb"].minimum == MIN_SPLIT_SIZE_MB
    assert KNOB["max_split_size_mb"].nullable
    assert (KNOB["checkpoint"].minimum, KNOB["checkpoint"].maximum) == (0.0, 1.0)
    assert KNOB["batch_size"].minimum == 1 and KNOB["num_workers"].minimum == 0


def test_memory_knobs_are_the_oom_walls_coordinates() -> None:
    memory = {spec.name for spec in KNOBS if spec.memory}
    # Gradients as bucket views drop one copy of the gradients (DDP's docstring).
    # The kernels' knobs too: foreach keeps temporaries of every parameter, the math attention
    # kernel materializes the attention matrix, cuDNN's benchmark may pick algorithms with
    # workspaces, a layout converts activations: an OOM under one value implies nothing of another.
    assert memory == {"batch_size", "amp_dtype", "compile", "compile_scope", "checkpoint", "expandable_segments",
                      "max_split_size_mb", "gradient_as_bucket_view", "optimizer_impl",
                      "memory_format", "sdpa_backend", "cudnn_benchmark"}


def test_ddp_knobs_are_marked_and_default_to_ddps_own() -> None:
    import inspect

    from torch.nn.parallel import DistributedDataParallel

    ddp = {spec.name for spec in KNOBS if spec.ddp}
    assert ddp == {"bucket_cap_mb", "gradient_as_bucket_view", "static_graph"}
    params = inspect.signature(DistributedDataParallel).parameters
    for name in ddp:
        assert KNOB[name].default == params[name].default, name
    assert KNOB["bucket_cap_mb"].nullable  # None: DDP's default buckets, a small first one


def test_cuda_only_values() -> None:
    def cuda_only(name: str, value: Any) -> bool:
        return KNOB[name].cuda_only(value)

    assert cuda_only("pin_memory", True) and not cuda_only("pin_memory", False)
    assert cuda_only("amp_dtype", "tf32") and cuda_only("amp_dtype", "fp16")
    assert not cuda_only("amp_dtype", "bf16") and not cuda_only("amp_dtype", "fp32")
    assert cuda_only("max_split_size_mb", 128) and not cuda_only("max_split_size_mb", None)
    assert cuda_only("expandable_segments", True)
    # torch 2.13 on a CPU runs the flash and math attention kernels, not efficient nor cuDNN's.
    assert [b for b in KNOB["sdpa_backend"].allowed if cuda_only("sdpa_backend", b)] == \
        ["efficient", "cudnn"]
    assert cuda_only("cudnn_benchmark", True)
    assert not any(cuda_only(name, v) for name in ("optimizer_impl", "memory_format")
                   for v in KNOB[name].allowed)
    assert not any(spec.cuda_only(spec.default) for spec in KNOBS)  # the defaults run anywhere


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("batch_size", 0, "must be at least 1, got 0"),
        ("batch_size", True, "must be an integer, got True"),
        ("batch_size", 2.0, "must be an integer, got 2.0"),
        ("checkpoint", 1.5, "must be at most 1, got 1.5"),
        ("checkpoint", "half", "must be a number, got 'half'"),
        ("amp_dtype", "fp8", "must be one of ['fp32', 'tf32', 'bf16', 'fp16'], got 'fp8'"),
        ("max_split_size_mb", 20, "must be at least 21, got 20"),
        ("max_split_size_mb", "big", "must be an integer or null, got 'big'"),
        ("pin_memory", 1, "must be true or false, got 1"),
    ],
)
def test_problem_says_what_is_wrong(name: str, value: Any, problem: str) -> None:
    assert KNOB[name].problem(value) == problem


@pytest.mark.parametrize(
    ("name", "value"),
    [("batch_size", 1), ("checkpoint", 1), ("checkpoint", 0.25), ("max_split_size_mb", None),
     ("prefetch_factor", None), ("compile", "default"), ("pin_memory", True)],
)
def test_no_problem_with_good_values(name: str, value: Any) -> None:
    assert KNOB[name].problem(value) is None


def test_validation_message_names_the_knob_and_the_value() -> None:
    with pytest.raises(ValueError) as excinfo:
        TrainConfig(batch_size=0)
    assert str(excinfo.value) == "batch_size must be at least 1, got 0 (batch_size=0)"


def test_knob_declares_a_field_with_its_spec() -> None:
    @dataclasses.dataclass
    class Two:
        required: int = knob(label="r", minimum=1)
        optional: int = knob(3, label="o")

    first, second = dataclasses.fields(Two)
    assert first.default is dataclasses.MISSING and first.metadata["knob"].default is None
    assert second.default == 3 and second.metadata["knob"].default == 3
    assert Two(required=1).optional == 3


# -- "only with workers": declared once, enforced everywhere ---------------------------------------


def test_the_knobs_that_need_workers() -> None:
    assert {spec.name for spec in KNOBS if spec.needs_workers} == {"prefetch_factor",
                                                                   "persistent_workers"}


@pytest.mark.parametrize("name, value", [("prefetch_factor", 2), ("persistent_workers", True)])
def test_config_refuses_a_worker_knob_without_workers(name: str, value: Any) -> None:
    with pytest.raises(ValueError) as excinfo:
        TrainConfig(batch_size=8, **{name: value})
    assert str(excinfo.value) == (f"{name} needs num_workers > 0 (PyTorch raises otherwise), got "
                                  f"{name}={value!r} with num_workers=0")
    TrainConfig(batch_size=8, num_workers=1, **{name: value})  # with a worker it is fine


def test_applies_reads_num_workers() -> None:
    spec = KNOB["prefetch_factor"]
    assert not spec.applies({"num_workers": 0})
    assert not spec.applies({})
    assert spec.applies({"num_workers": 2})
    assert KNOB["amp_dtype"].applies({"num_workers": 0})  # not a worker knob: always applies


def test_prefetch_default_none_is_a_value_without_being_nullable() -> None:
    spec = KNOB["prefetch_factor"]
    assert not spec.nullable and spec.type_ok(None)  # None: PyTorch's default factor
    assert spec.words == "an integer"
    assert not KNOB["num_workers"].type_ok(None)


class Eight(Adapter):
    batch_size = 8


def test_a_space_samples_worker_knobs_only_with_workers() -> None:
    # The space file names no condition: the knob table adds "num_workers > 0".
    raw = {"num_workers": {"choices": [0, 2]}, "prefetch_factor": {"choices": [2, 4]},
           "persistent_workers": {"choices": [False, True]}}
    space = parse_space(raw, source="s.yaml", adapter=Eight, device_type="cpu", cpus=2)
    by_name = {k.name: k for k in space.knobs}
    for name in ("prefetch_factor", "persistent_workers"):
        assert Condition("num_workers", ">", 0) in by_name[name].when
    config = space.config_from_params({"num_workers": 0, "prefetch_factor": 4,
                                       "persistent_workers": True})
    assert config == TrainConfig(batch_size=8)  # inactive knobs fall back to their defaults


# -- describe ------------------------------------------------------------------------------------------


def test_describe_shows_the_batch_the_dtype_and_what_differs() -> None:
    assert TrainConfig(batch_size=8).describe() == "bs=8 fp32"
    assert TrainConfig(batch_size=8, num_workers=2, pin_memory=True).describe() == \
        "bs=8 workers=2 pin fp32"
    assert FULL.describe() == ("bs=64 accum=2 workers=3 prefetch=4 pin persistent bf16 "
                               "compile=max-autotune ckpt=0.5 expandable split_mb=512")
    assert describe_config(FULL) == FULL.describe()


def test_describe_labels_the_kernel_knobs_short() -> None:
    config = TrainConfig(batch_size=8, optimizer_impl="fused", memory_format="channels_last",
                         sdpa_backend="flash", cudnn_benchmark=True)
    assert config.describe() == "bs=8 fp32 fused channels_last sdpa=flash cudnn_bench"
    assert TrainConfig(batch_size=8, optimizer_impl="foreach").describe() == "bs=8 fp32 foreach"


# -- baseline ------------------------------------------------------------------------------------------


def test_baseline_is_pytorchs_defaults_at_the_adapters_batch() -> None:
    assert TrainConfig.baseline(16) == TrainConfig(batch_size=16)
    assert TrainConfig.baseline(16, None) == TrainConfig(batch_size=16)
    both = TrainConfig.baseline(16, 64)
    assert both == TrainConfig(batch_size=16, grad_accum=4)
    assert both.effective_batch == 64
    assert FULL.effective_batch == 128
