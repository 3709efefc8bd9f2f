"""The walkthrough run's export pushed to a loopback stand-in for the Hub: one commit with
its card, a second push and a branch, and the refusals (a failed check, a bad token, someone
else's repo, offline mode, a Hub that keeps failing)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from huggingface_hub import DatasetCard

from export_helpers import export
from regen.testing.hub_server import HubStandIn

TOKEN = "hf_loopback_secret_0123456789"

pytestmark = pytest.mark.model


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
