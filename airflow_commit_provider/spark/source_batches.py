"""The Arrow batches of ``df.write.format("committed")``, bounded by bytes in the JVM, so that the
data source sends its rows to Python as fast as ``write_committed`` does, by default.

Spark measures every Arrow batch it sends to Python after each row it adds (``arrow_batches`` says
where and what it costs), and a Python data source cannot turn that off for its own writes: its
``writer()`` runs in a planner process with no session. ``BoundedArrowBatches``
(``jvm/BoundedArrowBatches.java``, built into `JAR` by ``scripts/build_jvm.sh`` and shipped in the
wheel) is a Spark optimizer rule that wraps the data source's write and, in each of its tasks,
turns the measurement off for that task's Python runner and ends each batch itself once its rows'
``UnsafeRow`` bytes reach `ROW_BYTES_PER_BATCH`: known without work per row, and never less than
half the rows' Arrow bytes, so batches stay within Spark's 64 MiB however wide the rows (1 MB rows:
32 per batch). The row limit stays the session's (``maxRecordsPerBatch``).

`bound_source_batches` installs the rule in a classic session (``register_data_source`` calls it),
and says so in the log: the session's other queries and writes are unchanged, and a
``maxBytesPerBatch`` the session or the calling thread sets is kept, measured as asked. A Spark
Connect client cannot install it; the server can, for all its sessions, with `server_conf`
(``BoundedArrowBatchesExtension``), and its clients' writes then run as a classic session's.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from airflow_commit_provider.spark import config as cfg
from airflow_commit_provider.spark.arrow_batches import BATCH_BYTES

log = logging.getLogger("airflow_commit_provider.spark")

#: The jar ``scripts/build_jvm.sh`` builds from the Java source beside it (not in git; in the wheel).
JAR = Path(__file__).with_name("jvm") / "airflow-commit-spark.jar"
RULE_CLASS = "airflowcommit.spark.BoundedArrowBatches"
#: The class for ``spark.sql.extensions`` (it installs `RULE_CLASS` in each session of the application).
EXTENSION_CLASS = "airflowcommit.spark.BoundedArrowBatchesExtension"
#: UnsafeRow bytes per batch: half of `BATCH_BYTES`, as an UnsafeRow is at least half its Arrow size.
ROW_BYTES_PER_BATCH = BATCH_BYTES // 2


def server_conf() -> dict[str, str]:
    """Spark conf for a server whose clients cannot install the rule (a Spark Connect server):
    every session of the application gets it, for the ``committed`` source (the extension's
    constants, which the Connect test checks against `ROW_BYTES_PER_BATCH` and the source name)."""
    return {"spark.sql.extensions": EXTENSION_CLASS, "spark.jars": str(JAR)}


def bound_source_batches(spark: Any, source_name: str) -> None:
    """Install ``BoundedArrowBatches`` for the data source `source_name` in `spark` (replacing one
    installed before); where it cannot be (Spark Connect, or the jar not built) the reason is logged
    and the source's batches stay measured by Spark."""
    session = getattr(spark, "_jsparkSession", None)
    if session is None:
        log.info(
            "df.write.format(%r) on Spark Connect: its Arrow batches are bounded without Spark's per-row "
            "measurement only if the server's spark.sql.extensions names %s (source_batches.server_conf)",
            source_name,
            EXTENSION_CLASS,
        )
        return
    if not JAR.is_file():
        log.info(
            "df.write.format(%r): Spark measures its Arrow batches (%s is not built: scripts/build_jvm.sh)",
            source_name,
            JAR,
        )
        return
    rule = _rule_class(spark, session)
    install = next(method for method in rule.getMethods() if method.getName() == "install")
    gateway = spark.sparkContext._gateway
    arguments = gateway.new_array(gateway.jvm.java.lang.Object, 3)
    arguments[0] = session
    arguments[1] = source_name
    arguments[2] = ROW_BYTES_PER_BATCH
    install.invoke(None, arguments)
    log.info(
        "df.write.format(%r) in this session: Arrow batches of at most %d MiB of rows, cut in the JVM "
        "without Spark's per-row measurement (%s added to the session's optimizer rules and, if it was "
        "not there, %s to its jars); other queries and writes are unchanged, and a %s the session sets "
        "is kept",
        source_name,
        BATCH_BYTES // 1024**2,
        RULE_CLASS,
        JAR.name,
        cfg.ARROW_MAX_BYTES_PER_BATCH,
    )


def _rule_class(spark: Any, session: Any) -> Any:
    """The rule's class, from the session's jar class loader, the jar added first if it is not on
    the class path (``ADD JAR``: the driver loads it, and the executors fetch it for their tasks)."""
    loader = session.sharedState().jarClassLoader()
    forname = spark.sparkContext._jvm.java.lang.Class.forName
    try:
        return forname(RULE_CLASS, True, loader)
    except Exception:  # py4j's Py4JJavaError: ClassNotFoundException
        spark.sql(f"ADD JAR '{JAR}'")
        return forname(RULE_CLASS, True, loader)
