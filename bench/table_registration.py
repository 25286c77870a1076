"""Scenario: what registering a committed write's partitions in the Hive metastore costs, per
partition, against Spark's own two ways of telling a metastore about partitions already on disk.

For 1, 10 and 100 partitions (``small``; ``tiny`` runs 1 and 3; ``full`` 10, 100, 1,000 and
10,000), each repetition makes a fresh external table ``PARTITIONED BY (dt STRING) STORED AS
PARQUET`` per method over a folder that already holds that many ``dt=...`` directories (one small
file each), then registers them all with:

- ours: ``SparkCatalog.register_partitions``, what ``write_committed(table=...)`` calls after the
  commit point (``SHOW PARTITIONS``, one ``ALTER TABLE .. ADD IF NOT EXISTS`` per
  ``REGISTRATION_BATCH`` partitions, and a ``DESCRIBE`` of each partition that existed before, none
  here: every partition is new); then ours again on the same table (its own rows, no baseline),
  where every partition exists and gets its ``DESCRIBE``;
- ``MSCK REPAIR TABLE``: Spark lists the table's folder and adds what it finds, in batches;
- a loop of ``ALTER TABLE .. ADD PARTITION .. LOCATION``, one statement per partition.

Measured per partition: wall time, and the Hive client calls Spark made (``HiveCatalogMetrics
.METRIC_HIVE_CLIENT_CALLS``: each is one request to a remote metastore's Thrift service, or one
metastore operation on the embedded one the run uses), and the SQL statements issued. The metastore
is the session's (the bench's own session has an embedded Derby one under its work directory); its
database's speed is the same for the three methods, so the ratios carry over, the seconds less so.

Then the Thrift route (``bench.thrift_registration``): ``HiveMetastoreCatalog.register_partitions``,
what the committed data source registers with, on Hive's Thrift metastore kept in PostgreSQL, for
the same partition counts, in rows of its own (that module says why without a baseline).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_commit_provider.core.catalog import Partition
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.spark.catalog import SparkCatalog
from bench import thrift_registration
from bench.common import BenchEnv, ScenarioResult, log, rotated, spark_jvm, timer

DATABASE = "bench_tables"
METHODS = ("ours", "MSCK REPAIR TABLE", "ALTER TABLE ADD PARTITION loop")


def run(env: BenchEnv) -> ScenarioResult:
    counts = env.pick(tiny=[1, 3], small=[1, 10, 100], full=[10, 100, 1000, 10000])
    result = ScenarioResult(
        "table_registration",
        "Registering partitions in the Hive metastore",
        env.size,
        env.repeat,
        parameters={
            "partitions": counts,
            "ours": "SparkCatalog.register_partitions (write_committed(table=...) after the commit point)",
            "baselines": list(METHODS[1:]),
            "metastore": "the session's Hive catalog (the bench's own: embedded Derby)",
        },
    )
    spark = env.spark
    if spark.conf.get("spark.sql.catalogImplementation") != "hive":
        raise RuntimeError("table_registration needs a session with Hive support (bench.common.start_spark)")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    root = env.work_dir / "tables"
    for count in counts:
        for turn in range(env.repeat):
            measured = {
                method: _register(result, spark, root, method, count) for method in rotated(METHODS, turn)
            }
            _record(result, count, measured)
    thrift_registration.measure(env, result, counts)
    return result


def _record(result: ScenarioResult, count: int, measured: dict[str, tuple[float, int, int]]) -> None:
    ours = measured["ours"]
    for method in METHODS[1:]:
        for index, (what, unit, group) in enumerate(
            (("seconds", "s", "time"), ("metastore calls", "calls", "requests"))
        ):
            result.comparison(
                f"{what} per partition, {count} partitions, against {method}",
                ours_label="ours",
                baseline_label=method,
                unit=unit,
                group=group,
            ).add(ours[index] / count, measured[method][index] / count)
    for method, (seconds, calls, statements) in measured.items():
        result.measure(f"{method}: seconds per partition, {count} partitions", seconds / count)
        result.measure(f"{method}: metastore calls per partition, {count} partitions", calls / count, "calls")
        result.measure(f"{method}: SQL statements, {count} partitions", statements, "statements")
    log(
        f"{count} partitions: "
        + "; ".join(f"{m} {s:.3f} s, {c} calls, {n} statements" for m, (s, c, n) in measured.items())
    )


def _register(
    result: ScenarioResult, spark: Any, root: Path, method: str, count: int
) -> tuple[float, int, int]:
    """A fresh table over `count` partition folders, registered by `method`: seconds, Hive client
    calls, SQL statements. Fails unless the metastore then lists every partition at its folder."""
    table = f"{DATABASE}.events_{uuid.uuid4().hex[:12]}"
    location = root / table
    days = [f"2024-01-01-{index:04d}" for index in range(count)]
    for day in days:
        folder = location / f"dt={day}"
        folder.mkdir(parents=True)
        (folder / "part-00000.parquet").write_bytes(b"PAR1")
    spark.sql(
        f"CREATE TABLE {table} (id BIGINT) PARTITIONED BY (dt STRING) STORED AS PARQUET "
        f"LOCATION '{location.as_uri()}'"
    )
    try:
        registration = _method(spark, table, StorePath.parse(location.as_uri()), days, method)
        calls = _hive_client_calls(spark)
        with timer() as elapsed:
            statements = registration()
        seconds, calls = elapsed(), _hive_client_calls(spark) - calls
        listed = {row[0] for row in spark.sql(f"SHOW PARTITIONS {table}").collect()}
        if listed != {f"dt={day}" for day in days}:
            raise RuntimeError(f"{method} registered {len(listed)} of {count} partitions of {table}")
        if method == "ours":
            _again(result, registration, spark, count)
        return seconds, calls, statements
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {table}")


def _again(result: ScenarioResult, registration: Callable[[], int], spark: Any, count: int) -> None:
    """Ours once more on the registered table: every partition exists, so each gets a DESCRIBE."""
    calls = _hive_client_calls(spark)
    with timer() as elapsed:
        statements = registration()
    seconds, calls = elapsed(), _hive_client_calls(spark) - calls
    result.measure(f"ours again: seconds per partition, {count} partitions", seconds / count)
    result.measure(f"ours again: metastore calls per partition, {count} partitions", calls / count, "calls")
    result.measure(f"ours again: SQL statements, {count} partitions", statements, "statements")
    log(f"{count} partitions: ours again {seconds:.3f} s, {calls} calls, {statements} statements")


def _method(spark: Any, table: str, location: StorePath, days: list[str], method: str) -> Callable[[], int]:
    """The registration to time; it returns how many SQL statements it issued."""
    if method == "ours":
        session = _CountingSession(spark)
        catalog = SparkCatalog(session)
        partitions = [Partition((("dt", day),), location.join(f"dt={day}")) for day in days]

        def ours() -> int:
            session.statements = 0
            catalog.register_partitions(table, partitions)
            return session.statements

        return ours
    if method == "MSCK REPAIR TABLE":

        def repair() -> int:
            spark.sql(f"MSCK REPAIR TABLE {table}")
            return 1

        return repair

    def loop() -> int:
        for day in days:
            spark.sql(
                f"ALTER TABLE {table} ADD PARTITION (dt = '{day}') LOCATION '{location.join(f'dt={day}')}'"
            )
        return len(days)

    return loop


class _CountingSession:
    """The session, counting the SQL statements run through it (its catalog API calls are counted
    by the Hive client metric, not here)."""

    def __init__(self, spark: Any) -> None:
        self._spark = spark
        self.statements = 0

    def sql(self, statement: str) -> Any:
        self.statements += 1
        return self._spark.sql(statement)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spark, name)


def _hive_client_calls(spark: Any) -> int:
    """Spark's count of calls into its Hive client, since the JVM started."""
    metrics = spark_jvm(spark).org.apache.spark.metrics.source.HiveCatalogMetrics
    return int(metrics.METRIC_HIVE_CLIENT_CALLS().getCount())
