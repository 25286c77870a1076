"""`_SUCCESS` files with chosen contents, for the tests of whatever reads them (sensor, trigger, operator)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import islice
from typing import Any

from airflow_commit_provider.core.formats.file_list import (
    FileListEntry,
    write_file_list,
    write_partition_list,
)
from airflow_commit_provider.core.formats.partition_stats import PartitionStats
from airflow_commit_provider.core.formats.success import (
    FILENAMES_LIMIT,
    CommittedFile,
    InlinePartitions,
    SuccessData,
)
from airflow_commit_provider.core.layout import SUCCESS_FILENAME, JobLayout
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
        "filenames": [location.join(f"dt=2024-01-01/part-{i}.parquet").uri() for i in range(3)],
    }
    values.update(overrides)
    return SuccessData(**values)


def put(store: Store, directory: StorePath, data: SuccessData | bytes) -> None:
    payload = data if isinstance(data, bytes) else data.to_bytes()
    store.write_bytes(directory.join(SUCCESS_FILENAME), payload)


def listed_job(
    store: Store,
    destination: StorePath,
    files: int,
    partitions: int,
    *,
    job_id: str = JOB,
    name_bytes: int = 0,
    **overrides: Any,
) -> SuccessData:
    """The `_SUCCESS` of a job that wrote `files` files of `size_of(n)` bytes spread over
    `partitions` partitions (``dt=00000``...), as job commit writes it (`docs/bounded-commits.md`):
    its file list and, past the inline cap, its partition list written under the records
    directory; counts, the first partitions and the first 100 files inline. File names are padded
    to about `name_bytes` bytes. Entries are generated in key order, so nothing is held per file.
    The `_SUCCESS` is returned, not written (`put` writes it)."""
    layout = JobLayout(destination, job_id)
    per_partition = -(-files // partitions)
    pad = "x" * max(0, name_bytes - len(destination.uri()) - 40)

    def entries() -> Iterator[FileListEntry]:
        for number in range(files):
            partition = f"dt={number // per_partition:05d}"
            uri = destination.join(partition, f"part-{number:08d}-{pad}.parquet").uri()
            yield FileListEntry(uri, size_of(number), partition)

    names = [f"dt={index:05d}" for index in range(-(-files // per_partition))]
    file_list = write_file_list(store, layout, entries())
    inline = InlinePartitions()
    for name in names:
        inline.add(name)
    partition_list = None
    if not inline.complete:
        stats = (
            (name, PartitionStats(*_partition_counts(index, per_partition, files), None))
            for index, name in enumerate(names)
        )
        partition_list = write_partition_list(store, layout, stats)
    values: dict[str, Any] = {
        "committer": "magic",
        "job_id": job_id,
        "timestamp": int(time.time() * 1000),
        "partitions": inline.names,
        "partition_count": inline.count,
        "partition_list": partition_list,
        "file_list": file_list,
        "file_count": files,
        "total_bytes": sum(size_of(number) for number in range(files)),
        "rows": files * 10,
        "filenames": [entry.uri for entry in islice(entries(), FILENAMES_LIMIT)],
    }
    values.update(overrides)
    return SuccessData(**values)


def size_of(number: int) -> int:
    """The size of file `number` of a `listed_job`."""
    return 1000 + number % 997


def _partition_counts(index: int, per_partition: int, files: int) -> tuple[int, int]:
    numbers = range(index * per_partition, min(files, (index + 1) * per_partition))
    return len(numbers), sum(size_of(number) for number in numbers)
