"""A running session's conf changed for the length of a block.

Spark reads most keys when a job starts, so a caller sets them around its own jobs (Spark's own
writers with ``jvm_committer_conf``, the benchmarks). A ``write_committed`` job's Arrow settings are local
properties of its thread instead (``arrow_batches``), so that concurrent writes in one session
(days run as threads) never see each other's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from airflow_commit_provider.spark.config import HADOOP_CONF_PREFIX


def runtime_key(key: str) -> str:
    """The key to set on a running session: ``spark.hadoop.X`` becomes ``X``."""
    return key[len(HADOOP_CONF_PREFIX) :] if key.startswith(HADOOP_CONF_PREFIX) else key


@contextmanager
def applied_conf(spark: Any, conf: Mapping[str, str]) -> Iterator[None]:
    """Apply ``conf`` to a running session for the block, then restore the previous values."""
    previous: dict[str, str | None] = {}
    try:
        for key, value in conf.items():
            target = runtime_key(key)
            if target not in previous:
                previous[target] = spark.conf.get(target, None)
            spark.conf.set(target, value)
        yield
    finally:
        for target, earlier in previous.items():
            if earlier is None:
                spark.conf.unset(target)
            else:
                spark.conf.set(target, earlier)
