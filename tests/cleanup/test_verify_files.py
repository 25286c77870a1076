"""`airflow-commit success verify --files`: every file a `_SUCCESS` lists, checked against one
listing of its directory merged with the job's sorted file list (`success.listed_files`).

What is checked is the store's real state: files missing, of another size, and visible files the
list does not name (counted, a few named); one listing and the reads of the file list, never a
request per file; memory that does not grow with the list; older `_SUCCESS` files (every file
inline) still checked, Hadoop's (100 names, no sizes) refused with the reason."""

from __future__ import annotations

import json
import os
import random
import tracemalloc
from dataclasses import dataclass, field, replace
from pathlib import Path

import pyarrow as pa
import pytest
from cleanup_support import run
from support.counting import CountingStore
from support.fixtures import scratch_dir_fixture  # noqa: F401
from support.success_files import JOB, listed_job, put, size_of, success

from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.core.store.s3 import S3Store
from airflow_commit_provider.success.listed_files import PROBLEM_LINES, check_listed_files

StoreRoot = tuple[Store, StorePath]


def written_job(
    store: Store, table: StorePath, files: int, partitions: int, **overrides: object
) -> SuccessData:
    """A job's `_SUCCESS` and file list (`listed_job`), and every file it lists, of its size."""
    data = listed_job(store, table, files, partitions, **overrides)
    for entry in data.iter_all_files(store, table):
        store.write_bytes(StorePath.from_uri(entry.uri), b"x" * entry.size)
    put(store, table, data)
    return data


def break_some(store: Store, table: StorePath, data: SuccessData, missing: int, resized: int) -> list[str]:
    """Delete the first `missing` listed files and rewrite the next `resized` one byte longer;
    add four visible files nobody listed and some hidden ones. The URIs broken, in order."""
    uris = [entry.uri for entry in data.iter_all_files(store, table)][: missing + resized]
    store.delete_files(StorePath.from_uri(uri) for uri in uris[:missing])
    for number, uri in enumerate(uris[missing:], missing):
        store.write_bytes(StorePath.from_uri(uri), b"x" * (size_of(number) + 1))
    for name in ("dt=00000/extra-0.parquet", "dt=00002/extra-1.parquet", "top.csv", "new=1/extra.parquet"):
        store.write_bytes(table.join(name), b"unlisted")
    for hidden in ("_temporary/0/part-0.parquet", "dt=00001/.part-0.parquet.crc", "dt=00001/_SUCCESS"):
        store.write_bytes(table.join(hidden), b"hidden")
    store.write_bytes(table.parent.join(f"{table.name}0", "dt=00000", "beside.parquet"), b"not under it")
    return uris


def test_one_listing_merged_with_the_list_finds_what_is_missing_resized_and_unlisted(
    store_root: StoreRoot,
) -> None:
    store, root = store_root
    table = root.join("t")
    data = written_job(store, table, 300, 3)
    counting = CountingStore(store)
    clean = check_listed_files(counting, data, table, source="t/_SUCCESS")
    assert (clean.ok, clean.listed, clean.present, clean.unlisted) == (True, 300, 300, 0)
    assert data.file_list is not None
    assert counting.calls["list_files"] == 1 and set(counting.calls) == {"list_files", "read_range"}
    assert set(counting.paths_read) == {data.file_list.path_under(table)}, "the list alone is read"

    broken = break_some(store, table, data, missing=3, resized=2)
    check = check_listed_files(store, data, table, source="t/_SUCCESS")
    assert (check.ok, check.listed, check.present, check.missing, check.resized, check.unlisted) == (
        False,
        300,
        295,
        3,
        2,
        4,
    )
    assert check.problems == [
        *(f"missing: {uri} ({size_of(n):,} bytes listed)" for n, uri in enumerate(broken[:3])),
        *(
            f"another size: {uri} is {size_of(n) + 1:,} bytes, listed {size_of(n):,}"
            for n, uri in enumerate(broken[3:], 3)
        ),
    ]
    assert sorted(check.unlisted_examples) == sorted(
        str(table.join(name))
        for name in ("dt=00000/extra-0.parquet", "dt=00002/extra-1.parquet", "top.csv", "new=1/extra.parquet")
    )


