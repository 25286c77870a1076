"""SuccessExpectations as the one carrier of the success checks: its JSON form, the XCom summary,
and what a check costs: one ranged GET of at most 64 KiB whatever the job wrote (issue 28), with
the partitions past the inline cap looked up in the partition list or the partition markers."""

from __future__ import annotations

import hashlib
import io
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.counting import CountingStore
from support.success_files import JOB, listed_job, put, success

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.file_list import (
    ROW_GROUP_ROWS,
    TAIL_BYTES,
    find_partitions,
    write_partition_list,
)
from airflow_commit_provider.core.formats.partition_stats import PartitionStats
from airflow_commit_provider.core.formats.phases import CommitPhase
from airflow_commit_provider.core.formats.success import SENSOR_READ_BYTES, CommittedFile, SuccessData
from airflow_commit_provider.core.iostats import IOStatistics
from airflow_commit_provider.core.job_records import job_record_path
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.success.check import SUMMARY_PARTITIONS, SuccessExpectations


def test_its_json_form_reads_back_as_the_same_expectations() -> None:
    expectations = SuccessExpectations.build(
        job_id=JOB,
        committers=("magic", "staging"),
        min_files="2",
        newer_than=datetime(2024, 1, 2),
        required_partitions="dt=1",
        allow_legacy=True,
    )
    as_json = expectations.to_dict()
    assert as_json["newer_than"] == "2024-01-02T00:00:00+00:00", "naive instants are UTC"
    assert SuccessExpectations.build(**as_json) == expectations
    assert SuccessExpectations.build(**SuccessExpectations().to_dict()) == SuccessExpectations()


def test_the_xcom_summary_lists_a_bounded_number_of_partitions_and_counts_them_all(tmp_path: Path) -> None:
    table = StorePath.parse(str(tmp_path / "table"))
    partitions = [f"dt={day}" for day in range(SUMMARY_PARTITIONS + 5)]
    store = LocalStore()
    put(store, table, success(table, partitions=partitions))
    found = SuccessExpectations(job_id=JOB, newer_than=datetime(2020, 1, 1, tzinfo=timezone.utc)).check(
        store, table
    )
    summary = found.xcom_summary()
    assert found.state == "accepted" and summary is not None
    assert summary["partitions"] == partitions[:SUMMARY_PARTITIONS]
    assert summary["partition_count"] == SUMMARY_PARTITIONS + 5
    assert (summary["path"], summary["source"], summary["legacy"]) == (
        str(table.join("_SUCCESS")),
        "_SUCCESS",
        False,
    )


def test_nothing_found_has_no_summary(tmp_path: Path) -> None:
    found = SuccessExpectations().check(LocalStore(), StorePath.parse(str(tmp_path / "none")))
    assert found.state == "missing" and found.xcom_summary() is None


def test_a_table_write_passes_only_once_its_record_says_the_partitions_are_registered(tmp_path: Path) -> None:
    """The `_SUCCESS` of a table write is judged by the job's record, which alone is rewritten when
    the partitions reach the catalog: before that the check waits and says why."""
    from dataclasses import replace

    from airflow_commit_provider.core.job_records import save_job_record

    location = StorePath.parse(str(tmp_path / "events"))
    store = LocalStore()
    written = success(location, table="db.events")
    put(store, location, written)
    save_job_record(store, location, written)
    for expectations in (SuccessExpectations(), SuccessExpectations(job_id=JOB)):
        pending = expectations.check(store, location)
        assert pending.state == "rejected" and pending.from_record
        assert pending.reasons == (
            "the partitions are not yet registered in table db.events (registration pending)",
        )
    save_job_record(store, location, replace(written, registered_partitions=["dt=2024-01-01"]))
    assert SuccessExpectations(job_id=JOB).check(store, location).state == "accepted"
    assert SuccessExpectations().check(store, location).state == "accepted"


@pytest.mark.parametrize(
    "listed",
    [
        "../other/part-0.parquet",
        "dt=2024-01-01/../../other/part-0.parquet",
        "s3://b/t/part-0.parquet",
        "not a uri",
    ],
)
@pytest.mark.parametrize("forged_file", ["_SUCCESS", "job record"])
def test_a_success_or_record_listing_a_file_outside_its_table_is_refused(
    tmp_path: Path, listed: str, forged_file: str
) -> None:
    """A `_SUCCESS` (or a job's record) vouches only for its own table's files: one listing another
    table's file is refused, with one line naming the file and the offending entry."""
    table = StorePath.parse(str(tmp_path / "table"))
    uri = listed if "://" in listed or " " in listed else f"file://{tmp_path}/table/{listed}"
    forged = success(table, files=[*success(table).iter_files(), CommittedFile(uri, 1)])
    store = LocalStore()
    if forged_file == "_SUCCESS":
        put(store, table, forged)
        job_id, file = JOB, table.join("_SUCCESS")
    else:
        put(store, table, success(table))  # a later job's: the record is read for "job-record"
        job_id, file = "job-record", job_record_path(table, "job-record")
        store.write_bytes(file, replace(forged, job_id=job_id).to_bytes())
    with pytest.raises(InvalidCommitDataError) as refused:
        SuccessExpectations(job_id=job_id).check(store, table)
    message = str(refused.value)
    assert message.startswith(f"{file}: ") and repr(uri) in message and "\n" not in message


