"""Learned models and their training code: what Ultron decides from data, not phrase lists.

:mod:`.units`     a segment as the lesson model reads it (turns and their features)
:mod:`.linear`    hashed and dense linear models served in numpy
:mod:`.lessons`   the lesson model: which turns teach what, and the memories they make
:mod:`.corpus`    the labelled corpus (benchmarks/data/lessons) read and labelled per turn
:mod:`.train`     ``python -m ultron.learned.train``: fit from the corpus, write ``weights/``

Serving needs numpy and the weights file only; training needs scikit-learn.
"""