@dataclass
class Recorded:
    """A Progress that remembers what it was told."""

    started: list[tuple[str, int | None]] = field(default_factory=list)
    advanced: list[int] = field(default_factory=lambda: [0])

    def start(self, description: str, total: int | None) -> None:
        self.started.append((description, total))
        self.advanced.append(0)

    def advance(self, amount: int = 1) -> None:
        self.advanced[-1] += amount


def test_progress_counts_the_listing_and_every_listed_file(local_root: StorePath) -> None:
    store = LocalStore()
    data = written_job(store, local_root, 2_345, 5)
    progress = Recorded()
    check_listed_files(store, data, local_root, source="_SUCCESS", progress=progress)
    assert progress.started == [(f"listing {local_root}", None), ("checking 2,345 listed files", 2_345)]
    assert progress.advanced[-1] == 2_345, "the bar ends full"
    assert progress.advanced[1] == 2_000, "listed files are ticked in steps as the listing goes"


def test_the_cli_names_problems_up_to_a_cap_then_counts_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = LocalStore()
    table = StorePath.parse(str(tmp_path / "t"))
    data = written_job(store, table, 400, 4)
    code, out, _ = run(capsys, "success", "verify", str(table), "--files", "--job-id", JOB)
    assert code == 0, out
    assert out.splitlines()[1] == (
        f"  files: 400 listed files checked against one listing of {table}: all present with their sizes"
    )

    broken = break_some(store, table, data, missing=PROBLEM_LINES + 3, resized=4)
    code, out, _ = run(capsys, "success", "verify", str(table), "--files")
    lines = out.splitlines()
    assert code == 1 and lines[0] == f"FAILED {table.join('_SUCCESS')}"
    assert lines[1 : PROBLEM_LINES + 1] == [
        f"  - missing: {uri} ({size_of(n):,} bytes listed)" for n, uri in enumerate(broken[:PROBLEM_LINES])
    ]
    assert lines[PROBLEM_LINES + 1] == "  - ... and 7 more missing or of another size"
    assert lines[PROBLEM_LINES + 2] == (
        f"  files: 400 listed files checked against one listing of {table}: 23 missing, 4 of another "
        "size; 4 visible files under it are not listed"
    )
    assert lines[PROBLEM_LINES + 3].startswith("  not listed: ") and len(lines) == PROBLEM_LINES + 4

    code, out, _ = run(capsys, "success", "verify", str(table), "--files", "-o", "json")
    verdict = json.loads(out)
    assert (code, verdict["ok"]) == (1, False)
    assert {
        key: verdict["files"][key] for key in ("listed", "present", "missing", "resized", "unlisted")
    } == {
        "listed": 400,
        "present": 373,
        "missing": 23,
        "resized": 4,
        "unlisted": 4,
    }
    assert len(verdict["files"]["problems"]) == PROBLEM_LINES and verdict["files"]["problems_left_out"] == 7


