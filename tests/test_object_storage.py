"""Inputs on object storage: `regen generate --prompts s3://...` reads through fsspec, against
moto's standalone S3 server on loopback (no other network)."""

from __future__ import annotations

import boto3
import orjson
from click.testing import CliRunner

from gen_helpers import assert_exactly_once, run
from regen.cli import main


def test_prompts_read_from_s3(tmp_path, fake_server, s3_endpoint):
    server = fake_server()
    ids = [f"s3-{i}" for i in range(12)]
    body = b"".join(
        orjson.dumps({"id": i, "messages": [{"role": "user", "content": f"q {i}"}]}) + b"\n"
        for i in ids
    )
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket="prompts")
    s3.put_object(Bucket="prompts", Key="blend/prompts.jsonl", Body=body)

    result = run("s3://prompts/blend/prompts.jsonl", tmp_path / "out", [server.url])
    assert result.exit_code == 0
    assert_exactly_once(tmp_path / "out", ids)
    manifest = orjson.loads((tmp_path / "out" / "manifest.json").read_bytes())
    assert manifest["input"]["path"] == "s3://prompts/blend/prompts.jsonl"
    assert manifest["input"]["size"] == len(body)
    # Resume over the same object, from the command line, does no work.
    again = CliRunner().invoke(
        main,
        [
            "generate",
            "--prompts",
            "s3://prompts/blend/prompts.jsonl",
            "--output-dir",
            str(tmp_path / "out"),
            "--servers",
            server.url,
            "--display",
            "none",
        ],
    )
    assert again.exit_code == 0, again.output
    assert "nothing to do" in again.output


def test_a_missing_object_is_a_clear_error(tmp_path, fake_server, s3_endpoint):
    server = fake_server()
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket="prompts")
    result = CliRunner().invoke(
        main,
        [
            "generate",
            "--prompts",
            "s3://prompts/nope.jsonl",
            "--output-dir",
            str(tmp_path / "out"),
            "--servers",
            server.url,
        ],
    )
    assert result.exit_code == 2
    assert "s3://prompts/nope.jsonl does not exist" in result.output
