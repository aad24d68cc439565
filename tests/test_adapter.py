"""`load_adapter`: the contract is checked up front, with a message naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from broken_adapters import BROKEN, GOOD

from autotune import Adapter, InputError, load_adapter


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
