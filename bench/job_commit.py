"""Scenario 1: job commit scaling on S3.

- Time: our job commit (`commit_job`: load the pendingsets, complete every upload, write
  `_SUCCESS`, clean up the job directory), for `magic` (the default on S3; one upload record per
  file in the job directory) and `directory` (staging; one record per task), against a raw boto3
  parallel CompleteMultipartUpload loop at the same concurrency over uploads whose IDs and ETags
  it already holds in memory, as a new user would write it. Target: ratio <= 0.7, reachable only
  because our hot requests go through AWS's CRT (`core/store/s3_crt.py`) while the loop pays
  botocore's ~2 ms of CPU per request under one GIL. `magic-boto3` runs the same commit on boto3's
  request path (the commit before the CRT), for comparison in the same run. The seconds of each
  stage of the commit are recorded too (`bench.stages`).
- Client CPU per committed file (ours) against client CPU per request (the raw loop), from
  `time.process_time` around the commit alone (native CRT threads included). Target: <= 0.25.
  Files per second for each.
- Requests per committed file during job commit (target 1) and CopyObject requests (target 0),
  from the S3 store's own request counters.
- Peak memory of job commit at 100k files (target: at most 100 MB above the baseline). Creating
  100k real uploads would take longer than the whole benchmark, so this part runs the real magic
  committer and the real `S3Store` over an in-process stand-in for the boto3 client
  (`bench.fake_s3`): every line of our code runs, only the server is replaced, so it measures our
  memory, not the endpoint's. Each measurement runs in a fresh child process
  (`bench.job_commit_memory`).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from typing import Any

from airflow_commit_provider.core.committers import CommitOptions, TaskCommitResult, create_committer
from bench import s3_setup
from bench.common import (
    BenchEnv,
    ScenarioResult,
    child_json,
    log,
    new_id,
    requests_in,
    rotated,
    timer,
)
from bench.stages import stage_timer

TARGET_RATIO = 0.7
#: Client CPU per committed file against the raw loop's client CPU per request.
TARGET_CPU_RATIO = 0.25
TARGET_REQUESTS_PER_FILE = 1.0
TARGET_MEMORY_MB = 100.0
PAYLOAD = b"x" * 1024
#: magic keeps one upload record per file in the job directory, the staging committers one per task.
COMMITTERS = ("magic", "directory")
#: Each run: (committer, request path). None is the store's default (the CRT when installed); magic
#: on boto3's request path is the commit as it was before the CRT, measured in the same run.
RUNS: dict[str, tuple[str, str | None]] = {
    "magic": ("magic", None),
    "directory": ("directory", None),
    "magic-boto3": ("magic", "boto3"),
}


def default_request_path(env: BenchEnv) -> str:
    """The request path a store takes by default here (`crt` when awscrt is installed)."""
    store = env.s3.store()
    try:
        return store.hot.name
    finally:
        store.close()


def task_count(files: int) -> int:
    """Tasks for a job of `files` files: at least 32 (so setup runs in parallel), 100 files each beyond."""
    return min(files, max(32, files // 100))


def run(env: BenchEnv) -> ScenarioResult:
    sizes = env.pick(tiny=[20], small=[1000], full=[1000, 10000])
    memory_sizes = env.pick(tiny=[1000], small=[10000, 100000], full=[10000, 100000])
    result = ScenarioResult(
        "job_commit",
        "Job commit scaling (magic and directory committers, embedded S3)",
        env.size,
        env.repeat,
        parameters={
            "files": sizes,
            "memory_files": memory_sizes,
            "threads": env.threads,
            "file_size_bytes": len(PAYLOAD),
            "committers": list(COMMITTERS),
            "runs": {
                name: f"{committer}, {path or 'default'} request path"
                for name, (committer, path) in RUNS.items()
            },
            "default request path": default_request_path(env),
            "baseline": "raw boto3 CompleteMultipartUpload loop, same thread count, IDs and ETags in memory",
        },
    )
    for files in sizes:
        _time_job_commit(env, result, files)
    for files in memory_sizes:
        _memory(env, result, files)
    return result


def _time_job_commit(env: BenchEnv, result: ScenarioResult, files: int) -> None:
    tasks = task_count(files)
    label = f"{files:,} files"
    for name in RUNS:
        default_path = RUNS[name][1] is None
        result.comparison(
            f"{name} job commit, {label}",
            ours_label=f"{name} commit_job",
            baseline_label="raw parallel CompleteMultipartUpload",
            unit="s",
            target=TARGET_RATIO if default_path else None,
            group="job_commit",
        )
        result.comparison(
            f"{name} client CPU per committed file, {label}",
            ours_label=f"{name} commit_job, CPU per file",
            baseline_label="raw loop, CPU per request",
            unit="ms",
            target=TARGET_CPU_RATIO if default_path else None,
            group="job_commit_cpu",
        )
    for rep in range(env.repeat):
        log(f"job_commit: {label}, repetition {rep + 1}/{env.repeat}: setting up fresh sets")
        buckets = {name: env.new_bucket(f"jc-{name.replace('-', '')}") for name in (*RUNS, "raw")}
        setup_store = env.s3.store(max_pool_connections=s3_setup.SETUP_THREADS + 4)
        setup_client = s3_setup.raw_client(env.s3, s3_setup.SETUP_THREADS)
        try:
            jobs = {}
            for name, (committer, _path) in RUNS.items():
                with timer() as setup:
                    jobs[name] = ours_pending_job(env, committer, setup_store, buckets[name], files)
                result.measure(f"setup seconds ({name} tasks), {label}", setup())
            with timer() as setup:
                uploads = s3_setup.create_raw_uploads(setup_client, buckets["raw"], "out", files, PAYLOAD)
            result.measure(f"setup seconds (raw uploads), {label}", setup())

            order = rotated([*RUNS, "raw"], rep)
            seconds: dict[str, float] = {}
            cpu: dict[str, float] = {}
            counters: dict[str, dict[str, int]] = {}
            phases: dict[str, dict[str, float]] = {}
            for name in order:
                if name == "raw":
                    seconds[name], cpu[name] = _raw_complete(env, buckets["raw"], uploads)
                else:
                    committer, request_path = RUNS[name]
                    destination, job_id, results = jobs[name]
                    seconds[name], cpu[name], counters[name], phases[name] = ours_job_commit(
                        env, committer, request_path, destination, job_id, results, files
                    )
                result.measure(f"client CPU seconds ({name}), {label}", cpu[name])
                result.measure(f"files per second ({name}), {label}", files / seconds[name], "files/s")
            for name in RUNS:
                result.comparison(f"{name} client CPU per committed file, {label}").add(
                    cpu[name] / files * 1000, cpu["raw"] / files * 1000
                )
                _record(
                    result,
                    name,
                    label,
                    files,
                    tasks,
                    seconds[name],
                    seconds["raw"],
                    counters[name],
                    phases[name],
                )
                log(
                    f"job_commit: {label}: {name} {seconds[name]:.2f} s, raw {seconds['raw']:.2f} s "
                    f"(ratio {seconds[name] / seconds['raw']:.2f}); client CPU {cpu[name]:.2f} s, "
                    f"raw {cpu['raw']:.2f} s (ratio {cpu[name] / cpu['raw']:.2f}); phases {phases[name]}; requests {counters[name]}"
                )
        finally:
            setup_store.close()
            setup_client.close()
            for bucket in buckets.values():
                env.drop_bucket(bucket)


def ours_pending_job(
    env: BenchEnv, committer: str, store: Any, bucket: str, files: int
) -> tuple[str, str, list[TaskCommitResult]]:
    """A job of ours in `bucket` whose `task_count(files)` tasks ran and committed `files` files of
    PAYLOAD, ready for job commit: (destination, job ID, the task results)."""
    job_id, destination = new_id("job"), f"s3://{bucket}/out"
    tasks = task_count(files)
    results = s3_setup.task_outputs(
        committer, store, destination, job_id, files, -(-files // tasks), PAYLOAD, env.work_dir
    )
    return destination, job_id, results


def _record(
    result: ScenarioResult,
    name: str,
    label: str,
    files: int,
    tasks: int,
    seconds: float,
    raw_seconds: float,
    counters: dict[str, int],
    phases: dict[str, float],
) -> None:
    result.comparison(f"{name} job commit, {label}").add(seconds, raw_seconds)
    result.check(
        f"{name}: CompleteMultipartUpload per committed file at job commit, {label}",
        unit="requests/file",
        target=TARGET_REQUESTS_PER_FILE,
        note="the only requests whose number grows with the files, besides 1/1000 List+Delete per record",
    ).values.append(counters.get("op_multipart_complete", 0) / files)
    result.check(
        f"{name}: all requests per committed file at job commit, {label}",
        unit="requests/file",
        note=f"1 + (one manifest GET per task ({tasks} tasks), cleanup listing/deletes, ~10 per job) / files",
    ).values.append(requests_in(counters) / files)
    result.check(
        f"{name}: CopyObject requests at job commit, {label}", unit="requests", target=0
    ).values.append(counters.get("op_copy", 0))
    for op, count in counters.items():
        if op.startswith("op_"):
            result.measure(f"{name}: {op} per file at job commit, {label}", count / files, "requests/file")
    for phase, value in phases.items():
        result.measure(f"{name}: {phase} seconds, {label}", value)


def ours_job_commit(
    env: BenchEnv,
    committer_name: str,
    request_path: str | None,
    destination: str,
    job_id: str,
    results: list[TaskCommitResult],
    files: int,
    cpu_clock: Callable[[], float] = time.process_time,
) -> tuple[float, float, dict[str, int], dict[str, float]]:
    """Our job commit with a fresh store and committer, as a driver has after the tasks ran:
    seconds, client CPU seconds (on `cpu_clock`), the store's request counters, and the seconds of
    each stage."""
    store = env.s3.store(max_pool_connections=env.threads + 4, request_path=request_path)
    try:
        committer = create_committer(
            committer_name, store, destination, job_id, CommitOptions(threads=env.threads)
        )
        store.hot  # noqa: B018 - create the clients now: a driver has them since job setup
        before = store.statistics.snapshot()
        with stage_timer() as phases, timer() as elapsed, timer(cpu_clock) as cpu:
            success = committer.commit_job(results)
        counters = store.statistics.counters_since(before).counters
    finally:
        store.close()
    if success.file_count != files:
        raise RuntimeError(f"job commit committed {success.file_count} files, expected {files}")
    return elapsed(), cpu(), counters, phases


def _raw_complete(env: BenchEnv, bucket: str, uploads: list[s3_setup.RawUpload]) -> tuple[float, float]:
    """The baseline with a fresh client configured like the committer's store: seconds, CPU seconds."""
    client = s3_setup.raw_client(env.s3, env.threads)
    try:
        with timer() as elapsed, timer(time.process_time) as cpu:
            s3_setup.complete_raw(client, bucket, uploads, env.threads)
    finally:
        client.close()
    return elapsed(), cpu()


