"""Group a callgrind profile's self cost (per function) by part of a step: gemm,
operand packing, elementwise loops, fused chains, memset/memcpy, batched kernels,
engine, node creation, the rest (Python, numpy).

    python benchmarks/callgrind_split.py CALLGRIND_OUT_FILE"""
import re, subprocess, sys, collections
out = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", "--auto=no", sys.argv[1]],
                     capture_output=True, text=True).stdout
parts = collections.Counter()
total = 0
RULES = [("gemm (OpenBLAS kernel)", r"sgemm_kernel|sgemv|saxpy|sdot|sger"),
         ("operand packing (OpenBLAS copy)", r"sgemm_(itcopy|otcopy|incopy|oncopy|beta)|_copy_"),
         ("elementwise loops", r"ab_\w+_(fwd|bwd)|_fastmath|fast_tanh|expf|logf"),
         ("fused chains (_fusion)", r"_fusion"),
         ("memset/memcpy", r"memset|memmove|memcpy"),
         ("batched kernels (the loops around the math: _kernels_*)", r"autobatch/_kernels_"),
         ("engine (scheduler, executor, backward, signatures, graph)", r"autobatch/_(scheduler|strategies|executor|backward|signatures|graph|stats|memory|optable|checkpoints)"),
         ("sorting (qsort of batch ids)", r"msort|qsort"),
         ("node creation (_core)", r"autobatch/_core"),
         ("Python interpreter and numpy", r".")]
for line in out.splitlines():
    m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+(.*)", line)
    if not m:
        continue
    n = int(m.group(1).replace(",", "")); name = m.group(2)
    if "PROGRAM TOTALS" in name:
        total = n; continue
    for part, rx in RULES:
        if re.search(rx, name):
            parts[part] += n; break
print(f"total {total/1e6:.1f} M")
for p, n in parts.most_common():
    print(f"  {p:60s} {n/1e6:8.1f} M  {100*n/total:5.1f} %")
