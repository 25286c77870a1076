"""Spark configuration keys, writer options, and the small picklable config executors receive.

This module owns the ``spark.airflow_commit.*`` conf contract: the operator sets these keys for
each try, applications (the example job, ``write_committed``) read them.

Nothing here imports PySpark. Executors rebuild the store and committer from :class:`TaskConfig`,
which carries S3 settings (endpoint and credentials taken from the driver); its ``repr`` never shows
a credential, and nothing in this package logs one.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from airflow_commit_provider.core.options import CommitOptions, parse_bool
from airflow_commit_provider.core.store.check import CONDITIONAL_CREATE_ENV
from airflow_commit_provider.core.store.s3_requests import REQUEST_PATH_ENV

PREFIX = "spark.airflow_commit."
#: The output directory; ``write_committed(df)`` writes there when given no path.
CONF_DESTINATION = PREFIX + "destination"
#: ``python`` (``write_committed``) or ``hadoop`` (Spark's writers with Hadoop's committers).
CONF_ENGINE = PREFIX + "engine"
#: Airflow's try number (informational).
CONF_TRY_NUMBER = PREFIX + "try_number"
#: Committer name (file-v1, file-v2, manifest, directory, partitioned, magic).
CONF_COMMITTER = PREFIX + "committer"
#: fail | append | replace.
CONF_CONFLICT_MODE = PREFIX + "conflict_mode"
#: A fixed job ID for the next write(s); read from the thread's local property first, then the session.
CONF_JOB_ID = PREFIX + "job_id"
CONF_THREADS = PREFIX + "threads"
CONF_PART_SIZE = PREFIX + "part_size"
CONF_PARTS_IN_FLIGHT = PREFIX + "parts_in_flight"
CONF_LOCAL_STAGING_DIR = PREFIX + "local_staging_dir"
CONF_S3_ENDPOINT_URL = PREFIX + "s3.endpoint_url"
CONF_S3_ACCESS_KEY_ID = PREFIX + "s3.access_key_id"
CONF_S3_SECRET_ACCESS_KEY = PREFIX + "s3.secret_access_key"
CONF_S3_SESSION_TOKEN = PREFIX + "s3.session_token"
CONF_S3_REGION = PREFIX + "s3.region"
#: TLS verification: false, true, or a CA bundle path (boto3's `verify`).
CONF_S3_VERIFY = PREFIX + "s3.verify"
#: auto | crt | boto3: how the hot S3 calls are sent (`core.store.s3_requests`).
CONF_S3_REQUEST_PATH = PREFIX + "s3.request_path"
#: check | trusted: whether job setup probes the store's ``If-None-Match: *`` once per process, or
#: the user vouches for it (`core.store.check`; Hadoop's ``fs.s3a.create.conditional.enabled``).
CONF_S3_CONDITIONAL_CREATE = PREFIX + "s3.conditional_create"
#: What ``CommittedSparkSubmitOperator`` sets for every try; a user's ``conf`` must not set them.
OPERATOR_CONFS = (
    CONF_JOB_ID,
    CONF_COMMITTER,
    CONF_DESTINATION,
    CONF_ENGINE,
    CONF_CONFLICT_MODE,
    CONF_TRY_NUMBER,
)
#: The same for a job's environment: boto3 reads AWS_CA_BUNDLE but has no variable for `false`.
ENV_S3_VERIFY = "AIRFLOW_COMMIT_S3_VERIFY"

#: Spark copies ``spark.hadoop.X`` into the Hadoop conf as ``X`` when the SparkContext starts.
HADOOP_CONF_PREFIX = "spark.hadoop."
#: Spark 4 measures the Arrow batch it fills for Python after every row, to stop at this many bytes
#: (64 MB by default); for ``mapInArrow``'s single struct column that walks every field of every
#: row, and it was most of the cost of moving rows from the JVM to Python (bench/s3a_writes.py).
#: At Int.MaxValue Spark skips the measurement, and batches are cut by
#: ``spark.sql.execution.arrow.maxRecordsPerBatch`` alone, as before Spark 4.
ARROW_MAX_BYTES_PER_BATCH = "spark.sql.execution.arrow.maxBytesPerBatch"
ARROW_UNMEASURED_BATCHES = str(2**31 - 1)
#: Spark's own key for a write job's unique ID (SPARK-33230); we set it as a local property.
SPARK_WRITE_JOB_UUID = "spark.sql.sources.writeJobUUID"
SPARK_MAX_RECORDS_PER_FILE = "spark.sql.files.maxRecordsPerFile"
SPARK_PARQUET_CODEC = "spark.sql.parquet.compression.codec"
SPARK_ORC_CODEC = "spark.sql.orc.compression.codec"
SPARK_SPECULATION = "spark.speculation"

#: S3 settings: (option key, Spark conf key, environment variables, S3Store keyword).
_S3_SOURCES: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("s3.endpoint_url", CONF_S3_ENDPOINT_URL, ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"), "endpoint_url"),
    ("s3.access_key_id", CONF_S3_ACCESS_KEY_ID, ("AWS_ACCESS_KEY_ID",), "aws_access_key_id"),
    ("s3.secret_access_key", CONF_S3_SECRET_ACCESS_KEY, ("AWS_SECRET_ACCESS_KEY",), "aws_secret_access_key"),
    ("s3.session_token", CONF_S3_SESSION_TOKEN, ("AWS_SESSION_TOKEN",), "aws_session_token"),
    ("s3.region", CONF_S3_REGION, ("AWS_DEFAULT_REGION", "AWS_REGION"), "region_name"),
    ("s3.verify", CONF_S3_VERIFY, (ENV_S3_VERIFY, "AWS_CA_BUNDLE"), "verify"),
    ("s3.request_path", CONF_S3_REQUEST_PATH, (REQUEST_PATH_ENV,), "request_path"),
    (
        "s3.conditional_create",
        CONF_S3_CONDITIONAL_CREATE,
        (CONDITIONAL_CREATE_ENV,),
        "conditional_create",
    ),
)

#: Options passed to Spark's `to_csv` (the same CSVOptions Spark's CSV writer uses).
CSV_PASSTHROUGH = (
    "sep",
    "delimiter",
    "quote",
    "escape",
    "escapequotes",
    "quoteall",
    "nullvalue",
    "emptyvalue",
    "dateformat",
    "timestampformat",
    "timestampntzformat",
    "chartoescapequoteescaping",
    "ignoreleadingwhitespace",
    "ignoretrailingwhitespace",
)
#: Options passed to Spark's `to_json` (the same JSONOptions Spark's JSON writer uses).
JSON_PASSTHROUGH = ("dateformat", "timestampformat", "timestampntzformat", "ignorenullfields", "pretty")
_WRITER_KEYS = (
    "maxrecordsperfile",
    "maxbytesperfile",
    "compression",
    "codec",
    "header",
    "linesep",
    "encoding",
    "charset",
    "parquet.block.size",
    "orc.stripe.size",
)
_COMMITTER_KEYS = (
    "threads",
    "part_size",
    "parts_in_flight",
    "allow_unsafe_v2",
    "local_staging_dir",
    "skip_cleanup",
)

_SIZE = re.compile(r"\s*([0-9]+)\s*([kmgt]?)i?b?\s*", re.IGNORECASE)


class ConfSource(Protocol):
    """Where settings are looked up: a session's `SparkConf`, or a plain dict when planning a
    write without Spark."""

    def get(self, key: str) -> str | None: ...


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


def parse_size(value: object, name: str) -> int:
    """Bytes from an int or a size string such as ``128m`` or ``1g`` (binary units)."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a size, got {value!r}")
    if isinstance(value, int):
        size = value
    else:
        match = _SIZE.fullmatch(str(value))
        if not match:
            raise ValueError(f"{name} must be a size such as 134217728 or '128m', got {value!r}")
        size = int(match.group(1)) * 1024 ** " kmgt".index(match.group(2).lower() or " ")
    if size < 0:
        raise ValueError(f"{name} must not be negative, got {value!r}")
    return size


