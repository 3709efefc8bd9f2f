# ruff: noqa: E501  (a Markdown template: its table rows are long lines)
"""The card's Markdown body: a Jinja template over the facts of card.gather (`d`)."""

BODY = """---
{{ card_data }}
---
{% if d.check_verdict == "fail" -%}
> **Warning: this dataset FAILED `regen check`** (failed rules: {{ d.check.failed_rules | join(", ") }}).
> Read the check figures below before training on it.
{% elif d.check_verdict == "not checked" -%}
> This dataset was exported without `regen check` (no tokenizer was given): its loss masks
> and answers were not judged.
{% endif %}
# {{ pretty_name or "Regenerated drafter training data" }}

Prompts answered again by the target model{{ "s" if models | length > 1 }} {{ models | join(", ") }}
with [regen](https://pypi.org/project/regen/), for training speculative-decoding drafters
(EAGLE-3, DFlash, ...): {{ d.rows.values() | sum }} rows
({% for s, n in d.rows.items() %}{{ s }} {{ n }}{{ ", " if not loop.last }}{% endfor %}), format `{{ d.format }}`.

## Configs

| config | train | validation | holdout |
|---|---|---|---|
{% for name, splits in d.domains.items() | sort -%}
| `{{ name }}` | {{ splits.get("train", 0) }} | {{ splits.get("validation", 0) }} | {{ splits.get("holdout", 0) }} |
{% endfor %}
`default` holds every domain. Load one with `datasets.load_dataset(REPO, "CONFIG")`.
{% if d.holdout %}
## Held-out split

{{ d.holdout.held_out_prompts }} of {{ d.holdout.prompts }} prompts (fraction {{ d.holdout.fraction }},
seed {{ d.holdout.seed }}, per category) are held out: every sample and turn of them is in the
`holdout` split and in no other, so a drafter trained on `train` can be measured on rows it never
saw (`regen score RUN --holdout {{ d.holdout.fraction }} --holdout-seed {{ d.holdout.seed }}` draws
the same prompts again; split digest `{{ d.holdout.digest }}`).

| category | prompts | held out |
|---|---|---|
{% for name, c in d.holdout.by_category.items() -%}
| {{ name }} | {{ c.prompts }} | {{ c.held_out }} |
{% endfor %}
{% endif %}
## How it was made
{% for run in d.runs %}
- Run `{{ run.run }}` (regen {{ run.regen_version }}, created {{ run.created }}): target model
  `{{ run.model }}` on {{ run.engine }}; {{ run.samples_per_prompt }} sample(s) per prompt;
  regenerated turns: `{{ run.regenerate_turns }}`; prompts `{{ run.prompts }}`
  ({{ run.prompts_lines }} lines, xxh3-128 `{{ run.prompts_xxh3_128 }}`).
  Sampling: `{{ run.sampling | tojson }}`.
{%- endfor %}

- Chat template sha256: `{{ d.chat_template_sha256 or "not recorded (exported without a tokenizer)" }}`{% if d.tokenizer %} (tokenizer `{{ d.tokenizer }}`){% endif %}.
- Thinking mode per row: {% for k, n in d.thinking.items() %}{{ k }} {{ n }}{{ ", " if not loop.last }}{% endfor %}.
- Sampling per row:
{% for mix in d.sampling_mix %}  - {{ mix.rows }} rows: `{{ mix.sampling | tojson }}`
{% endfor %}
- Supervised turns: `{{ d.supervise }}`. {% if d.supervise == "regenerated" -%}
Only assistant turns the target wrote carry a loss;
{{ d.rows_with_source_turns }} rows also hold earlier assistant turns that came with the prompt
(written by the source dataset), which are context only.
{%- else -%}
Every assistant turn carries a loss, also those {{ d.rows_with_source_turns }} rows' earlier
turns that the source dataset wrote.
{%- endif %}

## Sources and licenses

| source | license |
|---|---|
{% for name, lic in d.licenses.items() -%}
| `{{ name }}` | {{ lic }} |
{% endfor %}
{% if d.license == "other" -%}
The sources are under different licenses, so the card's license is `other`: each row keeps
its source's terms (the `source` of a row names it).
{% endif -%}
{% for run in d.runs if run.prepare %}
Blend of `{{ run.prompts }}` (`regen prepare`, seed {{ run.prepare.seed }}, {{ run.prepare.written }} prompts):

| source | dataset | read | selected |
|---|---|---|---|
{% for s in run.prepare.sources -%}
| {{ s.name }} | `{{ s.dataset }}` | {{ s.read }} | {{ s.selected }} |
{% endfor %}
Composition by category: {% for k, v in run.prepare.composition.by_category.items() %}{{ k }} {{ v.count }} ({{ "%.1f" | format(v.share * 100) }}%){{ ", " if not loop.last }}{% endfor %}.
{% endfor %}

## Check
{% if d.check %}
Verdict: **{{ d.check.verdict | upper }}** ({{ d.check.overall.samples }} samples).

| rule | count | of | fraction | max |
|---|---|---|---|---|
{% for r in d.check.rules -%}
| {{ "ok" if r.passed else "FAIL" }} `{{ r.rule }}` | {{ r.count }} | {{ r.of }} | {{ "%.4f" | format(r.fraction) }} | {{ r.max_fraction }} |
{% endfor %}
{% else %}
Not checked.
{% endif %}
{% for run in d.runs if run.acceptance %}
## Acceptance (`regen score`)

How well a drafter already predicts the answers of `{{ run.run }}` (teacher-forced, top-1;
tau = tokens per verify step at k drafted tokens), by {{ run.acceptance.by }}:
{% for draft in run.acceptance.drafts %}
Draft `{{ draft.name }}`:

| group | rows | top-1 match | {% for k in run.acceptance.k %}tau k={{ k }} | {% endfor %}
|---|---|---|{% for k in run.acceptance.k %}---|{% endfor %}
{% for name, g in draft.groups.items() -%}
| {{ name }} | {{ g.rows }} | {{ g.top1_match }} | {% for k in run.acceptance.k %}{{ g.tau.get(k | string) }} | {% endfor %}
{% endfor %}
{% endfor %}
{% endfor %}
{% if d.draft_vocab %}
## Draft vocabulary

`{{ d.draft_vocab.file }}`: the {{ d.draft_vocab.size }} most frequent target tokens of the
supervised tokens ({{ d.draft_vocab.distinct }} distinct of {{ d.draft_vocab.masked_tokens }}),
as the d2t/t2d mapping EAGLE-3 trainers load. Share of supervised tokens covered:

| draft vocab size | coverage |
|---|---|
{% for n, share in d.draft_vocab.curve.items() -%}
| {{ n }} | {{ "%.4f" | format(share) }} |
{% endfor %}
{% endif %}
## Reproduce

```bash
{% for run in d.runs -%}
{{ run.generate_command }}
{% endfor -%}
{{ d.export_command }}
```

Train (OUT is this dataset's directory): {{ d.how_to_train }}
{% if d.snippet %}
```python
{{ d.snippet }}
```
{% endif %}"""
