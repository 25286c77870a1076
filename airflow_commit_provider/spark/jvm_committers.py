"""Spark conf for Hadoop's own committers (JVM), for writes made by Spark's writers themselves.

:func:`jvm_committer_conf` returns ``spark.*`` keys for ``spark-submit --conf`` /
``SparkSession.builder.config`` (``spark.hadoop.*`` keys are copied into the Hadoop conf when the
SparkContext starts); ``spark.session_conf.applied_conf`` applies them to a running session for the
writes inside a ``with`` block.
:func:`s3a_store_conf` says where S3A finds the store (endpoint, region, path style, TLS, conditional
create); it never carries credentials, which S3A takes from its default chain (``AWS_*`` variables,
instance roles) or from the session's own ``fs.s3a.*`` settings.

The committers (hadoop-committers.md §4):

- S3A ``magic``, ``directory``, ``partitioned``: ``s3a://`` only (they need S3AFileSystem and the
  hadoop-aws jar), factory ``S3ACommitterFactory``; ``conflict_mode`` applies to the staging
  committers (directory, partitioned) only.
- ``manifest``: Hadoop's manifest committer (hadoop 3.3.5+) for file, hdfs, viewfs, gs (the generic
  factory) and abfs/abfss (the Azure factory). Never on S3: it renames files.
- ``file-v1`` / ``file-v2``: the classic FileOutputCommitter, algorithm 1, or 2 only with
  ``allow_unsafe_v2=True`` (v2 exposes task output before job commit). Not on S3.

Whatever Hadoop or spark-hadoop-cloud refuse, this conf refuses first, naming the option (the tests
in ``tests/spark/test_hadoop_s3a.py`` show Hadoop's own refusal beside each): dynamic partition
overwrite with an S3A committer (PathOutputCommitProtocol: "does not support
dynamicPartitionOverwrite"), the manifest committer on s3a ("does not work with the filesystem of type
s3a"), an unknown committer name or conflict mode, an S3A committer on a scheme S3A does not serve,
and a job ID that is no single path element ("Path does not represent a magic-commit path").
It also refuses what they accept but get wrong: dynamic partition overwrite with the manifest
committer, which declares the capability, passes PathOutputCommitProtocol's check and then leaves
the replaced partitions' old files in place (Spark 4.2 with spark-hadoop-cloud 4.1.2; see the test).

Spark's default commit protocol only routes task output through a committer's work path when the
committer IS a FileOutputCommitter; for any other committer (manifest, S3A) it writes task files
straight into the destination and calls the committer only for job setup/commit. So real use needs
spark-hadoop-cloud's ``PathOutputCommitProtocol`` and, for Parquet, ``BindingParquetOutputCommitter``
(``bind_commit_protocol=True``, the default). Since SPARK-47618 (Spark 4.1) a SparkContext that
finds both classes on its classpath makes them the session's defaults (with the S3A magic committer
for every bucket), so ``bind_commit_protocol=False`` sets Spark's own protocol and Parquet committer
explicitly: the flag means the same with or without spark-hadoop-cloud installed. Unbound, the
manifest committer commits no file (only its factory wiring is exercised) and Parquet gets the
classic ParquetOutputCommitter.

Job IDs: Spark (3.2+, SPARK-33230) puts a fresh UUID for every write into the job conf as
``spark.sql.sources.writeJobUUID``, overriding any session value; the tasks and the job commit use
it. But since SPARK-56919 (Spark 4.2, apache/spark#56126) ``FileFormatWriter.write`` calls the
protocol's ``setupJob`` before it sets that UUID, under either protocol:

- the manifest committer then fails in job setup (NullPointerException in
  ``ManifestCommitterSupport.buildJobUUID``: no UUID and a null JobID), so its conf always carries a
  session-level ``spark.sql.sources.writeJobUUID`` (``job_id`` or a new uuid4) for job setup alone;
  its ``_SUCCESS`` still names Spark's per-write UUID;
- S3A's ``fs.s3a.committer.require.uuid=true`` would fail every write at job setup ("Job/task
  context does not contain a unique ID"), so it is not set. S3A's job setup takes Spark's MapReduce
  JobID (``job_<time><random long>_0000``, unique since SPARK-33402) and writes it into the job conf as
  ``fs.s3a.committer.uuid``, which every task committer reads first, so job and tasks agree (its
  ``_SUCCESS`` says ``jobIdSource: JobID``). A ``job_id`` given here becomes ``fs.s3a.committer.uuid``,
  which S3A prefers over both, and is the ``jobId`` of its ``_SUCCESS``.

A conf with a fixed ID is for ONE write.
"""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

