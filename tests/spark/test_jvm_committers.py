"""Spark conf for Hadoop's own committers, and `_SUCCESS` compatibility in both directions.

The shared session has hadoop-aws and spark-hadoop-cloud on its classpath, so the manifest committer
runs here with and without spark-hadoop-cloud's PathOutputCommitProtocol; the S3A committers run on
the embedded S3 in test_hadoop_s3a.py.
"""

from __future__ import annotations

import pytest

from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.store.settings import S3Settings
from airflow_commit_provider.spark import applied_conf, jvm_committer_conf, write_committed
from airflow_commit_provider.spark.jvm_committers import (
    BINDING_PARQUET_COMMITTER,
    MANIFEST_FACTORY,
    PARQUET_OUTPUT_COMMITTER,
    PATH_OUTPUT_COMMIT_PROTOCOL,
    S3A_FACTORY,
    SPARK_COMMIT_PROTOCOL,
    s3a_store_conf,
)

H = "spark.hadoop."


def test_s3a_magic_conf():
    conf = jvm_committer_conf("s3a://bucket/table", "magic", job_id="job-1")
    assert conf[H + "mapreduce.outputcommitter.factory.scheme.s3a"] == S3A_FACTORY
    assert conf[H + "fs.s3a.committer.name"] == "magic"
    assert conf[H + "fs.s3a.committer.magic.enabled"] == "true"
    assert H + "fs.s3a.committer.require.uuid" not in conf  # Spark 4.2 sets the UUID after job setup
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
    conf = jvm_committer_conf(destination, "manifest")
    assert conf[f"{H}mapreduce.outputcommitter.factory.scheme.{factory_key}"] == factory
    assert conf["spark.sql.sources.partitionOverwriteMode"] == "static"
    # Spark 4.2 sets up the job before it sets the write's UUID, bound or not (SPARK-56919)
    assert len(conf["spark.sql.sources.writeJobUUID"]) == 36
    unbound = jvm_committer_conf(destination, "manifest", bind_commit_protocol=False)
    assert len(unbound["spark.sql.sources.writeJobUUID"]) == 36
    assert unbound["spark.sql.sources.writeJobUUID"] != conf["spark.sql.sources.writeJobUUID"]
    assert (
        jvm_committer_conf(destination, "manifest", job_id="j-1")["spark.sql.sources.writeJobUUID"] == "j-1"
    )


def test_file_committer_conf_and_binding_flag():
    conf = jvm_committer_conf("file:///t", "file", bind_commit_protocol=False)
    assert conf[H + "mapreduce.fileoutputcommitter.algorithm.version"] == "1"
    assert "spark.sql.sources.writeJobUUID" not in conf
    # Explicit, because a SparkContext that finds spark-hadoop-cloud binds it by default (SPARK-47618)
    assert conf["spark.sql.sources.commitProtocolClass"] == SPARK_COMMIT_PROTOCOL
    assert conf["spark.sql.parquet.output.committer.class"] == PARQUET_OUTPUT_COMMITTER
    dynamic = jvm_committer_conf("file:///t", "file-v1", dynamic_partition_overwrite=True)
    assert dynamic["spark.sql.sources.partitionOverwriteMode"] == "dynamic"
    v2 = jvm_committer_conf("hdfs://nn/t", "file-v2", allow_unsafe_v2=True)
    assert v2[H + "mapreduce.fileoutputcommitter.algorithm.version"] == "2"


