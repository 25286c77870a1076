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
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowTaskTimeout
from success_files import success

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import Store
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.embedded_s3 import EmbeddedS3
from airflow_commit_provider.operators.spark_submit import (
    CommittedSparkSubmitOperator,
    _group_alive,
)

FAKE = Path(__file__).resolve().parent / "fake_spark_submit.py"


@dataclass
class FakeSpark:
    directory: Path
    monkeypatch: pytest.MonkeyPatch

    def mode(self, mode: str) -> None:
        self.monkeypatch.setenv("FAKE_SPARK_MODE", mode)

    def record(self) -> dict[str, Any]:
        return json.loads((self.directory / "record.json").read_text())

    @property
    def fifo(self) -> Path:
        return self.directory / "ready.fifo"


@pytest.fixture
def fake_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spark_default: None) -> FakeSpark:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "spark-submit"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SPARK_RECORD", str(tmp_path / "record.json"))
    monkeypatch.setenv("FAKE_SPARK_READY", str(tmp_path / "ready.fifo"))
    os.mkfifo(tmp_path / "ready.fifo")
    fake = FakeSpark(tmp_path, monkeypatch)
    fake.mode("commit")
    return fake


def operator(destination: str, committer: str = "magic", **kwargs: Any) -> CommittedSparkSubmitOperator:
    return CommittedSparkSubmitOperator(
        task_id="write",
        application="/jobs/app.py",
        destination=destination,
        committer=committer,
        application_args=["--day", "2024-01-01"],
        **kwargs,
    )


def context(try_number: int = 1) -> dict[str, Any]:
    return {"ti": SimpleNamespace(try_number=try_number)}


def visible(store: Store, destination: StorePath) -> list[str]:
    return sorted(s.path.relative_to(destination) for s in store.list_files(destination))


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


def test_shipped_zip_has_only_executor_modules(tmp_path: Path) -> None:
    import zipfile

    from airflow_commit_provider.operators.spark_submit import build_py_files_zip

    names = zipfile.ZipFile(build_py_files_zip(tmp_path)).namelist()
    assert "airflow_commit_provider/__init__.py" in names
    assert "airflow_commit_provider/core/committers/magic.py" in names
    assert all(n.split("/")[1] in ("__init__.py", "core", "spark") for n in names)
    assert all(n.endswith(".py") for n in names)


def test_each_try_is_a_new_job_and_one_copy_remains(
    fake_spark: FakeSpark, s3_destination: tuple[Store, StorePath]
) -> None:
    store, destination = s3_destination
    first = operator(str(destination), committer="directory", conflict_mode="replace").execute(context(1))
    second = operator(str(destination), committer="directory", conflict_mode="replace").execute(context(2))
    assert first["job_id"] != second["job_id"]
    job = second["job_id"]
    assert visible(store, destination) == sorted(
        ["_SUCCESS", f"part-00000-{job}.csv", f"part-00001-{job}.csv"]
    )


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
def test_crashed_driver_leaves_nothing_on_s3(
    fake_spark: FakeSpark, s3_destination: tuple[Store, StorePath]
) -> None:
    store, destination = s3_destination
    fake_spark.mode("crash")
    with pytest.raises(AirflowException, match="Error code is: 3"):
        operator(str(destination)).execute(context())
    assert pending(store, destination) == [], "this try's pending uploads are aborted"
    assert visible(store, destination) == [], "nothing of the failed try is visible, no temp dirs remain"


def test_crashed_driver_leaves_nothing_locally(fake_spark: FakeSpark, tmp_path: Path) -> None:
    destination = StorePath.parse(str(tmp_path / "out"))
    fake_spark.mode("crash")
    with pytest.raises(AirflowException):
        operator(str(destination), committer="manifest").execute(context())
    assert visible(LocalStore(), destination) == []


def test_retry_after_a_crash_leaves_one_copy(
    fake_spark: FakeSpark, s3_destination: tuple[Store, StorePath]
) -> None:
    store, destination = s3_destination
    fake_spark.mode("crash")
    with pytest.raises(AirflowException):
        operator(str(destination), committer="partitioned", conflict_mode="replace").execute(context(1))
    crashed_job = fake_spark.record()["confs"]["spark.airflow_commit.job_id"]
    fake_spark.mode("commit")
    summary = operator(str(destination), committer="partitioned", conflict_mode="replace").execute(context(2))
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
    fake_spark: FakeSpark, s3_destination: tuple[Store, StorePath]
) -> None:
    """Airflow 3 calls on_kill from its SIGTERM handler, which then returns into execute."""
    store, destination = s3_destination
    fake_spark.mode("hang")
    op = operator(str(destination))
    with signal_when_ready(fake_spark, signal.SIGTERM, lambda *_: op.on_kill()):
        with pytest.raises(AirflowException):
            op.execute(context())
    record = fake_spark.record()
    assert op._killed
    assert not _group_alive(record["pgid"]), "spark-submit and its children are gone"
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
    assert not _group_alive(fake_spark.record()["pgid"])
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


