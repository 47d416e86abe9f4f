"""DyNet's softmax builders: `SoftmaxBuilder` (the interface),
`StandardSoftmaxBuilder` (W x + b) and `ClassFactoredSoftmaxBuilder`
(p(w | x) = p(class(w) | x) p(w | class(w), x), with word classes read from a file in
DyNet's format). Parameters are named and ordered as DyNet's; values equal DyNet's for
the same parameters (tests/data/builders_dynet.json)."""
import numpy as np

from autobatch.settings import init_rng
from autobatch.api.core import (
    affine_transform, concatenate, concatenate_to_batch, log_softmax, parameter,
    pick, pick_batch_elem, pickneglogsoftmax, pickneglogsoftmax_batch, scalarInput, size_argument,
    softmax,
)


class SoftmaxBuilder:
    """Interface of a softmax layer over C classes given a vector x (DyNet's). A new
    graph needs nothing special: parameters enter each graph when first used."""

    def param_collection(self):
        """The builder's subcollection, holding its parameters (DyNet's
        ``param_collection()``)."""
        return self._pc

    def full_logits(self, x, update=True):
        """Logits over all classes, shape (C,) (batch of x)."""
        raise NotImplementedError

    def full_log_distribution(self, x, update=True):
        """log p(c | x) for every class, shape (C,)."""
        return log_softmax(self.full_logits(x, update))

    def neg_log_softmax(self, x, c, update=True):
        """-log p(c | x), a scalar."""
        raise NotImplementedError

    def neg_log_softmax_batch(self, x, c, update=True):
        """-log p(c_i | x_i) for a batched x and one class id per batch element."""
        raise NotImplementedError

    def sample(self, x):
        """A class id drawn from p(. | x) (computes x now)."""
        raise NotImplementedError

    def _param(self, p, update):
        return parameter(p, update=update)


def _draw(probs):
    """DyNet's sampling: walk the distribution with one uniform number."""
    u = init_rng().random()    # seeded by dy.reset_random_seed / --dynet-seed
    c = 0
    for c, p in enumerate(probs):
        u -= p
        if u < 0.0:
            return c
    return c


class StandardSoftmaxBuilder(SoftmaxBuilder):
    """softmax(W x + b) over `num_labels` classes for inputs of size `rep_dim`
    (DyNet's; parameters W (num_labels, rep_dim), b (num_labels,) zero-initialised, in
    the subcollection "standard-softmax-builder"). `bias=False` drops b."""

    def __init__(self, rep_dim, num_labels, model, bias=True):
        self.rep_dim = size_argument(rep_dim, "StandardSoftmaxBuilder: rep_dim")
        self.num_labels = size_argument(num_labels, "StandardSoftmaxBuilder: num_labels", 1)
        self.bias = bool(bias)
        self._pc = model.add_subcollection("standard-softmax-builder")
        self.W = self._pc.add_parameters((self.num_labels, self.rep_dim))
        self.b = self._pc.add_parameters(self.num_labels, init=0.0) if self.bias else None

    def full_logits(self, x, update=True):
        W = self._param(self.W, update)
        return affine_transform([self._param(self.b, update), W, x]) if self.bias else W * x

    def neg_log_softmax(self, x, c, update=True):
        return pickneglogsoftmax(self.full_logits(x, update), c)

    def neg_log_softmax_batch(self, x, c, update=True):
        if len(c) != x.dim()[1]:
            raise ValueError(f"neg_log_softmax_batch: {len(c)} class ids for a batch of {x.dim()[1]}")
        return pickneglogsoftmax_batch(self.full_logits(x, update), list(c))

    def sample(self, x):
        return _draw(softmax(self.full_logits(x)).npvalue().ravel())


