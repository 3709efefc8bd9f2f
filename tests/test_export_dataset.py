"""The walkthrough run as a dataset others can pick up: a card the Hub's client parses, every
config loadable offline, a push to a loopback stand-in for the Hub, and a draft vocabulary
that the trainers' own code loads."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import types
from pathlib import Path

import datasets  # offline, with a throwaway cache: see conftest
import numpy as np
import orjson
import pytest
from huggingface_hub import DatasetCard

import trainer_readers
from gen_helpers import read_lines
from regen.export.files import layout
from regen.testing.hub_server import HubStandIn

ROOT = Path(__file__).parent.parent
pytestmark = pytest.mark.model
TOKEN = "hf_loopback_secret_0123456789"


def regen(*args, ok=(0,), env=None) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "regen", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode in ok, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def walkthrough(tmp_path_factory) -> Path:
    """The README walkthrough's run: the example recipe, answered by the embedded model."""
    work = tmp_path_factory.mktemp("walkthrough")
    prompts = work / "prompts.jsonl"
    regen("prepare", ROOT / "examples" / "recipe.yaml", "--output", prompts)
    regen(
        "generate",
        "--prompts",
        prompts,
        "--output-dir",
        work / "run",
        "--max-output-tokens",
        "24",
        "--temperature",
        "0",
        "--seed",
        "7",
        "--display",
        "plain",
    )
    return work / "run"


def export(run: Path, out: Path, *extra, ok=(0,), env=None) -> subprocess.CompletedProcess:
    return regen("export", run, "-o", out, *extra, ok=ok, env=env)


def test_card_parses_and_every_config_loads_offline(walkthrough, tmp_path):
    out = tmp_path / "tok"
    done = export(
        walkthrough,
        out,
        "--format",
        "tokenized",
        "--tokenizer",
        "embedded",
        "--val-fraction",
        "0.25",
        "--license",
        "apache-2.0",
        "--language",
        "en",
    )
    card = DatasetCard.load(out / "README.md")  # the Hub's own client parses it back
    meta = card.data.to_dict()
    facts = orjson.loads((out / "regen.json").read_bytes())
    names = [c["config_name"] for c in meta["configs"]]
    files = layout(out)
    assert names == ["default", *sorted(files)] and len(files) > 3  # one config per domain
    for config in meta["configs"]:
        declared = sorted(p for f in config["data_files"] for p in f["path"])
        on_disk = sorted(
            p
            for name, splits in files.items()
            for paths in splits.values()
            for p in paths
            if config["config_name"] in ("default", name)
        )
        assert declared == on_disk  # the configs match the files exactly
        ds = datasets.load_dataset(str(out), config["config_name"])
        want = facts["domains"].get(config["config_name"], facts["rows"])
        assert ds.num_rows == want
    full = datasets.load_dataset(str(out))
    assert sum(full.num_rows.values()) == 20 and set(full) == {"train", "validation"}
    assert meta["license"] == "apache-2.0" and meta["annotations_creators"] == ["machine-generated"]
    assert meta["size_categories"] == ["n<1K"] and meta["task_categories"] == ["text-generation"]
    assert facts["runs"][0]["model"] == "smollm2-135m-instruct"
    assert facts["runs"][0]["prepare"]["written"] == 20 and facts["chat_template_sha256"]
    assert "regen generate --prompts" in card.text and "regen export" in card.text
    # 24 tokens truncate most answers: the check fails, and the card says so first.
    assert facts["check_verdict"] == "fail" and "truncated" in facts["check"]["failed_rules"]
    assert card.text.lstrip().startswith("> **Warning: this dataset FAILED `regen check`**")
    assert "check: FAIL" in done.stdout


def test_sources_under_different_licenses_make_the_card_say_other(walkthrough, tmp_path):
    out = tmp_path / "lic"
    export(walkthrough, out, "--license", "apache-2.0", "--license", "metamath=mit")
    card = DatasetCard.load(out / "README.md")
    assert card.data.license == "other" and card.data.to_dict()["license_name"] == "mixed"
    assert "| `metamath` | mit |" in card.text and "| `hermes_fc` | apache-2.0 |" in card.text
    assert "different licenses" in card.text
    assert "exported without `regen check`" in card.text  # no tokenizer: not judged


# --- the push -----------------------------------------------------------------------------


def hub_env(hub: HubStandIn, token: str = TOKEN) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_HUB_OFFLINE")}
    return env | {"HF_ENDPOINT": hub.url, "HF_TOKEN": token, "HF_HUB_DISABLE_XET": "1"}


def local_files(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in out.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }


