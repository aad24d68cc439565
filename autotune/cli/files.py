"""The commands on a search's files: `show` a study folder, `export` and `apply` a best.yaml."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from autotune.cli.common import positive
from autotune.contract.errors import InputError


def add_show(sub: argparse._SubParsersAction) -> None:
    show = sub.add_parser("show", help="print the top trials of a study's output folder")
    show.add_argument("out", type=Path, help="the --out folder of a search")
    show.add_argument("--top", type=positive(int), default=10, help="rows to show (default 10)")
    show.set_defaults(func=_show)


def add_export(sub: argparse._SubParsersAction) -> None:
    export = sub.add_parser(
        "export", help="print best.yaml as Hugging Face or Lightning arguments, or shell exports",
        description="Print best.yaml for another trainer: --to hf gives keyword arguments of "
        "transformers.TrainingArguments, --to lightning those of lightning.Trainer and of the "
        "DataLoader, --to env the shell export lines of the allocator settings. Knobs with no "
        "counterpart get a note. YAML by default, or --format json.",
    )
    export.add_argument("config", type=Path, help="best.yaml")
    export.add_argument("--to", required=True, choices=("hf", "lightning", "env"),
                        help="hf (TrainingArguments), lightning (Trainer + DataLoader) or env")
    export.add_argument("--format", choices=("yaml", "json"), default="yaml",
                        help="for hf and lightning (default yaml); env prints shell lines")
    export.set_defaults(func=_export)


def add_apply(sub: argparse._SubParsersAction) -> None:
    apply = sub.add_parser(
        "apply", help="run a command with a config's allocator environment set",
        description="Run COMMAND with the environment best.yaml asks for (the CUDA allocator "
        "settings only take effect when set before the process starts).",
    )
    apply.add_argument("config", type=Path, help="best.yaml")
    apply.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    apply.set_defaults(func=_apply)


def _show(args: argparse.Namespace) -> int:
    from autotune.outputs.show import show

    show(args.out, top=args.top)
    return 0


def _export(args: argparse.Namespace) -> int:
    from autotune.outputs.export import export_text

    sys.stdout.write(export_text(args.config, args.to, fmt=args.format))
    return 0


def _apply(args: argparse.Namespace) -> int:
    from autotune.contract.allocator import ALLOC_ENV, OTHER_ALLOC_ENVS
    from autotune.outputs.export import read_best

    best = read_best(args.config)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise InputError("autotune apply: give the command to run after --, e.g. "
                         "autotune apply best.yaml -- python train.py")
    env = dict(os.environ)
    for name in OTHER_ALLOC_ENVS:
        env.pop(name, None)
    env.pop(ALLOC_ENV, None)
    env.update(best.env)
    try:
        os.execvpe(cmd[0], cmd, env)
    except OSError as exc:
        raise InputError(f"autotune apply: cannot run {cmd[0]!r} ({exc.strerror})") from None
    return 0  # not reached: exec replaced this process
