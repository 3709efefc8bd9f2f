"""`regen check`: prove a generate run is trainable before anyone trains on it.

Modules (the tokenizer loader is regen.tokenizer, shared with prepare and export):
    record.py    a read-only view of one completion line
    render.py    render with the template; find each assistant turn by diffing renders
    mask.py      tokenise once, map character ranges to a loss mask
    encode.py    Encoder: completions -> (input_ids, mask), shared with `regen export`
    stored.py    the same from the token ids the engine stored, without re-tokenising
    work.py      what a worker does with a batch of lines; tally.py folds the results
    sample.py    the per-sample facts; stats.py counts them; rules.py judges them
    runner.py    the library entry point; report_*.py, charts.py, show.py present the result
"""

from regen.check.encode import Encoder
from regen.check.runner import CheckReport, check_completions, check_run
from regen.check.stats import StatOptions

__all__ = ["CheckReport", "Encoder", "StatOptions", "check_completions", "check_run"]
