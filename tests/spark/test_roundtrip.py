"""Every committer and every format, on each store, writes, commits and reads back equal to what
was written.

file:// is read back with spark.read; S3 with pyarrow's own S3 filesystem (not our store, not
Spark). The writes are partitioned and roll files at 4 records, so each write has several
partition directories and files per task.

Each committer runs once per store, with the formats dealt round the committers so every format
runs at least once per store too (with a different committer on each store): a committer sees a
format's writer only through the file stream it hands out (``TaskAttempt.create_file``), so the full
committer x format product (44 Spark jobs) checked nothing these 11 do not.
"""

from __future__ import annotations

import pytest
from spark_support import (
    FORMATS,
    LOCAL_COMMITTERS,
    S3_COLUMNS,
    S3_COMMITTERS,
    assert_committed_write,
    read_local,
    read_s3_rows,
    rows_of,
    sample_df,
    visible_files,
)

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.spark import write_committed

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def df(spark):
    return sample_df(spark).cache()


def _options(committer: str, **extra) -> dict:
    options = {"maxRecordsPerFile": 4, **extra}
    if committer == "file-v2":
        options["allow_unsafe_v2"] = True
    return options


def _dealt(committers: tuple[str, ...], first_format: int) -> list:
    """(committer, format) pairs: each committer once, the formats in turn from `first_format`."""
    return [
        pytest.param(
            name,
            FORMATS[(first_format + index) % len(FORMATS)],
            id=f"{name}-{FORMATS[(first_format + index) % len(FORMATS)]}",
        )
        for index, name in enumerate(committers)
    ]


LOCAL_CASES = _dealt(LOCAL_COMMITTERS, 0)
#: Started two formats on, so no committer meets the same format on both stores.
S3_CASES = _dealt(S3_COMMITTERS, 2)
assert {case.values[1] for case in LOCAL_CASES} == {case.values[1] for case in S3_CASES} == set(FORMATS)


@pytest.mark.parametrize(("committer", "fmt"), LOCAL_CASES)
def test_local_round_trip(spark, df, tmp_path, committer, fmt):
    staging = str(tmp_path / "staging")
    dest = StorePath.parse(str(tmp_path / "out"))
    summary = write_committed(
        df,
        str(tmp_path / "out"),
        format=fmt,
        partition_by=["part"],
        committer=committer,
        options=_options(committer, local_staging_dir=staging),
    )
    assert summary.committer == committer
    assert summary.rows == 40
    assert summary.tasks == 2
    assert sorted(summary.partitions) == ["part=a", "part=b c", "part=x%3Dy"]
    assert summary.partition_count == 3
    files = assert_committed_write(LocalStore(), dest, summary, staging_root=staging)
    # 2 tasks x 3 partitions, 6-7 rows per task and partition, rolled at 4 rows: 2 files each.
    assert len(files) == 12
    assert rows_of(read_local(spark, fmt, str(tmp_path / "out"), df.schema)) == rows_of(df)


@pytest.mark.s3
@pytest.mark.parametrize(("committer", "fmt"), S3_CASES)
def test_s3_round_trip(df, s3_prefix, s3_options, spark_s3_store, arrow_s3, tmp_path, committer, fmt):
    staging = str(tmp_path / "staging")
    dest = StorePath.parse(s3_prefix)
    summary = write_committed(
        df,
        s3_prefix,
        format=fmt,
        partition_by="part",
        committer=committer,
        options=_options(committer, local_staging_dir=staging, threads=4, **s3_options),
    )
    assert summary.rows == 40
    files = assert_committed_write(spark_s3_store, dest, summary, staging_root=staging)
    assert len(files) == 12
    assert read_s3_rows(arrow_s3, fmt, dest) == rows_of(df, S3_COLUMNS)


def _lines(root, fmt):
    """Every data line under `root` (csv headers dropped), sorted."""
    found = []
    for path in sorted(root.rglob("part-*")):
        text = path.read_text(encoding="utf-8").splitlines()
        found += text[1:] if fmt == "csv" else text
    return sorted(found)


def test_text_formats_match_spark_own_writer(spark, df, tmp_path):
    """csv/json lines are byte-for-byte the lines Spark's own writer produces for the same rows."""
    for fmt in ("csv", "json"):
        ours = tmp_path / f"ours-{fmt}"
        theirs = tmp_path / f"spark-{fmt}"
        write_committed(df, str(ours), format=fmt, partition_by=["part"])
        writer = df.write.partitionBy("part")
        if fmt == "csv":
            writer = writer.option("header", True)
        getattr(writer, fmt)(str(theirs))
        ours_store = StorePath.parse(str(ours))
        theirs_store = StorePath.parse(str(theirs))
        assert {name.rsplit("/", 1)[0] for name in visible_files(LocalStore(), ours_store)} == {
            name.rsplit("/", 1)[0] for name in visible_files(LocalStore(), theirs_store)
        }

        assert _lines(ours, fmt) == _lines(theirs, fmt)
        if fmt == "csv":
            headers = {p.read_text(encoding="utf-8").splitlines()[0] for p in ours.rglob("part-*")}
            assert headers == {"id,name,amount,dt,ts,flag,dec"}
