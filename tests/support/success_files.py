"""`_SUCCESS` files with chosen contents, for the tests of whatever reads them (sensor, trigger, operator)."""

from __future__ import annotations

import time
from typing import Any

from airflow_commit_provider.core.formats.success import SUCCESS_FILENAME, CommittedFile, SuccessData
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import Store

JOB = "job-0001"


def success(location: StorePath, **overrides: Any) -> SuccessData:
    """A `_SUCCESS` at `location` by job JOB: three files of one partition, each in `location` (a
    `_SUCCESS` listing files outside its directory is refused by every check)."""
    values: dict[str, Any] = {
        "committer": "partitioned",
        "job_id": JOB,
        "timestamp": int(time.time() * 1000),
        "partitions": ["dt=2024-01-01"],
        "file_count": 3,
        "total_bytes": 300,
        "rows": 30,
        "files": [
            CommittedFile(location.join(f"dt=2024-01-01/part-{i}.parquet").uri(), 100) for i in range(3)
        ],
        "filenames": [f"dt=2024-01-01/part-{i}.parquet" for i in range(3)],
    }
    values.update(overrides)
    return SuccessData(**values)


def put(store: Store, directory: StorePath, data: SuccessData | bytes) -> None:
    payload = data if isinstance(data, bytes) else data.to_bytes()
    store.write_bytes(directory.join(SUCCESS_FILENAME), payload)
