"""Batch shape signatures: any structure a loader yields, walked for its tensors' shapes."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import torch

from autotune.trial.shapes import (MAX_LEAVES, PER_SAMPLE, ShapeFacts, ShapeLog, bulk, device_of,
                                   signature)


@dataclasses.dataclass
class Batch:
    features: torch.Tensor
    ids: list[int]


def test_a_tensor_is_its_own_shape() -> None:
    assert signature(torch.zeros(2, 3)) == (("", (2, 3)),)


def test_nested_tuples_lists_dicts_and_dataclasses_are_walked_in_order() -> None:
    batch = ({"input_ids": torch.zeros(4, 7), "mask": torch.zeros(4, 7, dtype=torch.bool)},
             [torch.zeros(4)], Batch(features=torch.zeros(4, 2), ids=[1, 2]))
    assert signature(batch) == (("[0].input_ids", (4, 7)), ("[0].mask", (4, 7)),
                                ("[1][0]", (4,)), ("[2].features", (4, 2)))


class SeqBatch(NamedTuple):
    x: torch.Tensor
    lengths: torch.Tensor


def test_a_namedtuple_is_walked_by_its_field_names() -> None:
    # A GRU tagger's padding note named "[0][1]" for its SeqBatch.x (2026-11-28).
    batch = SeqBatch(x=torch.zeros(4, 170, 32), lengths=torch.zeros(4))
    assert signature(batch) == (("x", (4, 170, 32)), ("lengths", (4,)))
    assert signature((batch,)) == (("[0].x", (4, 170, 32)), ("[0].lengths", (4,)))


def test_what_is_not_a_tensor_has_no_shape() -> None:
    assert signature(["text", b"bytes", 3, None, 2.5, {"k": "v"}, [1, 2]]) == ()
    assert signature(torch.tensor(1.0)) == (("", ()),)  # a scalar tensor is a shape too


def test_a_long_list_of_tensors_is_read_only_so_far() -> None:
    assert len(signature([torch.zeros(1)] * (MAX_LEAVES + 10))) == MAX_LEAVES


def padded(length: int) -> dict[str, torch.Tensor]:
    return {"input_ids": torch.zeros(8, length), "labels": torch.zeros(8, length)}


def test_fixed_shapes_do_not_vary() -> None:
    log = ShapeLog()
    for _ in range(3):
        log.add(signature(padded(16)))
    assert not log.vary and log.count == 1 and log.ranges() == ""
    assert log.facts() == ShapeFacts(vary=False, ranges=None, count=1)


def test_varying_lengths_give_their_range_and_count() -> None:
    log = ShapeLog()
    for length in (512, 1024, 700, 512, 600):
        log.add(signature(padded(length)))
    assert log.vary and log.count == 4
    assert log.ranges() == "input_ids[1] 512-1024, labels[1] 512-1024"


def test_a_changing_structure_varies() -> None:
    log = ShapeLog()
    log.add(signature((torch.zeros(2), torch.zeros(2))))
    log.add(signature((torch.zeros(2),)))
    assert log.vary and log.ranges() == ""


def detection_batch(sizes: list[int], boxes: list[int]) -> tuple[tuple, tuple]:  # type: ignore[type-arg]
    """A detection loader's batch: per-sample images of their own sizes, per-sample targets."""
    images = tuple(torch.zeros(3, s, s + 16) for s in sizes)
    targets = tuple({"boxes": torch.zeros(n, 4), "labels": torch.zeros(n)} for n in boxes)
    return images, targets


def test_a_list_held_per_sample_is_one_range_not_one_per_item() -> None:
    log = ShapeLog(batch_size=4)  # four samples: each list holds one item per sample
    log.add(signature(detection_batch([64, 80, 96, 64], [1, 2, 3, 1])))
    log.add(signature(detection_batch([128, 64, 64, 96], [5, 1, 2, 2])))
    assert log.ranges() == ("[0][*][1] 64-128, [0][*][2] 80-144, [1][*].boxes[0] 1-5, "
                            "[1][*].labels[0] 1-5")


def test_a_few_fields_stay_apart() -> None:
    log = ShapeLog()
    for n in (5, 7):
        log.add(signature((torch.zeros(8, n), torch.zeros(8, n + 1), torch.zeros(8, n + 2))))
    assert log.ranges() == "[0][1] 5-7, [1][1] 6-8, [2][1] 7-9"


