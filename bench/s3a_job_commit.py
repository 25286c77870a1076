"""Scenario: job commit at 1k and 10k files, ours against Hadoop's S3A committers, on one store.

Each side is handed a job whose tasks already ran and committed (`files` pending uploads of 1 KiB in
`job_commit.task_count(files)` tasks, each run fresh in a bucket of its own), and only the job
commit is measured, as the driver runs it after the last task:

- ours: `commit_job` of `magic` and `directory` (`job_commit.ours_job_commit`, tasks set up by
  `s3_setup.task_outputs`);
- Hadoop's: `commitJob` of S3A's magic and directory committers (what Spark's
  PathOutputCommitProtocol.commitJob calls), in the Spark JVM through py4j and Hadoop's MapReduce
  API. Their tasks ran for real in the same JVM: each attempt was set up, wrote its files through
  the committer's work path (magic: under `__magic_job-<id>/` on S3, so closing a file starts its
  upload, uploads the part and saves a `.pending`; directory: local files, uploaded at task commit)
  and committed (one `.pendingset` per task).

Both job commits load the task records, complete every upload, write `_SUCCESS` and clean up;
both get the same thread count (ours `threads`, S3A `fs.s3a.committer.threads`). Measured: wall
time; client CPU (`BenchEnv.client_cpu`, the same clock for both: during our commit the JVM idles,
during S3A's the Python does); the S3 server's CPU (`BenchEnv.server_cpu`); requests per committed
file (ours: its store's counters; S3A: its filesystem's `store_io_request`); bytes copied. Target:
ours at most 0.5x of S3A's time.
S3A's partitioned committer commits a job as its directory committer does (it differs only in how
conflicts resolve, none in append mode), so it is not run separately.
"""

from __future__ import annotations

import math
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from airflow_commit_provider.spark.jvm_committers import jvm_committer_conf
from airflow_commit_provider.spark.session_conf import runtime_key
from airflow_commit_provider.success.check import load_success
from bench import s3_setup
from bench.common import (
    REQUEST_COUNTERS,
    BenchEnv,
    ScenarioResult,
    log,
    requests_in,
    rotated,
    spark_jvm,
    timer,
)
from bench.job_commit import PAYLOAD, ours_job_commit, ours_pending_job, task_count
from bench.jvm_peers import S3A_BYTES_COPIED, S3A_COMMITS, S3A_REQUEST_KINDS, S3A_REQUESTS, s3a_statistics

TARGET_RATIO = 0.5
COMMITTERS = ("magic", "directory")
SIDES = ("ours", "S3A")


@dataclass
class Commit:
    """One measured job commit."""

    seconds: float
    cpu: float
    requests: int
    copied: int
    counters: dict[str, int]
    diagnostics: dict[str, str] = field(default_factory=dict)
    """S3A's `_SUCCESS` diagnostics: the thread and connection counts its commit ran with."""
    server_cpu: float = 0.0
    """CPU seconds the S3 server spent meanwhile."""


@dataclass
class S3AJob:
    """A Hadoop job whose tasks have committed: the driver's committer and the job's context."""

    committer: Any
    context: Any
    bucket: str


def run(env: BenchEnv) -> ScenarioResult:
    sizes = env.pick(tiny=[20], small=[1000], full=[1000, 10000])
    result = ScenarioResult(
        "s3a_job_commit",
        "Job commit, ours against Hadoop's S3A committers (embedded S3)",
        env.size,
        env.repeat,
        parameters={
            "files": sizes,
            "tasks": {files: task_count(files) for files in sizes},
            "file_size_bytes": len(PAYLOAD),
            "committers": list(COMMITTERS),
            "threads": env.threads,
            "ours": "commit_job (fresh store, default request path)",
            "baseline": "S3A committer commitJob in the Spark JVM (py4j), fs.s3a.committer.threads = threads",
            "client CPU": "driver Python + Spark JVM + its Python workers, /proc/<pid>/stat",
        },
    )
    for files in sizes:
        for rep in range(env.repeat):
            _repetition(env, result, files, rep)
    return result


def _repetition(env: BenchEnv, result: ScenarioResult, files: int, rep: int) -> None:
    label = f"{files:,} files"
    tasks = task_count(files)
    runs = [(side, committer) for committer in COMMITTERS for side in SIDES]
    buckets = {run: env.new_bucket(f"s3ajc-{run[0].lower()}-{run[1][:3]}") for run in runs}
    setup_store = env.s3.store(max_pool_connections=s3_setup.SETUP_THREADS + 4)
    log(f"s3a_job_commit: {label}, repetition {rep + 1}/{env.repeat}: running the tasks of four jobs")
    try:
        jobs: dict[tuple[str, str], Any] = {}
        for side, committer in runs:
            with timer() as setup:
                if side == "ours":
                    jobs[side, committer] = ours_pending_job(
                        env, committer, setup_store, buckets[side, committer], files
                    )
                else:
                    jobs[side, committer] = s3a_tasks(env, committer, buckets[side, committer], files, tasks)
            result.measure(f"setup seconds ({side} {committer} tasks), {label}", setup())
        order = rotated(runs, rep)
        commits: dict[tuple[str, str], Commit] = {}
        for side, committer in order:
            with timer(env.server_cpu) as server_cpu:
                if side == "ours":
                    destination, job_id, results = jobs[side, committer]
                    seconds, cpu, counters, _phases = ours_job_commit(
                        env, committer, None, destination, job_id, results, files, cpu_clock=env.client_cpu
                    )
                    requests, copied = requests_in(counters), counters.get("bytes_copied", 0)
                    commits[side, committer] = Commit(seconds, cpu, requests, copied, counters)
                else:
                    commits[side, committer] = s3a_commit(env, jobs[side, committer], files)
            commits[side, committer].server_cpu = server_cpu()
        for committer in COMMITTERS:
            _record(result, committer, label, files, commits["ours", committer], commits["S3A", committer])
            result.parameters[f"S3A {committer} diagnostics"] = commits["S3A", committer].diagnostics
    finally:
        setup_store.close()
        for bucket in buckets.values():
            env.drop_bucket(bucket)


