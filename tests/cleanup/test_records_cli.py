"""`airflow-commit success show/verify --job-id` against job records, and `records list/prune`.

The table is written by real committers: job-a writes day 1, then job-b day 2, so the table's
`_SUCCESS` names job-b and job-a is proven by its record under `_airflow_commit/`.
"""

from __future__ import annotations

import io
import json
import os
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from cleanup_support import Terminal, assert_one_line_error, keys_under, run
from support.committed_jobs import commit, interrupt_after_commit_point, set_up

from airflow_commit_provider.core.job_records import group_job_records
from airflow_commit_provider.core.layout import RECORDS_DIR, JobLayout
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.core.store.s3 import S3Store


@pytest.fixture
def table(tmp_path: Path) -> StorePath:
    """Day 1 by job-a, then day 2 by job-b: `_SUCCESS` names job-b."""
    dest = StorePath.parse(str(tmp_path / "table"))
    store = LocalStore()
    commit(store, dest, "job-a", ["dt=1"], files=2)
    commit(store, dest, "job-b", ["dt=2"], files=3)
    return dest


# success show / verify --job-id -----------------------------------------------------------------
def test_verify_checks_the_job_against_its_record(
    capsys: pytest.CaptureFixture[str], table: StorePath
) -> None:
    url = table.key
    record = JobLayout(table, "job-a").job_record
    code, out, _ = run(capsys, "success", "verify", url, "--job-id", "job-b", "--min-files", "3")
    assert code == 0 and out.startswith(f"OK {table.join('_SUCCESS')}: job job-b") and "job record" not in out

    code, out, _ = run(
        capsys, "success", "verify", url, "--job-id", "job-a", "--partition", "dt=1", "--min-files", "2"
    )
    assert code == 0, out
    assert out.startswith(f"OK {record}: job job-a by partitioned") and "(job record;" in out

    code, out, _ = run(
        capsys, "success", "verify", url, "--job-id", "job-a", "--partition", "dt=2", "-o", "json"
    )
    verdict = json.loads(out)
    assert (code, verdict["ok"], verdict["checked"], verdict["reasons"]) == (
        1,
        False,
        str(record),
        ["missing partitions: dt=2"],
    ), "the record is judged by every expectation, like a _SUCCESS"
    assert verdict["success"]["source"] == "job record"

    code, out, _ = run(capsys, "success", "verify", url, "--job-id", "job-zzz")
    assert code == 1 and out.startswith("FAILED")
    assert "job ID is 'job-b', expected 'job-zzz'" in out
    assert f"no record of job 'job-zzz' at {JobLayout(table, 'job-zzz').job_record}" in out


def test_show_with_a_job_id_shows_its_record(capsys: pytest.CaptureFixture[str], table: StorePath) -> None:
    code, out, _ = run(capsys, "success", "show", table.key, "--job-id", "job-a")
    assert code == 0 and out.splitlines()[0].startswith(
        f"{JobLayout(table, 'job-a').job_record} (job record;"
    )
    assert "job-a" in out and "dt=1" in out and "files        2" in out
    code, out, _ = run(capsys, "success", "show", table.key, "--job-id", "job-a", "-o", "json")
    shown = json.loads(out)
    assert (shown["job_id"], shown["source"], shown["files"], shown["partitions"]) == (
        "job-a",
        "job record",
        2,
        ["dt=1"],
    )
    code, out, _ = run(capsys, "success", "show", table.key)
    assert code == 0 and "job-b" in out, "without a job ID, the table's _SUCCESS"
    code, out, err = run(capsys, "success", "show", table.key, "--job-id", "job-zzz")
    assert (code, out) == (2, "")
    assert_one_line_error(err, "job ID is 'job-b', expected 'job-zzz'", "no record of job 'job-zzz'")


def test_absent_success_falls_back_to_the_record(
    capsys: pytest.CaptureFixture[str], table: StorePath
) -> None:
    set_up(LocalStore(), table, "job-c")  # a new job's setup removes the table's _SUCCESS
    assert not (Path(table.key) / "_SUCCESS").exists()
    code, out, _ = run(capsys, "success", "verify", table.key, "--job-id", "job-a")
    assert code == 0 and "(job record;" in out
    code, out, _ = run(capsys, "success", "verify", table.key, "--job-id", "job-c")
    assert code == 1
    assert f"no _SUCCESS at {table.join('_SUCCESS')}; no record of job 'job-c'" in out
    code, _, err = run(capsys, "success", "show", table.key, "--job-id", "job-c")
    assert code == 2 and "no record of job 'job-c'" in err