# One ranged GET of at most 64 KiB, whatever the job wrote (issue 28) ------------------------------
StoreRoot = tuple[Store, StorePath]


@pytest.mark.slow
def test_a_poke_on_a_200k_file_jobs_success_is_one_ranged_get_of_at_most_64_kib(
    store_root: StoreRoot,
) -> None:
    """The `_SUCCESS` of a job that wrote 200,000 files with ~1 KiB paths in 2,000 partitions is
    larger than what a check reads, and the check still reads 64 KiB of it in one request: job,
    committer, time, counts and the inline partitions come first. Its record, read in its place
    when `_SUCCESS` names another job, costs the same once more."""
    store, root = store_root
    table = root.join("warehouse", "events")
    written = listed_job(store, table, 200_000, 2_000, name_bytes=1024, table=None)
    put(store, table, written)
    assert store.get_status(table.join("_SUCCESS")).size > SENSOR_READ_BYTES  # type: ignore[union-attr]
    counting = CountingStore(store)
    expectations = SuccessExpectations(
        job_id=JOB, committers=("magic",), min_files=200_000, required_partitions=("dt=00001",)
    )
    found = expectations.check(counting, table)
    assert found.state == "accepted", found.describe()
    assert counting.calls == {"read_range": 1}
    assert counting.paths_read == {table.join("_SUCCESS"): 1}
    assert counting.bytes_read == SENSOR_READ_BYTES
    assert found.xcom_summary()["files"] == 200_000  # type: ignore[index]

    put(store, table, listed_job(store, table, 300, 3, job_id="later-job", name_bytes=1024))
    record = replace(written, phases=[CommitPhase("write _SUCCESS", 1, 2)], partition_stats={})
    store.write_bytes(job_record_path(table, JOB), record.to_bytes())
    counting.reset()
    found = expectations.check(counting, table)
    assert found.state == "accepted" and found.from_record, found.describe()
    assert counting.calls == {"read_range": 2} and counting.largest_read <= SENSOR_READ_BYTES


def test_older_and_hadoops_larger_files_are_still_read_whole(store_root: StoreRoot) -> None:
    """An older `_SUCCESS` of ours lists every file inline after its other fields; Hadoop's may keep
    its counters past the first 64 KiB: both are read whole once the head says so (two requests),
    and judged as before."""
    store, root = store_root
    table = root.join("old")
    files = [CommittedFile(table.join(f"dt=2024-01-01/part-{i:05d}.parquet").uri(), 7) for i in range(3000)]
    put(store, table, success(table, files=files, file_count=None))
    counting = CountingStore(store)
    found = SuccessExpectations(job_id=JOB, min_files=3000).check(counting, table)
    assert found.state == "accepted", found.describe()
    assert counting.calls == {"read_range": 1, "read_bytes": 1}
    assert len(found.data.files or ()) == 3000  # type: ignore[union-attr]

    hadoop = root.join("hadoop")
    manifest = SuccessData(
        "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter",
        "spark-job",
        filenames=[hadoop.join(f"part-{i:05d}-" + "y" * 900 + ".parquet").uri() for i in range(100)],
        iostatistics=IOStatistics(counters={"committer_files_committed": 12_345}),
    )
    put(store, hadoop, manifest)
    counting.reset()
    found = SuccessExpectations(min_files=12_345).check(counting, hadoop)
    assert found.state == "accepted", found.describe()
    assert counting.calls == {"read_range": 1, "read_bytes": 1}


def test_a_required_partition_past_the_inline_cap_is_found_in_the_partition_list(
    store_root: StoreRoot,
) -> None:
    """A partition past the 100 listed inline is looked up in the job's partition list (one more
    ranged GET here: the list is small enough to lie in its tail), never in the file list; one the
    job did not write is missing, and the reason says where it was looked for."""
    store, root = store_root
    table = root.join("t")
    written = listed_job(store, table, 3_000, 1_500)
    put(store, table, written)
    assert written.partition_list is not None and written.file_list is not None
    counting = CountingStore(store)
    found = SuccessExpectations(job_id=JOB, required_partitions=("dt=01234", "dt=00007/")).check(
        counting, table
    )
    assert found.state == "accepted", found.describe()
    assert counting.calls == {"read_range": 2}
    assert set(counting.paths_read) == {
        table.join("_SUCCESS"),
        written.partition_list.path_under(table),
    }

    counting.reset()
    found = SuccessExpectations(required_partitions=("dt=01499", "dt=01500", "dt=99")).check(counting, table)
    assert found.state == "rejected"
    assert found.reasons == (
        "missing partitions: dt=01500, dt=99 (not among the 100 of 1500 listed inline, nor in its "
        f"partition list {written.partition_list.path_under(table)})",
    )
    assert written.file_list.path_under(table) not in counting.paths_read


