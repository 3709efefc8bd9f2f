"""`regen check`: prove a generate run is trainable before anyone trains on it.

Modules (a finished run's records, encoding and masks are regen.finished, shared with export
and score):
    work.py      what a worker does with a batch of lines; tally.py folds the results
    sample.py    the per-sample facts; stats.py counts them; rules.py judges them
    content.py   the content checks (answer and prefix keys, tool-call faults)
    composition.py  the run's make-up against its prompts
    runner.py    the library entry point; report_*.py, show.py present the result
"""

from regen.check.runner import CheckReport, check_completions, check_run
from regen.check.stats import StatOptions
from regen.finished.encode import Encoder

__all__ = ["CheckReport", "Encoder", "StatOptions", "check_completions", "check_run"]