def test_a_partition_marker_names_its_own_job(capsys: pytest.CaptureFixture[str], table: StorePath) -> None:
    code, out, _ = run(
        capsys, "success", "verify", f"{table.key}/dt=1", "--job-id", "job-a", "--min-files", "2"
    )
    assert code == 0 and out.startswith(f"OK {table.join('dt=1', '_SUCCESS')}: job job-a")


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"name": "org.apache.hadoop.fs.s3a.commit.files.SuccessData/2", "jobId": "job-x"}', "name is"),
        (b"", "job record is empty"),
        (None, "this is the record of job 'job-a', expected job 'job-x'"),
    ],
    ids=["corrupt", "foreign-version", "empty", "another-job"],
)
def test_a_bad_record_is_an_error_naming_the_file(
    capsys: pytest.CaptureFixture[str], table: StorePath, payload: bytes | None, fragment: str
) -> None:
    store = LocalStore()
    record = JobLayout(table, "job-x").job_record
    if payload is None:  # job-a's record, copied to job-x's name
        payload = store.read_bytes(JobLayout(table, "job-a").job_record)
    store.write_bytes(record, payload)
    code, out, _ = run(capsys, "success", "verify", table.key, "--job-id", "job-x")
    assert code == 1 and f"unreadable: {record}: " in out and fragment in out
    code, out, err = run(capsys, "success", "show", table.key, "--job-id", "job-x")
    assert (code, out) == (2, "")
    assert_one_line_error(err, str(record), fragment)


# records list / prune ---------------------------------------------------------------------------
def _age(table: StorePath, job_id: str, days: float) -> None:
    """Set back the modification time of every file of the job (records, index entry)."""
    stamp = (datetime.now(timezone.utc) - timedelta(days=days)).timestamp()
    grouped, _ = group_job_records(LocalStore(), table.join(RECORDS_DIR))
    for _kind, status in grouped[job_id]:
        os.utime(status.path.key, (stamp, stamp))


def _records(store: LocalStore, table: StorePath) -> set[str]:
    """The records directory's files, an index entry shown as `<job>.index.json` and a job's lists
    folder (its file list, named by checksum) as `<job>.lists`."""
    shown = (
        re.sub(r"^([^/]+)/files-[0-9a-f]{64}\.parquet$", r"\1.lists", key)
        for key in keys_under(store, table.join(RECORDS_DIR))
    )
    return {re.sub(r"^_index/[0-9]{13}-(.+)\.json$", r"\1.index.json", key) for key in shown}


def test_records_list_and_prune_by_age(capsys: pytest.CaptureFixture[str], table: StorePath) -> None:
    store = LocalStore()
    interrupt_after_commit_point(store, table, "job-c")
    _age(table, "job-a", 45)
    _age(table, "job-c", 45)
    code, out, _ = run(capsys, "records", "list", table.key)
    assert code == 0
    rows = {line.split()[-1]: line.split()[0] for line in out.splitlines()[1:-1]}
    assert rows == {"job-a": "prunable", "job-b": "kept:recent", "job-c": "kept:committing"}
    assert "3 jobs with records" in out and "1 may go" in out and "1 committing" in out
    assert "1 without an index entry" in out, "job-c's driver died before writing its entry"

    code, out, _ = run(capsys, "records", "prune", table.key, "--older-than", "30d", "--dry-run")
    assert code == 0 and "Would prune the records of 1 jobs older than 30d" in out
    assert len(keys_under(store, table.join(RECORDS_DIR))) == 10, "3 jobs' lists, records and entries"

    code, out, _ = run(capsys, "records", "prune", table.key, "--yes", "-o", "json")
    report = json.loads(out)
    assert (code, report["pruned"], report["kept_recent"], report["kept_committing"]) == (0, 1, 1, 1)
    assert report["older_than_seconds"] == 30 * 86400, "records are kept 30 days unless told otherwise"
    assert (report["keep_newest"], report["max_job_duration_seconds"]) == (0, 7 * 86400)
    assert report["indexed"] == 1
    assert _records(store, table) == {
        "job-b.outcome.json",
        "job-b.index.json",
        "job-b.success.json",
        "job-b.lists",
        "job-c.outcome.json",
        "job-c.index.json",
        "job-c.lists",
    }