def test_push_commits_the_export_and_its_card_once(walkthrough, tmp_path):
    out = tmp_path / "push"
    with HubStandIn(TOKEN, fail_commits=1) as hub:  # the first commit meets a 503
        done = export(
            walkthrough,
            out,
            "--format",
            "specforge-tokenized",
            "--tokenizer",
            "embedded",
            "--draft-vocab-size",
            "64",
            "--push-to-hub",
            "org/regen-set",
            "--private",
            "--allow-failed-check",
            env=hub_env(hub),
        )
        [commit] = hub.state.commits
        assert commit["repo"] == "org/regen-set" and hub.state.private["org/regen-set"]
        assert commit["added"] == local_files(out)
        assert {"README.md", "regen.json", "draft_vocab/d2t-64.npy"} <= set(commit["added"])
        assert commit["summary"].startswith(f"regen export of {walkthrough}")
        pushed = DatasetCard(commit["added"]["README.md"].decode())
        assert pushed.data.to_dict() == DatasetCard.load(out / "README.md").data.to_dict()
        assert "pushed: http://127.0.0.1/datasets/org/regen-set/commit/" in done.stdout
    secret = TOKEN.encode()
    assert TOKEN not in done.stdout + done.stderr
    assert not any(secret in data for data in local_files(out).values())
    assert not any(secret in p.read_bytes() for p in out.rglob(".*") if p.is_file())


def test_push_refuses_a_failed_check_a_bad_token_and_someone_elses_repo(walkthrough, tmp_path):
    with HubStandIn(TOKEN) as hub:
        failed = export(
            walkthrough,
            tmp_path / "a",
            "--tokenizer",
            "embedded",
            "--push-to-hub",
            "org/x",
            ok=(2,),
            env=hub_env(hub),
        )
        assert "failed `regen check`" in failed.stderr and "--allow-failed-check" in failed.stderr
        refused = export(
            walkthrough,
            tmp_path / "b",
            "--push-to-hub",
            "org/x",
            "--allow-failed-check",
            ok=(7,),
            env=hub_env(hub, "hf_wrong"),
        )
        assert "the Hub refused the token (401)" in refused.stderr
        assert "hf_wrong" not in refused.stdout + refused.stderr
        hub.state.repos["org/theirs"] = {"main": {"train.csv": b"a,b\n"}}
        theirs = export(
            walkthrough,
            tmp_path / "c",
            "--push-to-hub",
            "org/theirs",
            "--allow-failed-check",
            ok=(2,),
            env=hub_env(hub),
        )
        assert "already holds files that a regen export did not write (train.csv)" in theirs.stderr
        assert hub.state.commits == [] and set(hub.state.repos) == {"org/theirs"}


# --- the draft vocabulary -------------------------------------------------------------------


def masked_counts(rows: list[dict]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for row in rows:
        for token, mask in zip(row["input_ids"], row["loss_mask"], strict=True):
            if mask:
                counts[token] = counts.get(token, 0) + 1
    return counts


@pytest.fixture
def no_loguru(monkeypatch):
    """speculators' training CLI logs with loguru, which its --no-deps install lacks: a
    stand-in logger is enough to import its mapping loader."""
    stub = types.ModuleType("loguru")
    stub.logger = logging.getLogger("loguru")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "loguru", stub)


@pytest.mark.parametrize("size", [64, 5000])  # 5000: more than the distinct tokens: padded
def test_draft_vocab_loads_with_the_trainers_own_code(walkthrough, tmp_path, size, no_loguru):
    import torch
    from specforge.core.compact_teacher import validate_vocab_mapping_consistency
    from speculators.train.cli import _load_mappings
    from speculators.train.vocab_mapping import build_vocab_mappings_from_distribution

    out = tmp_path / "vocab"
    done = export(
        walkthrough,
        out,
        "--format",
        "speculators",
        "--tokenizer",
        "embedded",
        "--draft-vocab-size",
        size,
    )
    folder = out / "draft_vocab"
    d2t, t2d, n = _load_mappings(folder / f"d2t-{size}.npy", folder / f"t2d-{size}.npy", size)
    rows = datasets.load_dataset(str(out))["train"].to_list()
    theirs_d2t, theirs_t2d = build_vocab_mappings_from_distribution(
        masked_counts(rows), size, t2d.shape[0]
    )
    assert n == size and torch.equal(d2t, theirs_d2t) and torch.equal(t2d, theirs_t2d)
    mapping = torch.load(folder / f"vocab_mapping-{size}.pt")  # SpecForge's file
    validate_vocab_mapping_consistency(mapping["t2d"], mapping["d2t"])
    assert torch.equal(mapping["d2t"], d2t) and t2d.shape[0] == 49152  # SmolLM2's vocabulary
    facts = orjson.loads((out / "regen.json").read_bytes())["draft_vocab"]
    counts = masked_counts(rows)
    covered = sorted(counts.values(), reverse=True)[:size]
    assert facts["coverage"] == round(sum(covered) / sum(counts.values()), 4)
    assert facts["distinct"] == len(counts) and str(size) in facts["curve"]
    assert ("padded with" in done.stdout) == (size > len(counts))
    card = (out / "README.md").read_text()
    assert "## Draft vocabulary" in card and f"| {size} | " in card
    assert np.load(folder / f"t2d-{size}.npy").sum() == size