def whole_number(value: object, name: str) -> int:
    """An integer option or conf value, as text or a number; `int()`'s OverflowError for an
    infinite float is refused like any other non-integer, naming the option."""
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def _verify_setting(value: str | None) -> bool | str | None:
    """`false`/`0`/`no` turn TLS verification off, `true`/`1`/`yes` keep the default, else a CA bundle."""
    text = (value or "").strip()
    if text.lower() in ("false", "0", "no"):
        return False
    if text.lower() in ("", "true", "1", "yes"):
        return None
    return text


@dataclass(frozen=True)
class S3Settings:
    """Where and as whom to reach S3: from a write's options, Spark conf and environment
    (`resolve`) or from an Airflow connection (the hook). ``None`` is left to boto3's defaults;
    credentials never appear in ``repr``.
    """

    endpoint_url: str | None = None
    aws_access_key_id: str | None = field(default=None, repr=False)
    aws_secret_access_key: str | None = field(default=None, repr=False)
    aws_session_token: str | None = field(default=None, repr=False)
    region_name: str | None = None
    verify: bool | str | None = None
    """False, a CA bundle path, or None for boto3's default (verify against its bundle)."""
    request_path: str | None = None
    """auto, crt or boto3 for the hot S3 calls; None leaves it to the executor's environment, then auto."""
    conditional_create: str | None = None
    """check or trusted (``If-None-Match: *`` probed at job setup, or vouched for); None: the
    environment's ``AIRFLOW_COMMIT_S3_CONDITIONAL_CREATE``, then check."""

    def store_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :class:`~airflow_commit_provider.core.store.s3.S3Store`."""
        return {key: value for key, value in asdict(self).items() if value is not None and value != ""}

    def environment(self) -> dict[str, str]:
        """The same settings as the variables a child process reads (boto3's ``AWS_*``, and
        ``resolve`` for `verify`). Meant for a job's environment, never for command lines or logs.
        """
        env = {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_DEFAULT_REGION": self.region_name,
            "AWS_ACCESS_KEY_ID": self.aws_access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.aws_secret_access_key,
            "AWS_SESSION_TOKEN": self.aws_session_token,
            "AWS_CA_BUNDLE": self.verify if isinstance(self.verify, str) else None,
            ENV_S3_VERIFY: "false" if self.verify is False else None,
            REQUEST_PATH_ENV: self.request_path,
            CONDITIONAL_CREATE_ENV: self.conditional_create,
        }
        return {key: value for key, value in env.items() if value}

    def __repr__(self) -> str:
        secret = "***" if self.aws_secret_access_key else None
        return (
            f"S3Settings(endpoint_url={self.endpoint_url!r}, region_name={self.region_name!r}, "
            f"credentials={'given' if self.aws_access_key_id or secret else 'default chain'})"
        )

    @classmethod
    def resolve(
        cls, options: Mapping[str, Any], conf: ConfSource, environ: Mapping[str, str] | None = None
    ) -> S3Settings:
        """Per setting: the write's options, then the Spark conf, then the driver's environment."""
        environ = os.environ if environ is None else environ
        values: dict[str, str | None] = {}
        for option, conf_key, env_names, kwarg in _S3_SOURCES:
            value = options.get(option) or conf.get(conf_key)
            if not value:
                value = next((environ[name] for name in env_names if environ.get(name)), None)
            values[kwarg] = str(value) if value else None
        verify = _verify_setting(values.pop("verify"))
        return cls(**values, verify=verify)


@dataclass(frozen=True)
class WriterOptions:
    """Options that shape the files a task writes (not the commit)."""

    max_records_per_file: int = 0
    max_bytes_per_file: int = 0
    compression: str | None = None
    csv_header: bool = True
    line_sep: str = "\n"
    row_group_bytes: int = 64 * 1024 * 1024
    stripe_bytes: int = 64 * 1024 * 1024
    format_options: tuple[tuple[str, str], ...] = ()
    """Options handed to Spark's `to_csv` / `to_json` (original key spelling)."""


