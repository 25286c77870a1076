"""Our tools on Hadoop's output, and Hadoop's readers on ours, on one embedded S3.

- Our sensor and CLI verify the `_SUCCESS` that S3A's magic and partitioned committers (the
  directory committer's comes from the same AbstractS3ACommitter code) and Hadoop's manifest
  committer really wrote: job ID, committer (as our registry names it), the
  exact file count, the partitions.
- A Spark application writing through S3A's magic committer is SIGKILLed between its task commits
  and its job commit. Our cleanup, scoped to that job, aborts its pending uploads and deletes its
  ``__magic_job-`` directory while a live magic job writes to the same table and later commits;
  `abort_job` settles another killed job completely.
- Spark with S3A reads exactly the committed rows of our output, beside an in-flight and an
  aborted write of ours.
- One table written day by day, alternately by S3A's partitioned committer and by ours, both with
  ``replace``: every day's rows once, a rewritten day replaced, each day's sensor satisfied.

Processes are waited on through what they leave in the store (a `.pendingset`) or at a gate (a
task connected), never by sleeping; the killed application's Python workers are released at the end.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hadoop_gated_write import ROWS, gated_frame
from support.waiting import wait_until

from airflow_commit_provider.core.committers import CommitOptions, create_committer
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.job_control import JobState, abort_job, inspect_job
from airflow_commit_provider.core.layout import MAGIC_PREFIX, JobLayout
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.core.store.settings import S3Settings
from airflow_commit_provider.spark import applied_conf, jvm_committer_conf, write_committed

# Airflow reads its configuration when first imported (the sensor imports it): a throwaway home
# unless the suite's Airflow tests already chose one, as tests/cleanup/conftest.py does.
if "AIRFLOW_HOME" not in os.environ:
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="airflow-home-interop-")
    atexit.register(shutil.rmtree, os.environ["AIRFLOW_HOME"], True)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

pytestmark = [pytest.mark.spark, pytest.mark.hadoop_peers]

APP = Path(__file__).resolve().parent / "hadoop_gated_write.py"
#: Bounds for what a spark-submit or a task takes to reach a state (a cold JVM takes ~15 s here).
START_TIMEOUT = 240.0


@pytest.fixture
def s3_access(embedded_s3: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """An Airflow AWS connection to the embedded S3 (the sensor) and boto3's environment (the CLI)."""
    for name, value in embedded_s3.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", embedded_s3.airflow_connection())
    return "aws_default"


def sensor_poke(path: str, **expectations: Any) -> dict[str, Any] | None:
    """What SuccessManifestSensor returns for one poke: its XCom summary once satisfied, else None."""
    from airflow_commit_provider.sensors import SuccessManifestSensor

    sensor = SuccessManifestSensor(
        task_id=f"wait_{uuid.uuid4().hex[:8]}",
        destination=path,
        poke_interval=0,
        timeout=0,
        deferrable=False,
        **expectations,
    )
    result = sensor.poke({})
    return result.xcom_value if result else None


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """`airflow-commit ARGS`, in process: (exit code, stdout without the log lines that Airflow's
    logging, once the sensor imported it, sends to stdout)."""
    from airflow_commit_provider.cli import main

    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr().out
    return code, "\n".join(line for line in out.splitlines() if "[info     ]" not in line)


def s3a_rows(spark: Any, url: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(row) for row in spark.read.parquet(url).collect())


def uploads_under(store: Any, url: str) -> set[str]:
    return {upload.upload_id for upload in store.list_multipart_uploads(StorePath.parse(url))}


def magic_dirs(store: Any, url: str) -> set[str]:
    table = StorePath.parse(url)
    return {
        status.path.relative_to(table).split("/")[0]
        for status in store.list_files(table)
        if status.path.relative_to(table).startswith(MAGIC_PREFIX)
    }


def task_committed(store: Any, url: str, job_id: str) -> bool:
    """Whether a task of S3A magic job `job_id` has committed (its `.pendingset` is saved)."""
    job_dir = JobLayout(StorePath.parse(url), job_id, magic=True).job_dir
    return any(status.path.name.endswith(".pendingset") for status in store.list_files(job_dir))