def s3a_tasks(env: BenchEnv, committer: str, bucket: str, files: int, tasks: int) -> S3AJob:
    """Set up a Hadoop job with S3A's `committer` and run its tasks for real, many at once."""
    spark = env.s3a_spark
    jvm = spark_jvm(spark)
    mapreduce = jvm.org.apache.hadoop.mapreduce
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    # One unique job ID for the driver and every task, as Spark gives each write.
    for key, value in jvm_committer_conf(f"s3a://{bucket}/out", committer, job_id=str(uuid.uuid4())).items():
        conf.set(runtime_key(key), value)
    output = jvm.org.apache.hadoop.fs.Path(f"s3a://{bucket}/out")
    job_id = mapreduce.JobID(uuid.uuid4().hex[:12], 1)
    factory = mapreduce.lib.output.PathOutputCommitterFactory

    def attempt_context(task: int) -> Any:
        task_id = mapreduce.TaskID(job_id, mapreduce.TaskType.MAP, task)
        return mapreduce.task.TaskAttemptContextImpl(conf, mapreduce.TaskAttemptID(task_id, 0))

    # As Spark's HadoopMapReduceCommitProtocol: the driver's committer is made for attempt 0 of task 0.
    job_context = mapreduce.task.JobContextImpl(conf, job_id)
    driver = factory.createCommitter(output, attempt_context(0))
    driver.setupJob(job_context)
    per_task = math.ceil(files / tasks)

    def run_task(task: int) -> None:
        context = attempt_context(task)
        task_committer = factory.createCommitter(output, context)
        task_committer.setupTask(context)
        work = task_committer.getWorkPath()
        filesystem = work.getFileSystem(conf)
        for index in range(task * per_task, min(files, (task + 1) * per_task)):
            stream = filesystem.create(
                jvm.org.apache.hadoop.fs.Path(work, f"part-{task:05d}-{index:06d}.bin"), True
            )
            stream.write(PAYLOAD)
            stream.close()
        task_committer.commitTask(context)

    with ThreadPoolExecutor(s3_setup.SETUP_THREADS, thread_name_prefix="s3a-task") as pool:
        for _ in pool.map(run_task, range(tasks)):
            pass
    return S3AJob(driver, job_context, bucket)


def s3a_commit(env: BenchEnv, job: S3AJob, files: int) -> Commit:
    """S3A's job commit, timed alone; its requests from the filesystem's counters."""
    spark = env.s3a_spark
    before = s3a_statistics(spark, job.bucket).counters
    with timer() as elapsed, timer(env.client_cpu) as cpu:
        job.committer.commitJob(job.context)
    counters = s3a_statistics(spark, job.bucket).counters_since(before).counters
    with env.s3.store().session() as store:
        success = load_success(store, f"s3://{job.bucket}/out")
    committed = success.iostatistics.counters.get(S3A_COMMITS, 0)
    if committed != files:
        raise RuntimeError(f"S3A job commit committed {committed} files, expected {files}")
    requests, copied = counters.get(S3A_REQUESTS, 0), counters.get(S3A_BYTES_COPIED, 0)
    return Commit(elapsed(), cpu(), requests, copied, counters, success.diagnostics)


def _record(
    result: ScenarioResult, committer: str, label: str, files: int, ours: Commit, s3a: Commit
) -> None:
    for what, unit, mine, theirs, target in (
        ("job commit", "s", ours.seconds, s3a.seconds, TARGET_RATIO),
        ("job commit client CPU per file", "ms", ours.cpu / files * 1000, s3a.cpu / files * 1000, None),
        ("job commit requests per file", "requests/file", ours.requests / files, s3a.requests / files, None),
    ):
        result.comparison(
            f"{committer} {what}, {label}",
            ours_label=f"ours {committer} commit_job",
            baseline_label=f"S3A {committer} commitJob",
            unit=unit,
            target=target,
            group="s3a_job_commit",
        ).add(mine, theirs)
    for side, commit in (("ours", ours), ("S3A", s3a)):
        name = f"{side} {committer}"
        result.measure(f"job commit seconds ({name}), {label}", commit.seconds)
        result.measure(f"client CPU seconds ({name}), {label}", commit.cpu)
        result.measure(f"S3 server CPU seconds ({name}), {label}", commit.server_cpu)
        result.check(
            f"{name}: bytes copied at job commit, {label}", unit="bytes", target=0 if side == "ours" else None
        ).values.append(commit.copied)
        for op in REQUEST_COUNTERS if side == "ours" else S3A_REQUEST_KINDS:
            if commit.counters.get(op):
                result.measure(
                    f"{name}: {op} per file at job commit, {label}",
                    commit.counters[op] / files,
                    "requests/file",
                )
    log(
        f"s3a_job_commit: {label}: {committer}: ours {ours.seconds:.2f} s, S3A {s3a.seconds:.2f} s "
        f"(ratio {ours.seconds / s3a.seconds:.2f}); client CPU ours {ours.cpu:.2f} s, S3A {s3a.cpu:.2f} s; "
        f"server CPU ours {ours.server_cpu:.2f} s, S3A {s3a.server_cpu:.2f} s; "
        f"requests/file ours {ours.requests / files:.3f}, S3A {s3a.requests / files:.3f}"
    )
