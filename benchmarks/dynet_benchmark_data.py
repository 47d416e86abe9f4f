"""The data of neulab/dynet-benchmark's scripts, for benchmarks/dynet_benchmark.py: a
checkout taken from a git directory (blobs the snapshot lacks are skipped, as
dynet_programs.bring does), and the files it lacks made from a real corpus.

The repository's `data/` holds SST trees (`trees/`), WikiNER tags (`tags/`) and
Mikolov's Penn Treebank text (`text/`); a snapshot may lack the large training files
(`data/tags/train.txt`, `data/text/train.txt`: absent, or Git LFS pointers). Those are
converted from Porttinari-base, the news part of the Porttinari treebank of Brazilian
Portuguese (Duran et al., 2023; NILC, University of Sao Paulo; 8,420 sentences, 168,400
words with manual UPOS tags; licence CC BY 4.0, as listed by Universal Dependencies for
UD_Portuguese-Porttinari), as shipped by the PyPI package `dante-corpora` 2.0.5 (file
`dante/data/porttinari/annotated.conllu`; the package itself is under the MIT licence):

- `tags`: every sentence as "word|UPOS word|UPOS ..." (bilstm-tagger.py's format);
  whitespace inside a word becomes "_". The repository's `data/tags/dev.txt` is kept:
  the scripts time training only, and read dev only to print an accuracy.
- `text`: Mikolov's preprocessing (lower case, punctuation dropped, numbers as "N",
  the 10,000 most frequent words of the training part, the others "<unk>"); every
  fortieth sentence goes to `dev.txt` (210 sentences: the scripts evaluate on dev when
  their time is up, untimed but not free: with minibatches of one each dev sentence is
  a graph), the rest to `train.txt` (8,210). rnnlm-batch.py asserts
  that dev has no word train lacks, so a made `train.txt` comes with its `dev.txt`.

No data file is kept in this repository: the corpus comes from the installed package
(`pip install --no-deps dante-corpora`), from its wheel (`pip download dante-corpora`)
or from any CoNLL-U file (`--corpus`)."""
import collections
import importlib.util
import os
import re
import subprocess
import shutil
import zipfile

CORPUS_MEMBER = "dante/data/porttinari/annotated.conllu"
LFS = b"version https://git-lfs"
TEXT_VOCAB = 10000          # Mikolov's PTB: 10,000 types with <unk>
NUMBER = re.compile(r"^[+-]?\d[\d.,:/%-]*$")


def conllu_sentences(text):
    """[(word, UPOS), ...] per sentence: the syntactic words of CoNLL-U (the lines whose
    id is an integer: multiword tokens "9-10" and empty nodes "8.1" left out)."""
    out, cur = [], []
    for line in text.splitlines():
        if not line.strip():
            if cur:
                out.append(cur)
                cur = []
            continue
        if line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) >= 4 and cols[0].isdigit():
            cur.append((cols[1], cols[3]))
    if cur:
        out.append(cur)
    return out


def tags_lines(sentences):
    """bilstm-tagger.py's lines: "word|tag" separated by spaces."""
    return [" ".join("%s|%s" % (re.sub(r"\s+", "_", w), t) for w, t in s) + "\n"
            for s in sentences]


