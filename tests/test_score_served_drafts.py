"""`regen score` with a draft served by a fleet: the same per-row results as the draft run
locally, over vLLM's and SGLang's APIs, asked with the fleet's API key; and a served draft
whose vocabulary is not the target's, refused before any row is written. On the embedded
SmolLM2's greedy answers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from regen.check import Encoder
from regen.cli import main
from regen.embedded_model import default_model_path
from regen.finished.score_rows import read_rows
from score_helpers import ROWS, score

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

pytestmark = pytest.mark.model


@pytest.mark.parametrize("api", ["vllm", "sglang"])
def test_fleet_path_gives_the_local_per_row_results(
    run, requantized, encoder, tmp_path, api, monkeypatch
):
    """A draft fleet started with an API key (vLLM's and SGLang's --api-key) is asked with
    it, as generate's fleet is."""
    from regen.score.fleet_draft import FleetDraft
    from regen.testing.logprob_server import LogprobServer

    local = score(run, [requantized], encoder)["drafts"][0]  # resumed from RUN/score
    with LogprobServer(requantized.path, n_ctx=512, api_key="draft-key") as server:
        draft = FleetDraft([server.url], api, api_key="draft-key")
        served = score(run, [draft], encoder, tmp_path)["drafts"][0]
        asked = set(server.requests)
        if api == "sglang":  # and once through the command line, as a user runs it
            args = [
                "score",
                str(run),
                "--draft-servers",
                server.url,
                "--draft-api",
                api,
                "--tokenizer",
                "embedded",
                "--k",
                "3",
                "--json",
            ]
            monkeypatch.delenv("OPENAI_API_KEY", raising=False)
            refused = CliRunner().invoke(main, args)
            assert refused.exit_code != 0 and "API key" in refused.output, refused.output
            assert "Traceback" not in refused.output
            monkeypatch.setenv("DRAFT_KEY", "draft-key")
            cli = CliRunner().invoke(main, [*args, "--api-key-env", "DRAFT_KEY"])
            assert cli.exit_code == 0, cli.output
            by_cli = json.loads(cli.output)["drafts"][0]["groups"]["(overall)"]
            assert by_cli["rows"] == ROWS and by_cli["by_k"][0]["k"] == 3
    assert asked == {"/v1/completions" if api == "vllm" else "/generate"}
    by_id = {r["id"]: r["match"] for r in read_rows(Path(local["rows_file"]))}
    rows = list(read_rows(Path(served["rows_file"])))
    assert len(rows) == ROWS and all(by_id[r["id"]] == r["match"] for r in rows)
    assert "0" in "".join(by_id.values())  # the comparison covers misses, not only hits


def test_a_served_draft_with_another_vocabulary_is_refused(run, tmp_path):
    from regen.errors import ConfigError
    from regen.score.fleet_draft import FleetDraft
    from regen.testing.logprob_server import LogprobServer

    other = Encoder.of(checkfix.load("qwen"))  # the target's tokens mean other text
    with (
        LogprobServer(default_model_path(), n_ctx=512) as server,
        pytest.raises(ConfigError, match="does not share the target's vocabulary"),
    ):
        score(run, [FleetDraft([server.url], "vllm")], other, tmp_path)
    # refused on the first answer, before any row was written
    assert not [r for f in tmp_path.glob("vllm-fleet-*/rows.jsonl") for r in read_rows(f)]
