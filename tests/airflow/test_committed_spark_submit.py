"""CommittedSparkSubmitOperator without a JVM: the real SparkSubmitHook runs a fake `spark-submit`.

The fake (fake_spark_submit.py) is a real process found on PATH. It records the command line the
hook built and acts like a PySpark application on the core committers, so the operator's own work
is checked against real stores: job IDs per try, the `_SUCCESS` check, and the abort on failure,
timeout and kill (including the processes it must stop first).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowTaskTimeout
from fake_spark import FAKE, FakeSpark, install_fake_spark
from support.invariants import assert_committed
from support.success_files import success
from support.task_instances import task_instance
from support.waiting import wait_until

from airflow_commit_provider.core.job_control import JobState, inspect_job
from airflow_commit_provider.core.layout import RECORDS_DIR
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import Store
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.core.task_key import TaskKey
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
from airflow_commit_provider.hooks import CommitStoreHook
from airflow_commit_provider.hooks.spark_submit import process_group_alive
from airflow_commit_provider.operators.spark_submit import CommittedSparkSubmitOperator
from airflow_commit_provider.spark.config import plan_digest
from airflow_commit_provider.tries.plan import try_job_id
from airflow_commit_provider.tries.workdirs import sweep_task_instance, try_workdir_path


@pytest.fixture
def fake_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spark_default: None) -> FakeSpark:
    return install_fake_spark(tmp_path, monkeypatch)


def operator(destination: str, committer: str = "magic", **kwargs: Any) -> CommittedSparkSubmitOperator:
    return CommittedSparkSubmitOperator(
        task_id="write",
        application="/jobs/app.py",
        destination=destination,
        committer=committer,
        application_args=["--day", "2024-01-01"],
        **kwargs,
    )


RUN_ID = "manual__2024-01-01T00:00:00+00:00"


def context(try_number: int = 1, run_id: str = RUN_ID) -> dict[str, Any]:
    """What the operator reads of Airflow's context: the task instance's key and try number."""
    ti = task_instance(dag_id="ingest", task_id="write", run_id=run_id, map_index=-1, try_number=try_number)
    return {"ti": ti}


def visible(store: Store, destination: StorePath) -> list[str]:
    """Every object under the destination but the per-job records (`_airflow_commit/`)."""
    names = (s.path.relative_to(destination) for s in store.list_files(destination))
    return sorted(name for name in names if not name.startswith(f"{RECORDS_DIR}/"))


def pending(store: Store, destination: StorePath) -> list[Any]:
    return list(store.list_multipart_uploads(destination))


@pytest.fixture
def s3_destination(aws_default: EmbeddedS3, s3_bucket: str) -> Iterator[tuple[Store, StorePath]]:
    store = aws_default.store()
    yield store, StorePath("s3", s3_bucket, "tables/events")
    store.close()


# Success -----------------------------------------------------------------------------------------
def test_commit_on_s3(
    fake_spark: FakeSpark, s3_destination: tuple[Store, StorePath], aws_default: EmbeddedS3, caplog: Any
) -> None:
    store, destination = s3_destination
    op = operator(str(destination), conflict_mode="append", conf={"spark.sql.shuffle.partitions": "4"})
    summary = op.execute(context(try_number=3))

    record = fake_spark.record()
    job_id = record["confs"]["spark.airflow_commit.job_id"]
    assert summary["job_id"] == job_id
    assert summary["committer"] == "magic" and summary["engine"] == "python"
    assert summary["files"] == 2 and summary["rows"] == 20 and summary["bytes"] > 0
    assert summary["try_number"] == 3 and summary["duration_seconds"] > 0
    assert summary["destination"] == str(destination)
    assert visible(store, destination) == sorted(
        ["_SUCCESS", f"part-00000-{job_id}.csv", f"part-00001-{job_id}.csv"]
    )
    assert pending(store, destination) == []

    # What the application was given.
    assert record["confs"] == {
        "spark.sql.shuffle.partitions": "4",
        "spark.airflow_commit.job_id": job_id,
        "spark.airflow_commit.committer": "magic",
        "spark.airflow_commit.destination": str(destination),
        "spark.airflow_commit.engine": "python",
        "spark.airflow_commit.conflict_mode": "append",
        "spark.airflow_commit.try_number": "3",
        "spark.airflow_commit.origin": json.dumps(
            {"dagId": "ingest", "taskId": "write", "runId": RUN_ID, "mapIndex": -1, "tryNumber": 3}
        ),
        "spark.airflow_commit.plan_digest": plan_digest(record["confs"]),
    }
    assert record["options"]["master"] == "local[2]"
    assert record["application"] == "/jobs/app.py" and record["args"] == ["--day", "2024-01-01"]
    # The package came from the shipped zip, which holds core and spark but no Airflow modules.
    assert ".zip" in record["package_file"], record["package_file"]
    # S3 settings came from the connection, in the environment only.
    assert record["env"]["AWS_ENDPOINT_URL"] == aws_default.endpoint_url
    assert record["env"]["AWS_ACCESS_KEY_ID"] == aws_default.access_key
    assert record["env"]["AWS_SECRET_ACCESS_KEY"] == aws_default.secret_key
    assert record["env"]["PYSPARK_PYTHON"] == sys.executable
    secret = aws_default.secret_key
    assert secret not in " ".join(record["argv"])
    assert secret not in json.dumps(summary)
    assert secret not in caplog.text


# The _SUCCESS check -------------------------------------------------------------------------------
def test_stale_success_fails_the_task(fake_spark: FakeSpark, s3_destination: tuple[Store, StorePath]) -> None:
    store, destination = s3_destination
    earlier = operator(str(destination)).execute(context())
    before = visible(store, destination)
    fake_spark.mode("stale")
    with pytest.raises(AirflowException, match="not this try's") as raised:
        operator(str(destination)).execute(context())
    assert earlier["job_id"] in str(raised.value)
    assert visible(store, destination) == before, "the earlier job's output is not touched"


def test_foreign_success_fails_the_task(fake_spark: FakeSpark, tmp_path: Path) -> None:
    destination = tmp_path / "out"
    fake_spark.mode("foreign")
    with pytest.raises(AirflowException, match=r"names job 'foreign-[0-9a-f-]+'"):
        operator(str(destination), committer="manifest").execute(context())


def test_missing_success_fails_the_task(fake_spark: FakeSpark, tmp_path: Path) -> None:
    fake_spark.mode("stale")
    with pytest.raises(AirflowException, match="has no _SUCCESS"):
        operator(str(tmp_path / "out"), committer="manifest").execute(context())


def test_legacy_success_fails_the_task(fake_spark: FakeSpark, tmp_path: Path) -> None:
    destination = tmp_path / "out"
    destination.mkdir()
    (destination / "_SUCCESS").write_bytes(b"")
    fake_spark.mode("stale")
    with pytest.raises(AirflowException, match="classic FileOutputCommitter"):
        operator(str(destination), committer="manifest").execute(context())


# Abort on failure, timeout and kill ----------------------------------------------------------------
def test_crashed_driver_leaves_nothing_locally(fake_spark: FakeSpark, tmp_path: Path) -> None:
    destination = StorePath.parse(str(tmp_path / "out"))
    fake_spark.mode("crash")
    with pytest.raises(AirflowException):
        operator(str(destination), committer="manifest").execute(context())
    assert visible(LocalStore(), destination) == []


def test_a_crashed_driver_leaves_nothing_on_s3_and_its_retry_one_copy(
    fake_spark: FakeSpark, s3_destination: tuple[Store, StorePath]
) -> None:
    store, destination = s3_destination
    fake_spark.mode("crash")
    with pytest.raises(AirflowException, match="Error code is: 3"):
        operator(str(destination)).execute(context(1))
    crashed_job = fake_spark.record()["confs"]["spark.airflow_commit.job_id"]
    assert pending(store, destination) == [], "this try's pending uploads are aborted"
    assert visible(store, destination) == [], "nothing of the failed try is visible, no temp dirs remain"

    fake_spark.mode("commit")
    summary = operator(str(destination)).execute(context(2))
    assert summary["job_id"] != crashed_job
    files = visible(store, destination)
    assert files == sorted(
        ["_SUCCESS", f"part-00000-{summary['job_id']}.csv", f"part-00001-{summary['job_id']}.csv"]
    )
    assert pending(store, destination) == []


@contextlib.contextmanager
def signal_when_ready(fake: FakeSpark, signum: int, handler: Callable[[int, Any], None]) -> Iterator[None]:
    """Run `handler` in the main thread (as a signal handler) once the fake job says it is ready."""
    previous = signal.signal(signum, handler)
    main = threading.main_thread().ident
    assert main is not None

    def wait_then_signal() -> None:
        with open(fake.fifo) as fifo:  # blocks until the fake opens it for writing
            if fifo.read().strip() == "ready":
                signal.pthread_kill(main, signum)

    waiter = threading.Thread(target=wait_then_signal, daemon=True)
    waiter.start()
    try:
        yield
    finally:
        if waiter.is_alive():  # the fake never got there: release the waiter
            with contextlib.suppress(OSError):
                os.close(os.open(fake.fifo, os.O_WRONLY | os.O_NONBLOCK))
        waiter.join()
        signal.signal(signum, previous)


def test_on_kill_stops_everything_aborts_and_fails(
    fake_spark: FakeSpark, s3_destination: tuple[Store, StorePath], capsys: pytest.CaptureFixture[str]
) -> None:
    """Airflow 3 calls on_kill from its SIGTERM handler, which then returns into execute."""
    store, destination = s3_destination
    fake_spark.mode("hang")
    op = operator(str(destination))
    with signal_when_ready(fake_spark, signal.SIGTERM, lambda *_: op.on_kill()):
        with pytest.raises(AirflowException):
            op.execute(context())
    record = fake_spark.record()
    assert "Killed: stopping spark-submit and aborting job" in operator_log(capsys)
    assert not process_group_alive(record["pgid"]), "spark-submit and its children are gone"
    assert pending(store, destination) == []
    assert visible(store, destination) == []


def test_timeout_stops_everything_and_aborts(
    fake_spark: FakeSpark, s3_destination: tuple[Store, StorePath]
) -> None:
    """execution_timeout raises AirflowTaskTimeout in execute; the Task SDK then calls on_kill."""
    store, destination = s3_destination
    fake_spark.mode("hang")
    op = operator(str(destination))

    def timeout(*_: Any) -> None:
        raise AirflowTaskTimeout("Timeout, PID: 1")

    with signal_when_ready(fake_spark, signal.SIGUSR1, timeout):
        with pytest.raises(AirflowTaskTimeout):
            op.execute(context())
    op.on_kill()  # what the Task SDK does next: must be harmless
    assert not process_group_alive(fake_spark.record()["pgid"])
    assert pending(store, destination) == []
    assert visible(store, destination) == []


# Arguments ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"engine": "scala"}, "engine 'scala'"),
        ({"committer": "fast"}, "unknown committer 'fast'"),
        ({"committer": "file-v2"}, "allow_unsafe_v2=True"),
        ({"conflict_mode": "overwrite"}, "conflict_mode 'overwrite'"),
        ({"conf": {"spark.airflow_commit.job_id": "mine"}}, "must not set spark.airflow_commit.job_id"),
        ({"destination": "gs://b/t"}, "unsupported scheme"),
    ],
)
def test_invalid_arguments(kwargs: dict[str, Any], match: str) -> None:
    values = {"destination": "s3://b/t", "committer": "magic", **kwargs}
    with pytest.raises(ValueError, match=match):
        operator(**values).execute(context())


def test_templated_fields() -> None:
    assert set(CommittedSparkSubmitOperator.template_fields) >= {
        "application",
        "destination",
        "committer",
        "conflict_mode",
        "engine",
        "conf",
        "application_args",
        "env_vars",
        "py_files",
        "files",
        "name",
    }
    op = operator(
        "s3://{{ params.bucket }}/events",
        committer="{{ params.committer }}",
        conf={"spark.app.day": "{{ ds }}"},
        env_vars={"DAY": "{{ ds }}"},
        name="ingest-{{ ds_nodash }}",
    )
    op.application_args = ["--day", "{{ ds }}"]
    op.render_template_fields(
        {
            "params": {"bucket": "lake", "committer": "partitioned"},
            "ds": "2024-01-01",
            "ds_nodash": "20240101",
        }
    )
    assert op.destination == "s3://lake/events"
    assert op.committer == "partitioned"
    assert op.conf == {"spark.app.day": "2024-01-01"}
    assert op.env_vars == {"DAY": "2024-01-01"}
    assert op.application_args == ["--day", "2024-01-01"]
    assert op.name == "ingest-20240101"


# engine="hadoop" ------------------------------------------------------------------------------------
def test_hadoop_engine_adds_the_jvm_committer_conf() -> None:
    from airflow_commit_provider.spark import jvm_committer_conf

    op = operator("s3a://lake/events", committer="magic", engine="hadoop")
    conf = op.job_conf("job-1", 2)
    assert conf["spark.airflow_commit.engine"] == "hadoop"
    assert conf["spark.hadoop.fs.s3a.committer.name"] == "magic"
    assert conf["spark.hadoop.fs.s3a.committer.uuid"] == "job-1", "S3A records this try's job ID"
    assert conf.items() >= jvm_committer_conf("s3a://lake/events", "magic", job_id="job-1").items()
    local = operator(
        "file:///data/events",
        committer="manifest",
        engine="hadoop",
        jvm_conf_options={"bind_commit_protocol": False},
    ).job_conf("job-2", 1)
    # Spark's own protocol, explicitly: spark-hadoop-cloud on the classpath would otherwise bind it
    assert local["spark.sql.sources.commitProtocolClass"].endswith(".SQLHadoopMapReduceCommitProtocol")
    with pytest.raises(ValueError, match="s3a://"):
        operator("s3://lake/events", committer="magic", engine="hadoop").job_conf("job-3", 1)


def test_hadoop_manifest_success_is_accepted_when_fresh(fake_spark: FakeSpark, tmp_path: Path) -> None:
    destination = tmp_path / "out"
    op = operator(str(destination), committer="manifest", engine="hadoop")
    try_context = context()
    summary = op.execute(try_context)
    assert summary["engine"] == "hadoop" and summary["files"] == 2
    assert summary["try_job_id"] == fake_spark.record()["confs"]["spark.airflow_commit.job_id"]
    # The try tells the report page (and so the task's "Commit report" link) which commit it made.
    target = try_context["ti"].xcom["commit_report_target"]
    assert target == {
        "destination": str(destination),
        "aws_conn_id": "aws_default",
        "job_id": summary["job_id"],
    }


def test_hadoop_stale_success_fails(fake_spark: FakeSpark, tmp_path: Path) -> None:
    destination = StorePath.parse(str(tmp_path / "out"))
    LocalStore().write_bytes(destination.join("_SUCCESS"), success(destination, timestamp=1).to_bytes())
    fake_spark.mode("stale")
    with pytest.raises(AirflowException, match="before this try"):
        operator(str(destination), committer="manifest", engine="hadoop").execute(context())


def test_hadoop_classic_marker_is_accepted_when_fresh(fake_spark: FakeSpark, tmp_path: Path) -> None:
    fake_spark.mode("legacy")
    summary = operator(str(tmp_path / "out"), committer="file-v1", engine="hadoop").execute(context())
    assert summary["committer"] == "" and summary["job_id"] == summary["try_job_id"]


def test_a_hadoop_only_destination_is_planned_but_not_submitted(fake_spark: FakeSpark) -> None:
    """engine="hadoop" plans a write to any Hadoop filesystem (its conf names it as given), but a try
    must check the job's _SUCCESS through a store of ours: refused in one line before anything starts
    (with its asset declared, as by default, already when the task is made: the asset names a store path)."""
    op = operator(
        "viewfs://cluster/warehouse/events", committer="manifest", engine="hadoop", emit_asset=False
    )
    conf = op.job_conf("job-1", 1)
    assert conf["spark.airflow_commit.destination"] == "viewfs://cluster/warehouse/events"
    assert conf["spark.hadoop.mapreduce.outputcommitter.factory.scheme.viewfs"].endswith(
        "ManifestCommitterFactory"
    )
    with pytest.raises(
        ValueError, match=r"^destination 'viewfs://cluster/warehouse/events' is on viewfs://"
    ) as refused:
        op.execute(context())
    assert "\n" not in str(refused.value)
    assert not (fake_spark.directory / "record.json").exists(), "no spark-submit ran"


@pytest.mark.parametrize("engine", ["python", "hadoop"])
def test_a_try_parses_its_destination_once(
    fake_spark: FakeSpark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    """The plan parses the destination; settling, the store, spark-submit's environment and confs,
    the _SUCCESS check, the delivered mark and the summary all read that one value."""
    given = str(tmp_path / "out")
    parsed: list[str] = []
    real = StorePath.parse.__func__  # type: ignore[attr-defined]

    def parse(cls: type[StorePath], location: Any) -> StorePath:
        if not isinstance(location, StorePath):
            parsed.append(os.fspath(location))
        return real(cls, location)

    op = operator(given, committer="manifest", engine=engine)
    monkeypatch.setattr(StorePath, "parse", classmethod(parse))
    summary = op.execute(context())
    monkeypatch.undo()
    assert summary["files"] == 2
    assert parsed.count(given) == 1, parsed
    assert all(not text.endswith("/out") for text in parsed if text != given), parsed


def test_a_conf_the_application_changed_is_refused_and_nothing_is_left(
    fake_spark: FakeSpark, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The application changes the committer conf before its write (as ``spark.conf.set`` would): its
    driver refuses the conf, naming the digest, and the try fails with nothing written."""
    destination = StorePath.parse(str(tmp_path / "out"))
    fake_spark.mode("change-committer")
    with pytest.raises(AirflowException, match="Error code is: 6"):
        operator(str(destination), committer="manifest").execute(context())
    assert "refused: spark.airflow_commit.plan_digest does not match the confs" in operator_log(capsys)
    assert visible(LocalStore(), destination) == []


