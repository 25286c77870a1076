"""Fuzz targets: a write's data-source options and the Spark conf it reads (`parse_options`,
`commit_options`), with the option names Spark users type, in any case, and any values."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st
from support.fuzzing import (
    COMMIT_OPTION_NAMES,
    FUZZ,
    WRITE_OPTION_NAMES,
    accepted_or_refused,
    hostile_text,
    write_option_names,
)

from airflow_commit_provider.spark import config as cfg
from airflow_commit_provider.spark.write_options import commit_options, parse_options

values = st.one_of(
    hostile_text,
    st.integers(),
    st.floats(),
    st.booleans(),
    st.none(),
    st.sampled_from(["1", "64m", "true", "inf", "1e999"]),
)
names = st.one_of(
    st.sampled_from(WRITE_OPTION_NAMES), st.sampled_from(WRITE_OPTION_NAMES).map(str.upper), hostile_text
)
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
    shown = write_option_names(options, conf)
    parsed = accepted_or_refused(lambda: parse_options(options, format, conf), ValueError, *shown)
    if parsed is not None:
        accepted_or_refused(
            lambda: commit_options(parsed.committer, conf), ValueError, *shown, *COMMIT_OPTION_NAMES
        )
