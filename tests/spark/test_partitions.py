"""Partitions and paths: conflict modes of the partitioned committer, partition values that need
escaping (compared with Spark's own writer), and destinations with spaces, ``%`` and unicode."""

from __future__ import annotations

import pytest
from spark_support import read_local, read_s3_rows, rows_of, store_for, visible_files
from support.invariants import assert_nothing_left_behind

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.errors import OutputConflictError
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.spark import write_committed

pytestmark = pytest.mark.spark


def _days(spark, days, rows_per_day=4):
    """`rows_per_day` rows for each day, ids unique per (day, row)."""
    values = ", ".join(
        f"({day * 100 + row}, 'd{day}-{row}', '{day}')" for day in days for row in range(rows_per_day)
    )
    return spark.sql(f"SELECT * FROM VALUES {values} AS t(id, name, day)").repartition(2)


def _by_day(store, dest):
    """{day directory: set of job IDs whose files it holds}."""
    found: dict[str, set[str]] = {}
    for relative in visible_files(store, dest):
        directory, name = relative.rsplit("/", 1)
        found.setdefault(directory, set()).add(name.split("-", 2)[2][:36])
    return found


@pytest.mark.parametrize("kind", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_partitioned_conflict_modes(spark, tmp_path, request, kind):
    if kind == "local":
        dest_text, options = str(tmp_path / "table"), {}
    else:
        dest_text, options = request.getfixturevalue("s3_prefix"), dict(request.getfixturevalue("s3_options"))
    dest = StorePath.parse(dest_text)
    store = store_for(dest, request.getfixturevalue("spark_s3_store") if kind == "s3" else None)

    def write(days, mode):
        return write_committed(
            _days(spark, days), dest_text, partition_by=["day"], conflict_mode=mode, options=options
        )

    first = write([1, 2], "append")
    assert first.committer == ("magic" if kind == "s3" else "manifest")

    # replace: only the partitions this job writes are replaced; day=1 is untouched.
    replaced = write([2, 3], "replace")
    assert replaced.committer == "partitioned", "replace needs (and defaults to) the partitioned committer"
    assert _by_day(store, dest) == {
        "day=1": {first.job_id},
        "day=2": {replaced.job_id},
        "day=3": {replaced.job_id},
    }

    # fail: day=3 already has data, so nothing of this job becomes visible.
    before = visible_files(store, dest)
    with pytest.raises(OutputConflictError, match="day=3"):
        write([3, 4], "fail")
    assert visible_files(store, dest) == before
    assert_nothing_left_behind(store, dest)

    # fail: a partition nobody wrote yet is fine.
    fresh = write([4], "fail")
    # append: day=1 now holds both jobs' files.
    appended = write([1], "append")
    assert _by_day(store, dest) == {
        "day=1": {first.job_id, appended.job_id},
        "day=2": {replaced.job_id},
        "day=3": {replaced.job_id},
        "day=4": {fresh.job_id},
    }
    assert_nothing_left_behind(store, dest)
    expected = sorted(
        [(d * 100 + r, f"d{d}-{r}", str(d)) for d in (1, 2, 3, 4) for r in range(4)]
        + [(100 + r, f"d1-{r}", "1") for r in range(4)]
    )
    if kind == "local":
        back = spark.read.schema("id int, name string, day string").parquet(dest_text)
        assert rows_of(back, ("id", "name", "day")) == expected
    else:
        arrow_s3 = request.getfixturevalue("arrow_s3")
        assert read_s3_rows(arrow_s3, "parquet", dest, ("id", "name", "day")) == expected


def test_other_committers_conflict_modes(spark, tmp_path):
    dest = str(tmp_path / "table")
    write_committed(_days(spark, [1]), dest, partition_by="day", committer="manifest")
    with pytest.raises(OutputConflictError, match="already holds"):
        write_committed(
            _days(spark, [2]), dest, partition_by="day", committer="manifest", conflict_mode="fail"
        )
    with pytest.raises(ValueError, match="staging committer"):
        write_committed(
            _days(spark, [2]), dest, partition_by="day", committer="magic", conflict_mode="replace"
        )
    # The directory committer's replace swaps the whole destination.
    summary = write_committed(_days(spark, [2]), dest, partition_by="day", conflict_mode="replace")
    assert summary.committer == "partitioned"
    summary = write_committed(_days(spark, [3]), dest, conflict_mode="replace")
    assert summary.committer == "directory"
    assert sorted(visible_files(LocalStore(), StorePath.parse(dest))) == sorted(
        f"part-0000{i}-{summary.job_id}-c000.snappy.parquet" for i in range(2)
    )


PARTITION_VALUES = [
    "a=b",
    "x/y",
    "50%",
    "%41",
    "with space",
    "ü-unicode-日本",
    "colon:hash#",
    "quote'\"",
    "brace{[]^",
    "star*?",
    "back\\slash",
    "tab\tnew\nline\x01",
    "",
    None,
    "__HIVE_DEFAULT_PARTITION__x",
]


def test_partition_values_escaped_like_spark(spark, tmp_path):
    rows = [(index, value, index % 2) for index, value in enumerate(PARTITION_VALUES)]
    df = spark.createDataFrame(rows, "id long, p string, q int").repartition(2)
    ours = tmp_path / "ours"
    theirs = tmp_path / "spark"
    write_committed(df, str(ours), partition_by=["p", "q"])
    df.write.partitionBy("p", "q").parquet(str(theirs))

    def directories(root):
        return {name.rsplit("/", 1)[0] for name in visible_files(LocalStore(), StorePath.parse(str(root)))}

    assert directories(ours) == directories(theirs)
    assert "p=a%3Db/q=0" in directories(ours)
    assert "p=__HIVE_DEFAULT_PARTITION__/q=0" in directories(ours)

    back = spark.read.schema("id long, p string, q int").parquet(str(ours))
    expected = sorted((index, value or None, index % 2) for index, value in enumerate(PARTITION_VALUES))
    assert rows_of(back, ("id", "p", "q")) == expected
    spark_back = spark.read.schema("id long, p string, q int").parquet(str(theirs))
    assert rows_of(spark_back, ("id", "p", "q")) == expected


def test_destination_with_spaces_percent_and_unicode_local(spark, tmp_path):
    df = spark.createDataFrame([(1, "a b"), (2, "ü%"), (3, "x")], "id long, p string")
    dest = tmp_path / "out dir %41 100% ü 日本"
    summary = write_committed(df, str(dest), format="json", partition_by="p")
    assert dest.is_dir() and (dest / "_SUCCESS").is_file()
    assert summary.rows == 3
    back = read_local(spark, "json", str(dest), df.schema)
    assert rows_of(back, ("id", "p")) == [(1, "a b"), (2, "ü%"), (3, "x")]
    assert_nothing_left_behind(LocalStore(), StorePath.parse(str(dest)))


@pytest.mark.s3
def test_destination_with_spaces_percent_and_unicode_s3(
    spark, spark_bucket, s3_options, spark_s3_store, arrow_s3
):
    df = spark.createDataFrame([(1, "a b"), (2, "ü%"), (3, "x")], "id long, p string")
    # A location is taken literally (str(dest)); only a stored URI (dest.uri()) is percent-encoded.
    dest = StorePath("s3", spark_bucket, "paths/out dir %41 100% ü 日本")
    assert StorePath.from_uri(dest.uri()) == dest == StorePath.parse(str(dest))
    summary = write_committed(
        df, str(dest), format="csv", partition_by="p", committer="magic", options=s3_options
    )
    keys = visible_files(spark_s3_store, dest)
    assert summary.files == len(keys) == 3
    assert {key.split("/", 1)[0] for key in keys} == {"p=a b", "p=ü%25", "p=x"}
    # pyarrow finds the objects under the literal key (its own S3 client, not ours).
    assert read_s3_rows(arrow_s3, "csv", dest, ("id", "p")) == [(1, "a b"), (2, "ü%"), (3, "x")]
    assert_nothing_left_behind(spark_s3_store, dest)


def test_many_partitions_one_writer_at_a_time(spark, tmp_path):
    """60 partition values interleaved in one task: the task sees them sorted (sortWithinPartitions)
    and writes each directory's rows into ONE file, across Arrow batch boundaries (batches of 50),
    never reopening a directory - one open writer at a time. 7 rows a value, so most batch
    boundaries fall inside a directory's rows. (It was 200 values of 5 rows: 200 files to write and
    read back, and every boundary between two directories.)"""
    df = spark.range(420, numPartitions=1).selectExpr("id", "CAST(id % 60 AS STRING) AS p")
    summary = write_committed(df, str(tmp_path / "out"), format="csv", partition_by="p")
    files = visible_files(LocalStore(), StorePath.parse(str(tmp_path / "out")))
    assert summary.files == len(files) == 60
    assert all(name.endswith(f"part-00000-{summary.job_id}.c000.csv") for name in files)
    back = read_local(spark, "csv", str(tmp_path / "out"), df.schema)
    assert rows_of(back, ("id", "p")) == rows_of(df, ("id", "p"))