def read_cluster_file(fname, word_dict):
    """DyNet's word-class file: one ``class word`` per line (spaces or tabs; anything
    after the word is ignored). Returns (class names in order of appearance, word ids
    per class); word ids come from `word_dict` (word -> id), which must hold every
    word of the file."""
    classes, members = {}, []
    with open(fname, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            fields = line.replace("\t", " ").split(" ")
            fields = [x for x in fields if x.strip()]
            if len(fields) < 2:
                raise ValueError(f"{fname}:{n}: expected 'class word', got {line.rstrip()!r}")
            cname, word = fields[0], fields[1].rstrip("\r\n")
            if word not in word_dict:
                raise ValueError(f"{fname}:{n}: word {word!r} is not in word_dict")
            wid = word_dict[word]
            if isinstance(wid, bool) or not isinstance(wid, (int, np.integer)) or wid < 0:
                raise ValueError(f"{fname}:{n}: word_dict gives {word!r} the id {wid!r}, "
                                 "not an int >= 0")
            c = classes.setdefault(cname, len(classes))
            if c == len(members):
                members.append([])
            members[c].append(int(wid))
    if not classes:
        raise ValueError(f"{fname}: no classes")
    return list(classes), members


class ClassFactoredSoftmaxBuilder(SoftmaxBuilder):
    """Class-factored softmax (DyNet's): p(w | x) = p(c | x) p(w | c, x) with c the
    class of w in `cluster_file` (DyNet's format, see `read_cluster_file`) and word
    ids from `word_dict`. Parameters (subcollection "class-factored-softmax-builder",
    DyNet's order): r2c (classes, rep_dim), its bias, then for each class of more
    than one word its (words, rep_dim) matrix and bias. `full_logits` follows DyNet
    exactly, including its mix of log p(c) and p(w | c) and -10000 for ids of no class."""

    def __init__(self, rep_dim, cluster_file, word_dict, model, bias=True):
        self.rep_dim, self.bias = size_argument(rep_dim, f"{type(self).__name__}: rep_dim"), bool(bias)
        self.class_names, self.class_words = read_cluster_file(cluster_file, word_dict)
        n_words = max(w for ws in self.class_words for w in ws) + 1
        self.word_class = np.full(n_words, -1, dtype=np.int64)
        self.word_row = np.zeros(n_words, dtype=np.int64)
        for c, ws in enumerate(self.class_words):
            for row, w in enumerate(ws):
                self.word_class[w], self.word_row[w] = c, row
        self._pc = model.add_subcollection("class-factored-softmax-builder")
        nc = len(self.class_words)
        self.r2c = self._pc.add_parameters((nc, self.rep_dim))
        self.cbias = self._pc.add_parameters(nc, init=0.0) if self.bias else None
        self.rc2w, self.rc2wbias = [None] * nc, [None] * nc
        for c, ws in enumerate(self.class_words):
            if len(ws) > 1:
                self.rc2w[c] = self._pc.add_parameters((len(ws), self.rep_dim))
                if self.bias:
                    self.rc2wbias[c] = self._pc.add_parameters(len(ws), init=0.0)

    def _class_of(self, w):
        if not 0 <= w < len(self.word_class) or self.word_class[w] < 0:
            raise ValueError(f"word id {w} is in no class of the cluster file")
        return int(self.word_class[w])

    def class_logits(self, x, update=True):
        """Logits over the classes, shape (classes,)."""
        r2c = self._param(self.r2c, update)
        return affine_transform([self._param(self.cbias, update), r2c, x]) if self.bias else r2c * x

    def class_log_distribution(self, x, update=True):
        """log p(c | x) over the classes."""
        return log_softmax(self.class_logits(x, update))

    def subclass_logits(self, x, classid, update=True):
        """Logits over the words of class `classid` (which must have more than one word)."""
        if not 0 <= classid < len(self.class_words) or self.rc2w[classid] is None:
            raise ValueError(f"subclass_logits: class {classid} has no word-level parameters "
                             "(no such class, or a class of one word)")
        W = self._param(self.rc2w[classid], update)
        if self.bias:
            return affine_transform([self._param(self.rc2wbias[classid], update), W, x])
        return W * x

    def subclass_log_distribution(self, x, classid, update=True):
        """log p(w | classid, x) over the words of the class."""
        return log_softmax(self.subclass_logits(x, classid, update))

    def full_logits(self, x, update=True):
        cscores = self.class_log_distribution(x, update)
        full = [None] * len(self.word_class)
        for w in np.flatnonzero(self.word_class < 0):
            full[w] = scalarInput(-10000.0)
        for c, ws in enumerate(self.class_words):
            cscore = pick(cscores, c)
            if len(ws) == 1:
                full[ws[0]] = cscore
                continue
            wdist = softmax(self.subclass_logits(x, c, update))
            for row, w in enumerate(ws):
                full[w] = pick(wdist, row) + cscore
        return concatenate(full)

    def neg_log_softmax(self, x, c, update=True):
        cls = self._class_of(c)
        loss = pickneglogsoftmax(self.class_logits(x, update), cls)
        if len(self.class_words[cls]) == 1:
            return loss
        return loss + pickneglogsoftmax(self.subclass_logits(x, cls, update), int(self.word_row[c]))

    def neg_log_softmax_batch(self, x, c, update=True):
        if len(c) != x.dim()[1]:
            raise ValueError(f"neg_log_softmax_batch: {len(c)} class ids for a batch of {x.dim()[1]}")
        return concatenate_to_batch([self.neg_log_softmax(pick_batch_elem(x, i), w, update)
                                     for i, w in enumerate(c)])

    def sample(self, x):
        c = _draw(softmax(self.class_logits(x)).npvalue().ravel())
        ws = self.class_words[c]
        if len(ws) == 1:
            return ws[0]
        return ws[_draw(softmax(self.subclass_logits(x, c)).npvalue().ravel())]

