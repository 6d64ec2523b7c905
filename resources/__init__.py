from resources.database import UltronResource
from resources.llm import LLMResource

__all__ = ["LLMResource", "UltronResource"]