from airflow_commit_provider.core.committers.registry import COMMITTERS, WritePlan, resolve
from airflow_commit_provider.core.layout import validate_job_id
from airflow_commit_provider.core.store.settings import S3Settings
from airflow_commit_provider.spark.config import HADOOP_CONF_PREFIX

S3A_FACTORY = "org.apache.hadoop.fs.s3a.commit.S3ACommitterFactory"
MANIFEST_FACTORY = "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitterFactory"
ABFS_MANIFEST_FACTORY = "org.apache.hadoop.fs.azurebfs.commit.AzureManifestCommitterFactory"
FILE_OUTPUT_FACTORY = "org.apache.hadoop.mapreduce.lib.output.FileOutputCommitterFactory"
PATH_OUTPUT_COMMIT_PROTOCOL = "org.apache.spark.internal.io.cloud.PathOutputCommitProtocol"
BINDING_PARQUET_COMMITTER = "org.apache.spark.internal.io.cloud.BindingParquetOutputCommitter"
#: Spark's own defaults, set explicitly when the binding is not wanted (see the module docstring).
SPARK_COMMIT_PROTOCOL = "org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol"
PARQUET_OUTPUT_COMMITTER = "org.apache.parquet.hadoop.ParquetOutputCommitter"

_S3_SCHEMES = ("s3", "s3a", "s3n")
_MANIFEST_SCHEMES = {
    "file": MANIFEST_FACTORY,
    "hdfs": MANIFEST_FACTORY,
    "viewfs": MANIFEST_FACTORY,
    "gs": MANIFEST_FACTORY,
    "abfs": ABFS_MANIFEST_FACTORY,
    "abfss": ABFS_MANIFEST_FACTORY,
}
SPARK_WRITE_UUID = "spark.sql.sources.writeJobUUID"


def jvm_committer_conf(
    destination: str,
    committer: str,
    *,
    conflict_mode: str | None = None,
    job_id: str | None = None,
    allow_unsafe_v2: bool = False,
    dynamic_partition_overwrite: bool = False,
    bind_commit_protocol: bool = True,
    store: S3Settings | None = None,
    path_style_access: bool | None = None,
    conditional_create: bool = True,
) -> dict[str, str]:
    """Spark conf (``spark.*`` keys) that makes Spark's writers commit ``destination`` with a
    Hadoop committer; raises ValueError for combinations that are unsafe or cannot work.

    ``store`` (``s3a://`` only) adds :func:`s3a_store_conf` for it, with ``path_style_access`` and
    ``conditional_create``; its credentials are never put in the conf.
    """
    plan = resolve(
        committer,
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
        store=store,
        path_style_access=path_style_access,
        conditional_create=conditional_create,
    )


