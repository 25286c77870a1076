"""The commit report (`report.commit_report`, `airflow-commit report`): what it says about real
jobs run by the real committers, on both stores, read from the jobs' records alone."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console
from support.committed_jobs import interrupt_after_commit_point
from support.fixtures import CommitEnv, commit_env_fixture, commit_s3_fixture, scratch_dir_fixture  # noqa: F401
from support.workload import JobRun

from airflow_commit_provider.cli import main
from airflow_commit_provider.core.formats.attempts import LostAttempt
from airflow_commit_provider.core.formats.success import CommittedFile, SuccessData
from airflow_commit_provider.core.job_records import load_job_record, save_job_record
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.task_key import TaskKey, TryOrigin
from airflow_commit_provider.report.commit_report import list_commit_page, list_commits, load_commit
from airflow_commit_provider.report.html import render_commit
from airflow_commit_provider.report.terminal import print_commit
from airflow_commit_provider.report.view import commit_view

ORIGIN = TryOrigin(TaskKey("daily_ingest", "write_events", "scheduled__2024-01-02T00:00:00+00:00"), 2)


def committed_with_an_adopted_attempt(env: CommitEnv) -> tuple[JobRun, dict[str, bytes]]:
    """Two tasks into two days; task 1's second attempt (a speculative copy) finds the first one
    committed and adopts it, as Spark's driver would then report."""
    job = JobRun.create("partitioned", env.store, env.dest, env.options(origin=ORIGIN))
    job.committer.setup_job()
    first = job.run_task(0, 0, ["dt=2024-01-01/a.csv", "dt=2024-01-02/b.csv"])
    original = job.run_task(1, 0, ["dt=2024-01-02/c.csv"])
    speculative = job.attempt(1, 1, ["dt=2024-01-02/c.csv"])
    adopted = job.commit(speculative)
    assert adopted.adopted_from == speculative.handle.task_attempt_id, (
        "the copy did not adopt the first commit"
    )
    job.committer.commit_job([first.result, adopted])
    return job, {**first.files, **original.files}


def test_a_committed_job_reports_tasks_phases_and_partitions(commit_env: CommitEnv) -> None:
    env = commit_env
    job, files = committed_with_an_adopted_attempt(env)
    report = load_commit(env.store, env.dest, job.job_id)
    summary = report.summary
    assert (summary.state, summary.committer, summary.origin, summary.reason) == (
        "committed",
        "partitioned",
        ORIGIN,
        "",
    )
    assert (summary.files, summary.bytes) == (len(files), sum(len(data) for data in files.values()))
    assert summary.started_at is not None and summary.finished_at is not None
    assert summary.decided_at is not None and summary.started_at <= summary.decided_at <= summary.finished_at

    layout = JobLayout(env.dest, job.job_id)
    by_task = {task.task_id: task for task in report.tasks}
    assert by_task[layout.task_id(0)].outcome == "committed"
    adopted = by_task[layout.task_id(1)]
    assert (adopted.outcome, adopted.attempt_id, adopted.adopted_by) == (
        "adopted",
        layout.task_attempt_id(1, 0),
        layout.task_attempt_id(1, 1),
    )
    assert [(t.files, t.bytes) for t in report.tasks] == [
        (2, len(files["dt=2024-01-01/a.csv"]) + len(files["dt=2024-01-02/b.csv"])),
        (1, len(files["dt=2024-01-02/c.csv"])),
    ]

    names = [phase.name for phase in report.phases]
    assert names[0] == "load manifests" and "commit point" in names and names[-1] == "write _SUCCESS", names
    assert all(phase.start <= phase.end for phase in report.phases)
    committing = next(phase for phase in report.phases if phase.name == "commit files")
    assert committing.requests, "the phase that made the files visible counted no store request"
    assert report.phases[0].start >= max(t.committed_at or 0 for t in report.tasks)

    assert [(p.partition, p.files, p.rows) for p in report.partitions] == [
        ("dt=2024-01-01", 1, None),
        ("dt=2024-01-02", 2, None),
    ]
    assert sorted(f.uri for f in report.files_page) == sorted(env.dest.join(name).uri() for name in files)
    assert report.success is not None and report.success["job_id"] == job.job_id

    listed = list_commits(env.store, env.dest)
    assert [c.job_id for c in listed] == [job.job_id] and listed[0] == summary

    # Nothing lost (the copy's adoption is in the driver's list): the record is the one written at
    # the commit, without lost attempts, as records were before they were kept, and still loads.
    record = env.store.read_bytes(layout.job_record)
    assert b"lostAttempts" not in record and report.lost_attempts == ()


