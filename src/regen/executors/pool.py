"""Workers for the row-by-row verbs (check, export, score): local processes or Ray actors.

The same seam as a generation run's executors: `--executor local` (the default) runs
`--workers N` processes on this machine, `--executor ray` runs N actors on a Ray cluster
(`--ray-address`, or a local one), for a run bigger than a node. Either way the verb sees a
`regen.parallel.Workers`: results come back in the order the rows were read, and at most a
few items per worker are in flight, so memory does not grow with the run.

Local workers are copies of this process (`fork`) when it runs no other Python thread: they
start in milliseconds with the state, the tokenizer and the libraries already loaded, where a
fresh interpreter took a second of CPU each to import transformers and unpickle the tokenizer
(most of a short run's gain on a small machine). The native pools such a process holds
(OpenBLAS's, jemalloc's, the Rust tokenizer's) reset themselves in a copy, and the
tokenizer's is off in a worker. A process with another Python thread (a bucket's I/O loop)
is never copied, since a lock that thread held would stay locked in the copy: its workers
are forked from a clean server process that has imported the libraries once (`forkserver`)
and are handed the state once.
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import chain, islice
from typing import Any

from regen.errors import ConfigError, RegenError
from regen.parallel import InProcess, Work, Workers, call_installed, cores, install, one_core

IN_FLIGHT = 3  # items per worker handed out ahead: none waits, memory stays bounded
SMALL = 8  # fewer items than this are done in this process


class LocalWorkers:
    """`count` processes on this machine."""

    def __init__(self, count: int, small: int = SMALL) -> None:
        self.count, self.small = count, small

    def map(self, state: Any, work: Work, items: Iterable[Any]) -> Iterator[Any]:
        """A run of a few batches is done here: starting processes would cost more."""
        it = iter(items)
        first = list(islice(it, self.small))
        if len(first) < self.small:
            yield from InProcess().map(state, work, first)
            return
        yield from self._pool_map(state, work, chain(first, it))

    def _pool_map(self, state: Any, work: Work, items: Iterable[Any]) -> Iterator[Any]:
        context = worker_context(work, copyable=getattr(state, "fork_safe", True))
        # one_core: the copies are made with the tokenizer's threads off (no fork warning)
        with (
            one_core(),
            ProcessPoolExecutor(
                self.count, mp_context=context, initializer=install, initargs=(state,)
            ) as pool,
        ):
            pending: deque[Future] = deque()
            try:
                for item in items:
                    pending.append(pool.submit(call_installed, work, item))
                    if len(pending) >= self.count * IN_FLIGHT:
                        yield pending.popleft().result()
                while pending:
                    yield pending.popleft().result()
            except BrokenProcessPool as exc:
                raise RegenError(
                    f"a worker process died ({exc})",
                    hint="the system may have stopped it for memory: rerun with fewer "
                    "--workers; nothing was published",
                ) from exc
            finally:
                for future in pending:
                    future.cancel()


def worker_context(work: Work, copyable: bool = True) -> multiprocessing.context.BaseContext:
    """fork when that is safe (Linux, no other Python thread here, and a state that says a
    copy of this process can run it: `fork_safe`), else a fork server that preloads the work's
    module and the tokenizer's library (transformers, when this process has it: the state
    then holds one of its tokenizers)."""
    if sys.platform == "linux" and threading.active_count() == 1 and copyable:
        return multiprocessing.get_context("fork")
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    preload = [work.__module__, "regen.parallel"]
    context.set_forkserver_preload(preload + ["transformers"] * ("transformers" in sys.modules))
    return context


class RayWorkers:
    """`count` actors on the Ray cluster at `address` (None: start a local one), each handed
    the state once; the items travel through Ray's object store."""

    def __init__(self, count: int, address: str | None = None) -> None:
        self.count, self.address = count, address

    def map(self, state: Any, work: Work, items: Iterable[Any]) -> Iterator[Any]:
        try:
            import ray
            from ray.util import ActorPool
        except ImportError as exc:
            raise ConfigError(
                "--executor ray needs Ray", hint="pip install 'regen[ray]' (Ray 2.x)"
            ) from exc
        started_here = not ray.is_initialized()
        if started_here:
            ray.init(address=self.address, log_to_driver=False)
        try:
            holder = ray.remote(num_cpus=1)(_Holder)
            shared = ray.put(state)
            pool = ActorPool([holder.remote(shared) for _ in range(self.count)])
            in_flight = 0
            for item in items:
                pool.submit(lambda actor, it: actor.run.remote(work, it), item)
                in_flight += 1
                if in_flight >= self.count * IN_FLIGHT:
                    yield pool.get_next()
                    in_flight -= 1
            while pool.has_next():
                yield pool.get_next()
        finally:
            if started_here:
                ray.shutdown()


class _Holder:
    """A Ray actor: the state, then work items one at a time."""

    def __init__(self, state: Any) -> None:
        import os

        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        self.state = state

    def run(self, work: Work, item: Any) -> Any:
        return work(self.state, item)


def workers_for(count: int | None, executor: str = "local", address: str | None = None) -> Workers:
    """What `--workers N --executor E --ray-address A` ask for: None is every core here."""
    if count is not None and count < 1:
        raise ConfigError(f"--workers {count}: at least 1")
    if executor == "ray":
        return RayWorkers(count or cores(), address)
    if executor != "local":
        raise ConfigError(f"--executor {executor!r} is not known", hint="use local or ray")
    if address is not None:
        raise ConfigError("--ray-address is for --executor ray", hint="add --executor ray")
    count = count or cores()
    return InProcess() if count == 1 else LocalWorkers(count)


__all__ = ["LocalWorkers", "RayWorkers", "workers_for"]
