"""Spark conf for Hadoop's own committers, and `_SUCCESS` compatibility in both directions.

PySpark's bundled Hadoop has the manifest committer but neither hadoop-aws (S3A) nor
spark-hadoop-cloud (PathOutputCommitProtocol), so the JVM proof uses the manifest committer
factory on file:// without the protocol binding.
"""

from __future__ import annotations

import pytest

from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.spark import applied_conf, jvm_committer_conf, write_committed
from airflow_commit_provider.spark.jvm_committers import (
    BINDING_PARQUET_COMMITTER,
    MANIFEST_FACTORY,
    PATH_OUTPUT_COMMIT_PROTOCOL,
    S3A_FACTORY,
)

H = "spark.hadoop."


def test_s3a_magic_conf():
    conf = jvm_committer_conf("s3a://bucket/table", "magic", job_id="job-1")
    assert conf[H + "mapreduce.outputcommitter.factory.scheme.s3a"] == S3A_FACTORY
    assert conf[H + "fs.s3a.committer.name"] == "magic"
    assert conf[H + "fs.s3a.committer.magic.enabled"] == "true"
    assert conf[H + "fs.s3a.committer.require.uuid"] == "true"
    assert conf[H + "fs.s3a.committer.uuid"] == "job-1"
    assert conf[H + "mapreduce.fileoutputcommitter.algorithm.version"] == "1"
    assert conf["spark.sql.sources.commitProtocolClass"] == PATH_OUTPUT_COMMIT_PROTOCOL
    assert conf["spark.sql.parquet.output.committer.class"] == BINDING_PARQUET_COMMITTER
    assert conf["spark.sql.sources.partitionOverwriteMode"] == "static"
    assert H + "fs.s3a.committer.staging.conflict-mode" not in conf


@pytest.mark.parametrize("committer", ["directory", "partitioned"])
def test_s3a_staging_conf(committer):
    conf = jvm_committer_conf("s3a://bucket/table", committer, conflict_mode="replace")
    assert conf[H + "fs.s3a.committer.name"] == committer
    assert conf[H + "fs.s3a.committer.staging.conflict-mode"] == "replace"
    assert H + "fs.s3a.committer.uuid" not in conf
    assert (
        jvm_committer_conf("s3a://b/t", committer)[H + "fs.s3a.committer.staging.conflict-mode"] == "append"
    )


@pytest.mark.parametrize(
    ("destination", "factory_key", "factory"),
    [
        ("file:///data/t", "file", MANIFEST_FACTORY),
        ("/data/t", "file", MANIFEST_FACTORY),
        ("hdfs://nn/t", "hdfs", MANIFEST_FACTORY),
        ("gs://bucket/t", "gs", MANIFEST_FACTORY),
        (
            "abfss://c@acct.dfs.core.windows.net/t",
            "abfss",
            "org.apache.hadoop.fs.azurebfs.commit.AzureManifestCommitterFactory",
        ),
    ],
)
def test_manifest_conf(destination, factory_key, factory):
    conf = jvm_committer_conf(destination, "manifest", dynamic_partition_overwrite=True)
    assert conf[f"{H}mapreduce.outputcommitter.factory.scheme.{factory_key}"] == factory
    assert conf["spark.sql.sources.partitionOverwriteMode"] == "dynamic"
    assert "spark.sql.sources.writeJobUUID" not in conf  # the bound protocol supplies it
    unbound = jvm_committer_conf(destination, "manifest", bind_commit_protocol=False)
    assert len(unbound["spark.sql.sources.writeJobUUID"]) == 36
    assert (
        jvm_committer_conf(destination, "manifest", job_id="j-1")["spark.sql.sources.writeJobUUID"] == "j-1"
    )


def test_file_committer_conf_and_binding_flag():
    conf = jvm_committer_conf("file:///t", "file", bind_commit_protocol=False)
    assert conf[H + "mapreduce.fileoutputcommitter.algorithm.version"] == "1"
    assert "spark.sql.sources.writeJobUUID" not in conf
    assert "spark.sql.sources.commitProtocolClass" not in conf
    assert "spark.sql.parquet.output.committer.class" not in conf
    v2 = jvm_committer_conf("hdfs://nn/t", "file-v2", allow_unsafe_v2=True)
    assert v2[H + "mapreduce.fileoutputcommitter.algorithm.version"] == "2"


