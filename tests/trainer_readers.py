"""The ShareGPT readers of LLaMA-Factory and axolotl, imported from their own source.

Both are installed --no-deps (scripts/bootstrap.sh); the few heavy packages their modules
import at the top (peft, ...) and never call on this path are stand-ins here (accelerate is
real: regen's gguf extra installs it).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any


class _AnyAttr(type):
    """A stand-in class whose every attribute is an empty string (colorama's Fore.CYAN)."""

    def __getattr__(cls, attr: str) -> str:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return ""


class _StandIn(types.ModuleType):
    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _AnyAttr(attr, (), {})


def stand_in(monkeypatch, *names: str) -> None:
    for name in names:
        module = _StandIn(name)
        module.__path__ = []  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, name, module)


def llamafactory_converter(monkeypatch) -> Any:
    """LLaMA-Factory's SharegptDatasetConverter with the attributes of a dataset_info entry
    {"formatting": "sharegpt", "columns": {"messages": "conversations", "tools": "tools"}}.
    Its package __init__ pulls in the trainer; only data/converter.py and data/parser.py are
    loaded, as bare packages."""
    stand_in(monkeypatch, "peft", "peft.utils")
    root = Path(importlib.util.find_spec("llamafactory").submodule_search_locations[0])
    for name in ("llamafactory", "llamafactory.data", "llamafactory.extras"):
        package = types.ModuleType(name)
        package.__path__ = [str(root.joinpath(*name.split(".")[1:]))]  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, name, package)
    from llamafactory.data.converter import SharegptDatasetConverter
    from llamafactory.data.parser import DatasetAttr

    attr = DatasetAttr("file", "regen", formatting="sharegpt", tools="tools")
    return SharegptDatasetConverter(attr, None)


def llamafactory_keeps(converter: Any, row: dict) -> bool:
    """LLaMA-Factory's supervised preprocessing then drops what the converter emptied."""
    out = converter(row)
    return len(out["_prompt"]) % 2 == 1 and len(out["_response"]) == 1


def axolotl_strategy(monkeypatch, tokenizer: Any) -> Any:
    """axolotl's chat_template strategy with the README's dataset config."""
    stand_in(monkeypatch, "colorama", "addict")  # accelerate is real: the gguf extra has it
    from axolotl.prompt_strategies.chat_template import ChatTemplatePrompter, ChatTemplateStrategy

    prompter = ChatTemplatePrompter(
        tokenizer,
        chat_template=tokenizer.chat_template,
        max_length=4096,
        message_property_mappings={"role": "from", "content": "value"},
        field_messages="conversations",
        message_field_training="train",
    )
    return ChatTemplateStrategy(
        prompter,
        tokenizer,
        train_on_inputs=False,
        sequence_len=4096,
        roles_to_train=["assistant"],
        train_on_eos="turn",
    )
