"""Scenario: the curve (issue 28, item 7): job commit as the files and the partitions of one job grow.

The files axis: 1k, 10k and 100k files on the embedded S3 (magic, and partitioned in `replace`
mode), the manifest committer on local files at the same counts and at 1M, and 1M files for magic
and partitioned on the in-process stand-in for S3 (`bench.fake_s3`, labelled "in-process" wherever
it appears: creating a million real uploads on SeaweedFS would take hours). Files are spread over
`FILES_AXIS_PARTITIONS` partitions.

The partitions axis: 10, 1k and 10k partitions at `PARTITIONS_AXIS_FILES` (10k) files, the same
committers and stores. 10k files is the fewest at which 10k partitions each hold a file, so the
per-partition costs (markers, stats, conflict listings) meet no fewer files than partitions, while
the per-file costs stay small beside them; at 100k files every point would spend ten minutes
creating uploads on the embedded S3. The 10-partition point is the files axis's 10k point.

Each point is prepared in one child process and measured in a fresh one (`bench.scale_point`),
so no memory carries over. Measured per point: wall and CPU seconds of `commit_job` (the child's
`time.process_time`), requests per file (the store's counters), peak RSS growth, the bytes of
`_SUCCESS`, of the job record and of the lists beside them, the bytes and requests of one sensor
poke (`SuccessExpectations.check` on a store counting what it reads), and the seconds of the
report's first page (`load_commit`). Baselines from the same run, alternating with ours: the raw
boto3 CompleteMultipartUpload loop (`s3_setup.complete_raw`, same threads; over the in-process
stand-in at 1M), a raw `os.rename` loop for the local files, and S3A's magic `commitJob` on the
embedded S3 (`bench.s3a_job_commit`, whose `_SUCCESS` is also the baseline for the stored bytes and
the poke; it needs a Spark session, so `--size tiny` leaves it out). Points up to 1,000 files run
`--repeat` times, larger ones once: each repetition needs fresh uploads, about a minute per 10k
files on the embedded S3. The levels run from the cheapest to the slowest (the 1M-file points
one committer at a time, magic first, after the small levels and the partitions axis), and each
point's summary is logged as it is measured (`scale point: {...}`), so an interrupted run still
tells its points.

Sizes: `tiny` (the smoke test) has every kind of level at 100-1,000 files and no S3A; `small` has
1k and 10k files on the embedded S3 (S3A at 1k) and local files, both partition counts, and 1M
files for magic on the in-process store: about 30 minutes on a quiet 2-core host, most of it
creating 100k uploads on the embedded S3 and 1M in process. `full` adds partitioned at 1M, S3A at
10k and 100k, 100k files on the embedded S3 (400k uploads with the baselines) and 100k and 1M local
files: about 2 hours more.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from airflow_commit_provider.core.formats.success import SENSOR_READ_BYTES
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.success.check import SuccessExpectations, success_path
from bench import s3_setup
from bench.common import REPO_ROOT, BenchEnv, ScenarioResult, log, rotated, timer
from bench.fake_s3 import FakeS3Client
from bench.job_commit import task_count
from bench.s3a_job_commit import s3a_commit, s3a_tasks
from bench.scale_point import PAYLOAD, PointSpec, count_bytes_read

#: Partitions of every point on the files axis.
FILES_AXIS_PARTITIONS = 10
#: Files of every point on the partitions axis (the module docstring says why).
PARTITIONS_AXIS_FILES = 10_000
S3_COMMITTERS = ("magic", "partitioned")
LOCAL_COMMITTERS = ("manifest",)
#: The partitioned committer runs in `replace` mode: its per-partition conflict handling is what
#: grows with the partitions (issue 28, item 4); the others only append.
CONFLICT_MODES = {"partitioned": "replace"}
#: The S3A committer whose `commitJob` is the baseline (S3A's directory and partitioned committers
#: commit a job the same way, `bench.s3a_job_commit` says).
S3A_COMMITTER = "magic"
TARGET_MEMORY_MB = 100.0
#: One ranged GET per sensor poke, of at most `SENSOR_READ_BYTES` (`docs/bounded-commits.md`).
TARGET_POKE_REQUESTS = 1
STORE_LABELS = {"s3": "embedded S3", "in-process": "in-process S3 stand-in", "local": "local files"}
RAW_LABELS = {
    "s3": "raw boto3 CompleteMultipartUpload loop",
    "in-process": "raw CompleteMultipartUpload loop over the in-process stand-in",
    "local": "raw os.rename loop",
}


@dataclass(frozen=True)
class Level:
    """Points measured together, alternating with their baselines: one store, one size."""

    axis: str
    store: str
    files: int
    partitions: int
    committers: tuple[str, ...]
    s3a: bool = False

    @property
    def label(self) -> str:
        where = STORE_LABELS[self.store]
        return f"{self.files:,} files, {self.partitions:,} partitions ({where})"

    @property
    def tasks(self) -> int:
        return task_count(self.files)


@dataclass
class PointValues:
    """What one point measured in each repetition, ours and its baselines."""

    level: Level
    committer: str
    ours: list[dict[str, Any]] = field(default_factory=list)
    raw: list[tuple[float, float]] = field(default_factory=list)
    """(seconds, CPU seconds) of the raw loop in each repetition."""
    s3a: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The point as the report's curve table and chart read it: medians over the repetitions."""

        def mid(values: list[Any]) -> float | None:
            present = [value for value in values if value is not None]
            return median(present) if present else None

        level, files = self.level, self.level.files
        return {
            "axis": level.axis,
            "committer": self.committer,
            "store": STORE_LABELS[level.store],
            "files": files,
            "partitions": level.partitions,
            "tasks": level.tasks,
            "repetitions": len(self.ours),
            "seconds": mid([m["seconds"] for m in self.ours]),
            "cpu_seconds": mid([m["cpu_seconds"] for m in self.ours]),
            "requests_per_file": mid([m["requests"] / files for m in self.ours]),
            "rss_growth_mb": mid([m["rss_growth_bytes"] / 1e6 for m in self.ours]),
            "pyarrow_start_mb": mid([m["pyarrow_start_rss_bytes"] / 1e6 for m in self.ours]),
            "success_bytes": mid([m["success_bytes"] for m in self.ours]),
            "record_bytes": mid([m["record_bytes"] for m in self.ours]),
            "lists_bytes": mid([m["lists_bytes"] for m in self.ours]),
            "poke_bytes": mid([m["poke_bytes"] for m in self.ours]),
            "poke_requests": mid([m["poke_requests"] for m in self.ours]),
            "poke_source": ", ".join(sorted({m["poke_source"] for m in self.ours})),
            "report_page_seconds": mid([m["report_page_seconds"] for m in self.ours]),
            # Not a median: the job record's phases (name, start and end in epoch ms, requests)
            # of the last repetition, which is the only one above 1,000 files.
            "phases": self.ours[-1]["phases"] if self.ours else [],
            "raw_label": RAW_LABELS[level.store],
            "raw_seconds": mid([seconds for seconds, _ in self.raw]),
            "raw_cpu_seconds": mid([cpu for _, cpu in self.raw]),
            "s3a_seconds": mid([m["seconds"] for m in self.s3a]),
            "s3a_cpu_seconds": mid([m["cpu_seconds"] for m in self.s3a]),
            "s3a_success_bytes": mid([m["success_bytes"] for m in self.s3a]),
            "s3a_poke_bytes": mid([m["poke_bytes"] for m in self.s3a]),
        }