def test_an_aborted_and_a_committing_job_say_so(commit_env: CommitEnv) -> None:
    env = commit_env
    aborted = JobRun.create("partitioned", env.store, env.dest, env.options(origin=ORIGIN))
    aborted.committer.setup_job()
    aborted.run_task(0, 0, ["dt=1/a.csv"])
    assert aborted.committer.abort_job("killed: the Airflow task timed out") is None
    report = load_commit(env.store, env.dest, aborted.job_id)
    assert (report.summary.state, report.summary.reason) == ("aborted", "killed: the Airflow task timed out")
    assert (report.tasks, report.phases, report.partitions, report.files_page) == ((), (), (), ())

    interrupt_after_commit_point(env.store, env.dest, "committing-job")
    committing = load_commit(env.store, env.dest, "committing-job").summary
    assert (committing.state, committing.files, committing.finished_at) == ("committing", None, None)

    listed = {c.job_id: c.state for c in list_commits(env.store, env.dest)}
    assert listed == {aborted.job_id: "aborted", "committing-job": "committing"}


def test_an_older_records_pages_come_from_success(commit_env: CommitEnv) -> None:
    """10,000 files of a job from before the file list (its record keeps totals only, its
    `_SUCCESS` lists every file inline): the report pages them out of the table's `_SUCCESS`,
    never listing the table; once a later job has rewritten `_SUCCESS`, the report says so and
    keeps the record's totals. (A job's own file list: tests/report/test_commit_report_files.py.)"""
    env = commit_env
    job = JobRun.create("partitioned", env.store, env.dest, env.options())
    job.committer.setup_job()
    job.committer.commit_job([job.run_task(0, 0, ["dt=1/a.csv"]).result])
    save_job_record(
        env.store, env.dest, replace(load_job_record(env.store, env.dest, job.job_id), file_list=None)
    )
    marker = env.dest.join("_SUCCESS")
    success = SuccessData.from_bytes(env.store.read_bytes(marker), str(marker))
    success.files = [CommittedFile(env.dest.join(f"dt=1/f-{n:05d}.csv").uri(), n) for n in range(10_000)]
    success.file_count, success.file_list = len(success.files), None
    env.store.write_bytes(marker, success.to_bytes())

    last = load_commit(env.store, env.dest, job.job_id, page=99)
    assert (last.pages, len(last.files_page), last.files_page[-1].size) == (100, 100, 9_999)
    page = render_commit(last, page_link=lambda n: f"?page={n}")
    assert page.count('href="?page=') == 5 and "files 9901-10000 of 10,000, page 100 of 100" in page
    with pytest.raises(ValueError, match=f"page 100 of job '{job.job_id}'"):
        load_commit(env.store, env.dest, job.job_id, page=100)

    later = JobRun.create("partitioned", env.store, env.dest, env.options())
    later.committer.setup_job()
    later.committer.commit_job([later.run_task(0, 0, ["dt=2/b.csv"]).result])
    earlier = load_commit(env.store, env.dest, job.job_id)
    assert earlier.files_page == () and f"lists the files of job {later.job_id}" in str(earlier.files_missing)
    assert [(p.partition, p.files) for p in earlier.partitions] == [("dt=1", 1)]


