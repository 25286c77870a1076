"""The pinned jars: the Hadoop peers the JVM-committer tests run and the metastore's JDBC driver are
the pinned bytes (the peers for the Hadoop inside the installed PySpark), and a cached jar that is
not those bytes is refused and fetched again."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from airflow_commit_provider.devtools import hadoop_jars
from airflow_commit_provider.devtools.hadoop_jars import (
    HADOOP_VERSION,
    METASTORE_ARTIFACTS,
    PEER_ARTIFACTS,
    HadoopJarsError,
    bundled_hadoop_version,
    fetch,
    peer_jars,
    postgres_jdbc_jar,
)


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


def test_altered_jar_is_refused_then_fetched_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small = next(a for a in PEER_ARTIFACTS if a.artifact == "hadoop-aws")
    monkeypatch.setattr(hadoop_jars, "PEER_ARTIFACTS", (small,))
    monkeypatch.setattr(hadoop_jars, "METASTORE_ARTIFACTS", ())
    cached = small.path(tmp_path)
    cached.parent.mkdir(parents=True)
    shutil.copyfile(small.path(hadoop_jars.repository()), cached)
    with cached.open("r+b") as jar:
        jar.write(b"PK\x00")

    with pytest.raises(HadoopJarsError, match=r"hadoop-aws-3\.5\.0\.jar has SHA-256 \w+, not the pinned"):
        peer_jars(tmp_path)
    assert fetch(tmp_path) == [cached]
    assert peer_jars(tmp_path) == [cached]


def test_unfetchable_artifact_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = dataclasses.replace(PEER_ARTIFACTS[0], artifact="hadoop-aws-does-not-exist")
    monkeypatch.setattr(hadoop_jars, "PEER_ARTIFACTS", (missing,))
    monkeypatch.setattr(hadoop_jars, "METASTORE_ARTIFACTS", ())
    with pytest.raises(
        HadoopJarsError, match=r"org\.apache\.hadoop:hadoop-aws-does-not-exist:3\.5\.0 .*Could not"
    ):
        fetch(tmp_path)
