"""Benchmark of `regen generate`: fleet utilisation, client cost, memory and resume at 1M.

    .venv/bin/python bench/bench_generate.py            # full size (~3 min on 2 cores)
    .venv/bin/python bench/bench_generate.py --quick    # scaled down (~40 s; too small to
                                                        # compare with the targets)

Four parts, each against fake servers (`python -m regen.testing.fake_server`) running as
separate processes on 127.0.0.1, with `regen generate` run as a child process:

1. Utilisation: 8 capacity-limited servers (equal; then one at half speed). Achieved
   throughput is measured at the servers, identically for both clients: completions served
   / (last completion sent - first request received). Counting from the first *request*,
   not the first completion, charges the ramp-up and the tail to the client; counting from
   the first completion would overstate the rate by about one service time. Ideal throughput
   = sum over servers of slots / (mean tokens x seconds per token), with the mean token count
   of what was actually served (answer lengths vary +-50% by a hash of the prompt, so both
   clients get exactly the same jobs). The naive client beside it is a static round-robin:
   prompt i goes to server i % 8, each server with `slots` workers of its own.
2. Client cost: zero-latency servers with ~8 KB answers. CPU-seconds of the regen process
   come from the kernel's accounting of the reaped child (getrusage of children), so the
   fake servers' CPU on the same 2 cores is not counted in it.
3/4. Resume at 1M: a 1M-prompt input whose first 1M - N prompts are already finished in an
   output dir synthesized in regen's own shard format (sealed shards of 20,000 small
   ~330-byte records with `.keys` sidecars, and a manifest written by regen's own
   `check_and_record`). `regen generate` then generates the N new prompts; its RSS (with
   children) is sampled every 50 ms, and the time from process start to the first request
   the fake server receives is reported. A separate child then times the start-up phases
   (input fingerprint, ledger scan, streaming past the finished prompts) with regen's code.

With `--bucket`, parts 1 and 2 write to S3 instead (moto's server on loopback, started and
stopped here; shards uploaded every 5 s), to see whether uploading costs utilisation or
client throughput.

Results: a table on stdout and `.bench/generate.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import os
import platform
import resource
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import orjson
import psutil

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / ".bench"
MODEL = "fake-model"
MAX_TOKENS = 4096  # regen's default --max-output-tokens; the naive client sends the same


@dataclass(frozen=True)
class Sizes:
    util_prompts: int = 6_400  # ~25-50 s per fleet measurement
    slots: int = 16
    tokens: int = 50
    seconds_per_token: float = 0.01  # 0.5 s mean service time (0.25-0.75 s)
    jitter: float = 0.5
    cost_prompts: int = 50_000  # ~400 MB of output, deleted afterwards
    cost_servers: int = 2
    cost_concurrency: int = 64
    resume_prompts: int = 1_000_000
    resume_new: int = 2_000
    shard_records: int = 20_000
    record_bytes: int = 0  # pad each synthesized completion to about this size (0: ~330 B)


QUICK = Sizes(util_prompts=1_200, cost_prompts=5_000, resume_prompts=100_000, resume_new=500)


# -- processes ---------------------------------------------------------------------------
def stop(proc: subprocess.Popen) -> None:
    """Terminate, then kill: every process this script starts ends here."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # only ever 127.0.0.1
        return json.loads(resp.read())


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"fake server {url} exited with {proc.returncode}")
        try:
            get_json(url + "/v1/models", timeout=1.0)
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"fake server {url} not ready after {timeout}s")


@dataclass(frozen=True)
class ServerSpec:
    slots: int
    seconds_per_token: float
    tokens: int
    jitter: float = 0.0
    pad_bytes: int = 0

    def args(self, port: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "regen.testing.fake_server",
            "--port",
            str(port),
            "--slots",
            str(self.slots),
            "--seconds-per-token",
            str(self.seconds_per_token),
            "--tokens",
            str(self.tokens),
            "--tokens-jitter",
            str(self.jitter),
            "--pad-bytes",
            str(self.pad_bytes),
            "--model",
            MODEL,
        ]


