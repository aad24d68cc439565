"""`load_adapter`: the contract is checked up front, with a message naming the file."""

from __future__ import annotations

import collections
import dataclasses
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import torch
from broken_adapters import BROKEN, GOOD

from autotune import Adapter, InputError, load_adapter
from autotune.adapter import defines


def test_loads_the_one_subclass(tmp_path: Path) -> None:
    path = tmp_path / "good.py"
    path.write_text(GOOD)
    cls = load_adapter(path)
    assert issubclass(cls, Adapter) and cls.__name__ == "Good"
    assert cls.batch_size == 4 and cls.unit == "samples"


def test_loads_the_example_adapters(repo_root: Path, test_adapters: Path) -> None:
    assert load_adapter(repo_root / "adapters" / "mlp.py").__name__ == "MLPAdapter"
    assert load_adapter(test_adapters / "tiny.py").batch_size == 8


def test_subclass_imported_from_elsewhere_does_not_count(tmp_path: Path, test_adapters: Path) -> None:
    # An adapter file may import another adapter (to subclass it); only its own classes count.
    path = tmp_path / "reuse.py"
    path.write_text(
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('tiny_base', {str(test_adapters / 'tiny.py')!r})\n"
        "mod = importlib.util.module_from_spec(spec)\n"
        "sys.modules['tiny_base'] = mod\n"
        "spec.loader.exec_module(mod)\n\n"
        "class Bigger(mod.TinyAdapter):\n    batch_size = 64\n"
    )
    cls = load_adapter(path)
    assert cls.__name__ == "Bigger" and cls.batch_size == 64


def test_an_adapter_imports_a_module_beside_it(tmp_path: Path) -> None:
    # As `python train.py` would: a held-out adapter's `from vision_data import ...` failed with
    # ModuleNotFoundError (2-CPU VM, 2026-11-28).
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "sibling_data_for_test.py").write_text("BATCH = 12\n")
    (folder / "adapter.py").write_text(
        "from sibling_data_for_test import BATCH\n" + GOOD.replace("batch_size = 4",
                                                                   "batch_size = BATCH"))
    try:
        assert load_adapter(folder / "adapter.py").batch_size == 12
    finally:
        import sys
        sys.path.remove(str(folder.resolve()))
        sys.modules.pop("sibling_data_for_test", None)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.py"
    with pytest.raises(InputError, match="adapter file not found") as excinfo:
        load_adapter(path)
    assert str(path) in str(excinfo.value)


def test_directory_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        load_adapter(tmp_path)


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_adapter(tmp_path: Path, case: str) -> None:
    source, expected = BROKEN[case]
    path = tmp_path / f"{case}.py"
    path.write_text(source)
    with pytest.raises(InputError) as excinfo:
        load_adapter(path)
    message = str(excinfo.value)
    assert message.startswith(str(path)), message
    assert expected in message, message


def test_import_failure_shows_the_traceback(tmp_path: Path) -> None:
    path = tmp_path / "fails.py"
    path.write_text("import autotune\n\n\ndef helper():\n    return 1 / 0\n\n\nhelper()\n")
    with pytest.raises(InputError) as excinfo:
        load_adapter(path)
    message = str(excinfo.value)
    assert "Traceback" in message
    assert "ZeroDivisionError" in message
    assert f'File "{path}", line 5, in helper' in message


# -- the default items(batch) -----------------------------------------------------------------------------


@dataclasses.dataclass
class Batch:
    ids: list[int]
    pixels: torch.Tensor


class Pair(NamedTuple):
    x: torch.Tensor
    y: torch.Tensor


class Encoding(collections.UserDict):  # HF's BatchEncoding is a UserDict
    pass


