"""CommittedSparkSubmitHook: S3 settings travel only in spark-submit's environment, and a kill
takes every process spark-submit started.

The hook is the provider's real SparkSubmitHook resolving real Airflow connections (from
``AIRFLOW_CONN_*``); the kill test runs a real process tree.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from airflow.providers.apache.spark.hooks import spark_submit as provider_hook_module
from airflow.sdk.exceptions import AirflowException
from support.waiting import wait_until

from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
from airflow_commit_provider.hooks import CommitStoreHook, CommittedSparkSubmitHook
from airflow_commit_provider.hooks.spark_submit import CREDENTIALS_FILE_NAME, process_group_alive

SECRET = "s3cr3t-value"
ACCESS_KEY = "AKIAEXAMPLE"
S3_ENVIRONMENT = {
    "AWS_ENDPOINT_URL": "http://127.0.0.1:8333",
    "AWS_DEFAULT_REGION": "eu-west-3",
    "AWS_ACCESS_KEY_ID": ACCESS_KEY,
    "AWS_SECRET_ACCESS_KEY": SECRET,
}


def spark_connection(monkeypatch: pytest.MonkeyPatch, host: str) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": host}))


def command(hook: CommittedSparkSubmitHook) -> str:
    return " ".join(hook.submit_command("/jobs/app.py"))


@pytest.mark.parametrize("master", ["local[2]", "spark://master.example:7077"])
def test_client_masters_get_the_credentials_in_the_environment_only(
    monkeypatch: pytest.MonkeyPatch, master: str
) -> None:
    spark_connection(monkeypatch, master)
    hook = CommittedSparkSubmitHook(
        s3_environment=S3_ENVIRONMENT,
        env_vars={"AWS_DEFAULT_REGION": "us-east-2", "MY_VAR": "1"},
        conf={"spark.airflow_commit.job_id": "job-1"},
    )
    assert hook.master == master and not hook.env_becomes_conf
    assert (
        hook.environment.items()
        >= {
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_DEFAULT_REGION": "us-east-2",  # the user's variables win
            "MY_VAR": "1",
        }.items()
    )
    line = command(hook)
    assert SECRET not in line and ACCESS_KEY not in line and "AWS_" not in line
    assert "spark.airflow_commit.job_id=job-1" in line


def credentials_in_file(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, str | None]:
    """The credentials boto3 finds through AWS_SHARED_CREDENTIALS_FILE=`path` and nothing else."""
    with monkeypatch.context() as scoped:
        for name in [name for name in os.environ if name.startswith("AWS_")]:
            scoped.delenv(name)
        scoped.setenv("AWS_SHARED_CREDENTIALS_FILE", str(path))
        found = boto3.Session().get_credentials()
        assert found is not None and found.method == "shared-credentials-file"
        return found.access_key, found.secret_key, found.token


@pytest.mark.parametrize("deploy_mode", ["client", "cluster"])
def test_yarn_credentials_travel_in_a_shipped_file(
    aws_default: EmbeddedS3,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    deploy_mode: str,
) -> None:
    """On YARN the provider turns the environment into --conf: only the endpoint and region go so.
    The credentials go in a private file shipped with --files, which the application master's and the
    executors' AWS_SHARED_CREDENTIALS_FILE names; a client-mode driver (spark-submit's child) gets
    them in spark-submit's environment, a cluster-mode spark-submit not at all."""
    spark_connection(monkeypatch, "yarn")
    hook = CommittedSparkSubmitHook(
        s3_environment=CommitStoreHook().spark_environment("s3://lake/events"),
        env_vars={"MY_VAR": "1"},
        files="/jobs/lookup.csv",
        deploy_mode=deploy_mode,
        private_conf_dir=tmp_path,
    )
    assert hook.env_becomes_conf and hook.shipped_credentials
    line = command(hook)
    shipped = tmp_path / CREDENTIALS_FILE_NAME
    assert f"spark.yarn.appMasterEnv.AWS_ENDPOINT_URL={aws_default.endpoint_url}" in line
    assert "spark.yarn.appMasterEnv.MY_VAR=1" in line
    assert f"--files /jobs/lookup.csv,{shipped} " in line
    for prefix in ("spark.yarn.appMasterEnv.", "spark.executorEnv."):
        assert f"{prefix}AWS_SHARED_CREDENTIALS_FILE={CREDENTIALS_FILE_NAME} " in line
    assert aws_default.secret_key not in line and aws_default.access_key not in line
    assert stat.S_IMODE(shipped.stat().st_mode) == 0o600
    assert credentials_in_file(shipped, monkeypatch) == (aws_default.access_key, aws_default.secret_key, None)

    spark_submits_own = hook._env or {}  # what the provider's submit() adds to spark-submit's environment
    if deploy_mode == "client":  # and the file, which S3A's profile reader must find there too
        assert spark_submits_own["AWS_SECRET_ACCESS_KEY"] == aws_default.secret_key
        assert spark_submits_own["AWS_SHARED_CREDENTIALS_FILE"] == str(shipped)
    else:
        assert aws_default.secret_key not in json.dumps(spark_submits_own)
        assert aws_default.secret_key not in json.dumps(hook.environment)
    said = capfd.readouterr().out  # the task log: Airflow logs to stdout
    assert f"in the file {CREDENTIALS_FILE_NAME}, shipped with --files" in said
    assert aws_default.secret_key not in said and aws_default.access_key not in said


