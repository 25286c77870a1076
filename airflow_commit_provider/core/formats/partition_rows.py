"""The rows a committed task wrote into each partition directory, recorded beside its files.

A partition's ``_SUCCESS`` is what a downstream sensor reads, so it must carry that partition's
rows, and only the task knows how its rows split across partitions. It records them in its
manifest's (or pendingset's) ``extraData``: a string map Hadoop's loaders keep without reading.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.jsonio import load_json

#: The ``extraData`` key: a JSON object of partition directory (``dt=2024-01-01``) -> rows.
PARTITION_ROWS_KEY = "airflow_commit.partition.rows"


def record_partition_rows(extra_data: dict[str, str], partition_rows: Mapping[str, int] | None) -> None:
    """Put `partition_rows` into `extra_data` (nothing when the task did not count them)."""
    if partition_rows is not None:
        extra_data[PARTITION_ROWS_KEY] = json.dumps(dict(sorted(partition_rows.items())))


def read_partition_rows(extra_data: Mapping[str, object], source: str) -> dict[str, int] | None:
    """The rows per partition a task recorded; None when it recorded none (an older writer)."""
    raw = extra_data.get(PARTITION_ROWS_KEY)
    if raw is None:
        return None
    counts = load_json(str(raw), f"{source}: {PARTITION_ROWS_KEY}")
    if not isinstance(counts, dict) or not all(
        isinstance(rows, int) and not isinstance(rows, bool) and rows >= 0 for rows in counts.values()
    ):
        raise InvalidCommitDataError(f"{source}: {PARTITION_ROWS_KEY} is not an object of row counts")
    return {str(partition): rows for partition, rows in counts.items()}


def sum_partition_rows(tasks: Iterable[Mapping[str, int] | None]) -> dict[str, int] | None:
    """The job's rows per partition: unknown (None) when a task did not record its counts."""
    total: dict[str, int] = {}
    for counts in tasks:
        if counts is None:
            return None
        for partition, rows in counts.items():
            total[partition] = total.get(partition, 0) + rows
    return total
