"""What a task's spark-submit needs and inherits on the worker, with Spark's real launcher.

Before submitting, the operator checks spark-submit and Java are there, where Spark's launcher
looks for them, and fails in one line naming what is missing.

A task process's stdin is the Airflow supervisor's socket: the test gives a worker process a socket
as stdin, as the supervisor does, and the submitted application reads which file its spark-submit
(its parent, the launcher's JVM) has as stdin.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.task_instances import task_instance

from airflow_commit_provider.hooks.spark_launcher import (
    MIN_JAVA,
    SparkLauncherError,
    check_spark_launcher,
    java_major_version,
)
from airflow_commit_provider.operators.spark_submit import CommittedSparkSubmitOperator

#: The application spark-submit runs: it records its parent (spark-submit's JVM), that one's stdin, and
#: what the driver's Spark conf holds of a private conf and of spark-defaults.conf.
APPLICATION = """\
import json, os, sys
from pyspark import SparkConf, SparkContext
SparkContext._ensure_initialized()
parent = os.getppid()
record = {
    "parent": parent,
    "parent_command": open(f"/proc/{parent}/cmdline", "rb").read().decode().split("\\0"),
    "parent_stdin": os.readlink(f"/proc/{parent}/fd/0"),
    "conf": {key: SparkConf().get(key, None) for key in sys.argv[2:]},
}
with open(sys.argv[1], "w") as out:
    json.dump(record, out)