def test_fields_that_differ_are_never_held_per_sample() -> None:
    # A recommender's batch (held out, 2-CPU VM, 2026-11-26): the flat ids of every sample's
    # history, the offsets where each starts, dense features, labels. Read per sample, its
    # ranges merged into "[*][0] 256-8577".
    log = ShapeLog(batch_size=4)
    for total in (300, 8577):
        log.add(signature((torch.zeros(total), torch.zeros(4), torch.zeros(4, 13),
                           torch.zeros(4))))
    assert log.ranges() == "[0][0] 300-8577"
    # Four alike fields of a batch of 16: not its samples either.
    fields = ShapeLog(batch_size=16)
    for n in (5, 7):
        fields.add(signature(tuple(torch.zeros(16, n) for _ in range(4))))
    assert fields.ranges() == "[0][1] 5-7, [1][1] 5-7, [2][1] 5-7, [3][1] 5-7"
    # Many alike items are samples, whatever the batch size says.
    many = ShapeLog()
    for n in (5, 7):
        many.add(signature(tuple(torch.zeros(3, n + i) for i in range(PER_SAMPLE))))
    assert many.ranges() == f"[*][1] 5-{7 + PER_SAMPLE - 1}"


def test_a_list_cut_short_by_the_leaf_limit_is_still_held_per_sample() -> None:
    # 32 images and 32 target dicts of 3 tensors each: the signature stops at MAX_LEAVES
    # tensors, inside a target.
    log = ShapeLog(batch_size=32)
    for n in (1, 8):
        images = tuple(torch.zeros(3, 64 + n, 64) for _ in range(32))
        targets = tuple({"boxes": torch.zeros(n, 4), "labels": torch.zeros(n),
                         "area": torch.zeros(n)} for _ in range(32))
        log.add(signature((images, targets)))
    assert log.ranges() == ("[0][*][1] 65-72, [1][*].boxes[0] 1-8, [1][*].labels[0] 1-8, "
                            "[1][*].area[0] 1-8")


def test_the_padded_count_is_exact_for_the_batches_seen() -> None:
    # A tokenizer's ids and mask move together: 21 lengths of 455-512, one once padded to 64.
    text = ShapeLog(batch_size=8)
    for n in range(455, 475):
        text.add(signature({"input_ids": torch.zeros(8, n), "attention_mask": torch.zeros(8, n)}))
    text.add(signature({"input_ids": torch.zeros(8, 512), "attention_mask": torch.zeros(8, 512)}))
    assert text.count == 21 and text.padded_count() == 1 and text.facts().padded == 1
    # A seq2seq batch (held out, 2-CPU VM, 2026-11-27): source and target lengths vary apart,
    # each padded to 64 lands on 2 and 3 sizes here, and the pairs seen leave 3.
    pairs = ShapeLog(batch_size=8)
    for src, tgt in ((600, 300), (700, 400), (700, 700), (690, 420)):
        pairs.add(signature({"input_ids": torch.zeros(8, src), "labels": torch.zeros(8, tgt)}))
    assert pairs.padded_count() == 3  # (640, 320), (704, 448), (704, 704)
    # Short lengths pad to a smaller multiple (`pad_multiple`): 10-20 tokens to 8.
    short = ShapeLog(batch_size=8)
    for n in (10, 15, 16, 20):
        short.add(signature(torch.zeros(8, n)))
    assert short.padded_count() == 2  # 16, 24
    # The batch dimension is no length: a last partial batch stays a shape of its own.
    partial = ShapeLog(batch_size=8)
    for rows, n in ((8, 100), (8, 110), (3, 110)):
        partial.add(signature(torch.zeros(rows, n)))
    assert partial.padded_count() == 2  # 100-110 tokens padded to 16: (8, 112), (3, 112)
    # Only the number of samples varies: nothing to pad.
    samples = ShapeLog(batch_size=8)
    for rows in (8, 3):
        samples.add(signature(torch.zeros(rows, 16)))
    assert samples.padded_count() is None and samples.facts().padded is None


