"""Scenario: a page of the report's file list at 1k, 100k and 1M files (issue 28), on local files
and the embedded S3.

The job's record names its file list (Parquet, `core.formats.file_list`); a page reads the list's
footer and the row group the page lies in through ranged reads, whatever the list's length. What
is timed is `load_commit` of the page in the middle of the list plus its rendering (what the UI
page and `airflow-commit report --page` do for one job), with the requests and bytes it read.

Baselines, from the same run: the page at 100k files (the target: the curve is flat when the page
at 1M costs at most `FLAT_TARGET` times what it costs at 100k); informative, the page at 1k and the
least any report of that job reads (its records: `inspect_job`). A page decodes (part of) one row
group of the list: up to `ROW_GROUP_ROWS` files that group is the whole, smaller list, so the page at
1k is cheaper by construction; from one full row group on, its cost no longer grows.
Informative, up to 100k files: the page as the report made it before the file list, from a
`_SUCCESS` listing every file inline (read and parsed whole per page).

Only the list grows here: the job's data files are never read by the report, so none is written
(the one committed file is real); the embedded S3 holds the 1M-file list itself (tens of MB).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, cast

from airflow_commit_provider.core.committers import CommitOptions, create_committer
from airflow_commit_provider.core.formats.file_list import (
    ROW_GROUP_ROWS,
    FileListEntry,
    ListRef,
    write_file_list,
)
from airflow_commit_provider.core.formats.success import CommittedFile, SuccessData
from airflow_commit_provider.core.job_control import inspect_job
from airflow_commit_provider.core.job_records import load_job_record, save_job_record
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import Store
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.report.commit_report import PAGE_SIZE, load_commit
from airflow_commit_provider.report.html import render_commit
from bench.common import BenchEnv, ScenarioResult, log, requests_in, rotated, timer

PARTITIONS = 30
#: The page at 1M files may cost at most this many times the page at 100k (the curve is flat).
FLAT_TARGET = 2.0
#: Largest list whose page is also measured the old way (a `_SUCCESS` with every file inline).
INLINE_UP_TO = 100_000


def run(env: BenchEnv) -> ScenarioResult:
    sizes = env.pick(tiny=(1_000, 10_000), small=(1_000, 100_000), full=(1_000, 100_000, 1_000_000))
    result = ScenarioResult(
        "report_file_pages",
        "A page of the report's file list at 1k to 1M files",
        env.size,
        env.repeat,
        parameters={
            "files": list(sizes),
            "page_size": PAGE_SIZE,
            "ours": "load_commit of the middle page + render_commit (the file list read by ranged reads)",
            "baselines": "the job's records alone (inspect_job); the page at 1k files",
            "inline": f"up to {INLINE_UP_TO:,} files: the page from a _SUCCESS listing every file inline",
        },
    )
    local_root = StorePath.parse(str(env.work_dir / "report-file-pages"))
    _measure_store(result, "local", LocalStore(), local_root, sizes, env.repeat)
    with env.bucket("report-files") as bucket:
        store = env.s3.store()
        try:
            _measure_store(result, "s3", store, StorePath("s3", bucket, "tables"), sizes, env.repeat)
        finally:
            store.close()
    return result


def _measure_store(
    result: ScenarioResult, where: str, store: Store, root: StorePath, sizes: tuple[int, ...], repeat: int
) -> None:
    pages: dict[int, list[float]] = {}
    for files in sizes:
        table = root.join(f"t{files}")
        job_id, ref = _committed_job(store, table, files)
        log(f"report_file_pages: {where}, {files:,} files, list of {ref.bytes:,} bytes")
        page = files // PAGE_SIZE // 2
        records = result.comparison(
            f"file page, {files:,} files ({where})",
            ours_label="the page",
            baseline_label="the job's records read",
            unit="s",
        )
        inline = _inline_success(store, table, job_id, ref) if files <= INLINE_UP_TO else None
        for turn in range(repeat):
            seconds: dict[str, float] = {}
            for variant in rotated(("page", "records", "inline"), turn):
                if variant == "inline" and inline is None:
                    continue
                counting = _CountingReads(store)
                with timer() as elapsed:
                    if variant == "page":
                        report = load_commit(cast(Store, counting), table, job_id, page=page)
                        render_commit(report, page_link=str)
                        assert len(report.files_page) == PAGE_SIZE and report.listed_files == files
                    elif variant == "records":
                        inspect_job(store, table, job_id)
                    else:
                        assert inline is not None
                        parsed = SuccessData.from_bytes(store.read_bytes(inline), str(inline))
                        assert len((parsed.files or [])[page * PAGE_SIZE :][:PAGE_SIZE]) == PAGE_SIZE
                seconds[variant] = elapsed()
                if variant == "page":
                    result.measure(
                        f"file page requests, {files:,} files ({where})", counting.requests, "requests"
                    )
                    result.measure(
                        f"file page bytes read, {files:,} files ({where})", counting.bytes, "bytes"
                    )
                    result.measure(f"file list bytes, {files:,} files ({where})", ref.bytes, "bytes")
            records.add(seconds["page"], seconds["records"])
            pages.setdefault(files, []).append(seconds["page"])
            if "inline" in seconds:
                result.comparison(
                    f"file page, {files:,} files ({where}): the file list against every file inline",
                    ours_label="the page (file list)",
                    baseline_label="the page (_SUCCESS with every file inline)",
                    unit="s",
                ).add(seconds["page"], seconds["inline"])
        store.delete_tree(table)
    smallest = min(sizes)
    whole_groups = [files for files in sizes if files >= ROW_GROUP_ROWS]
    for files in sizes:
        for baseline, target in ((smallest, None), (min(whole_groups, default=files), FLAT_TARGET)):
            if files <= baseline:
                continue
            flat = result.comparison(
                f"file page at {files:,} files against {baseline:,} ({where})",
                ours_label=f"the page at {files:,}",
                baseline_label=f"the page at {baseline:,}",
                unit="s",
                target=target,
            )
            for ours, theirs in zip(pages[files], pages[baseline], strict=True):
                flat.add(ours, theirs)


def _committed_job(store: Store, table: StorePath, files: int) -> tuple[str, ListRef]:
    """A real commit of one file, whose record then names a file list of `files` files across
    `PARTITIONS` partitions, as job commit writes it for such a job."""
    job_id = uuid.uuid4().hex
    job = create_committer("partitioned", store, table, job_id, CommitOptions(threads=4))
    job.setup_job()
    attempt = job.task_attempt(0, 0)
    with attempt.create_file("dt=0000/part-00000.parquet") as stream:
        stream.write(b"x" * 1024)
    job.commit_job([attempt.commit_task(rows=1)])
    ref = write_file_list(store, JobLayout(table, job_id), _entries(table, job_id, files))
    record = load_job_record(store, table, job_id)
    save_job_record(store, table, replace(record, file_list=ref, file_count=files))
    return job_id, ref


def _entries(table: StorePath, job_id: str, files: int) -> Iterator[FileListEntry]:
    """`files` entries in key order: fixed-width partition and file numbers."""
    per_partition = -(-files // PARTITIONS)
    for number in range(files):
        partition = f"dt={number // per_partition:04d}"
        uri = table.join(partition, f"part-{number:08d}-{job_id}-c000.snappy.parquet").uri()
        yield FileListEntry(uri, 1024 + number % 4096, partition)


def _inline_success(store: Store, table: StorePath, job_id: str, ref: ListRef) -> StorePath:
    """The `_SUCCESS` the report paged before the file list: every file inline."""
    marker = table.join("_SUCCESS_inline")
    success = SuccessData("partitioned", job_id)
    files = (CommittedFile(entry.uri, entry.size) for entry in _entries(table, job_id, ref.entries))
    with store.open_write(marker) as stream:
        success.write_to(stream, files)
    return marker


class _CountingReads:
    """The store, counting the requests a page makes (its statistics) and the bytes it reads."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._before = _requests(store)
        self.bytes = 0

    @property
    def requests(self) -> int:
        return _requests(self._store) - self._before

    def read_range(self, path: StorePath, start: int, length: int) -> bytes:
        data = self._store.read_range(path, start, length)
        self.bytes += len(data)
        return data

    def read_bytes(self, path: StorePath) -> bytes:
        data = self._store.read_bytes(path)
        self.bytes += len(data)
        return data

    def read_bytes_within(self, path: StorePath, limit: int) -> bytes | None:
        data = self._store.read_bytes_within(path, limit)
        self.bytes += len(data or b"")
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _requests(store: Store) -> int:
    return requests_in(store.statistics.snapshot())
