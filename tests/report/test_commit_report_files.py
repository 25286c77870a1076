"""The report's file pages (`report.commit_report.load_commit`): a page of a job's file list is read
through ranged reads (the list's footer and the row group the page lies in), never the whole list,
and the page count comes from the list's reference; older `_SUCCESS` files (every file inline) and
Hadoop's (the first 100 names) keep their pages."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import pyarrow.parquet as pq
import pytest
from support.counting import CountingStore
from support.fixtures import CommitEnv, commit_env_fixture, commit_s3_fixture, scratch_dir_fixture  # noqa: F401
from support.success_files import listed_job, size_of
from support.workload import JobRun

from airflow_commit_provider.core.formats.file_list import ROW_GROUP_ROWS, TAIL_BYTES
from airflow_commit_provider.core.job_records import load_job_record, save_job_record
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.report.commit_report import PAGE_SIZE, load_commit
from airflow_commit_provider.report.html import render_commit
from airflow_commit_provider.report.view import commit_view

FILES = 2 * ROW_GROUP_ROWS + 1_234


def committed_with_a_file_list(env: CommitEnv, files: int) -> str:
    """A real commit whose record then names a file list of `files` files, as job commit writes
    it for a job that wrote them (the report reads the record, never the table)."""
    job = JobRun.create("partitioned", env.store, env.dest, env.options())
    job.committer.setup_job()
    job.committer.commit_job([job.run_task(0, 0, ["dt=1/a.csv"]).result])
    listed = listed_job(env.store, env.dest, files, 30, job_id=job.job_id)
    record = load_job_record(env.store, env.dest, job.job_id)
    save_job_record(
        env.store,
        env.dest,
        replace(record, file_list=listed.file_list, file_count=files, total_bytes=listed.total_bytes),
    )
    return job.job_id


@pytest.mark.slow
def test_a_page_of_a_large_file_list_reads_its_footer_and_one_row_group(commit_env: CommitEnv) -> None:
    env = commit_env
    job_id = committed_with_a_file_list(env, FILES)
    record = load_job_record(env.store, env.dest, job_id)
    assert record.file_list is not None
    location = record.file_list.path_under(env.dest)
    footer = pq.ParquetFile(io.BytesIO(env.store.read_bytes(location))).metadata
    largest_group = max(footer.row_group(i).total_byte_size for i in range(footer.num_row_groups))

    counting = CountingStore(env.store)
    middle = (ROW_GROUP_ROWS + 500) // PAGE_SIZE
    report = load_commit(counting, env.dest, job_id, page=middle)
    pages = -(-FILES // PAGE_SIZE)
    assert (report.pages, report.listed_files, report.summary.files) == (pages, FILES, FILES)
    assert [f.size for f in report.files_page] == [
        size_of(n) for n in range(middle * PAGE_SIZE, (middle + 1) * PAGE_SIZE)
    ]
    assert all(f"part-{n:08d}-" in f.uri for n, f in enumerate(report.files_page, middle * PAGE_SIZE))
    assert env.dest.join("_SUCCESS") not in counting.paths_read, "the record names the list"
    assert counting.paths_read[location] <= 1 + 4, "the tail, then a few reads of one row group"
    list_bytes = counting.bytes_by_path[location]
    assert list_bytes <= TAIL_BYTES + largest_group, (
        f"{list_bytes:,} bytes of a {record.file_list.bytes:,}-byte list"
    )

    last = load_commit(env.store, env.dest, job_id, page=pages - 1)
    assert len(last.files_page) == FILES % PAGE_SIZE and last.files_page[-1].size == size_of(FILES - 1)
    assert f"page {pages} of {pages}" in commit_view(last).page_note
    assert f"of {FILES:,}" in render_commit(last, page_link=lambda n: f"?page={n}")
    with pytest.raises(ValueError, match=f"page {pages} of job '{job_id}': the file list has pages 0 to"):
        load_commit(env.store, env.dest, job_id, page=pages)


def test_a_file_list_that_is_gone_or_damaged_leaves_the_rest_of_the_report(commit_env: CommitEnv) -> None:
    env = commit_env
    job_id = committed_with_a_file_list(env, 500)
    record = load_job_record(env.store, env.dest, job_id)
    assert record.file_list is not None
    location = record.file_list.path_under(env.dest)
    data = env.store.read_bytes(location)
    env.store.write_bytes(location, data[:-10] + b"0123456789")
    damaged = load_commit(env.store, env.dest, job_id)
    assert damaged.files_page == () and damaged.tasks and damaged.phases
    assert damaged.files_missing is not None and str(location) in damaged.files_missing
    assert "\n" not in damaged.files_missing

    env.store.delete(location)
    gone = load_commit(env.store, env.dest, job_id)
    assert gone.files_page == () and gone.listed_files == 500
    assert gone.files_missing == f"no list of files: {location} is gone (pruned with the job's records?)"
    assert commit_view(gone).page_note == gone.files_missing


@pytest.mark.parametrize("commit_env", ["local"], indirect=True)
def test_hadoops_success_pages_its_first_100_names(commit_env: CommitEnv) -> None:
    """A job of Hadoop's manifest committer keeps no records: its report comes from the table's
    `_SUCCESS`, whose 100 names (percent-encoded URIs, `file:/` for local files) are its one page,
    without sizes, and the note says the job committed more."""
    env = commit_env
    names = [f"{env.dest.join(f'dt=1/part-{n:05d} x.parquet').uri()}" for n in range(100)]
    hadoop = {
        "name": "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1",
        "timestamp": 1_700_000_000_000,
        "committer": "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter",
        "jobId": "spark-job-1",
        "success": True,
        "filenames": [name.replace("file://", "file:", 1) for name in names],
        "iostatistics": {"counters": {"committer_files_committed": 250}},
    }
    env.store.write_bytes(env.dest.join("_SUCCESS"), json.dumps(hadoop).encode())
    report = load_commit(env.store, env.dest, "spark-job-1")
    assert report.from_success and report.pages == 1 and report.listed_files == 100
    assert [f.uri for f in report.files_page] == names and {f.size for f in report.files_page} == {None}
    assert "the job committed 250; its _SUCCESS names only these" in commit_view(report).page_note


def test_a_job_reported_from_its_success_pages_its_file_list(commit_env: CommitEnv) -> None:
    """Once a job's records are pruned the table's `_SUCCESS` still names it, and names its file
    list: the report pages that list while it is there."""
    env = commit_env
    job_id = committed_with_a_file_list(env, 250)
    record = load_job_record(env.store, env.dest, job_id)
    env.store.write_bytes(
        env.dest.join("_SUCCESS"), replace(record, phases=None, partition_stats=None).to_bytes()
    )
    layout = JobLayout(env.dest, job_id)
    env.store.delete_files([layout.outcome, layout.job_record])
    report = load_commit(env.store, env.dest, job_id, page=2)
    assert report.from_success and (report.pages, report.listed_files) == (3, 250)
    assert [f.size for f in report.files_page] == [size_of(n) for n in range(200, 250)]
