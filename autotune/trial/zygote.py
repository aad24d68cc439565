"""A fork server for trials: pay the torch import, the adapter import and the dataset build once.

Run as `python -m autotune.trial.zygote ADAPTER_PATH` by the parent (`study.forkserver`). It
imports torch and the trial code, loads the adapter, builds its dataset, and then forks one
child per trial request. CUDA is never started here: each child starts it itself, after its
allocator settings are in its environment, so `PYTORCH_CUDA_ALLOC_CONF` still takes effect.

Protocol, one JSON object per line on stdin, answers on stdout:
    -> {"trial_dir": "...", "env": {...}, "unset": [...]}
    <- {"pid": N}                       the child's pid (it leads its own process group)
    <- {"exit": N, "returncode": R}     once it has ended (R < 0: killed by signal -R)
The server answers {"ready": true, ...} once, after start-up, or {"error": "..."} and exits.

With `--once` it is a spare fresh process instead (`study.spare`): it makes the same start-up,
answers ready, and runs the one request it is then given itself, without forking, as the
process it was launched as (the leader of its own process group). A confirmation run so gets a
process that has run nothing before, whose imports were made while the previous run compiled.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any, TextIO

__all__ = ["main"]

# Not `cuInit` through `torch.cuda.is_available()`: a process that initialised the CUDA driver
# cannot use CUDA in a forked child. The NVML-based check answers without it (PyTorch docs,
# torch.cuda.is_available).
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")


def _answer(out: TextIO, message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def _preload(adapter_path: str) -> tuple[Any, str]:
    """Import torch and the trial code, load the adapter and build its dataset once."""
    import torch

    import torch._dynamo  # noqa: F401 -- optimizers import it lazily: 1.4 s of each trial
    import autotune.trial.compose  # noqa: F401 -- imported once here, not in every trial
    import autotune.trial.diagnose  # noqa: F401
    import autotune.trial.fingerprint
    from autotune.adapter import load_adapter
    from autotune.contract.params import Built, built_state, instantiate
    from autotune.trial.worker import Preloaded

    try:  # what each torch.compile trial would import again (seconds)
        import torch._inductor.compile_fx  # noqa: F401
    except ImportError:
        pass
    # nvidia-smi answers without CUDA in this process; asked once here, each child has the answer
    # (0.2-1 s a trial otherwise).
    autotune.trial.fingerprint.driver_version()
    adapter_cls = load_adapter(adapter_path)
    # One intra-op thread while building: a process whose OpenMP pool has started is not
    # safe to fork. Each child gets the usual thread count back.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    note, state = "", {}
    try:
        adapter = instantiate(adapter_cls, {})  # at the knobs' defaults
        dataset, state = built_state(adapter, adapter.dataset)
    except Exception as exc:  # reported by every trial, which builds it again and fails there
        dataset, note = None, f"dataset() failed in the fork server: {type(exc).__name__}: {exc}"
    torch.set_num_threads(threads)
    if torch.cuda.is_initialized():
        raise RuntimeError("the adapter started CUDA at import or in dataset(): trials cannot "
                           "be forked from this process")
    # What dataset() set on its adapter travels with it, set on each trial's (`restored`).
    return Preloaded(adapter_path=adapter_path, adapter_cls=adapter_cls,
                     dataset=Built(dataset, state) if state else dataset), note


def _apply_allocator_settings(torch: Any) -> None:
    """Hand the child's allocator settings to the allocator itself, too: depending on the
    PyTorch version the allocator's configuration may have been read from the environment
    when torch was imported (by the server, without settings), not when CUDA starts. Each
    child starts from the server's defaults, so only settings that differ need applying."""
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    setter = getattr(torch.cuda.memory, "_set_allocator_settings", None)
    if conf and setter is not None:
        setter(conf)


def _child(request: dict[str, Any], preloaded: Any, threads: int, *, forked: bool = True) -> None:
    """In the forked child (or the spare itself): lead a process group of its own, log to the
    trial's log, run."""
    started = time.perf_counter()
    code = 1
    try:
        if forked:  # a spare was launched leading its own session already
            os.setsid()
        trial_dir = request["trial_dir"]
        log = os.open(os.path.join(trial_dir, "log.txt"), os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                      0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdout = os.fdopen(1, "w", buffering=1)
        sys.stderr = os.fdopen(2, "w", buffering=1)
        for name in request.get("unset", ()):
            os.environ.pop(name, None)
        os.environ.update(request.get("env", {}))
        from autotune.contract.host import pin_to_share

        pin_to_share()

        import torch

        from autotune.trial.lifetime import die_with_parent
        from autotune.trial.worker import serve

        die_with_parent()
        torch.set_num_threads(threads)
        _apply_allocator_settings(torch)
        from pathlib import Path

        code = serve(Path(trial_dir), started=started, preloaded=preloaded)
    except BaseException:  # the child must never return into the server's loop
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    once = "--once" in args
    args = [a for a in args if a != "--once"]
    if len(args) != 1:
        print("usage: python -m autotune.trial.zygote ADAPTER_PATH [--once]", file=sys.stderr)
        return 2
    out = sys.stdout
    from autotune.contract.host import pin_to_share
    from autotune.trial.lifetime import die_with_parent

    die_with_parent()
    # A server of one GPU slot: pinned before torch is imported, so its thread pool and every
    # child it forks (and their DataLoader workers) keep to the slot's CPUs.
    pin_to_share()
    try:
        preloaded, note = _preload(args[0])
    except Exception as exc:  # the parent falls back to one fresh process per trial
        traceback.print_exc()
        _answer(out, {"error": f"{type(exc).__name__}: {exc}"})
        return 1
    import torch

    threads = torch.get_num_threads()
    _answer(out, {"ready": True, "note": note})
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if once:
            _answer(out, {"pid": os.getpid()})
            _child(request, preloaded, threads, forked=False)  # never returns
        pid = os.fork()
        if pid == 0:
            _child(request, preloaded, threads)  # never returns
        _answer(out, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        _answer(out, {"exit": pid, "returncode": os.waitstatus_to_exitcode(status)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
