"""`regen export`: turn a checked run into training files (SpecForge JSONL or tokenized).

Modules:
    formats.py  one class per output row shape (sharegpt/specforge, tokenized)
    select.py   filters named after the check rules, and the stable eval split
    merge.py    dedup by id and by content against an earlier export
    files.py    atomic, datasets-loadable split files (jsonl / parquet)
    runner.py   the library entry point
Token ids and masks come from `regen.check.Encoder`, so export writes what check judged.
"""

from regen.export.formats import make_format
from regen.export.runner import ExportSummary, export_run
from regen.export.select import Filters

__all__ = ["ExportSummary", "Filters", "export_run", "make_format"]