def test_local_master_finds_spark_submit_beside_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("PYSPARK_DRIVER_PYTHON", raising=False)
    op = operator("s3://b/t")
    hook = SimpleNamespace(_connection={"spark_binary": "spark-submit"})
    env = op._local_environment(hook, {"PATH": "/nonexistent"})  # type: ignore[arg-type]
    assert env["PYSPARK_PYTHON"] == env["PYSPARK_DRIVER_PYTHON"] == sys.executable
    if (Path(sys.executable).parent / "spark-submit").is_file():
        assert env["PATH"].split(os.pathsep) == [str(Path(sys.executable).parent), "/nonexistent"]


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
    assert "spark.sql.sources.commitProtocolClass" not in local
    with pytest.raises(ValueError, match="s3a://"):
        operator("s3://lake/events", committer="magic", engine="hadoop").job_conf("job-3", 1)


def test_hadoop_manifest_success_is_accepted_when_fresh(fake_spark: FakeSpark, tmp_path: Path) -> None:
    destination = tmp_path / "out"
    op = operator(str(destination), committer="manifest", engine="hadoop")
    summary = op.execute(context())
    assert summary["engine"] == "hadoop" and summary["files"] == 2
    assert summary["try_job_id"] == fake_spark.record()["confs"]["spark.airflow_commit.job_id"]


def test_hadoop_stale_success_fails(fake_spark: FakeSpark, tmp_path: Path) -> None:
    destination = StorePath.parse(str(tmp_path / "out"))
    LocalStore().write_bytes(destination.join("_SUCCESS"), success(timestamp=1).to_bytes())
    fake_spark.mode("stale")
    with pytest.raises(AirflowException, match="before this try"):
        operator(str(destination), committer="manifest", engine="hadoop").execute(context())


def test_hadoop_classic_marker_is_accepted_when_fresh(fake_spark: FakeSpark, tmp_path: Path) -> None:
    fake_spark.mode("legacy")
    summary = operator(str(tmp_path / "out"), committer="file-v1", engine="hadoop").execute(context())
    assert summary["committer"] == "" and summary["job_id"] == summary["try_job_id"]


def test_hadoop_abort_cleans_the_s3a_magic_job(s3_destination: tuple[Store, StorePath]) -> None:
    """S3A magic: uploads listed in the job's .pending files are aborted, its trees deleted."""
    import logging

    from airflow_commit_provider.core.formats.pending import PendingCommit
    from airflow_commit_provider.operators.spark_submit import _abort_hadoop_job

    store, destination = s3_destination
    job = "5a1e3c9e-0000-4000-8000-000000000001"
    target = destination.join("dt=2024-01-01", "part-00000.parquet")
    upload = store.create_multipart_upload(target)
    etag = store.upload_part(target, upload, 1, b"x" * 1024)
    pending = PendingCommit(target.uri(), target.bucket, target.key, upload, (etag,), 1024)
    magic = destination.join(f"__magic_job-{job}", f"job-{job}", "tasks", "attempt_0", "__base")
    store.write_bytes(magic.join("dt=2024-01-01", "part-00000.parquet.pending"), pending.to_bytes())
    store.write_bytes(destination.join("_temporary", job, "x"), b"1")
    other = destination.join("_temporary", "another-job", "y")
    store.write_bytes(other, b"2")

    _abort_hadoop_job(store, str(destination), job, logging.getLogger("test"))
    assert pending_uploads_of(store, destination) == []
    assert visible(store, destination) == ["_temporary/another-job/y"], "other jobs' trees are kept"


def pending_uploads_of(store: Store, destination: StorePath) -> list[Any]:
    return list(store.list_multipart_uploads(destination))


def test_no_credentials_on_a_yarn_command_line(
    aws_default: EmbeddedS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "yarn"}))
    op = operator("s3://lake/events", env_vars={"MY_VAR": "1"})
    from airflow_commit_provider.hooks import CommitStoreHook

    hook = op._make_hook(CommitStoreHook(), "job-1", 1, str(tmp_path))
    command = " ".join(hook._build_spark_submit_command("/jobs/app.py"))
    assert f"spark.yarn.appMasterEnv.AWS_ENDPOINT_URL={aws_default.endpoint_url}" in command
    assert "spark.yarn.appMasterEnv.MY_VAR=1" in command
    assert aws_default.secret_key not in command and aws_default.access_key not in command
