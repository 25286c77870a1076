"""SuccessExpectations as the one carrier of the success checks: its JSON form and the XCom summary."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from support.success_files import JOB, put, success

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
    put(store, table, success(partitions=partitions))
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
    written = success(table="db.events")
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
