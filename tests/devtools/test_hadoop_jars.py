"""The pinned jars: the Hadoop peers the JVM-committer tests run, the metastore's JDBC driver and the
test cluster's minicluster are the pinned bytes (the peers for the Hadoop inside the installed
PySpark), and a cached jar that is not those bytes is refused and fetched again.

The fetches run the real Maven against Maven Central, each into a local repository of its own. An
empty one would first download Maven's dependency plugin and its 60-odd jars (about two minutes and
50 CPU-seconds per test); `_with_maven_tooling` copies those from the bootstrap's repository
instead, so Maven downloads only the artifact under test, or fails to. And Maven's JVM, which runs
for seconds, is told through ``MAVEN_OPTS`` (as a user would) to compile with C1 alone and collect
with the serial collector: a third of the CPU of its defaults on two cores.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_commit_provider.devtools import hadoop_jars
from airflow_commit_provider.devtools.hadoop_jars import (
    HADOOP_VERSION,
    METASTORE_ARTIFACTS,
    MINICLUSTER_ARTIFACTS,
    PEER_ARTIFACTS,
    HadoopJarsError,
    bundled_hadoop_version,
    fetch,
    minicluster_jars,
    peer_jars,
    postgres_jdbc_jar,
)

#: The folders of the bootstrap's repository that `mvn dependency:get` loads itself from (Maven 3.8's
#: dependency plugin, its dependencies and their parent POMs), none of them a pinned artifact. Were
#: one missing, or another Maven to need more, Maven would download it, and
#: `test_altered_jar_is_refused_then_fetched_again` says which.
MAVEN_TOOLING = (
    "asm",
    "backport-util-concurrent",
    "classworlds",
    "com/google",
    "commons-beanutils",
    "commons-cli",
    "commons-collections",
    "commons-digester",
    "commons-io",
    "commons-lang",
    "commons-logging",
    "commons-validator",
    "junit",
    "log4j",
    "org/apache/apache",
    "org/apache/commons",
    "org/apache/maven",
    "org/apache/velocity",
    "org/apache/xbean",
    "org/codehaus",
    "org/eclipse/aether",
    "org/sonatype",
    "oro",
    "xml-apis",
)


def _with_maven_tooling(repo: Path) -> Path:
    """`repo`, a local repository holding a copy of what Maven runs `dependency:get` with (copied,
    not linked: Maven updates its bookkeeping files in place)."""
    warm = hadoop_jars.repository()
    for folder in MAVEN_TOOLING:
        if (warm / folder).is_dir():
            shutil.copytree(warm / folder, repo / folder)
    assert not any(
        a.path(repo).exists() for a in PEER_ARTIFACTS + METASTORE_ARTIFACTS + MINICLUSTER_ARTIFACTS
    ), "no pinned jar"
    return repo


@pytest.fixture
def quick_maven(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAVEN_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


def _files(repo: Path) -> Iterator[Path]:
    return (path.relative_to(repo) for path in repo.rglob("*") if path.is_file())


def test_pinned_hadoop_aws_matches_the_hadoop_in_pyspark() -> None:
    assert bundled_hadoop_version() == HADOOP_VERSION
    hadoop_aws = next(a for a in PEER_ARTIFACTS if a.artifact == "hadoop-aws")
    assert hadoop_aws.version == HADOOP_VERSION


def test_cached_jars_are_the_pinned_ones() -> None:
    """Never skipped: the bootstrap fetches them, and a run without them must fail here."""
    jars = peer_jars()
    assert [jar.name for jar in jars] == [f"{a.artifact}-{a.version}.jar" for a in PEER_ARTIFACTS]
    assert all(jar.is_file() for jar in jars)
    [driver] = METASTORE_ARTIFACTS
    assert postgres_jdbc_jar() == driver.path(hadoop_jars.repository())
    assert minicluster_jars() == [a.path(hadoop_jars.repository()) for a in MINICLUSTER_ARTIFACTS]


@pytest.mark.usefixtures("quick_maven")
def test_altered_jar_is_refused_then_fetched_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small = next(a for a in PEER_ARTIFACTS if a.artifact == "hadoop-aws")
    monkeypatch.setattr(hadoop_jars, "PEER_ARTIFACTS", (small,))
    monkeypatch.setattr(hadoop_jars, "METASTORE_ARTIFACTS", ())
    monkeypatch.setattr(hadoop_jars, "MINICLUSTER_ARTIFACTS", ())
    repo = _with_maven_tooling(tmp_path / "repository")
    cached = small.path(repo)
    cached.parent.mkdir(parents=True)
    shutil.copyfile(small.path(hadoop_jars.repository()), cached)
    with cached.open("r+b") as jar:
        jar.write(b"PK\x00")
    tooling = set(_files(repo))

    with pytest.raises(HadoopJarsError, match=r"hadoop-aws-3\.5\.0\.jar has SHA-256 \w+, not the pinned"):
        peer_jars(repo)
    assert fetch(repo) == [cached]
    assert peer_jars(repo) == [cached]
    fetched = {path for path in set(_files(repo)) - tooling if path.suffix in (".jar", ".pom")}
    assert fetched == set(), f"Maven downloaded {fetched} besides the jar: add them to MAVEN_TOOLING"


@pytest.mark.usefixtures("quick_maven")
def test_unfetchable_artifact_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = dataclasses.replace(PEER_ARTIFACTS[0], artifact="hadoop-aws-does-not-exist")
    monkeypatch.setattr(hadoop_jars, "PEER_ARTIFACTS", (missing,))
    monkeypatch.setattr(hadoop_jars, "METASTORE_ARTIFACTS", ())
    monkeypatch.setattr(hadoop_jars, "MINICLUSTER_ARTIFACTS", ())
    repo = _with_maven_tooling(tmp_path / "repository")
    with pytest.raises(
        HadoopJarsError, match=r"org\.apache\.hadoop:hadoop-aws-does-not-exist:3\.5\.0 .*Could not"
    ):
        fetch(repo)
    assert not missing.path(repo).exists()