@pytest.mark.parametrize("commit_env", ["local"], indirect=True)
def test_a_job_of_ten_thousand_partitions_shows_one_small_page_of_them(
    commit_env: CommitEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real job writes 10,000 partitions; each page of the partition table holds 100 of them, in
    path order, with what each received, and the HTML page stays small."""
    env = commit_env
    job = JobRun.create("partitioned", env.store, env.dest, env.options())
    job.committer.setup_job()
    names = [f"dt=2024-01-01/shard={n:05d}/part-0.csv" for n in reversed(range(10_000))]
    task = job.run_task(0, 0, names)
    job.committer.commit_job([task.result])
    partitions = sorted(name.rsplit("/", 1)[0] for name in names)
    sizes = {name.rsplit("/", 1)[0]: len(data) for name, data in task.files.items()}

    report = load_commit(env.store, env.dest, job.job_id, partition_page=37)
    assert (report.partition_count, report.partition_pages, report.partition_page) == (10_000, 100, 37)
    assert [(p.partition, p.files, p.bytes) for p in report.partitions] == [
        (partition, 1, sizes[partition]) for partition in partitions[3700:3800]
    ]
    html = render_commit(report, partition_page_link=lambda n: f"?partition_page={n + 1}")
    table = html[html.index('data-testid="partitions"') : html.index('data-testid="partitions-pages"')]
    assert table.count("<tr>") == 1 + 100, "the header and one page of partitions"
    assert "partitions 3,701-3,800 of 10,000, page 38 of 100" in html
    assert html.count('href="?partition_page=') == 10, "five pages either side of the current one"
    assert len(html.encode()) < 64 * 1024, "a page of a 10,000-partition job is small"

    assert main(["report", env.dest.uri(), "--job-id", job.job_id, "--partition-page", "100"]) == 0
    printed = capsys.readouterr().out
    assert "partitions 9,901-10,000 of 10,000, page 100 of 100" in printed and partitions[-1] in printed
    with pytest.raises(
        ValueError, match=f"page 100 of job '{job.job_id}': the partition table has pages 0 to 99"
    ):
        load_commit(env.store, env.dest, job.job_id, partition_page=100)


def test_a_job_without_records_is_reported_from_its_success(commit_env: CommitEnv) -> None:
    """Once a job's records are gone (pruned; Hadoop's committers never write any), the table's
    `_SUCCESS` still names it: it is listed first and reported from there, sizes included; a job
    neither knows is refused naming both."""
    env = commit_env
    earlier = JobRun.create("partitioned", env.store, env.dest, env.options())
    earlier.committer.setup_job()
    earlier.committer.commit_job([earlier.run_task(0, 0, ["dt=1/a.csv"]).result])
    later = JobRun.create("partitioned", env.store, env.dest, env.options())
    later.committer.setup_job()
    task = later.run_task(0, 0, ["dt=2/b.csv", "dt=3/c.csv"])
    later.committer.commit_job([task.result])
    layout = JobLayout(env.dest, later.job_id)
    env.store.delete_files([layout.outcome, layout.job_record])

    listed = list_commits(env.store, env.dest)
    assert [(c.job_id, c.state) for c in listed] == [
        (later.job_id, "committed"),
        (earlier.job_id, "committed"),
    ]
    report = load_commit(env.store, env.dest, later.job_id)
    assert report.from_success and report.summary == listed[0] and report.tasks == ()
    assert sorted((f.uri, f.size) for f in report.files_page) == sorted(
        (env.dest.join(name).uri(), len(data)) for name, data in task.files.items()
    )
    assert (report.summary.files, report.summary.bytes) == (2, sum(len(data) for data in task.files.values()))
    assert not load_commit(env.store, env.dest, earlier.job_id).from_success
    with pytest.raises(ValueError, match=f"no records of job 'gone', and .* names job '{later.job_id}'"):
        load_commit(env.store, env.dest, "gone")


def committed_with_lost_attempts(env: CommitEnv) -> tuple[JobRun, dict[str, tuple[str, str | None]]]:
    """Four tasks driven as Spark drives them, each losing attempts another way; the magic
    committer's attempts record their uploads as they write, so a killed one leaves those behind.
    Returns the job and, per lost attempt, its outcome and the attempt it lost to."""
    job = JobRun.create("magic", env.store, env.dest, env.options(origin=ORIGIN))
    job.committer.setup_job()
    ids = job.committer.layout.task_attempt_id
    # task 0 fails five times (Spark aborts each attempt) before its sixth attempt commits
    for number in range(5):
        job.attempt(0, number, ["dt=1/a.csv"]).handle.abort_task()
    retried = job.run_task(0, 5, ["dt=1/a.csv"])
    # task 1: a speculative copy commits first; Spark then kills the original, which it aborts
    original = job.attempt(1, 0, ["dt=1/b.csv"])
    copy = job.run_task(1, 1, ["dt=1/b.csv"])
    original.handle.abort_task()
    # task 2: a duplicate's commit is refused, attempt 0 having committed first (it adopts that
    # commit); Spark's commit coordinator passes attempt 0's result to the driver
    first = job.run_task(2, 0, ["dt=2/c.csv"])
    assert job.commit(job.attempt(2, 1, ["dt=2/c.csv"])).adopted_from == ids(2, 1)
    # task 3: attempt 0's executor dies after writing (no commit, no abort); the retry commits
    job.attempt(3, 0, ["dt=2/d.csv"])
    rerun = job.run_task(3, 1, ["dt=2/d.csv"])
    job.committer.commit_job([retried.result, copy.result, first.result, rerun.result])
    lost: dict[str, tuple[str, str | None]] = {ids(0, n): ("failed", None) for n in range(4)}
    lost[ids(1, 0)] = ("speculative lost", ids(1, 1))
    lost[ids(2, 1)] = ("refused", ids(2, 0))
    lost[ids(3, 0)] = ("killed", None)
    return job, lost


def test_attempts_that_lost_are_recorded_and_shown(commit_env: CommitEnv) -> None:
    """Job commit folds each attempt that lost into the job record (at most four per task, then a
    count) before its cleanup removes their notes; the page and the terminal name each."""
    env = commit_env
    job, lost = committed_with_lost_attempts(env)
    layout = job.committer.layout
    record = load_job_record(env.store, env.dest, job.job_id)
    assert record.lost_attempts is not None
    assert {a.task_attempt_id: (a.outcome, a.winner) for a in record.lost_attempts} == lost
    assert record.lost_attempts_left_out == {layout.task_id(0): 1}
    timed = [a for a in record.lost_attempts if a.outcome != "killed"]
    assert all(a.started_at is not None and a.started_at <= (a.ended_at or 0) for a in timed)
    killed = next(a for a in record.lost_attempts if a.outcome == "killed")
    assert killed.ended_at is not None, "the killed attempt's upload records gave no time"
    left = [f.path.uri() for f in env.store.list_files(env.dest) if layout.job_dir.uri() in f.path.uri()]
    assert left == [], "cleanup left the job's directory (the attempts' notes) behind"

    report = load_commit(env.store, env.dest, job.job_id)
    page = render_commit(report)
    tasks_table = page[page.index('data-testid="tasks"') : page.index('data-testid="phases"')]
    for attempt, (outcome, winner) in lost.items():
        row = next(r for r in tasks_table.split("<tr>") if attempt in r)
        assert f"<td>{outcome}</td>" in row and (winner is None or winner in row), row
    assert "1 more lost attempt</td><td>not kept</td>" in tasks_table
    assert page.count('class="bar lost"') == len(lost), "a lost attempt is missing from the timeline"
    assert page.count('class="bar task"') == 4
    console = Console(record=True, width=250)
    print_commit(console, report)
    printed = console.export_text()
    assert all(attempt in printed for attempt in lost)
    assert all(outcome in printed for outcome in ("failed", "speculative lost", "refused", "killed"))


@pytest.mark.parametrize("commit_env", ["local"], indirect=True)
def test_a_killed_attempt_is_known_by_its_work_directory(commit_env: CommitEnv) -> None:
    """A committer whose attempts write into a work directory each (manifest, local only): one
    left by an attempt that neither committed nor aborted names it killed, its times unknown."""
    env = commit_env
    job = JobRun.create("manifest", env.store, env.dest, env.options())
    job.committer.setup_job()
    killed = job.attempt(0, 0, ["dt=1/a.csv"])
    job.committer.commit_job([job.run_task(0, 1, ["dt=1/a.csv"]).result])
    task = job.committer.layout.task_id(0)
    assert load_job_record(env.store, env.dest, job.job_id).lost_attempts == [
        LostAttempt(task, killed.attempt_id, "killed")
    ]
    report = load_commit(env.store, env.dest, job.job_id)
    assert [row[1:3] for row in commit_view(report).sections[0].rows] == [
        [job.committer.layout.task_attempt_id(0, 1), "committed"],
        [killed.attempt_id, "killed"],
    ]


@pytest.mark.parametrize("commit_env", ["local"], indirect=True)
def test_an_attempt_aborted_after_its_own_commit_failed(commit_env: CommitEnv) -> None:
    """file-v1 (the last attempt wins): attempt 0 commits, but its reply is lost and Spark aborts it;
    the retry's commit replaces it. The record calls attempt 0 failed, not a lost race to itself."""
    env = commit_env
    job = JobRun.create("file-v1", env.store, env.dest, env.options())
    job.committer.setup_job()
    first = job.run_task(0, 0, ["a.csv"])
    first.handle.abort_task()
    job.committer.commit_job([job.run_task(0, 1, ["a.csv"]).result])
    lost = load_job_record(env.store, env.dest, job.job_id).lost_attempts or []
    assert [(a.task_attempt_id, a.outcome, a.winner) for a in lost] == [(first.attempt_id, "failed", None)]


