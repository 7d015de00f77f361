"""The one SparkSession a process shares between all its pipeline runs.

Starting Spark costs seconds (a JVM, then its JIT warming up); every run after that costs a
fraction of one. So the CLI, the bot's executor and the tests all go through
`shared_session()`. Spark's logging goes to stderr only, at WARN, without the start-up chatter.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

from pyspark.sql import SparkSession

_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
"""

_lock = threading.Lock()
_session: SparkSession | None = None


def _log_config() -> Path:
    path = Path(tempfile.gettempdir()) / "food_delivery-log4j2.properties"
    if not path.is_file() or path.read_text() != _LOG4J2:
        # Written whole and renamed: concurrent processes never see a half-written file.
        partial = path.with_name(f"{path.name}.{os.getpid()}")
        partial.write_text(_LOG4J2)
        partial.replace(path)
    return path


def _alive(session: SparkSession) -> bool:
    return session.sparkContext._jsc is not None  # stop() clears it


def shared_session(master: str | None = None) -> SparkSession:
    """The process-wide SparkSession, started on first use (and again after a `stop()`).

    `master` defaults to $SPARK_MASTER, else `local[*]`; it only matters when the session
    starts, as does $FOOD_DELIVERY_JAVA_OPTIONS (extra driver JVM options). Session time zone
    UTC, dynamic partition overwrite, 4 shuffle partitions, no UI. On a cluster
    (`spark://HOST:PORT`) the executors run on its workers: they need none of the pipeline's
    code, only PySpark's own Python worker (it turns the generated rows into Spark rows), so a
    Python of the driver's minor version ($PYSPARK_PYTHON, else `python3` on the workers).
    """
    global _session
    with _lock:
        if _session is not None and _alive(_session):
            return _session
        master = master or os.environ.get("SPARK_MASTER") or "local[*]"
        builder = (
            SparkSession.builder.master(master)
            .appName("food_delivery")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config(
                "spark.driver.extraJavaOptions",
                f"-Dlog4j2.configurationFile=file:{_log_config()} -Duser.timezone=UTC "
                + os.environ.get("FOOD_DELIVERY_JAVA_OPTIONS", ""),
            )
        )
        if master.startswith("local"):
            # No DNS look-up of the host name: a local session only talks to itself.
            builder = builder.config("spark.driver.host", "127.0.0.1").config(
                "spark.driver.bindAddress", "127.0.0.1"
            )
        else:
            # A cluster's executors are JVMs of their own, maybe on hosts in another time zone:
            # they get the driver's UTC too. Which address the executors reach the driver at is
            # Spark's own SPARK_LOCAL_IP (or spark.driver.host), as for any PySpark driver.
            builder = builder.config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("WARN")
        _session = session
        return session


def stop_shared_session() -> None:
    """Stop the process-wide session if one was started (the next use starts a new one)."""
    global _session
    with _lock:
        if _session is not None and _alive(_session):
            _session.stop()
        _session = None