class Gate:
    """A loopback TCP gate: a gated task connects and waits for one byte; `release` frees them all."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._server.getsockname()[1]}"
        self._waiting: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # the server socket was closed by `release`
            while True:
                connection, _ = self._server.accept()
                with self._lock:
                    self._waiting.append(connection)

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)

    def release(self) -> None:
        self._server.close()
        with self._lock:
            for connection in self._waiting:
                with contextlib.suppress(OSError):
                    connection.sendall(b"x")
                connection.close()
            self._waiting.clear()


# Our sensor and CLI on Hadoop's _SUCCESS ----------------------------------------------------------
# S3A's magic and a staging committer (every S3A committer writes its `_SUCCESS` by the same
# AbstractS3ACommitter code, under its own name, which test_hadoop_s3a.py checks for all three), and
# the manifest committer's.
@pytest.mark.parametrize("committer", ["magic", "partitioned", "manifest"])
def test_our_sensor_and_cli_verify_hadoops_success(
    s3a_spark: Any,
    spark_bucket: str,
    spark_s3_store: Any,
    tmp_path: Path,
    s3_access: str,
    capsys: pytest.CaptureFixture[str],
    committer: str,
) -> None:
    frame = s3a_spark.range(12, numPartitions=2).selectExpr("id", "id % 3 AS p")
    job_id: str | None = None
    if committer == "manifest":
        url, store = (tmp_path / "table").as_uri(), LocalStore()
        conf = jvm_committer_conf(url, "manifest")  # its _SUCCESS names Spark's own write UUID
    else:
        url, store = f"s3a://{spark_bucket}/verify-{uuid.uuid4().hex[:8]}", spark_s3_store
        job_id = f"job-{uuid.uuid4()}"
        conf = jvm_committer_conf(url, committer, job_id=job_id)
    with applied_conf(s3a_spark, conf):
        frame.write.partitionBy("p").parquet(url)
    files = sum(1 for s in store.list_files(StorePath.parse(url)) if s.path.name.startswith("part-"))
    partitions = ["p=0", "p=1", "p=2"]
    expected = {"committers": committer, "min_files": files, "required_partitions": partitions}
    if job_id is not None:
        expected["job_id"] = job_id

    summary = sensor_poke(url, aws_conn_id=s3_access, **expected)
    assert summary is not None, "the sensor accepts Hadoop's _SUCCESS"
    assert sorted(summary["partitions"]) == partitions and summary["files"] == files
    if job_id is not None:
        assert summary["job_id"] == job_id and summary["committer"] == committer
    other = "magic" if committer != "magic" else "directory"
    for refused in ({"committers": other}, {"min_files": files + 1}, {"required_partitions": ["p=3"]}):
        assert sensor_poke(url, aws_conn_id=s3_access, **{**expected, **refused}) is None, refused

    args = ["success", "verify", url, "--committer", committer, "--min-files", str(files)]
    args += [f"--partition={p}" for p in partitions] + (["--job-id", job_id] if job_id else [])
    code, out = cli(capsys, *args)
    assert code == 0 and out.startswith("OK "), out
    code, out = cli(capsys, *args, "--min-files", str(files + 1))
    assert code == 1 and f"{files} files committed, expected at least {files + 1}" in out
    code, out = cli(capsys, *args, "--files")  # Hadoop's name the first 100 files, without sizes
    assert code == 1 and "cannot check the files: " in out and "lists no files" in out, out


# A killed S3A magic job: cleanup and abort --------------------------------------------------------
@dataclass
class KilledJobs:
    cleanup_url: str
    cleanup_job: str
    cleanup_uploads: set[str]
    abort_url: str
    abort_job: str
    abort_uploads: set[str]


@pytest.fixture(scope="module")
def killed_magic_jobs(
    s3a_spark: Any,
    embedded_s3: Any,
    spark_bucket: str,
    spark_s3_store: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[KilledJobs]:
    """Two S3A magic writes of one spark-submit application, SIGKILLed once each has a committed
    task and a task waiting at the gate: pending uploads, `.pending`/`.pendingset` files, no commit."""
    from airflow_commit_provider.devtools.hadoop_jars import peer_jars, peer_spark_conf

    jobs = {
        "cleanup": (f"s3a://{spark_bucket}/killed-{uuid.uuid4().hex[:8]}", f"killed-{uuid.uuid4()}"),
        "abort": (f"s3a://{spark_bucket}/killed-{uuid.uuid4().hex[:8]}", f"killed-{uuid.uuid4()}"),
    }
    settings = S3Settings(endpoint_url=embedded_s3.endpoint_url, region_name=embedded_s3.region)
    conf = {
        **jvm_committer_conf(jobs["cleanup"][0], "magic", store=settings),
        **peer_spark_conf(peer_jars(), tmp_path_factory.mktemp("hadoop-local")),
        "spark.master": "local[4]",  # two gated tasks must leave room for the two that commit
        "spark.ui.enabled": "false",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    }
    command = [str(Path(sys.executable).parent / "spark-submit")]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    gate = Gate()
    command += [str(APP), gate.address, *(f"{url}={job}" for url, job in jobs.values())]
    environment = {**os.environ, **embedded_s3.env(), "PYSPARK_PYTHON": sys.executable}
    environment.pop("AWS_ENDPOINT_URL")  # S3A's endpoint is in the conf; only credentials travel here
    application = subprocess.Popen(
        command,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_until(
            lambda: gate.waiting == 2 and all(task_committed(spark_s3_store, *job) for job in jobs.values()),
            "both magic jobs: one task committed, one waiting at the gate",
            START_TIMEOUT,
        )
        os.killpg(application.pid, signal.SIGKILL)
        application.wait(timeout=30)
        yield KilledJobs(
            jobs["cleanup"][0],
            jobs["cleanup"][1],
            uploads_under(spark_s3_store, jobs["cleanup"][0]),
            jobs["abort"][0],
            jobs["abort"][1],
            uploads_under(spark_s3_store, jobs["abort"][0]),
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(application.pid, signal.SIGKILL)
        application.wait(timeout=30)
        gate.release()  # the killed application's Python workers (a process group of their own) exit


@pytest.mark.slow  # a spark-submit of its own
def test_cleanup_settles_a_killed_magic_job_and_spares_a_live_one(
    s3a_spark: Any,
    spark_s3_store: Any,
    killed_magic_jobs: KilledJobs,
    s3_access: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    killed = killed_magic_jobs
    url, dead = killed.cleanup_url, killed.cleanup_job
    assert len(killed.cleanup_uploads) == 2, "the killed job's committed task left its two uploads pending"
    assert magic_dirs(spark_s3_store, url) == {f"{MAGIC_PREFIX}{dead}"}

    live, gate = f"live-{uuid.uuid4()}", Gate()
    frame = gated_frame(s3a_spark, gate.address)
    errors: list[BaseException] = []

    def write_live() -> None:
        try:
            frame.write.mode("append").option("fs.s3a.committer.uuid", live).partitionBy("p").parquet(url)
        except BaseException as error:  # reported by the test, not lost in the thread
            errors.append(error)

    writer = threading.Thread(target=write_live)
    try:
        with applied_conf(s3a_spark, jvm_committer_conf(url, "magic")):
            writer.start()
            wait_until(
                lambda: errors or (gate.waiting == 1 and task_committed(spark_s3_store, url, live)),
                "the live magic job: one task committed, one waiting at the gate",
                START_TIMEOUT,
            )
            assert errors == [], [str(e)[:500] for e in errors]
            live_uploads = uploads_under(spark_s3_store, url) - killed.cleanup_uploads
            assert len(live_uploads) == 2

            # Scoped to the dead job: its uploads are found through its .pendingset files.
            scope = [url, "--job-id", dead, "--older-than", "0s"]
            code, out = cli(capsys, "uploads", "list", *scope, "-o", "json")
            assert code == 0
            assert {u["upload_id"] for u in json.loads(out)["uploads"]} == killed.cleanup_uploads, out
            code, out = cli(capsys, "uploads", "abort", *scope, "--yes")
            assert code == 0, out
            code, out = cli(capsys, "temp", "clean", *scope, "--yes")
            assert code == 0, out

            assert uploads_under(spark_s3_store, url) == live_uploads, "the live job's uploads are spared"
            assert magic_dirs(spark_s3_store, url) == {f"{MAGIC_PREFIX}{live}"}
            # Unscoped, at the default age, cleanup leaves a running job's young uploads alone too.
            code, out = cli(capsys, "uploads", "list", url, "-o", "json")
            assert code == 0 and json.loads(out)["count"] == 0 and json.loads(out)["too_recent"] == 2
            gate.release()
            writer.join(timeout=START_TIMEOUT)
    finally:
        gate.release()
        writer.join(timeout=START_TIMEOUT)
    assert not writer.is_alive() and errors == []

    success = SuccessData.from_bytes(spark_s3_store.read_bytes(StorePath.parse(url).join("_SUCCESS")), url)
    assert success.job_id == live
    assert s3a_rows(s3a_spark, url) == [(i, i % 2) for i in range(ROWS)], "exactly the live job's rows"
    assert uploads_under(spark_s3_store, url) == set() and magic_dirs(spark_s3_store, url) == set()


@pytest.mark.slow  # a spark-submit of its own
def test_abort_job_settles_a_killed_jvm_job(spark_s3_store: Any, killed_magic_jobs: KilledJobs) -> None:
    killed = killed_magic_jobs
    url, dead = killed.abort_url, killed.abort_job
    assert len(killed.abort_uploads) == 2 and magic_dirs(spark_s3_store, url) == {f"{MAGIC_PREFIX}{dead}"}

    assert abort_job(spark_s3_store, url, dead, "magic", "its driver was killed") is None

    assert uploads_under(spark_s3_store, url) == set(), "the uploads its .pendingset listed are aborted"
    table = StorePath.parse(url)
    visible = [s.path.relative_to(table) for s in spark_s3_store.list_files(table)]
    assert [path for path in visible if not path.startswith("_airflow_commit/")] == [], "nothing else remains"
    assert inspect_job(spark_s3_store, url, dead).state == JobState.ABORTED


# Hadoop's readers on our output -------------------------------------------------------------------
def test_spark_with_s3a_reads_exactly_our_committed_rows(
    s3a_spark: Any, spark_bucket: str, spark_s3_store: Any, s3_options: dict[str, Any]
) -> None:
    """Committed rows of ours, beside an in-flight magic job (its task committed, uploads pending)
    and an aborted directory job of ours, each holding rows that Spark would show if they leaked."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = StorePath.parse(f"s3://{spark_bucket}/ours-{uuid.uuid4().hex[:8]}")
    committed = s3a_spark.createDataFrame(
        [(i, f"c{i}", "ab"[i % 2]) for i in range(10)], "id long, v string, p string"
    )
    write_committed(committed, str(table), partition_by="p", committer="magic", options=s3_options)

    leaked = pa.table({"id": [999], "v": ["uncommitted"]})
    body = pa.BufferOutputStream()
    pq.write_table(leaked, body)
    options = CommitOptions(threads=2)
    in_flight = create_committer("magic", spark_s3_store, table, f"inflight-{uuid.uuid4()}", options)
    aborted = create_committer("directory", spark_s3_store, table, f"aborted-{uuid.uuid4()}", options)
    for job in (in_flight, aborted):
        job.setup_job()
        attempt = job.task_attempt(0, 0)
        with attempt.create_file(f"p=a/part-00000-{job.job_id}.parquet") as stream:
            stream.write(body.getvalue().to_pybytes())
        attempt.commit_task(rows=1)
    assert aborted.abort_job() is None
    try:
        assert uploads_under(spark_s3_store, str(table)), "the in-flight job's upload is pending"
        url = str(table).replace("s3://", "s3a://", 1)
        assert s3a_rows(s3a_spark, url) == sorted(
            tuple(row) for row in committed.select("id", "v", "p").collect()
        )
    finally:
        assert in_flight.abort_job() is None
    assert uploads_under(spark_s3_store, str(table)) == set()


