"""Scenario 5: `df.write.format("committed")` against `write_committed`, same DataFrame, same committer.

The Spark-native route (the Python data source `committed`, `airflow_commit_provider.spark.datasource`:
Spark's DataSource V2 write path runs `writer()` and `commit()` in Python workers of the driver and
`write(batches)` in each task) against `write_committed` (a `mapInArrow` whose tasks write and commit,
job commit on the driver). Both run the same commit protocol with the same committer - `manifest` on
`file://`, `magic` on S3 (embedded SeaweedFS) - and format (parquet, snappy), from the same cached
DataFrame (materialised before the warm-up, so neither route pays for generating the rows).
Target: the data source within 1.05x of `write_committed`. Both routes run with Spark's per-row
Arrow batch measurement off in the session (`common.ARROW_BYTE_CHECK_OFF`, what
`register_data_source(spark, unmeasured_arrow_batches=True)` sets): the data source's rule and
`write_committed` both keep a setting the session makes, so both move rows from the JVM the same way
and this compares the routes (`arrow_batches` compares each route's defaults).

Two layouts per store:

- unpartitioned, `append`;
- partitioned by a string column `dt` with 8 values spread over every Spark partition, `append`.
  `write_committed` sorts each Spark partition by the partition values itself; the data source
  cannot ask Spark to (Python data sources do not implement `RequiresDistributionAndOrdering`), so
  its input is `df.sortWithinPartitions("dt")`, as the README advises: both routes then do the same
  Spark sort and write one file per partition directory per task.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from airflow_commit_provider.core.store import open_store
from airflow_commit_provider.spark import register_data_source
from airflow_commit_provider.spark.session_conf import applied_conf
from airflow_commit_provider.spark.writer import write_committed
from airflow_commit_provider.success.check import load_success
from bench import spark_tasks
from bench.common import ARROW_BYTE_CHECK_OFF, BenchEnv, ScenarioResult, log, new_id, rotated, timer

TARGET_RATIO = 1.05
CODEC = "snappy"
#: The committer of each store, for both routes (the defaults of `write_committed` in `append`).
COMMITTERS = {"file": "manifest", "s3": "magic"}
PARTITION_COLUMN = "dt"
PARTITION_VALUES = 8
LAYOUTS = ("unpartitioned", "partitioned")
ROUTES = ("write_committed", "datasource")


def run(env: BenchEnv) -> ScenarioResult:
    target_bytes = env.pick(tiny=1024**2, small=256 * 1024**2, full=1024**3)
    partitions = env.pick(tiny=2, small=4, full=8)
    result = ScenarioResult(
        "datasource",
        "df.write.format('committed') against write_committed (file:// and embedded S3)",
        env.size,
        env.repeat,
        parameters={
            "target_bytes": target_bytes,
            "spark_partitions": partitions,
            "format": f"parquet ({CODEC})",
            "committers": COMMITTERS,
            "partitioned_by": f"{PARTITION_COLUMN} (string, {PARTITION_VALUES} values in every Spark partition)",
            "ours": "df.write.format('committed').mode(...).options(...).save(path)",
            "baseline": "write_committed(df, path, ...)",
            "threads": env.threads,
        },
    )
    result.notes.append(
        "Both routes read the same cached DataFrame. For the partitioned layout the data source's input is "
        f"`df.sortWithinPartitions('{PARTITION_COLUMN}')` (Spark cannot be asked to sort a Python data "
        "source's input; write_committed sorts each partition the same way itself)."
    )
    spark = env.spark
    register_data_source(spark)
    df = with_partition_column(spark_tasks.make_frame(spark, target_bytes, partitions)).cache()
    rows = df.count()  # materialise the cache: neither route pays for generating the rows
    result.parameters["rows"] = rows
    stores = ["file", "s3"]
    local_root = env.work_dir / "datasource-writes"
    local_root.mkdir(exist_ok=True)

    def destination(store: str, bucket: str | None, name: str) -> tuple[str, Path | None]:
        """The write's URL, and its local directory (None on S3)."""
        if store == "file":
            path = local_root / new_id(name)
            return f"file://{path}", path
        return f"s3://{bucket}/{new_id(name)}", None

    def write(store: str, layout: str, route: str, frame: Any, bucket: str | None) -> tuple[float, Any]:
        """One write: seconds, and the `_SUCCESS` of the output (files, bytes, rows)."""
        url, local_path = destination(store, bucket, f"{layout[:5]}-{route[:6]}")
        options: dict[str, Any] = {"compression": CODEC, "threads": env.threads}
        if store == "s3":
            options.update(env.s3_options())
        partitioned = layout == "partitioned"
        with applied_conf(env.spark, ARROW_BYTE_CHECK_OFF), timer() as elapsed:
            if route == "write_committed":
                write_committed(
                    frame,
                    url,
                    format="parquet",
                    partition_by=[PARTITION_COLUMN] if partitioned else [],
                    committer=COMMITTERS[store],
                    options=options,
                )
            else:
                source = frame.sortWithinPartitions(PARTITION_COLUMN) if partitioned else frame
                writer = (
                    source.write.format("committed")
                    .mode("append")
                    .option("format", "parquet")
                    .option("committer", COMMITTERS[store])
                    .options(**{key: str(value) for key, value in options.items()})
                )
                if partitioned:
                    writer = writer.option("partition_by", PARTITION_COLUMN)
                writer.save(url)
        seconds = elapsed()
        success = _success_of(env, store, url)
        if local_path is not None:
            shutil.rmtree(local_path, ignore_errors=True)
        return seconds, success

    pairs = [(store, layout) for store in stores for layout in LAYOUTS]
    if env.size != "tiny":  # the smoke test only checks that the scenario runs
        # Warm-up (not measured): Python workers, imports, both routes' first connections.
        bucket = env.new_bucket("ds-warmup")
        try:
            small = with_partition_column(spark_tasks.make_frame(spark, 256 * 1024, partitions)).cache()
            small.count()
            for store, layout in pairs:
                for route in ROUTES:
                    write(store, layout, route, small, bucket)
            small.unpersist()
        finally:
            env.drop_bucket(bucket)

    try:
        for rep in range(env.repeat):
            bucket = env.new_bucket("ds")
            try:
                # Rotate the pairs, and alternate which route of a pair goes first.
                order = rotated(pairs, rep)
                routes = ROUTES if rep % 2 == 0 else ROUTES[::-1]
                for store, layout in order:
                    seconds: dict[str, float] = {}
                    for route in routes:
                        seconds[route], success = write(store, layout, route, df, bucket)
                        label = f"{store}, {layout}, {route}"
                        result.measure(f"total seconds, {label}", seconds[route])
                        result.measure(f"files, {label}", success.file_count or 0, "files")
                        if success.rows != rows:
                            raise AssertionError(f"{label}: wrote {success.rows} rows of {rows}")
                        log(
                            f"datasource: {label}: {(success.total_bytes or 0) / 1e6:.0f} MB, "
                            f"{success.file_count} files in {seconds[route]:.2f} s"
                        )
                    result.comparison(
                        f"{store}: {layout} ({COMMITTERS[store]})",
                        ours_label="df.write.format('committed')",
                        baseline_label="write_committed",
                        unit="s",
                        target=TARGET_RATIO,
                        group="datasource",
                    ).add(seconds["datasource"], seconds["write_committed"])
            finally:
                env.drop_bucket(bucket)
    finally:
        df.unpersist()
    return result


def with_partition_column(df: Any) -> Any:
    """`df` with a string column `dt` taking PARTITION_VALUES dates, cycling with `id` (so every
    Spark partition holds every value, unsorted)."""
    from pyspark.sql import functions as F

    day = (F.col("id") % PARTITION_VALUES + 1).cast("string")
    return df.withColumn(PARTITION_COLUMN, F.concat(F.lit("2024-01-0"), day))


def _success_of(env: BenchEnv, store: str, url: str) -> Any:
    if store == "s3":
        with env.s3.store().session() as s3:
            return load_success(s3, url)
    local = open_store(url)
    try:
        return load_success(local, url)
    finally:
        local.close()
