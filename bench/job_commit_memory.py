"""Child process for the memory of job commit, and of one task attempt, at any size: N files in a fresh process.

    python -m bench.job_commit_memory prepare --dir D --files N --tasks T [--committer C] [--partitions P]
    python -m bench.job_commit_memory commit --dir D [--tracemalloc]
    python -m bench.job_commit_memory task --dir D --files N [--committer C]
    python -m bench.job_commit_memory record [--out bench/results] [--note TEXT ...] MEASURED...

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
A committer on local files commits D itself: prepare it again before another `commit` (a copy of
D will not do: its task manifests name their files by absolute path, in D).
`task` measures one task attempt writing N files and committing them (HADOOP-19047: S3A's magic
committer holds every file's commit data in the task), from before its first file to after its
commit. `record` writes `<out>/job_commit_memory.json` from files that each hold one `commit`'s
JSON line (a scenario document: a check against `TARGET_MB` per point, the points with their
phases, the notes) and rebuilds REPORT.md from every results file, as `python -m bench` does.
`prepare`, `commit` and `task_attempt` are the library other scenarios call.

The S3 committers run the real `S3Store` over `bench.fake_s3.FakeS3Client`, a stand-in for the
boto3 client, labelled as such: every line of the committer and of the S3 store runs (listing
pages, the entry spool, `_SUCCESS` spooling, cleanup), only the server is replaced and uploads
complete at once; creating a million real uploads on the embedded server would take hours.
`prepare` and `task` run it in their own process. `commit` runs it in a process of its own
(`bench.fake_s3_process.served_stand_in`), so that the RSS measured is job commit's alone: what
the stand-in holds is a server's memory, not the driver's. The stand-in process's own peak growth is reported apart
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
import threading
import time
import tracemalloc
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from airflow_commit_provider.core.committers import CommitOptions, TaskCommitResult, create_committer
from airflow_commit_provider.core.committers.base import Committer
from airflow_commit_provider.core.options import parse_conflict_mode
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.core.store.s3 import S3Store
from airflow_commit_provider.report.commit_report import load_commit
from bench.common import (
    DEFAULT_OUT,
    RSSSampler,
    ScenarioResult,
    host_info,
    load_average,
    now_iso,
    requests_in,
    start_pyarrow,
    write_json,
)
from bench.fake_s3 import FakeS3Client
from bench.fake_s3_process import served_stand_in
from bench.report import write_report

JOB_ID = "bench-memory-job"
S3_DESTINATION = "s3://bench/out"
THREADS = 16
PAYLOAD = b"m" * 1024
COMMITTERS = ("magic", "directory", "partitioned", "manifest")
#: Issue 28: job commit's peak RSS growth at 1M files, every committer.
TARGET_MB = 100.0
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
        measured: dict[str, Any] = {
            **asdict(spec),
            "store": spec.store_label if client is None else SERVED,
            "started_at": now_iso(),
            "load_before": load_average(),
        }
        measured["pyarrow_start_rss_bytes"] = start_pyarrow()
        gc.collect()
        before = store.statistics.snapshot()
        started, cpu_started = time.perf_counter(), time.process_time()
        if traced:
            tracemalloc.start()
            with _LargestHeap() as largest:
                success = job.commit_job(results)
            _, peak = tracemalloc.get_traced_memory()
            retained = _by_file(tracemalloc.take_snapshot())
            tracemalloc.stop()
            measured["tracemalloc_peak_bytes"] = peak
            measured["traced_at_largest_by_file_bytes"] = largest.by_file
            measured["traced_retained_by_file_bytes"] = retained
        else:
            with RSSSampler() as sampler:
                success = job.commit_job(results)
            measured["rss_baseline_bytes"] = sampler.baseline
            measured["rss_peak_bytes"] = sampler.peak
            measured["rss_growth_bytes"] = sampler.growth
            measured["rss_peak_at_ms"] = round(sampler.peak_at * 1000)
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
        peak_at = measured.get("rss_peak_at_ms", 0)
        measured["rss_peak_phase"] = next(
            (phase["name"] for phase in measured["phases"] if phase["start"] <= peak_at <= phase["end"]),
            "outside the recorded phases (setup or cleanup)",
        )
    measured["load_after"] = load_average()
    return measured


class _LargestHeap:
    """While the block runs, the Python heap by allocating file at the largest it was sampled
    (every `interval` s): what holds job commit's peak, where tracemalloc gives only its size."""

    def __init__(self, interval: float = 2.0) -> None:
        self.interval = interval
        self.by_file: dict[str, int] = {}
        self._largest = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            current, _ = tracemalloc.get_traced_memory()
            if current > self._largest:
                self._largest = current
                self.by_file = _by_file(tracemalloc.take_snapshot())

    def __enter__(self) -> _LargestHeap:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def _by_file(snapshot: tracemalloc.Snapshot, top: int = 12) -> dict[str, int]:
    """The `top` files that allocated what `snapshot` holds, relative to the repository."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    return {
        stat.traceback[0].filename.removeprefix(root): stat.size
        for stat in snapshot.statistics("filename")[:top]
    }


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


def point(measured: dict[str, Any]) -> dict[str, Any]:
    """One measured `commit` as a point of the curve (the fields `bench.report.curve_table` shows),
    with the phase that took longest."""
    phases = measured.get("phases") or []
    longest = max(phases, key=lambda phase: phase["end"] - phase["start"], default=None)
    total = sum(phase["end"] - phase["start"] for phase in phases) or 1
    return {
        "axis": "files",
        "committer": measured["committer"],
        "store": "local files" if measured["committer"] in LOCAL_COMMITTERS else "S3 stand-in, own process",
        "files": measured["files"],
        "partitions": measured["partitions"],
        "tasks": measured["tasks"],
        "seconds": measured["seconds"],
        "cpu_seconds": measured["cpu_seconds"],
        "requests_per_file": measured["requests_per_file"],
        "rss_growth_mb": round(measured["rss_growth_bytes"] / 1e6, 1),
        "rss_baseline_mb": round(measured["rss_baseline_bytes"] / 1e6, 1),
        "pyarrow_start_mb": round(measured["pyarrow_start_rss_bytes"] / 1e6, 1),
        "store_process_rss_growth_mb": (
            round(measured["store_process_rss_growth_bytes"] / 1e6, 1)
            if "store_process_rss_growth_bytes" in measured
            else None
        ),
        "success_bytes": measured["success_bytes"],
        "record_bytes": measured["record_bytes"],
        "counters": measured["requests"],
        "rss_peak_phase": measured.get("rss_peak_phase"),
        "longest_phase": (
            None
            if longest is None
            else f"{longest['name']} ({(longest['end'] - longest['start']) / total:.0%} of the phases' time)"
        ),
        "phases": phases,
    }


def record(out: Path, measured: list[dict[str, Any]], size: str, notes: list[str]) -> Path:
    """Write `<out>/job_commit_memory.json`, a scenario document (checks against `TARGET_MB`, the
    points, `notes`) from `commit`'s JSON lines, and rebuild REPORT.md from every results file."""
    result = ScenarioResult(
        "job_commit_memory",
        "Job commit in bounded memory at 1M files, every committer",
        size,
        1,
        parameters={
            "committers": sorted({m["committer"] for m in measured}),
            "files": sorted({m["files"] for m in measured}),
            "payload_bytes": len(PAYLOAD),
            "threads": THREADS,
            "S3 store": SERVED,
            "local store": "local files under /tmp",
        },
        notes=notes,
    )
    points = [point(m) for m in measured]
    for each in points:
        label = f"{each['committer']}, {each['files']:,} files, {each['tasks']} tasks ({each['store']})"
        result.check(
            f"job commit peak RSS above baseline, {label}",
            unit="MB",
            target=TARGET_MB,
            note="RSS of the process running commit_job, sampled every 5 ms; the stand-in's own growth is "
            "store_process_rss_growth_mb",
        ).values.append(each["rss_growth_mb"])
        result.measure(f"job commit seconds, {label}", each["seconds"])
        result.measure(f"job commit CPU seconds, {label}", each["cpu_seconds"])
        result.measure(f"requests per file, {label}", each["requests_per_file"], "requests/file")
        if each["store_process_rss_growth_mb"] is not None:
            result.measure(
                f"the stand-in process's own RSS growth, {label}", each["store_process_rss_growth_mb"], "MB"
            )
    document = {
        "schema_version": 1,
        **result.to_json(),
        "points": points,
        "started_at": min(m["started_at"] for m in measured),
        "seconds": round(sum(m["seconds"] for m in measured), 1),
        "environment": {
            "host": host_info(),
            "load_before": measured[0].get("load_before", []),
            "load_after": measured[-1].get("load_after", []),
            "threads": THREADS,
            "command": "python -m bench.job_commit_memory prepare, then commit, per point (record: this file)",
        },
    }
    write_json(out / "job_commit_memory.json", document)
    return write_report(out)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.job_commit_memory")
    parser.add_argument("action", choices=("prepare", "commit", "task", "record"))
    parser.add_argument("--dir", help="the job's directory (prepare, commit, task)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results directory (record)")
    parser.add_argument("--size", default="full", help="the size the points are reported as (record)")
    parser.add_argument("--note", action="append", default=[], help="a note of the record (repeatable)")
    parser.add_argument("measured", nargs="*", help="files holding commit's JSON line each (record)")
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--committer", choices=COMMITTERS, default="magic")
    parser.add_argument("--partitions", type=int, default=0)
    parser.add_argument("--conflict-mode", default="append")
    parser.add_argument("--tracemalloc", action="store_true")
    args = parser.parse_intermixed_args()
    if args.action == "record":
        lines = [json.loads(Path(name).read_text().strip().splitlines()[-1]) for name in args.measured]
        print(record(args.out, lines, args.size, args.note))
        return
    if not args.dir:
        parser.error(f"{args.action} needs --dir")
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