@pytest.mark.parametrize(
    ("destination", "committer", "kwargs", "message"),
    [
        ("s3a://b/t", "manifest", {}, "renames files"),
        ("s3://b/t", "manifest", {}, "renames files"),
        ("hdfs://nn/t", "file-v2", {}, "allow_unsafe_v2"),
        ("s3a://b/t", "magic", {"dynamic_partition_overwrite": True}, "dynamic_partition_overwrite"),
        ("s3a://b/t", "partitioned", {"dynamic_partition_overwrite": True}, "dynamic_partition_overwrite"),
        ("file:///t", "manifest", {"dynamic_partition_overwrite": True}, "appends instead of replacing"),
        ("s3://b/t", "magic", {}, "s3a://"),
        ("file:///t", "directory", {}, "s3a://"),
        ("s3a://b/t", "file", {}, "S3A"),
        ("s3a://b/t", "magic", {"conflict_mode": "replace"}, "staging committers"),
        ("s3a://b/t", "directory", {"conflict_mode": "overwrite"}, "not one of"),
        ("ftp://host/t", "manifest", {}, "no manifest committer factory"),
        ("s3a://b/t", "nope", {}, "unknown JVM committer"),
        ("s3a://b/t", "magic", {"job_id": "bad id/../"}, "job_id"),
        ("file:///t", "manifest", {"store": S3Settings(endpoint_url="http://h:1")}, "s3a://"),
        ("s3a://b/t", "magic", {"store": S3Settings(endpoint_url="h:1")}, "s3.endpoint_url"),
        ("s3a://b/t", "magic", {"store": S3Settings(endpoint_url="https://h", verify=False)}, "s3.verify"),
    ],
)
def test_refusals(destination, committer, kwargs, message):
    with pytest.raises(ValueError, match=message):
        jvm_committer_conf(destination, committer, **kwargs)


def test_s3a_store_conf_never_carries_credentials():
    settings = S3Settings(
        endpoint_url="http://127.0.0.1:8333",
        region_name="eu-west-3",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="wJalrXUtnFEMI",
        aws_session_token="token-1",
    )
    conf = jvm_committer_conf("s3a://bucket/t", "magic", store=settings)
    assert conf.items() >= s3a_store_conf(settings).items()
    assert conf[H + "fs.s3a.endpoint"] == "http://127.0.0.1:8333"
    assert conf[H + "fs.s3a.endpoint.region"] == "eu-west-3"
    assert conf[H + "fs.s3a.path.style.access"] == "true"
    assert conf[H + "fs.s3a.connection.ssl.enabled"] == "false"
    assert conf[H + "fs.s3a.create.conditional.enabled"] == "true"
    text = repr(conf)
    assert not any(secret in text for secret in ("AKIDEXAMPLE", "wJalrXUtnFEMI", "token-1"))
    aws = s3a_store_conf(S3Settings(region_name="us-east-1"), conditional_create=False)
    assert aws == {
        H + "fs.s3a.endpoint.region": "us-east-1",
        H + "fs.s3a.path.style.access": "false",
        H + "fs.s3a.create.conditional.enabled": "false",
    }


@pytest.mark.spark
@pytest.mark.parametrize(
    ("fmt", "bound"),
    [
        # Each protocol once, each with a format of its own: neither format has a committer of its
        # own (only Parquet does), so the protocol x format product (4 writes) checked nothing more.
        pytest.param("json", False, id="json-spark-protocol"),
        # PathOutputCommitProtocol comes from spark-hadoop-cloud, one of the peer jars.
        pytest.param("orc", True, id="orc-path-output-protocol", marks=pytest.mark.hadoop_peers),
    ],
)
def test_hadoop_manifest_committer_success_parses_with_ours(spark, tmp_path, fmt, bound):
    """Spark's own writer, committed by Hadoop's JVM manifest committer; its `_SUCCESS` is ours to read."""
    df = spark.range(10, numPartitions=2).selectExpr("id", "cast(id as string) AS s")
    dest = tmp_path / "jvm"
    conf = jvm_committer_conf(dest.as_uri(), "manifest", bind_commit_protocol=bound)
    factory_key = "mapreduce.outputcommitter.factory.scheme.file"
    before = spark.conf.get("spark.sql.sources.commitProtocolClass")
    with applied_conf(spark, conf):
        assert spark.conf.get(factory_key) == MANIFEST_FACTORY
        getattr(df.write, fmt)(dest.as_uri())
    assert spark.conf.get(factory_key, None) is None, "applied_conf must restore the session"
    assert spark.conf.get("spark.sql.sources.writeJobUUID", None) is None
    assert spark.conf.get("spark.sql.sources.commitProtocolClass") == before
    success = SuccessData.from_bytes((dest / "_SUCCESS").read_bytes(), str(dest / "_SUCCESS"))
    assert success.committer == "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter"
    assert success.job_id_source == "spark.sql.sources.writeJobUUID"
    assert success.job_id != conf["spark.sql.sources.writeJobUUID"], (
        "Spark's per-write UUID, not the fallback"
    )
    assert success.job_id and success.success
    parts = sorted(p.as_uri() for p in dest.glob("part-*"))
    assert len(parts) == 2
    if bound:
        # PathOutputCommitProtocol hands tasks the committer's work path: it renames both files.
        assert sorted(name.replace("file:/", "file:///", 1) for name in success.filenames) == parts
    else:
        # Spark's own protocol gives a non-FileOutputCommitter no work path: tasks write straight into
        # the destination, and the manifest committer only sets up and commits the job: 0 files listed.
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


