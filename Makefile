# The two set-up commands of the README: `make demo` and `make test`. Each installs only what it
# needs (scripts/bootstrap.sh): the demo the embedded model, the tests also the dev tools.
.PHONY: demo test lint bench docs

demo:
	scripts/bootstrap.sh
	.venv/bin/regen generate --prompts examples/prompts.jsonl --output-dir runs/demo --max-output-tokens 128 --seed 7 --display plain --log-interval 5
	.venv/bin/regen status runs/demo
	@echo "(its one error is on purpose: the last line of examples/prompts.jsonl has an unknown role, to show a record landing in errors/)"

# mkdocs without --quiet: with it, mkdocs 1.6 drops the warnings --strict counts (a broken link passes)
test:
	scripts/bootstrap.sh --test
	.venv/bin/ruff check src tests bench
	.venv/bin/ruff format --check src tests bench
	.venv/bin/lint-imports
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict
	.venv/bin/pytest

lint:
	scripts/bootstrap.sh --dev
	.venv/bin/ruff check src tests bench
	.venv/bin/lint-imports
	.venv/bin/ruff format --check src tests bench

bench:
	scripts/bootstrap.sh --dev
	.venv/bin/python bench/run_all.py

# The docs site (docs/, mkdocs.yml) into site/; `.venv/bin/mkdocs serve` previews it.
docs:
	scripts/bootstrap.sh --dev
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict
