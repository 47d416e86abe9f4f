"""The small data the DyNet programs of benchmarks/dynet_programs.py read.

Two kinds: `write_data(kind, dir, rng)` writes a synthetic data set for the single-file
programs (DyNet's examples, dynet-benchmark), and `prepare(op, dir, rng)` applies one
step of a repository program's data recipe to its scratch copy: cut the repository's own
data down to a few records (`head`), fill in a file the stored snapshot lacks from
another one (`head_as`, `short_trees`), write a synthetic CoNLL-U treebank (`conllu`) or tagged corpus (`tagged`),
put a bracket scorer where a program calls EVALB's binary (`evalb`), or save a notebook's
code cells as one program (`notebook`), convert Python 2 source with 2to3 (`2to3`, and
`replace` for what 2to3 leaves: the same converted code then runs under both libraries). Every maker is deterministic given the rng."""
import json
import os
import random
import re
import stat
import struct
import subprocess
import sys

WORDS = "the a cat dog sat ran on under mat log big small red blue fast slow".split()
TAGS = {"the": "DT", "a": "DT", "cat": "NN", "dog": "NN", "mat": "NN", "log": "NN",
        "sat": "VB", "ran": "VB", "on": "IN", "under": "IN", "big": "JJ", "small": "JJ",
        "red": "JJ", "blue": "JJ", "fast": "RB", "slow": "RB"}
UPOS = {"DT": "DET", "NN": "NOUN", "VB": "VERB", "IN": "ADP", "JJ": "ADJ", "RB": "ADV"}


def _sentences(rng, n, lo=3, hi=9):
    return [[rng.choice(WORDS) for _ in range(rng.randint(lo, hi))] for _ in range(n)]


def _tree(rng, words):
    """A binary tree in the Stanford sentiment format: preterminals over each word."""
    nodes = ["(%d %s)" % (rng.randint(0, 4), w) for w in words]
    while len(nodes) > 1:
        i = rng.randrange(len(nodes) - 1)
        nodes[i:i + 2] = ["(%d %s %s)" % (rng.randint(0, 4), nodes[i], nodes[i + 1])]
    return nodes[0]


def _idx(path, magic, dims, data):
    with open(path, "wb") as f:
        f.write(struct.pack(">I" + "I" * len(dims), magic, *dims))
        f.write(bytes(data))


def write_data(kind, d, rng):
    if kind == "tags":
        os.makedirs(os.path.join(d, "data/tags"), exist_ok=True)
        for name, n in (("train", 400), ("dev", 40)):
            with open(os.path.join(d, "data/tags", name + ".txt"), "w") as f:
                for s in _sentences(rng, n):
                    f.write(" ".join("%s|%s" % (w, TAGS[w]) for w in s) + "\n")
    elif kind == "classes":
        os.makedirs(os.path.join(d, "data/classes"), exist_ok=True)
        for name, n in (("train", 60), ("test", 20)):
            with open(os.path.join(d, "data/classes", name + ".txt"), "w") as f:
                for s in _sentences(rng, n):
                    tag = "pos" if ("big" in s or "fast" in s) else "neg"
                    f.write("%s ||| %s\n" % (tag, " ".join(s)))
    elif kind == "text":
        os.makedirs(os.path.join(d, "data/text"), exist_ok=True)
        for name, n in (("train", 200), ("dev", 40)):
            with open(os.path.join(d, "data/text", name + ".txt"), "w") as f:
                f.writelines(" ".join(s) + "\n" for s in _sentences(rng, n))
    elif kind == "trees":
        os.makedirs(os.path.join(d, "data/trees"), exist_ok=True)
        for name, n in (("train", 300), ("dev", 50)):
            with open(os.path.join(d, "data/trees", name + ".txt"), "w") as f:
                f.writelines(_tree(rng, s) + "\n" for s in _sentences(rng, n, 2, 7))
    elif kind == "chars":
        with open(os.path.join(d, "chars.txt"), "w") as f:
            f.writelines(" ".join(s)[:24] + "\n" for s in _sentences(rng, 6, 2, 5))
    elif kind == "eng-fra":
        os.makedirs(os.path.join(d, "data"), exist_ok=True)
        subjects = [("i am", "je suis"), ("he is", "il est"), ("she is", "elle est"),
                    ("we are", "nous sommes"), ("they are", "ils sont")]
        states = [("tired", "fatigue"), ("happy", "content"), ("here", "ici"),
                  ("late", "en retard"), ("ready", "pret")]
        with open(os.path.join(d, "data/eng-fra.txt"), "w") as f:
            for _ in range(60):
                (e1, f1), (e2, f2) = rng.choice(subjects), rng.choice(states)
                f.write("%s %s .\t%s %s .\n" % (e1, e2, f1, f2))
    elif kind == "mnist":
        for prefix, n in (("train", 64), ("t10k", 32)):
            labels = [rng.randrange(10) for _ in range(n)]
            pixels = [rng.randrange(256) if rng.random() < 0.2 else 0
                      for _ in range(n * 28 * 28)]
            _idx(os.path.join(d, prefix + "-labels.idx1-ubyte"), 2049, [n], labels)
            _idx(os.path.join(d, prefix + "-images.idx3-ubyte"), 2051, [n, 28, 28], pixels)
    else:
        raise ValueError("unknown data set %r" % kind)


