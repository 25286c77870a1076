"""What a task's spark-submit needs on the worker: before submitting, the operator checks spark-submit
and Java are there, where Spark's launcher looks for them, and fails in one line naming what is
missing.

What a real spark-submit inherits from its task process (not the task's stdin, the supervisor's
socket; a private conf by a file of its own, spark-defaults.conf still applying) is checked by the
one real spark-submit of test_hadoop_engine_spark.py, which a task process of its own runs.
"""

from __future__ import annotations

import os
import shutil
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
