"""The repository programs benchmarks/dynet_programs.py runs: where each comes from
(repository and commit), how it is started, and the data recipe of its scratch copy
(steps of benchmarks/dynet_program_data.prepare). docs/dynet_programs.md shows the table
this produces. Nothing of these repositories is kept here: `--bring` extracts each one at
the commit below from a git mirror or clone."""

# local name: (GitHub repository, commit)
SOURCES = {
    "nn4nlp-code": ("neubig/nn4nlp-code", "970d91a51664b3d91a9822b61cd76abea20218cb"),
    "minimal-span-parser": ("mitchellstern/minimal-span-parser",
                            "ff685cd3588291ae4088f3352c8a36c3f15ef507"),
    "bilstm-aux": ("bplank/bilstm-aux", "2d35c0bfa737642827f548a897a5cdb51da87464"),
    "uuparser": ("UppsalaNLP/uuparser", "c0d8a8210c1032272dfad9250a765f09e128976f"),
    "bist-parser": ("elikip/bist-parser", "4cd6a29d6c737ff29cb61c0e51532a9d60c4818c"),
    "xnmt": ("neulab/xnmt", "6f6ab33f2c55aecd3e0655c46adcf7b233f3783c"),
}

# The course's data, cut to a few records per file (the snapshot lacks data/ptb/train.txt,
# over the mirror's 4 MiB limit: the first lines of valid.txt stand in for it).
NN4NLP_DATA = [
    ("head", "data/classes/train.txt", 150), ("head", "data/classes/test.txt", 50),
    ("head_as", "data/ptb/valid.txt", "data/ptb/train.txt", 150),
    ("head", "data/ptb/valid.txt", 40),
    ("head", "data/parallel/train.ja", 150), ("head", "data/parallel/train.en", 150),
    ("head", "data/parallel/dev.ja", 30), ("head", "data/parallel/dev.en", 30),
    ("head", "data/parallel/test.ja", 30), ("head", "data/parallel/test.en", 30),
    ("head", "data/tags/train.txt", 100), ("head", "data/tags/dev.txt", 30),
    ("head", "data/parsing/trees/train.txt", 100), ("head", "data/parsing/trees/dev.txt", 30),
    ("head", "data/parsing/graph/ptb_train.txt", 100),
    ("head", "data/parsing/graph/ptb_dev.txt", 30),
    ("head", "data/parsing/shift_reduce/small-train.unk.txt", 100),
    ("head", "data/parsing/shift_reduce/small-dev.unk.txt", 250),  # parses dev[209]
]

# The span parser's training treebank (sections 02-21) is over the 4 MiB limit too: short
# trees of section 22 (in the repository) train it, and the first of them are its dev set
# (its vocabularies are frozen after reading the training set: an unseen tag is an error).
SPAN_DATA = [("short_trees", "data/22.auto.clean", "data/train.small", 0, 60, 15),
             ("short_trees", "data/22.auto.clean", "data/dev.small", 0, 15, 15),
             ("evalb", "EVALB")]
SPAN_ARGS = ["--train-path", "data/train.small", "--dev-path", "data/dev.small",
             "--epochs", "1", "--checks-per-epoch", "2", "--model-path-base", "models/m",
             "--lstm-dim", "32", "--label-hidden-dim", "32", "--split-hidden-dim", "32",
             "--word-embedding-dim", "32", "--tag-embedding-dim", "16"]

CONLL_DATA = [("conllu", "data/train.conllu", 60), ("conllu", "data/dev.conllu", 15)]
# bist-parser is Python 2 (print statements, xrange): 2to3 converts the copy, for both runs,
# and its pickled parameters file is opened in binary mode (Python 3's pickle writes bytes).
BIST_DATA = CONLL_DATA + [("2to3", "."), ("mkdir", "bmstparser/src/out"),
                          ("mkdir", "barchybrid/src/out")] + [
    ("replace", "%s/src/parser.py" % _p, "options.params), 'w')", "options.params), 'wb')")
    for _p in ("bmstparser", "barchybrid")] + [
    ("replace", "%s/src/parser.py" % _p, "open(options.params, 'r')", "open(options.params, 'rb')")
    for _p in ("bmstparser", "barchybrid")]
BIST_ARGS = ["--train", "../../data/train.conllu", "--dev", "../../data/dev.conllu",
             "--epochs", "1", "--outdir", "out", "--lstmdims", "32", "--wembedding", "32",
             "--hidden", "32"]
UU_ARGS = ["--trainfile", "data/train.conllu", "--devfile", "data/dev.conllu",
           "--outdir", "out", "--epochs", "2", "--lstm-output-size", "32",
           "--word-emb-size", "32", "--char-emb-size", "12"]

# label: dict(repo, cwd (inside the copy), argv (the program first), data, limit seconds
# per command, then: commands run afterwards in the same copy, e.g. parsing with the saved
# model).
# A limit stops a run that has not finished: it counts as running if it printed progress
# and no error (see dynet_programs.status).
P = {}