# --- the data recipes of repository programs (applied to a scratch copy) ---

def records(text):
    """A data file's records: blank-line separated blocks if it has blank lines between
    records (CoNLL files), else lines. Each record keeps its trailing newline(s)."""
    if re.search(r"\S\n[ \t]*\n\s*\S", text):
        return [b.strip("\n") + "\n\n" for b in re.split(r"\n[ \t]*\n", text) if b.strip()]
    return text.splitlines(True)


def _read(src):
    with open(src, encoding="utf-8") as f:
        return records(f.read())


def _write(dst, kept):
    if not kept:
        raise ValueError("%s: no record to write" % dst)
    os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
    with open(dst, "w", encoding="utf-8") as f:
        f.writelines(kept)


LEAF = re.compile(r"\([^\s()]+ [^\s()]+\)")  # a preterminal over its word: (NN cat)


def conllu(rng, n):
    """n sentences in CoNLL-U (10 columns, also read as CoNLL-X): a projective tree
    (words left of the root attach to the root or to their right neighbour, words right
    of it to the root or to their left neighbour), a final punctuation mark."""
    out = []
    for k, words in enumerate(_sentences(rng, n, 3, 10)):
        words = words + ["."]
        root = rng.randrange(len(words) - 1) + 1
        out.append("# sent_id = %d\n# text = %s\n" % (k + 1, " ".join(words)))
        for i, w in enumerate(words, 1):
            if i == root:
                head, rel = 0, "root"
            elif i == len(words):
                head, rel = root, "punct"
            elif i < root:
                head, rel = rng.choice([root, i + 1]), "nsubj"
            else:
                head, rel = rng.choice([root, i - 1]), "obj"
            xpos = TAGS.get(w, ".")
            out.append("%d\t%s\t%s\t%s\t%s\t_\t%d\t%s\t_\t_\n" % (
                i, w, w, UPOS.get(xpos, "PUNCT"), xpos, head, rel))
        out.append("\n")
    return "".join(out)


# EVALB's labelled bracket scores (precision, recall, F1 over the constituents other than
# preterminals and the root), printed in the lines minimal-span-parser's evaluate.py reads.
EVALB = r'''#!%(python)s
import re, sys


def spans(line):
    toks = re.findall(r"\(|\)|[^\s()]+", line)
    out, stack, i = [], [], 0
    for k, t in enumerate(toks):
        if t == "(":
            stack.append([toks[k + 1], i, 0])
        elif t == ")":
            label, start, kids = stack.pop()
            if kids and stack:
                out.append((label, start, i))
            if stack:
                stack[-1][2] += kids or toks[k - 2] != "("
        elif toks[k - 1] != "(":
            i += 1
    return out


gold, pred = [open(p).read().splitlines() for p in sys.argv[-2:]]
match = ng = np_ = 0
for g, p in zip(gold, pred):
    gs, ps = spans(g), spans(p)
    ng, np_ = ng + len(gs), np_ + len(ps)
    rest = list(gs)
    for s in ps:
        if s in rest:
            rest.remove(s)
            match += 1
r = 100.0 * match / ng if ng else 0.0
p = 100.0 * match / np_ if np_ else 0.0
f = 2 * p * r / (p + r) if p + r else 0.0
print("Bracketing Recall    = %%.2f\nBracketing Precision = %%.2f\nBracketing FMeasure  = %%.2f"
      %% (r, p, f))
'''