@pytest.mark.parametrize(
    ("destination", "committer", "kwargs", "message"),
    [
        ("s3a://b/t", "manifest", {}, "renames files"),
        ("s3://b/t", "manifest", {}, "renames files"),
        ("hdfs://nn/t", "file-v2", {}, "allow_unsafe_v2"),
        ("s3a://b/t", "magic", {"dynamic_partition_overwrite": True}, "dynamic partition overwrite"),
        ("s3a://b/t", "partitioned", {"dynamic_partition_overwrite": True}, "dynamic partition overwrite"),
        ("s3://b/t", "magic", {}, "s3a://"),
        ("file:///t", "directory", {}, "s3a://"),
        ("s3a://b/t", "file", {}, "S3A"),
        ("s3a://b/t", "magic", {"conflict_mode": "replace"}, "staging committers"),
        ("s3a://b/t", "directory", {"conflict_mode": "overwrite"}, "not one of"),
        ("ftp://host/t", "manifest", {}, "no manifest committer factory"),
        ("s3a://b/t", "nope", {}, "unknown JVM committer"),
        ("s3a://b/t", "magic", {"job_id": "bad id/../"}, "job_id"),
    ],
)
def test_refusals(destination, committer, kwargs, message):
    with pytest.raises(ValueError, match=message):
        jvm_committer_conf(destination, committer, **kwargs)


@pytest.mark.spark
@pytest.mark.parametrize("fmt", ["json", "orc"])
def test_hadoop_manifest_committer_success_parses_with_ours(spark, tmp_path, fmt):
    """Spark's own writer, committed by Hadoop's JVM manifest committer; its `_SUCCESS` is ours to read."""
    df = spark.range(10, numPartitions=2).selectExpr("id", "cast(id as string) AS s")
    dest = tmp_path / "jvm"
    conf = jvm_committer_conf(dest.as_uri(), "manifest", bind_commit_protocol=False)
    factory_key = "mapreduce.outputcommitter.factory.scheme.file"
    with applied_conf(spark, conf):
        assert spark.conf.get(factory_key) == MANIFEST_FACTORY
        getattr(df.write, fmt)(dest.as_uri())
    assert spark.conf.get(factory_key, None) is None, "applied_conf must restore the session"
    assert spark.conf.get("spark.sql.sources.writeJobUUID", None) is None
    success = SuccessData.from_bytes((dest / "_SUCCESS").read_bytes(), str(dest / "_SUCCESS"))
    assert success.committer == "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter"
    assert success.job_id_source == "spark.sql.sources.writeJobUUID"
    assert success.job_id and success.success
    # Without spark-hadoop-cloud's PathOutputCommitProtocol, Spark writes task files straight into
    # the destination and the manifest committer only sets up and commits the job: 0 files listed.
    assert success.filenames == []
    assert sorted(r.id for r in getattr(spark.read, fmt)(dest.as_uri()).collect()) == list(range(10))


@pytest.mark.spark
def test_hadoop_loads_our_success(spark, tmp_path):
    """Hadoop's own ManifestSuccessData loader (via py4j) reads the `_SUCCESS` our writer produced."""
    df = spark.createDataFrame([(1, "a=b"), (2, "ü %"), (3, "c")], "id long, p string")
    dest = tmp_path / "ours ü"
    summary = write_committed(df, str(dest), partition_by="p")
    jvm = spark._jvm
    # Path(URI) decodes percent-escapes; Path(String) would take them literally.
    path = jvm.org.apache.hadoop.fs.Path(jvm.java.net.URI((dest / "_SUCCESS").as_uri()))
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    loaded = jvm.org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.ManifestSuccessData.load(
        fs, path
    )
    assert loaded.getJobId() == summary.job_id
    assert loaded.getCommitter() == "manifest"
    assert loaded.getSuccess()
    paths = list(loaded.getFilenamePaths())
    assert len(paths) == summary.files == 3
    assert all(fs.exists(p) for p in paths), "Hadoop resolves every listed file to an existing path"
    names = sorted(str(p.getParent().getName()) for p in paths)
    assert names == ["p=a%3Db", "p=c", "p=ü %25"]
