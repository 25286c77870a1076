"""Whether spark-submit can start on this worker, checked before submitting.

spark-submit is a script that starts a JVM, on every master (the cluster only runs the driver in
cluster mode). Without the script or a Java it fails with an exit code and launcher output in the
task log; this check names what is missing in one line instead. It looks where Spark's launcher
(``bin/spark-class``) looks: ``$JAVA_HOME/bin/java`` if ``JAVA_HOME`` is set, else ``java`` on
``PATH``, both in the environment spark-submit gets. A spark-submit of this environment's own
PySpark also needs ``pyspark`` and ``pyspark-client`` at one release.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["MIN_JAVA", "SparkLauncherError", "check_spark_launcher", "java_major_version"]

#: Spark 4 runs on Java 17 or later.
MIN_JAVA = 17
_EXTRA_HINT = "install 'airflow-commit-provider[spark]' for a local Spark"
_RELEASE_VERSION = re.compile(r'^JAVA_VERSION="?([0-9][0-9._]*)', re.MULTILINE)


class SparkLauncherError(RuntimeError):
    """spark-submit cannot start here: its script or a suitable Java is missing."""


def check_spark_launcher(binary: str, environment: Mapping[str, str]) -> None:
    """Raise :class:`SparkLauncherError` (one line) unless `binary` and a Java 17+ are found.

    `environment` is the one spark-submit runs with: its ``PATH`` and ``JAVA_HOME`` count.
    """
    path = environment.get("PATH", "")
    found = shutil.which(binary, path=path)
    if found is None:
        if os.sep in binary:
            raise SparkLauncherError(
                f"spark_binary {binary} does not exist or is not executable (set spark_binary to a "
                f"spark-submit, or {_EXTRA_HINT})"
            )
        raise SparkLauncherError(f"{binary} not found on PATH (set spark_binary, or {_EXTRA_HINT})")
    _check_installed_pyspark(found)
    if _spark_env_script(found, environment) is not None:
        return  # Spark's conf/spark-env.sh can set JAVA_HOME: the launcher knows better than we do
    java_home = environment.get("JAVA_HOME")
    if java_home:
        home, java = Path(java_home), Path(java_home, "bin", "java")
        if not (java.is_file() and os.access(java, os.X_OK)):
            raise SparkLauncherError(
                f"JAVA_HOME={java_home} has no bin/java: point JAVA_HOME at a JDK {MIN_JAVA}+ (or unset it "
                "to use java from PATH)"
            )
    else:
        on_path = shutil.which("java", path=path)
        if on_path is None:
            raise SparkLauncherError(f"java not found: set JAVA_HOME or install a JDK {MIN_JAVA}+")
        java = Path(on_path)
        home = Path(os.path.realpath(java)).parent.parent  # /usr/bin/java -> <JDK>/bin/java
    version = java_major_version(home)
    if version is not None and version < MIN_JAVA:
        raise SparkLauncherError(
            f"{java} is Java {version}; Spark 4 needs Java {MIN_JAVA}+: set JAVA_HOME to a JDK {MIN_JAVA}+"
        )


def java_major_version(java_home: Path) -> int | None:
    """The major version in a JDK's ``release`` file (no JVM started); None if unknown."""
    try:
        release = (java_home / "release").read_text(errors="replace")
    except OSError:
        return None
    match = _RELEASE_VERSION.search(release)
    if match is None:
        return None
    parts = match.group(1).replace("_", ".").split(".")
    major = parts[1] if parts[0] == "1" and len(parts) > 1 else parts[0]  # "1.8.0" is Java 8
    return int(major) if major.isdigit() else None


def _check_installed_pyspark(spark_submit: str) -> None:
    """A spark-submit of this environment's PySpark runs its jars with its Python: both must be one
    release (``spark.install_check``), or every task fails later with a Py4JError."""
    from airflow_commit_provider.spark.install_check import pyspark_install_problems, pyspark_root

    root = pyspark_root()
    script = Path(os.path.realpath(spark_submit))
    ours = (Path(os.path.realpath(sys.prefix)) / "bin", Path(os.path.realpath(root or "/nonexistent")))
    if root is None or not any(script.is_relative_to(folder) for folder in ours):
        return  # another Spark install: its own launcher and jars
    problems = pyspark_install_problems()
    if problems:
        raise SparkLauncherError(f"the PySpark of {spark_submit} is broken: {'; '.join(problems)}")


def _spark_env_script(spark_submit: str, environment: Mapping[str, str]) -> Path | None:
    """Spark's ``spark-env.sh`` that spark-submit will source, if there is one."""
    homes = [environment.get("SPARK_HOME"), str(Path(os.path.realpath(spark_submit)).parent.parent)]
    conf_dirs = [environment.get("SPARK_CONF_DIR"), *(str(Path(h, "conf")) for h in homes if h)]
    for conf_dir in conf_dirs:
        if conf_dir and Path(conf_dir, "spark-env.sh").is_file():
            return Path(conf_dir, "spark-env.sh")
    return None