def test_older_success_files_with_every_file_inline_are_checked_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An older `_SUCCESS` of ours lists its files inline, in no set order: sorted in memory (it is
    in memory already) and checked the same way."""
    store = LocalStore()
    table = StorePath.parse(str(tmp_path / "old"))
    old = success(table)
    files = list(old.files or ())
    for committed in files:
        store.write_bytes(StorePath.from_uri(committed.uri), b"x" * committed.size)
    random.Random(7).shuffle(files)
    put(store, table, replace(old, files=files))
    code, out, _ = run(capsys, "success", "verify", str(table), "--files")
    assert code == 0 and "3 listed files checked" in out and "all present" in out
    store.delete(StorePath.from_uri(files[0].uri))
    code, out, _ = run(capsys, "success", "verify", str(table), "--files")
    assert code == 1 and f"  - missing: {files[0].uri} (100 bytes listed)" in out.splitlines()


def test_what_cannot_be_checked_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = LocalStore()
    hadoop_dir = StorePath.parse(str(tmp_path / "hadoop"))
    manifest = SuccessData(
        "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter",
        "spark-job",
        filenames=[hadoop_dir.join("part-00000.parquet").uri()],
    )
    put(store, hadoop_dir, manifest)
    code, out, _ = run(capsys, "success", "verify", str(hadoop_dir), "--files")
    assert code == 1 and "  - cannot check the files: " in out and "lists no files" in out

    table = StorePath.parse(str(tmp_path / "t"))
    data = written_job(store, table, 50, 1)
    assert data.file_list is not None
    location = data.file_list.path_under(table)
    store.write_bytes(location, store.read_bytes(location)[:-1] + b"?")
    code, out, _ = run(capsys, "success", "verify", str(table), "--files")
    (reason,) = [line for line in out.splitlines() if line.startswith("  - ")]
    assert code == 1 and reason.startswith(f"  - cannot check the files: {location} (named by ")
    assert "its SHA-256 is" in reason


def test_a_partition_markers_files_are_its_partitions_rows(local_root: StorePath) -> None:
    """A partition's own `_SUCCESS` names the job's file list: its check keeps that partition's
    rows and lists that partition alone."""
    store = LocalStore()
    data = written_job(store, local_root, 90, 3)
    partition = local_root.join("dt=00001")
    marker = replace(data, partitions=["dt=00001"], partition_count=1, partition_list=None, file_count=30)
    put(store, partition, marker)
    check = check_listed_files(store, marker, partition, source=str(partition.join("_SUCCESS")))
    assert (check.ok, check.listed, check.unlisted) == (True, 30, 0)


@pytest.mark.s3
def test_verify_files_on_s3(
    capsys: pytest.CaptureFixture[str], s3_env: str, s3_store: S3Store, s3_bucket: str
) -> None:
    table = StorePath("s3", s3_bucket, "out/t")
    data = written_job(s3_store, table, 120, 2)
    arguments = ("--files", "--endpoint-url", s3_env)
    code, out, _ = run(capsys, "success", "verify", f"s3a://{s3_bucket}/out/t", *arguments)
    assert code == 0 and "120 listed files checked" in out, out
    break_some(s3_store, table, data, missing=1, resized=1)
    code, out, _ = run(capsys, "success", "verify", f"s3://{s3_bucket}/out/t", *arguments, "-o", "json")
    files = json.loads(out)["files"]
    assert (code, files["missing"], files["resized"], files["unlisted"]) == (1, 1, 1, 4)


def sparse_job(store: LocalStore, table: StorePath, files: int) -> SuccessData:
    """`written_job` with sparse files (their sizes without their bytes), so 200,000 take seconds."""
    data = listed_job(store, table, files, 200)
    made: set[str] = set()
    for entry in data.iter_all_files(store, table):
        path = StorePath.from_uri(entry.uri).key
        directory = os.path.dirname(path)
        if directory not in made:
            os.makedirs(directory, exist_ok=True)
            made.add(directory)
        with open(path, "wb") as handle:
            handle.truncate(entry.size)
    put(store, table, data)
    return data


@pytest.mark.slow
def test_memory_stays_flat_from_20k_to_200k_listed_files(scratch_dir: Path) -> None:
    """Python's allocations (tracemalloc) and Arrow's (its pool) while checking: at 200,000 files
    they stay those of 20,000, give or take the sorted spool's one run in memory (16 MB of
    records): what grows with the list is on disk (the fetched list, the spooled listing).

    The 220,000 files are made and deleted on tmpfs (`scratch_dir`) when the machine has one: on
    a disk mounted with `discard` each unlink costs milliseconds, and deleting them took most of
    the test's five minutes. What is measured, the check's memory, is the same on either."""
    store = LocalStore()
    peaks: dict[int, tuple[int, int]] = {}
    for count in (20_000, 200_000):
        table = StorePath.parse(str(scratch_dir / f"t{count}"))
        data = sparse_job(store, table, count)
        arrow = ArrowSampler()
        tracemalloc.start()
        try:
            check = check_listed_files(store, data, table, source="_SUCCESS", progress=arrow)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert check.ok and check.listed == count
        peaks[count] = (peak, arrow.peak)
        store.delete_tree(table)
    print(f"peaks (python, arrow): {peaks}")
    (python_small, arrow_small), (python_large, arrow_large) = peaks[20_000], peaks[200_000]
    assert python_large < python_small * 1.5 + 4 * 1024**2 and python_large < 32 * 1024**2, peaks
    assert arrow_large < arrow_small + 4 * 1024**2 and arrow_large < 32 * 1024**2, peaks


class ArrowSampler(Recorded):
    """Samples Arrow's memory pool at every tick of the check's progress (its allocations are not
    Python's, so tracemalloc does not see them)."""

    peak: int = 0

    def advance(self, amount: int = 1) -> None:
        super().advance(amount)
        self.peak = max(self.peak, pa.total_allocated_bytes())