# Exactly once across tries (engine="python") --------------------------------------------------------
WORKER = Path(__file__).resolve().parent / "worker_try.py"
# A hang guard, not a synchronisation: each wait ends as soon as its condition holds or the worker
# exits. A worker that imports Airflow took over 120 s to reach its pause at load 19 on 2 cores.
DEADLINE_SECONDS = 300.0


def fake_output(job_id: str) -> dict[str, bytes]:
    """What the fake application writes for a job: two task files."""
    return {f"part-{task:05d}-{job_id}.csv": b"id\n" + f"{task}\n".encode() * 10 for task in range(2)}


def try_job(try_number: int, run_id: str = RUN_ID) -> str:
    """The job ID the operator derives for a try of the test task (see tries.plan)."""
    return try_job_id(TaskKey("ingest", "write", run_id, -1), try_number)


@dataclass
class WorkerTry:
    """A try running in a worker process of its own, whose fake Spark job pauses where it is told."""

    process: subprocess.Popen[bytes]
    directory: Path

    def record(self) -> dict[str, Any]:
        return json.loads((self.directory / "record.json").read_text())

    def wait_paused(self) -> None:
        paused = self.directory / "paused"
        wait_until(
            lambda: paused.exists() or self.process.poll() is not None,
            f"the job of {self.directory} to pause",
            DEADLINE_SECONDS,
        )
        assert paused.exists(), f"the worker exited ({self.process.returncode}): {self.output()}"

    def kill_worker(self) -> None:
        """SIGKILL the task process, as an OOM kill or a lost node does: on_kill never runs."""
        self.process.kill()
        self.process.wait()

    def release_orphan(self) -> None:
        """Let the orphaned Spark job carry on from its pause."""
        fifo = self.directory / "go"
        descriptor: list[int] = []

        def opened() -> bool:
            with contextlib.suppress(OSError):  # ENXIO until the job opens it for reading
                descriptor.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            return bool(descriptor)

        wait_until(opened, "the orphaned job to wait for its release", DEADLINE_SECONDS)
        os.write(descriptor[0], b"go\n")
        os.close(descriptor[0])

    def kill_orphan(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.record()["pgid"], signal.SIGKILL)

    def wait_orphan_gone(self) -> None:
        pgid = self.record()["pgid"]
        wait_until(lambda: not process_group_alive(pgid), "the orphaned Spark job to exit", DEADLINE_SECONDS)

    def result(self) -> str:
        return (self.directory / "result").read_text()

    def output(self) -> str:
        return (self.directory / "worker.log").read_text(errors="replace")[-3000:]


