"""Group a callgrind profile's self cost (per function) by part of a step: gemm,
operand packing, elementwise loops, fused chains, memset/memcpy, batched kernels,
engine and runtime, the trainers' update rules, node creation, the rest (Python, numpy).

    python benchmarks/callgrind_split.py CALLGRIND_OUT_FILE

A function is placed by its source file or shared object (autobatch/kernels/products.c,
autobatch/engine/fusion.cpython-*.so) or, without debug information, by the module
Cython mangles into its name (__pyx_f_9autobatch_6engine_6fusion_...). Profiles of
trees from before the subpackages (autobatch/_kernels_products, autobatch/_fusion ...)
are grouped the same way."""
import re, subprocess, sys, collections


def module(*names):
    """A regex for a module under autobatch/ as a path (autobatch/engine/fusion) or as
    Cython's mangled name (autobatch_6engine_6fusion); each name may be a regex."""
    sep = r"(?:/|_\d+)"
    return "autobatch" + sep + sep.join(f"(?:{n})" for n in names)


def either(*regexes):
    return "|".join(f"(?:{r})" for r in regexes)


RULES = [("gemm (OpenBLAS kernel)", r"sgemm_kernel|sgemv|saxpy|sdot|sger"),
         ("operand packing (OpenBLAS copy)", r"sgemm_(itcopy|otcopy|incopy|oncopy|beta)|_copy_"),
         ("elementwise loops", r"ab_\w+_(fwd|bwd)|_fastmath|fast_tanh|expf|logf"),
         ("fused chains (engine/fusion)", either(module("engine", "fusion"), module("_fusion"))),
         ("memset/memcpy", r"memset|memmove|memcpy"),
         ("batched kernels (the loops around the math: kernels/)",
          either(module("kernels"), module("_kernels_"))),
         ("engine and runtime (scheduler, executor, backward, graph, arenas, threads)",
          either(module("engine"), module("runtime"),
                 module("_(?:scheduler|strategies|executor|backward|signatures|graph|stats|memory|"
                        "optable|checkpoints|parallel|threads|rng)"))),
         ("sorting (qsort of batch ids)", r"msort|qsort"),
         ("trainer update rules (model/update_rules)", either(module("model", "update_rules"), module("_update"))),
         ("node creation (api/)", either(module("api"), module("_core"))),
         ("Python interpreter and numpy", r".")]
out = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", "--auto=no", sys.argv[1]],
                     capture_output=True, text=True).stdout
parts = collections.Counter()
total = 0
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
width = max(len(part) for part, _ in RULES)
print(f"total {total/1e6:.1f} M")
for p, n in parts.most_common():
    print(f"  {p:{width}s} {n/1e6:8.1f} M  {100*n/total:5.1f} %")