@dataclass
class CurveResult(ScenarioResult):
    """A scenario result that also carries the curve's points (`PointValues.summary`)."""

    points: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "points": self.points}


def levels(env: BenchEnv) -> list[Level]:
    """The points of this `--size`: `tiny` runs each kind of level once, small, in seconds."""
    small_files = env.pick(tiny=[100], small=[1_000, 10_000], full=[1_000, 10_000])
    # The 1M-file point is the curve's reason to be, so `small` has it too; `full` adds the levels
    # that need hours of setup on this host (100k real uploads, a million local files).
    in_process_files = env.pick(tiny=[1_000], small=[1_000_000], full=[1_000_000])
    axis_files = env.pick(tiny=100, small=PARTITIONS_AXIS_FILES, full=PARTITIONS_AXIS_FILES)
    partitions = env.pick(tiny=[100], small=[1_000, 10_000], full=[1_000, 10_000])
    large_s3_files = env.pick(tiny=[], small=[], full=[100_000])
    large_local_files = env.pick(tiny=[], small=[], full=[100_000, 1_000_000])
    # S3A's commitJob needs a Spark session, and its tasks are the slowest setup of all (its JVM,
    # through py4j): `tiny` (seconds, for the smoke test) starts none, `small` runs it at 1k files.
    s3a_files = env.pick(tiny=0, small=1_000, full=100_000)
    # A million files take minutes to prepare per committer: `small` commits them with magic alone.
    in_process_committers = env.pick(tiny=S3_COMMITTERS, small=("magic",), full=S3_COMMITTERS)
    # From the cheapest to the slowest, so a run stopped by hand (`run` keeps the levels it
    # finished) has the most points: the small levels and the partitions axis (minutes each), then
    # the 1M-file points one committer at a time, magic first (tens of minutes each: a stopped run
    # keeps those finished), then the levels that need hours of setup.
    planned = [Level("files", "local", n, FILES_AXIS_PARTITIONS, LOCAL_COMMITTERS) for n in small_files]
    s3_files = [*small_files, *large_s3_files]
    first = s3_files[0]
    planned.append(Level("files", "s3", first, FILES_AXIS_PARTITIONS, S3_COMMITTERS, s3a=first <= s3a_files))
    for count in partitions:
        planned.append(Level("partitions", "s3", axis_files, count, S3_COMMITTERS))
        planned.append(Level("partitions", "local", axis_files, count, LOCAL_COMMITTERS))
    planned += [
        Level("files", "in-process", n, FILES_AXIS_PARTITIONS, (committer,))
        for n in in_process_files
        for committer in in_process_committers
    ]
    planned += [
        Level("files", "s3", n, FILES_AXIS_PARTITIONS, S3_COMMITTERS, s3a=n <= s3a_files)
        for n in s3_files[1:]
    ]
    planned += [
        Level("files", "local", n, FILES_AXIS_PARTITIONS, LOCAL_COMMITTERS) for n in large_local_files
    ]
    return planned


