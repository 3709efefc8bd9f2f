"""The walkthrough run exported as a dataset others can pick up: a card the Hub's client
parses, every config loadable offline, and the licenses of its sources on the card."""

from __future__ import annotations

import datasets  # offline, with a throwaway cache: see conftest
import orjson
import pytest
from huggingface_hub import DatasetCard

from export_helpers import export
from regen.export.files import layout

pytestmark = pytest.mark.model


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
