"""A Spark Connect server on this machine, with a Hive catalog in a home folder, for trying seqdedup on a Spark
Connect session without a cluster (the tests run the behaviour suite on one this way).

A client process that already holds a classic SparkSession cannot start one in-process
(``SparkSession.builder.remote("local[2]")`` refuses with SESSION_OR_CONTEXT_EXISTS), so the server is a process of
its own, started with pyspark's ``spark-submit`` and stopped with ``stop()`` (or when this process exits).
"""
from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from seqdedup.errors import EngineError

#: The class pyspark's own start-connect-server.sh starts.
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: Spark Connect's port where a URL names none (pyspark's client and start-connect-server.sh use it).
DEFAULT_PORT = 15002


def remote_session(url: str, timeout: float = 10.0):
    """A new Spark Connect session on the server at ``url`` (``sc://host:port``), or an EngineError at once where
    nothing answers there (pyspark's client would retry for minutes, saying nothing)."""
    from pyspark.sql.connect.session import SparkSession

    parsed = urllib.parse.urlparse(url)
    try:
        port = parsed.port or DEFAULT_PORT
    except ValueError:
        port = None
    if parsed.scheme != "sc" or not parsed.hostname or port is None:
        raise EngineError(f"{url!r} is not a Spark Connect URL: write sc://HOST:PORT, for example "
                          f"sc://127.0.0.1:{DEFAULT_PORT}")
    try:
        socket.create_connection((parsed.hostname, port), timeout=timeout).close()
    except OSError as error:
        raise EngineError(f"no Spark Connect server answers at {url} ({error.strerror or error}); start one "
                          "(seqdedup connect-server) or check the address") from None
    return SparkSession.builder.remote(url).create()


@dataclass
class LocalConnectServer:
    process: subprocess.Popen
    url: str                # sc://127.0.0.1:<port>, for SparkSession.builder.remote
    log: Path

    def session(self):
        """A Spark Connect session on this server (a new one each call)."""
        return remote_session(self.url)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_local_server(home: str | Path, master: str = "local[2]", timeout: float = 180.0,
                       settings: dict[str, str] | None = None, port: int | None = None,
                       lock_timeout: float | None = 60.0, metastore: str | None = None) -> LocalConnectServer:
    """Start a Spark Connect server on loopback, on ``port`` (None: a free one), its warehouse in ``home`` and its
    metastore an embedded Derby database there, or ``metastore`` shared with other drivers (``metastore_settings``).
    Embedded Derby admits one process: this process locks the home as a local session does (``local_session``), so
    that a local session on it is refused while the server runs, where it would hang. Waits until the server accepts
    connections."""
    import pyspark

    from .session import derby_settings, local_settings, lock_home, metastore_settings

    home = Path(home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    if port is None:
        port = _free_port()
    else:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                raise EngineError(f"port {port} is in use (another Spark Connect server?); give another port, or "
                                  "stop the process that has it")
    if metastore is None:
        lock_home(home, lock_timeout)
    conf = {"spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": str(port),
            "spark.sql.catalogImplementation": "hive", **local_settings(home),
            **(derby_settings(home) if metastore is None else metastore_settings(metastore)),
            **(settings or {})}
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    command = [str(submit), "--class", SERVER_CLASS, "--master", master, "--name", "seqdedup-connect"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    log = home / "connect-server.log"
    # the server's Python workers (seqdedup's UDFs) run this Python, which has pyarrow
    env = {**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
    with open(log, "ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=home, env=env,
                                   start_new_session=True)
    server = LocalConnectServer(process, f"sc://127.0.0.1:{port}", log)
    atexit.register(server.stop)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise EngineError(f"the Spark Connect server exited with {process.returncode} before it started; its "
                              f"log: {log}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return server
        time.sleep(0.5)
    server.stop()
    raise EngineError(f"the Spark Connect server did not start within {timeout:.0f} s; its log: {log}")
