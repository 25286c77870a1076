"""Child process for the `scale` scenario: one point of the curve, prepared in one process and
measured in a fresh one, so no memory carries over from setup or from another point.

    python -m bench.scale_point prepare --spec SPEC.json
    python -m bench.scale_point measure --spec SPEC.json

SPEC.json is a `PointSpec` (committer, store, destination, job ID, files, tasks, partitions, a work
directory). `prepare` sets the job up and runs its tasks through the real task path
(`setup_task`, `create_file`, write 1 KiB, close, `commit_task`), saving the task results (and,
on the in-process store, its objects) in the work directory. `measure` loads them, runs
`commit_job` in this fresh process and prints one JSON line (`measure_point`): wall and CPU
seconds, requests, peak RSS growth (pyarrow is started before the baseline and its fixed cost
reported apart, `bench.common.start_pyarrow`), the stored sizes (None for a file the store does
not hold), one sensor poke (and the file it judged), the report's first page and the job record's
`phases`.

The stores: ``s3`` is the embedded S3 (endpoint and credentials come in the environment, never on
the command line), ``in-process`` the real `S3Store` over `bench.fake_s3`'s stand-in for the
boto3 client (labelled as such wherever it is reported), ``local`` the local filesystem.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from airflow_commit_provider.core.committers import CommitOptions, TaskCommitResult, create_committer
from airflow_commit_provider.core.job_records import job_record_path
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.core.store.s3 import S3Store
from airflow_commit_provider.report.commit_report import load_commit
from airflow_commit_provider.success.check import SuccessExpectations, success_path
from bench.common import RSSSampler, requests_in, start_pyarrow, timer
from bench.fake_s3 import FakeS3Client

STORES = ("s3", "in-process", "local")
PAYLOAD = b"x" * 1024
#: Threads that run tasks during `prepare`: SeaweedFS and the disk overlap requests; the in-process
#: store is all Python under one GIL, where more threads only add switching.
PREPARE_THREADS = {"s3": 32, "in-process": 1, "local": 4}


@dataclass(frozen=True)
class PointSpec:
    committer: str
    store: str
    destination: str
    job_id: str
    files: int
    tasks: int
    partitions: int
    work_dir: str
    threads: int = 16
    conflict_mode: str = "append"

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def load(cls, path: str | Path) -> PointSpec:
        return cls(**json.loads(Path(path).read_text()))

    @property
    def results_file(self) -> Path:
        return Path(self.work_dir) / "results.json"

    @property
    def objects_file(self) -> Path:
        return Path(self.work_dir) / "objects.pickle"

    def options(self) -> CommitOptions:
        return CommitOptions(
            threads=self.threads,
            conflict_mode=self.conflict_mode,  # type: ignore[arg-type]  # checked by CommitOptions
            local_staging_dir=str(Path(self.work_dir) / "staging"),
        )


def file_name(index: int, task: int, partitions: int) -> str:
    """The `index`-th file of the job, written by `task`: spread over `partitions` partitions by
    index, so each task writes into many partitions (an unsorted write, the harder case)."""
    return f"p={index % partitions:05d}/part-{task:05d}-{index:07d}.bin"


def open_store(spec: PointSpec, *, threads: int) -> Store:
    if spec.store == "s3":
        return S3Store(max_pool_connections=threads + 4)  # endpoint and credentials: the environment
    if spec.store == "in-process":
        return S3Store(client=FakeS3Client.load(str(spec.objects_file)))
    if spec.store == "local":
        return LocalStore()
    raise ValueError(f"store {spec.store!r} is not one of {', '.join(STORES)}")


def prepare(spec: PointSpec) -> dict[str, Any]:
    """Set up the job and run its tasks; save what `measure` needs. Not measured."""
    threads = PREPARE_THREADS[spec.store]
    fake = FakeS3Client() if spec.store == "in-process" else None
    store = S3Store(client=fake) if fake is not None else open_store(spec, threads=threads)
    try:
        committer = create_committer(spec.committer, store, spec.destination, spec.job_id, spec.options())
        committer.setup_job()
        per_task = -(-spec.files // spec.tasks)

        def run_task(task: int) -> TaskCommitResult:
            attempt = committer.task_attempt(task, 0)
            attempt.setup_task()
            for index in range(task * per_task, min(spec.files, (task + 1) * per_task)):
                with attempt.create_file(file_name(index, task, spec.partitions)) as stream:
                    stream.write(PAYLOAD)
            return attempt.commit_task()

        with ThreadPoolExecutor(threads, thread_name_prefix="task") as pool:
            results = list(pool.map(run_task, range(spec.tasks)))
        spec.results_file.write_text(json.dumps([result.to_json() for result in results]))
        if fake is not None:
            fake.save(str(spec.objects_file))
    finally:
        store.close()
    return {"tasks": len(results), "files": sum(result.files for result in results)}


def count_bytes_read(store: Store) -> Callable[[], int]:
    """Make `store` count the bytes its reads return; the returned function gives the count so far.

    Every public `read*` method of the store is wrapped on this instance (whatever reads a sensor's
    check comes to use: whole files, bounded reads, ranges); a method returning a stream counts
    what is read from it. Only the outermost call counts, so a read made of another read (the
    base `Store.read_bytes_within` reads with `read_bytes`) is counted once.
    """
    total, depth = [0], [0]

    def counting_call(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            depth[0] += 1
            try:
                value = method(*args, **kwargs)
            finally:
                depth[0] -= 1
            if depth[0] == 0:
                if isinstance(value, (bytes, bytearray, memoryview)):
                    total[0] += len(value)
                elif value is not None and hasattr(value, "read"):
                    value.read = counting_read(value.read)
            return value

        return call

    def counting_read(read: Callable[..., bytes]) -> Callable[..., bytes]:
        def counting(*args: Any) -> bytes:
            data = read(*args)
            total[0] += len(data)
            return data

        return counting

    for name in dir(type(store)):
        if name.startswith(("read", "open_read")) and callable(getattr(store, name)):
            setattr(store, name, counting_call(getattr(store, name)))
    return lambda: total[0]


def _size(store: Store, path: StorePath) -> int | None:
    status = store.get_status(path)
    return None if status is None else status.size


def measure_point(spec: PointSpec) -> dict[str, Any]:
    """Job commit of the prepared job, then what a reader of it pays; one JSON-able dict."""
    results = [TaskCommitResult.from_json(item) for item in json.loads(spec.results_file.read_text())]
    store = open_store(spec, threads=spec.threads)
    try:
        committer = create_committer(spec.committer, store, spec.destination, spec.job_id, spec.options())
        if isinstance(store, S3Store):
            store.hot  # noqa: B018 - create the clients now: a driver has them since job setup
        pyarrow_start = start_pyarrow()
        gc.collect()
        before = store.statistics.snapshot()
        with RSSSampler() as rss, timer() as wall, timer(time.process_time) as cpu:
            success = committer.commit_job(results)
        counters = store.statistics.counters_since(before).counters
        if success.file_count != spec.files:
            raise RuntimeError(f"job commit committed {success.file_count} files, expected {spec.files}")
        measured: dict[str, Any] = {
            "seconds": wall(),
            "cpu_seconds": cpu(),
            # A local rename is the manifest committer's one operation per file (S3 has none).
            "requests": requests_in(counters) + counters.get("op_rename", 0),
            "counters": counters,
            "rss_baseline_bytes": rss.baseline,
            "rss_growth_bytes": rss.growth,
            "pyarrow_start_rss_bytes": pyarrow_start,
            **stored_sizes(store, spec),
            **sensor_poke(store, spec),
        }
        with timer() as page:
            report = load_commit(store, spec.destination, spec.job_id, page=0)
        measured["report_page_seconds"] = page()
        measured["report_listed_files"] = report.listed_files
        # The job record's timeline of the commit just measured: what each phase took and asked.
        measured["phases"] = [phase.to_json() for phase in report.phases]
    finally:
        store.close()
    return measured


def stored_sizes(store: Store, spec: PointSpec) -> dict[str, Any]:
    """Bytes of what the commit left for readers: `_SUCCESS`, the job record, and the lists kept
    beside them under `_airflow_commit/<jobId>/` (`docs/bounded-commits.md`; none before them)."""
    destination = StorePath.parse(spec.destination)
    lists = JobLayout(destination, spec.job_id).records_dir.join(spec.job_id)
    return {
        "success_bytes": _size(store, success_path(destination)),
        "record_bytes": _size(store, job_record_path(destination, spec.job_id)),
        "lists_bytes": sum(status.size for status in store.list_files(lists)),
    }


def sensor_poke(store: Store, spec: PointSpec) -> dict[str, Any]:
    """One poke of the sensor waiting for this job: the real check, on a store counting its reads."""
    bytes_read = count_bytes_read(store)
    before = store.statistics.snapshot()
    with timer() as elapsed:
        check = SuccessExpectations(job_id=spec.job_id).check(store, spec.destination)
    if check.state != "accepted":
        raise RuntimeError(f"the sensor's check of {spec.destination} says: {check.describe()}")
    counters = store.statistics.counters_since(before).counters
    return {
        "poke_bytes": bytes_read(),
        "poke_requests": requests_in(counters),
        "poke_seconds": elapsed(),
        # The check falls back to the job's record when no `_SUCCESS` names the job: then the
        # poke's bytes are the record's, and the point says so (a 1M-file `_SUCCESS` the
        # stand-in once lost was measured that way).
        "poke_source": check.source,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_point")
    parser.add_argument("action", choices=("prepare", "measure"))
    parser.add_argument("--spec", required=True, help="the point's PointSpec as a JSON file")
    args = parser.parse_args(argv)
    spec = PointSpec.load(args.spec)
    print(json.dumps(prepare(spec) if args.action == "prepare" else measure_point(spec)))


if __name__ == "__main__":
    main()
