"""The PySpark application of ``daily_events_report``'s table mode: one day of the catalog table.

    spark-submit daily_report_job.py --table db.events --day 2024-01-01 --out report.json

Reads the day as any SQL user of the table would, ``SELECT .. FROM <table> WHERE dt = <day>``: the
catalog (the Hive metastore the submitter's conf names) lists the day's partition and its location,
and Spark prunes every other partition. Writes ``{"day", "rows", "files"}`` to ``--out``
(the submitting task's own file: spark-submit has no return value).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", required=True, help="the catalog table, db.events")
    parser.add_argument("--day", required=True, help="the dt partition reported, YYYY-MM-DD")
    parser.add_argument("--out", required=True, type=Path, help="where the report's JSON goes")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName(f"daily-report-{args.day}").getOrCreate()
    [day] = spark.sql(
        # The file of each row is taken in the scan: Spark aggregates no nondeterministic expression.
        "SELECT count(*) AS rows, count(DISTINCT file) AS files FROM "
        f"(SELECT input_file_name() AS file FROM {args.table} WHERE dt = :day)",
        args={"day": args.day},
    ).collect()
    args.out.write_text(json.dumps({"day": args.day, "rows": day["rows"], "files": day["files"]}))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