def _memory(env: BenchEnv, result: ScenarioResult, files: int) -> None:
    label = f"{files:,} files"
    growth = result.check(
        f"job commit peak RSS above baseline, {label}",
        unit="MB",
        target=TARGET_MEMORY_MB,
        note="S3Store over an in-process S3 stand-in; fresh process per run; RSS sampled every 5 ms",
    )
    tasks = max(10, files // 1000)
    with tempfile.TemporaryDirectory(prefix="bench-jc-memory-", dir=env.work_dir) as work:
        log(f"job_commit: preparing a {label} job ({tasks} tasks) for the memory measurement")
        _child(["prepare", "--dir", work, "--files", str(files), "--tasks", str(tasks)])
        runs = [False] * env.repeat + [True]  # one more run traces the Python heap instead
        for index, traced in enumerate(runs):
            measured = _child(["commit", "--dir", work, *(["--tracemalloc"] if traced else [])])
            log(f"job_commit: memory {label} run {index + 1}/{len(runs)}: {measured}")
            if traced:
                result.check(
                    f"job commit Python heap peak (tracemalloc), {label}",
                    unit="MB",
                    note="one extra run under tracemalloc: Python heap allocations during commit_job",
                ).values.append(measured["tracemalloc_peak_bytes"] / 1e6)
            else:
                growth.values.append(measured["rss_growth_bytes"] / 1e6)
                result.measure(f"job commit seconds, {label} (in-process S3 stand-in)", measured["seconds"])
                result.measure(f"RSS before job commit, {label}", measured["rss_baseline_bytes"] / 1e6, "MB")


def _child(args: list[str]) -> dict:
    return child_json("bench.job_commit_memory", args)