@contextmanager
def fleet(specs: Sequence[Any]) -> Iterator[list[str]]:
    """Start one fake server process per spec (anything with `args(port)`: a ServerSpec, or
    bench_throughput's Engine); yield their base URLs; stop them all."""
    procs: list[subprocess.Popen] = []
    try:
        urls = []
        for spec, port in zip(specs, free_ports(len(specs)), strict=True):
            procs.append(subprocess.Popen(spec.args(port), stdout=subprocess.DEVNULL))
            urls.append(f"http://127.0.0.1:{port}")
        for url, proc in zip(urls, procs, strict=True):
            wait_ready(url, proc)
        yield urls
    finally:
        for proc in procs:
            stop(proc)


def fleet_stats(urls: list[str]) -> dict[str, float]:
    """Served count, tokens and the fleet-side window, summed over servers."""
    stats = [get_json(url + "/stats?times=1") for url in urls]

    def marks(name: str) -> list[float]:
        return [s[name] for s in stats if s[name] is not None] or [float("nan")]

    return {
        "served": sum(s["served"] for s in stats),
        "requests": sum(s["requests"] for s in stats),
        "tokens": sum(s["tokens_served"] for s in stats),
        "first_request_at": min(marks("first_request_at")),
        "last_request_at": max(marks("last_request_at")),
        "last_served_at": max(marks("last_served_at")),
        "served_at": sorted(t for s in stats for t in s["served_at"]),
        # a baseline tree's fake server (bench_scale runs one) does not report request times
        "requested_at": sorted(t for s in stats for t in s.get("requested_at", ())),
        "per_server": [s["served"] for s in stats],
    }


# -- inputs ------------------------------------------------------------------------------
def prompt_line(i: int) -> bytes:
    pid = f"p{i:07d}"
    return orjson.dumps({"id": pid, "messages": [{"role": "user", "content": f"question {pid}"}]})


def write_prompts(path: Path, count: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        for start in range(0, count, 50_000):  # in blocks: one write per 50k lines
            end = min(count, start + 50_000)
            fh.write(b"\n".join(prompt_line(i) for i in range(start, end)) + b"\n")


def request_body(i: int) -> dict[str, Any]:
    """What regen sends for prompt i (with default sampling), for the naive client."""
    content = f"question p{i:07d}"
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": content}],
        "stream": False,
        "max_tokens": MAX_TOKENS,
    }


# -- running regen -----------------------------------------------------------------------
@dataclass
class ProcRun:
    exit_code: int
    started_at: float  # time.time() just before the child was started
    wall_s: float
    cpu_s: float  # user + system of the child and its children, from the kernel
    peak_rss_mb: float  # sampled every 50 ms, child plus its children


def regen_cmd(prompts: Path, out: Path | str, urls: list[str], concurrency: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "regen",
        "generate",
        "--prompts",
        str(prompts),
        "--output-dir",
        str(out),
        "--concurrency-per-server",
        str(concurrency),
        "--display",
        "none",
        "--servers",
        *urls,
        *(["--upload-interval", "5"] if "://" in str(out) else []),  # uploads during the run
    ]


def tree_rss(proc: psutil.Process) -> int:
    try:
        procs = [proc, *proc.children(recursive=True)]
        return sum(p.memory_info().rss for p in procs)
    except psutil.Error:
        return 0  # it exited between the two calls


