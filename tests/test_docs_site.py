"""The README stays short and leads to the manual: every verb in its first list, each one
click from its own page in docs/ (which `mkdocs build --strict` in `make test` builds)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

from regen.cli import SUMMARIES, VERBS

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
LINK = re.compile(r"\[[^\]]*\]\(([^)#\s]+)(?:#[^)]*)?\)")


def first_list() -> list[str]:
    """The README's first bulleted list: the lines of its first run of `- ` items."""
    lines = README.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("- "))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("- "))
    return lines[start:end]


def test_the_readme_is_at_most_300_lines():
    assert len(README.read_text().splitlines()) <= 300


def test_every_verb_is_in_the_readmes_first_list_linking_to_its_own_page():
    items = first_list()
    for verb in VERBS:
        [item] = [i for i in items if f"`regen {verb}`" in i]
        assert LINK.findall(item) == [f"docs/{verb}.md"], item
        page = ROOT / "docs" / f"{verb}.md"
        assert page.read_text().startswith(f"# regen {verb}\n"), page
    assert len(items) == len(VERBS), "a list item for something that is not a verb"


def test_every_link_of_the_readme_leads_to_a_file():
    for target in LINK.findall(README.read_text()):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), target


def test_every_docs_page_is_in_the_sites_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(nav) -> set[str]:
        found = set()
        for entry in nav:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            found |= pages(value) if isinstance(value, list) else {value}
        return found

    assert pages(config["nav"]) == {p.name for p in (ROOT / "docs").glob("*.md")}


def test_regen_help_lists_every_verb_without_importing_any():
    """`regen --help` is the first thing a newcomer types: it lists the verbs from their
    summaries and loads none of them (each pulls in datasets, matplotlib or the fleet)."""
    code = (
        "import sys, json\n"
        "from regen.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(json.loads(done.stderr.strip().splitlines()[-1]))
    for verb, summary in SUMMARIES.items():
        assert re.search(rf"^  {verb} +{re.escape(summary)}$", done.stdout, re.M), verb
    heavy = {m.split(":")[0] for m in VERBS.values()} | {"datasets", "matplotlib", "torch"}
    assert not heavy & loaded, heavy & loaded


# A command the docs give to install regen: from a checkout (`pip install -e '.[embedded]'`)
# or a git URL works; a bare name (`pip install 'regen[embedded]'`) asks a package index
# that has no regen on it.
PIP_INSTALL = re.compile(r"pip install (?:--?[\w-]+ )*'?(regen(?:\[[\w,-]+\])?)(?![\w\[])'?(?! @)")


def test_every_install_line_of_the_docs_names_a_checkout_or_a_git_url():
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    named = {
        f"{page.name}: {match[0]}"
        for page in pages
        for match in PIP_INSTALL.finditer(" ".join(page.read_text().split()))
    }
    assert not named, f"installs regen from a package index that does not have it: {named}"
    text = (ROOT / "docs" / "getting-started.md").read_text()
    assert "pip install -e '.[embedded]'" in text


def test_the_readme_serves_the_docs_with_a_tool_make_docs_installs():
    """`make demo`'s environment has no mkdocs: the README names the command that adds it."""
    text = " ".join(README.read_text().split())
    assert "`mkdocs serve`" not in text
    assert (
        "`make docs`" in text
        and "docs:\n\tscripts/bootstrap.sh --dev" in (ROOT / "Makefile").read_text()
    )


def test_the_walkthroughs_words_on_the_cap_say_what_its_plan_output_shows():
    text = (ROOT / "docs" / "walkthrough.md").read_text()
    [shown] = re.findall(r"; (\d+\.\d)% hit max tokens\n", text)
    [said] = re.findall(r"`(\d+\.\d)% hit max tokens` is the share", text)
    assert said == shown


def test_the_design_page_draws_the_floors_of_the_import_contract():
    """docs/design.md's drawing is the contract in pyproject.toml, floor by floor, and its
    table names every package and module of src/regen: the map a newcomer reads first."""
    text = (ROOT / "docs" / "design.md").read_text()
    floors: list[set[str]] = []
    for line in text.split("```\n")[1].splitlines():
        names = {f"regen.{n}" for n in re.findall(r"(\w+)(?:/|\.py)", line.strip().split("  ")[0])}
        if line.startswith(" "):
            floors[-1] |= names  # a floor too long for one line goes on below, indented
        else:
            floors.append(names)
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    house = next(c for c in contract["contracts"] if "containers" not in c)["layers"]
    assert floors == [set(layer.split(" | ")) for layer in house]
    src = ROOT / "src" / "regen"
    names = {f"{p.name}/" for p in src.iterdir() if (p / "__init__.py").is_file()}
    names |= {p.name for p in src.glob("*.py") if p.stem[0] != "_"}
    assert {n for n in names if f"| `{n}` |" not in text} == set()


def test_the_benchmark_summary_has_a_row_for_every_benchmark_and_fits_a_screen():
    """BENCHMARKS.md is today's figure for each benchmark; the notebook behind it is
    docs/benchmarks-history.md."""
    lines = (ROOT / "BENCHMARKS.md").read_text().splitlines()
    for script in sorted((ROOT / "bench").glob("bench_*.py")):
        assert any(line.startswith(f"| `{script.name}`") for line in lines), script.name
    assert len(lines) <= 80


def test_make_test_builds_the_site_strict_and_not_quiet():
    """With --quiet, mkdocs 1.6 drops the warnings --strict counts: a broken link passes."""
    recipe = (ROOT / "Makefile").read_text().split("\ntest:\n")[1].split("\n\n")[0]
    [build] = [line for line in recipe.splitlines() if "mkdocs build" in line]
    assert "--strict" in build and "--quiet" not in build
