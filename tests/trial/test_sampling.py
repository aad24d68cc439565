"""The random order over datasets of any size: a permutation each epoch, seeded, and free to
start whatever the dataset's length."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest
import torch
from torch.utils.data import DataLoader

from autotune.trial.features.sampling import CHUNK, LazyShuffleSampler, feistel_permute

KEYS = [11, 22, 33, 44, 55, 66]


class Sized:
    """Only a length: what a sampler may look at."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


class Cheap(torch.utils.data.Dataset):
    """`n` samples computed from their index: nothing stored, nothing to build."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor([i, i % 7], dtype=torch.int64)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 17, 1000, CHUNK + 1, 3 * CHUNK + 5, 1_000_003])
def test_feistel_is_a_permutation_of_range_n(n: int) -> None:
    out = feistel_permute(torch.arange(n), n, KEYS)
    assert sorted(out.tolist()) == list(range(n))


def test_feistel_is_a_function_of_the_position_alone() -> None:
    # Chunks can be permuted one at a time: the same position always lands on the same index.
    n = 5 * CHUNK + 3
    whole = feistel_permute(torch.arange(n), n, KEYS)
    part = feistel_permute(torch.arange(2 * CHUNK, 3 * CHUNK), n, KEYS)
    assert torch.equal(part, whole[2 * CHUNK:3 * CHUNK])


def test_feistel_needs_an_even_number_of_rounds_and_a_supported_size() -> None:
    with pytest.raises(ValueError, match="even number of rounds"):
        feistel_permute(torch.arange(4), 4, [1, 2, 3])
    with pytest.raises(ValueError, match="2\\^62"):
        feistel_permute(torch.arange(4), 1 << 62, KEYS)


@pytest.mark.parametrize("n", [10, CHUNK + 7, 4 * CHUNK])
def test_an_epoch_is_a_random_permutation_and_the_next_is_another(n: int) -> None:
    sampler = LazyShuffleSampler(Sized(n))
    assert len(sampler) == n
    first, second = list(sampler), list(sampler)
    assert sorted(first) == sorted(second) == list(range(n))
    assert first != second and first != list(range(n))


def test_large_orders_look_shuffled() -> None:
    # Not a proof of randomness: no visible stride, both halves mixed, no sorted runs.
    n = 2**31
    it = iter(LazyShuffleSampler(Sized(n), generator=torch.Generator().manual_seed(0)))
    head = torch.tensor([next(it) for _ in range(20_000)], dtype=torch.float64)
    assert abs(head.mean().item() / n - 0.5) < 0.02
    assert abs(torch.corrcoef(torch.stack([head[:-1], head[1:]]))[0, 1].item()) < 0.05
    steps = head[1:] - head[:-1]
    assert (steps > 0).double().mean().item() == pytest.approx(0.5, abs=0.02)
    assert len(set(steps.tolist())) > 19_000  # no affine stride


def test_a_generator_makes_the_order_reproducible() -> None:
    def order(seed: int, n: int) -> list[int]:
        sampler = LazyShuffleSampler(Sized(n), generator=torch.Generator().manual_seed(seed))
        return list(itertools.islice(sampler, 100))

    for n in (50, 10 * CHUNK):
        assert order(1, n) == order(1, n)
        assert order(1, n) != order(2, n)


def first_batch_seconds(n: int, batch_size: int = 256) -> float:
    loader = DataLoader(Cheap(n), batch_size=batch_size, drop_last=True,
                        sampler=LazyShuffleSampler(Cheap(n)))
    start = time.perf_counter()
    it: Iterator[torch.Tensor] = iter(loader)
    batch = next(it)
    seconds = time.perf_counter() - start
    assert batch.shape == (batch_size, 2)
    assert int(batch[:, 0].max()) < n
    return seconds


def test_a_dataset_of_2_to_the_31_starts_its_first_batch_at_once() -> None:
    # PyTorch's RandomSampler draws randperm(2^31) first: 16 GiB and about a minute. Here the
    # first batch costs one chunk of the permutation whatever the length (milliseconds). Not a
    # timing comparison (a shared CI machine makes ratios of milliseconds flaky: 0.31 s against
    # 7 ms was seen under load): a bound that any work proportional to 2^31 would miss by far.
    first_batch_seconds(CHUNK)  # warm torch's kernels up
    huge = min(first_batch_seconds(2**31) for _ in range(3))
    assert huge < 2.0, f"{huge=:.3f} s for the first batch of 2^31 samples"