def notebook_source(path):
    """A notebook's code cells, in order, as one program (IPython magics and shell
    lines, which plain Python cannot run, left out)."""
    with open(path, encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    out = []
    for c in cells:
        if c["cell_type"] == "code":
            src = "".join(c["source"])
            out.append("\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("%", "!"))))
    return "\n\n".join(out) + "\n"


def prepare(op, d, rng):
    """Apply one data step (a tuple: name, then arguments) in the scratch copy d."""
    kind, args = op[0], op[1:]

    def p(rel):
        return os.path.join(d, rel)

    if kind == "head":                     # (path, n): keep the first n records
        _write(p(args[0]), _read(p(args[0]))[:args[1]])
    elif kind == "head_as":                # (src, dst, n): dst := the first n of src
        _write(p(args[1]), _read(p(args[0]))[:args[2]])
    elif kind == "short_trees":            # (src, dst, skip, n, words): bracketed trees
        src, dst, skip, n, words = args    # of at most `words` words, after `skip` such
        short = [r for r in _read(p(src)) if len(LEAF.findall(r)) <= words]
        _write(p(dst), short[skip:skip + n])
    elif kind == "conllu":                 # (path, n)
        os.makedirs(os.path.dirname(p(args[0])), exist_ok=True)
        with open(p(args[0]), "w", encoding="utf-8") as f:
            f.write(conllu(rng, args[1]))
    elif kind == "tagged":                 # (path, n): "word<TAB>tag" lines, a blank line
        os.makedirs(os.path.dirname(p(args[0])), exist_ok=True)   # after each sentence
        with open(p(args[0]), "w", encoding="utf-8") as f:
            f.writelines("".join("%s\t%s\n" % (w, UPOS[TAGS[w]]) for w in s) + "\n"
                         for s in _sentences(rng, args[1]))
    elif kind == "mkdir":                  # (dir): an output directory a program expects
        os.makedirs(p(args[0]), exist_ok=True)
    elif kind == "evalb":                  # (dir): an evalb program and its parameter file
        os.makedirs(p(args[0]), exist_ok=True)
        prog = os.path.join(p(args[0]), "evalb")
        with open(prog, "w") as f:
            f.write(EVALB % {"python": sys.executable})
        os.chmod(prog, os.stat(prog).st_mode | stat.S_IEXEC)
        if not os.path.exists(os.path.join(p(args[0]), "COLLINS.prm")):
            open(os.path.join(p(args[0]), "COLLINS.prm"), "w").close()
    elif kind == "2to3":                   # (dir): Python 2 source made Python 3 (lib2to3)
        subprocess.run([sys.executable, "-W", "ignore", "-m", "lib2to3", "-w", "-n", "-j", "1",
                        p(args[0])], check=True, capture_output=True)
    elif kind == "replace":                # (path, old, new): a Python 2 idiom 2to3 leaves
        with open(p(args[0]), encoding="utf-8") as f:   # (pickle in a text-mode file)
            text = f.read()
        if args[1] not in text:
            raise ValueError("%s: %r not found" % (args[0], args[1]))
        with open(p(args[0]), "w", encoding="utf-8") as f:
            f.write(text.replace(args[1], args[2]))
    elif kind == "notebook":               # (ipynb, py)
        with open(p(args[1]), "w", encoding="utf-8") as f:
            f.write(notebook_source(p(args[0])))
    else:
        raise ValueError("unknown data step %r" % (kind,))


if __name__ == "__main__":  # show a sample: python benchmarks/dynet_program_data.py
    sys.stdout.write(conllu(random.Random(0), 2))