@dataclass(frozen=True)
class ParsedOptions:
    writer: WriterOptions
    committer: dict[str, Any]
    s3: dict[str, Any]


def parse_options(options: Mapping[str, Any] | None, format: str, conf: ConfSource) -> ParsedOptions:
    """Split ``options`` (keys case-insensitive, as Spark's) into writer, committer and S3 options."""
    normalised: dict[str, tuple[str, Any]] = {}
    for key, value in (options or {}).items():
        lower = str(key).lower()
        if lower in normalised:
            raise ValueError(f"option {key!r} given twice (option keys are case-insensitive)")
        normalised[lower] = (str(key), value)
    passthrough = {"csv": CSV_PASSTHROUGH, "json": JSON_PASSTHROUGH}.get(format, ())
    s3_keys = {source[0] for source in _S3_SOURCES}
    unknown = sorted(
        original
        for lower, (original, _v) in normalised.items()
        if lower not in _WRITER_KEYS
        and lower not in _COMMITTER_KEYS
        and lower not in s3_keys
        and lower not in passthrough
    )
    if unknown:
        raise ValueError(
            f"unknown option(s) for format {format!r}: {', '.join(map(repr, unknown))}; writer options are "
            f"{', '.join(_WRITER_KEYS + passthrough)}; committer options {', '.join(_COMMITTER_KEYS)}; "
            f"S3 options {', '.join(sorted(s3_keys))}"
        )

    def get(key: str, default: Any = None) -> Any:
        return normalised[key][1] if key in normalised else default

    for key in ("encoding", "charset"):
        if key in normalised and str(get(key)).replace("-", "").lower() != "utf8":
            raise ValueError(f"only UTF-8 output is supported, got {key}={get(key)!r}")
    if "compression" in normalised and "codec" in normalised:
        raise ValueError("give either 'compression' or 'codec', not both")
    max_records = get("maxrecordsperfile", conf.get(SPARK_MAX_RECORDS_PER_FILE) or 0)
    max_records = whole_number(max_records, "maxRecordsPerFile")
    if format in ("csv", "json") and "pretty" in normalised and parse_bool(get("pretty"), "pretty"):
        raise ValueError("pretty=true would break the one-record-per-line layout Spark's readers expect")
    writer = WriterOptions(
        max_records_per_file=max(max_records, 0),
        max_bytes_per_file=parse_size(get("maxbytesperfile", 0), "maxBytesPerFile"),
        compression=(
            str(get("compression", get("codec"))).lower() if get("compression", get("codec")) else None
        ),
        csv_header=parse_bool(get("header", True), "header"),
        line_sep=str(get("linesep", "\n")),
        row_group_bytes=parse_size(get("parquet.block.size", 64 * 1024 * 1024), "parquet.block.size") or 1,
        stripe_bytes=parse_size(get("orc.stripe.size", 64 * 1024 * 1024), "orc.stripe.size") or 1,
        format_options=tuple(
            (original, str(value).lower() if isinstance(value, bool) else str(value))
            for lower, (original, value) in normalised.items()
            if lower in passthrough
        ),
    )
    if not writer.line_sep:
        raise ValueError("lineSep must not be empty")
    committer = {lower: get(lower) for lower in _COMMITTER_KEYS if lower in normalised}
    s3 = {lower: get(lower) for lower in s3_keys if lower in normalised}
    return ParsedOptions(writer, committer, s3)


