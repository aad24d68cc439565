"""Why a compiled step compiled again, in words, and the padding that stops it: Dynamo's guard
failures as a transformers T5-small on padded batches gave them (H100, torch 2.11, 2026-11-28,
results/h100/heldout/hf_t5/bf16-compile/compile-steps.log)."""

from __future__ import annotations

from autotune.contract.recompiles import (MAX_REASON_CHARS, SEPARATOR, divisor, recompile_note,
                                          short_reason)
from autotune.contract.shapes import shapes_block

SDPA = ("2/0: (input_ids.size()[1] % 16) != 0  # (_meta_registrations.py:6232 in "
        "meta__scaled_dot_product_efficient_backward)")
ALIGNED = ("9/0: not ((encoder_hidden_states.size()[1] % 8) == 0 and ((inputs_embeds.size()[1]"
           "*encoder_hidden_states.size()[1]) % 8) == 0)  # (_inductor/ir.py:448 in "
           "is_aligned_realized_tensor)")
TYPE = "1/0: ___check_type_id(args[0], 501274608), type=<class 'T5'>  # func_name = f'{x}'"


def test_a_guard_is_told_without_its_frame_with_the_function_that_made_it() -> None:
    assert short_reason(SDPA) == ("(input_ids.size()[1] % 16) != 0 (_meta_registrations.py:6232 "
                                  "in meta__scaled_dot_product_efficient_backward)")
    assert short_reason(ALIGNED).endswith("% 8) == 0) (ir.py:448 in is_aligned_realized_tensor)")
    # A guard made in the user's code names Dynamo's evaluate_expr too (torch 2.13): the user's.
    user = ("0/1: (x.size()[1] % 16) != 0  #   # model.py:4 in aligned (_dynamo/variables/"
            "tensor.py:2606 in evaluate_expr)")
    assert short_reason(user) == "(x.size()[1] % 16) != 0 (model.py:4 in aligned)"
    assert short_reason(TYPE) == "___check_type_id(args[0], 501274608), type=<class 'T5'>"
    assert short_reason(SDPA + "\n" + TYPE).startswith("(input_ids")  # the first guard
    assert short_reason("   \n") == ""
    assert len(short_reason("0/0: " + "x" * 500)) == MAX_REASON_CHARS


def test_the_padding_multiple_keeps_every_divisibility_guard_true() -> None:
    assert divisor(SEPARATOR.join([short_reason(SDPA), short_reason(ALIGNED)])) == 16
    assert divisor(short_reason(ALIGNED)) == 8
    assert divisor(short_reason(TYPE)) is None  # no divisibility: padding cannot help
    assert divisor("(x.size()[0] % 3) == 0; (y.size()[1] % 8) == 0") == 24
    assert divisor("(x.size()[0] % 4096) == 0") is None  # no padding anyone would do


def test_the_note_says_how_many_how_long_the_last_guard_and_the_padding() -> None:
    note = recompile_note(2, 96.4, SEPARATOR.join([short_reason(ALIGNED), short_reason(SDPA)]))
    assert note.startswith("2 recompiles after the first step (96 s), the last on (input_ids")
    assert note.endswith("a size that flips such a test compiles again; lengths padded to a "
                         "multiple of 16 keep them true")
    assert recompile_note(1, None, "") == "1 recompile after the first step"
    assert recompile_note(1, 0.2, "") == "1 recompile after the first step"  # no "(0 s)"
    assert recompile_note(0, 0.0, "") == ""
    block = shapes_block(vary=True, shape_range="input_ids[1] 64-512", count=40, dynamic=True,
                         recompile_multiple=16)
    assert block is not None and "lengths padded to a multiple of 16" in block["note"]
    assert "(32 is one)" in block["note"]  # 64-512 tokens: padded to 32
    # A guard asking for more than the note advised (9-47 tokens: 8) names the multiple that
    # keeps both, so the advice does not keep the compile going.
    short = shapes_block(vary=True, shape_range="input_ids[1] 9-47", count=30, dynamic=True,
                         recompile_multiple=16)
    assert short is not None and short["note"].endswith(
        "keep those guards true: pad to a multiple of 16 rather than the one above.")
    plain = shapes_block(vary=True, shape_range="input_ids[1] 64-512", count=40, dynamic=True)
    assert plain is not None and "divisibility" not in plain["note"]
