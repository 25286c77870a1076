"""Whether the installed PySpark is whole: ``pyspark`` and ``pyspark-client`` at one release.

Both distributions write into the same ``pyspark/`` folder, and whichever pip installed last wins
file by file. When their versions differ, the Python side no longer matches the JVM jars, and
Python UDFs and ``mapInArrow`` (every task of ours) fail with ``Py4JError ...
UserDefinedPythonFunction`` deep inside a job. The dependency ranges cannot prevent it (PyPI may
have a newer ``pyspark`` than ``pyspark-client``), so the bootstrap, the drift test and the
operator's check before submitting ask here, whatever versions are installed.

``python -m airflow_commit_provider.spark.install_check`` prints the version, or the problems and
exits 1.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

__all__ = ["pyspark_install_problems", "pyspark_root"]


def pyspark_root() -> Path | None:
    """The installed ``pyspark/`` folder (from either distribution), without importing PySpark."""
    for dist in ("pyspark", "pyspark-client"):
        try:
            return Path(str(metadata.distribution(dist).locate_file("pyspark")))
        except metadata.PackageNotFoundError:
            continue
    return None


def pyspark_install_problems() -> list[str]:
    """What is wrong with the installed PySpark, one sentence each; empty when it is whole."""
    versions: dict[str, str] = {}
    problems = []
    for dist in ("pyspark", "pyspark-client"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            problems.append(f"{dist} is not installed")
    if len(versions) == 2 and versions["pyspark"] != versions["pyspark-client"]:
        problems.append(
            f"pyspark {versions['pyspark']} != pyspark-client {versions['pyspark-client']}: they share the "
            f"pyspark/ folder, so its Python no longer matches its jars (install both at one release, e.g. "
            f"pip install 'pyspark=={versions['pyspark-client']}')"
        )
    root = pyspark_root()
    if "pyspark" in versions and root is not None:
        folder_version = _folder_version(root / "version.py")
        if folder_version not in (None, versions["pyspark"]):
            problems.append(
                f"{root / 'version.py'} says {folder_version} but pyspark is {versions['pyspark']}"
            )
        jars = sorted(path.name for path in (root / "jars").glob("spark-core_*.jar"))
        if not jars:
            problems.append(f"no spark-core jar under {root / 'jars'}")
        elif not any(name.endswith(f"-{versions['pyspark']}.jar") for name in jars):
            problems.append(f"Spark jars {jars} do not match pyspark {versions['pyspark']}")
    return problems


def _folder_version(version_file: Path) -> str | None:
    try:
        text = version_file.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("__version__"):
            return line.partition("=")[2].strip().strip("\"'")
    return None


def main() -> int:
    problems = pyspark_install_problems()
    if problems:
        print("\n".join(problems))
        return 1
    print(metadata.version("pyspark"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