def run_regen(cmd: list[str], timeout: float, log: Path) -> ProcRun:
    """Run regen to the end, sampling its memory; CPU comes from the reaped child's rusage.

    No other child of this script is reaped while it runs (the fake servers live on), so the
    RUSAGE_CHILDREN difference is this child's alone. Its stderr goes to a file: a pipe
    nobody reads would block it once full."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started_at, t0 = time.time(), time.monotonic()
    with open(log, "wb") as err_file:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err_file)
    peak = 0
    try:
        watched = psutil.Process(proc.pid)
        while proc.poll() is None:
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"regen did not finish in {timeout:.0f}s")
            peak = max(peak, tree_rss(watched))
            time.sleep(0.05)
        wall = time.monotonic() - t0
    finally:
        stop(proc)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"regen exited with {proc.returncode}: {tail}")
    return ProcRun(proc.returncode, started_at, wall, cpu, peak / 2**20)


# -- the naive client --------------------------------------------------------------------
async def round_robin(urls: list[str], count: int, concurrency: int, timeout: float) -> int:
    """Prompt i goes to server i % N; each server gets `concurrency` workers of its own, so a
    fast server never waits on a slow one's queue (the most generous static split)."""

    async def worker(session: aiohttp.ClientSession, url: str, todo: list[int]) -> int:
        done = 0
        while todo:
            body = orjson.dumps(request_body(todo.pop()))
            async with session.post(url + "/v1/chat/completions", data=body) as resp:
                orjson.loads(await resp.read())
                done += resp.status == 200
        return done

    async def one_server(k: int, url: str) -> int:
        todo = list(range(k, count, len(urls)))[::-1]  # pop() takes the lowest index first
        connector = aiohttp.TCPConnector(limit=concurrency)
        headers = {"Content-Type": "application/json"}
        async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
            done = await asyncio.gather(*(worker(session, url, todo) for _ in range(concurrency)))
        return sum(done)

    jobs = (one_server(k, url) for k, url in enumerate(urls))
    return sum(await asyncio.wait_for(asyncio.gather(*jobs), timeout))


# -- 1. utilisation ----------------------------------------------------------------------
def fleets(sz: Sizes) -> dict[str, list[ServerSpec]]:
    base = ServerSpec(sz.slots, sz.seconds_per_token, sz.tokens, sz.jitter)
    slow = ServerSpec(sz.slots, 2 * sz.seconds_per_token, sz.tokens, sz.jitter)
    return {"8 equal": [base] * 8, "8, one at half speed": [base] * 7 + [slow]}


def utilisation(specs: list[ServerSpec], stats: dict[str, Any], prompts: int) -> dict[str, Any]:
    """Only distinct prompts count as served: an end-game copy that a server answered in
    full as well is work done twice, not throughput."""
    mean_tokens = stats["tokens"] / max(1, stats["served"])
    ideal = sum(s.slots / (mean_tokens * s.seconds_per_token) for s in specs)
    start = stats["first_request_at"]
    window = stats["last_served_at"] - start
    unique = min(stats["served"], prompts)
    achieved = unique / window
    # Steady state: only while the client still had prompts to send (up to the last prompt's
    # first request: end-game copies come after it), so the end-of-batch drain that every
    # client has is left out; the drain is the rest, measured at the servers.
    last_sent = stats["requested_at"][min(prompts, len(stats["requested_at"])) - 1]
    busy = last_sent - start
    steady = sum(1 for t in stats["served_at"] if t <= last_sent) / busy
    return {
        "completions": unique,
        "duplicate_requests": stats["requests"] - prompts,
        "duplicates_served": stats["served"] - unique,
        "window_s": round(window, 2),
        "fleet_drain_s": round(stats["last_served_at"] - last_sent, 3),
        "achieved_per_s": round(achieved, 1),
        "ideal_per_s": round(ideal, 1),
        "utilisation": round(achieved / ideal, 4),
        "steady_utilisation": round(steady / ideal, 4),
        "per_server": stats["per_server"],
    }