def test_records_prune_asks_first(
    capsys: pytest.CaptureFixture[str], table: StorePath, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = keys_under(LocalStore(), table.join(RECORDS_DIR))
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    now = ("--older-than", "0s", "--max-job-duration", "0s")
    code, _, err = run(capsys, "records", "prune", table.key, *now)
    assert code == 2 and "pass --yes" in err
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    code, out, err = run(capsys, "records", "prune", table.key, *now)
    assert code == 1 and "Nothing pruned." in err and "job-a" in out
    assert keys_under(LocalStore(), table.join(RECORDS_DIR)) == before
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    code, out, _ = run(capsys, "records", "prune", table.key, *now)
    assert code == 0 and "Pruned the records of 2 jobs" in out
    assert keys_under(LocalStore(), table.join(RECORDS_DIR)) == set()


def test_records_reindex_writes_the_entries_of_jobs_from_before_the_index(
    capsys: pytest.CaptureFixture[str], table: StorePath
) -> None:
    store = LocalStore()
    entries = {key for key in keys_under(store, table.join(RECORDS_DIR)) if key.startswith("_index/")}
    store.delete_tree(table.join(RECORDS_DIR, "_index"))  # as the jobs of an older release left them
    code, out, _ = run(capsys, "records", "reindex", table.key, "--dry-run")
    assert code == 0 and "Would index 2 jobs" in out and "(0 already indexed)" in out
    assert _records(store, table) == {
        *(f"job-{j}.{kind}.json" for j in "ab" for kind in ("outcome", "success")),
        *(f"job-{j}.lists" for j in "ab"),
    }
    code, out, _ = run(capsys, "records", "reindex", table.key, "-o", "json")
    report = json.loads(out)
    assert (code, report["indexed"], sorted(report["jobs"]), report["failed"]) == (
        0,
        2,
        ["job-a", "job-b"],
        0,
    )
    assert {
        key for key in keys_under(store, table.join(RECORDS_DIR)) if key.startswith("_index/")
    } == entries, "the very entries the drivers wrote: named by the decision time in the outcome"
    code, out, _ = run(capsys, "records", "reindex", table.key)
    assert code == 0 and "Indexed 0 jobs" in out and "(2 already indexed)" in out


@pytest.mark.s3
def test_records_prune_on_s3_respects_the_directory_boundary(
    capsys: pytest.CaptureFixture[str], s3_env: str, s3_store: S3Store, s3_bucket: str
) -> None:
    dataset1 = StorePath("s3", s3_bucket, "out/dataset1")
    dataset10 = StorePath("s3", s3_bucket, "out/dataset10")
    commit(s3_store, dataset1, "job-1")
    commit(s3_store, dataset10, "job-10")
    neighbour = keys_under(s3_store, dataset10)
    base = ("--endpoint-url", s3_env)
    code, out, _ = run(
        capsys,
        "records",
        "prune",
        f"s3://{s3_bucket}/out/dataset1",
        "--older-than",
        "1h",
        "--max-job-duration",
        "1h",
        "--yes",
        *base,
    )
    assert code == 0 and "Pruned the records of 0 jobs" in out and "kept 1 recent" in out, "young: kept"
    code, out, _ = run(
        capsys, "success", "verify", f"s3://{s3_bucket}/out/dataset1", "--job-id", "job-1", *base
    )
    assert code == 0
    code, out, _ = run(
        capsys,
        "records",
        "prune",
        f"s3://{s3_bucket}/out/dataset1",
        "--older-than",
        "0s",
        "--max-job-duration",
        "0s",
        "--yes",
        "-o",
        "json",
        *base,
    )
    assert (code, json.loads(out)["pruned"]) == (0, 1)
    assert keys_under(s3_store, dataset1.join(RECORDS_DIR)) == set()
    assert keys_under(s3_store, dataset10) == neighbour


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["records", "prune", "s3://b", "--yes"], ["empty prefix", "--allow-bucket-root"]),
        (["records", "list", "s3://b/t", "--older-than", "30"], ["--older-than", "invalid duration '30'"]),
        (["records", "purge", "s3://b/t"], ["invalid choice"]),
        (
            ["records", "prune", "s3://b/t", "--older-than", "1d", "--yes"],
            ["older_than: 1d is shorter than max_job_duration 7d", "orphaned driver"],
        ),
        (
            ["records", "list", "s3://b/t", "--keep-newest", "-1"],
            ["--keep-newest", "expected a whole number"],
        ),
    ],
)
def test_records_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], fragments: list[str]
) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert_one_line_error(err, *fragments)
