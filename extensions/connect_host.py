"""The driver of a local Spark Connect server (``connect_server.start_local_server``), run by ``spark-submit``: a
Spark application that loads Spark Connect as a plugin and waits for SIGTERM or SIGINT.

pyspark's own server class (``SparkConnectServer``) turns on, whatever the settings say, the class loader of each
session's artifacts for every query (``spark.sql.artifact.isolation.alwaysApplyClassloader``). Spark's cache of
generated code is kept per class loader (SPARK-44795), so every new session compiles every query's code again; and
each command of the command line is a new session. Here that setting is the server's: off, a session that adds no
artifact (seqdedup adds none) runs on the application's class loader, and shares the code compiled for the
sessions before it.
"""
from __future__ import annotations

import contextlib
import signal


def main() -> None:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()      # the settings come from spark-submit (start_local_server)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    with contextlib.suppress(Exception):            # (the JVM may be going already: it gets the signal too)
        spark.stop()


if __name__ == "__main__":
    main()