def length_blind_ceiling(specs: list[ServerSpec], prompts: int) -> float:
    """The utilisation of a perfect client that does not know the answers' lengths in
    advance: zero overhead, each prompt in input order to the slot that frees up first.
    Its only loss is the drain (the last requests' own lengths). The lengths are the ones
    the fake servers give these prompts, so this is the ceiling of this very measurement."""
    from regen.testing.fake_behaviour import echo_answer
    from regen.testing.fake_server import answer_tokens

    spec = specs[0]
    lengths = [
        answer_tokens(echo_answer(request_body(i))["content"], spec.tokens, spec.jitter)
        for i in range(prompts)
    ]
    per_token = [s.seconds_per_token for s in specs for _ in range(s.slots)]  # one per slot
    free = [(0.0, slot) for slot in range(len(per_token))]  # (when it frees up, which)
    for tokens in lengths:
        at, slot = heapq.heappop(free)
        heapq.heappush(free, (at + tokens * per_token[slot], slot))
    end = max(at for at, _ in free)
    mean = sum(lengths) / prompts
    ideal = sum(s.slots / (mean * s.seconds_per_token) for s in specs)
    return prompts / end / ideal


def bench_utilisation(
    sz: Sizes, work: Path, timeout: float, bucket: str | None = None, naive: bool = True
) -> list[dict[str, Any]]:
    prompts = work / "util-prompts.jsonl"
    write_prompts(prompts, sz.util_prompts)
    results = []
    for name, specs in fleets(sz).items():
        # A fresh fleet per client, so each one's /stats counts only its own traffic.
        with fleet(specs) as urls:
            out: Path | str = work / f"util-{len(results)}"
            if bucket:  # --bucket: the run's output goes to moto's S3 on loopback
                out = f"{bucket}/util-{len(results)}"
            shutil.rmtree(out, ignore_errors=True)
            run_regen(regen_cmd(prompts, out, urls, sz.slots), timeout, work / "regen.log")
            measured = utilisation(specs, fleet_stats(urls), sz.util_prompts)
            ceiling = length_blind_ceiling(specs, sz.util_prompts)
            measured["length_blind_ceiling"] = round(ceiling, 4)
            results.append({"fleet": name, "client": "regen", **measured, **end_game(out)})
        print_row(results[-1])
        if not naive:
            continue
        with fleet(specs) as urls:
            asyncio.run(round_robin(urls, sz.util_prompts, sz.slots, timeout))
            measured = utilisation(specs, fleet_stats(urls), sz.util_prompts)
            results.append({"fleet": name, "client": "naive round-robin", **measured})
        print_row(results[-1])
    return results


def end_game(out: Path | str) -> dict[str, Any]:
    """What regen's last snapshot says of the end of the batch (a local run's only; a
    baseline without an end game says nothing)."""
    path = Path(out) / "progress.json"
    if "://" in str(out) or not path.exists():
        return {}
    return json.loads(path.read_text()).get("end_game") or {}


def print_row(row: dict[str, Any]) -> None:
    drain = row.get("drain") or {}
    print(
        f"  {row['fleet']:<22} {row['client']:<18} {row['completions']:>6} in "
        f"{row['window_s']:>6.1f} s = {row['achieved_per_s']:>6.1f}/s of "
        f"{row['ideal_per_s']:.1f}/s ideal: utilisation {row['utilisation']:.3f} "
        f"(steady state {row['steady_utilisation']:.3f}, drain {row['fleet_drain_s']:.2f} s); "
        f"{row['duplicate_requests']} duplicate requests, {row['duplicates_served']} served"
        + (
            f"; a length-blind client's ceiling {row['length_blind_ceiling']:.3f}"
            if "length_blind_ceiling" in row
            else ""
        )
        + (
            f"; regen: drain {drain['seconds']:.2f} s, {drain['idle_ratio']:.0%} idle, copies "
            f"{row['copies_started']} ({row['copies_won']} won)"
            if drain
            else ""
        ),
        flush=True,
    )


