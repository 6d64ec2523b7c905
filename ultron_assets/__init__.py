"""Ultron's Dagster assets, by hub (``definitions.py`` is the code location).

Dagster's beta, preview and supersession warnings name APIs this project chose on purpose
(declarative automation, dynamic partitions); they tell a user of Ultron nothing they can
act on, and repeated in every code server and run worker they buried the console of
``ultron dev``. They are silenced here, by category, before any asset module loads.
"""

import warnings

import dagster as dg

for _category in (dg.BetaWarning, dg.PreviewWarning, dg.SupersessionWarning):
    warnings.filterwarnings("ignore", category=_category)
