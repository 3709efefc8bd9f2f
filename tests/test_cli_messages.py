"""Mistakes a new user makes get a message about that mistake, not about something else."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from aiohttp import web
from click.testing import CliRunner

from gen_helpers import run as generate_run
from gen_helpers import write_prompts
from regen.check.rules import parse_limits
from regen.cli import main
from regen.errors import ConfigError


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env=env)


def test_a_full_endpoint_url_asks_for_the_base_url(tmp_path):
    write_prompts(tmp_path / "p.jsonl", 1)
    result = run(
        "generate",
        "--prompts",
        str(tmp_path / "p.jsonl"),
        "-o",
        str(tmp_path / "run"),
        "--servers",
        "http://127.0.0.1:8000/v1/chat/completions",
    )
    assert result.exit_code == 2
    assert "pass the base URL" in result.output
    assert "write it as http://127.0.0.1:8000/v1 " in result.output


def test_prompts_naming_a_directory_says_so(tmp_path):
    result = run("generate", "--prompts", str(tmp_path), "-o", str(tmp_path / "run"))
    assert result.exit_code == 2
    assert "is a directory" in result.output and "does not exist" not in result.output
    assert "regen prepare --source" in result.output


def test_a_missing_tokenizer_directory_is_a_plain_message(tmp_path):
    result = run("check", str(tmp_path), "--tokenizer", "/no/such/dir")
    assert result.exit_code == 2
    assert "--tokenizer /no/such/dir: no such directory" in result.output
    assert "Repo id" not in result.output and "Traceback" not in result.output


def test_an_unreachable_hub_fails_at_once_with_the_fix(tmp_path, monkeypatch):
    # the Hub is "offline": its address is a closed port on loopback
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    result = run("check", str(tmp_path), "--tokenizer", "nosuch-owner/misspelled-model")
    assert result.exit_code == 2
    assert "cannot reach the Hugging Face Hub" in result.output
    assert "HF_HUB_OFFLINE=1" in result.output


@pytest.fixture
def hub_without_repos() -> Iterator[str]:
    """A stand-in for the Hub on loopback that knows no repository (as the Hub answers a
    misspelled name: 404 with X-Error-Code RepoNotFound)."""

    async def not_found(request: web.Request) -> web.Response:
        headers = {"X-Error-Code": "RepoNotFound"}
        return web.json_response({"error": "Repository not found"}, status=404, headers=headers)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", not_found)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}"
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)
    loop.run_until_complete(runner.cleanup())
    loop.close()


def test_a_misspelled_hub_model_is_named(tmp_path, monkeypatch, hub_without_repos):
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", hub_without_repos)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    result = run("check", str(tmp_path), "--tokenizer", "Qwen/Qwen3-8B-typo")
    assert result.exit_code == 2
    assert "--tokenizer Qwen/Qwen3-8B-typo: no such model on the Hugging Face Hub" in result.output
    assert "check the spelling" in result.output


def test_a_misspelled_hub_dataset_is_found_first(tmp_path, monkeypatch, hub_without_repos):
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", hub_without_repos)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    (tmp_path / "r.yaml").write_text("sources:\n  - hf: someone/no-such-set\n    count: all\n")
    result = run("prepare", str(tmp_path / "r.yaml"), "-o", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 2
    assert "hf: someone/no-such-set: no such dataset on the Hugging Face Hub" in result.output


def test_a_wrong_recipe_path_is_found_before_any_source_is_read(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    (tmp_path / "r.yaml").write_text(
        "sources:\n  - name: first\n    path: good.jsonl\n    count: all\n"
        "  - name: second\n    path: missing/*.jsonl\n    count: all\n"
    )
    result = run("prepare", str(tmp_path / "r.yaml"), "-o", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 2
    assert "source 'second': no file matches" in result.output
    assert not (tmp_path / "out.rejects.jsonl").exists()  # nothing was opened or read


# -- issue 21, item 6: messages with the right hint -------------------------------------


def fake_run(tmp_path, fake_server) -> str:
    write_prompts(tmp_path / "p.jsonl", 2)
    generate_run(tmp_path / "p.jsonl", tmp_path / "run", [fake_server().url])
    return str(tmp_path / "run")


def test_tokenized_export_without_tokenizer_says_so_and_names_the_runs_model(tmp_path, fake_server):
    out = fake_run(tmp_path, fake_server)
    result = run("export", out, "--format", "tokenized", "-o", str(tmp_path / "x"))
    assert result.exit_code == 2
    assert "--format tokenized needs --tokenizer" in result.output
    assert "with these filters" not in result.output
    assert "--tokenizer fake-model" in result.output


def test_check_without_tokenizer_suggests_the_model_the_run_used(tmp_path, fake_server):
    out = fake_run(tmp_path, fake_server)
    result = run("check", out)
    assert result.exit_code == 2 and "--tokenizer fake-model" in result.output
    manifest_path = tmp_path / "run" / "manifest.json"
    manifest = orjson.loads(manifest_path.read_bytes())
    manifest["config"]["embedded"] = True  # what a run on the embedded model records
    manifest_path.write_bytes(orjson.dumps(manifest))
    assert "--tokenizer embedded" in run("check", out).output


def test_max_rule_ignores_case_and_suggests_the_rule_meant():
    assert parse_limits(("DUPLICATE_ANSWERS=0.5", "Truncated=OFF")) == {
        "duplicate_answers": 0.5,
        "truncated": None,
    }
    with pytest.raises(ConfigError, match="did you mean duplicate_answers") as err:
        parse_limits(("duplicate_answer=0.5",))
    assert err.value.hint == "--max duplicate_answers=0.5"


def test_export_format_forgives_case_suggests_and_points_axolotl_to_sharegpt(tmp_path):
    missing = str(tmp_path / "never-read")
    axolotl = run("export", missing, "--format", "axolotl", "-o", str(tmp_path / "x"))
    assert axolotl.exit_code == 2 and "--format sharegpt-axolotl" in axolotl.output
    typo = run("export", missing, "--format", "sharegtp", "-o", str(tmp_path / "x"))
    assert typo.exit_code == 2 and "did you mean 'sharegpt'?" in typo.output
    # the case is forgiven: the next complaint is the missing run, not the format
    upper = run("export", missing, "--format", "ShareGPT", "-o", str(tmp_path / "x"))
    assert "does not exist" in upper.output and "--format" not in upper.output


def test_a_parquet_prompt_file_is_named_as_parquet(tmp_path):
    rows = {"id": ["a"], "messages": [[{"role": "user", "content": "hi"}]]}
    pq.write_table(pa.table(rows), tmp_path / "p.parquet")
    result = run("generate", "--prompts", str(tmp_path / "p.parquet"), "-o", str(tmp_path / "r"))
    assert result.exit_code == 3
    assert "is a Parquet file" in result.output and "not valid JSON" not in result.output
    assert f"regen prepare --source {tmp_path / 'p.parquet'}" in result.output
