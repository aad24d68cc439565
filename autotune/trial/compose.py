"""Build the user's training step with a config's knobs applied, in the one right order."""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sized
from contextlib import AbstractContextManager
from typing import Any

import torch

from autotune.adapter import Adapter
from autotune.contract.config import TrainConfig
from autotune.contract.params import restored
from autotune.contract.phases import Phase
from autotune.contract.request import CUDAGRAPH_MODES
from autotune.contract.result import NO_BATCH
from autotune.trial.blame import blame, blaming, check_loss
from autotune.trial.features.amp import apply_amp
from autotune.trial.features.compile import (compile_loss, compiled_dynamic, dims_to_mark,
                                             mark_varying)
from autotune.trial.features.dataloader import build_loader, to_device
from autotune.trial.features.ddp import no_sync
from autotune.trial.features.memory_format import batch_format, conv_weights
from autotune.trial.features.optimizer import apply_optimizer_impl, optimizer_impls
from autotune.trial.features.sdpa import apply_sdpa
from autotune.trial.features.threads import apply_threads
from autotune.trial.model_features import apply_model_features
from autotune.trial.replicas import ReplicaCheck
from autotune.trial.shapes import ShapeLog, signature
from autotune.trial.warmup import StepResult

__all__ = ["PEEK_BATCHES", "REGIONS", "TrainStep", "apply_model_features", "compose", "no_region"]

PEEK_BATCHES = 8
"""Batches a compiled step pulls before its first call to see if their shapes vary (trained on)."""

REGIONS = ("data wait", "host-to-device", "forward", "backward", "optimizer", "GPU wait")
"""The parts of a step `TrainStep.region` names, in the order a step takes them; the last is
`autotune profile`'s own: the host waiting at the step's end for its kernels to finish."""

_NO_REGION = contextlib.nullcontext()  # reusable: entering it does nothing


def no_region(name: str) -> AbstractContextManager[Any]:
    """A step's regions outside a profile: nothing (0.4 us each, about five a step)."""
    return _NO_REGION