def test_a_table_written_day_by_day_by_s3a_and_by_us(
    s3a_spark: Any,
    spark_bucket: str,
    spark_s3_store: Any,
    s3_options: dict[str, Any],
    s3_access: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Days written alternately by S3A's partitioned committer and by ours, both replacing the
    partitions they write; two days are written again by the other writer. After each write the
    table holds every day's latest rows exactly once, and the day's sensor accepts the job."""
    table = f"s3://{spark_bucket}/daily-{uuid.uuid4().hex[:8]}"
    url = table.replace("s3://", "s3a://", 1)
    expected: dict[str, list[tuple[Any, ...]]] = {}
    plan = [
        ("2024-01-01", "s3a", 1),
        ("2024-01-02", "ours", 1),
        ("2024-01-01", "ours", 2),
        ("2024-01-02", "s3a", 2),
        ("2024-01-03", "s3a", 1),
    ]
    for day, writer, version in plan:
        rows = [(i, f"{writer}-v{version}", day) for i in range(4 + version)]
        frame = s3a_spark.createDataFrame(rows, "id long, v string, dt string").repartition(2)
        job_id = f"{writer}-{day}-v{version}-{uuid.uuid4().hex[:6]}"
        if writer == "s3a":
            conf = jvm_committer_conf(url, "partitioned", conflict_mode="replace", job_id=job_id)
            with applied_conf(s3a_spark, conf):
                frame.write.mode("append").partitionBy("dt").parquet(url)
        else:
            written = write_committed(
                frame,
                table,
                partition_by="dt",
                committer="partitioned",
                conflict_mode="replace",
                options=s3_options,
            )
            job_id = written.job_id
        expected[day] = sorted(rows)
        everything = sorted(row for day_rows in expected.values() for row in day_rows)
        read = sorted((r.id, r.v, str(r.dt)) for r in s3a_spark.read.parquet(url).collect())  # dt: a date
        assert read == everything, (day, writer)
        partition = f"dt={day}"
        summary = sensor_poke(
            table,
            aws_conn_id=s3_access,
            job_id=job_id,
            committers="partitioned",
            required_partitions=[partition],
        )
        assert summary is not None and summary["job_id"] == job_id, (day, writer)
        code, out = cli(capsys, "success", "verify", url, "--job-id", job_id, f"--partition={partition}")
        assert code == 0, out
    assert uploads_under(spark_s3_store, table) == set()