def run(env: BenchEnv) -> ScenarioResult:
    planned = levels(env)
    result = CurveResult(
        "scale",
        "The curve: job commit as files and partitions grow",
        env.size,
        env.repeat,
        parameters={
            "levels": [level.label for level in planned],
            "committers": {
                "embedded S3 and in-process": list(S3_COMMITTERS),
                "local files": list(LOCAL_COMMITTERS),
            },
            "conflict modes": CONFLICT_MODES,
            "tasks": {level.label: level.tasks for level in planned},
            "file_size_bytes": len(PAYLOAD),
            "threads": env.threads,
            "baselines": {**RAW_LABELS, "S3A": f"S3A {S3A_COMMITTER} commitJob (embedded S3, files axis)"},
        },
        notes=[
            "Each point is committed in a fresh process (`bench.scale_point`); peak RSS growth is "
            "measured from just before `commit_job`, sampled every 5 ms. pyarrow, which job commit "
            "uses to write its lists, is started before that baseline: its fixed cost (about 100 MB "
            "once per process, as in `job_commit_memory`) is each point's `pyarrow_start_mb`, not "
            "growth with the job.",
            "Points marked in-process ran the real `S3Store` over `bench.fake_s3`'s in-process "
            "stand-in for the boto3 client (their times and CPU are ours alone, not a server's).",
            f"The partitions axis runs at {PARTITIONS_AXIS_FILES:,} files (tiny: fewer): the fewest "
            "at which every partition holds a file; its 10-partition point is the files axis's.",
            "A sensor poke is `SuccessExpectations(job_id=...).check`, the sensor's own check, on a "
            "store counting the bytes its reads return.",
        ],
    )
    done = 0
    try:
        for level in planned:
            repetitions = env.repeat if level.files <= 1_000 else 1
            values = {committer: PointValues(level, committer) for committer in level.committers}
            for rep in range(repetitions):
                log(f"scale: {level.label}, repetition {rep + 1}/{repetitions}")
                _repetition(env, level, rep, values)
            for point in values.values():
                _record(result, point)
                log(f"scale point: {json.dumps(result.points[-1])}")  # kept in the log if the run stops
            done += 1
    except KeyboardInterrupt:
        # A run of hours stopped by hand (SIGINT) keeps the levels it finished.
        log(f"scale: interrupted; keeping the {done} levels measured")
        result.notes.append(
            f"Interrupted by hand; not measured: {'; '.join(level.label for level in planned[done:])}."
        )
    return result