def plan_conf(
    plan: WritePlan,
    *,
    job_id: str | None = None,
    dynamic_partition_overwrite: bool = False,
    bind_commit_protocol: bool = True,
    store: S3Settings | None = None,
    path_style_access: bool | None = None,
    conditional_create: bool = True,
) -> dict[str, str]:
    """`jvm_committer_conf` for a plan `resolve` made with ``engine="hadoop"``."""
    if job_id is not None:
        validate_job_id(job_id)
    name, jvm, scheme = plan.committer, plan.traits.jvm, plan.destination.scheme
    conf: dict[str, str] = {}
    if store is not None:
        if scheme != "s3a":
            raise ValueError(f"store settings are for S3A (s3a:// destinations), not {scheme}://")
        conf.update(
            s3a_store_conf(store, path_style_access=path_style_access, conditional_create=conditional_create)
        )
    if jvm.kind == "s3a":
        if scheme != "s3a":
            raise ValueError(
                f"the S3A {name} committer works only through S3AFileSystem: use an s3a:// destination, "
                f"not {scheme}://"
            )
        if dynamic_partition_overwrite:
            raise ValueError(
                "dynamic_partition_overwrite (spark.sql.sources.partitionOverwriteMode=dynamic) needs a "
                "committer that renames staged partitions into place (manifest or FileOutputCommitter); "
                "PathOutputCommitProtocol refuses it for the S3A committers"
            )
        conf[f"{HADOOP_CONF_PREFIX}mapreduce.outputcommitter.factory.scheme.s3a"] = S3A_FACTORY
        conf[f"{HADOOP_CONF_PREFIX}fs.s3a.committer.name"] = name
        if name == "magic":
            conf[f"{HADOOP_CONF_PREFIX}fs.s3a.committer.magic.enabled"] = "true"
        if plan.traits.conflicts is not None:
            conf[f"{HADOOP_CONF_PREFIX}fs.s3a.committer.staging.conflict-mode"] = plan.committer_conflict_mode
        if job_id is not None:
            conf[f"{HADOOP_CONF_PREFIX}fs.s3a.committer.uuid"] = job_id
        conf[f"{HADOOP_CONF_PREFIX}mapreduce.fileoutputcommitter.algorithm.version"] = "1"
    elif jvm.kind == "manifest":
        if scheme in _S3_SCHEMES:
            raise ValueError(
                "the manifest committer renames files at job commit, which S3 cannot do atomically or in "
                f"O(1) (Hadoop refuses it on s3a): use the {_s3a_committers()} committer on s3a://"
            )
        if scheme not in _MANIFEST_SCHEMES:
            raise ValueError(
                f"no manifest committer factory is known for {scheme}://; supported: "
                f"{', '.join(sorted(_MANIFEST_SCHEMES))}"
            )
        if dynamic_partition_overwrite:
            raise ValueError(
                "dynamic_partition_overwrite (spark.sql.sources.partitionOverwriteMode=dynamic) with the "
                "manifest committer appends instead of replacing: PathOutputCommitProtocol deletes a "
                "partition's old files only for a FileOutputCommitter; use file-v1"
            )
        conf[f"{HADOOP_CONF_PREFIX}mapreduce.outputcommitter.factory.scheme.{scheme}"] = _MANIFEST_SCHEMES[
            scheme
        ]
        conf[f"{HADOOP_CONF_PREFIX}mapreduce.fileoutputcommitter.algorithm.version"] = "1"
        # Job setup runs before Spark puts the write's UUID into the job conf (module docstring);
        # Spark's per-write UUID still replaces this one for the tasks and the job commit.
        conf[SPARK_WRITE_UUID] = job_id or str(uuid.uuid4())
    else:
        if scheme in _S3_SCHEMES:
            raise ValueError(
                f"{name} renames task output, which on S3 is a slow, non-atomic copy: use the S3A "
                f"{_s3a_committers()} committer"
            )
        conf[f"{HADOOP_CONF_PREFIX}mapreduce.outputcommitter.factory.scheme.{scheme}"] = FILE_OUTPUT_FACTORY
        conf[f"{HADOOP_CONF_PREFIX}mapreduce.fileoutputcommitter.algorithm.version"] = str(
            jvm.algorithm_version
        )
    bound = bind_commit_protocol
    conf["spark.sql.sources.commitProtocolClass"] = (
        PATH_OUTPUT_COMMIT_PROTOCOL if bound else SPARK_COMMIT_PROTOCOL
    )
    conf["spark.sql.parquet.output.committer.class"] = (
        BINDING_PARQUET_COMMITTER if bound else PARQUET_OUTPUT_COMMITTER
    )
    conf["spark.sql.sources.partitionOverwriteMode"] = "dynamic" if dynamic_partition_overwrite else "static"
    return conf


