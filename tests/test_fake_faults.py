"""The fake server's faults, met by a client that has gone: no error of the fake's.

A bench's fake logs to its stderr; a traceback there for a client that went away (regen's
closes on a stream's error event, a withdrawn request goes before the headers) hides the
fake's real errors among dozens of false ones."""

from __future__ import annotations

import logging
import socket
import urllib.request

import orjson
import pytest

from waiting import wait_until

GONE = 5  # requests whose client hangs up at once


@pytest.mark.parametrize("fault", ["stream_refused", "stream_error", "ok"])
def test_a_stream_to_a_client_already_gone_logs_no_error(fake_server, caplog, fault):
    server = fake_server(faults=[fault])
    body = orjson.dumps(
        {"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    )
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: fake\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with caplog.at_level(logging.ERROR, logger="aiohttp"):
        for _ in range(GONE):
            with socket.create_connection(("127.0.0.1", server.port)) as client:
                client.sendall(head.encode() + body)  # and gone before the answer
        wait_until(
            lambda: len(server.requests) == GONE and server.in_flight == 0,
            10,
            "the fake's end of every request",
        )
        # One more answer: the fake's loop has finished (and logged) every handler before it.
        urllib.request.urlopen(server.url + "/v1/models", timeout=10).close()
    assert [r.getMessage() for r in caplog.records if r.name.startswith("aiohttp")] == []
    assert server.served == 0  # (no answer went out whole)