def cli_store_arguments(
    env: CommitEnv, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    """What the CLI needs to reach the test's store: on S3, boto3's environment and the endpoint."""
    if env.kind == "local":
        return []
    embedded = request.getfixturevalue("embedded_s3")
    for name, value in embedded.env().items():
        monkeypatch.setenv(name, value)
    return ["--endpoint-url", embedded.endpoint_url]


def test_the_cli_prints_the_report_and_writes_one_html_file(
    commit_env: CommitEnv,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = commit_env
    store_arguments = cli_store_arguments(env, request, monkeypatch)
    job = JobRun.create("partitioned", env.store, env.dest, env.options(origin=ORIGIN))
    job.committer.setup_job()
    hostile = 'dt=<script>alert("x")</script>'
    task = job.run_task(0, 0, [f"{hostile}/a.csv"])
    job.committer.commit_job([task.result])
    page = tmp_path / "commit.html"

    assert main(["report", env.dest.uri(), "--html", str(page), *store_arguments]) == 0
    printed = capsys.readouterr().out
    assert job.job_id in printed and "write_events, try 2" in printed and "commit files" in printed

    html = page.read_text(encoding="utf-8")
    assert "<script>" not in html and "&lt;script&gt;" in html, "a partition name reached the page unescaped"
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), "the page loads something from elsewhere"
    assert f"Commit {job.job_id} (committed)" in html and 'data-testid="phases"' in html


@pytest.mark.parametrize("commit_env", ["local"], indirect=True)
def test_the_cli_names_what_is_missing(commit_env: CommitEnv, capsys: pytest.CaptureFixture[str]) -> None:
    env = commit_env
    assert main(["report", env.dest.uri()]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "_airflow_commit: no job records" in error
    # --job, the first spelling, still works: argparse takes it for --job-id, of which it is a prefix.
    for spelling in ("--job-id", "--job"):
        assert main(["report", env.dest.uri(), spelling, "job-that-never-ran"]) == 2
        assert "no records of job 'job-that-never-ran'" in capsys.readouterr().err
    assert main(["report", "--help"]) == 0
    usage = capsys.readouterr().out
    assert "--job-id JOB_ID" in usage and "--job " not in usage and "DESTINATION" in usage


def test_the_cli_and_the_page_list_older_commits_after_a_cursor(
    commit_env: CommitEnv,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = commit_env
    store_arguments = cli_store_arguments(env, request, monkeypatch)
    jobs = []
    for day in range(3):
        job = JobRun.create("partitioned", env.store, env.dest, env.options())
        job.committer.setup_job()
        job.committer.commit_job([job.run_task(0, 0, [f"dt={day}/a.csv"]).result])
        jobs.append(job.job_id)

    assert main(["report", env.dest.uri(), "--limit", "2", "-o", "json", *store_arguments]) == 0
    first = json.loads(capsys.readouterr().out)
    assert [c["job_id"] for c in first["commits"]] == [jobs[2], jobs[1]] and first["after"]
    argv = ["report", env.dest.uri(), "--limit", "2", "--after", first["after"], *store_arguments]
    assert main([*argv, "-o", "json"]) == 0
    older = json.loads(capsys.readouterr().out)
    assert ([c["job_id"] for c in older["commits"]], older["after"]) == ([jobs[0]], None)
    assert older["report"]["summary"]["job_id"] == jobs[0], "the first commit of the page is reported"
    assert main(["report", env.dest.uri(), "--limit", "2", *store_arguments]) == 0
    assert f"older commits: --after {first['after']}" in capsys.readouterr().out

    assert main(["report", env.dest.uri(), "--after", "not-a-cursor", *store_arguments]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "after: 'not-a-cursor' is not a cursor of a list of commits" in error

    page = list_commit_page(env.store, env.dest, limit=2)
    html = render_commit(
        load_commit(env.store, env.dest, jobs[2]), page.commits, older_link="?commits_after=x"
    )
    assert 'data-testid="older-commits"' in html and 'href="?commits_after=x"' in html
    assert 'data-testid="older-commits"' not in render_commit(
        load_commit(env.store, env.dest, jobs[2]), page.commits
    )