def commit_options(committer_options: Mapping[str, Any], conf: ConfSource) -> CommitOptions:
    """CommitOptions from the write's options, then the Spark conf, then the defaults.

    The conflict mode is not among them: the write's plan decides what the committer applies.
    """
    defaults = CommitOptions()
    threads = committer_options.get("threads", conf.get(CONF_THREADS) or defaults.threads)
    part_size = committer_options.get("part_size", conf.get(CONF_PART_SIZE) or defaults.part_size)
    in_flight = committer_options.get(
        "parts_in_flight", conf.get(CONF_PARTS_IN_FLIGHT) or defaults.parts_in_flight
    )
    staging = committer_options.get("local_staging_dir", conf.get(CONF_LOCAL_STAGING_DIR))
    threads = whole_number(threads, "threads")
    in_flight = whole_number(in_flight, "parts_in_flight")
    return CommitOptions(
        threads=threads,
        allow_unsafe_v2=parse_bool(committer_options.get("allow_unsafe_v2", False), "allow_unsafe_v2"),
        part_size=parse_size(part_size, "part_size"),
        parts_in_flight=in_flight,
        local_staging_dir=str(staging) if staging else None,
        skip_cleanup=parse_bool(committer_options.get("skip_cleanup", False), "skip_cleanup"),
    )


