"""SuccessExpectations as the one carrier of the success checks: its JSON form and the XCom summary."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest
from support.success_files import JOB, put, success

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.success import CommittedFile
from airflow_commit_provider.core.job_records import job_record_path
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.core.success_check import SUMMARY_PARTITIONS, SuccessExpectations


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
