"""One vocabulary across verbs: RUN, -o, hidden old spellings, -h, grouped help, typos."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gen_helpers import assert_exactly_once, write_prompts
from regen.cli import VERBS as ALL_VERBS
from regen.cli import main
from regen.cli.options import GROUP_ORDER

VERBS = sorted(ALL_VERBS)


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("verb", VERBS)
def test_dash_h_works_on_every_verb(verb):
    result = run(verb, "-h")
    assert result.exit_code == 0, result.output
    assert "Usage: main" in result.output or "Usage: regen" in result.output
    assert "-h, --help" in result.output


@pytest.mark.parametrize("verb", ["status", "check", "export", "score"])
def test_a_run_directory_is_called_RUN(verb):
    text = run(verb, "-h").output
    usage = text.splitlines()[0]
    assert "RUN" in usage and "OUTPUT_DIR" not in usage
    assert not any(line.strip().startswith("RUN") for line in text.splitlines()[1:])


def test_generate_help_is_grouped_and_every_option_explained():
    text = run("generate", "--help").output
    positions = [text.index(f"{group} options:") for group in GROUP_ORDER]
    assert positions == sorted(positions)
    from regen.cli.generate import generate

    for param in generate.params:
        assert param.help, f"{param.name} has no help text"
        assert param.group in GROUP_ORDER, f"{param.name} is in no group"


def test_old_spellings_work_but_are_not_shown():
    generate_help = run("generate", "-h").output
    assert "--concurrency-per-server" in generate_help
    assert "--concurrency " not in generate_help and "--concurrency," not in generate_help
    export_help = run("export", "-h").output
    assert "-o, --output-dir DIR" in export_help and "--out " not in export_help


def test_a_typo_gets_did_you_mean_even_after_several_server_urls():
    result = run(
        "generate",
        "--servers",
        "http://127.0.0.1:1",
        "http://127.0.0.1:2",
        "--prompts",
        "p",
        "-o",
        "o",
        "--concurency-per-server",
        "8",
    )
    assert result.exit_code == 2
    assert "No such option '--concurency-per-server'" in result.output
    assert "Did you mean '--concurrency-per-server'?" in result.output


def test_a_typo_of_an_old_spelling_suggests_the_new_one():
    result = run("generate", "--prompts", "p", "-o", "o", "--concurreny", "8")
    assert result.exit_code == 2
    # (with --fixed-concurrency beside it, click names both)
    assert "Did you mean" in result.output and "'--concurrency-per-server'" in result.output


def test_a_bare_word_that_is_not_a_url_is_named(tmp_path):
    result = run("generate", "--prompts", "p", "-o", "o", "--servers", "http://h:1", "oops")
    assert result.exit_code == 2
    assert "'oops' has no scheme" in result.output


def test_old_and_new_spellings_run_the_same_and_print_the_total_in_flight(tmp_path, fake_server):
    a, b = fake_server(), fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 6)
    for flag, out in (("--concurrency-per-server", "new"), ("--concurrency", "old")):
        result = run(
            "generate",
            "--prompts",
            str(tmp_path / "p.jsonl"),
            "-o",
            str(tmp_path / out),
            "--servers",
            a.url,
            b.url,
            flag,
            "3",
            "--display",
            "plain",
        )
        assert result.exit_code == 0, result.output
        assert "2 x at most 3 per server (live concurrency picks the level)" in result.output
        assert_exactly_once(tmp_path / out, ids)


def test_export_takes_output_dir_and_the_old_out(tmp_path, fake_server):
    write_prompts(tmp_path / "p.jsonl", 3)
    runs = tmp_path / "run"
    gen = run(
        "generate",
        "--prompts",
        str(tmp_path / "p.jsonl"),
        "-o",
        str(runs),
        "--servers",
        fake_server().url,
        "--display",
        "none",
    )
    assert gen.exit_code == 0, gen.output
    for flag in ("--output-dir", "-o", "--out"):
        target = tmp_path / flag.strip("-")
        result = run("export", str(runs), flag, str(target))
        assert result.exit_code == 0, result.output
        assert list(target.glob("data/*/train*.jsonl")), f"{flag}: nothing written"


def test_a_misspelled_verb_gets_did_you_mean():
    result = run("genrate", "--prompts", "x")
    assert result.exit_code == 2
    assert "No such command 'genrate'. Did you mean 'generate'?" in result.output


def test_generate_loads_only_what_it_uses():
    """Verbs load lazily: generate must not pay for check's and export's libraries."""
    import subprocess
    import sys

    code = (
        "import sys; from regen.cli import main; main.get_command(None, 'generate'); "
        "print(sorted(m for m in ('matplotlib', 'datasets', 'transformers') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