@dataclass(frozen=True)
class TaskConfig:
    """Everything a task needs, small and picklable; executors rebuild store and committer from it."""

    committer: str
    destination: str
    """The destination as `str(StorePath)`, which `StorePath.parse` takes back literally."""
    job_id: str
    commit_options: CommitOptions
    s3: S3Settings
    format: str
    codec: str | None
    """The pyarrow codec name (None: uncompressed)."""
    file_suffix: str
    """What follows `c%03d` in a file name, e.g. `.snappy.parquet` or `.csv.gz`."""
    data_columns: tuple[str, ...]
    """Columns written into files (parquet/orc), in order."""
    partition_columns: tuple[str, ...]
    """Partition column names as they appear in directory names."""
    key_columns: tuple[str, ...]
    """The hidden string columns carrying each row's partition values (Spark-cast, '' as null)."""
    line_column: str | None
    """csv/json: the hidden column holding each row already encoded by Spark."""
    header: str | None
    """csv: the header line, or None."""
    writer: WriterOptions
    spark_schema_json: str | None = None
    """parquet: the data schema as Spark writes it into the footer (org.apache.spark.sql.parquet.row.metadata);
    orc: the data schema whose Spark types the files' layout follows (``orc_layout``)."""
    spark_version: str | None = None
    timestamp_rebase: Any = None
    """orc: how Spark's ORC writer rebases timestamps in the JVM's time zone (``orc_layout.TimestampRebase``)."""
    empty_schema: Any = None
    """The Arrow schema of the written columns, for the empty file of an empty write (pyarrow.Schema)."""

    @property
    def partitioned(self) -> bool:
        return bool(self.partition_columns)


def runtime_key(key: str) -> str:
    """The key to set on a running session: ``spark.hadoop.X`` becomes ``X``."""
    return key[len(HADOOP_CONF_PREFIX) :] if key.startswith(HADOOP_CONF_PREFIX) else key


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
        for target, earlier in previous.items():
            if earlier is None:
                spark.conf.unset(target)
            else:
                spark.conf.set(target, earlier)


class _SharedDefault:
    """Concurrent writes in one session (days run as threads of one driver) share the session's
    conf: each one saving and restoring the value on its own would restore another write's
    setting and leave it behind. The first write that needs the default sets it, the last one
    unsets it, and a value the session already had is never touched."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders: dict[tuple[int, str], int] = {}

    @contextmanager
    def held(self, spark: Any, key: str, value: str) -> Iterator[None]:
        slot = (id(spark), key)
        with self._lock:
            holders = self._holders.get(slot, 0)
            set_by_session = holders == 0 and spark.conf.get(key, None) is not None
            if not set_by_session:
                if holders == 0:
                    spark.conf.set(key, value)
                self._holders[slot] = holders + 1
        try:
            yield
        finally:
            if not set_by_session:
                with self._lock:
                    self._holders[slot] -= 1
                    if self._holders[slot] == 0:
                        del self._holders[slot]
                        spark.conf.unset(key)


#: Session defaults held while any write of this process needs them (``held_default``).
_shared_defaults = _SharedDefault()


def held_default(spark: Any, key: str, value: str) -> AbstractContextManager[None]:
    """Set ``key`` to ``value`` for the block unless the session sets it; safe for concurrent writes."""
    return _shared_defaults.held(spark, key, value)
