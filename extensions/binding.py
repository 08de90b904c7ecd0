"""The named parameters bound to an adapter's statements (a statement's varying values: its base position, commit,
time), per thread and adapter; and the reader threads that run a read alongside its caller's, those parameters
bound there too (``EngineAdapter.parameters``, ``bound`` and ``alongside``)."""
from __future__ import annotations

import concurrent.futures
import contextlib
import threading
from typing import Callable, Iterator

#: The named parameters bound now, per thread and adapter.
_BOUND = threading.local()
#: The threads that run reads alongside their callers' (``alongside``), by name: started on first use, and named so.
_readers: dict[str, concurrent.futures.ThreadPoolExecutor] = {}
_readers_lock = threading.Lock()
_READER = "seqdedup-reader"
_NESTED = "seqdedup-nested"     # (the reads a reader starts; not a prefix of _READER's names, nor they of it)


@contextlib.contextmanager
def bind(adapter, values: dict) -> Iterator[None]:
    """``adapter.parameters(values)``: run the statements inside with these named parameters bound. A statement's
    varying values (its base position, commit, time) are parameters, so that its SQL text is the same from one
    statement to the next and is generated once (seqdedup/core/statement.py)."""
    # (per thread: threads may share a session, each running its own statement)
    bound = _BOUND.__dict__.setdefault("values", {})
    before = bound.get(id(adapter), {})
    bound[id(adapter)] = {**before, **values}
    try:
        yield
    finally:
        bound[id(adapter)] = before


def bound(adapter, text: str, marker: str) -> dict | None:
    """``adapter.bound(text, marker)``: the parameters ``text`` uses (written ``<marker>name``), with their values;
    None when it uses none."""
    values = _BOUND.__dict__.get("values", {}).get(id(adapter), {})
    used = {k: v for k, v in values.items() if f"{marker}{k}" in text}
    return used or None


def alongside(adapter, read: Callable[[], object]) -> concurrent.futures.Future:
    """``adapter.alongside(read)``: start ``read``, a function that reads through the adapter (a query, a topic's
    recovery) and changes nothing the caller's next calls read: on another thread where the engine runs queries at
    once (``READS_ALONGSIDE``), with this thread's parameters bound there too; else now, on this one. Its future:
    ``result()`` gives its value, or raises its error.

    A read started from a reader (the reads of a recovery that itself runs alongside, as ``ingest``'s does) goes to
    a second set of threads: queued behind the first set's, which may be waiting for it, it could never start. One
    started from there runs at once, on its own thread (a third set would only move the question)."""
    nested = threading.current_thread().name
    if not adapter.READS_ALONGSIDE or nested.startswith(_NESTED):
        done: concurrent.futures.Future = concurrent.futures.Future()
        try:
            done.set_result(read())
        except Exception as error:
            done.set_exception(error)
        return done
    values = dict(_BOUND.__dict__.get("values", {}).get(id(adapter), {}))

    def run():
        with adapter.parameters(values):
            return read()
    return _pool(_NESTED if nested.startswith(_READER) else _READER).submit(run)


def _pool(name: str) -> concurrent.futures.ThreadPoolExecutor:
    """The threads ``name`` (``_READER`` or ``_NESTED``), started on first use."""
    with _readers_lock:
        if name not in _readers:
            _readers[name] = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix=name)
        return _readers[name]
