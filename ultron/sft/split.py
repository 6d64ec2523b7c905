"""Train/validation assignment that depends on the content alone.

Hashing the segment fingerprint (not a position or a random draw) keeps an example in
the same split across exports, whatever the filters, limit or ordering, so a model
evaluated on one export's validation set never trained on it in another export; copies
of the same content share a fingerprint and so can never straddle the split.
"""

from __future__ import annotations

import hashlib

TRAIN = "train"
VALIDATION = "validation"
SPLITS = (TRAIN, VALIDATION)


def split_of(fingerprint: str, validation_fraction: float) -> str:
    digest = hashlib.sha256(f"ultron-sft-split\0{fingerprint}".encode()).digest()
    position = int.from_bytes(digest[:8], "big") / 2**64  # uniform in [0, 1)
    return VALIDATION if position < validation_fraction else TRAIN
