"""Adapter files that `load_adapter` must refuse, with a word its message must contain.

Shared by test_adapter.py (the function) and test_cli.py (the command line).
"""

from __future__ import annotations

_GOOD_BODY = '''
    def dataset(self):
        return []

    def model(self):
        return None

    def optimizer(self, model):
        return None

    def loss(self, model, batch):
        return None
'''

BROKEN: dict[str, tuple[str, str]] = {
    "syntax-error": (
        "import autotune\n\nclass A(autotune.Adapter)\n    batch_size = 8\n",
        "SyntaxError",
    ),
    "import-error": (
        "import autotune\nimport no_such_module_for_autotune_tests\n",
        "ModuleNotFoundError: No module named 'no_such_module_for_autotune_tests'",
    ),
    "error-at-import": (
        "import autotune\n\nraise RuntimeError('the adapter failed while importing')\n",
        "RuntimeError: the adapter failed while importing",
    ),
    "no-subclass": (
        "import autotune\n\nclass NotAnAdapter:\n    batch_size = 8\n",
        "no subclass of autotune.Adapter",
    ),
    "two-subclasses": (
        "import autotune\n\n"
        f"class First(autotune.Adapter):{_GOOD_BODY}\n"
        f"class Second(autotune.Adapter):{_GOOD_BODY}",
        "2 Adapter subclasses (First, Second)",
    ),
    "missing-loss": (
        "import autotune\n\n"
        "class NoLoss(autotune.Adapter):\n"
        "    def dataset(self):\n        return []\n\n"
        "    def model(self):\n        return None\n\n"
        "    def optimizer(self, model):\n        return None\n",
        "NoLoss does not define loss",
    ),
    "bad-batch-size": (
        "import autotune\n\n" f"class A(autotune.Adapter):\n    batch_size = 0\n{_GOOD_BODY}",
        "batch_size must be a positive integer",
    ),
    "global-batch-not-a-multiple": (
        "import autotune\n\n"
        f"class A(autotune.Adapter):\n    batch_size = 8\n    global_batch_size = 20\n{_GOOD_BODY}",
        "global_batch_size=20 is not a multiple of batch_size=8",
    ),
}

GOOD = "import autotune\n\n" f"class Good(autotune.Adapter):\n    batch_size = 4\n{_GOOD_BODY}"
