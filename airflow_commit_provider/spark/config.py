"""The Spark conf contract: the ``spark.airflow_commit.*`` keys and the Spark keys we read or set.

The operator sets these keys for each try, applications (the example job, ``write_committed``) read
them through :class:`SparkConf`. What a write's options mean is in ``spark.write_options``, what
executors receive in ``spark.task_config``, and how a running session's conf is changed for a
write in ``spark.session_conf``. Nothing here imports PySpark.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

PREFIX = "spark.airflow_commit."
#: The destination; ``write_committed(df)`` writes there when given none.
CONF_DESTINATION = PREFIX + "destination"
#: A catalog table (``db.events``); ``write_committed(df)`` writes there when given no path.
CONF_TABLE = PREFIX + "table"
#: ``python`` (``write_committed``) or ``hadoop`` (Spark's writers with Hadoop's committers).
CONF_ENGINE = PREFIX + "engine"
#: Airflow's try number (informational).
CONF_TRY_NUMBER = PREFIX + "try_number"
#: The task instance and try, as JSON (`core.task_key.TryOrigin`): recorded for the commit report.
CONF_ORIGIN = PREFIX + "origin"
#: Committer name (file-v1, file-v2, manifest, directory, partitioned, magic).
CONF_COMMITTER = PREFIX + "committer"
#: fail | append | replace.
CONF_CONFLICT_MODE = PREFIX + "conflict_mode"
#: A fixed job ID for the next write(s); read from the thread's local property first, then the session.
CONF_JOB_ID = PREFIX + "job_id"
#: The longest a job may run, in seconds: the operator sets the task's ``execution_timeout``. Job
#: setup refuses a bucket whose lifecycle rules could abort the job's uploads sooner
#: (`core.store.check.require_uploads_outlive_job`).
CONF_MAX_JOB_DURATION = PREFIX + "max_job_duration"
# The committer options of the same names (`core.options.CommitOptions` says what each means).
CONF_THREADS = PREFIX + "threads"
CONF_PART_SIZE = PREFIX + "part_size"
CONF_PARTS_IN_FLIGHT = PREFIX + "parts_in_flight"
CONF_LOCAL_STAGING_DIR = PREFIX + "local_staging_dir"
#: The S3 endpoint (an S3-compatible store's URL); else the environment's, else AWS's.
CONF_S3_ENDPOINT_URL = PREFIX + "s3.endpoint_url"
#: Credentials (with the secret key and session token); else the environment's, else boto3's chain.
CONF_S3_ACCESS_KEY_ID = PREFIX + "s3.access_key_id"
#: See ``s3.access_key_id``.
CONF_S3_SECRET_ACCESS_KEY = PREFIX + "s3.secret_access_key"
#: See ``s3.access_key_id``.
CONF_S3_SESSION_TOKEN = PREFIX + "s3.session_token"
#: The S3 region; else the environment's, else boto3's.
CONF_S3_REGION = PREFIX + "s3.region"
#: TLS verification: false, true, or a CA bundle path (boto3's `verify`).
CONF_S3_VERIFY = PREFIX + "s3.verify"
#: auto | crt | boto3: how the hot S3 calls are sent (`core.store.s3_requests`).
CONF_S3_REQUEST_PATH = PREFIX + "s3.request_path"
#: check | trusted: whether job setup probes the store's ``If-None-Match: *`` once per process, or
#: the user vouches for it (`core.store.check`; Hadoop's ``fs.s3a.create.conditional.enabled``).
CONF_S3_CONDITIONAL_CREATE = PREFIX + "s3.conditional_create"
#: botocore Config options as a JSON object (the Amazon provider's ``botocore_config``).
CONF_S3_BOTOCORE_CONFIG = PREFIX + "s3.botocore_config"
#: The confs of the write the operator planned, which its digest covers.
PLANNED_CONFS = (
    CONF_JOB_ID,
    CONF_COMMITTER,
    CONF_DESTINATION,
    CONF_TABLE,
    CONF_ENGINE,
    CONF_CONFLICT_MODE,
    CONF_TRY_NUMBER,
    CONF_ORIGIN,
)
#: `plan_digest` of the `PLANNED_CONFS` as the operator set them: the driver takes the operator's
#: checked plan from them while they match it, and refuses them if one was changed.
CONF_PLAN_DIGEST = PREFIX + "plan_digest"
#: What ``CommittedSparkSubmitOperator`` sets for every try; a user's ``conf`` must not set them.
OPERATOR_CONFS = (*PLANNED_CONFS, CONF_PLAN_DIGEST)

#: Spark copies ``spark.hadoop.X`` into the Hadoop conf as ``X`` when the SparkContext starts.
HADOOP_CONF_PREFIX = "spark.hadoop."
#: The session's catalog: ``hive`` for a Hive metastore's.
CATALOG_IMPLEMENTATION = "spark.sql.catalogImplementation"
#: Where the catalog puts a table created without a location.
WAREHOUSE_DIR = "spark.sql.warehouse.dir"
#: The Thrift metastore of a Hive catalog (Hive's ``hive.metastore.uris``, as Spark passes it).
METASTORE_URIS = HADOOP_CONF_PREFIX + "hive.metastore.uris"
#: Spark 4 measures the Arrow batch it fills for Python after every row, to stop at this many bytes
#: (64 MiB by default); at Int.MaxValue it skips the measurement, and batches are cut by
#: ``ARROW_MAX_RECORDS_PER_BATCH`` alone. What we set them to, and when: ``spark.arrow_batches``.
ARROW_MAX_BYTES_PER_BATCH = "spark.sql.execution.arrow.maxBytesPerBatch"
ARROW_MAX_RECORDS_PER_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"
ARROW_UNMEASURED_BATCHES = str(2**31 - 1)
#: Spark's own key for a write job's unique ID (SPARK-33230); we set it as a local property.
SPARK_WRITE_JOB_UUID = "spark.sql.sources.writeJobUUID"
SPARK_MAX_RECORDS_PER_FILE = "spark.sql.files.maxRecordsPerFile"
SPARK_PARQUET_CODEC = "spark.sql.parquet.compression.codec"
SPARK_ORC_CODEC = "spark.sql.orc.compression.codec"
SPARK_SPECULATION = "spark.speculation"


def thrift_metastore_conf(uri: str, warehouse: str) -> dict[str, str]:
    """Spark conf of a Hive catalog on the Thrift metastore at `uri` (``thrift://host:port``),
    tables without a location going under `warehouse`: what a job needs to write a catalog table."""
    if not uri.startswith("thrift://"):
        raise ValueError(f"metastore uri {uri!r} must be a thrift://host:port URI")
    return {CATALOG_IMPLEMENTATION: "hive", WAREHOUSE_DIR: warehouse, METASTORE_URIS: uri}


class ConfSource(Protocol):
    """Where settings are looked up: a session's `SparkConf`, or a plain dict when planning a
    write without Spark."""

    def get(self, key: str) -> str | None: ...


def plan_digest(conf: ConfSource) -> str:
    """The SHA-256 of the `PLANNED_CONFS` values in `conf` (unset ones as null), as canonical JSON.

    An integrity check, not a secret: it tells the driver that the plan it reads is, value for
    value, the one the operator checked, so the driver need not check it again. Whoever can change
    the conf could recompute it; nothing here guards against that.
    """
    values = {key: conf.get(key) or None for key in PLANNED_CONFS}
    canonical = json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def operator_planned(conf: ConfSource) -> bool:
    """Whether `conf` holds a write the operator planned and checked (its `CONF_PLAN_DIGEST`).

    False without a digest (no operator: the write is checked as given); a ValueError, one line
    naming the digest's key, when a planned conf no longer matches it.
    """
    digest = conf.get(CONF_PLAN_DIGEST)
    if not digest:
        return False
    if digest != plan_digest(conf):
        raise ValueError(
            f"{CONF_PLAN_DIGEST} does not match the confs CommittedSparkSubmitOperator planned the write "
            f"with ({', '.join(key.removeprefix(PREFIX) for key in PLANNED_CONFS)} under {PREFIX}): one "
            "was changed after the operator checked it (by the application, a properties file or a "
            "thread's local property); set them only through the operator's arguments"
        )
    return True


class SparkConf:
    """Read-only view of a session's runtime conf and the calling thread's local properties.

    ``spark.airflow_commit.*`` keys are looked up in the thread's local properties first (so one
    thread's write can be configured without touching the session), then in the session conf.
    """

    def __init__(self, spark: Any):
        self._spark = spark
        self._explicit: dict[str, str] | None = None

    def _all(self) -> dict[str, str]:
        if self._explicit is None:
            try:
                self._explicit = dict(self._spark.conf.getAll)
            except Exception:  # older PySpark without RuntimeConfig.getAll
                self._explicit = {}
        return self._explicit

    def get(self, key: str) -> str | None:
        if key.startswith(PREFIX):
            value = self.local_property(key) or self._all().get(key)
            if value is None and not self._all():
                value = self._lookup(key)
            return value or None
        return self._all().get(key) or self._lookup(key)

    def _lookup(self, key: str) -> str | None:
        try:
            # Without a default, registered keys give their default value; unknown keys raise.
            value = self._spark.conf.get(key)
        except Exception:
            return None
        return value if value not in ("", None) else None

    def spark_conf(self, key: str) -> str | None:
        """A SparkContext (core) setting such as spark.speculation."""
        context = spark_context(self._spark)
        if context is None:
            return None
        return context.getConf().get(key, None)

    def local_property(self, key: str) -> str | None:
        context = spark_context(self._spark)
        if context is None:
            return None
        return context.getLocalProperty(key) or None


def spark_context(spark: Any) -> Any:
    """The classic SparkContext, or None for a Spark Connect session."""
    try:
        return spark.sparkContext
    except Exception:  # pyspark.sql.connect sessions have no SparkContext
        return None
