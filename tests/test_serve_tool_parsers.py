"""`regen serve` sets the tool-call parser of the model's family (vLLM also needs
--enable-auto-tool-choice), or the one --tool-call-parser names, so that a fleet answers the
prompts of an agent blend. The family comes from the model's name, its chat template's
markers or its config.json's model_type; the parser names are each engine's own."""

from __future__ import annotations

import json

import pytest

from regen.errors import ConfigError
from regen.serve.fleetfile import FleetFile
from regen.serve.tool_parsers import family_of, tool_parser_args
from serve_helpers import recorded, regen, stop_fleet_file


@pytest.mark.parametrize(
    ("model", "vllm", "sglang"),
    [
        ("Qwen/Qwen3-32B", "hermes", "qwen25"),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3_coder", "qwen3_coder"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3_json", "llama3"),
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama4_pythonic", "pythonic"),
        ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", "mistral", "mistral"),
        ("deepseek-ai/DeepSeek-V3.1", "deepseek_v31", "deepseekv31"),
        ("openai/gpt-oss-120b", "openai", "gpt-oss"),
        ("zai-org/GLM-4.6", "glm45", "glm45"),
        ("moonshotai/Kimi-K2-Instruct", "kimi_k2", "kimi_k2"),
    ],
)
def test_a_hub_name_gives_each_engine_its_parser(model, vllm, sglang):
    assert tool_parser_args("vllm", model, None, []).flags == [
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        vllm,
    ]
    assert tool_parser_args("sglang", model, None, []).flags == ["--tool-call-parser", sglang]


def folder(tmp_path, model_type: str, template: str | None):
    """A model folder named `target` (as in the ops templates): no family in its name."""
    path = tmp_path / model_type / "target"
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"model_type": model_type}))
    if template is not None:
        (path / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    return path


@pytest.mark.parametrize(
    ("model_type", "template", "family"),
    [
        ("qwen3_moe", "<|im_start|>...<tool_call>\n<function={{ name }}>", "qwen3_coder"),
        ("qwen3", "<|im_start|>{{ m }}<tool_call>{{ call }}</tool_call>", "hermes"),
        ("llama", "<|start_header_id|>ipython<|python_tag|>", "llama3"),
        ("llama", "{{ '<|im_start|>' + role }}", "hermes"),  # SmolLM2: ChatML, no tool markup
        ("glm4_moe", "[gMASK]<sop><tool_call>{{ name }}", "glm45"),  # not Hermes: its type
        ("mistral", "[INST]{{ m }}[/INST][TOOL_CALLS]", "mistral"),
        ("llama", "{{ bos }}{{ m }}", None),  # no family known: no parser
    ],
)
def test_a_local_folder_is_read_by_its_template_and_model_type(
    tmp_path, model_type, template, family
):
    assert family_of(str(folder(tmp_path, model_type, template))) == family


def test_the_chat_template_given_after_the_dashes_is_the_one_read(tmp_path):
    model = folder(tmp_path, "llama", "{{ bos }}{{ m }}")
    template = tmp_path / "llama31.jinja"
    template.write_text("<|python_tag|>")
    extra = ["--chat-template", str(template)]
    assert tool_parser_args("vllm", str(model), None, extra).flags[-1] == "llama3_json"


def test_the_choice_of_the_user_wins_and_is_never_doubled(tmp_path):
    model = "Qwen/Qwen3-32B"
    assert tool_parser_args("vllm", model, "qwen3_xml", []).flags[-1] == "qwen3_xml"
    off = tool_parser_args("vllm", model, "none", [])
    assert off.flags == [] and "HTTP 400" in off.line
    # a parser given to the engine after `--`: kept; vLLM still needs auto tool choice
    mine = tool_parser_args("vllm", model, None, ["--tool-call-parser=hermes"])
    assert mine.flags == ["--enable-auto-tool-choice"]
    both = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    assert tool_parser_args("vllm", model, None, both).flags == []
    assert tool_parser_args("sglang", model, None, ["--tool-call-parser", "qwen25"]).flags == []
    with pytest.raises(ConfigError, match="given twice"):
        tool_parser_args("vllm", model, "hermes", ["--tool-call-parser", "hermes"])
    with pytest.raises(ConfigError, match="for vllm and sglang"):
        tool_parser_args("llamacpp", "embedded", "hermes", [])
    unknown = folder(tmp_path, "llama", "{{ bos }}{{ m }}")
    said = tool_parser_args("sglang", str(unknown), None, [])
    assert said.flags == [] and "no parser known" in said.line and "as text" in said.line


def test_regen_serve_starts_each_server_with_the_parser_and_says_so(tmp_path, standin_env):
    """The command each stand-in engine was started with (serve_helpers.recorded)."""
    fleet_path = tmp_path / "fleet.json"
    done = regen(
        "serve",
        "--engine",
        "vllm",
        "--model",
        "meta-llama/Llama-3.3-70B-Instruct",
        "--gpus",
        "0",
        "--python",
        standin_env["STANDIN_PYTHON"],
        "--fleet",
        str(fleet_path),
    )
    try:
        assert done.returncode == 0, done.stderr
        assert "tool calls: --enable-auto-tool-choice --tool-call-parser llama3_json" in (
            done.stdout
        )
        (server,) = FleetFile.read(fleet_path).servers
        argv = recorded(tmp_path, server.port)["argv"]
        assert argv[-3:] == ["--enable-auto-tool-choice", "--tool-call-parser", "llama3_json"]
    finally:
        stop_fleet_file(fleet_path)