class TrainStep:
    """One optimizer step of `grad_accum` micro-batches, callable repeatedly (epochs roll over).

    Exceptions raised by the adapter's code are marked with the part they came from
    (`blame`): in the baseline trial that is a fault no config can fix.
    """

    def __init__(
        self,
        adapter: Adapter,
        config: TrainConfig,
        device: torch.device,
        *,
        clock: Callable[[], float] = time.perf_counter,
        dataset: Any = None,
        on_phase: Callable[[Phase], None] = lambda phase: None,
        ddp: Callable[[torch.nn.Module], torch.nn.Module] | None = None,
    ) -> None:
        self.adapter = adapter
        self.config = config
        self.device = device
        self.clock = clock
        # Process-wide first: the model's first ops start the intra-op pool at this size.
        apply_threads(config.intra_op_threads)
        self.amp = apply_amp(config.amp_dtype, device.type)
        on_phase(Phase.MODEL)
        with blaming("model()"):
            model = adapter.model()
            if not isinstance(model, torch.nn.Module):
                raise TypeError(f"adapter.model must return a torch.nn.Module, got "
                                f"{type(model).__name__}")
        # Move to the device before building the optimizer, so its state lives there too.
        self.model = model.to(device)
        self.conv_weights = conv_weights(self.model)
        with blaming("optimizer(model)"):
            optimizer = adapter.optimizer(self.model)
        self.optimizer_impls = optimizer_impls(optimizer)  # before a rebuild: the adapter's
        self.optimizer, note = apply_optimizer_impl(optimizer, config.optimizer_impl,
                                                    amp_dtype=config.amp_dtype)
        if note:
            print(f"autotune: {note}", file=sys.stderr)
        with blaming("blocks(model)"):
            blocks = adapter.blocks(model)
        self.forward_model, self.blocks_checkpointed = apply_model_features(
            self.model, blocks, amp_dtype=config.amp_dtype, checkpoint=config.checkpoint,
            compile=config.compile, compile_scope=config.compile_scope, ddp=ddp,
            memory_format=config.memory_format, cudnn_benchmark=config.cudnn_benchmark)
        self.compiled_loss = compile_loss(adapter.loss, config.compile, config.compile_scope)
        """The adapter's loss compiled whole (`compile_scope` "loss"), else None."""
        self._batch_format = batch_format(config.memory_format)
        self._kernels = apply_sdpa(config.sdpa_backend)  # around each forward and backward
        # The DDP module (under compile's wrapper, if any): accumulating micro-batches skip
        # its all-reduce but the last (`no_sync`).
        self._ddp = getattr(self.forward_model, "_orig_mod", self.forward_model) if ddp else None
        self._stepped = False
        on_phase(Phase.DATASET)
        if dataset is None:
            with blaming("dataset()"):
                dataset = adapter.dataset()
        self.loader = build_loader(adapter, config, restored(adapter, dataset))
        self._iterator: Iterator[Any] | None = None
        self._pending: deque[Any] = deque()
        """Batches pulled ahead (the first, the peeked ones), trained on first, in order."""
        self.shapes = ShapeLog(config.batch_size)
        """The shapes of every batch this step pulled, and what they held (`amounts`)."""
        self._replicas = ReplicaCheck(self.loader)  # a stream every worker replays whole
        self.dynamic_shapes = False  # compiled with dynamic shapes (the peeked batches varied)
        self._varying: frozenset[tuple[str, int]] = frozenset()  # the dims that varied
        self._mark_cudagraph_step = device.type == "cuda" and config.compile in CUDAGRAPH_MODES
        self._loss_sum = torch.zeros((), device=device)
        self.region: Callable[[str], AbstractContextManager[Any]] = no_region
        """Wraps each part of the step named in REGIONS: nothing, or a profiler's range."""

    def start_loader(self) -> None:
        """Wait for the loader's first batch (workers starting, the sampler, the first reads)
        and keep it for the first step, so that warm-up times the step, not the start-up.
        A compiled step pulls PEEK_BATCHES: if their shapes differ, it compiles with dynamic shapes
        from the start, marking the varying dims of many sizes (`dims_to_mark`)."""
        if not self._pending:
            self._pending.append(self._pull())
        if self.config.compile == "none" or self.dynamic_shapes:
            return
        while len(self._pending) < PEEK_BATCHES:
            self._pending.append(self._pull())
        if len(set(seen := [signature(batch) for batch in self._pending])) > 1:
            self._varying = dims_to_mark(seen)
            self.forward_model = compiled_dynamic(self.forward_model, self.config.compile)
            self.compiled_loss = compile_loss(self.adapter.loss, self.config.compile,
                                              self.config.compile_scope, dynamic=True)
            self.dynamic_shapes = True

    def next_batch(self) -> tuple[Any, int]:
        """The next CPU batch and its item count, starting a new epoch when one ends."""
        batch = self._pending.popleft() if self._pending else self._pull()
        try:
            n = int(self.adapter.items(batch))
        except Exception as exc:
            blame(exc, "items(batch)")
            raise
        self.shapes.add(signature(batch), items=n, batch=batch)
        self._replicas.add(batch)
        return batch, n

    def epoch_batches(self) -> int | None:
        """Batches in one epoch of the loader (`len`), None when it has none (a stream)."""
        if not isinstance(self.loader, Sized):
            return None
        try:
            n = len(self.loader)
        except (TypeError, NotImplementedError):  # DataLoader's over an IterableDataset
            return None
        return n if n > 0 else None

    def skip_queued(self, waited: float, most: int, seconds: float = math.inf) -> int:
        """Drop the batches the loader has ready: pull with no step between until a pull
        blocks `waited` seconds or more (its queue is empty: the workers are making the next
        ones), `most` are dropped, or `seconds` have passed. Returns how many were dropped."""
        end = self.clock() + seconds
        dropped = 0
        while dropped < most:
            t0 = self.clock()
            self.next_batch()
            dropped += 1
            now = self.clock()
            if now - t0 >= waited or now >= end:
                break
        return dropped

    def _pull(self) -> Any:
        try:
            if self._iterator is None:
                self._iterator = iter(self.loader)
            try:
                return next(self._iterator)
            except StopIteration:
                self._iterator = iter(self.loader)
            try:
                return next(self._iterator)
            except StopIteration:
                raise RuntimeError(f"{NO_BATCH} (batch_size={self.config.batch_size}): a dataset "
                                   "smaller than one batch with drop_last, or a make_loader "
                                   "that returns an iterator, not an iterable") from None
        except Exception as exc:
            blame(exc, "loader (dataset, collate_fn, sampler)")
            raise

    def __call__(self) -> StepResult:
        # new: micro-batches at shapes no step ran (under CUDA graphs, a graph per shape: a cost)
        items, wait, new = 0, 0.0, 0
        accum = self.config.grad_accum
        for i in range(accum):
            # Data wait is the time blocked on the DataLoader. The copy is left out of it: a
            # pageable copy waits for the GPU to finish queued compute, which is not input cost.
            with self.region("data wait"):
                t0 = self.clock()
                batch, n = self.next_batch()
                wait += self.clock() - t0
            new += self.shapes.run_last() and not self._mark_cudagraph_step
            with self.region("host-to-device"):
                batch = self.to_device(batch, non_blocking=self.config.pin_memory)
            items += n
            self._micro_step(batch, accum, last=i == accum - 1)
        self.optimizer_step()
        return StepResult(items=items, data_wait=wait, new_shape=new > 0, new_share=new / accum)

    def to_device(self, batch: Any, *, non_blocking: bool) -> Any:
        """A CPU batch on the device, its 4-D floating tensors in the config's memory format."""
        return mark_varying(to_device(batch, self.device, non_blocking, self._batch_format),
                            self._varying)

    def micro_step(self, batch: Any, accum: int) -> None:
        """Forward and backward of one micro-batch already on the device."""
        if self._mark_cudagraph_step:
            torch.compiler.cudagraph_mark_step_begin()
        with self._kernels:  # a forced attention kernel that cannot run: the config's error
            self._forward_backward(batch, accum)

    def _forward_backward(self, batch: Any, accum: int) -> None:
        try:
            with self.region("forward"), self.amp.autocast():
                loss = (self.compiled_loss or self.adapter.loss)(self.forward_model, batch)
            check_loss(loss)
        except Exception as exc:
            blame(exc, "loss(model, batch)")
            raise
        loss = loss / accum
        # Accumulate on the device: reading it (.item()) inside timed steps would synchronize.
        self._loss_sum += loss.detach().float()
        try:
            with self.region("backward"):
                self.amp.scaler.scale(loss).backward()
        except Exception as exc:
            blame(exc, "loss(model, batch), in its backward")
            raise

    def resident_step(self, batch: Any) -> None:
        """One optimizer step of `grad_accum` micro-batches of one batch kept on the device
        (the model alone, no loader: what the diagnosis times)."""
        accum = self.config.grad_accum
        for i in range(accum):
            self._micro_step(batch, accum, last=i == accum - 1)
        self.optimizer_step()

    def _micro_step(self, batch: Any, accum: int, *, last: bool) -> None:
        # The first step reduces every micro-batch: DDP's static_graph records the graph then,
        # and asserts (expect_autograd_hooks_) under no_sync in it (torch 2.13, gloo).
        if last or self._ddp is None or not self._stepped:
            self.micro_step(batch, accum)
            return
        with no_sync(self._ddp):  # DDP reduces the accumulated gradients once, at the last
            self.micro_step(batch, accum)

    def optimizer_step(self) -> None:
        with self.region("optimizer"):
            try:
                self.amp.scaler.step(self.optimizer)
            except Exception as exc:
                blame(exc, "optimizer(model), in its step()")
                raise
            self.amp.scaler.update()
            self.optimizer.zero_grad(set_to_none=True)
        self._stepped = True

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def finite(self) -> bool:
        """Whether every loss so far was finite (synchronizes: call outside timed windows)."""
        return bool(torch.isfinite(self._loss_sum))

    def close(self) -> None:
        """Stop DataLoader workers now rather than at garbage collection."""
        iterator, self._iterator = self._iterator, None
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()


def compose(adapter: Adapter, config: TrainConfig, device: torch.device, *,
            dataset: Any = None,
            on_phase: Callable[[Phase], None] = lambda phase: None,
            ddp: Callable[[torch.nn.Module], torch.nn.Module] | None = None) -> TrainStep:
    """The user's step with `config` applied; `dataset` if already built (a fork server's).
    `on_phase` hears when building model and dataset begin; `ddp` wraps the model for DDP."""
    return TrainStep(adapter, config, device, dataset=dataset, on_phase=on_phase, ddp=ddp)

