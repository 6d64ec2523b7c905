"""When the whole-store assets (tiers, clusters, skills, sft_dataset) refresh on their own.

They follow their upstream eagerly: once new memories land (and nothing upstream is
still running) the automation sensor requests them, so a fresh install turns the example
sessions into skills and an SFT export without waiting for the maintenance schedule.
``eager()`` would also wait until every upstream partition exists; with one partition
per session file, a single file that never produced memories would block the store
forever, so that clause is dropped.
"""

import dagster as dg

follow_upstream = dg.AutomationCondition.eager().without(~dg.AutomationCondition.any_deps_missing())
