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
    "typo-in-loss": (  # named as the near miss it is (a held-out user's `def los`)
        "import autotune\n\n"
        "class Typo(autotune.Adapter):\n"
        "    def dataset(self):\n        return []\n\n"
        "    def model(self):\n        return None\n\n"
        "    def optimizer(self, model):\n        return None\n\n"
        "    def los(self, model, batch):\n        return None\n",
        "does not define loss; an adapter must define dataset, model, optimizer, loss (it "
        "defines `los`: a typo of `loss`?)",
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
    "vary-global-batch-not-a-bool": (
        "import autotune\n\n"
        f"class A(autotune.Adapter):\n    vary_global_batch = 'yes'\n{_GOOD_BODY}",
        "A.vary_global_batch must be True or False, got 'yes'",
    ),
    "samples-interact-not-a-bool": (
        "import autotune\n\n"
        f"class A(autotune.Adapter):\n    samples_interact = 1\n{_GOOD_BODY}",
        "A.samples_interact must be True or False, got 1",
    ),
}

_ONE_ARG_LOSS = _GOOD_BODY.replace("def loss(self, model, batch)", "def loss(self, batch)")
_DATASET_LIST = _GOOD_BODY.replace("def dataset(self):\n        return []", "dataset = []")

BROKEN.update({
    "loader-args-knob": (
        "import autotune\n\n" f"class A(autotune.Adapter):{_GOOD_BODY}\n"
        "    def loader_args(self):\n        return {'collate_fn': None, 'num_workers': 4}\n",
        "A.loader_args() sets 'num_workers', a knob the tool owns and searches",
    ),
    "loader-args-batch-sampler": (
        "import autotune\n\n" f"class A(autotune.Adapter):{_GOOD_BODY}\n"
        "    def loader_args(self):\n        return {'batch_sampler': None}\n",
        "A.loader_args() sets 'batch_sampler': a batch sampler fixes the batch size",
    ),
    "loader-args-not-a-dict": (
        "import autotune\n\n" f"class A(autotune.Adapter):{_GOOD_BODY}\n"
        "    def loader_args(self):\n        return [('collate_fn', None)]\n",
        "A.loader_args() returned list, not a dict",
    ),
    "loader-args-raises": (
        "import autotune\n\n" f"class A(autotune.Adapter):{_GOOD_BODY}\n"
        "    def loader_args(self):\n        raise KeyError('no such collate')\n",
        "A().loader_args() failed:\nTraceback",
    ),
    "loader-args-attribute-error-elsewhere": (  # not one of self's: its own error, reported
        "import autotune\n\n" f"class A(autotune.Adapter):{_GOOD_BODY}\n"
        "    def loader_args(self):\n        return {'collate_fn': None.fn}\n",
        "A().loader_args() failed:\nTraceback",
    ),
    "loader-args-and-make-loader": (
        "import autotune\n\n" f"class A(autotune.Adapter):{_GOOD_BODY}\n"
        "    def loader_args(self):\n        return {}\n\n"
        "    def make_loader(self, dataset, **knobs):\n        return []\n",
        "A defines both make_loader and loader_args",
    ),
    "make-loader-signature": (
        "import autotune\n\n" f"class A(autotune.Adapter):{_GOOD_BODY}\n"
        "    def make_loader(self, dataset, batch_size):\n        return []\n",
        "A.make_loader(self, dataset, batch_size) cannot be called as make_loader(dataset, "
        "batch_size=..., num_workers=...",
    ),
    "loss-signature": (
        "import autotune\n\n" f"class A(autotune.Adapter):{_ONE_ARG_LOSS}",
        "A.loss(self, batch) cannot be called as loss(model, batch)",
    ),
    "dataset-not-a-method": (
        "import autotune\n\n" f"class A(autotune.Adapter):{_DATASET_LIST}",
        "A.dataset is a list, not a method; define `def dataset(self)`",
    ),
})

GOOD = "import autotune\n\n" f"class Good(autotune.Adapter):\n    batch_size = 4\n{_GOOD_BODY}"