# -- 2. client cost ----------------------------------------------------------------------
def bench_client_cost(
    sz: Sizes, work: Path, timeout: float, bucket: str | None = None
) -> dict[str, Any]:
    prompts, log = work / "cost-prompts.jsonl", work / "regen.log"
    out: Path | str = f"{bucket}/cost-out" if bucket else work / "cost-out"
    write_prompts(prompts, sz.cost_prompts)
    shutil.rmtree(out, ignore_errors=True)
    spec = ServerSpec(sz.cost_concurrency, 0.0, 8, pad_bytes=8000)
    try:
        with fleet([spec] * sz.cost_servers) as urls:
            cmd = regen_cmd(prompts, out, urls, sz.cost_concurrency)
            run = run_regen(cmd, timeout, log)
            stats = fleet_stats(urls)
            # The same command again has nothing to do: its CPU is the fixed start-up cost
            # (imports, preflight, fingerprint, ledger scan), not a per-completion cost.
            idle = run_regen(cmd, timeout, log)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    served = stats["served"]
    window = stats["last_served_at"] - stats["first_request_at"]
    marginal = max(run.cpu_s - idle.cpu_s, 1e-9)
    return {
        "completions": served,
        "servers": sz.cost_servers,
        "concurrency_per_server": sz.cost_concurrency,
        "response_bytes": 8000,
        "window_s": round(window, 2),
        "completions_per_s": round(served / window, 1),
        "process_wall_s": round(run.wall_s, 2),
        "client_cpu_s": round(run.cpu_s, 2),
        "startup_cpu_s": round(idle.cpu_s, 2),
        "cpu_s_per_1000": round(1000 * run.cpu_s / served, 3),
        "cpu_s_per_1000_marginal": round(1000 * marginal / served, 3),
        "cpu_bound_ceiling_per_s": round(served / marginal, 1),
        "peak_rss_mb": round(run.peak_rss_mb, 1),
    }


