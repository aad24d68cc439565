"""Varying shapes in words: ranges, what padding to a multiple would leave, best.yaml's block."""

from __future__ import annotations

import pytest

from autotune.contract.shapes import (PAD_MULTIPLE, format_ranges, pad_multiple, padded_shapes,
                                      padding_note,
                                      parse_ranges, shapes_block)


def test_ranges_read_back_as_written() -> None:
    ranges = [("input_ids[1]", 512, 1024), ("batch[0]", 3, 8)]
    assert format_ranges(ranges) == "input_ids[1] 512-1024, batch[0] 3-8"
    assert parse_ranges(format_ranges(ranges)) == ranges


@pytest.mark.parametrize(("low", "high", "multiple", "left"),
                         [(512, 1024, 64, 9), (513, 1023, 64, 8), (1, 64, 64, 1), (8, 40, 8, 5),
                          (7, 7, 64, 1)])
def test_padded_shapes(low: int, high: int, multiple: int, left: int) -> None:
    assert padded_shapes(low, high, multiple) == left


def test_padded_shapes_needs_a_range() -> None:
    with pytest.raises(ValueError, match="low <= high"):
        padded_shapes(10, 5)


def test_the_padding_note_names_every_length() -> None:
    note = padding_note("mask[1] 8-9, input_ids[1] 512-1024", 437)
    assert "437 distinct shapes" in note
    # Without the trial's count, each length padded alone (1 and 9 sizes): whether they move
    # together (a tokenizer's ids and mask) or apart (a seq2seq batch) is not told.
    # Each length to its own multiple: 8-9 tokens to 8 (64 would pad them sevenfold).
    assert ("padding mask[1] to a multiple of 8 and input_ids[1] to a multiple of 64 would leave "
            "at most 9 sizes of each") in note
    # A seq2seq batch (held out, 2-CPU VM, 2026-11-27): source and target lengths vary apart.
    # The note named the source alone: padded as it said, the targets' 10 lengths still vary.
    seq2seq = "input_ids[1] 85-95, attention_mask[1] 85-95, labels[1] 38-47"
    # 85-95 and 38-47 tokens: a multiple of 64 would add half again to the targets; 8 adds 9%.
    assert ("padding input_ids[1] and attention_mask[1] to a multiple of 16 and labels[1] to a "
            "multiple of 8 would leave at most 2 sizes of each,") in padding_note(seq2seq, 18)
    # The trial's own count, every length padded: exact for the batches it saw.
    exact = padding_note("input_ids[1] 455-512, attention_mask[1] 455-512", 40, padded=2)
    assert ("would leave 2 of the 40 shapes seen, so a compile with static shapes or "
            "reduce-overhead's one CUDA graph per shape would pay for 2,") in exact
    # On a CPU there are no CUDA graphs to pay for (a GRU tagger's note on the 2-CPU VM).
    cpu = padding_note("input_ids[1] 455-512, attention_mask[1] 455-512", 40, padded=2,
                       cuda=False)
    assert "so a compile with static shapes would pay for 2, not one per length." in cpu
    assert "CUDA" not in cpu and "CUDA" not in padding_note("x[0] 13-64", 20, cuda=False)
    # The trial's count holds the batch sizes too.
    both = padding_note("x[0] 13-16, x[1] 20-90", 30, batch_size=16, padded=8)
    assert "would leave 8 of the 30 shapes seen" in both and "counted among those." in both


def test_the_padding_note_pads_a_length_never_the_batch_dimension() -> None:
    # A bucketing sampler's batches (held out, 2-CPU VM, 2026-11-26): 13-277 sequences of
    # 22-127 tokens. The note advised padding the sequence count, tokens[0], to 64.
    note = padding_note("tokens[0] 13-277, tokens[1] 22-127, lengths[0] 13-277", 34)
    assert "padding tokens[1] to a multiple of 8 would leave at most 14" in note
    assert "The number of samples a batch varies too" in note
    only = padding_note("x[0] 13-64, y[0] 13-64", 20)
    assert "to a multiple of" not in only
    assert "the number of samples a batch varies" in only and "drop_last" in only


@pytest.mark.parametrize(("low", "high", "multiple"), [
    (512, 1024, PAD_MULTIPLE), (455, 512, 64), (64, 512, 32), (100, 200, 16), (9, 47, 8),
    (1, 5, 8), (38, 47, 8)])
def test_the_multiple_padding_adds_a_tenth_at_most(low: int, high: int, multiple: int) -> None:
    # A GNN's 9-47 nodes, and a tagger's short sentences (held out, 2-CPU VM, 2026-11-28): a
    # multiple of 64 for every length doubled the work it advised.
    assert pad_multiple(low, high) == multiple


def test_an_eager_config_is_told_it_pays_nothing_per_shape() -> None:
    eager = padding_note("input_ids[1] 455-512", 40, padded=2, compiled=False)
    assert eager.endswith("The config runs eager, which pays nothing per shape: this is for a "
                          "compiled step.")
    assert "runs eager" not in padding_note("input_ids[1] 455-512", 40, padded=2, compiled=True)


def test_the_first_dimension_of_a_tensor_held_per_sample_is_a_length() -> None:
    # A detection batch (held out, 2-CPU VM, 2026-11-26): a fixed 8 images of 64-128 pixels and
    # 1-5 boxes each. The note said the number of samples a batch varies.
    note = padding_note("[0][*][1] 64-128, [1][*].boxes[0] 1-5", 168)
    assert "number of samples" not in note
    assert ("padding [0][*][1] to a multiple of 16 and [1][*].boxes[0] to a multiple of 8 would "
            "leave at most 5 sizes of each") in note


def test_a_first_dimension_past_the_batch_size_is_a_length() -> None:
    # A recommender's flat ids of every sample's history (held out, 2-CPU VM, 2026-11-26): the
    # note said the number of samples a batch varies.
    note = padding_note("[0][0] 300-8577", 276, batch_size=256)
    assert "number of samples" not in note
    assert "padding [0][0] to a multiple of" in note
    assert "number of samples" in padding_note("[0][0] 13-256", 20, batch_size=256)


def test_shapes_block() -> None:
    assert shapes_block(vary=None, shape_range=None, count=None, dynamic=None) is None
    assert shapes_block(vary=False, shape_range=None, count=1, dynamic=False) == {"vary": False}
    block = shapes_block(vary=True, shape_range="input_ids[1] 8-40", count=20, dynamic=True)
    assert block is not None and block["vary"] and block["distinct"] == 20
    # 8-40 tokens padded to 8: five sizes (to 64 it was one, at 2.7x the mean length's work).
    assert block["dynamic_compile"] and "multiple of 8 would leave at most 5 sizes," in block["note"]
