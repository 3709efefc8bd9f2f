"""`regen export`: turn a checked run into a dataset others can pick up.

Modules:
    format_base.py  what every row shape shares; formats.py one class per target
                    (specforge, tokenized, ...), sharegpt.py (LLaMA-Factory, axolotl),
                    openai_batch.py (OpenAI batch output)
    select.py       filters named after the check rules, and the seeded validation split
    merge.py        dedup by id and by content against an earlier export
    files.py        atomic, datasets-loadable shards: data/<domain>/<split>-NNNNN-of-MMMMM
    request.py      ExportRequest: what one export is asked to do, as one value
    runner.py       the library entry point; summary.py what it did
    card.py         README.md (DatasetCardData) and regen.json; card_facts.py gathers the
                    facts from the runs, card_body.py is the Markdown template
    draft_vocab.py  the EAGLE-3 d2t/t2d mapping and its coverage
    hub_push.py     --push-to-hub: one commit with huggingface_hub
    publish.py      after the data: draft vocabulary, card, push
Token ids and masks come from `regen.finished.encode.Encoder`, the same as check's; the card's
check is check's verdict (check/card.py), handed in by the CLI as a `regen.finished.verdict.Judge`.
"""

from regen.export.formats import make_format
from regen.export.request import ExportRequest
from regen.export.runner import ExportSummary, export_run
from regen.export.select import Filters

__all__ = ["ExportRequest", "ExportSummary", "Filters", "export_run", "make_format"]
