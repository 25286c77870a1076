"""Throughput of ``write_committed`` vs Spark's own ``df.write.parquet`` on file://.

Same DataFrame (cached, so every variant reads the same in-memory rows), same session, variants
interleaved per repetition after one unmeasured warm-up each; reports the median of N repetitions
as rows/s and MB/s (MB = 10^6 bytes of Parquet written). Meant to move into ``bench/`` later.

    .venv/bin/python scripts/measure_spark_writer.py --rows 3000000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _session(cores: int) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("measure-spark-writer")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.memory", "3g")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _dataframe(spark: Any, rows: int, partitions: int) -> Any:
    df = spark.range(rows, numPartitions=partitions).selectExpr(
        "id",
        "concat('customer-', CAST(id % 100000 AS STRING)) AS name",
        "CAST(id AS DOUBLE) * 0.37 AS amount",
        "CAST(id % 100 AS INT) AS category",
        "TIMESTAMP'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id % 86400) AS ts",
        "id % 3 = 0 AS flag",
    )
    df = df.cache()
    df.count()
    return df


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--partitions", type=int, default=4, help="Spark partitions = write tasks")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work-dir", default=None)
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args(argv)

    from airflow_commit_provider.spark import write_committed

    spark = _session(args.cores)
    df = _dataframe(spark, args.rows, args.partitions)
    work = Path(tempfile.mkdtemp(prefix="measure-spark-writer-", dir=args.work_dir))

    def ours(committer: str) -> Any:
        def run(dest: Path) -> int:
            summary = write_committed(df, str(dest), format="parquet", committer=committer)
            assert summary.rows == args.rows, summary
            return summary.bytes

        return run

    def spark_parquet(dest: Path) -> int:
        df.write.parquet(dest.as_uri())
        return _size(dest)

    variants = {
        "write_committed(manifest)": ours("manifest"),
        "write_committed(magic)": ours("magic"),
        "spark df.write.parquet": spark_parquet,
    }
    timings: dict[str, list[float]] = {name: [] for name in variants}
    sizes: dict[str, int] = {}
    try:
        for repetition in range(args.repeat + 1):  # repetition 0 is the warm-up
            for name, run in variants.items():
                dest = work / f"{repetition}-{len(sizes)}-{abs(hash(name))}"
                started = time.perf_counter()
                written = run(dest)
                elapsed = time.perf_counter() - started
                shutil.rmtree(dest, ignore_errors=True)
                if repetition:
                    timings[name].append(elapsed)
                    sizes[name] = written
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()

    results = []
    for name, values in timings.items():
        median = statistics.median(values)
        results.append(
            {
                "variant": name,
                "rows": args.rows,
                "bytes": sizes[name],
                "median_seconds": round(median, 3),
                "runs_seconds": [round(v, 3) for v in values],
                "rows_per_second": round(args.rows / median),
                "mb_per_second": round(sizes[name] / median / 1e6, 2),
            }
        )
    print(f"{'variant':28} {'median s':>9} {'rows/s':>12} {'MB/s':>8} {'MB':>8}  runs")
    for row in results:
        print(
            f"{row['variant']:28} {row['median_seconds']:9.2f} {row['rows_per_second']:12,d} "
            f"{row['mb_per_second']:8.2f} {row['bytes'] / 1e6:8.1f}  {row['runs_seconds']}"
        )
    print(f"load average at end: {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