@pytest.mark.spark
def test_hadoop_loads_a_bounded_success_and_spark_reads_its_lists(spark, tmp_path):
    """A `_SUCCESS` of the bounded format (partitions past the cap, both lists referenced, counts,
    the record's bounded lost attempts): Hadoop's ManifestSuccessData loader reads it, ignoring what
    it does not know; Spark reads the file list and the partition list as they are."""
    from airflow_commit_provider.core.formats.attempts import FAILED, LostAttempt
    from airflow_commit_provider.core.formats.file_list import (
        FileListEntry,
        file_order_key,
        partition_order_key,
        write_file_list,
        write_partition_list,
    )
    from airflow_commit_provider.core.formats.partition_stats import PartitionStats
    from airflow_commit_provider.core.formats.success import InlinePartitions
    from airflow_commit_provider.core.layout import JobLayout
    from airflow_commit_provider.core.paths import StorePath
    from airflow_commit_provider.core.store.local import LocalStore

    store = LocalStore()
    destination = StorePath.parse(str(tmp_path / "bounded ü"))
    layout = JobLayout(destination, "job-bounded")
    names = [f"x={day}.5/part-{i}.parquet" for day in range(150) for i in range(2)] + ["top.parquet"]
    entries = sorted(
        (
            FileListEntry(destination.join(name).uri(), 7, name.rpartition("/")[0], ('"e1"',))
            for name in names
        ),
        key=lambda entry: file_order_key(entry.uri),
    )
    partitions = sorted({entry.partition for entry in entries if entry.partition}, key=partition_order_key)
    file_list = write_file_list(store, layout, entries)
    partition_list = write_partition_list(
        store, layout, [(p, PartitionStats(2, 14, None)) for p in partitions]
    )
    inline = InlinePartitions()
    for partition in partitions:
        inline.add(partition)
    success = SuccessData(
        committer="magic",
        job_id="job-bounded",
        filenames=[entry.uri for entry in entries[:100]],
        partitions=inline.names,
        partition_count=inline.count,
        partition_list=partition_list,
        file_list=file_list,
        file_count=len(entries),
        total_bytes=7 * len(entries),
        rows=10,
        table="db.t",
        registered_partitions=partitions,
        lost_attempts=[LostAttempt("task_job-bounded_m_000000", f"attempt_{n}", FAILED) for n in range(300)],
    )
    store.write_bytes(layout.success_marker, success.to_bytes())

    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(jvm.java.net.URI(layout.success_marker.uri()))
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    loaded = jvm.org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.ManifestSuccessData.load(
        fs, path
    )
    assert loaded.getJobId() == "job-bounded" and loaded.getCommitter() == "magic" and loaded.getSuccess()
    assert list(loaded.getFilenames()) == [entry.uri for entry in entries[:100]]

    # Spark takes a location literally, as Hadoop's Path(String) does (str, not the encoded URI).
    files = spark.read.parquet(str(file_list.path_under(destination)))
    assert files.columns == ["path", "size", "partition", "part_etags"]
    assert files.count() == len(entries) == file_list.entries
    assert files.where("partition = 'x=7.5'").count() == 2
    assert files.selectExpr("sum(size)").first()[0] == 7 * len(entries)
    assert files.first()["part_etags"] == ['"e1"']
    listed = spark.read.parquet(str(partition_list.path_under(destination)))
    assert listed.columns == ["partition", "files", "bytes", "rows"]
    assert [row["partition"] for row in listed.orderBy("partition").collect()] == sorted(partitions)
    assert listed.where("rows is null").count() == len(partitions)
