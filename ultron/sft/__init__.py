"""SFT dataset export: high-scoring task segments as fine-tuning data.

``export.py`` selects, cleans (``conversation.py``), redacts and formats
(``formats.py``), splits (``split.py``) and writes an export with its manifest;
``validate.py`` checks the files the way a trainer reads them.
"""

from ultron.sft.export import SFTExample, SFTExport, SFTExportError, build_examples, export_dataset, latest_export
from ultron.sft.validate import ValidationResult, validate_export, validate_sft_file

__all__ = ["SFTExample", "SFTExport", "SFTExportError", "ValidationResult", "build_examples", "export_dataset",
           "latest_export", "validate_export", "validate_sft_file"]