def _nn4nlp(label, path, args=(), limit=10):
    P[label] = dict(repo="nn4nlp-code", cwd=path.split("/")[0],
                    argv=[path.split("/")[1]] + list(args), data=NN4NLP_DATA, limit=limit)


for _path in ["01-intro/bow.py", "01-intro/cbow.py", "01-intro/deep-cbow.py",
              "02-lm/loglin-lm.py", "02-lm/nn-lm.py", "02-lm/nn-lm-optim.py",
              "02-lm/nn-lm-batch.py", "03-wordemb/wordemb-cbow.py",
              "03-wordemb/wordemb-skip.py", "04-efficiency/slow-impl.py",
              "04-efficiency/wordemb-skip-binary.py", "04-efficiency/wordemb-skip-ns.py",
              "05-cnn/cnn-class.py", "05-cnn/cnn-activation.py", "06-rnn/lm-lstm.py",
              "06-rnn/lm-minibatch.py", "06-rnn/sentiment-rnn.py", "06-rnn/sentiment-lstm.py",
              "07-sentrep/text-retrieval.py", "08-condlm/enc_dec.py",
              "08-condlm/batched_enc_dec.py", "09-attention/batched_attention.py",
              "10-structured/bilstm-tagger.py", "10-structured/bilstm-variant-tagger.py",
              "12-transitionparsing/feed_forward.py", "12-transitionparsing/stack_lstm.py",
              "12-transitionparsing/tree_parser.py", "13-graphparsing/biaffine_parser.py",
              "15-vae/vae-lm.py", "16-reinforce/bilstm-tagger.py"]:
    _nn4nlp("nn4nlp " + _path, _path)
for _flags in (["--teacher"], ["--perceptron"], ["--cost"], ["--hinge"], ["--schedule"]):
    _nn4nlp("nn4nlp 10-structured/bilstm-variant-tagger.py " + " ".join(_flags),
            "10-structured/bilstm-variant-tagger.py", _flags)
for _nb in ["bow", "cbow", "deep-cbow"]:
    P["nn4nlp 01-intro/%s.ipynb" % _nb] = dict(
        repo="nn4nlp-code", cwd="01-intro", argv=["%s.ipynb.py" % _nb],
        data=NN4NLP_DATA + [("notebook", "01-intro/%s.ipynb" % _nb,
                             "01-intro/%s.ipynb.py" % _nb)], limit=10)

for _kind in ["top-down", "chart"]:
    P["minimal-span-parser train --parser-type " + _kind] = dict(
        repo="minimal-span-parser", cwd=".",
        argv=["src/main.py", "train", "--parser-type", _kind] + SPAN_ARGS,
        data=SPAN_DATA, limit=60)

P["bilstm-aux structbilty.py"] = dict(
    repo="bilstm-aux", cwd=".",
    argv=["src/structbilty.py", "--model", "out/m", "--train", "data/train.tsv",
          "--dev", "data/dev.tsv", "--test", "data/dev.tsv", "--iters", "2",
          "--in_dim", "16", "--h_dim", "16", "--c_in_dim", "8", "--c_h_dim", "8"],
    data=[("tagged", "data/train.tsv", 60), ("tagged", "data/dev.tsv", 15), ("mkdir", "out")],
    limit=60)

P["bist-parser bmstparser"] = dict(
    repo="bist-parser", cwd="bmstparser/src", argv=["parser.py"] + BIST_ARGS,
    then=[["parser.py", "--predict", "--outdir", "out", "--test", "../../data/dev.conllu",
           "--params", "out/params.pickle", "--model", "out/neuralfirstorder.model1"]],
    data=BIST_DATA, limit=60)
P["bist-parser barchybrid"] = dict(
    repo="bist-parser", cwd="barchybrid/src", argv=["parser.py"] + BIST_ARGS + ["--k", "2", "--userlmost", "--usehead"],
    then=[["parser.py", "--predict", "--outdir", "out", "--test", "../../data/dev.conllu",
           "--params", "out/params.pickle", "--model", "out/barchybrid.model1"]],
    data=BIST_DATA, limit=60)

UU_PREDICT = ["-m", "uuparser.parser", "--predict", "--outdir", "out", "--testfile",
              "data/dev.conllu"]
P["uuparser transition-based"] = dict(
    repo="uuparser", cwd=".", argv=["-m", "uuparser.parser"] + UU_ARGS, then=[UU_PREDICT],
    data=CONLL_DATA, limit=60)
P["uuparser graph-based"] = dict(
    repo="uuparser", cwd=".", argv=["-m", "uuparser.parser", "--graph-based"] + UU_ARGS,
    then=[UU_PREDICT + ["--graph-based"]], data=CONLL_DATA, limit=60)

# xnmt's unit tests: the suite run by pytest, each test's outcome compared.
P["xnmt unit tests"] = dict(
    repo="xnmt", cwd=".", argv=["-m", "pytest", "-q", "-p", "no:cacheprovider", "test"],
    data=[], limit=600, suite=True)

PROGRAMS = P