def text_lines(sentences, vocab_size=TEXT_VOCAB, dev_every=None):
    """(train lines, dev lines) in Mikolov's style; dev's words are all in train.
    dev_every: every so many sentences one goes to dev (default 40, fewer for a small
    corpus: a tenth of it at most, at least every second one)."""
    norm = [[("N" if NUMBER.match(w) else w.lower()) for w, t in s if t != "PUNCT"]
            for s in sentences]
    norm = [s for s in norm if s]
    dev_every = dev_every or max(2, min(40, len(norm) // 10))
    dev = [s for k, s in enumerate(norm) if k % dev_every == dev_every - 1]
    train = [s for k, s in enumerate(norm) if k % dev_every != dev_every - 1]
    counts = collections.Counter(w for s in train for w in s)
    keep = {w for w, _ in sorted(counts.items(), key=lambda x: (-x[1], x[0]))[:vocab_size - 1]}

    def lines(part):
        return [" " + " ".join(w if w in keep else "<unk>" for w in s) + " \n" for s in part]

    return lines(train), lines(dev)


def find_corpus(path=None):
    """The corpus's CoNLL-U text: from `path` (a .conllu file, or a dante-corpora wheel),
    else from the installed `dante` package. None when there is none."""
    if path is None:
        spec = importlib.util.find_spec("dante")
        if spec is None or not spec.submodule_search_locations:
            return None
        path = os.path.join(list(spec.submodule_search_locations)[0], "data", "porttinari",
                            "annotated.conllu")
        if not os.path.exists(path):
            return None
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            return z.read(CORPUS_MEMBER).decode("utf-8")
    with open(path, encoding="utf-8") as f:
        return f.read()


def usable(path):
    """A data file is there in full: present, not empty, not a Git LFS pointer."""
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        return False
    with open(path, "rb") as f:
        return not f.read(len(LFS)).startswith(LFS)


def _write(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)


def complete(root, corpus_text, limit=None):
    """Make the data files `root` (a checkout) lacks from the corpus; return what was
    made {path: number of lines}. `limit` keeps the first sentences only (tests)."""
    made = {}
    needed = [p for p in ("data/tags/train.txt", "data/text/train.txt")
              if not usable(os.path.join(root, p))]
    if not needed:
        return made
    if corpus_text is None:
        raise FileNotFoundError("the checkout lacks %s and no corpus was found: "
                                "pip install --no-deps dante-corpora, or --corpus FILE"
                                % ", ".join(needed))
    sentences = conllu_sentences(corpus_text)[:limit]
    if "data/tags/train.txt" in needed:
        made["data/tags/train.txt"] = tags_lines(sentences)
    if "data/text/train.txt" in needed:
        made["data/text/train.txt"], made["data/text/dev.txt"] = text_lines(sentences)
    for rel, lines in made.items():
        _write(os.path.join(root, rel), lines)
    return {rel: len(lines) for rel, lines in made.items()}


def git_dir(path):
    """The git directory at or inside `path` (a mirror's repo/.git, a clone), or None."""
    for cand in (path, os.path.join(path, ".git"), os.path.join(path, "repo", ".git"),
                 os.path.join(path, "repo")):
        if (os.path.isfile(os.path.join(cand, "HEAD"))
                and os.path.isdir(os.path.join(cand, "objects"))):
            return cand
    return None


def extract(git, dest, commit="HEAD"):
    """Write the tree of `commit` into dest, blob by blob (`git archive` stops at the
    first blob a partial snapshot lacks); return the paths that were skipped."""
    cmd = ["git", "--git-dir=" + git]
    tree = subprocess.run(cmd + ["ls-tree", "-r", "-z", commit], capture_output=True,
                          check=True).stdout.decode().split("\0")
    missing = []
    for entry in filter(None, tree):
        meta, path = entry.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind != "blob" or mode == "120000":
            continue
        blob = subprocess.run(cmd + ["cat-file", "blob", sha], capture_output=True)
        if blob.returncode:
            missing.append(path)
            continue
        target = os.path.join(dest, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(blob.stdout)
        if mode == "100755":
            os.chmod(target, 0o755)
    return missing


def checkout(sources, dest):
    """A checkout of dynet-benchmark in dest, from `sources` (a checkout: dynet-py/
    and data/ at its top; or a git directory, extracted). Returns the skipped paths."""
    if os.path.isdir(os.path.join(sources, "dynet-py")):
        shutil.copytree(sources, dest, ignore=shutil.ignore_patterns(".git"), dirs_exist_ok=True)
        return []
    git = git_dir(sources)
    if git is None:
        raise FileNotFoundError("%s: neither a dynet-benchmark checkout (dynet-py/) nor a "
                                "git directory" % sources)
    return extract(git, dest)


def sample(path, n=3):
    """The first n lines of a made file (for the report)."""
    with open(path, encoding="utf-8") as f:
        return [next(f).rstrip("\n")[:100] for _ in range(n)]

