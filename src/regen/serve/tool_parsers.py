"""The tool-call parser a server needs to answer prompts that carry `tools`.

A chat request with `tools` and no `tool_choice` means `"auto"`. vLLM refuses it with HTTP
400 unless the server runs with `--enable-auto-tool-choice --tool-call-parser NAME`
(vllm/renderers/online_renderer.py:260-270 in 0.32.0; the first flag alone fails at start,
entrypoints/launchers/cli_args.py:522-524), so on a fleet started without them every prompt
of an agent blend is an error. SGLang answers, but without `--tool-call-parser` it never
parses the calls (serving_chat.py: tool calls are read only `if ... self.tool_call_parser`),
so they come back as text in `content`. The parser is the model family's: how it writes a
call. regen picks it from the model (its config.json's `model_type`, its chat template's
markers, its name), or takes `--tool-call-parser`.

Parser names differ by engine; both lists were read from the engines' sources
(vllm/tool_parsers/__init__.py in 0.32.0; SGLang's FunctionCallParser.ToolCallParserEnum,
sglang/srt/function_call/function_call_parser.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from regen.errors import ConfigError


@dataclass(frozen=True)
class Family:
    says: str  # how the family writes a call, for the line regen serve prints
    vllm: str
    sglang: str


FAMILIES = {
    "qwen3_coder": Family("Qwen3-Coder's <function=...> XML", "qwen3_coder", "qwen3_coder"),
    "gpt_oss": Family("gpt-oss's harmony channels", "openai", "gpt-oss"),
    "kimi_k2": Family("Kimi K2's tool-call sections", "kimi_k2", "kimi_k2"),
    "deepseek_v32": Family("DeepSeek-V3.2's DSML", "deepseek_v32", "deepseekv32"),
    "deepseek_v31": Family("DeepSeek-V3.1's tool-call tokens", "deepseek_v31", "deepseekv31"),
    "deepseek_v3": Family("DeepSeek-V3's tool-call tokens", "deepseek_v3", "deepseekv3"),
    "glm47": Family("GLM-4.7's <tool_call> tags", "glm47", "glm47"),
    "glm45": Family("GLM-4.5's <tool_call> tags", "glm45", "glm45"),
    "minimax_m2": Family("MiniMax-M2's <invoke> XML", "minimax_m2", "minimax-m2"),
    "llama4": Family("Llama 4's pythonic calls", "llama4_pythonic", "pythonic"),
    "mistral": Family("Mistral's [TOOL_CALLS]", "mistral", "mistral"),
    "llama3": Family("Llama 3.1+'s JSON calls", "llama3_json", "llama3"),
    "hermes": Family("Hermes-style <tool_call> JSON: Qwen, Hermes, ChatML", "hermes", "qwen25"),
}
# By name (a hub id or a folder's name, lower case): the first family whose words it holds.
NAMES = (
    ("qwen3_coder", ("qwen3-coder",)),
    ("gpt_oss", ("gpt-oss",)),
    ("kimi_k2", ("kimi-k2",)),
    ("deepseek_v32", ("deepseek-v3.2",)),
    ("deepseek_v31", ("deepseek-v3.1",)),
    ("deepseek_v3", ("deepseek-v3", "deepseek-r1")),
    ("glm47", ("glm-4.7",)),
    ("glm45", ("glm-4.5", "glm-4.6")),
    ("minimax_m2", ("minimax-m2",)),
    ("llama4", ("llama-4",)),
    ("mistral", ("mistral", "ministral", "devstral", "magistral")),
    ("llama3", ("llama-3.1", "llama-3.2", "llama-3.3")),
    ("hermes", ("qwen", "qwq", "hermes")),
)
MODEL_TYPES = {
    "gpt_oss": "gpt_oss",
    "kimi_k2": "kimi_k2",
    "deepseek_v3": "deepseek_v3",
    "glm4_moe": "glm45",
    "minimax_m2": "minimax_m2",
    "llama4": "llama4",
    "mistral": "mistral",
    "mistral3": "mistral",
    **dict.fromkeys(("qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next"), "hermes"),
}
# What a chat template writes around a call: asked before the model type (Qwen3-Coder's
# model_type is qwen3_moe, a Llama 3.1's is llama, as is SmolLM2's)...
TEMPLATE_MARKS = (
    ("qwen3_coder", ("<function=",)),
    ("mistral", ("[TOOL_CALLS]",)),
    ("llama3", ("<|python_tag|>",)),
)
# ...and after it, since GLM's templates write <tool_call> too: Hermes-style calls, which
# ChatML models (Qwen, Hermes, SmolLM) are trained to write.
HERMES_MARKS = ("<tool_call>", "<|im_start|>")


@dataclass(frozen=True)
class Choice:
    flags: list[str]  # what regen adds after the user's engine arguments
    line: str  # what regen serve prints about it


def tool_parser_args(engine: str, model: str, chosen: str | None, extra: list[str]) -> Choice:
    """The engine flags that let a server answer prompts with tools: `chosen`
    (--tool-call-parser; "none" for no parser) or the model family's, unless the engine
    arguments after `--` already name one."""
    if engine == "llamacpp":
        if chosen is not None:
            raise ConfigError(
                "--tool-call-parser is for vllm and sglang servers",
                hint="drop it: llama.cpp's server reads tool calls by its chat format",
            )
        return Choice([], "")
    given = _given(extra)
    if given is not None:
        if chosen is not None:
            raise ConfigError(
                f"--tool-call-parser is given twice: {chosen} before `--`, {given} after it",
                hint="keep one of them",
            )
        auto = ["--enable-auto-tool-choice"] if engine == "vllm" else []
        auto = [] if "--enable-auto-tool-choice" in _names(extra) else auto
        return Choice(auto, f"tool calls: parsed with {given} (after --)")
    if chosen == "none":
        return Choice([], "tool calls: no parser (--tool-call-parser none): " + _UNPARSED[engine])
    family = None if chosen else family_of(model, _template_arg(extra))
    name = chosen or (getattr(FAMILIES[family], engine) if family else None)
    if name is None:
        return Choice([], f"tool calls: no parser known for {model}: " + _UNPARSED[engine])
    flags = ["--enable-auto-tool-choice"] if engine == "vllm" else []
    flags += ["--tool-call-parser", name]
    why = "as asked" if family is None else f"for {FAMILIES[family].says}"
    change = "--tool-call-parser NAME to change, none for no parser"
    return Choice(flags, f"tool calls: {' '.join(flags)} ({why}; {change})")


_UNPARSED = {
    "vllm": "vLLM answers every prompt with tools with HTTP 400, and generate refuses such "
    "prompts on this fleet; pass --tool-call-parser NAME (vLLM's names: hermes, "
    "llama3_json, mistral, qwen3_coder, ...)",
    "sglang": "SGLang returns their calls as text, and generate refuses such prompts on this "
    "fleet; pass --tool-call-parser NAME (SGLang's names: qwen25, llama3, mistral, "
    "qwen3_coder, ...)",
}


def family_of(model: str, template_path: str | None = None) -> str | None:
    """The tool-call family of `model` (a local folder or a hub name), or None."""
    folder = Path(model).expanduser()
    config = _json(folder / "config.json")
    model_type = str(config.get("model_type", "")).lower()
    name = (folder.name if folder.exists() else model).lower()
    template = _template(folder, template_path)
    for family, words in NAMES:
        if any(w in name for w in words):
            return family
    for family, marks in TEMPLATE_MARKS:
        if any(m in template for m in marks):
            return family
    if model_type in MODEL_TYPES:
        return MODEL_TYPES[model_type]
    return "hermes" if any(m in template for m in HERMES_MARKS) else None


def _template(folder: Path, given: str | None) -> str:
    """The chat template the server will render with: `--chat-template FILE` after `--`,
    else the model folder's own (chat_template.jinja, or tokenizer_config.json's)."""
    for path in (Path(given) if given else None, folder / "chat_template.jinja"):
        if path is not None and path.is_file():
            return path.read_text(errors="replace")
    found = _json(folder / "tokenizer_config.json").get("chat_template", "")
    if isinstance(found, list):  # named templates: [{"name": ..., "template": ...}]
        return "\n".join(str(t.get("template", "")) for t in found if isinstance(t, dict))
    return str(found)


def _json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # a hub name, or a folder without it: the name still tells
    return data if isinstance(data, dict) else {}


def _names(extra: list[str]) -> set[str]:
    return {a.split("=", 1)[0].replace("_", "-") for a in extra if a.startswith("--")}


def _given(extra: list[str]) -> str | None:
    return _value(extra, "--tool-call-parser")


def _template_arg(extra: list[str]) -> str | None:
    return _value(extra, "--chat-template")


def _value(extra: list[str], flag: str) -> str | None:
    for i, arg in enumerate(extra):
        name, eq, value = arg.partition("=")
        if name.replace("_", "-") == flag:
            return value if eq else (extra[i + 1] if i + 1 < len(extra) else "")
    return None