@pytest.mark.parametrize(
    ("batch", "n"),
    [
        ((torch.zeros(5, 3), torch.zeros(5)), 5),
        ([torch.zeros(5, 3), torch.zeros(5)], 5),
        (Pair(torch.zeros(5, 3), torch.zeros(5)), 5),
        (torch.zeros(5, 7), 5),  # one tensor: its rows, not a row's length
        ({"input_ids": torch.zeros(5, 7), "labels": torch.zeros(5)}, 5),
        (Encoding(input_ids=torch.zeros(5, 7)), 5),
        (Batch(ids=[1, 2, 3, 4, 5], pixels=torch.zeros(5, 3, 8, 8)), 5),
        (({"image": torch.zeros(5, 3)}, torch.zeros(5)), 5),
        ([[torch.zeros(5, 3), torch.zeros(5, 3)], torch.zeros(5)], 5),  # two views, one label
        ((["a", "b", "c"], torch.zeros(3)), 3),
        ((["a", "b", "c"],), 3),  # no tensor at all: the first field's length
        ((torch.zeros(()), torch.zeros(4)), 4),  # a 0-d tensor has no length
    ],
    ids=["tuple", "list", "namedtuple", "tensor", "dict", "userdict", "dataclass",
         "nested-dict", "nested-list", "strings-then-tensor", "strings", "scalar-first"],
)
def test_items_is_the_first_tensors_length(batch: Any, n: int) -> None:
    assert Adapter().items(batch) == n


def test_items_of_a_batch_without_length_asks_for_items() -> None:
    with pytest.raises(TypeError, match="define items\\(self, batch\\)"):
        Adapter().items(object())

    class Plain:  # tensors as attributes of a plain class: neither counted nor moved
        def __init__(self) -> None:
            self.x = torch.zeros(4, 2)

    with pytest.raises(TypeError, match="dataclasses .* give its class .to\\(device\\)"):
        Adapter().items(Plain())


def test_optional_methods_are_optional(tmp_path: Path) -> None:
    path = tmp_path / "good.py"
    path.write_text(GOOD)
    cls = load_adapter(path)
    assert cls().loader_args() == {}
    assert not defines(cls, "make_loader") and not defines(cls, "loader_args")
    with pytest.raises(NotImplementedError):
        cls().make_loader([], batch_size=1)


def test_a_good_loader_contract_loads(tmp_path: Path) -> None:
    path = tmp_path / "loader.py"
    path.write_text(GOOD + "\n    def loader_args(self):\n"
                    "        return {'collate_fn': list, 'drop_last': False, 'shuffle': False}\n")
    assert defines(load_adapter(path), "loader_args")
    path.write_text(GOOD + "\n    @staticmethod\n    def make_loader(dataset, *, batch_size, "
                    "num_workers, prefetch_factor=None, pin_memory=False, "
                    "persistent_workers=False):\n        return [dataset]\n")
    assert defines(load_adapter(path), "make_loader")


def test_a_wrong_knob_is_named_by_the_knobs_check_not_blamed_on_loader_args(
        tmp_path: Path) -> None:
    # A user's loader_args read self.params (as docs/adapters.md shows) over a misspelled
    # field: the check of loader_args called it first and reported its traceback, "the adapter's
    # knobs cannot be read", not the field (2026-11-28).
    from autotune.study.space.file import parse_space

    path = tmp_path / "knobbed.py"
    path.write_text(GOOD + "\n    knobs = {'pad': {'choises': [None, 8]}}\n"
                    "    def loader_args(self):\n"
                    "        return {'drop_last': self.params['pad'] is None}\n")
    cls = load_adapter(path)  # loads: the space's check of the knobs says what is wrong
    with pytest.raises(InputError, match=r"knobbed.py: \w+.knobs\['pad'\]: unknown field\(s\) "
                       r"\['choises'\]"):
        parse_space({"num_workers": {"choices": [0]}}, source="space.yaml", adapter=cls,
                    device_type="cpu", cpus=2)
    with pytest.raises(ValueError, match=r"the adapter's knobs\['pad'\] = \{'choises'"):
        cls().params
