"""The offline ("rules") algorithms: every LLM task of Ultron done without a model.

Nothing here calls a model or touches storage: the same input always gives the same
output, in milliseconds, so the whole pipeline runs (and is tested) with no key, and
the ``rules`` provider (:mod:`ultron.providers.rules`) is these functions behind the
provider interface. The package imports only the standard library, numpy,
:mod:`ultron.vocabulary`, :mod:`ultron.sessions.messages`, :mod:`ultron.llm.tokens`
and :mod:`ultron.redaction`.

Reading a segment
    :mod:`.reader`       the one pass over a segment's messages that the scorer and
                         the extractors share: calls paired with results, errors
                         judged, tool kinds, replayed history and sub-agents marked
Trajectories
    :mod:`.segmenter`    cut a window of messages into tasks (``segment_window``)
    :mod:`.quality`      the deterministic quality score of a task segment
                         (``score_trajectory``, ``classify_task_type``); its
                         signals in :mod:`.quality_metrics`
Memories (the offline provider reads sessions with the learned lesson model,
:mod:`ultron.learned.lessons`; these rules extract from shared text and stay as the
reference the model was measured against)
    :mod:`.extract`      memory candidates of a segment or of shared text
                         (``extract_memories``, ``extract_from_text``), from
                         :mod:`.episodes` (the extractors' view of a segment), the
                         rules :mod:`.errors`, :mod:`.corrections`,
                         :mod:`.preferences`, :mod:`.patterns`, :mod:`.security`,
                         :mod:`.policies`, and :mod:`.candidates` (assembly, tags,
                         dedupe); helpers :mod:`.gists` (tool calls in a few words)
                         and :mod:`.text` (sentences, words, overlap)
    :mod:`.classify`     a memory's type (``classify_memory_type``)
    :mod:`.summarize`    L0 / L1 summaries (``summarize_l0``, ``overview_l1``)
    :mod:`.merge`        near-duplicate test and merge (``is_same_memory``,
                         ``merge_bodies``)
Clusters and skills
    :mod:`.topics`       cluster labels by class TF-IDF (``rules_labels``,
                         ``label_from_texts``)
    :mod:`.skill_synthesis`  a cluster's memories turned into a procedure
                         (``synthesize``), on the word tools of :mod:`.skill_text`
"""

from ultron.heuristics.classify import classify_memory_type
from ultron.heuristics.extract import extract_from_text, extract_memories
from ultron.heuristics.merge import is_same_memory, merge_bodies
from ultron.heuristics.quality import QUALITY_VERSION, classify_task_type, score_trajectory
from ultron.heuristics.reader import Segment, read_segment
from ultron.heuristics.segmenter import segment_window, topic_for
from ultron.heuristics.skill_synthesis import synthesize, topic_from
from ultron.heuristics.summarize import overview_l1, summarize_l0
from ultron.heuristics.topics import label_from_texts, rules_labels

__all__ = [
    "QUALITY_VERSION", "Segment", "classify_memory_type", "classify_task_type", "extract_from_text",
    "extract_memories", "is_same_memory", "label_from_texts", "merge_bodies", "overview_l1", "read_segment",
    "rules_labels", "score_trajectory", "segment_window", "summarize_l0", "synthesize", "topic_for", "topic_from",
]