def _repetition(env: BenchEnv, level: Level, rep: int, values: dict[str, PointValues]) -> None:
    """Prepare every committer's job and the baselines, then measure them in rotated order."""
    with contextlib.ExitStack() as cleanup:
        specs = {}
        for committer in level.committers:
            spec = cleanup.enter_context(_prepared_job(env, level, committer))
            specs[committer] = spec
        raw = cleanup.enter_context(_raw_baseline(env, level))
        s3a_job = None
        if level.s3a:
            bucket = cleanup.enter_context(env.bucket("scale-s3a"))
            log(f"scale: {level.label}: running S3A {S3A_COMMITTER} tasks")
            s3a_job = s3a_tasks(env, S3A_COMMITTER, bucket, level.files, level.tasks)
        raw_measured: tuple[float, float] | None = None
        s3a_measured: dict[str, Any] | None = None
        for name in rotated([*level.committers, "raw", "S3A"], rep):
            if name == "raw":
                raw_measured = raw()
            elif name == "S3A":
                if s3a_job is not None:
                    s3a_measured = _s3a_measured(env, s3a_job, level.files)
            else:
                measured = _child("measure", specs[name], env)
                values[name].ours.append(measured)
                log(
                    f"scale: {level.label}: {name} {measured['seconds']:.2f} s, CPU "
                    f"{measured['cpu_seconds']:.2f} s, +{measured['rss_growth_bytes'] / 1e6:.1f} MB, "
                    f"_SUCCESS {_stored(measured['success_bytes'])}, poke {measured['poke_bytes']:,} B "
                    f"in {measured['poke_requests']} requests of the {measured['poke_source']}, "
                    f"page {measured['report_page_seconds']:.2f} s"
                )
        assert raw_measured is not None
        log(f"scale: {level.label}: raw loop {raw_measured[0]:.2f} s, CPU {raw_measured[1]:.2f} s")
        for point in values.values():
            point.raw.append(raw_measured)
            if s3a_measured is not None:
                point.s3a.append(s3a_measured)


@contextlib.contextmanager
def _prepared_job(env: BenchEnv, level: Level, committer: str) -> Iterator[PointSpec]:
    """A job of `committer` whose tasks ran, ready for job commit; its bucket or files go after."""
    work = env.work_dir / f"scale-{uuid.uuid4().hex[:8]}"
    work.mkdir()
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, work, ignore_errors=True)
        if level.store == "s3":
            bucket = cleanup.enter_context(env.bucket(f"scale-{committer[:4]}"))
            destination = f"s3://{bucket}/out"
        elif level.store == "in-process":
            destination = "s3://bench/out"
        else:
            destination = StorePath.parse(str(work / "out")).uri()
        spec = PointSpec(
            committer=committer,
            store=level.store,
            destination=destination,
            job_id=f"job-{uuid.uuid4().hex[:12]}",
            files=level.files,
            tasks=level.tasks,
            partitions=level.partitions,
            work_dir=str(work),
            threads=env.threads,
            conflict_mode=CONFLICT_MODES.get(committer, "append"),
        )
        with timer() as setup:
            _child("prepare", spec, env)
        log(f"scale: {level.label}: prepared {committer} ({level.tasks:,} tasks) in {setup():.0f} s")
        yield spec


@contextlib.contextmanager
def _raw_baseline(env: BenchEnv, level: Level) -> Iterator[Any]:
    """Set up the raw loop's N uploads (or files); yields the call that runs and times the loop."""
    if level.store == "local":
        with _raw_renames(env, level.files) as loop:
            yield loop
        return
    if level.store == "s3":
        bucket = env.new_bucket("scale-raw")
        setup = s3_setup.raw_client(env.s3, s3_setup.SETUP_THREADS)
        client = s3_setup.raw_client(env.s3, env.threads)
    else:
        bucket = "bench"
        setup = client = FakeS3Client()
    try:
        uploads = s3_setup.create_raw_uploads(setup, bucket, "out", level.files, PAYLOAD)

        def loop() -> tuple[float, float]:
            with timer() as elapsed, timer(time.process_time) as cpu:
                s3_setup.complete_raw(client, bucket, uploads, env.threads)
            return elapsed(), cpu()

        yield loop
    finally:
        setup.close()
        client.close()
        if level.store == "s3":
            env.drop_bucket(bucket)