def test_yarn_users_choices_win(
    aws_default: EmbeddedS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """env_vars naming the credentials (a profile) keep the connection's behind; a conf naming
    the containers' credentials file or Python wins over the hook's."""
    spark_connection(monkeypatch, "yarn")
    s3_environment = CommitStoreHook().spark_environment("s3://lake/events")
    profiled = CommittedSparkSubmitHook(
        s3_environment=s3_environment, env_vars={"AWS_PROFILE": "lake"}, private_conf_dir=tmp_path
    )
    assert not profiled.shipped_credentials
    assert "AWS_SHARED_CREDENTIALS_FILE" not in command(profiled) and "--files" not in command(profiled)
    assert not (tmp_path / CREDENTIALS_FILE_NAME).exists()

    own = "spark.executorEnv.AWS_SHARED_CREDENTIALS_FILE"
    hook = CommittedSparkSubmitHook(
        s3_environment=s3_environment,
        conf={own: "/etc/lake/credentials", "spark.pyspark.python": "/opt/py/bin/python"},
        spark_python="./environment/bin/python",
        private_conf_dir=tmp_path,
    )
    line = command(hook)
    assert f"{own}=/etc/lake/credentials" in line and f"{own}={CREDENTIALS_FILE_NAME}" not in line
    assert "spark.pyspark.python=/opt/py/bin/python" in line
    assert "spark.yarn.appMasterEnv.PYSPARK_PYTHON=./environment/bin/python" in line

    assert "fs.s3a.aws.credentials.provider" not in line, "S3A is not in use"


def test_yarn_s3a_reads_the_shipped_file(
    aws_default: EmbeddedS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A job reading S3 through S3A (engine="hadoop": the operator sets its store conf) gets S3A's
    chain with the profile reader, which reads the file AWS_SHARED_CREDENTIALS_FILE names; the
    user's own chain wins."""
    spark_connection(monkeypatch, "yarn")
    s3_environment = CommitStoreHook().spark_environment("s3a://lake/events")
    s3a = {"spark.hadoop.fs.s3a.endpoint": aws_default.endpoint_url}
    hook = CommittedSparkSubmitHook(s3_environment=s3_environment, conf=s3a, private_conf_dir=tmp_path)
    chain = "spark.hadoop.fs.s3a.aws.credentials.provider="
    [given] = [part for part in hook.submit_command("/jobs/app.py") if part.startswith(chain)]
    providers = given.removeprefix(chain).split(",")
    assert "org.apache.hadoop.fs.s3a.auth.ProfileAWSCredentialsProvider" in providers
    assert providers[-1] == "org.apache.hadoop.fs.s3a.auth.IAMInstanceCredentialsProvider"
    own = CommittedSparkSubmitHook(
        s3_environment=s3_environment, conf={**s3a, chain[:-1]: "com.example.Mine"}, private_conf_dir=tmp_path
    )
    assert [p for p in own.submit_command("/jobs/app.py") if p.startswith(chain)] == [
        f"{chain}com.example.Mine"
    ]


def test_yarn_credentials_need_a_private_directory(
    aws_default: EmbeddedS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    spark_connection(monkeypatch, "yarn")
    s3_environment = CommitStoreHook().spark_environment("s3://lake/events")
    with pytest.raises(ValueError, match=r"^the S3 credentials: a private file needs private_conf_dir$"):
        CommittedSparkSubmitHook(s3_environment=s3_environment).submit_command("/jobs/app.py")


def test_kubernetes_gets_no_credentials_on_its_command_line(
    aws_default: EmbeddedS3,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """On Kubernetes the provider turns the environment into driver env confs, which a pod's spec
    shows: only the endpoint and region go, in the command line and any properties file; the log
    says how the cluster gives the rest. The Kubernetes client is not installed in the test venv; the
    provider only checks that it imported (its module name bound) before building the command, which
    never uses it."""
    monkeypatch.setattr(provider_hook_module, "kube_client", object(), raising=False)
    spark_connection(monkeypatch, "k8s://https://127.0.0.1:6443")
    hook = CommittedSparkSubmitHook(
        s3_environment=CommitStoreHook().spark_environment("s3://lake/events"),
        conf={"spark.openlineage.transport.auth.apiKey": "k"},
        deploy_mode="cluster",
        private_conf_dir=tmp_path,
    )
    line = command(hook)
    assert f"spark.kubernetes.driverEnv.AWS_ENDPOINT_URL={aws_default.endpoint_url}" in line
    written = "".join(path.read_text() for path in tmp_path.iterdir())
    for text in (line, written, json.dumps(hook.environment)):
        assert aws_default.secret_key not in text and aws_default.access_key not in text
    assert not hook.shipped_credentials and "--files" not in line
    assert "spark.kubernetes.driver.secretKeyRef" in capfd.readouterr().out


def test_local_master_finds_spark_submit_beside_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    spark_connection(monkeypatch, "local[2]")
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("PYSPARK_DRIVER_PYTHON", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    env = CommittedSparkSubmitHook().environment
    assert env["PYSPARK_PYTHON"] == env["PYSPARK_DRIVER_PYTHON"] == sys.executable
    if (Path(sys.executable).parent / "spark-submit").is_file():
        assert env["PATH"].split(os.pathsep) == [str(Path(sys.executable).parent), "/nonexistent"]


def test_local_master_python_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's PYSPARK_PYTHON is kept unless spark_python is given; env_vars win over both."""
    spark_connection(monkeypatch, "local[2]")
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/python")
    monkeypatch.delenv("PYSPARK_DRIVER_PYTHON", raising=False)
    assert "PYSPARK_PYTHON" not in CommittedSparkSubmitHook().environment
    chosen = CommittedSparkSubmitHook(spark_python="/usr/bin/python3").environment
    assert chosen["PYSPARK_PYTHON"] == chosen["PYSPARK_DRIVER_PYTHON"] == "/usr/bin/python3"
    mine = CommittedSparkSubmitHook(spark_python="/usr/bin/python3", env_vars={"PYSPARK_PYTHON": "/mine"})
    assert mine.environment["PYSPARK_PYTHON"] == "/mine"


def fake_spark_submit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`spark-submit` on PATH: a shell that starts a child (a driver) and writes its own PID, which
    is its process group's (the hook starts it in a session of its own), to the returned marker."""
    spark_connection(monkeypatch, "local[2]")
    started = tmp_path / "started"
    script = tmp_path / "bin" / "spark-submit"
    script.parent.mkdir()
    script.write_text(
        f'#!/bin/sh\nsleep 300 &\necho "$$" > "{started}.tmp"\nmv "{started}.tmp" "{started}"\nwait\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    return started


def started_group(marker: Path) -> int:
    """The fake spark-submit's process group, once it has started its child and said so."""
    return int(
        wait_until(lambda: marker.exists() and marker.read_text().strip(), "the fake spark-submit", 30)
    )


def submit_in_thread(hook: CommittedSparkSubmitHook) -> tuple[threading.Thread, list[BaseException]]:
    failures: list[BaseException] = []

    def submit() -> None:
        try:
            hook.submit("/jobs/app.py")
        except AirflowException as error:
            failures.append(error)

    runner = threading.Thread(target=submit)
    runner.start()
    return runner, failures


def test_kill_takes_the_whole_process_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """spark-submit's children (a Python driver, its workers) die with it, not just the JVM. The
    group is the marker's, written by the child: the kill does not rely on the submitting thread
    having recorded the process yet (it waits for the record)."""
    marker = fake_spark_submit(tmp_path, monkeypatch)
    hook = CommittedSparkSubmitHook()
    runner, failures = submit_in_thread(hook)
    group = started_group(marker)
    assert process_group_alive(group)

    assert hook.kill_process_group(10.0)
    runner.join(30)
    assert hook.process_group == group
    assert not process_group_alive(group), "the child of spark-submit is gone too"
    assert failures, "spark-submit killed: submit fails"


def test_a_kill_before_the_start_keeps_spark_submit_from_starting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator may be killed after making the hook and before submitting: nothing starts then."""
    marker = fake_spark_submit(tmp_path, monkeypatch)
    hook = CommittedSparkSubmitHook()
    assert hook.kill_process_group(1.0), "nothing started yet: nothing to kill"
    with pytest.raises(AirflowException, match=r"^spark-submit was not started: it was killed") as refused:
        hook.submit("/jobs/app.py")
    assert "\n" not in str(refused.value)
    assert hook.process_group is None and not marker.exists(), "the fake spark-submit never ran"


@contextlib.contextmanager
def popen_then(monkeypatch: pytest.MonkeyPatch, between: Callable[[], None]) -> Iterator[None]:
    """spark-submit's ``Popen`` runs `between` after the process started and before it returns,
    which is before the hook can record the process: the window a kill may fall into."""
    real = subprocess.Popen

    def popen(args: Any, *more: Any, **kwargs: Any) -> Any:
        process = real(args, *more, **kwargs)
        if str(args[0]).endswith("spark-submit"):
            between()
        return process

    monkeypatch.setattr(subprocess, "Popen", popen)
    yield
    monkeypatch.setattr(subprocess, "Popen", real)


def test_a_kill_from_another_thread_between_popen_and_the_record_waits_for_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = fake_spark_submit(tmp_path, monkeypatch)
    hook = CommittedSparkSubmitHook()
    release = threading.Event()
    killed: list[bool] = []
    with popen_then(monkeypatch, lambda: release.wait(60)):
        runner, failures = submit_in_thread(hook)
        group = started_group(marker)  # started, and held before the record
        assert hook.process_group is None
        killer = threading.Thread(target=lambda: killed.append(hook.kill_process_group(30.0)))
        killer.start()
        wait_until(lambda: hook.kill_requested, "the kill to be asked for", 30)
        assert killer.is_alive() and process_group_alive(group), "the kill waits for the record"
        release.set()
        killer.join(60)
        runner.join(60)
    assert killed == [True]
    assert hook.process_group == group and not process_group_alive(group)
    assert failures, "spark-submit killed: submit fails"


def test_a_kill_in_the_submitting_threads_signal_handler_kills_the_group_as_it_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow calls on_kill from its SIGTERM handler, in the thread that runs execute, which may be
    inside ``Popen``: the kill cannot wait for the record there, so the record itself kills."""
    fake_spark_submit(tmp_path, monkeypatch)
    hook = CommittedSparkSubmitHook()
    in_handler: list[bool] = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: in_handler.append(hook.kill_process_group(5.0)))
    try:
        with popen_then(monkeypatch, lambda: signal.raise_signal(signal.SIGUSR1)):
            with pytest.raises(AirflowException, match="Error code is: -9"):
                hook.submit("/jobs/app.py")
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert in_handler == [False], "the handler returned at once: the group was not known yet"
    group = hook.process_group
    assert group is not None and hook.exit_code == -signal.SIGKILL
    assert hook.kill_process_group(10.0) and not process_group_alive(group)


def test_private_confs_go_to_a_properties_file_with_the_users_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenLineage's transport confs (an API key) leave the command line for a private properties
    file, after the user's own properties file; Spark 4 still reads spark-defaults.conf beside it."""
    spark_connection(monkeypatch, "local[2]")
    users = tmp_path / "users.properties"
    users.write_text("spark.executor.memory 2g\n")
    key = "spark.openlineage.transport.auth.apiKey"
    conf = {
        "spark.airflow_commit.job_id": "job-1",
        key: "k=ey\\1",
        "spark.openlineage.transport.url": "http://ol",
    }
    hook = CommittedSparkSubmitHook(conf=conf, properties_file=str(users), private_conf_dir=tmp_path)
    line = hook.submit_command("/jobs/app.py")
    assert "k=ey" not in " ".join(line) and "spark.openlineage" not in " ".join(line)
    private = tmp_path / "private-spark.properties"
    assert line[line.index("--properties-file") + 1 : line.index("--properties-file") + 3] == [
        str(private),
        "--load-spark-defaults",
    ]
    assert private.read_text() == (
        "spark.executor.memory 2g\n\n"
        "spark.openlineage.transport.auth.apiKey=k=ey\\\\1\n"
        "spark.openlineage.transport.url=http://ol\n"
    )
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert "spark.airflow_commit.job_id=job-1" in line

    with pytest.raises(ValueError, match=f"{key}: a private file needs private_conf_dir"):
        CommittedSparkSubmitHook(conf={key: "x"}).submit_command("/jobs/app.py")
