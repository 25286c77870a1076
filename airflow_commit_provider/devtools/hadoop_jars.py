"""Hadoop's S3A committers, Spark's cloud commit protocol and PostgreSQL's JDBC driver, fetched once.

PyPI's PySpark bundles Hadoop's client (with the manifest committer) but neither ``hadoop-aws`` (the
S3A filesystem and its magic, directory and partitioned committers) nor ``spark-hadoop-cloud``
(``PathOutputCommitProtocol`` and ``BindingParquetOutputCommitter``, without which Spark hands an
S3A or manifest committer no task output). The tests and benchmarks run those peers beside our
committers, so the jars must match the Hadoop inside PySpark and be the same bytes on every machine:
each is pinned here by coordinate and SHA-256, fetched with Maven into Maven's local repository
(outside any checkout, so a fresh clone reuses it) and checked again before it is used.

A Hive metastore that several Spark applications share keeps its tables in a real database; the
tests and the benchmark keep it in PostgreSQL, whose JDBC driver (not in PySpark) is pinned and
fetched the same way (`METASTORE_ARTIFACTS`) and goes on the driver's classpath only where a
metastore is used (`postgres_jdbc_jar`).

The tests' YARN and HDFS (``devtools.hadoop_cluster``) run Hadoop's own MiniDFSCluster and
MiniYARNCluster from ``hadoop-client-minicluster`` at the same Hadoop, beside the client jars
PySpark bundles, with the few jars that shaded jar uses but leaves out (`MINICLUSTER_ARTIFACTS`,
`minicluster_jars`).

``python -m airflow_commit_provider.devtools.hadoop_jars fetch`` fetches what is missing and
verifies every jar (``scripts/bootstrap.sh`` runs it); ``classpath`` prints the verified jars.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: Overrides where the jars are cached (Maven's ``maven.repo.local``); default ``~/.m2/repository``.
REPOSITORY_ENV = "AIRFLOW_COMMIT_MAVEN_REPO"


@dataclass(frozen=True)
class JvmArtifact:
    """One jar from Maven Central, pinned by its SHA-256."""

    group: str
    artifact: str
    version: str
    sha256: str
    why: str

    @property
    def coordinate(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    def path(self, repository: Path) -> Path:
        """Where Maven keeps it in a local repository."""
        return (
            repository.joinpath(*self.group.split("."))
            / self.artifact
            / self.version
            / f"{self.artifact}-{self.version}.jar"
        )


#: The Hadoop that PySpark 4.2.0 bundles (``pyspark/jars/hadoop-client-api-3.5.0.jar``).
HADOOP_VERSION = "3.5.0"

#: hadoop-aws and what it declares at compile scope in its 3.5.0 pom (``hadoop-project``:
#: ``aws-java-sdk-v2.version`` 2.35.4, ``amazon-s3-analyticsaccelerator-s3.version`` 1.3.1).
#: spark-hadoop-cloud is the newest release Maven Central serves: 4.2.0 is not published there
#: (its metadata lists 4.0.0-4.1.2); its three classes are unchanged against Spark 4.2's
#: ``HadoopMapReduceCommitProtocol``, which the tests that run it prove.
PEER_ARTIFACTS: tuple[JvmArtifact, ...] = (
    JvmArtifact(
        "org.apache.hadoop",
        "hadoop-aws",
        HADOOP_VERSION,
        "66bd9eefb938b1a1657487324b63c13df2d8b17164a1dd24e0ef37b905bc5baa",
        "S3AFileSystem and the S3A committers",
    ),
    JvmArtifact(
        "software.amazon.awssdk",
        "bundle",
        "2.35.4",
        "db4b55f24ad1b4e70f17eb1717a4de76a8dadc5a27d764be7c44ff67b2c1c677",
        "the AWS SDK v2 that hadoop-aws 3.5.0 is built against (shaded, one jar)",
    ),
    JvmArtifact(
        "software.amazon.s3.analyticsaccelerator",
        "analyticsaccelerator-s3",
        "1.3.1",
        "4959a9747cbb479c73c3ffbcd479bee5b014f8b2880994585a8693fb9d24675e",
        "hadoop-aws 3.5.0's input stream factory links against it",
    ),
    JvmArtifact(
        "org.apache.spark",
        "spark-hadoop-cloud_2.13",
        "4.1.2",
        "672d7d872f434cb7fe1c90f7edcd19b1e8c67a335a578288426fbd4db5096915",
        "PathOutputCommitProtocol and BindingParquetOutputCommitter",
    ),
)


#: PostgreSQL's JDBC driver (pgjdbc; its one declared dependency, checker-qual, holds annotations
#: only, so the jar runs alone): what Hive's metastore client (DataNucleus) connects with.
METASTORE_ARTIFACTS: tuple[JvmArtifact, ...] = (
    JvmArtifact(
        "org.postgresql",
        "postgresql",
        "42.7.14",
        "73914527305a40cce504b0d3d90b23caf565136912d607ae8ae7c5895512332c",
        "the JDBC driver of a Hive metastore kept in PostgreSQL",
    ),
)


#: Hadoop's MiniDFSCluster and MiniYARNCluster, and what the shaded jar uses but does not hold (each
#: found missing in turn when the cluster started; versions from Hadoop 3.5.0's ``hadoop-project``
#: pom). Its ``hadoop-client-api``/``-runtime`` and the logging jars are PySpark's own.
MINICLUSTER_ARTIFACTS: tuple[JvmArtifact, ...] = (
    JvmArtifact(
        "org.apache.hadoop",
        "hadoop-client-minicluster",
        HADOOP_VERSION,
        "06772d24529e59939915979b3edba204d367750ef7dc5120411f35221dd4818c",
        "MiniDFSCluster and MiniYARNCluster",
    ),
    JvmArtifact(
        "org.junit.jupiter",
        "junit-jupiter-api",
        "5.13.3",
        "1a15a52253a972c82c0dbf77759a983f5afed0583585cdc5b2a3beaa1f4ae0ac",
        "GenericTestUtils.getTestDir, which both clusters' constructors call, asserts with it",
    ),
    JvmArtifact(
        "ch.qos.reload4j",
        "reload4j",
        "1.2.22",
        "222f90d3e69541218ef6e70547749d693bd4c1846817e5bd7949b3e28950f99f",
        "org.apache.log4j.Logger, which the ResourceManager's AllocationTagsManager uses",
    ),
    JvmArtifact(
        "org.bouncycastle",
        "bcprov-jdk18on",
        "1.82",
        "14cde2fdfaa8890480a8e5b67aceef0c90f96682c1e23c133bafdc9e0b3255ce",
        "the ResourceManager's init registers BouncyCastleProvider",
    ),
    JvmArtifact(
        "org.bouncycastle",
        "bcpkix-jdk18on",
        "1.82",
        "bdc723e20834832ac6af136cb5b5ff05e43b71d4fa151cc6510d9212ee086e63",
        "the ResourceManager's init links OperatorCreationException",
    ),
    JvmArtifact(
        "org.bouncycastle",
        "bcutil-jdk18on",
        "1.82",
        "4420691958ad1c0ba275a6d6d8a6317adbdbdc9277055b6a72aa89c88cda8c7d",
        "bcpkix 1.82 links MiscObjectIdentifiers from it",
    ),
)


class HadoopJarsError(RuntimeError):
    """A pinned jar is missing, could not be fetched, or is not the pinned bytes."""


def repository() -> Path:
    """Maven's local repository that holds the jars (``$AIRFLOW_COMMIT_MAVEN_REPO`` overrides)."""
    configured = os.environ.get(REPOSITORY_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".m2" / "repository"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _problem(artifact: JvmArtifact, repo: Path) -> str | None:
    """Why the cached jar cannot be used, or None when it is the pinned one."""
    jar = artifact.path(repo)
    if not jar.is_file():
        return f"{artifact.coordinate} is not in {repo}"
    actual = _sha256(jar)
    if actual != artifact.sha256:
        return f"{jar} has SHA-256 {actual}, not the pinned {artifact.sha256}"
    return None


def pyspark_jars_dir() -> Path:
    """The installed PySpark's bundled jars (Hadoop's client, Hive 2.3's metastore, logging)."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def bundled_hadoop_version() -> str | None:
    """The Hadoop version of the client jars inside the installed PySpark, if it has them."""
    for jar in pyspark_jars_dir().glob("hadoop-client-api-*.jar"):
        return jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    return None


def fetch(repo: Path | None = None) -> list[Path]:
    """Fetch every pinned jar that is missing or wrong with Maven, verify all, and return them.

    Raises HadoopJarsError naming each artifact that could not be made available.
    """
    repo = repo or repository()
    bundled = bundled_hadoop_version()
    if bundled is not None and bundled != HADOOP_VERSION:
        raise HadoopJarsError(
            f"PySpark bundles Hadoop {bundled} but the pinned hadoop-aws is {HADOOP_VERSION}: "
            "update PEER_ARTIFACTS in airflow_commit_provider/devtools/hadoop_jars.py"
        )
    pinned = PEER_ARTIFACTS + METASTORE_ARTIFACTS + MINICLUSTER_ARTIFACTS
    failures = []
    for artifact in pinned:
        if _problem(artifact, repo) is None:
            continue
        artifact.path(repo).unlink(missing_ok=True)
        error = _maven_get(artifact, repo)
        problem = error or _problem(artifact, repo)
        if problem:
            failures.append(f"{artifact.coordinate} ({artifact.why}): {problem}")
    if failures:
        raise HadoopJarsError("could not fetch from Maven Central: " + "; ".join(failures))
    return [artifact.path(repo) for artifact in pinned]


def _maven_get(artifact: JvmArtifact, repo: Path) -> str | None:
    """Let Maven download one jar (checksums from the repository enforced); the error, if any."""
    mvn = shutil.which("mvn")
    if mvn is None:
        return "Maven ('mvn') is not on PATH (Debian: apt-get install maven)"
    command = [
        mvn,
        "--batch-mode",
        "--quiet",
        "--strict-checksums",
        "-Dstyle.color=never",
        "dependency:get",
        f"-Dartifact={artifact.coordinate}",
        "-Dtransitive=false",
        f"-Dmaven.repo.local={repo}",
    ]
    done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return None
    errors = [line.removeprefix("[ERROR]").strip() for line in done.stdout.splitlines() if "[ERROR]" in line]
    first = next((error for error in errors if error), f"mvn exited with {done.returncode}")
    return first.split("Couldn't download artifact: ")[-1]


def _verified(artifacts: tuple[JvmArtifact, ...], repo: Path | None) -> list[Path]:
    """The jars of `artifacts`, verified; HadoopJarsError says what is missing and how to fetch it."""
    repo = repo or repository()
    problems = [problem for artifact in artifacts if (problem := _problem(artifact, repo))]
    if problems:
        raise HadoopJarsError(
            "; ".join(problems) + f" (run: python -m {__spec__.name if __spec__ else __name__} fetch)"
        )
    return [artifact.path(repo) for artifact in artifacts]


def peer_jars(repo: Path | None = None) -> list[Path]:
    """Hadoop's peers (`PEER_ARTIFACTS`), verified."""
    return _verified(PEER_ARTIFACTS, repo)


def postgres_jdbc_jar(repo: Path | None = None) -> Path:
    """PostgreSQL's JDBC driver (`METASTORE_ARTIFACTS`), verified."""
    [jar] = _verified(METASTORE_ARTIFACTS, repo)
    return jar


def minicluster_jars(repo: Path | None = None) -> list[Path]:
    """Hadoop's minicluster and what it needs beside PySpark's jars (`MINICLUSTER_ARTIFACTS`), verified."""
    return _verified(MINICLUSTER_ARTIFACTS, repo)


def peer_spark_conf(jars: list[Path], local_dir: Path) -> dict[str, str]:
    """Spark conf that runs Hadoop's committers from `jars`, keeping their local files in `local_dir`.

    The jars go on the driver's and executors' JVM classpath at launch: ``spark.jars`` would copy
    them (the SDK bundle is 690 MB) into every executor's work directory, while a classpath entry
    reads them in place, which is right when every JVM runs on this machine. S3A buffers uploads
    under ``hadoop.tmp.dir`` (``/tmp/hadoop-<user>`` by default) and its staging committers keep
    their upload lists under ``tmp/staging`` of the cluster filesystem, which on ``file://`` is the
    working directory: a killed or failed job leaves both behind, so they go where the caller
    removes them.
    """
    classpath = os.pathsep.join(str(jar) for jar in jars)
    return {
        "spark.driver.extraClassPath": classpath,
        "spark.executor.extraClassPath": classpath,
        "spark.hadoop.hadoop.tmp.dir": str(local_dir / "hadoop"),
        "spark.hadoop.fs.s3a.committer.staging.tmp.path": (local_dir / "staging").as_uri(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("command", choices=("fetch", "classpath"))
    args = parser.parse_args(argv)
    try:
        jars = fetch() if args.command == "fetch" else peer_jars()
    except HadoopJarsError as error:
        print(f"hadoop_jars: ERROR: {error}", file=sys.stderr)
        return 1
    if args.command == "classpath":
        print(os.pathsep.join(str(jar) for jar in jars))
    else:
        print(f"hadoop_jars: {len(jars)} jars verified in {repository()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
