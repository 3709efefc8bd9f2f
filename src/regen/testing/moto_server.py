"""moto's standalone S3 server on loopback, for tests and benchmarks: a real S3 API in its
own process, started and stopped by its pid."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator


@contextlib.contextmanager
def moto_server(port: int, startup_timeout: float = 30.0) -> Iterator[str]:
    """Yield the endpoint URL once the server answers; stop it by its pid afterwards."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            try:
                urllib.request.urlopen(url, timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def reset(url: str) -> None:
    """Empty the server at `url` of every bucket and object (moto's own reset): a server
    shared by many tests starts each as a fresh one does."""
    request = urllib.request.Request(url + "/moto-api/reset", data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()
    with urllib.request.urlopen(url + "/", timeout=30) as response:  # ListBuckets
        listed = response.read()
    if b"<Bucket>" in listed:  # a bucket left over would leak one test's state into the next
        raise RuntimeError(f"moto server at {url} kept buckets after its reset: {listed!r}")
