"""Child process for the memory of `airflow-commit success verify --files` at any size.

    python -m bench.verify_files_memory --dir D --files N [--tasks T] [--partitions P]

Prepares and commits a magic job of N files (`bench.job_commit_memory.prepare`, then its job
commit, not measured) on the in-process S3 stand-in (`bench.fake_s3`, labelled as such), then
runs what `success verify --files` runs - the success check (`SuccessExpectations.check`: one
ranged GET of `_SUCCESS`) and `success.listed_files.check_listed_files` (one listing of the
destination merged with the job's sorted file list) - and prints one JSON line: the peak RSS
above the RSS just before the check (sampled every 5 ms), its seconds and client CPU, the store
requests, and what it found (every file present, none missing or resized); then the same check
done naively (the file list and the listing held in dicts), the scenario's baseline.

The check holds nothing per file: the listing goes through a sorted spool on local disk and the
file list is read a row group at a time, so its memory stays flat from 10k to 1M files (the
`verify_files` rows of REPORT.md). The stand-in keeps every object's key in memory, and the
committed files are put in it after job commit (it keeps no completed uploads): all before the
baseline, so not counted.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import tempfile
import time
from typing import Any

from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.core.store.s3 import S3Store
from airflow_commit_provider.success.check import SuccessExpectations
from airflow_commit_provider.success.listed_files import check_listed_files
from bench import job_commit_memory
from bench.common import RSSSampler


def verify_point(directory: str, files: int, tasks: int, partitions: int = 0) -> dict[str, Any]:
    """Commit a magic job of `files` files in `directory`, then measure one `verify --files` of it."""
    job_commit_memory.prepare(directory, files, tasks, "magic", partitions)
    _, results, store, job = job_commit_memory.load_job(directory)
    committed = job.commit_job(results)
    _complete_uploads(store, committed, job.layout.destination)
    gc.collect()
    before = store.statistics.snapshot()
    started, cpu_started = time.perf_counter(), time.process_time()
    with RSSSampler() as sampler:
        found = SuccessExpectations.build().check(store, job.layout.success_marker)
        assert found.data is not None, found.reasons
        check = check_listed_files(store, found.data, found.destination, source=str(found.path))
    ours = {
        "rss_baseline_bytes": sampler.baseline,
        "rss_peak_bytes": sampler.peak,
        "rss_growth_bytes": sampler.growth,
        "seconds": round(time.perf_counter() - started, 6),
        "cpu_seconds": round(time.process_time() - cpu_started, 6),
        "requests": dict(store.statistics.counters_since(before).snapshot()),
    }
    naive = _naive_check(store, committed, job.layout.destination)
    return {
        "committer": "magic",
        "files": files,
        "tasks": tasks,
        "partitions": partitions,
        "store": "S3Store over the in-process S3 stand-in (bench.fake_s3)",
        **ours,
        "check": check.to_json(),
        "naive": naive,
    }


def _naive_check(store: Store, committed: SuccessData, destination: StorePath) -> dict[str, Any]:
    """The baseline: the same check done the obvious way, every listed file and the whole listing
    held in dicts, measured in the same process after ours (any memory ours freed is reused, which
    favours the baseline). Its findings must match ours."""
    gc.collect()
    started, cpu_started = time.perf_counter(), time.process_time()
    with RSSSampler() as sampler:
        listed = {
            StorePath.parse(entry.uri).key: entry.size
            for entry in committed.iter_all_files(store, destination)
        }
        stored = {status.path.key: status.size for status in store.list_files(destination)}
        present = sum(1 for key, size in listed.items() if stored.get(key) == size)
        missing = sum(1 for key in listed if key not in stored)
    return {
        "rss_growth_bytes": sampler.growth,
        "seconds": round(time.perf_counter() - started, 6),
        "cpu_seconds": round(time.process_time() - cpu_started, 6),
        "present": present,
        "missing": missing,
    }


def _complete_uploads(store: Store, committed: SuccessData, destination: StorePath) -> None:
    """Put each committed file in the stand-in, as S3 shows a completed upload: the stand-in keeps
    none (a million would add its own memory to a job commit's measurement). Before the baseline."""
    assert isinstance(store, S3Store), "magic commits on the S3 stand-in"
    client = store.client
    for listed in committed.iter_all_files(store, destination):
        path = StorePath.parse(listed.uri)
        client.put_object(Bucket=path.bucket, Key=path.key, Body=b"\0" * (listed.size or 0))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.verify_files_memory")
    parser.add_argument("--dir", help="a scratch directory (default: a new one under the temp dir)")
    parser.add_argument("--files", type=int, required=True)
    parser.add_argument("--tasks", type=int, default=0, help="default: one per 5,000 files")
    parser.add_argument("--partitions", type=int, default=0)
    args = parser.parse_args()
    directory = args.dir or tempfile.mkdtemp(prefix="bench-verify-")
    os.makedirs(directory, exist_ok=True)
    try:
        tasks = args.tasks or max(1, args.files // 5000)
        print(json.dumps(verify_point(directory, args.files, tasks, args.partitions)), flush=True)
    finally:
        if args.dir is None:  # a directory given is its owner's to delete
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