@contextlib.contextmanager
def _raw_renames(env: BenchEnv, files: int) -> Iterator[Any]:
    """The local baseline: `files` files of PAYLOAD renamed into another directory on the
    committers' thread count, as a hand-written local commit would."""
    work = env.work_dir / f"scale-raw-{uuid.uuid4().hex[:8]}"
    source, target = work / "source", work / "target"
    source.mkdir(parents=True)
    target.mkdir()
    names = [f"part-{index:07d}.bin" for index in range(files)]
    for name in names:
        (source / name).write_bytes(PAYLOAD)

    def loop() -> tuple[float, float]:
        with timer() as elapsed, timer(time.process_time) as cpu:
            with ThreadPoolExecutor(env.threads, thread_name_prefix="raw") as pool:
                for _ in pool.map(lambda name: os.rename(source / name, target / name), names):
                    pass
        return elapsed(), cpu()

    try:
        yield loop
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _s3a_measured(env: BenchEnv, job: Any, files: int) -> dict[str, Any]:
    """S3A's job commit, then its `_SUCCESS`: bytes stored and what one sensor poke reads of it."""
    commit = s3a_commit(env, job, files)
    destination = f"s3://{job.bucket}/out"
    store = env.s3.store()
    try:
        status = store.get_status(success_path(destination))
        bytes_read = count_bytes_read(store)
        check = SuccessExpectations().check(store, destination)
        if check.state != "accepted":
            raise RuntimeError(f"S3A's _SUCCESS at {destination}: {check.describe()}")
    finally:
        store.close()
    assert status is not None
    log(f"scale: S3A {S3A_COMMITTER} commitJob {commit.seconds:.2f} s, _SUCCESS {status.size:,} B")
    return {
        "seconds": commit.seconds,
        "cpu_seconds": commit.cpu,
        "success_bytes": status.size,
        "poke_bytes": bytes_read(),
    }


def _child(action: str, spec: PointSpec, env: BenchEnv) -> dict[str, Any]:
    """Run `bench.scale_point` in a fresh process; the embedded S3's endpoint and credentials go in
    its environment, never on its command line."""
    spec_file = Path(spec.work_dir) / "spec.json"
    spec.save(spec_file)
    child_env = {**os.environ, **(env.s3.env() if spec.store == "s3" else {})}
    completed = subprocess.run(
        [sys.executable, "-m", "bench.scale_point", action, "--spec", str(spec_file)],
        cwd=REPO_ROOT,
        env=child_env,
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(
            f"bench.scale_point {action} ({spec.committer}, {spec.files:,} files, {spec.store}) "
            f"failed:\n{completed.stderr[-4000:]}"
        )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _record(result: CurveResult, point: PointValues) -> None:
    """The point's comparisons (ours / baseline per repetition) and checks, and its summary."""
    level, name, files = point.level, point.committer, point.level.files
    label = f"{name}, {level.label}"
    raw = RAW_LABELS[level.store]
    for ours, (raw_seconds, raw_cpu) in zip(point.ours, point.raw, strict=True):
        result.comparison(
            f"{label}: job commit",
            ours_label=f"{name} commit_job",
            baseline_label=raw,
            unit="s",
            group="scale",
        ).add(ours["seconds"], raw_seconds)
        result.comparison(
            f"{label}: client CPU",
            ours_label=f"{name} commit_job, CPU",
            baseline_label=f"{raw}, CPU",
            unit="s",
            group="scale",
        ).add(ours["cpu_seconds"], raw_cpu)
    s3a = f"S3A {S3A_COMMITTER} commitJob"
    for ours, theirs in zip(point.ours, point.s3a, strict=False):
        result.comparison(
            f"{label}: job commit against S3A", ours_label=f"{name} commit_job", baseline_label=s3a, unit="s"
        ).add(ours["seconds"], theirs["seconds"])
        if ours["success_bytes"] is not None:
            result.comparison(
                f"{label}: _SUCCESS bytes against S3A",
                ours_label=f"{name} _SUCCESS",
                baseline_label=f"S3A {S3A_COMMITTER} _SUCCESS",
                unit="bytes",
            ).add(ours["success_bytes"], theirs["success_bytes"])
    for measured in point.ours:
        for check, unit, value, target in (
            ("requests per committed file", "requests/file", measured["requests"] / files, None),
            ("peak RSS growth", "MB", measured["rss_growth_bytes"] / 1e6, TARGET_MEMORY_MB),
            ("_SUCCESS bytes", "bytes", measured["success_bytes"], None),
            ("job record bytes", "bytes", measured["record_bytes"], None),
            ("file and partition list bytes", "bytes", measured["lists_bytes"], None),
            ("bytes read by one sensor poke", "bytes", measured["poke_bytes"], SENSOR_READ_BYTES),
            ("requests of one sensor poke", "requests", measured["poke_requests"], TARGET_POKE_REQUESTS),
            ("report page 0", "s", measured["report_page_seconds"], None),
        ):
            if value is not None:  # a size of a file the store does not hold: the table shows "–"
                result.check(f"{label}: {check}", unit=unit, target=target).values.append(value)
    result.points.append(point.summary())


def _stored(size: int | None) -> str:
    """A stored file's size for the log; None when the store holds no such file."""
    return "not stored" if size is None else f"{size:,} B"
