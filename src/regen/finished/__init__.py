"""A finished run: what every verb that reads a `regen generate` run reads it through.

`check`, `export` and `score` stand side by side on this package; none imports another.

Modules (the tokenizer loader is regen.tokenizer, shared with prepare):
    record.py       a read-only view of one completion line
    render.py       render with the template; find each assistant turn by diffing renders
    mask.py         tokenise once, map character ranges to a loss mask
    template.py     what the template drops or adds (the template flags)
    encode.py       Encoder: completions -> (input_ids, mask), the same for every verb
    stored.py       the same from the token ids the engine stored, without re-tokenising
    id_arrays.py    stored token ids read as int64 arrays
    holdout.py      the prompts held out of training, drawn the same by export and score
    score_place.py  where a run's score lives; score_rows.py reads its per-row results
    run_state.py    whether a run is whole, and where its lines that are not JSON are
    charts.py       the small SVG charts the HTML reports draw
"""
