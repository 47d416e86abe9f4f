# A DyNet-style training script, written against DyNet's Python API.
# tests/dynet/test_dynet_script.py runs it with its import line changed, nothing else.
import random
from collections import Counter

import numpy as np
import dynet as dy

random.seed(1)
WORDS = ["the", "a", "dog", "cat", "runs", "sleeps", "big", "small", "quickly"]
TAGS = {"the": "DET", "a": "DET", "dog": "NOUN", "cat": "NOUN", "runs": "VERB",
        "sleeps": "VERB", "big": "ADJ", "small": "ADJ", "quickly": "ADV"}
train = [[(w, TAGS[w]) for w in random.choices(WORDS, k=random.randint(2, 7))] for _ in range(60)]
dev = [[(w, TAGS[w]) for w in random.choices(WORDS, k=random.randint(2, 7))] for _ in range(20)]

w2i = {w: i for i, w in enumerate(sorted({w for s in train for w, _ in s}))}
t2i = {t: i for i, t in enumerate(sorted({t for s in train for _, t in s}))}
counts = Counter(w for s in train for w, _ in s)

model = dy.ParameterCollection()
trainer = dy.AdamTrainer(model, alpha=0.01)
trainer.set_clip_threshold(5.0)
E = model.add_lookup_parameters((len(w2i), 16))
builders = [dy.LSTMBuilder(1, 16, 16, model), dy.LSTMBuilder(1, 16, 16, model)]
pH = model.add_parameters((16, 32))
pO = model.add_parameters((len(t2i), 16))
bO = model.add_parameters(len(t2i), init=dy.ConstInitializer(0.0))


def build_tagging_graph(words):
    H = dy.parameter(pH)
    O = dy.parameter(pO)
    f_init, b_init = [b.initial_state() for b in builders]
    wembs = [dy.lookup(E, w2i[w]) for w in words]
    wembs = [dy.noise(we, 0.1) for we in wembs]
    fw = [x.output() for x in f_init.add_inputs(wembs)]
    bw = [x.output() for x in b_init.add_inputs(reversed(wembs))]
    return [O * dy.tanh(H * dy.concatenate([f, b])) + bO for f, b in zip(fw, reversed(bw))]


def sent_loss(words, tags):
    return dy.esum([dy.pickneglogsoftmax(s, t2i[t]) for s, t in zip(build_tagging_graph(words), tags)])


def tag_sent(words):
    dy.renew_cg()
    return [max(t2i, key=lambda t: dy.softmax(s).npvalue()[t2i[t]]) for s in build_tagging_graph(words)]


losses = []
for epoch in range(6):
    random.shuffle(train)
    total = 0.0
    for i in range(0, len(train), 10):
        dy.renew_cg()
        batch = [sent_loss([w for w, _ in s], [t for _, t in s]) for s in train[i:i + 10]]
        loss = dy.esum(batch)
        total += loss.scalar_value()
        loss.backward()
        trainer.update()
    losses.append(total)

good = sum(p == t for s in dev for p, t in zip(tag_sent([w for w, _ in s]), [t for _, t in s]))
accuracy = good / sum(len(s) for s in dev)
dy.save(SAVE_TO, [E, builders[0], builders[1], pH, pO, bO])
m2 = dy.ParameterCollection()
E2, f2, b2, pH2, pO2, bO2 = dy.load(SAVE_TO, m2)
assert np.array_equal(E2.as_array(), E.as_array())
