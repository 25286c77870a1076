"""Child process for scenario 1's memory measurement: job commit of N files in a fresh process.

    python -m bench.job_commit_memory prepare --dir D --files N --tasks T
    python -m bench.job_commit_memory commit --dir D [--tracemalloc]

`prepare` sets up a magic job on `s3://bench/out` and runs T tasks through the real task path
(`create_file`, write 1 KiB, close, `commit_task`), N files in all; the objects it leaves (job
marker, one upload record per file, the pendingsets) are saved to D. `commit` loads them, runs
`commit_job` with the task results, and prints one JSON line: the peak RSS above the RSS just
before the call (sampled every 5 ms) or, with --tracemalloc, the Python heap peak during the call.

The store is the real `S3Store` over `bench.fake_s3.FakeS3Client`, an in-process stand-in for the
boto3 client: every line of the committer and of the S3 store runs (listing pages, the entry
spool, `_SUCCESS` spooling, cleanup), only the server is replaced and uploads complete at once.
So what grows is our own memory, not the endpoint's; creating 100k real uploads on the embedded
server would take longer than the whole benchmark.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
import tracemalloc

from airflow_commit_provider.core.committers import CommitOptions, TaskCommitResult, create_committer
from airflow_commit_provider.core.store.s3 import S3Store
from bench.common import RSSSampler
from bench.fake_s3 import FakeS3Client

JOB_ID = "bench-memory-job"
DESTINATION = "s3://bench/out"
THREADS = 16
PAYLOAD = b"m" * 1024


def prepare(directory: str, files: int, tasks: int) -> dict:
    client = FakeS3Client()
    store = S3Store(client=client)
    committer = create_committer("magic", store, DESTINATION, JOB_ID, CommitOptions(threads=THREADS))
    committer.setup_job()
    per_task = -(-files // tasks)
    results: list[TaskCommitResult] = []
    for task in range(tasks):
        attempt = committer.task_attempt(task, 0)
        for index in range(task * per_task, min((task + 1) * per_task, files)):
            with attempt.create_file(f"part-{task:05d}-{index:07d}.bin") as stream:
                stream.write(PAYLOAD)
        results.append(attempt.commit_task())
    client.save(os.path.join(directory, "objects.pickle"))
    with open(os.path.join(directory, "results.json"), "w") as handle:
        json.dump([r.to_json() for r in results], handle)
    return {"files": files, "tasks": tasks, "objects": len(client.objects)}


def commit(directory: str, traced: bool) -> dict:
    with open(os.path.join(directory, "results.json")) as handle:
        results = [TaskCommitResult.from_json(item) for item in json.load(handle)]
    client = FakeS3Client.load(os.path.join(directory, "objects.pickle"))
    store = S3Store(client=client)
    committer = create_committer("magic", store, DESTINATION, JOB_ID, CommitOptions(threads=THREADS))
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