# -- 3 and 4. memory and restart at 1M ---------------------------------------------------
def completion_line(i: int, sampling: dict[str, Any], pad: int = 0) -> bytes:
    """A record in regen's format (`id` and `sample` first): ~330 bytes plus `pad`."""
    pid = f"p{i:07d}"
    question = f"question {pid}"
    record = {
        "id": pid,
        "sample": 0,
        "messages": [
            {"role": "user", "content": question},
            {"role": "assistant", "content": f"answer to: {question}" + " lorem" * (pad // 6)},
        ],
        "finish_reason": "stop",
        "usage": {"prompt_tokens": 10, "completion_tokens": 8},
        "meta": {
            "server": "127.0.0.1:1",
            "model": MODEL,
            "sampling": sampling,
            "attempts": 1,
            "latency_s": 0.01,
            "line": i + 1,
        },
    }
    return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)


def regen_api() -> SimpleNamespace:
    """The names the synthesis and the phases need, from this tree or from an older one
    (bench_scale runs a baseline tree beside this one, each with its own code)."""
    try:
        from regen.format.layout import OutputLayout
        from regen.format.manifest import check_and_record, fingerprint
        from regen.format.part import Part
        from regen.format.writer import seal_shard
        from regen.run.config import build_config

        def config(prompts: Path, out: Path, part: Any) -> Any:
            paths = {"input.prompts": prompts, "output.dir": out, "part": part}
            return build_config({**paths, "fleet.servers": ["http://127.0.0.1:1"]})
    except ImportError:  # before the output format had a package of its own
        from regen.run.layout import OutputLayout
        from regen.run.manifest import check_and_record, fingerprint
        from regen.run.writer import seal_shard
        from regen.scale.partition import Part

        from regen.run.config import GenerateConfig

        def config(prompts: Path, out: Path, part: Any) -> Any:
            servers = ["http://127.0.0.1:1"]
            return GenerateConfig(prompts=prompts, output_dir=out, servers=servers, part=part)

    return SimpleNamespace(
        OutputLayout=OutputLayout,
        check_and_record=check_and_record,
        fingerprint=fingerprint,
        Part=Part,
        seal_shard=seal_shard,
        config=config,
    )


def synthesize_output(
    prompts: Path, out: Path, finished: int, shard_records: int, pad: int = 0, parts: int = 1
) -> None:
    """An output dir holding prompts 0..finished-1 as sealed shards, and a manifest that
    matches `prompts` and regen's default sampling (what the resume run will use). With
    `parts` > 1, as N `--shard I/N` processes would have left it: each part's prompts in
    that part's own shards."""
    api = regen_api()
    OutputLayout, Part, check_and_record = api.OutputLayout, api.Part, api.check_and_record
    fingerprint, seal_shard = api.fingerprint, api.seal_shard

    layout = OutputLayout.at(out)
    layout.completions.mkdir(parents=True)
    config = api.config(prompts, out, Part(0, parts))
    sampling = asdict(config.sampling)
    input_fp = fingerprint(prompts)
    for index in range(parts):
        part = Part(index, parts)
        mine = [i for i in range(finished) if part.owns_id(f"p{i:07d}")]
        tag, shard_keys = _shard_format(input_fp.xxh3_128, part)
        for seq, start in enumerate(range(0, len(mine), shard_records), start=1):
            rows = mine[start : start + shard_records]
            shard = layout.completions / f"part-{tag}-{seq:05d}.jsonl"
            shard.write_bytes(b"".join(completion_line(i, sampling, pad) for i in rows))
            seal_shard(shard, shard_keys((f"p{i:07d}", 0, i + 1) for i in rows), False)
    resolved = config.resolved(["http://127.0.0.1:1"], MODEL)
    check_and_record(
        layout.manifest,
        config=resolved,
        input_fp=input_fp,
        allow_changed_input=False,
        allow_changed_sampling=False,
    )


def _shard_format(input_digest: str, part: Any) -> tuple[str, Callable[[Iterator[tuple]], Any]]:
    """Shard names and sidecar keys as the regen being benchmarked writes them: with the
    input's digest in the name and line numbers in the sidecar (regen.format.sidecar), or, for
    a baseline older than that, the plain `[(id, sample)]` sidecar."""
    try:
        from regen.format.names import INPUT_ID_CHARS
        from regen.format.sidecar import ShardKeys
    except ImportError:  # before the output format had a package of its own
        try:
            from regen.run.sidecar import ShardKeys  # type: ignore[no-redef]
            from regen.run.writer import INPUT_ID_CHARS  # type: ignore[no-redef]
        except ImportError:
            plain = f"19700101T000000-bench-{part.index}"
            return plain, lambda rows: [(i, s) for i, s, _ in rows]
    tag = f"19700101T000000-bench-{part.index}"
    if not part.whole:
        tag += "-s" + part.name.replace("-of-", "of")
    return f"{tag}-i{input_digest[:INPUT_ID_CHARS]}", ShardKeys.of


def disk_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def bench_resume(sz: Sizes, work: Path, timeout: float, keep: bool) -> dict[str, Any]:
    prompts, out = work / "resume-prompts.jsonl", work / "resume-out"
    shutil.rmtree(out, ignore_errors=True)
    finished = sz.resume_prompts - sz.resume_new
    t0 = time.monotonic()
    write_prompts(prompts, sz.resume_prompts)
    synthesize_output(prompts, out, finished, sz.shard_records, max(0, sz.record_bytes - 330))
    setup = {
        "synthesis_s": round(time.monotonic() - t0, 1),
        "prompt_file_mb": round(prompts.stat().st_size / 2**20, 1),
        "output_dir_mb": round(disk_mb(out), 1),
    }
    try:
        with fleet([ServerSpec(64, 0.0, 8)]) as urls:
            run = run_regen(regen_cmd(prompts, out, urls, 64), timeout, work / "regen.log")
            stats = fleet_stats(urls)
        phases = startup_phases(prompts, out, timeout)
    finally:
        if not keep:
            shutil.rmtree(out, ignore_errors=True)
            prompts.unlink(missing_ok=True)
    return {
        "prompts": sz.resume_prompts,
        "already_finished": finished,
        "new_generated": stats["served"],
        **setup,
        "peak_rss_mb": round(run.peak_rss_mb, 1),
        "first_request_s": round(stats["first_request_at"] - run.started_at, 2),
        "process_wall_s": round(run.wall_s, 2),
        "phases": phases,
    }


def startup_phases(prompts: Path, out: Path, timeout: float) -> dict[str, Any]:
    """Time regen's start-up steps one by one, in a fresh child (see `measure_phases`)."""
    cmd = [sys.executable, __file__, "--phases", str(prompts), str(out)]
    done = subprocess.run(cmd, capture_output=True, timeout=timeout, check=True)
    return json.loads(done.stdout)


def measure_phases(prompts: Path, out: Path) -> dict[str, Any]:
    """Runs in the child: regen's own code for each step that precedes the first request.
    Every prompt is finished by now, so streaming covers the whole file."""
    peak = PeakRss()
    t0 = time.perf_counter()
    from regen.run import ledger
    from regen.run.intake import Intake
    from regen.run.progress import RunStats

    api = regen_api()
    OutputLayout, fingerprint = api.OutputLayout, api.fingerprint

    marks = {"import_s": time.perf_counter() - t0}
    digest = fingerprint(prompts).xxh3_128
    marks["fingerprint_s"] = time.perf_counter() - t0
    layout = OutputLayout.at(out)
    try:
        scanned = ledger.scan(layout, compress=False, input_digests=[digest])
    except TypeError:  # a baseline from before line maps
        scanned = ledger.scan(layout, compress=False)
    marks["ledger_scan_s"] = time.perf_counter() - t0
    rss_ledger = psutil.Process().memory_info().rss
    stats = RunStats(total=0, finished_before=0)
    config = api.config(prompts, out, api.Part(0, 1))
    try:  # this tree: the input group and the part
        intake = Intake(config.input, config.part, scanned, stats, on_bad_line=print)
    except AttributeError:  # a baseline from before config groups
        intake = Intake(config, scanned, stats, on_bad_line=print)
    pending = sum(1 for item in intake.items() if item is not None)
    marks["stream_s"] = time.perf_counter() - t0
    steps = dict(zip(marks, [0.0, *marks.values()], strict=False))  # start of each step
    result = {k: round(v - steps[k], 2) for k, v in marks.items()}
    result.update(
        keys_in_ledger=len(scanned.done),
        pending=pending,
        rss_after_scan_mb=round(rss_ledger / 2**20, 1),
        peak_rss_mb=round(peak.stop() / 2**20, 1),
    )
    return result


class PeakRss:
    """This process's peak RSS, sampled every 20 ms by a thread. (ru_maxrss will not do in a
    child: Linux carries the parent's figure across exec.)"""

    def __init__(self) -> None:
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._done.wait(0.02):
            self.peak = max(self.peak, me.memory_info().rss)

    def stop(self) -> int:
        self._done.set()
        self._thread.join(timeout=5)
        return max(self.peak, psutil.Process().memory_info().rss)


@contextmanager
def moto_bucket(wanted: bool) -> Iterator[str | None]:
    """With --bucket: moto's S3 server on loopback (stopped by pid), a fresh bucket prefix,
    and the AWS_* variables that point regen at it; uploads every 5 s."""
    if not wanted:
        yield None
        return
    import boto3

    from regen.testing.moto_server import moto_server

    with moto_server(free_ports(1)[0]) as endpoint:
        os.environ.update(
            {
                "AWS_ENDPOINT_URL": endpoint,
                "AWS_ACCESS_KEY_ID": "bench",
                "AWS_SECRET_ACCESS_KEY": "bench",
                "AWS_DEFAULT_REGION": "us-east-1",
            }
        )
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")
        yield f"s3://bench/{int(time.time())}"


# -- report ------------------------------------------------------------------------------
def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for row in results.get("utilisation", []):
        if row["client"] == "regen":
            value = row["utilisation"]
            goal = 0.98 if row["fleet"] == "8 equal" else 0.975  # issue 22
            name = f"utilisation, {row['fleet']}"
            if "length_blind_ceiling" in row:
                name += f" (ceiling {row['length_blind_ceiling']:.3f})"
            rows.append(target(name, value, f">= {goal}", value >= goal))
    if cost := results.get("client_cost"):
        rate = cost["completions_per_s"]
        rows.append(target("completions/s, one process", rate, ">= 1500", rate >= 1500))
    if resume := results.get("resume"):
        n = f"{resume['prompts']:,}"
        rss, start = resume["peak_rss_mb"], resume["first_request_s"]
        rows.append(target(f"peak RSS (MB) at {n} prompts", rss, "<= 300", rss <= 300))
        rows.append(target(f"resume start (s) at {n}", start, "<= 10", start <= 10))
    return rows


def target(name: str, value: float, goal: str, met: bool) -> dict[str, Any]:
    return {"name": name, "value": value, "target": goal, "met": met}


def print_report(results: dict[str, Any]) -> None:
    print("\n== utilisation (fleet-side: served / (last completion - first request)) ==")
    for row in results.get("utilisation", []):
        print_row(row)
    if cost := results.get("client_cost"):
        print("\n== client cost (zero-latency servers, 8 KB answers) ==")
        for key, value in cost.items():
            print(f"  {key:<26} {value}")
    if resume := results.get("resume"):
        print("\n== resume over an output dir with finished prompts ==")
        for key, value in resume.items():
            print(f"  {key:<26} {value}")
    print("\n== targets ==")
    for row in results["targets"]:
        verdict = "met" if row["met"] else "MISSED"
        print(f"  {row['name']:<52} {row['value']:>10} {row['target']:>8}  {verdict}")


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="every part, scaled down (~40 s)")
    ap.add_argument("--parts", default="util,cost,resume", help="comma-separated subset")
    ap.add_argument("--util-prompts", type=int, help="prompts per utilisation measurement")
    ap.add_argument("--cost-prompts", type=int, help="completions for the client-cost part")
    ap.add_argument("--resume-prompts", type=int, help="input size for the resume part")
    ap.add_argument("--timeout", type=float, default=300, help="limit per regen run, seconds")
    ap.add_argument("--keep", action="store_true", help="keep the synthesized resume files")
    ap.add_argument(
        "--record-bytes", type=int, help="size of each synthesized finished completion (resume)"
    )
    ap.add_argument(
        "--bucket",
        action="store_true",
        help="util and cost write to S3 (moto on loopback, started here) instead of a dir",
    )
    ap.add_argument(
        "--no-naive", action="store_true", help="util: measure regen only, not the naive client"
    )
    ap.add_argument("--phases", nargs=2, metavar=("PROMPTS", "OUT"), help=argparse.SUPPRESS)
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    if args.phases:
        print(json.dumps(measure_phases(Path(args.phases[0]), Path(args.phases[1]))))
        return
    sz = QUICK if args.quick else Sizes()
    overrides = {
        "util_prompts": args.util_prompts,
        "cost_prompts": args.cost_prompts,
        "resume_prompts": args.resume_prompts,
        "record_bytes": args.record_bytes,
    }
    sz = Sizes(**{**asdict(sz), **{k: v for k, v in overrides.items() if v}})
    work = BENCH_DIR / "generate-work"
    work.mkdir(parents=True, exist_ok=True)
    parts = set(args.parts.split(","))
    results: dict[str, Any] = {"command": " ".join(sys.argv), "machine": machine()}
    results["sizes"] = asdict(sz)
    started = time.monotonic()
    with moto_bucket(args.bucket) as bucket:
        results["output"] = bucket or "local directory"
        if "util" in parts:
            print("== utilisation ==", flush=True)
            results["utilisation"] = bench_utilisation(
                sz, work, args.timeout, bucket, naive=not args.no_naive
            )
        if "cost" in parts:
            results["client_cost"] = bench_client_cost(sz, work, args.timeout, bucket)
    if "resume" in parts:
        results["resume"] = bench_resume(sz, work, args.timeout, args.keep)
    results["targets"] = targets(results)
    results["total_s"] = round(time.monotonic() - started, 1)
    print_report(results)
    (BENCH_DIR / "generate.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten to {BENCH_DIR / 'generate.json'} ({results['total_s']} s)")


if __name__ == "__main__":
    main()
