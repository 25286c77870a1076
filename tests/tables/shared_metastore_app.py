"""One of the two Spark applications of test_shared_metastore.py, sharing a Hive metastore kept in
PostgreSQL (``devtools.hive_metastore``): the writer (A) or the reader (B).

    python shared_metastore_app.py SPEC.json ROLE

SPEC (JSON): ``markers`` (a directory), ``password_conf`` (the folder of the ``hive-site.xml`` that
holds the database's password), ``metastore`` (``jdbc_url``, ``user``, ``warehouse``), ``s3``
(``endpoint``, ``region``; the credentials come from the ``AWS_*`` environment, for S3A and ours
alike), ``rows`` (of each day) and ``cases``: each a ``name``, a ``table``, its ``location`` (``file://``
or ``s3a://``), the ``days`` written (the first in full, the second through the gate) and its
``gate`` (the SQL expression of a ``support.task_gate.TaskGate`` that the test holds, over ``id``).

- **writer**: per case, creates the partitioned table and replaces a first day in it with
  ``write_committed(table=...)``, then a second with the rows of its last task waiting on the gate:
  once the first task has committed and the last waits, it writes ``held-<case>`` and, when the
  write has committed and registered its partition, ``written-<case>``.
- **reader**: per case and per phase (``held``, ``written``), waits for ``look-<case>-<phase>``,
  reads the table as any reader would (after ``REFRESH TABLE``) and the metastore's partitions with
  their locations, and writes them to ``seen-<case>-<phase>.json``.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

# support.* and the side-by-side helpers live in tests/; this runs from its own folder.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from side_by_side_support import stage_progress
from support.markers import wait_for, write_marker
from support.spark_apps import LOCAL_APP_CONF
from support.waiting import wait_until

#: Upper bound of every wait here (the test releases the gate or kills this process long before).
WAIT_BOUND_SECONDS = 300.0
PHASES = ("held", "written")


def session(spec: dict[str, Any], role: str) -> Any:
    from pyspark.sql import SparkSession

    from airflow_commit_provider.core.store.settings import S3Settings
    from airflow_commit_provider.devtools.hadoop_jars import peer_jars, peer_spark_conf
    from airflow_commit_provider.devtools.hive_metastore import metastore_classpath, shared_metastore_conf
    from airflow_commit_provider.spark.jvm_committers import s3a_store_conf

    metastore = spec["metastore"]
    classpath = [*metastore_classpath(Path(spec["password_conf"])), *peer_jars()]
    local = Path(spec["markers"]) / f"local-{role}"
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(f"shared-metastore-{role}")
        .config(map=peer_spark_conf(classpath, local))
        .config(map=shared_metastore_conf(metastore["jdbc_url"], metastore["user"], metastore["warehouse"]))
        .config(
            map=s3a_store_conf(
                S3Settings(endpoint_url=spec["s3"]["endpoint"], region_name=spec["s3"]["region"])
            )
        )
        .config(map=LOCAL_APP_CONF)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def day_rows(spark: Any, day: str, count: int, payload: str = "''") -> Any:
    """`count` rows of `day` in two tasks; `payload` is a SQL expression over ``id``."""
    return spark.range(count, numPartitions=2).selectExpr(
        "id", f"concat('row-', id, {payload}) AS payload", f"'{day}' AS dt"
    )


def create_table(spark: Any, case: dict[str, Any]) -> None:
    database = case["table"].split(".")[0]
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
    spark.sql(
        f"CREATE TABLE {case['table']} (id BIGINT, payload STRING) PARTITIONED BY (dt STRING) "
        f"STORED AS PARQUET LOCATION '{case['location']}'"
    )


def write_day(spark: Any, spec: dict[str, Any], case: dict[str, Any], frame: Any) -> None:
    """Replace the frame's day in the table: committed, then its partition registered."""
    from airflow_commit_provider.spark import write_committed

    s3 = {"s3.endpoint_url": spec["s3"]["endpoint"], "s3.region": spec["s3"]["region"]}
    options = s3 if case["location"].startswith("s3a://") else {}
    write_committed(frame, table=case["table"], conflict_mode="replace", options=options)


def in_job_group(spark: Any, group: str, write: Any) -> tuple[threading.Thread, list[BaseException]]:
    """Run `write()` in a thread whose Spark jobs are in `group`; the errors it raised, if any."""
    errors: list[BaseException] = []

    def run() -> None:
        spark.sparkContext.setJobGroup(group, group)
        try:
            write()
        except BaseException as error:  # the caller reports it
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def writer(spark: Any, spec: dict[str, Any]) -> None:
    markers = Path(spec["markers"])
    for case in spec["cases"]:
        first, second = case["days"]
        create_table(spark, case)
        write_day(spark, spec, case, day_rows(spark, first, spec["rows"]))
        group = f"held-{case['name']}"
        held = day_rows(spark, second, spec["rows"], case["gate"])
        thread, errors = in_job_group(spark, group, lambda c=case, h=held: write_day(spark, spec, c, h))
        wait_until(
            lambda g=group, t=thread: stage_progress(spark, g) == (1, 1) or not t.is_alive(),
            f"case {case['name']}: the first task committed and the last one waiting",
            WAIT_BOUND_SECONDS,
        )
        if not thread.is_alive():
            raise SystemExit(f"case {case['name']}: the held write ended before the test let it: {errors}")
        write_marker(markers / f"held-{case['name']}", {})
        thread.join(WAIT_BOUND_SECONDS)
        if thread.is_alive() or errors:
            raise SystemExit(f"case {case['name']}: the held write did not end well: {errors}")
        write_marker(markers / f"written-{case['name']}", {})


def partition_locations(spark: Any, table: str) -> dict[str, str]:
    """The metastore's partitions of `table` (``dt=<day>``) and the location of each."""
    locations = {}
    for row in spark.sql(f"SHOW PARTITIONS {table}").collect():
        spec = row[0]
        day = spec.split("=", 1)[1]
        described = spark.sql(f"DESCRIBE FORMATTED {table} PARTITION (dt = '{day}')").collect()
        locations[spec] = next(r["data_type"] for r in described if r["col_name"] == "Location")
    return locations


def reader(spark: Any, spec: dict[str, Any]) -> None:
    markers = Path(spec["markers"])
    for case in spec["cases"]:
        for phase in PHASES:
            if not wait_for(markers / f"look-{case['name']}-{phase}", WAIT_BOUND_SECONDS):
                raise SystemExit(f"never told to look at case {case['name']} {phase}")
            spark.sql(f"REFRESH TABLE {case['table']}")
            counted = spark.sql(f"SELECT dt, count(*) AS n FROM {case['table']} GROUP BY dt").collect()
            pruned = {
                day: spark.sql(f"SELECT count(*) FROM {case['table']} WHERE dt = '{day}'").collect()[0][0]
                for day in case["days"]
            }
            seen = {
                "rows": {row["dt"]: row["n"] for row in counted},
                "pruned": pruned,
                "partitions": partition_locations(spark, case["table"]),
            }
            write_marker(markers / f"seen-{case['name']}-{phase}.json", seen)


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[1]).read_text())
    role = argv[2]
    spark = session(spec, role)
    {"writer": writer, "reader": reader}[role](spark, spec)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv)
