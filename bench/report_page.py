"""Scenario: the commit report page of a job with many files, and of a table with many jobs, on S3.

What the UI plugin does per request (`ui.app`): list the destination's recent commits, load the
job's report (its records, and the table's `_SUCCESS` for the file list) and render the page with
one page of files.

Many files: the baseline is the least any reader of that commit pays, reading and parsing the
table's `_SUCCESS` alone. Target: the page in under a second at 10,000 files (a check), and the
page at most 3x the baseline's time (the report's own work over the unavoidable read).

Many jobs (10, 100, 1,000 and 5,000 at `full`, on the embedded S3): the same page over a table
whose jobs are indexed (`core.records_index`: one listing of at most 20 keys) against the same
jobs without index entries (the records folder listed whole, as before the index), alternating
in each repetition; and the indexed page at N jobs against the indexed page of a table of one
page of jobs (21: the same rows and reads; informative, as the time is noisy on a shared host).
The requests per page are checks: once a table holds more than a page, the indexed page makes one
LIST and exactly the requests of the one-page table, whatever the number of jobs (counted from
the store's statistics). The jobs are clones of one real commit's records (`devtools.cloned_jobs`),
so the page reads what the committers write.
"""

from __future__ import annotations

import uuid

from airflow_commit_provider.core.committers import CommitOptions, create_committer
from airflow_commit_provider.core.formats.success import CommittedFile, SuccessData
from airflow_commit_provider.core.layout import RECORDS_DIR, RECORDS_INDEX_DIR
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import Store
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.devtools.cloned_jobs import clone_jobs
from airflow_commit_provider.report.commit_report import list_commits, load_commit
from airflow_commit_provider.report.html import render_commit
from bench.common import REQUEST_COUNTERS, BenchEnv, ScenarioResult, rotated, timer

TARGET_RATIO = 3.0
#: Seconds the page of a 10,000-file commit may take (the issue's bound).
TARGET_SECONDS = 1.0
PARTITIONS = 30
#: Commits a page lists (the UI's `RECENT_COMMITS`).
LISTED = 20
#: 2026-01-01T00:00:00Z in epoch ms: the cloned jobs are decided a minute apart from here.
EPOCH = 1_767_225_600_000


def run(env: BenchEnv) -> ScenarioResult:
    files = env.pick(tiny=1_000, small=10_000, full=10_000)
    result = ScenarioResult(
        "report_page",
        "The commit report page of a job with many files, and of a table with many jobs",
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
    jobs = env.pick(tiny=(10, 100), small=(10, 100, 1_000), full=(10, 100, 1_000, 5_000))
    result.parameters["jobs"] = list(jobs)
    result.parameters["jobs_ours"] = (
        f"the page over indexed jobs (list_commits(limit={LISTED}) reads the index)"
    )
    result.parameters["jobs_baseline"] = (
        "the page over the same jobs without index entries (the folder listed)"
    )
    with env.bucket("report-jobs") as bucket:
        store = env.s3.store()
        try:
            _measure_jobs(result, store, StorePath("s3", bucket, "jobs"), jobs, env.repeat, env.threads)
        finally:
            store.close()
    return result


def _measure_jobs(
    result: ScenarioResult, store: Store, root: StorePath, counts: tuple[int, ...], repeat: int, threads: int
) -> None:
    """Grow an indexed and an unindexed table to each count of jobs and time the page on both,
    and on an indexed table of one page of jobs, alternating."""
    tables = {
        "indexed": root.join("indexed"),
        "unindexed": root.join("unindexed"),
        "page": root.join("page"),
    }
    templates = {name: _committed_job(store, table, 1) for name, table in tables.items()}
    store.delete_tree(tables["unindexed"].join(RECORDS_DIR, RECORDS_INDEX_DIR))  # as before the index
    clone_jobs(store, tables["page"], templates["page"], _decided(1, LISTED + 1), threads=threads)
    made = 1
    for count in counts:
        new = _decided(made, count)
        clone_jobs(store, tables["indexed"], templates["indexed"], new, threads=threads)
        clone_jobs(store, tables["unindexed"], templates["unindexed"], new, indexed=False, threads=threads)
        made = count
        label = f"report page, {count:,} jobs (s3)"
        indexed = result.comparison(
            f"{label}: index vs records folder",
            ours_label="indexed",
            baseline_label="records folder listed",
            unit="s",
            group="jobs",
        )
        flat = result.comparison(
            f"{label}: indexed vs a one-page table",
            ours_label=f"{count:,} jobs",
            baseline_label=f"{LISTED + 1} jobs",
            unit="s",
            group="jobs",
        )
        lists, more = [], []
        for turn in range(repeat):
            seconds, spent = {}, {}
            for variant in rotated(tuple(tables), turn):
                table = tables[variant]
                before = store.statistics.snapshot()
                with timer() as elapsed:
                    commits = list_commits(store, table, limit=LISTED)
                    render_commit(load_commit(store, table, commits[0].job_id), commits, page_link=str)
                seconds[variant] = elapsed()
                spent[variant] = store.statistics.counters_since(before).counters
            indexed.add(seconds["indexed"], seconds["unindexed"])
            flat.add(seconds["indexed"], seconds["page"])
            for variant in ("indexed", "unindexed"):
                result.measure(f"{label}, {variant}: requests", _requests(spent[variant]), "requests")
                result.measure(
                    f"{label}, {variant}: LIST requests", spent[variant].get("op_list", 0), "requests"
                )
            lists.append(spent["indexed"].get("op_list", 0))
            more.append(_requests(spent["indexed"]) - _requests(spent["page"]))
        if count > LISTED:  # a smaller table's page exhausts the index, then lists the records folder
            listing = f"LIST requests of the indexed page, {count:,} jobs (s3)"
            result.check(listing, unit="requests", target=1).values.extend(lists)
            beyond = f"requests of the indexed page, {count:,} jobs, beyond the one-page table's (s3)"
            result.check(beyond, unit="requests", target=0).values.extend(more)


def _decided(first: int, count: int) -> dict[str, int]:
    """Job IDs `job-<n>` for n in [first, count), decided a minute apart."""
    return {f"job-{n:05d}": EPOCH + n * 60_000 for n in range(first, count)}


def _requests(counters: dict[str, int]) -> int:
    return sum(counters.get(name, 0) for name in REQUEST_COUNTERS)


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