def test_lengths_of_a_list_held_per_sample_are_padded_as_one() -> None:
    log = ShapeLog(batch_size=4)
    log.add(signature(detection_batch([64, 80, 96, 64], [1, 2, 3, 1])))
    log.add(signature(detection_batch([128, 64, 64, 96], [5, 1, 2, 2])))
    # 64-128 pixels padded to 16 and 1-5 boxes to 8: the images keep their sizes, so the two
    # batches stay two shapes (the boxes pad as one).
    assert log.count == 2 and log.padded_count() == 2
    boxes = ShapeLog(batch_size=4)
    boxes.add(signature(detection_batch([64, 64, 64, 64], [1, 2, 3, 1])))
    boxes.add(signature(detection_batch([64, 64, 64, 64], [5, 1, 2, 2])))
    assert boxes.count == 2 and boxes.padded_count() == 1


def test_a_shape_is_new_to_the_step_the_first_time_a_step_runs_it() -> None:
    log = ShapeLog()
    ran = []
    for length, runs in ((512, True), (600, False), (512, True), (600, True), (600, True)):
        log.add(signature(padded(length)))
        if runs:  # a batch pulled and dropped unrun (skip_queued) leaves its shape new
            ran.append(log.run_last())
    assert ran == [True, False, True, False]
    assert ShapeLog().run_last() is False  # nothing added yet


def speech(frames: int, labels: int) -> dict[str, torch.Tensor]:
    """Features padded per batch, and every sample's labels concatenated (CTC)."""
    return {"feats": torch.zeros(4, frames, 80), "feat_lens": torch.zeros(4),
            "labels": torch.zeros(labels)}


def first_runs(log: ShapeLog, batches: list[dict[str, torch.Tensor]]) -> list[bool]:
    ran = []
    for batch in batches:
        log.add(signature(batch))
        ran.append(log.run_last())
    return ran


def test_a_small_tensor_new_at_every_step_leaves_the_first_runs_to_the_bulk() -> None:
    # The labels' length is new at every step, the features' padded length at 3 of 6: as a
    # whole every batch is new, which would make every step a first run (its steady state)
    # and hide the features' new lengths, the ones that cost.
    # Until the features' length has varied (step 3), the whole batch decides.
    frames = [400, 400, 480, 400, 480, 560, 400]
    ran = first_runs(ShapeLog(), [speech(f, 100 + i) for i, f in enumerate(frames)])
    assert ran == [True, True, True, False, False, True, False]
    assert bulk(signature(speech(400, 101))) == signature(speech(400, 7))[:1]  # feats alone


def test_a_small_tensor_beside_a_bulk_of_one_shape_decides_the_first_runs() -> None:
    # An image of fixed size with a caption padded per batch (a review's case, 2026-11-29): the
    # caption's tensor is small, but the bulk never varies, so a new caption length is a first
    # run, from the first steps on, where padded batches meet most of their new lengths.
    def captioned(length: int) -> dict[str, torch.Tensor]:
        return {"pixels": torch.zeros(4, 3, 64, 64), "ids": torch.zeros(4, length)}
    ran = first_runs(ShapeLog(), [captioned(n) for n in (16, 24, 32, 16, 16, 16, 40, 24)])
    assert ran == [True, True, True, False, False, False, True, False]
    assert bulk(signature(captioned(16))) == signature(captioned(16))[:1]
    # From 192 tokens on the caption holds 1/64 of the pixels' elements: it stays in the bulk
    # at every length once it was, rather than going in and out of it by length.
    ran = first_runs(ShapeLog(), [captioned(n) for n in (200, 16, 24, 16, 40, 24)])
    assert ran == [True, True, True, False, True, False]
    # Whisper: fixed features, decoder labels padded per batch.
    whisper = [{"features": torch.zeros(2, 80, 3000), "labels": torch.zeros(2, n)}
               for n in (40, 41, 42, 43, 40, 44)]
    assert first_runs(ShapeLog(), whisper) == [True, True, True, True, False, True]


def test_where_the_first_batch_lies_is_noted() -> None:
    on_meta = {"x": torch.zeros(4, 2, device="meta"), "y": torch.zeros(4)}
    assert device_of(on_meta) == "meta"  # any device but host memory, as cuda would be
    assert device_of(padded(16)) is None and device_of(["text", 3]) is None
    log = ShapeLog()
    log.add(signature(on_meta), batch=on_meta)
    log.add(signature(padded(16)), batch=padded(16))  # only the first batch is looked at
    assert log.device == "meta"
