"""Hand experiment (not a recorded step): the Column-Stage tip with its per-column operands
held as packed 16-bit pairs. After Column-Stage each consumer thread still reads 32 two-byte
values of bias from the stage's slot per tile and keeps them as 32 f32 registers through the
epilogue; taking those reads out still gained about 3 points at K = 768
(h200-compare-tile-switch-column-stage-hand.json). A thread's two columns of a group, 8 j + 2 q
and 8 j + 2 q + 1, are neighbours in the slot, so one four-byte load brings both, kept as the
operand's own 16-bit pair (16 registers) and widened where each is added.
COL_PAIRS = 1 (a new tuning parameter; 0 is the tip unchanged) does that. Columns past N
were zero-filled by the TMA, so the pair needs no guard of its own; the epilogue's guards stay.
Usage: python3 column-pairs.py CONTEXT_DIR (rewrites CONTEXT_DIR/kernel.cu and peak.toml)."""
import re
import sys

from source_edit import Source, add_tuning

ctx = sys.argv[1]
k = Source(f"{ctx}/kernel.cu")
m = re.search(r"const (__nv_bfloat16|__half)\* col_slot = ", k.text)
assert m, "not a Column-Stage tip: no col_slot"
pair = "__nv_bfloat162" if m.group(1) == "__nv_bfloat16" else "__half2"
block = re.search(r"( *)float colv\[WGMMA_N / 8\]\[2\];\n.*?\n\1}\n", k.text, re.S)
assert block, "the per-column operands' loop"
ind = block.group(1)
k.sub(block.group(0), f"""#if COL_PAIRS
{ind}// One four-byte load a pair of columns (8 j + 2 q, + 1: neighbours in the slot), kept packed.
{ind}{pair} colp[WGMMA_N / 8];
#pragma unroll
{ind}for (int j = 0; j < WGMMA_N / 8; ++j) colp[j] = reinterpret_cast<const {pair}*>(col_slot)[4 * j + q];
#define COLV(j, e) ((e) == 0 ? __low2float(colp[j]) : __high2float(colp[j]))
#else
{block.group(0)}#define COLV(j, e) (colv[j][e])
#endif
""")
# Both uses of each column, in the interior and the edge epilogue.
for e in (0, 1):
    k.sub(f"colv[j][{e}]", f"COLV(j, {e})", count=2)
k.save()
add_tuning(f"{ctx}/peak.toml", "COL_PAIRS", [0, 1], before="[tuning.NUM_STAGES]")