def test_a_lookup_in_a_long_partition_list_reads_only_the_row_groups_that_may_hold_it(
    store_root: StoreRoot,
) -> None:
    """Parquet's statistics (each row group's least and greatest partition, in the footer) say
    which row groups to read: a lookup in a list of 150,000 partitions (three row groups) reads the
    footer and the partition column of one group."""
    store, root = store_root
    table = root.join("t")
    names = [
        f"dt={index:06d}/id={hashlib.sha256(str(index).encode()).hexdigest()[:24]}"
        for index in range(2 * ROW_GROUP_ROWS + 18_000)
    ]
    stats = ((name, PartitionStats(index, index * 1000, index * 10)) for index, name in enumerate(names))
    ref = write_partition_list(store, JobLayout(table, JOB), stats)
    footer = pq.ParquetFile(io.BytesIO(store.read_bytes(ref.path_under(table)))).metadata
    chunks = [footer.row_group(group).column(0).total_compressed_size for group in range(3)]
    counting = CountingStore(store)
    wanted = names[ROW_GROUP_ROWS + 7]
    found = find_partitions(counting, table, ref, [wanted, wanted + "/x", "dt=999999"])
    assert found == {wanted}
    assert counting.calls == {"read_range": 2}, "the footer, then one column of one row group"
    assert counting.bytes_read <= TAIL_BYTES + chunks[1] + 1
    assert counting.bytes_read < ref.bytes / 2, f"read {counting.bytes_read:,} of {ref.bytes:,} bytes"
    counting.reset()
    assert find_partitions(counting, table, ref, ["a", "zz"]) == set()
    assert counting.calls == {"read_range": 1}, "no row group may hold them: the footer says so"


def test_once_the_partition_list_is_pruned_the_partition_markers_vouch(store_root: StoreRoot) -> None:
    """The table's `_SUCCESS` outlives its job's lists (they go when its records are pruned). For
    the partitioned committer, a partition past the inline cap is then proved by its own
    `_SUCCESS` naming the job: one ranged GET each. One rewritten by a later job proves nothing."""
    store, root = store_root
    table = root.join("t")
    written = listed_job(store, table, 400, 200, committer="partitioned")
    put(store, table, written)
    assert written.partition_list is not None
    store.delete(written.partition_list.path_under(table))
    for partition, job in (("dt=00150", JOB), ("dt=00151", "later-job")):
        store.write_bytes(
            table.join(partition, "_SUCCESS"),
            replace(
                written, job_id=job, partitions=[partition], partition_count=1, partition_list=None
            ).to_bytes(),
        )
    counting = CountingStore(store)
    found = SuccessExpectations(required_partitions=("dt=00150",)).check(counting, table)
    assert found.state == "accepted", found.describe()
    assert counting.calls == {"read_range": 3}, "_SUCCESS, the list's tail (gone), the marker"

    found = SuccessExpectations(required_partitions=("dt=00150", "dt=00151", "dt=00152")).check(store, table)
    assert found.reasons == (
        "missing partitions: dt=00151, dt=00152 (not among the 100 of 200 listed inline, nor found: "
        f"its partition list {written.partition_list.path} is gone, and their own _SUCCESS do not "
        f"name job {JOB!r})",
    )
    magic = replace(written, committer="magic")
    put(store, table, magic)
    found = SuccessExpectations(required_partitions=("dt=00150",)).check(store, table)
    assert found.state == "rejected", "the magic committer writes no partition markers"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("file list of another job", "its 'fileList' names '_airflow_commit/other-job/files-"),
        ("partition list outside the records", "its 'partitionList' names 'dt=1/partitions-"),
        ("a file name outside", "its 'filenames' name 's3://elsewhere/t/part-0.parquet', which is outside"),
    ],
)
def test_a_success_naming_what_is_not_its_own_is_refused(
    store_root: StoreRoot, change: str, words: str
) -> None:
    """A `_SUCCESS` (or record) names only its own job's lists, under the destination's records
    directory, and Hadoop's `filenames` inside its directory: a check reads only its head, so a
    reference leading to another job's list, or anywhere else, is refused before it is followed."""
    store, root = store_root
    table = root.join("t")
    written = listed_job(store, table, 300, 150)
    assert written.file_list is not None and written.partition_list is not None
    if change == "file list of another job":
        forged = replace(
            written,
            file_list=replace(
                written.file_list, path=f"_airflow_commit/other-job/files-{written.file_list.sha256}.parquet"
            ),
        )
    elif change == "partition list outside the records":
        forged = replace(
            written,
            partition_list=replace(
                written.partition_list, path=f"dt=1/partitions-{written.partition_list.sha256}.parquet"
            ),
        )
    else:
        forged = replace(written, filenames=["s3://elsewhere/t/part-0.parquet"])
    put(store, table, forged)
    with pytest.raises(InvalidCommitDataError) as refused:
        SuccessExpectations().check(store, table)
    message = str(refused.value)
    assert message.startswith(f"{table.join('_SUCCESS')}: ") and words in message and "\n" not in message
