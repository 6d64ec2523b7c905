from resources.database import UltronResource

__all__ = ["UltronResource"]
