"""Fuzz targets: a write's data-source options and the Spark conf it reads (`parse_options`,
`commit_options`), with the option names Spark users type, in any case, and any values."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st
from support.fuzzing import FUZZ, accepted_or_refused, hostile_text

from airflow_commit_provider.spark import config as cfg
from airflow_commit_provider.spark.write_options import commit_options, parse_options

OPTION_NAMES = (
    "maxRecordsPerFile",
    "maxBytesPerFile",
    "compression",
    "codec",
    "header",
    "lineSep",
    "encoding",
    "charset",
    "pretty",
    "sep",
    "parquet.block.size",
    "orc.stripe.size",
    "threads",
    "part_size",
    "parts_in_flight",
    "allow_unsafe_v2",
    "skip_cleanup",
    "local_staging_dir",
    "s3.endpoint_url",
    "s3.verify",
)
values = st.one_of(
    hostile_text,
    st.integers(),
    st.floats(),
    st.booleans(),
    st.none(),
    st.sampled_from(["1", "64m", "true", "inf", "1e999"]),
)
names = st.one_of(st.sampled_from(OPTION_NAMES), st.sampled_from(OPTION_NAMES).map(str.upper), hostile_text)
conf_keys = st.sampled_from(
    (cfg.SPARK_MAX_RECORDS_PER_FILE, cfg.CONF_THREADS, cfg.CONF_PART_SIZE, cfg.CONF_PARTS_IN_FLIGHT)
)


@FUZZ
@given(
    st.dictionaries(names, values, max_size=5),
    st.sampled_from(("parquet", "csv", "json", "orc")),
    st.dictionaries(conf_keys, hostile_text, max_size=2),
)
@example({"maxRecordsPerFile": float("inf")}, "parquet", {})
@example({}, "parquet", {cfg.SPARK_MAX_RECORDS_PER_FILE: "inf"})
@example({"threads": float("inf")}, "parquet", {})
@example({"parts_in_flight": float("nan")}, "parquet", {})
def test_write_options(options: dict[str, Any], format: str, conf: dict[str, str]) -> None:
    # Keys are case-insensitive: a message may name one as given, folded, or as documented.
    spellings = {name.lower(): name for name in OPTION_NAMES}
    shown = [*conf, "option", "lineSep", "maxRecordsPerFile"]
    shown += [spelling for key in options for spelling in (key, key.lower(), spellings.get(key.lower(), key))]
    parsed = accepted_or_refused(lambda: parse_options(options, format, conf), ValueError, *shown)
    if parsed is not None:
        names_given = [*shown, "threads", "part_size", "parts_in_flight", "allow_unsafe_v2", "skip_cleanup"]
        accepted_or_refused(lambda: commit_options(parsed.committer, conf), ValueError, *names_given)
