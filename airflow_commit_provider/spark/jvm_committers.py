"""Spark conf for Hadoop's own committers (JVM), for writes made by Spark's writers themselves.

:func:`jvm_committer_conf` returns ``spark.*`` keys for ``spark-submit --conf`` /
``SparkSession.builder.config`` (``spark.hadoop.*`` keys are copied into the Hadoop conf when the
SparkContext starts). :func:`applied_conf` applies the same settings to a running session for the
writes inside a ``with`` block: at runtime ``spark.hadoop.X`` has no effect, so it sets ``X`` itself
(Spark copies every session conf entry into each write's Hadoop conf) and restores the old values.

The committers (hadoop-committers.md §4):

- S3A ``magic``, ``directory``, ``partitioned``: ``s3a://`` only (they need S3AFileSystem and the
  hadoop-aws jar), factory ``S3ACommitterFactory``; ``conflict_mode`` applies to the staging
  committers (directory, partitioned) only.
- ``manifest``: Hadoop's manifest committer (hadoop 3.3.5+) for file, hdfs, viewfs, gs (the generic
  factory) and abfs/abfss (the Azure factory). Never on S3: it renames files.
- ``file-v1`` / ``file-v2``: the classic FileOutputCommitter, algorithm 1, or 2 only with
  ``allow_unsafe_v2=True`` (v2 exposes task output before job commit). Not on S3.

Spark's default commit protocol only routes task output through a committer's work path when the
committer IS a FileOutputCommitter; for any other committer (manifest, S3A) it writes task files
straight into the destination and calls the committer only for job setup/commit. So real use needs
spark-hadoop-cloud's ``PathOutputCommitProtocol`` and, for Parquet, ``BindingParquetOutputCommitter``
(``bind_commit_protocol=True``, the default). PySpark from PyPI does not bundle spark-hadoop-cloud
(nor hadoop-aws); ``bind_commit_protocol=False`` leaves those two keys out, which is only good for
trying the factory wiring (e.g. our tests parsing the manifest committer's ``_SUCCESS``).

Job IDs: Spark (3.2+, SPARK-33230) puts a fresh UUID for every write into the job conf as
``spark.sql.sources.writeJobUUID``, overriding any session value, and the committers use it. But
Spark's default protocol calls the committer's ``setupJob`` before it sets that UUID, which makes the
manifest committer fail (NullPointerException in ``buildJobUUID``); so for the manifest committer
without the protocol binding, or when ``job_id`` is given, the conf carries a session-level
``spark.sql.sources.writeJobUUID`` (``job_id`` or a new uuid4) as the fallback. For S3A committers we
set ``fs.s3a.committer.require.uuid=true`` (Hadoop's advice for Spark) so a job without a unique ID
fails instead of falling back to the reusable MapReduce job ID; a ``job_id`` given here becomes
``fs.s3a.committer.uuid``, which S3A prefers over Spark's. A conf with a fixed ID is for ONE write.
Dynamic partition overwrite needs rename (manifest or FileOutputCommitter); S3A refuses it.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from airflow_commit_provider.core.committers.registry import COMMITTERS, WritePlan, resolve

S3A_FACTORY = "org.apache.hadoop.fs.s3a.commit.S3ACommitterFactory"
MANIFEST_FACTORY = "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitterFactory"
ABFS_MANIFEST_FACTORY = "org.apache.hadoop.fs.azurebfs.commit.AzureManifestCommitterFactory"
FILE_OUTPUT_FACTORY = "org.apache.hadoop.mapreduce.lib.output.FileOutputCommitterFactory"
PATH_OUTPUT_COMMIT_PROTOCOL = "org.apache.spark.internal.io.cloud.PathOutputCommitProtocol"
BINDING_PARQUET_COMMITTER = "org.apache.spark.internal.io.cloud.BindingParquetOutputCommitter"

_S3_SCHEMES = ("s3", "s3a", "s3n")
_MANIFEST_SCHEMES = {
    "file": MANIFEST_FACTORY,
    "hdfs": MANIFEST_FACTORY,
    "viewfs": MANIFEST_FACTORY,
    "gs": MANIFEST_FACTORY,
    "abfs": ABFS_MANIFEST_FACTORY,
    "abfss": ABFS_MANIFEST_FACTORY,
}
_HADOOP = "spark.hadoop."
SPARK_WRITE_UUID = "spark.sql.sources.writeJobUUID"
_UUID_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def _scheme(destination: str) -> str:
    if "://" not in destination:
        return "file"
    return urlsplit(destination).scheme.lower()


def jvm_committer_conf(
    destination: str,
    committer: str,
    *,
    conflict_mode: str | None = None,
    job_id: str | None = None,
    allow_unsafe_v2: bool = False,
    dynamic_partition_overwrite: bool = False,
    bind_commit_protocol: bool = True,
) -> dict[str, str]:
    """Spark conf (``spark.*`` keys) that makes Spark's writers commit ``destination`` with a
    Hadoop committer; raises ValueError for combinations that are unsafe or cannot work."""
    plan = resolve(
        committer.lower(),
        destination,
        conflict_mode=conflict_mode,
        allow_unsafe_v2=allow_unsafe_v2,
        engine="hadoop",
    )
    return plan_conf(
        plan,
        job_id=job_id,
        dynamic_partition_overwrite=dynamic_partition_overwrite,
        bind_commit_protocol=bind_commit_protocol,
    )


def plan_conf(
    plan: WritePlan,
    *,
    job_id: str | None = None,
    dynamic_partition_overwrite: bool = False,
    bind_commit_protocol: bool = True,
) -> dict[str, str]:
    """`jvm_committer_conf` for a plan `resolve` made with ``engine="hadoop"``."""
    if job_id is not None and not _UUID_SAFE.match(job_id):
        raise ValueError(f"job_id {job_id!r} must be letters, digits, '.', '_' or '-' (a UUID is ideal)")
    name, jvm, scheme = plan.committer, plan.traits.jvm, _scheme(plan.destination)
    conf: dict[str, str] = {}
    if jvm.kind == "s3a":
        if scheme != "s3a":
            raise ValueError(
                f"the S3A {name} committer works only through S3AFileSystem: use an s3a:// destination, "
                f"not {scheme}://"
            )
        if dynamic_partition_overwrite:
            raise ValueError(
                "dynamic partition overwrite needs a committer that renames staged partitions into place "
                "(manifest or FileOutputCommitter); the S3A committers cannot do it on S3"
            )
        conf[f"{_HADOOP}mapreduce.outputcommitter.factory.scheme.s3a"] = S3A_FACTORY
        conf[f"{_HADOOP}fs.s3a.committer.name"] = name
        if name == "magic":
            conf[f"{_HADOOP}fs.s3a.committer.magic.enabled"] = "true"
        if plan.traits.conflicts is not None:
            conf[f"{_HADOOP}fs.s3a.committer.staging.conflict-mode"] = plan.committer_conflict_mode
        conf[f"{_HADOOP}fs.s3a.committer.require.uuid"] = "true"
        if job_id is not None:
            conf[f"{_HADOOP}fs.s3a.committer.uuid"] = job_id
        conf[f"{_HADOOP}mapreduce.fileoutputcommitter.algorithm.version"] = "1"
    elif jvm.kind == "manifest":
        if scheme in _S3_SCHEMES:
            raise ValueError(
                "the manifest committer renames files at job commit, which S3 cannot do atomically or in "
                f"O(1): use the {_s3a_committers()} committer on s3a://"
            )
        if scheme not in _MANIFEST_SCHEMES:
            raise ValueError(
                f"no manifest committer factory is known for {scheme}://; supported: "
                f"{', '.join(sorted(_MANIFEST_SCHEMES))}"
            )
        conf[f"{_HADOOP}mapreduce.outputcommitter.factory.scheme.{scheme}"] = _MANIFEST_SCHEMES[scheme]
        conf[f"{_HADOOP}mapreduce.fileoutputcommitter.algorithm.version"] = "1"
        if not bind_commit_protocol or job_id is not None:
            # Spark's default protocol calls the committer's setupJob before it puts the write's UUID
            # into the job conf; without a session value the manifest committer fails there
            # (NullPointerException in ManifestCommitterSupport.buildJobUUID). Spark's per-write UUID
            # still replaces it for the tasks and the job commit.
            conf[SPARK_WRITE_UUID] = job_id or str(uuid.uuid4())
    else:
        if scheme in _S3_SCHEMES:
            raise ValueError(
                f"{name} renames task output, which on S3 is a slow, non-atomic copy: use the S3A "
                f"{_s3a_committers()} committer"
            )
        conf[f"{_HADOOP}mapreduce.outputcommitter.factory.scheme.{scheme}"] = FILE_OUTPUT_FACTORY
        conf[f"{_HADOOP}mapreduce.fileoutputcommitter.algorithm.version"] = str(jvm.algorithm_version)
    if bind_commit_protocol:
        conf["spark.sql.sources.commitProtocolClass"] = PATH_OUTPUT_COMMIT_PROTOCOL
        conf["spark.sql.parquet.output.committer.class"] = BINDING_PARQUET_COMMITTER
    conf["spark.sql.sources.partitionOverwriteMode"] = "dynamic" if dynamic_partition_overwrite else "static"
    return conf


def _s3a_committers() -> str:
    """The S3A committers' names, for messages that point to them."""
    names = [name for name, cls in COMMITTERS.items() if cls.traits.jvm.kind == "s3a"]
    return ", ".join(names[:-1]) + " or " + names[-1]


def runtime_key(key: str) -> str:
    """The key to set on a running session: ``spark.hadoop.X`` becomes ``X``."""
    return key[len(_HADOOP) :] if key.startswith(_HADOOP) else key


@contextmanager
def applied_conf(spark: Any, conf: Mapping[str, str]) -> Iterator[None]:
    """Apply ``conf`` to a running session for the block, then restore the previous values."""
    previous: dict[str, str | None] = {}
    try:
        for key, value in conf.items():
            target = runtime_key(key)
            if target not in previous:
                previous[target] = spark.conf.get(target, None)
            spark.conf.set(target, value)
        yield
    finally:
        for target, value in previous.items():
            if value is None:
                spark.conf.unset(target)
            else:
                spark.conf.set(target, value)
