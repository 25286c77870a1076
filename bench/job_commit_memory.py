"""Child process for the memory of job commit, and of one task attempt, at any size: N files in a fresh process.

    python -m bench.job_commit_memory prepare --dir D --files N --tasks T [--committer C] [--partitions P]
    python -m bench.job_commit_memory commit --dir D [--tracemalloc]
    python -m bench.job_commit_memory task --dir D --files N [--committer C]

`prepare` sets up a job of committer C (magic, directory, partitioned or manifest) and runs T tasks
through the real task path (`create_file`, write 1 KiB, close, `commit_task` with the rows it
wrote, per partition too), N files in all, spread over P partition directories (`p=00042/`) when
P > 0; the job is saved to D (`job.json`, the task results, and the store's objects). `commit` loads
it, runs `commit_job` with the task results, and prints one JSON line: the peak RSS above the RSS
just before the call (sampled every 5 ms) or, with --tracemalloc, the Python heap peak during the
call, with the wall and CPU seconds, the store requests (and per file), the size of `_SUCCESS`
and of the job record, and the job record's phases (what each took and asked).
pyarrow, which job commit uses to write its file list, is started before the baseline (imported,
and one tiny Parquet file written): a fixed cost of the process, reported as
`pyarrow_start_rss_bytes`, not growth with the job.
A committer on local files commits D itself: prepare it again before another `commit` (or keep a
hard-linked copy of D, `cp -al`, and commit the copy: a commit renames and unlinks, never writes a
prepared file).
`task` measures one task attempt writing N files and committing them (HADOOP-19047: S3A's magic
committer holds every file's commit data in the task), from before its first file to after its
commit. `prepare`, `commit` and `task_attempt` are the library other scenarios call.

The S3 committers run the real `S3Store` over `bench.fake_s3.FakeS3Client`, a stand-in for the
boto3 client, labelled as such: every line of the committer and of the S3 store runs (listing
pages, the entry spool, `_SUCCESS` spooling, cleanup), only the server is replaced and uploads
complete at once; creating a million real uploads on the embedded server would take hours.
`prepare` and `task` run it in their own process. `commit` runs it in a process of its own
(`bench.fake_s3_process.served_stand_in`), so that the RSS measured is job commit's alone: the
stand-in keeps a key per completed upload (about 91 MB at 1M), a server's memory, not the
driver's. The stand-in process's own peak growth is reported apart
(`store_process_rss_growth_bytes`). The manifest committer, which renames, runs on local files in
D (write D under /tmp: a million 1 KiB files take about 4 GB of blocks).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import shutil
import time
import tracemalloc
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from airflow_commit_provider.core.commit_report import load_commit
from airflow_commit_provider.core.committers import CommitOptions, TaskCommitResult, create_committer
from airflow_commit_provider.core.committers.base import Committer
from airflow_commit_provider.core.options import parse_conflict_mode
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.core.store.s3 import S3Store
from bench.common import RSSSampler, requests_in, start_pyarrow
from bench.fake_s3 import FakeS3Client
from bench.fake_s3_process import served_stand_in

JOB_ID = "bench-memory-job"
S3_DESTINATION = "s3://bench/out"
THREADS = 16
PAYLOAD = b"m" * 1024
COMMITTERS = ("magic", "directory", "partitioned", "manifest")
#: The store of a measured S3 job commit.
SERVED = "S3Store over the S3 stand-in (bench.fake_s3) in a process of its own"
#: The committers that rename within the store run on local files; the others on the S3 stand-in.
LOCAL_COMMITTERS = ("manifest",)


@dataclass(frozen=True)
class JobSpec:
    committer: str
    files: int
    tasks: int
    partitions: int = 0
    conflict_mode: str = "append"

    @property
    def store_label(self) -> str:
        if self.committer in LOCAL_COMMITTERS:
            return "local files"
        return "S3Store over the in-process S3 stand-in (bench.fake_s3)"


def prepare(
    directory: str,
    files: int,
    tasks: int,
    committer: str = "magic",
    partitions: int = 0,
    conflict_mode: str = "append",
) -> dict[str, Any]:
    """Set up a job of `files` files written by `tasks` tasks, and save it to `directory`."""
    spec = JobSpec(committer, files, tasks, partitions, conflict_mode)
    client = None if committer in LOCAL_COMMITTERS else FakeS3Client()
    store = _store(client)
    job = _committer(spec, store, directory)
    job.setup_job()
    per_task = -(-files // tasks)
    results: list[TaskCommitResult] = []
    for task in range(tasks):
        attempt = job.task_attempt(task, 0)
        attempt.setup_task()
        rows: Counter[str] = Counter()
        for index in range(task * per_task, min((task + 1) * per_task, files)):
            partition = f"p={index % partitions:05d}" if partitions else ""
            with attempt.create_file(f"{partition}/part-{task:05d}-{index:07d}.bin".lstrip("/")) as stream:
                stream.write(PAYLOAD)
            rows[partition] += 1
        results.append(
            attempt.commit_task(rows=sum(rows.values()), partition_rows=dict(rows) if partitions else None)
        )
    if client is not None:
        client.save(_objects_file(directory))
    with open(os.path.join(directory, "results.json"), "w") as handle:
        json.dump([r.to_json() for r in results], handle)
    with open(os.path.join(directory, "job.json"), "w") as handle:
        json.dump(asdict(spec), handle)
    return {**asdict(spec), "store": spec.store_label}


def load_job(directory: str, client: Any = None) -> tuple[JobSpec, list[TaskCommitResult], Store, Committer]:
    """The job `prepare` saved in `directory`: its spec, task results, store and committer. The S3
    committers' store drives `client` when given (`served_stand_in`'s), else the in-process
    stand-in loaded from the saved objects."""
    spec = _spec(directory)
    with open(os.path.join(directory, "results.json")) as handle:
        results = [TaskCommitResult.from_json(item) for item in json.load(handle)]
    if spec.committer not in LOCAL_COMMITTERS and client is None:
        client = FakeS3Client.load(_objects_file(directory))
    store = _store(client)
    return spec, results, store, _committer(spec, store, directory)


def commit(directory: str, traced: bool = False) -> dict[str, Any]:
    """Commit the job `prepare` saved in `directory`, measuring this process's memory meanwhile.

    The S3 committers' stand-in runs in a process of its own (`served_stand_in`): the keys it adds
    for a million completed uploads are a server's memory, not job commit's. Its own peak growth
    is reported apart (`store_process_rss_growth_bytes`)."""
    spec = _spec(directory)
    with contextlib.ExitStack() as stack:
        client = None
        if spec.committer not in LOCAL_COMMITTERS:
            client = stack.enter_context(served_stand_in(_objects_file(directory)))
        spec, results, store, job = load_job(directory, client)
        measured: dict[str, Any] = {**asdict(spec), "store": spec.store_label if client is None else SERVED}
        measured["pyarrow_start_rss_bytes"] = start_pyarrow()
        gc.collect()
        before = store.statistics.snapshot()
        started, cpu_started = time.perf_counter(), time.process_time()
        if traced:
            tracemalloc.start()
            success = job.commit_job(results)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            measured["tracemalloc_peak_bytes"] = peak
        else:
            with RSSSampler() as sampler:
                success = job.commit_job(results)
            measured["rss_baseline_bytes"] = sampler.baseline
            measured["rss_peak_bytes"] = sampler.peak
            measured["rss_growth_bytes"] = sampler.growth
        measured["seconds"] = round(time.perf_counter() - started, 3)
        measured["cpu_seconds"] = round(time.process_time() - cpu_started, 3)
        counters = store.statistics.counters_since(before).counters
        if client is not None:
            served = client.server_memory()
            measured["store_process_rss_baseline_bytes"] = served["baseline"]
            measured["store_process_rss_growth_bytes"] = served["peak"] - served["baseline"]
        measured["committed_files"] = success.file_count
        measured["success_bytes"] = _size(store, job.layout.success_marker)
        measured["record_bytes"] = _size(store, job.layout.job_record)
        measured["requests"] = counters
        # A local rename is the manifest committer's one operation per file (S3 has none).
        measured["requests_per_file"] = round(
            (requests_in(counters) + counters.get("op_rename", 0)) / max(1, spec.files), 4
        )
        # The job record's timeline of this commit: what each phase took and asked.
        report = load_commit(store, job.layout.destination, JOB_ID, page=0)
        measured["phases"] = [phase.to_json() for phase in report.phases]
    return measured


def task_attempt(directory: str, files: int, committer: str = "magic") -> dict[str, Any]:
    """One task attempt writing `files` files of 1 KiB and committing them, measured from before its
    first file to after its commit (HADOOP-19047)."""
    spec = JobSpec(committer, files, 1)
    store = _store(None if committer in LOCAL_COMMITTERS else FakeS3Client())
    job = _committer(spec, store, directory)
    job.setup_job()
    attempt = job.task_attempt(0, 0)
    attempt.setup_task()
    gc.collect()
    started = time.perf_counter()
    with RSSSampler() as sampler:
        for index in range(files):
            with attempt.create_file(f"part-00000-{index:07d}.bin") as stream:
                stream.write(PAYLOAD)
        result = attempt.commit_task(rows=files)
    return {
        **asdict(spec),
        "store": spec.store_label,
        "rss_baseline_bytes": sampler.baseline,
        "rss_peak_bytes": sampler.peak,
        "rss_growth_bytes": sampler.growth,
        "seconds": round(time.perf_counter() - started, 3),
        "committed_files": result.files,
        "manifest_bytes": _size(store, job.layout.manifest_path(attempt.task_id)),
    }


def _spec(directory: str) -> JobSpec:
    with open(os.path.join(directory, "job.json")) as handle:
        return JobSpec(**json.load(handle))


def _objects_file(directory: str) -> str:
    return os.path.join(directory, "objects.pickle")


def _store(client: Any) -> Store:
    return LocalStore() if client is None else S3Store(client=client)


def _committer(spec: JobSpec, store: Store, directory: str) -> Committer:
    local = spec.committer in LOCAL_COMMITTERS
    destination = os.path.join(directory, "out") if local else S3_DESTINATION
    options = CommitOptions(
        threads=THREADS,
        conflict_mode=parse_conflict_mode(spec.conflict_mode),
        local_staging_dir=os.path.join(directory, "staging"),
    )
    return create_committer(spec.committer, store, destination, JOB_ID, options)


def _size(store: Store, path: Any) -> int | None:
    status = store.get_status(path)
    return None if status is None else status.size


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.job_commit_memory")
    parser.add_argument("action", choices=("prepare", "commit", "task"))
    parser.add_argument("--dir", required=True)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--committer", choices=COMMITTERS, default="magic")
    parser.add_argument("--partitions", type=int, default=0)
    parser.add_argument("--conflict-mode", default="append")
    parser.add_argument("--tracemalloc", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    if args.action == "prepare":
        out = prepare(args.dir, args.files, args.tasks, args.committer, args.partitions, args.conflict_mode)
    elif args.action == "commit":
        out = commit(args.dir, args.tracemalloc)
    else:
        out = task_attempt(args.dir, args.files, args.committer)
        shutil.rmtree(os.path.join(args.dir, "out"), ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
