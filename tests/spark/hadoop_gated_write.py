"""A Spark application whose writes, through Hadoop's committers, stop half-way until released.

``spark-submit hadoop_gated_write.py HOST:PORT URL=JOB_ID [URL=JOB_ID ...]`` writes 20 rows to each
URL, all at once, with Spark's own ``df.write.partitionBy("p").parquet`` (the committer comes from
the session's conf), the job ID as ``fs.s3a.committer.uuid``. Each write has two tasks: the first
writes and commits its files; the second connects to the gate at HOST:PORT and waits there for one
byte before it produces a row. So the job stays between task commit and job commit for as long as
the test wants: it can be killed there, or released to commit.

`gated_frame` is also used in-process, by the test's own Spark session.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

ROWS = 20


def gated_frame(spark: Any, gate: str) -> Any:
    """20 rows in two tasks (ids 0-9, 10-19); the second task waits at `gate` before its first row."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    host, port = gate.rsplit(":", 1)

    def wait_at_gate(value: int) -> int:
        if value == ROWS // 2:
            import socket

            with socket.create_connection((host, int(port))) as connection:
                connection.recv(1)  # blocks until the test releases the gate (or closes it)
        return value

    gated = F.udf(wait_at_gate, LongType())
    return spark.range(0, ROWS, numPartitions=2).select(gated("id").alias("id"), (F.col("id") % 2).alias("p"))


def main(argv: list[str]) -> None:
    from pyspark.sql import SparkSession

    gate, writes = argv[0], [arg.split("=", 1) for arg in argv[1:]]
    spark = SparkSession.builder.getOrCreate()
    frame = gated_frame(spark, gate)

    def write(url: str, job_id: str) -> None:
        frame.write.mode("append").option("fs.s3a.committer.uuid", job_id).partitionBy("p").parquet(url)

    threads = [threading.Thread(target=write, args=(url, job_id)) for url, job_id in writes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