"""

#: An API key OpenLineage's transport may carry: private, never on a command line.
API_KEY = "ol-api-key-9f3c=x y"
PRIVATE = "spark.openlineage.transport.auth.apiKey"
DEFAULT = "spark.airflow_commit.test.from_defaults"

#: One task's submit, in a process of its own (the task process), printing spark-submit's PID.
WORKER = f"""\
import json, sys
from airflow_commit_provider.hooks import CommittedSparkSubmitHook
hook = CommittedSparkSubmitHook(
    application_args=[sys.argv[2], {PRIVATE!r}, {DEFAULT!r}],
    conf={{"spark.ui.enabled": "false", {PRIVATE!r}: {API_KEY!r}}},
    private_conf_dir=sys.argv[3],
)
hook.submit(sys.argv[1])
print(json.dumps({{"spark_submit_pid": hook.process_group}}))
"""


@pytest.mark.slow
def test_spark_submit_does_not_inherit_the_tasks_stdin_nor_show_a_private_conf(
    tmp_path: Path, spark_default: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One real spark-submit: its stdin is not the task's, and a private conf reaches the driver
    through the properties file while spark-defaults.conf still applies, on no command line."""
    application = tmp_path / "record_stdin.py"
    application.write_text(APPLICATION)
    record = tmp_path / "record.json"
    spark_conf_dir, private_dir = tmp_path / "spark-conf", tmp_path / "try"
    spark_conf_dir.mkdir()
    private_dir.mkdir()
    (spark_conf_dir / "spark-defaults.conf").write_text(f"{DEFAULT} yes\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(spark_conf_dir))
    supervisor, task_end = socket.socketpair()
    with supervisor, task_end:
        worker = subprocess.run(
            [sys.executable, "-c", WORKER, str(application), str(record), str(private_dir)],
            stdin=task_end,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
    assert worker.returncode == 0, worker.stdout[-3000:] + worker.stderr[-3000:]
    submitted = json.loads(worker.stdout.strip().splitlines()[-1])
    seen = json.loads(record.read_text())
    assert seen["parent"] == submitted["spark_submit_pid"], "the application's parent is spark-submit"
    assert "org.apache.spark.deploy.SparkSubmit" in seen["parent_command"]
    assert seen["parent_stdin"] == os.devnull, f"spark-submit's stdin is {seen['parent_stdin']}"
    assert seen["conf"] == {PRIVATE: API_KEY, DEFAULT: "yes"}, seen["conf"]
    assert (
        API_KEY not in " ".join(seen["parent_command"]) and "ol-api-key" not in worker.stdout + worker.stderr
    )
    private_file = private_dir / "private-spark.properties"
    assert stat.S_IMODE(private_file.stat().st_mode) == 0o600


# The launcher check ---------------------------------------------------------------------------------
def write_locally(tmp_path: Path, **kwargs: Any) -> CommittedSparkSubmitOperator:
    return CommittedSparkSubmitOperator(
        task_id="write",
        application=str(tmp_path / "app.py"),
        destination=str(tmp_path / "out"),
        committer="manifest",
        **kwargs,
    )


def one_try() -> dict[str, Any]:
    ti = task_instance(dag_id="ingest", task_id="write", run_id="manual__1", map_index=-1, try_number=1)
    return {"ti": ti}


def assert_one_line(error: BaseException, expected: str) -> None:
    message = str(error)
    assert message == expected, message
    assert "\n" not in message


def test_a_missing_spark_binary_fails_in_one_line(tmp_path: Path, spark_default: None) -> None:
    missing = str(tmp_path / "spark" / "bin" / "spark-submit")
    with pytest.raises(SparkLauncherError) as raised:
        write_locally(tmp_path, spark_binary=missing).execute(one_try())
    assert_one_line(
        raised.value,
        f"spark_binary {missing} does not exist or is not executable (set spark_binary to a spark-submit, "
        "or install 'airflow-commit-provider[spark]' for a local Spark)",
    )
    assert not (tmp_path / "out").exists(), "nothing was written"


def test_no_spark_submit_on_path_fails_in_one_line(tmp_path: Path, spark_default: None) -> None:
    """spark3-submit (a name the Spark connection allows) is on neither PATH nor beside this Python."""
    assert shutil.which("spark3-submit") is None
    with pytest.raises(SparkLauncherError) as raised:
        write_locally(tmp_path, spark_binary="spark3-submit").execute(one_try())
    assert_one_line(
        raised.value,
        "spark3-submit not found on PATH (set spark_binary, or install 'airflow-commit-provider[spark]' "
        "for a local Spark)",
    )


def test_no_java_fails_in_one_line(
    tmp_path: Path, spark_default: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real spark-submit on PATH, but no JAVA_HOME and no java on PATH."""
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "spark-submit").is_file() and shutil.which("java", path=str(bin_dir)) is None
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(SparkLauncherError) as raised:
        write_locally(tmp_path).execute(one_try())
    assert_one_line(raised.value, "java not found: set JAVA_HOME or install a JDK 17+")


def test_java_home_without_java_fails_in_one_line(
    tmp_path: Path, spark_default: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark's launcher takes JAVA_HOME over PATH, so a java on PATH does not save a wrong JAVA_HOME."""
    assert shutil.which("java") is not None
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jre"))
    with pytest.raises(SparkLauncherError) as raised:
        write_locally(tmp_path).execute(one_try())
    assert_one_line(
        raised.value,
        f"JAVA_HOME={tmp_path / 'jre'} has no bin/java: point JAVA_HOME at a JDK 17+ (or unset it to use "
        "java from PATH)",
    )


def test_an_old_java_is_named(tmp_path: Path) -> None:
    """The JDK's version comes from its release file, as a JDK installs it (no JVM is started)."""
    java_home = tmp_path / "jdk-11"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").symlink_to(os.path.realpath(shutil.which("java") or "java"))
    (java_home / "release").write_text('IMPLEMENTOR="Eclipse Adoptium"\nJAVA_VERSION="11.0.22"\n')
    spark_submit = str(Path(sys.executable).parent / "spark-submit")
    environment = {"PATH": os.environ["PATH"], "JAVA_HOME": str(java_home)}
    with pytest.raises(SparkLauncherError, match=r"is Java 11; Spark 4 needs Java 17\+"):
        check_spark_launcher(spark_submit, environment)
    # A JDK 17+ (this machine's) passes.
    check_spark_launcher(spark_submit, {"PATH": os.environ["PATH"]})
    java = os.path.realpath(shutil.which("java") or "java")
    assert (java_major_version(Path(java).parent.parent) or 0) >= MIN_JAVA


def test_a_drifted_pyspark_is_named_before_submitting(monkeypatch: pytest.MonkeyPatch) -> None:
    """pyspark and pyspark-client at two releases break every task later; this environment's own
    spark-submit is refused first, naming both (another Spark install is not ours to judge)."""
    from airflow_commit_provider.spark import install_check

    real = install_check.metadata.version
    monkeypatch.setattr(
        install_check.metadata, "version", lambda dist: "4.3.0" if dist == "pyspark" else real(dist)
    )
    spark_submit = str(Path(sys.executable).parent / "spark-submit")
    with pytest.raises(SparkLauncherError, match=r"is broken: pyspark 4.3.0 != pyspark-client") as refused:
        check_spark_launcher(spark_submit, {"PATH": os.environ["PATH"]})
    assert "\n" not in str(refused.value)
