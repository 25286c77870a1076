"""Hadoop's own committers, driven by `jvm_committer_conf`, writing with Spark's own `df.write`.

The S3A magic, directory and partitioned committers write Parquet and ORC to the embedded S3
through ``s3a://`` (endpoint, region, path style and conditional create from ``s3a_store_conf``;
credentials set apart on the session); the manifest committer writes to ``file://`` through
spark-hadoop-cloud's PathOutputCommitProtocol and BindingParquetOutputCommitter. Each write is
checked on the final store state: Spark reads back exactly the rows written, the JSON `_SUCCESS`
lists exactly the visible files, and no pending upload or temporary directory is left.

Then what Hadoop refuses: for each, `jvm_committer_conf` refuses first with an error naming the
option, and the raw conf, written for real, is refused by Hadoop or spark-hadoop-cloud itself.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException

from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.layout import MAGIC_PREFIX, TEMPORARY_DIR
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.settings import S3Settings
from airflow_commit_provider.spark import applied_conf, jvm_committer_conf
from airflow_commit_provider.spark.jvm_committers import MANIFEST_FACTORY, s3a_store_conf
from airflow_commit_provider.spark.session_conf import runtime_key

pytestmark = [pytest.mark.spark, pytest.mark.hadoop_peers]

H = "spark.hadoop."
S3A_COMMITTERS = ("magic", "directory", "partitioned")
#: How a JVM failure reaches Python: as it is, or converted by PySpark (IllegalArgumentException...).
JVM_ERRORS = (Py4JJavaError, CapturedException)


@pytest.fixture(scope="module")
def df(spark: Any) -> Any:
    """Rows spread over two tasks and three partitions, with names that need escaping."""
    rows = [(i, f"v{i}", ("a b", "x%y", "ü")[i % 3]) for i in range(30)]
    return spark.createDataFrame(rows, "id long, v string, p string").repartition(2).cache()


def rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(row) for row in frame.select("id", "v", "p").collect())


def s3a_url(bucket: str) -> str:
    return f"s3a://{bucket}/t-{uuid.uuid4().hex[:12]}"


def hadoop_message(error: Exception) -> str:
    """The Java exception and its causes, one line each (what a user sees in the driver log)."""
    java = getattr(error, "java_exception", None) or getattr(error, "_origin", None)
    assert java is not None, f"not an error from the JVM: {error!r}"
    lines = str(java.toString()).splitlines()
    cause = java.getCause()
    while cause is not None:
        lines.append(str(cause.toString()))
        cause = cause.getCause()
    return " | ".join(lines)


# Writing through Hadoop's committers ------------------------------------------------------------
#: Each S3A committer once, and each format once: Parquet goes through BindingParquetOutputCommitter
#: and ORC does not, whichever S3A committer the factory makes (committer x format was 6 writes).
S3A_WRITES = [
    pytest.param(committer, fmt, id=f"{committer}-{fmt}")
    for committer, fmt in (("magic", "parquet"), ("directory", "orc"), ("partitioned", "parquet"))
]
assert {write.values[0] for write in S3A_WRITES} == set(S3A_COMMITTERS)


@pytest.mark.parametrize(("committer", "fmt"), S3A_WRITES)
def test_s3a_committer_writes_through_our_conf(
    s3a_spark: Any, df: Any, spark_bucket: str, spark_s3_store: Any, committer: str, fmt: str
) -> None:
    url, job_id = s3a_url(spark_bucket), f"job-{uuid.uuid4()}"
    conflict = {"conflict_mode": "replace"} if committer != "magic" else {}
    with applied_conf(s3a_spark, jvm_committer_conf(url, committer, job_id=job_id, **conflict)):
        getattr(df.write.partitionBy("p"), fmt)(url)

    assert rows(getattr(s3a_spark.read, fmt)(url)) == rows(df)
    table = StorePath.parse(url)
    visible = {status.path.relative_to(table) for status in spark_s3_store.list_files(table)}
    data = {path for path in visible if path.startswith("p=")}
    assert visible - data - {"_SUCCESS"} <= {""}, f"temporary objects left: {visible - data}"
    assert {path.rpartition("/")[0] for path in data} == {"p=a b", "p=x%25y", "p=ü"}
    assert not any(MAGIC_PREFIX in path or TEMPORARY_DIR in path for path in visible)
    assert list(spark_s3_store.list_multipart_uploads(StorePath.parse(f"s3://{spark_bucket}"))) == []

    success = SuccessData.from_bytes(spark_s3_store.read_bytes(table.join("_SUCCESS")), url)
    assert success.committer == committer, "S3A writes the names our registry uses"
    assert (success.job_id, success.job_id_source) == (job_id, "fs.s3a.committer.uuid")
    assert success.success
    # S3A lists each file as "/<key>" (raw, not URI-encoded) and counts them in its iostatistics.
    assert sorted(success.filenames) == sorted(f"/{table.key}/{path}" for path in data)
    assert success.iostatistics.counters["committer_commits_completed"] == len(data)


@pytest.mark.parametrize("fmt", ["parquet", "orc"])
def test_manifest_committer_with_the_commit_protocol(spark: Any, df: Any, tmp_path: Path, fmt: str) -> None:
    """Bound to PathOutputCommitProtocol (and, for Parquet, BindingParquetOutputCommitter), the
    manifest committer gets every task file in its work path and renames it at job commit."""
    table = tmp_path / "table"
    with applied_conf(spark, jvm_committer_conf(table.as_uri(), "manifest")):
        getattr(df.write.partitionBy("p"), fmt)(table.as_uri())
    assert rows(getattr(spark.read, fmt)(table.as_uri())) == rows(df)
    success = json.loads((table / "_SUCCESS").read_text())
    data = sorted(str(p) for p in table.rglob("part-*") if p.is_file())
    assert success["committer"].endswith(".ManifestCommitter") and success["success"]
    listed = [StorePath.from_uri(name.replace("file:/", "file:///", 1)).key for name in success["filenames"]]
    assert sorted(listed) == data
    assert success["iostatistics"]["counters"]["committer_files_committed"] == len(data)
    assert not (table / "_temporary").exists()


def test_manifest_dynamic_partition_overwrite_appends_so_it_is_refused(
    spark: Any, df: Any, tmp_path: Path
) -> None:
    """The manifest committer declares the dynamic-partitioning capability, so PathOutputCommitProtocol
    lets it overwrite partitions dynamically; but the protocol deletes a partition's old files only
    for a FileOutputCommitter, so the "overwrite" appends. Our conf refuses it; file-v1 replaces."""
    replacement = df.where("p = 'ü'").selectExpr("id + 1000 AS id", "v", "p")
    replaced = sorted([r for r in rows(df) if r[2] != "ü"] + rows(replacement))
    for committer, expected in (("manifest", sorted(rows(df) + rows(replacement))), ("file-v1", replaced)):
        table = (tmp_path / committer).as_uri()
        with applied_conf(spark, jvm_committer_conf(table, committer)):
            df.write.partitionBy("p").parquet(table)
        if committer == "manifest":
            with pytest.raises(
                ValueError, match=r"dynamic_partition_overwrite .* appends instead of replacing"
            ):
                jvm_committer_conf(table, committer, dynamic_partition_overwrite=True)
            conf = {
                **jvm_committer_conf(table, committer),
                "spark.sql.sources.partitionOverwriteMode": "dynamic",
            }
        else:
            conf = jvm_committer_conf(table, committer, dynamic_partition_overwrite=True)
        with applied_conf(spark, conf):
            replacement.write.mode("overwrite").partitionBy("p").parquet(table)
        assert rows(spark.read.parquet(table)) == expected, committer


def test_conditional_create_on_the_embedded_store(
    s3a_spark: Any, embedded_s3: Any, spark_bucket: str
) -> None:
    """SeaweedFS honours If-None-Match, so S3A's conditional create (on, in `s3a_store_conf`) refuses
    to overwrite; with ``conditional_create=False`` S3A refuses to attempt one at all. (Hadoop 3.5.0's
    S3A committers do not use conditional create: no class of ``fs.s3a.commit`` refers to it.)"""
    jvm = s3a_spark._jvm
    settings = S3Settings(endpoint_url=embedded_s3.endpoint_url, region_name=embedded_s3.region)

    def filesystem(**options: Any) -> Any:
        conf = jvm.org.apache.hadoop.conf.Configuration(s3a_spark.sparkContext._jsc.hadoopConfiguration())
        for key, value in s3a_store_conf(settings, **options).items():
            conf.set(runtime_key(key), value)
        conf.set("fs.s3a.access.key", embedded_s3.access_key)
        conf.set("fs.s3a.secret.key", embedded_s3.secret_key)
        uri = jvm.java.net.URI(f"s3a://{spark_bucket}/")
        return jvm.org.apache.hadoop.fs.FileSystem.newInstance(uri, conf)  # not the cached instance

    def create_if_absent(fs: Any, path: Any, body: bytes) -> None:
        builder = fs.createFile(path).overwrite(True).must("fs.option.create.conditional.overwrite", True)
        stream = builder.build()
        stream.write(bytearray(body))
        stream.close()

    path = jvm.org.apache.hadoop.fs.Path(f"s3a://{spark_bucket}/conditional-{uuid.uuid4().hex}")
    fs = filesystem()
    try:
        create_if_absent(fs, path, b"first")
        with pytest.raises(Py4JJavaError) as refused:
            create_if_absent(fs, path, b"second")
        assert "412" in hadoop_message(refused.value) and "RemoteFileChangedException" in hadoop_message(
            refused.value
        )
        assert (
            embedded_s3.client()
            .get_object(Bucket=spark_bucket, Key=path.toUri().getPath()[1:])["Body"]
            .read()
            == b"first"
        )
    finally:
        fs.close()
    fs = filesystem(conditional_create=False)
    try:
        with pytest.raises(Py4JJavaError, match="Conditional Writes Unavailable"):
            create_if_absent(fs, jvm.org.apache.hadoop.fs.Path(f"{path.toString()}-off"), b"x")
    finally:
        fs.close()


# What Hadoop refuses, our conf refuses first ---------------------------------------------------
def _dynamic(conf: dict[str, str]) -> dict[str, str]:
    return {**conf, "spark.sql.sources.partitionOverwriteMode": "dynamic"}


def _hadoop_key(key: str, value: str) -> Callable[[dict[str, str]], dict[str, str]]:
    return lambda conf: {**conf, H + key: value}


def _manifest_on_s3a(conf: dict[str, str]) -> dict[str, str]:
    return {
        **conf,
        H + "mapreduce.outputcommitter.factory.scheme.s3a": MANIFEST_FACTORY,
        "spark.sql.sources.writeJobUUID": str(uuid.uuid4()),
    }


#: (our call, what our error names, the valid conf Hadoop gets, how it is made invalid, where it
#: writes, what Hadoop says). Each raw conf differs from a working one in exactly the refused option.
REFUSALS = [
    pytest.param(
        ("magic", {"dynamic_partition_overwrite": True}),
        "dynamic_partition_overwrite",
        "magic",
        _dynamic,
        "s3a",
        "PathOutputCommitter does not support dynamicPartitionOverwrite",
        id="magic-dynamic-partition-overwrite",
    ),
    pytest.param(
        ("partitioned", {"conflict_mode": "replace", "dynamic_partition_overwrite": True}),
        "dynamic_partition_overwrite",
        "partitioned",
        _dynamic,
        "s3a",
        "PathOutputCommitter does not support dynamicPartitionOverwrite",
        id="partitioned-dynamic-partition-overwrite",
    ),
    pytest.param(
        ("directory", {"conflict_mode": "overwrite"}),
        "conflict_mode 'overwrite'",
        "directory",
        _hadoop_key("fs.s3a.committer.staging.conflict-mode", "overwrite"),
        "s3a",
        "No enum constant org.apache.hadoop.fs.s3a.commit.staging.ConflictResolution.OVERWRITE",
        id="unknown-conflict-mode",
    ),
    pytest.param(
        ("nope", {}),
        "unknown JVM committer 'nope'",
        "magic",
        _hadoop_key("fs.s3a.committer.name", "nope"),
        "s3a",
        'Unknown committer: "nope"',
        id="unknown-committer",
    ),
    pytest.param(
        ("manifest", {}),
        "manifest committer renames files",
        "magic",
        _manifest_on_s3a,
        "s3a",
        "This committer does not work with the filesystem of type s3a",
        id="manifest-on-s3a",
    ),
    pytest.param(
        ("magic", {"job_id": "day 1/../x"}),
        "job_id 'day 1/../x'",
        "magic",
        _hadoop_key("fs.s3a.committer.uuid", "day 1/../x"),
        "s3a",
        "Path does not represent a magic-commit path",
        id="job-id-not-a-path-element",
    ),
    pytest.param(
        ("magic", {}),
        "use an s3a:// destination, not s3://",
        "magic",
        lambda conf: conf,
        "s3",
        'No FileSystem for scheme "s3"',
        id="s3a-committer-on-s3-scheme",
    ),
]


@pytest.mark.parametrize(("ours", "named", "valid", "break_it", "scheme", "hadoop_says"), REFUSALS)
def test_our_conf_refuses_what_hadoop_refuses(
    s3a_spark: Any,
    df: Any,
    spark_bucket: str,
    spark_s3_store: Any,
    ours: tuple[str, dict[str, Any]],
    named: str,
    valid: str,
    break_it: Callable[[dict[str, str]], dict[str, str]],
    scheme: str,
    hadoop_says: str,
) -> None:
    url = s3a_url(spark_bucket).replace("s3a://", f"{scheme}://", 1)
    committer, kwargs = ours
    with pytest.raises(ValueError, match=re.escape(named)) as refused:
        jvm_committer_conf(url, committer, **kwargs)
    assert "\n" not in str(refused.value), "one line"

    conf = jvm_committer_conf(url.replace(f"{scheme}://", "s3a://", 1), valid, conflict_mode=None)
    with pytest.raises(JVM_ERRORS) as hadoop, applied_conf(s3a_spark, break_it(conf)):
        df.write.mode("overwrite").partitionBy("p").parquet(url)
    assert hadoop_says in hadoop_message(hadoop.value)
    if scheme == "s3a":
        assert spark_s3_store.get_status(StorePath.parse(url).join("_SUCCESS")) is None


@pytest.mark.parametrize(
    ("committer", "destination_kind", "setting", "hadoop_says"),
    [
        pytest.param(
            "magic",
            "s3a",
            ("fs.s3a.committer.require.uuid", "true"),
            "Job/task context does not contain a unique ID in spark.sql.sources.writeJobUUID",
            id="s3a-require-uuid",
        ),
        pytest.param(
            "manifest",
            "file",
            ("spark.sql.sources.writeJobUUID", None),
            'Cannot invoke "org.apache.hadoop.mapreduce.JobID.toString()" because "jobId" is null',
            id="manifest-without-a-setup-uuid",
        ),
    ],
)
def test_spark_sets_the_write_uuid_after_job_setup(
    s3a_spark: Any,
    df: Any,
    spark_bucket: str,
    tmp_path: Path,
    committer: str,
    destination_kind: str,
    setting: tuple[str, str | None],
    hadoop_says: str,
) -> None:
    """Spark 4.2 calls setupJob before it puts the write's UUID in the job conf (SPARK-56919): S3A's
    require.uuid then fails every write, and the manifest committer needs a session UUID for setup.
    Our conf leaves the first out and always gives the second; should Spark change the order again,
    these fail and the conf can be simplified."""
    url = s3a_url(spark_bucket) if destination_kind == "s3a" else (tmp_path / "t").as_uri()
    conf = jvm_committer_conf(url, committer)
    key, value = setting
    if value is None:
        assert key in conf
        conf.pop(key)
    else:
        assert H + key not in conf
        conf[H + key] = value
    with pytest.raises(JVM_ERRORS) as hadoop, applied_conf(s3a_spark, conf):
        df.write.parquet(url)
    assert hadoop_says in hadoop_message(hadoop.value)