def start_worker_try(
    tmp_path: Path, try_number: int, mode: str, destination: StorePath, **kwargs: Any
) -> WorkerTry:
    """Run a try of the test task in a worker process; its fake Spark job pauses as `mode` says."""
    directory = tmp_path / f"worker-try-{try_number}"
    directory.mkdir()
    os.mkfifo(directory / "go")
    env = {
        **os.environ,
        "FAKE_SPARK_MODE": mode,
        "FAKE_SPARK_RECORD": str(directory / "record.json"),
        "FAKE_SPARK_PAUSED": str(directory / "paused"),
        "FAKE_SPARK_GO": str(directory / "go"),
        "FAKE_SPARK_RESULT": str(directory / "result"),
    }
    spec = {
        "operator": {
            "application": "/jobs/app.py",
            "destination": str(destination),
            "committer": "magic",
            **kwargs,
        },
        "ti": {
            "dag_id": "ingest",
            "task_id": "write",
            "run_id": RUN_ID,
            "map_index": -1,
            "try_number": try_number,
        },
    }
    with open(directory / "worker.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, str(WORKER), json.dumps(spec)], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    return WorkerTry(process, directory)


@pytest.fixture
def workers() -> Iterator[list[WorkerTry]]:
    """Worker tries started by a test; whatever is left of them is killed afterwards."""
    started: list[WorkerTry] = []
    yield started
    for worker in started:
        if worker.process.poll() is None:
            worker.kill_worker()
        if (worker.directory / "record.json").exists():
            worker.kill_orphan()


def operator_log(capsys: pytest.CaptureFixture[str]) -> str:
    """What the operator logged so far (Airflow's task logger writes to stdout outside a task runner)."""
    captured = capsys.readouterr()
    return captured.out + captured.err


def assert_one_copy(store: Store, destination: StorePath, job_id: str) -> None:
    """Exactly the job's output, its `_SUCCESS` and records; nothing pending, no temporary tree."""
    assert_committed(store, destination, fake_output(job_id), job_id=job_id)


def test_a_retry_adopts_the_job_of_a_try_killed_after_its_commit(
    fake_spark: FakeSpark,
    s3_destination: tuple[Store, StorePath],
    tmp_path: Path,
    workers: list[WorkerTry],
    capsys: pytest.CaptureFixture[str],
) -> None:
    store, destination = s3_destination
    first = start_worker_try(tmp_path, 1, "pause-after-commit", destination)
    workers.append(first)
    first.wait_paused()  # the job committed
    first.kill_worker()  # ... and the task process died before it could report success
    first.release_orphan()
    first.wait_orphan_gone()
    job = first.record()["confs"]["spark.airflow_commit.job_id"]
    assert job == try_job(1)
    assert inspect_job(store, destination, job).state is JobState.COMMITTED

    summary = operator(str(destination)).execute(context(try_number=2))
    assert not (fake_spark.directory / "record.json").exists(), "the retry ran no Spark job"
    assert summary["job_id"] == summary["try_job_id"] == job
    assert summary["adopted_from_try"] == 1 and summary["try_number"] == 2
    assert summary["files"] == 2 and summary["rows"] == 20
    assert f"Adopting job {job} committed by try 1" in operator_log(capsys)
    assert_one_copy(store, destination, job)
    assert inspect_job(store, destination, job).delivered, "the adopting try delivered the job"


def test_a_retry_rolls_forward_and_adopts_a_job_stopped_at_its_commit_point(
    fake_spark: FakeSpark, s3_destination: tuple[Store, StorePath], tmp_path: Path, workers: list[WorkerTry]
) -> None:
    """The worker and the driver die once the commit is decided, before `_SUCCESS`."""
    store, destination = s3_destination
    first = start_worker_try(tmp_path, 1, "pause-at-commit-point", destination)
    workers.append(first)
    first.wait_paused()
    first.kill_worker()
    first.kill_orphan()
    first.wait_orphan_gone()
    job = try_job(1)
    assert inspect_job(store, destination, job).state is JobState.COMMITTING
    assert "_SUCCESS" not in visible(store, destination)

    summary = operator(str(destination)).execute(context(try_number=2))
    assert not (fake_spark.directory / "record.json").exists(), "the retry ran no Spark job"
    assert summary["job_id"] == job and summary["adopted_from_try"] == 1
    assert_one_copy(store, destination, job)


def test_a_retry_fences_an_orphan_whose_late_commit_is_refused(
    fake_spark: FakeSpark,
    s3_destination: tuple[Store, StorePath],
    tmp_path: Path,
    workers: list[WorkerTry],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The worker dies while its Spark job runs; the job outlives it and tries to commit later."""
    store, destination = s3_destination
    first = start_worker_try(tmp_path, 1, "pause-before-commit", destination)
    workers.append(first)
    first.wait_paused()  # tasks committed: uploads pending
    first.kill_worker()
    orphan = first.record()["confs"]["spark.airflow_commit.job_id"]
    assert pending(store, destination) != [], "the orphan's uploads are pending"

    summary = operator(str(destination)).execute(context(try_number=2))
    assert summary["job_id"] == try_job(2) and summary["adopted_from_try"] is None
    assert f"Fenced job {orphan} of try 1, which was still active" in operator_log(capsys)

    first.release_orphan()  # the orphan now tries to commit
    first.wait_orphan_gone()
    assert first.result().startswith("fenced: "), first.result()
    assert inspect_job(store, destination, orphan).state is JobState.ABORTED
    assert_one_copy(store, destination, summary["job_id"])


def test_a_retry_fences_the_job_of_a_try_that_never_started_it(
    fake_spark: FakeSpark, s3_destination: tuple[Store, StorePath], tmp_path: Path
) -> None:
    """Try 1 died before its spark-submit started; the late spark-submit is refused at job setup."""
    store, destination = s3_destination
    summary = operator(str(destination)).execute(context(try_number=2))
    assert summary["job_id"] == try_job(2)

    late = operator(str(destination)).job_conf(try_job(1), 1)
    argv = [part for key, value in late.items() for part in ("--conf", f"{key}={value}")]
    env = {
        **os.environ,
        **CommitStoreHook().spark_environment(str(destination)),
        "FAKE_SPARK_RESULT": str(tmp_path / "late-result"),
    }
    finished = subprocess.run(
        [sys.executable, str(FAKE), *argv, "/jobs/app.py"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert finished.returncode == 5, finished.stdout + finished.stderr
    assert (tmp_path / "late-result").read_text().startswith("fenced: ")
    assert_one_copy(store, destination, summary["job_id"])


def test_a_cleared_task_runs_again(
    fake_spark: FakeSpark, s3_destination: tuple[Store, StorePath], capsys: pytest.CaptureFixture[str]
) -> None:
    """Try 1 succeeded (its job is delivered); try 2 after a clear is a deliberate re-run: each try is
    a new job, and one copy (the last try's) remains."""
    store, destination = s3_destination
    first = operator(str(destination), committer="directory", conflict_mode="replace").execute(context(1))
    assert inspect_job(store, destination, first["job_id"]).delivered
    second = operator(str(destination), committer="directory", conflict_mode="replace").execute(context(2))
    assert first["job_id"] != second["job_id"]
    assert fake_spark.record()["confs"]["spark.airflow_commit.job_id"] == second["job_id"] == try_job(2)
    assert second["adopted_from_try"] is None
    assert f"Job {first['job_id']} of try 1 was delivered" in operator_log(capsys)
    assert_one_copy(store, destination, second["job_id"])


def test_a_failure_after_the_commit_point_says_the_next_try_adopts(
    fake_spark: FakeSpark, s3_destination: tuple[Store, StorePath], capsys: pytest.CaptureFixture[str]
) -> None:
    """The application fails after its write: abort cannot undo a commit, the retry adopts it."""
    store, destination = s3_destination
    fake_spark.mode("commit-then-fail")
    with pytest.raises(AirflowException, match="Error code is: 4"):
        operator(str(destination)).execute(context(1))
    job = try_job(1)
    log = operator_log(capsys)
    assert f"Job {job} had already reached its commit point" in log
    assert f"the next try of this task adopts job {job}" in log
    assert not inspect_job(store, destination, job).delivered

    fake_spark.mode("commit")
    summary = operator(str(destination)).execute(context(2))
    assert summary["job_id"] == job and summary["adopted_from_try"] == 1
    assert_one_copy(store, destination, job)


def test_adoption_off_runs_again(
    fake_spark: FakeSpark, s3_destination: tuple[Store, StorePath], capsys: pytest.CaptureFixture[str]
) -> None:
    store, destination = s3_destination
    fake_spark.mode("commit-then-fail")
    write = {"committer": "directory", "conflict_mode": "replace", "adopt_committed_tries": False}
    with pytest.raises(AirflowException):
        operator(str(destination), **write).execute(context(1))
    assert "the next try writes again (adopt_committed_tries=False)" in operator_log(capsys)

    fake_spark.mode("commit")
    summary = operator(str(destination), **write).execute(context(2))
    assert summary["job_id"] == try_job(2) and summary["adopted_from_try"] is None
    assert (
        f"Job {try_job(1)} of try 1 committed but its try did not succeed; not adopting it"
        in operator_log(capsys)
    )
    assert_one_copy(store, destination, summary["job_id"])


def test_a_try_needs_its_task_instance_key(fake_spark: FakeSpark, tmp_path: Path) -> None:
    with pytest.raises(AirflowException, match="names each try's job after the task instance"):
        operator(str(tmp_path / "out"), committer="manifest").execute({"ti": task_instance(try_number=1)})


def test_in_airflow_a_retry_adopts_and_a_clear_runs_again(
    airflow_db: Any, fake_spark: FakeSpark, s3_destination: tuple[Store, StorePath]
) -> None:
    """dag.test(): try 1's application fails after its write, try 2 adopts; a clear (try 3) rewrites."""
    from dag_runs import load_dag, run_dag, task_instances, xcom

    store, destination = s3_destination
    day = datetime(2024, 1, 1, tzinfo=timezone.utc)
    fake_spark.monkeypatch.setenv("FAKE_SPARK_MODE_BY_TRY", "1=commit-then-fail")
    conf = {"destination": str(destination)}

    run = run_dag(load_dag("test_committed_spark_retries"), day, conf)
    ti = task_instances(run)["write"]
    assert (ti.state, ti.try_number) == ("success", 2)
    key = TaskKey("test_committed_spark_retries", "write", run.run_id, -1)
    first = try_job_id(key, 1)
    adopted = xcom(run, "write")
    assert adopted["job_id"] == first and adopted["adopted_from_try"] == 1 and adopted["try_number"] == 2
    assert fake_spark.record()["confs"]["spark.airflow_commit.try_number"] == "1", "try 2 ran no Spark job"
    assert_one_copy(store, destination, first)

    # The same run again: dag.test() clears its task instance (and restarts its try numbers, as a
    # re-created run does): the delivered job is not adopted, the task writes anew.
    fake_spark.monkeypatch.delenv("FAKE_SPARK_MODE_BY_TRY")
    rerun = load_dag("test_committed_spark_retries").test(
        logical_date=day, run_after=run.run_after, run_conf=conf
    )
    assert rerun.run_id == run.run_id and task_instances(rerun)["write"].state == "success"
    rewritten = xcom(rerun, "write")
    assert rewritten["job_id"] not in (first, try_job_id(key, 2)) and rewritten["adopted_from_try"] is None
    assert fake_spark.record()["confs"]["spark.airflow_commit.job_id"] == rewritten["job_id"]
    assert_one_copy(store, destination, rewritten["job_id"])


# A try's local files ----------------------------------------------------------------------------------
def try_dirs(root: Path) -> list[str]:
    """Every file and directory under the root of the tries' local directories."""
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


def test_the_next_try_removes_what_a_killed_try_left_locally(
    fake_spark: FakeSpark, s3_destination: tuple[Store, StorePath], tmp_path: Path, workers: list[WorkerTry]
) -> None:
    """Try 1 and its spark-submit are SIGKILLed mid-submit: its --py-files zip stays, try 2 removes it."""
    store, destination = s3_destination
    root = tmp_path / "work"
    first = start_worker_try(tmp_path, 1, "pause-before-commit", destination, local_work_root=str(root))
    workers.append(first)
    first.wait_paused()
    key = TaskKey("ingest", "write", RUN_ID, -1)
    shipped = Path(first.record()["package_file"].split(".zip")[0] + ".zip")
    assert shipped.parent == try_workdir_path(root, key, 1), shipped
    first.kill_worker()
    first.kill_orphan()
    first.wait_orphan_gone()
    assert shipped.is_file(), "the killed try left its files"

    summary = operator(str(destination), local_work_root=str(root)).execute(context(try_number=2))
    assert Path(fake_spark.record()["package_file"].split(".zip")[0]).parent == try_workdir_path(root, key, 2)
    assert try_dirs(root) == [], "nothing of either try is left"
    assert_one_copy(store, destination, summary["job_id"])


def test_a_try_directory_stays_while_its_spark_submit_lives(
    fake_spark: FakeSpark, s3_destination: tuple[Store, StorePath], tmp_path: Path, workers: list[WorkerTry]
) -> None:
    """Only the task process is killed: its orphaned spark-submit still holds the directory."""

    store, destination = s3_destination
    root = tmp_path / "work"
    first = start_worker_try(tmp_path, 1, "pause-before-commit", destination, local_work_root=str(root))
    workers.append(first)
    first.wait_paused()
    first.kill_worker()

    summary = operator(str(destination), local_work_root=str(root)).execute(context(try_number=2))
    left = try_dirs(root)
    assert left and all(name.split("/")[3] == "try-1" for name in left if name.count("/") >= 3), left
    assert try_workdir_path(root, TaskKey("ingest", "write", RUN_ID, -1), 1).is_dir()

    first.release_orphan()  # the fenced orphan's commit is refused; it exits
    first.wait_orphan_gone()
    key = TaskKey("ingest", "write", RUN_ID, -1)
    assert [path.name for path in sweep_task_instance(root, key)] == ["try-1"]
    assert try_dirs(root) == []
    assert_one_copy(store, destination, summary["job_id"])


def test_the_local_work_root_is_an_argument_then_an_airflow_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_commit_provider.tries.workdirs import default_root

    monkeypatch.setenv("AIRFLOW__AIRFLOW_COMMIT__LOCAL_WORK_ROOT", str(tmp_path / "configured"))
    assert operator("s3://lake/t").local_work_root == str(tmp_path / "configured")
    assert operator("s3://lake/t", local_work_root=str(tmp_path / "given")).local_work_root == str(
        tmp_path / "given"
    )
    monkeypatch.delenv("AIRFLOW__AIRFLOW_COMMIT__LOCAL_WORK_ROOT")
    assert operator("s3://lake/t").local_work_root == str(default_root())
