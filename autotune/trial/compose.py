"""Build the user's training step with a config's knobs applied, in the one right order."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from autotune.adapter import Adapter
from autotune.contract.config import TrainConfig
from autotune.contract.request import CUDAGRAPH_MODES
from autotune.trial.features.amp import apply_amp, set_matmul_precision
from autotune.trial.features.checkpoint import apply_checkpoint
from autotune.trial.features.compile import apply_compile
from autotune.trial.features.dataloader import apply_dataloader, dataloader_kwargs, to_device
from autotune.trial.lifetime import die_with_parent
from autotune.trial.measure import StepResult

__all__ = ["TrainStep", "apply_model_features", "compose", "loader_knobs"]


def apply_model_features(
    model: torch.nn.Module,
    blocks: Sequence[torch.nn.Module],
    *,
    amp_dtype: str,
    checkpoint: float,
    compile: str,
) -> tuple[torch.nn.Module, int]:
    """Apply the model-side knobs in the one right order; return the module to call in
    training and how many blocks were checkpointed. The trials and production
    (`TunedConfig.wrap_model`) both come through here, so what was measured is what runs.
    """
    # 1. Precision first: compile bakes the fp32 matmul precision into its kernels.
    set_matmul_precision(amp_dtype)
    # 2. Checkpoint before compile, so the compiled graph is the checkpointed one (compiling
    #    first would capture the unwrapped forward and save every activation).
    wrapped = apply_checkpoint(blocks, checkpoint)
    # 3. Compile last: it wraps everything above. Lazy: it happens on the first forward.
    return apply_compile(model, compile), wrapped


def loader_knobs(config: TrainConfig) -> dict[str, Any]:
    """The DataLoader keyword arguments of `config`'s loader knobs."""
    return dataloader_kwargs(
        batch_size=config.batch_size, num_workers=config.num_workers,
        prefetch_factor=config.prefetch_factor, pin_memory=config.pin_memory,
        persistent_workers=config.persistent_workers)



class TrainStep:
    """One optimizer step of `grad_accum` micro-batches, callable repeatedly (epochs roll over)."""

    def __init__(
        self,
        adapter: Adapter,
        config: TrainConfig,
        device: torch.device,
        *,
        clock: Callable[[], float] = time.perf_counter,
        dataset: Any = None,
    ) -> None:
        self.adapter = adapter
        self.config = config
        self.device = device
        self.clock = clock
        self.amp = apply_amp(config.amp_dtype, device.type)
        model = adapter.model()
        # Move to the device before building the optimizer, so its state lives there too.
        self.model = model.to(device)
        self.optimizer = adapter.optimizer(self.model)
        self.forward_model, self.blocks_checkpointed = apply_model_features(
            self.model, adapter.blocks(model), amp_dtype=config.amp_dtype,
            checkpoint=config.checkpoint, compile=config.compile)
        # Workers die with this process even when stuck in __getitem__ (see lifetime.py).
        dataset = adapter.dataset() if dataset is None else dataset
        self.loader = apply_dataloader(dataset, loader_knobs(config),
                                       worker_init_fn=die_with_parent)
        self._iterator: Iterator[Any] | None = None
        self._mark_cudagraph_step = device.type == "cuda" and config.compile in CUDAGRAPH_MODES
        self._loss_sum = torch.zeros((), device=device)

    def next_batch(self) -> tuple[Any, int]:
        """The next CPU batch and its item count, starting a new epoch when one ends."""
        if self._iterator is None:
            self._iterator = iter(self.loader)
        try:
            batch = next(self._iterator)
        except StopIteration:
            self._iterator = iter(self.loader)
            batch = next(self._iterator)
        return batch, int(self.adapter.items(batch))

    def __call__(self) -> StepResult:
        items = 0
        wait = 0.0
        accum = self.config.grad_accum
        for _ in range(accum):
            # Data wait is the time blocked on the DataLoader. The copy is left out of it: a
            # pageable copy waits for the GPU to finish queued compute, which is not input cost.
            t0 = self.clock()
            batch, n = self.next_batch()
            wait += self.clock() - t0
            batch = to_device(batch, self.device, non_blocking=self.config.pin_memory)
            items += n
            self.micro_step(batch, accum)
        self.optimizer_step()
        return StepResult(items=items, data_wait=wait)

    def micro_step(self, batch: Any, accum: int) -> None:
        """Forward and backward of one micro-batch already on the device."""
        if self._mark_cudagraph_step:
            torch.compiler.cudagraph_mark_step_begin()
        with self.amp.autocast():
            loss = self.adapter.loss(self.forward_model, batch)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise TypeError(
                f"adapter.loss must return a scalar tensor, got {type(loss).__name__}"
                + (f" of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else "")
            )
        loss = loss / accum
        # Accumulate on the device: reading it (.item()) inside timed steps would synchronize.
        self._loss_sum += loss.detach().float()
        self.amp.scaler.scale(loss).backward()

    def resident_step(self, batch: Any) -> None:
        """One optimizer step of `grad_accum` micro-batches of one batch kept on the device
        (the model alone, no loader: what the diagnosis times)."""
        accum = self.config.grad_accum
        for _ in range(accum):
            self.micro_step(batch, accum)
        self.optimizer_step()

    def optimizer_step(self) -> None:
        self.amp.scaler.step(self.optimizer)
        self.amp.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)

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
            dataset: Any = None) -> TrainStep:
    """The user's step with `config` applied; `dataset` if already built (a fork server's)."""
    return TrainStep(adapter, config, device, dataset=dataset)
