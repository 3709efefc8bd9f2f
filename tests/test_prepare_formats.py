"""One adapter per format, on rows shaped like the real datasets."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson
import pytest

from regen.chat import flatten
from regen.errors import InputError
from regen.prepare.blend import Ask, allocate
from regen.prepare.formats import Options, detect
from regen.prepare.formats.function_calling import FunctionCalling
from regen.prepare.formats.traces import Traces

FIXTURES = Path(__file__).parent / "fixtures" / "prepare"


def rows(name: str) -> list[dict]:
    return [orjson.loads(x) for x in (FIXTURES / name).read_bytes().splitlines() if x.strip()]


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("infinity_instruct.jsonl", "sharegpt"),
        ("metamathqa.jsonl", "pairs"),
        ("codefeedback.jsonl", "pairs"),
        ("hermes_function_calling.jsonl", "function_calling"),
        ("agent_trajectories.jsonl", "openai"),
        ("api_traces.jsonl", "traces"),
    ],
)
def test_detection_names_the_format_and_why(name: str, fmt: str) -> None:
    adapter, reason = detect(rows(name)[0])
    assert adapter.name == fmt and reason


def test_hermes_python_literal_tools_and_calls() -> None:
    out = FunctionCalling(Options()).convert(rows("hermes_function_calling.jsonl")[0])
    assert out.tools[0]["function"]["name"] == "get_stock_price"
    system, _, call, result, _ = out.messages
    assert "<tools>" not in system["content"]
    fn = call["tool_calls"][0]["function"]
    assert fn == {"name": "get_stock_price", "arguments": '{"symbol":"AAPL"}'}
    assert result["tool_call_id"] == call["tool_calls"][0]["id"]
    assert result["name"] == "get_stock_price" and "<tool_response>" not in result["content"]


def test_hermes_tools_one_per_line_and_tools_column() -> None:
    adapter = FunctionCalling(Options())
    by_line, column = (adapter.convert(r) for r in rows("hermes_function_calling.jsonl")[1:3])
    assert [t["function"]["name"] for t in by_line.tools] == ["get_weather", "get_news"]
    assert column.tools[0]["function"]["name"] == "book_table"


def test_anthropic_trace_blocks() -> None:
    adapter = Traces(Options())
    out = adapter.convert(rows("api_traces.jsonl")[1])
    roles = [m["role"] for m in out.messages]
    assert roles == ["system", "user", "assistant", "tool", "user"]
    assert out.messages[2]["content"] == "Let me look."  # thinking never forwarded
    assert out.messages[3] == {"role": "tool", "tool_call_id": "toolu_1", "content": "a.py\r\nb.py"}
    assert out.tools[0]["function"]["parameters"]["type"] == "object"
    assert out.dropped == Counter({"thinking": 1})


def test_trace_prefix_is_skipped_only_after_scan() -> None:
    adapter = Traces(Options())
    data = rows("api_traces.jsonl")
    adapter.scan(data)
    with pytest.raises(InputError, match="prefix of a longer request"):
        adapter.convert(data[0])


def test_multimodal_blocks_dropped_with_count_or_kept() -> None:
    blocks = [
        {"type": "text", "text": "see "},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA"}},
    ]
    dropped: Counter = Counter()
    assert flatten(blocks, keep_multimodal=False, dropped=dropped) == "see "
    assert dropped == Counter({"image": 1})
    kept = flatten(blocks, keep_multimodal=True, dropped=Counter())
    assert kept[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}}


def test_allocation_small_sources_whole_large_fill() -> None:
    asks = [Ask(take_all=True), Ask(count=2), Ask(weight=2), Ask(weight=1), Ask(weight=1)]
    quotas = allocate(asks, [3, 5, 5, 4, 100], total=20)
    assert quotas == [3, 2, 5, 4, 6]  # weight 2 wanted 6, had 5; the rest fill, sum 20
    assert sum(quotas) == 20
