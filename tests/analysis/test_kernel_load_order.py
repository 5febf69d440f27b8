"""Tests of scripts/kernel_load_order.py's SASS readers on excerpts shaped like cuobjdump's output (the
script itself needs a build and cuobjdump; `make sass-counts` runs it)."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import kernel_load_order as klo  # noqa: E402


def sass(*ops):
    return "\n".join(f"        /*{i * 16:04x}*/                   {op} ;" for i, op in enumerate(ops))


def test_loads_before_the_first_mma():
    sunk = sass("LDG.E.128.CONSTANT R4, desc[UR8][R2.64]", "LDG.E.128.CONSTANT R8, desc[UR8][R6.64]",
                "HMMA.16816.F32.BF16 R32, R4, R12, R32", "LDG.E.128.CONSTANT R16, desc[UR8][R2.64+0x40]")
    together = sass("LDG.E.128.CONSTANT R4, desc[UR8][R2.64]", "LDG.E.128.CONSTANT R8, desc[UR8][R6.64]",
                    "LDG.E.128.CONSTANT R16, desc[UR8][R2.64+0x40]", "HMMA.16816.F32.BF16 R32, R4, R12, R32")
    assert klo.loads_before_first_mma(sunk) == 2
    assert klo.loads_before_first_mma(together) == 3
    assert klo.loads_before_first_mma(sass("LDG.E.128.CONSTANT R4, desc[UR8][R2.64]")) is None


def test_topk_sequence_tells_serial_loads_from_batched_ones():
    serial = sass(*["LDG.E.CONSTANT R4, desc[UR6][R4.64]", "LOP3.LUT R3, R4, 0x7fffffff, RZ, 0xc0, !PT",
                    "ATOMS.POPC.INC.32 RZ, [R3+UR4]"] * 3)
    batched = sass(*(["LDG.E.CONSTANT R%d, desc[UR6][R2.64]" % r for r in range(8)] +
                     ["LOP3.LUT R20, R%d, 0x7fffffff, RZ, 0xc0, !PT" % r for r in range(8)] +
                     ["ATOMS.POPC.INC.32 RZ, [R20+UR4]"] * 8))
    assert klo.loads_and_uses(serial) == "LcA" * 3
    assert klo.loads_and_uses(batched) == "L" * 8 + "c" * 8 + "A" * 8


def test_cluster_topk_counts_its_float4_loads_only():
    # the cluster kernel's score loads are 16-byte; its 4-byte constant loads (the ordered tie scan) are not
    text = sass(*(["LDG.E.128.CONSTANT R%d, desc[UR16][R4.64]" % (4 * r) for r in range(4)] +
                  ["LOP3.LUT R24, R4, 0x7fffffff, RZ, 0xc0, !PT", "ATOMS.POPC.INC.32 RZ, [R24+URZ]",
                   "LDG.E.CONSTANT R2, desc[UR16][R2.64]", "LOP3.LUT R6, R2, 0x7fffffff, RZ, 0xc0, !PT"]))
    assert klo.loads_and_uses(text, klo.CLUSTER_LOAD) == "LLLLcAc"
    assert klo.loads_and_uses(text) == "cALc"


def test_loads_between_shared_stores():
    text = sass("LDG.E.128.CONSTANT R4, desc[UR8][R2.64]", "STS [R1], R4", "LDG.E.128.CONSTANT R8, desc[UR8][R2.64]",
                "LDS R9, [R1]", "LDG.E.128.CONSTANT R12, desc[UR8][R2.64]", "LDG.E.128.CONSTANT R16, desc[UR8][R2.64]",
                "STS.128 [R1], R12")
    assert klo.most_loads_between_stores(text) == 3
    assert klo.most_loads_between_stores(sass("LDG.E R4, desc[UR8][R2.64]", "STS [R1], R4")) == 0


def test_loads_before_the_first_use_of_one():
    # two steps' loads, then a use: 4
    two_steps = sass("LDG.E.CONSTANT R20, desc[UR6][R2.64]", "LDG.E.CONSTANT R21, desc[UR6][R4.64]",
                     "IMAD.WIDE R6, R8, 0x4, R2", "LDG.E.CONSTANT R22, desc[UR6][R6.64]",
                     "@P0 LDG.E.64.CONSTANT R24, desc[UR6][R6.64+0x8]", "F2FP.F16.E4M3.UNPACK_B R30, R25")
    assert klo.loads_before_first_use(two_steps) == 4
    # a copy of the first step's registers before the second step's loads (what ptxas did for `cur = next`)
    copied = sass("LDG.E.CONSTANT R20, desc[UR6][R2.64]", "LDG.E.CONSTANT R21, desc[UR6][R4.64]",
                  "IMAD.MOV.U32 R40, RZ, RZ, R20", "LDG.E.CONSTANT R22, desc[UR6][R6.64]")
    assert klo.loads_before_first_use(copied) == 2
    # a loaded register written again by another instruction is not a use of the load; a store's
    # operands are all read; an address pair (R8.64) covers R8 and R9
    rewritten = sass("LDG.E.CONSTANT R9, desc[UR6][R2.64]", "MOV R9, 0x1", "LDG.E.CONSTANT R10, desc[UR6][R2.64+0x4]",
                     "STG.E desc[UR6][R12.64], R3", "LDG.E R11, desc[UR6][R8.64]", "LDG.E R12, desc[UR6][R10.64]")
    assert klo.loads_before_first_use(rewritten) == 3
    assert klo.loads_before_first_use(sass("LDG.E.128.CONSTANT R4, desc[UR8][R2.64]", "STG.E desc[UR8][R2.64], R7")) == 1


def test_pooling_readers():
    offsets_first = sass("LDG.E.64 R10, desc[UR8][R6.64]", "LDG.E.64 R12, desc[UR8][R6.64+0x8]",
                         "@P0 LDG.E.EF.64 R22, desc[UR8][R4.64+0x100]", "@P1 LDG.E.EF.64 R24, desc[UR8][R4.64]",
                         "PRMT R16, R22, 0x7610, R16")
    assert klo.loads_before_first_streaming_load(offsets_first) == 2
    assert klo.loads_before_first_streaming_load(sass("@P0 LDG.E.EF.128 R4, desc[UR8][R2.64]")) == 0
    assert klo.loads_before_first_streaming_load(sass("LDG.E.64 R10, desc[UR8][R6.64]")) is None
    keys = klo.from_first_streaming_load(offsets_first)
    assert keys.splitlines()[0].strip().startswith("/*0020*/")
    assert klo.loads_before_first_use(keys) == 2  # the PRMT waits for the first key load
    assert klo.from_first_streaming_load(sass("LDG.E.64 R10, desc[UR8][R6.64]")) == ""
    listing = ("\n\tcode for sm_90\n\t\tFunction : _Z1av\n" + sass("EXIT") + "\n\t\t..........\n\n\n"
               "\t\tFunction : _Z1bv\n" + sass("LDG.E R2, desc[UR4][R2.64]", "EXIT") + "\n")
    funcs = klo.functions(listing)
    assert list(funcs) == ["_Z1av", "_Z1bv"]
    assert "LDG" in funcs["_Z1bv"] and "LDG" not in funcs["_Z1av"]


def test_attention_lanes_counts_from_the_first_constant_load():
    # the prologue's plain loads (split offsets, the queries) are used before the tile; counting starts at
    # the tile's first __ldg load, and a multiply-add that uses one of them ends the count
    text = sass("LDG.E.64 R2, desc[UR14][R2.64]", "IMAD.WIDE R4, R2, 0x4, R6", "LDG.E R9, desc[UR14][R4.64]",
                "STS [R1], R9", "LDG.E.CONSTANT R20, desc[UR14][R10.64]", "LDG.E.128.CONSTANT R24, desc[UR14][R12.64]",
                "FFMA R40, R24, R30, RZ", "LDG.E.CONSTANT R21, desc[UR14][R14.64]")
    assert klo.loads_before_first_use(text) == 1  # the whole listing: the prologue's load is used at once
    assert klo.loads_before_first_use(klo.from_first_constant_load(text)) == 2
    assert klo.from_first_constant_load(sass("LDG.E R4, desc[UR8][R2.64]")) == ""
