"""A write's options (``df.write.options`` spelling, case-insensitive as Spark's): the writer's,
the committer's and the S3 store's, each falling back to the Spark conf (``spark.config``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.jsonio import load_json
from airflow_commit_provider.core.formats.outcome import read_origin
from airflow_commit_provider.core.options import CommitOptions, parse_bool
from airflow_commit_provider.core.store.settings import S3Settings
from airflow_commit_provider.core.task_key import TryOrigin
from airflow_commit_provider.spark.config import (
    CONF_LOCAL_STAGING_DIR,
    CONF_MAX_JOB_DURATION,
    CONF_ORIGIN,
    CONF_PART_SIZE,
    CONF_PARTS_IN_FLIGHT,
    CONF_S3_ACCESS_KEY_ID,
    CONF_S3_BOTOCORE_CONFIG,
    CONF_S3_CONDITIONAL_CREATE,
    CONF_S3_ENDPOINT_URL,
    CONF_S3_REGION,
    CONF_S3_REQUEST_PATH,
    CONF_S3_SECRET_ACCESS_KEY,
    CONF_S3_SESSION_TOKEN,
    CONF_S3_VERIFY,
    CONF_THREADS,
    SPARK_MAX_RECORDS_PER_FILE,
    ConfSource,
)

#: S3 settings a write takes from its options, then the Spark conf (:func:`resolve_s3_settings`):
#: (option key, Spark conf key, :class:`S3Settings` field).
_S3_SOURCES: tuple[tuple[str, str, str], ...] = (
    ("s3.endpoint_url", CONF_S3_ENDPOINT_URL, "endpoint_url"),
    ("s3.access_key_id", CONF_S3_ACCESS_KEY_ID, "aws_access_key_id"),
    ("s3.secret_access_key", CONF_S3_SECRET_ACCESS_KEY, "aws_secret_access_key"),
    ("s3.session_token", CONF_S3_SESSION_TOKEN, "aws_session_token"),
    ("s3.region", CONF_S3_REGION, "region_name"),
    ("s3.verify", CONF_S3_VERIFY, "verify"),
    ("s3.request_path", CONF_S3_REQUEST_PATH, "request_path"),
    ("s3.conditional_create", CONF_S3_CONDITIONAL_CREATE, "conditional_create"),
    ("s3.botocore_config", CONF_S3_BOTOCORE_CONFIG, "botocore_config"),
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
    "max_job_duration",
)

_SIZE = re.compile(r"\s*([0-9]+)\s*([kmgt]?)i?b?\s*", re.IGNORECASE)


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


def job_seconds(value: object, name: str) -> float | None:
    """A job's longest duration in seconds, from a `timedelta` or a number of seconds (as text
    too); None or empty for unknown. Anything else, or not positive, is refused naming `name`."""
    if value is None or value == "":
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        seconds = math.nan
    else:
        try:
            seconds = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            seconds = math.nan
    if not 0 < seconds < math.inf:
        raise ValueError(f"{name} must be a positive number of seconds or a timedelta, got {value!r}")
    return seconds


def resolve_s3_settings(
    options: Mapping[str, Any], conf: ConfSource, environ: Mapping[str, str] | None = None
) -> S3Settings:
    """Per setting: the write's options, then the Spark conf, then the driver's environment."""
    given = {field: options.get(option) or conf.get(conf_key) for option, conf_key, field in _S3_SOURCES}
    return S3Settings.from_text(given, environ)


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
        origin=_origin(conf.get(CONF_ORIGIN)),
        max_job_duration=job_seconds(
            committer_options.get("max_job_duration", conf.get(CONF_MAX_JOB_DURATION)),
            "max_job_duration" if "max_job_duration" in committer_options else CONF_MAX_JOB_DURATION,
        ),
    )


def _origin(value: str | None) -> TryOrigin | None:
    """The operator's record of the try (`CONF_ORIGIN`); a malformed one is refused naming the conf."""
    if not value:
        return None
    try:
        return read_origin(load_json(value, CONF_ORIGIN), CONF_ORIGIN)
    except InvalidCommitDataError as error:
        raise ValueError(str(error)) from None
