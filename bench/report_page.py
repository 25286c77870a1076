"""Scenario: the commit report page of a job with many files, on the local filesystem and S3.

What the UI plugin does per request (`ui.app`): list the destination's recent commits, load the
job's report (its records, and the table's `_SUCCESS` for the file list) and render the page with
one page of files. The baseline is the least any reader of that commit pays: reading and parsing
the table's `_SUCCESS` alone. Target: the page in under a second at 10,000 files (a check), and
the page at most 3x the baseline's time (the report's own work over the unavoidable read).
"""

from __future__ import annotations

import uuid

from airflow_commit_provider.core.commit_report import list_commits, load_commit
from airflow_commit_provider.core.committers import CommitOptions, create_committer
from airflow_commit_provider.core.formats.success import CommittedFile, SuccessData
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import Store
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.report.html import render_commit
from bench.common import BenchEnv, ScenarioResult, rotated, timer

TARGET_RATIO = 3.0
#: Seconds the page of a 10,000-file commit may take (the issue's bound).
TARGET_SECONDS = 1.0
PARTITIONS = 30


def run(env: BenchEnv) -> ScenarioResult:
    files = env.pick(tiny=1_000, small=10_000, full=10_000)
    result = ScenarioResult(
        "report_page",
        "The commit report page of a job with many files",
        env.size,
        env.repeat,
        parameters={
            "files": files,
            "partitions": PARTITIONS,
            "ours": "list_commits + load_commit + render_commit (what the UI page does)",
            "baseline": "read and parse the table's _SUCCESS",
        },
    )
    local_root = StorePath.parse(str(env.work_dir / "report-page"))
    _measure(result, "local", LocalStore(), local_root.join("table"), files, env.repeat)
    with env.bucket("report") as bucket:
        store = env.s3.store()
        try:
            _measure(result, "s3", store, StorePath("s3", bucket, "table"), files, env.repeat)
        finally:
            store.close()
    return result


def _measure(
    result: ScenarioResult, where: str, store: Store, table: StorePath, files: int, repeat: int
) -> None:
    job_id = _committed_job(store, table, files)
    comparison = result.comparison(
        f"report page, {files:,} files ({where})",
        ours_label="the page",
        baseline_label="_SUCCESS read and parsed",
        unit="s",
        target=TARGET_RATIO,
    )
    check = result.check(f"report page at {files:,} files ({where})", unit="s", target=TARGET_SECONDS)
    marker = table.join("_SUCCESS")
    for turn in range(repeat):
        seconds = {}
        for variant in rotated(("page", "success"), turn):
            with timer() as elapsed:
                if variant == "page":
                    commits = list_commits(store, table)
                    render_commit(load_commit(store, table, job_id), commits, page_link=str)
                else:
                    SuccessData.from_bytes(store.read_bytes(marker), str(marker))
            seconds[variant] = elapsed()
        comparison.add(seconds["page"], seconds["success"])
        check.values.append(seconds["page"])


def _committed_job(store: Store, table: StorePath, files: int) -> str:
    """A real commit of one file, whose `_SUCCESS` is then made to list `files` files across
    the partitions (the report reads `_SUCCESS` for the file list; nothing lists the table)."""
    job_id = uuid.uuid4().hex
    job = create_committer("partitioned", store, table, job_id, CommitOptions(threads=4))
    job.setup_job()
    attempt = job.task_attempt(0, 0)
    with attempt.create_file("dt=0/part-00000.parquet") as stream:
        stream.write(b"x" * 1024)
    job.commit_job([attempt.commit_task(rows=1)])
    marker = table.join("_SUCCESS")
    success = SuccessData.from_bytes(store.read_bytes(marker), str(marker))
    success.files = [
        CommittedFile(table.join(f"dt={n % PARTITIONS}/part-{n:05d}-{job_id}.parquet").uri(), 1024 + n)
        for n in range(files)
    ]
    success.file_count = files
    store.write_bytes(marker, success.to_bytes())
    return job_id
