"""Durations, scopes and `_SUCCESS` verification: the parts with no store behind them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from airflow_commit_provider.cleanup import (
    ScopeError,
    as_timedelta,
    format_duration,
    parse_duration,
    parse_scope,
)
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.success.check import SuccessExpectations


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("15m", 900),
        ("6h", 21600),
        ("2d", 172800),
        ("1w", 604800),
        ("1h30m", 5400),
        ("0s", 0),
        (" 6H ", 21600),
        ("1.5h", 5400),
    ],
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "6", "6x", "h", "-1h", "1h-", "six hours", "1d 2"])
def test_bad_durations_name_the_argument_and_value(text: str) -> None:
    with pytest.raises(ValueError, match=r"^older_than: .*") as error:
        parse_duration(text, "older_than")
    assert repr(text) in str(error.value) or text == ""


def test_as_timedelta_accepts_what_operators_get() -> None:
    assert as_timedelta(timedelta(minutes=5)) == timedelta(minutes=5)
    assert as_timedelta(60) == timedelta(minutes=1)
    assert as_timedelta("2d") == timedelta(days=2)
    with pytest.raises(ValueError, match="negative"):
        as_timedelta(-5)
    with pytest.raises(ValueError, match="older_than"):
        as_timedelta(True)


def test_format_duration() -> None:
    assert [format_duration(s) for s in (0, 42, 900, 5400, 2 * 86400 + 3 * 3600 + 7)] == [
        "0s",
        "42s",
        "15m",
        "1h30m",
        "2d3h",
    ]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("s3://", "no bucket"),
        ("s3:///out/table", "no bucket"),
        ("s3:bucket/table", "cannot parse"),
        ("http://host/table", "unsupported scheme"),
        ("", "empty scope"),
        ("s3://bucket", "empty prefix"),
        ("s3://bucket/", "empty prefix"),
        ("s3a://bucket//", "empty prefix"),
        ("file:///", "empty prefix"),
        ("s3://bucket/out/*", "wildcards"),
        ("s3://bucket/out/../x", r"'\.\.'"),
        ("s3://bucket/{{ params.table }}", "unrendered template"),
    ],
)
def test_bad_scopes_are_refused_naming_the_argument(url: str, message: str) -> None:
    with pytest.raises(ScopeError, match=f"^table_root: .*{message}"):
        parse_scope(url, argument="table_root")


def test_bucket_root_needs_the_opt_in() -> None:
    assert parse_scope("s3://bucket", allow_bucket_root=True) == StorePath("s3", "bucket", "")
    assert parse_scope("s3://bucket/out/dataset1/") == StorePath("s3", "bucket", "out/dataset1")
    assert parse_scope(StorePath("s3", "b", "t")) == StorePath("s3", "b", "t")
    with pytest.raises(ScopeError):
        parse_scope(StorePath("s3", "b", ""))
    with pytest.raises(ScopeError, match="expected a URL"):
        parse_scope(None)  # type: ignore[arg-type]


def _success(**overrides: object) -> SuccessData:
    values: dict[str, object] = {
        "committer": "magic",
        "job_id": "job-1",
        "timestamp": int(datetime(2026, 1, 2, tzinfo=timezone.utc).timestamp() * 1000),
        "file_count": 12,
        "partitions": ["day=1", "day=2"],
    }
    values.update(overrides)
    return SuccessData(**values)  # type: ignore[arg-type]


def test_verify_success_passes_and_explains_each_failure() -> None:
    data = _success()
    assert SuccessExpectations.build(job_id="job-1", committers="MAGIC", min_files=12).verify(data) == []
    assert (
        SuccessExpectations(newer_than=datetime(2026, 1, 1), required_partitions=("day=1/",)).verify(data)
        == []
    )
    reasons = SuccessExpectations.build(
        job_id="job-2",
        committers=["staging", "directory"],
        min_files=13,
        newer_than=datetime(2026, 1, 3, tzinfo=timezone.utc),
        required_partitions=["day=3"],
    ).verify(data)
    assert reasons == [
        "job ID is 'job-1', expected 'job-2'",
        "committer is 'magic', expected 'staging' or 'directory'",
        "12 files committed, expected at least 13",
        "written at 2026-01-02T00:00:00+00:00, not after 2026-01-03T00:00:00+00:00",
        "missing partitions: day=3",
    ]


def test_verify_success_with_hadoops_capped_file_list() -> None:
    data = _success(file_count=None, filenames=[f"f{i}" for i in range(100)])
    (reason,) = SuccessExpectations(min_files=150).verify(data)
    assert "Hadoop caps the list at 100" in reason
    assert SuccessExpectations().verify(_success(success=False, state="failed")) == [
        "_SUCCESS says the job did not succeed (state 'failed')"
    ]
