"""Ultron: turns agent session logs into reusable memories, skills and SFT data."""

from ultron.settings import Settings

__all__ = ["Settings", "Ultron"]


def __getattr__(name: str):
    # Lazy so `import ultron` (and the settings) never drags in the database stack.
    if name == "Ultron":
        from ultron.sdk import Ultron

        return Ultron
    raise AttributeError(name)
