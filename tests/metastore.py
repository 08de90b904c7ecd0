"""A PostgreSQL server of the tests' own, for a shared Hive metastore: started in a temporary folder on a free
loopback port, with the metastore's schema created whole (``seqdedup.extensions.spark.metastore``), and stopped after.

No system service: ``initdb`` and ``pg_ctl`` from Debian's ``postgresql`` package (``./dev`` installs it), run as
the unprivileged ``postgres`` user when the tests run as root (the server refuses to run as root).

    with PostgresServer() as server:
        url = server.metastore()      # a JDBC URL for local_session(home, metastore=url)
"""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def _binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError("PostgreSQL's server is not installed: ./dev installs Debian's postgresql package")
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PostgresServer:
    def __init__(self):
        # its own folder under the system's temporary one: the postgres user cannot enter pytest's (mode 700)
        self.folder = Path(tempfile.mkdtemp(prefix="seqdedup-postgres-"))
        self.port = _free_port()
        self.bin = _binaries()
        self.user = "postgres" if os.geteuid() == 0 else None     # whom the server runs as (not root)

    def _run(self, *command: str) -> str:
        if self.user:
            command = ("runuser", "-u", self.user, "--", *command)
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode:
            raise RuntimeError(f"{' '.join(command)} failed: {done.stdout[-2000:]} {done.stderr[-2000:]}")
        return done.stdout

    def __enter__(self) -> "PostgresServer":
        if self.user:
            entry = pwd.getpwnam(self.user)
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
        data = self.folder / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync")
        self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-w", "-l", str(self.folder / "server.log"), "-o",
                  f"-h 127.0.0.1 -p {self.port} -k {self.folder} -c fsync=off", "start")
        return self

    def database(self, name: str) -> str:
        """A new database; its JDBC URL."""
        self._run(str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{name}?user=postgres"

    def metastore(self, name: str = "metastore") -> str:
        """A new database with a Hive metastore's schema; its JDBC URL."""
        from seqdedup.extensions.spark.metastore import create_schema

        url = self.database(name)
        create_schema(url)
        return url

    def __exit__(self, *exc) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)
