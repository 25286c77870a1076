"""Child process for scenario 1's memory measurement: job commit of N files in a fresh process.

    python -m bench.job_commit_memory prepare --dir D --files N --tasks T
    python -m bench.job_commit_memory commit --dir D [--tracemalloc]

`prepare` sets up a magic job under D/out on a local store and commits T tasks through the real
task path (`commit_task`), each with N/T pending uploads and one upload record per file, as the
magic committer's `create_file` records them. `commit` runs `commit_job` with those task results
and prints one JSON line: peak RSS above the RSS just before the call (sampled every 5 ms), or,
with --tracemalloc, the Python heap peak during the call.

The store is `InstantUploadStore`: the local store, except that completing or aborting an upload
returns at once. Everything the committer itself keeps (manifests read, the entry spool, the
duplicate-destination digests, `_SUCCESS`, cleanup listings) is real; only the per-upload work of
the S3 endpoint is left out, so what grows here is the committer's own memory.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
import tracemalloc
import uuid

from airflow_commit_provider.core.committers import CommitOptions, TaskCommitResult, create_committer
from airflow_commit_provider.core.formats.pending import PendingCommit
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.uploads import record_uploads
from airflow_commit_provider.core.store.local import LocalStore
from bench.common import RSSSampler

JOB_ID = "bench-memory-job"
THREADS = 16


class InstantUploadStore(LocalStore):
    """LocalStore whose multipart completes and aborts cost nothing (and touch no file)."""

    def complete_multipart_upload(self, path: StorePath, upload_id: str, etags: list[str]) -> str:
        self.statistics.increment("op_multipart_complete")
        return '"instant"'

    def abort_multipart_upload(self, path: StorePath, upload_id: str) -> None:
        self.statistics.increment("op_multipart_abort")


def _destination(directory: str) -> str:
    return StorePath.parse(os.path.join(os.path.abspath(directory), "out")).uri()


def prepare(directory: str, files: int, tasks: int) -> dict:
    store = InstantUploadStore()
    destination = _destination(directory)
    committer = create_committer("magic", store, destination, JOB_ID, CommitOptions(threads=THREADS))
    committer.setup_job()
    per_task = -(-files // tasks)
    results: list[TaskCommitResult] = []
    for task in range(tasks):
        attempt = committer.task_attempt(task, 0)
        for index in range(task * per_task, min((task + 1) * per_task, files)):
            dest = committer.destination.join(f"part-{task:05d}-{index:07d}.bin")
            upload_id = uuid.uuid4().hex
            record_uploads(committer.context, attempt.task_attempt_id, [(dest, upload_id)])
            attempt.pending.append(  # type: ignore[attr-defined]
                PendingCommit(
                    uri=dest.uri(),
                    bucket="",
                    destination_key=dest.key,
                    upload_id=upload_id,
                    etags=(f'"{uuid.uuid4().hex}"',),
                    length=1024,
                )
            )
        results.append(attempt.commit_task())
    with open(os.path.join(directory, "results.json"), "w") as handle:
        json.dump([r.to_json() for r in results], handle)
    return {"files": files, "tasks": tasks}


def commit(directory: str, traced: bool) -> dict:
    with open(os.path.join(directory, "results.json")) as handle:
        results = [TaskCommitResult.from_json(item) for item in json.load(handle)]
    store = InstantUploadStore()
    committer = create_committer(
        "magic", store, _destination(directory), JOB_ID, CommitOptions(threads=THREADS)
    )
    gc.collect()
    measured: dict = {}
    started = time.perf_counter()
    if traced:
        tracemalloc.start()
        success = committer.commit_job(results)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        measured["tracemalloc_peak_bytes"] = peak
    else:
        with RSSSampler() as sampler:
            success = committer.commit_job(results)
        measured["rss_baseline_bytes"] = sampler.baseline
        measured["rss_peak_bytes"] = sampler.peak
        measured["rss_growth_bytes"] = sampler.growth
    measured["seconds"] = round(time.perf_counter() - started, 3)
    measured["files"] = success.file_count
    measured["requests"] = store.statistics.snapshot()
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.job_commit_memory")
    parser.add_argument("action", choices=("prepare", "commit"))
    parser.add_argument("--dir", required=True)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--tracemalloc", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    if args.action == "prepare":
        out = prepare(args.dir, args.files, args.tasks)
    else:
        out = commit(args.dir, args.tracemalloc)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