# --- the ShareGPT readers of LLaMA-Factory and axolotl -------------------------------------


def export_rows(run: Path, out: Path, fmt: str) -> tuple[list[dict], dict]:
    """The rows a conversation target holds: every answer but those cut at the cap, whose
    end-of-turn the trainer would supervise (said in the summary, counted as cut_answer)."""
    done = export(run, out, "--format", fmt)
    rows = datasets.load_dataset(str(out))["train"].to_list()
    summary = orjson.loads((out / ".regen-export").read_bytes())
    cut = sum(r["finish_reason"] == "length" for r in read_lines(run, "completions"))
    assert cut and summary["dropped"] == {"cut_answer": cut} and len(rows) == 20 - cut
    assert f"warning: {cut} rows cut at --max-output-tokens left out" in done.stdout
    return rows, summary


def test_llamafactory_keeps_every_row_the_export_does_not_name(walkthrough, tmp_path, monkeypatch):
    converter = trainer_readers.llamafactory_converter(monkeypatch)
    rows, summary = export_rows(walkthrough, tmp_path / "lf", "sharegpt-llamafactory")
    lost = {
        (r["id"], r["sample"]) for r in rows if not trainer_readers.llamafactory_keeps(converter, r)
    }
    named = {(i["id"], i["sample"]) for ids in summary["trainer_skips"].values() for i in ids}
    assert lost == named
    # What LLaMA-Factory cannot hold (a user turn right after a tool result) is named; see
    # test_export_formats for a turn with text and calls, and several tool results in a row.
    assert list(summary["trainer_skips"]) == [
        "a human turn after observation (the turns must alternate)"
    ]


def test_axolotl_reads_every_row_with_known_roles(walkthrough, tmp_path, monkeypatch):
    from regen.tokenizer import load_tokenizer

    tok = load_tokenizer("embedded")
    strategy = trainer_readers.axolotl_strategy(monkeypatch, tok)
    rows, summary = export_rows(walkthrough, tmp_path / "ax", "sharegpt-axolotl")
    assert summary["trainer_skips"] == {}
    for row in rows:
        turns = strategy.get_conversation_thread(row)
        assert {t["role"] for t in turns} <= {"system", "user", "assistant", "tool"}
        trained = [t["training"] for t in turns if t["role"] == "assistant"]
        assert trained[-1] is True and not any(trained[:-1])  # only the regenerated turn
        tokens = strategy.tokenize_prompt(row)
        final = row["conversations"][-1]
        if final["value"] or final["tool_calls"]:  # an empty answer has nothing to learn
            assert any(label != -100 for label in tokens["labels"]), row["id"]


def test_a_second_push_replaces_the_data_and_a_branch_gets_its_own(walkthrough, tmp_path):
    def pushed(repo_files: dict[str, bytes]) -> dict[str, bytes]:
        return {p: data for p, data in repo_files.items() if p != ".gitattributes"}

    with HubStandIn(TOKEN) as hub:
        env = hub_env(hub)
        flags = ("--push-to-hub", "org/two", "--allow-failed-check")  # not checked: no tokenizer
        export(walkthrough, tmp_path / "a", *flags, env=env)  # data/default/...
        export(walkthrough, tmp_path / "b", "--format", "sharegpt-axolotl", *flags, env=env)
        main = hub.state.repos["org/two"]["main"]
        assert pushed(main) == local_files(tmp_path / "b")  # a's data/default is gone
        export(walkthrough, tmp_path / "c", *flags, "--revision", "dev", env=env)
        assert [c["revision"] for c in hub.state.commits] == ["main", "main", "dev"]
        assert pushed(hub.state.repos["org/two"]["dev"]) == local_files(tmp_path / "c")
        assert hub.state.repos["org/two"]["main"] == main


def test_push_in_offline_mode_says_so(walkthrough, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_TOKEN": TOKEN}
    done = export(
        walkthrough,
        tmp_path / "off",
        "--push-to-hub",
        "org/x",
        "--allow-failed-check",
        ok=(2,),
        env=env,
    )
    assert "HF_HUB_OFFLINE is set" in done.stderr and "Traceback" not in done.stderr


def test_a_push_that_keeps_failing_leaves_no_repo_behind(walkthrough, tmp_path):
    with HubStandIn(TOKEN, fail_commits=100) as hub:
        done = export(
            walkthrough,
            tmp_path / "x",
            "--push-to-hub",
            "org/flaky",
            "--allow-failed-check",
            ok=(7,),
            env=hub_env(hub),
        )
        assert "the Hub answered 503 when trying to upload the export" in done.stderr
        commits = [
            c for c in hub.state.calls if c.startswith("POST /api/datasets/org/flaky/commit")
        ]
        assert len(commits) == 4  # retried, then given up
        assert hub.state.repos == {} and "DELETE /api/repos/delete" in hub.state.calls
