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
from dataclasses import dataclass
from pathlib import Path

from seqdedup.errors import EngineError

#: The class pyspark's own start-connect-server.sh starts.
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


@dataclass
class LocalConnectServer:
    process: subprocess.Popen
    url: str                # sc://127.0.0.1:<port>, for SparkSession.builder.remote
    log: Path

    def session(self):
        """A Spark Connect session on this server (a new one each call)."""
        from pyspark.sql.connect.session import SparkSession

        return SparkSession.builder.remote(self.url).create()

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
                       settings: dict[str, str] | None = None) -> LocalConnectServer:
    """Start a Spark Connect server on loopback, on a free port, its warehouse and embedded Derby metastore in
    ``home`` (one server per home: embedded Derby admits one process). Waits until it accepts connections."""
    import pyspark

    from .spark import SETTINGS, derby_settings, local_settings

    home = Path(home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    conf = {"spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": str(port),
            "spark.sql.catalogImplementation": "hive", **local_settings(home), **derby_settings(home),
            **SETTINGS, **(settings or {})}
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