def s3a_store_conf(
    settings: S3Settings, *, path_style_access: bool | None = None, conditional_create: bool = True
) -> dict[str, str]:
    """``spark.hadoop.fs.s3a.*`` keys that point S3A at the store ``settings`` describe.

    Only where the store is and what it supports: ``endpoint_url`` (its scheme decides TLS),
    ``region_name`` (``fs.s3a.endpoint.region``, which S3A needs for signing), path-style access
    (default: on when an endpoint is given, as third-party stores need) and conditional create
    (``fs.s3a.create.conditional.enabled``: ``If-None-Match`` on PUT and multipart complete; set it
    False for a store that ignores it). Never the credentials: S3A reads them from its default chain
    (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, instance roles).
    TLS verification cannot be switched off in S3A, nor a CA bundle file given (the JVM's trust
    store decides), so an HTTPS endpoint with ``verify`` set to either is refused.
    """
    conf: dict[str, str] = {}
    endpoint = settings.endpoint_url
    if endpoint:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"s3.endpoint_url {endpoint!r} must be an http:// or https:// URL")
        if parts.scheme == "https" and settings.verify is not None:
            raise ValueError(
                f"s3.verify={settings.verify!r} cannot be honoured by S3A (it verifies TLS against the "
                "JVM's trust store): import the CA into the trust store and leave s3.verify unset"
            )
        conf[f"{HADOOP_CONF_PREFIX}fs.s3a.endpoint"] = endpoint
        conf[f"{HADOOP_CONF_PREFIX}fs.s3a.connection.ssl.enabled"] = str(parts.scheme == "https").lower()
    if settings.region_name:
        conf[f"{HADOOP_CONF_PREFIX}fs.s3a.endpoint.region"] = settings.region_name
    path_style = bool(endpoint) if path_style_access is None else path_style_access
    conf[f"{HADOOP_CONF_PREFIX}fs.s3a.path.style.access"] = str(path_style).lower()
    conf[f"{HADOOP_CONF_PREFIX}fs.s3a.create.conditional.enabled"] = str(conditional_create).lower()
    return conf


#: S3A's credential chain when it should also read a shared credentials file: Hadoop's default
#: chain (core-default.xml, Hadoop 3.5.0) with S3A's profile reader before the instance role, which
#: off EC2 only times out. The profile reader (hadoop-aws 3.5.0 has it) reads the file that
#: ``AWS_SHARED_CREDENTIALS_FILE`` names, else ``fs.s3a.auth.profile.file``.
S3A_CREDENTIAL_PROVIDERS_WITH_FILE = (
    "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider",
    "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider",
    "org.apache.hadoop.fs.s3a.auth.ProfileAWSCredentialsProvider",
    "org.apache.hadoop.fs.s3a.auth.IAMInstanceCredentialsProvider",
)
#: The Spark conf of S3A's credential chain.
S3A_CREDENTIAL_PROVIDERS = f"{HADOOP_CONF_PREFIX}fs.s3a.aws.credentials.provider"


def s3a_credentials_file_conf() -> dict[str, str]:
    """The S3A credential chain that also reads the shared credentials file named by
    ``AWS_SHARED_CREDENTIALS_FILE``: how S3A in a YARN container finds the credentials the
    operator ships there (``hooks.spark_submit``). Names of classes, no secret."""
    return {S3A_CREDENTIAL_PROVIDERS: ",".join(S3A_CREDENTIAL_PROVIDERS_WITH_FILE)}


def _s3a_committers() -> str:
    """The S3A committers' names, for messages that point to them."""
    names = [name for name, cls in COMMITTERS.items() if cls.traits.jvm.kind == "s3a"]
    return ", ".join(names[:-1]) + " or " + names[-1]
