"""A commit report as people read it: the texts and the timeline, once for every renderer.

The terminal (`report.terminal`), the HTML file and the UI page (`report.html`) show the same
rows; they differ only in markup, so the wording, units and timeline are decided here.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone

from airflow_commit_provider.core.formats.attempts import REFUSED, LostAttempt
from airflow_commit_provider.core.task_key import TryOrigin
from airflow_commit_provider.progress import format_size
from airflow_commit_provider.report.commit_report import CommitReport, CommitSummary
from airflow_commit_provider.report.commit_statistics import CommitStatistics

#: The columns of a destination's list of recent commits.
SUMMARY_COLUMNS = ("job", "state", "DAG run", "task", "try", "files", "size", "rows", "took", "decided")


@dataclass(frozen=True)
class Bar:
    """One row of the timeline: a task attempt or a job-commit phase, placed in percent of the
    span from the first recorded start to the last recorded end."""

    label: str
    detail: str
    offset: float
    width: float
    kind: str
    """task, adopted, lost or phase (the renderers colour by it)."""


@dataclass(frozen=True)
class Section:
    """One table of the report: `id` names it for the page's tests and links."""

    id: str
    title: str
    columns: tuple[str, ...]
    rows: list[list[str]]
    note: str = ""
    """Which page of a longer list the rows are (shown under the table)."""


@dataclass(frozen=True)
class CommitView:
    title: str
    facts: list[tuple[str, str]]
    sections: list[Section]
    """Tasks, job-commit phases, partitions, what the committer timed, counted and noted, and the
    page of files, in that order."""
    timeline: list[Bar]
    page_note: str


TASK_COLUMNS = ("task", "attempt", "outcome", "files", "size", "rows", "began", "ended")
PHASE_COLUMNS = ("phase", "began", "took", "requests")
PARTITION_COLUMNS = ("partition", "files", "size", "rows")
FILE_COLUMNS = ("file", "size")
TIMED_COLUMNS = ("operation", "count", "failures", "min", "mean", "max")


def summary_row(summary: CommitSummary) -> list[str]:
    origin = summary.origin
    return [
        summary.job_id,
        summary.state + ("" if not summary.reason else f" ({summary.reason})"),
        origin.key.run_id if origin else "-",
        _task_name(origin) if origin else "-",
        str(origin.try_number) if origin else "-",
        _number(summary.files),
        format_size(summary.bytes) if summary.bytes is not None else "-",
        _number(summary.rows),
        _millis(summary.duration_ms),
        _when(summary.decided_at),
    ]


def commit_view(report: CommitReport) -> CommitView:
    summary = report.summary
    origin = summary.origin
    facts = [
        ("destination", report.destination),
        ("job", summary.job_id),
        ("state", summary.state + (" (delivered)" if summary.delivered else "")),
        ("committer", summary.committer or "-"),
        ("conflict mode", report.conflict_mode or "-"),
        ("DAG", origin.key.dag_id if origin else "-"),
        ("DAG run", origin.key.run_id if origin else "-"),
        ("task", f"{_task_name(origin)}, try {origin.try_number}" if origin else "-"),
        ("decided", _when(summary.decided_at)),
        ("finished", _when(summary.finished_at)),
        ("took", _millis(summary.duration_ms)),
        ("files", _number(summary.files)),
        ("size", format_size(summary.bytes) if summary.bytes is not None else "-"),
        ("rows", _number(summary.rows)),
    ]
    if summary.reason:
        facts.append(("abort reason", summary.reason))
    hostname = (report.success or {}).get("hostname")
    if hostname:
        facts.append(("committed on", str(hostname)))
    if report.from_success:
        facts.append(
            ("reported from", "its _SUCCESS alone: the job left no records (Hadoop's committers keep none)")
        )
    starts = [t.started_at for t in report.tasks] + [a.started_at for a in report.lost_attempts]
    first = min((start for start in starts if start is not None), default=None)
    tasks = _task_rows(report, first)
    phases = [
        [phase.name, _offset(phase.start, first), _millis(phase.end - phase.start), _requests(phase.requests)]
        for phase in report.phases
    ]
    partitions = [
        [p.partition, str(p.files), format_size(p.bytes), _number(p.rows)] for p in report.partitions
    ]
    files = [[listed.uri, format_size(listed.size)] for listed in report.files_page]
    title = f"Commit {summary.job_id} ({summary.state})"
    sections = [
        Section(
            "tasks", "Tasks (every attempt: the one committed, then those that lost)", TASK_COLUMNS, tasks
        ),
        Section("phases", "Job commit phases", PHASE_COLUMNS, phases),
        Section("partitions", "Partitions", PARTITION_COLUMNS, partitions, _partition_note(report)),
        *_statistics_sections(report.statistics),
        Section("files", "Files", FILE_COLUMNS, files),
    ]
    return CommitView(title, facts, sections, _timeline(report), _page_note(report))


def _page_note(report: CommitReport) -> str:
    if report.files_missing:
        return report.files_missing
    if not report.files_page:
        return "no files"
    first = report.page * report.page_size + 1
    note = (
        f"files {first}-{first + len(report.files_page) - 1} of {report.listed_files:,}, "
        f"page {report.page + 1} of {report.pages}"
    )
    committed = report.summary.files
    if committed is not None and committed > report.listed_files:
        note += f" (the job committed {committed:,}; its _SUCCESS names only these)"
    return note


def _partition_note(report: CommitReport) -> str:
    """Which partitions the page shows, when the job wrote more than one page of them."""
    if report.partition_pages <= 1:
        return ""
    first = report.partition_page * report.page_size + 1
    last = first + len(report.partitions) - 1
    return (
        f"partitions {first:,}-{last:,} of {report.partition_count:,}, "
        f"page {report.partition_page + 1} of {report.partition_pages}"
    )


def _statistics_sections(statistics: CommitStatistics | None) -> list[Section]:
    """What the committer timed, counted and noted (Hadoop's `iostatistics` and `diagnostics`)."""
    if statistics is None:
        return []
    timed = [
        [
            op.name,
            f"{op.count:,}",
            f"{op.failures:,}",
            _millis(op.min_ms),
            "-" if op.mean_ms is None else f"{op.mean_ms:.1f} ms",
            _millis(op.max_ms),
        ]
        for op in statistics.timed
    ]
    return [
        Section("timed", "Timed by the committer (durations of stages and requests)", TIMED_COLUMNS, timed),
        Section("counters", "Counted by the committer", ("counter", "value"), _pairs(statistics.counters)),
        Section("gauges", "Gauges", ("gauge", "value"), _pairs(statistics.gauges)),
        Section("diagnostics", "Diagnostics", ("name", "value"), [list(d) for d in statistics.diagnostics]),
    ]


def _pairs(values: tuple[tuple[str, int], ...]) -> list[list[str]]:
    return [[name, f"{value:,}"] for name, value in values]


def _task_rows(report: CommitReport, first: int | None) -> list[list[str]]:
    """Each task's committed attempt, then the attempts of it that lost (by start), then how many
    more the record did not keep."""
    committed = {task.task_id: task for task in report.tasks}
    lost: dict[str, list[LostAttempt]] = defaultdict(list)
    for attempt in report.lost_attempts:
        lost[attempt.task_id].append(attempt)
    rows = []
    for task_id in sorted(committed.keys() | lost.keys() | report.lost_attempts_left_out.keys()):
        task = committed.get(task_id)
        if task is not None:
            rows.append(
                [
                    task_id,
                    task.attempt_id + (f" (adopted by {task.adopted_by})" if task.adopted_by else ""),
                    task.outcome,
                    str(task.files),
                    format_size(task.bytes),
                    _number(task.rows),
                    _offset(task.started_at, first),
                    _offset(task.committed_at, first),
                ]
            )
        for attempt in sorted(lost[task_id], key=lambda a: (a.started_at or 0, a.task_attempt_id)):
            rows.append(
                [
                    task_id,
                    attempt.task_attempt_id + _winner_note(attempt),
                    attempt.outcome,
                    "-",
                    "-",
                    "-",
                    _offset(attempt.started_at, first),
                    _offset(attempt.ended_at, first),
                ]
            )
        if task_id in report.lost_attempts_left_out:
            more = report.lost_attempts_left_out[task_id]
            label = f"{more:,} more lost attempt{'s' if more > 1 else ''}"
            rows.append([task_id, label, "not kept", "-", "-", "-", "-", "-"])
    return rows


def _winner_note(attempt: LostAttempt) -> str:
    if attempt.winner is None:
        return ""
    verb = "had committed" if attempt.outcome == REFUSED else "committed"
    return f" ({attempt.winner} {verb})"


_Span = tuple[str, str, int, int, str]
"""A bar before it is placed: label, detail, start, end, kind."""


def _timeline(report: CommitReport) -> list[Bar]:
    """Task lanes, each task's committed attempt followed by those that lost (labelled with how, as
    the colour alone would not say), then the job-commit phases."""
    lanes: list[tuple[str, int, int, _Span]] = [
        (
            task.task_id,
            0,
            0,
            (
                task.task_id,
                task.attempt_id,
                task.started_at,
                task.committed_at,
                "adopted" if task.adopted_by else "task",
            ),
        )
        for task in report.tasks
        if task.started_at is not None and task.committed_at is not None
    ] + [
        (
            a.task_id,
            1,
            a.started_at,
            (f"{a.outcome}: {a.task_id}", a.task_attempt_id, a.started_at, a.ended_at, "lost"),
        )
        for a in report.lost_attempts
        if a.started_at is not None and a.ended_at is not None
    ]
    spans = [span for *_, span in sorted(lanes, key=lambda lane: lane[:3])]
    spans += [
        (phase.name, _requests(phase.requests), phase.start, phase.end, "phase") for phase in report.phases
    ]
    if not spans:
        return []
    first = min(start for _, _, start, _, _ in spans)
    total = max(max(end for _, _, _, end, _ in spans) - first, 1)
    return [
        Bar(label, detail, 100 * (start - first) / total, max(100 * (end - start) / total, 0.5), kind)
        for label, detail, start, end, kind in spans
    ]


def _task_name(origin: TryOrigin | None) -> str:
    if origin is None:
        return "-"
    key = origin.key
    return key.task_id if key.map_index < 0 else f"{key.task_id}[{key.map_index}]"


def _number(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _millis(value: int | None) -> str:
    if value is None:
        return "-"
    return f"{value} ms" if value < 1000 else f"{value / 1000:.1f} s"


def _when(epoch_millis: int | None) -> str:
    if not epoch_millis:
        return "-"
    moment = datetime.fromtimestamp(epoch_millis / 1000, tz=timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _offset(epoch_millis: int | None, first: int | None) -> str:
    """A time as the offset from the first task's start: a timeline reads in relative times."""
    if epoch_millis is None:
        return "-"
    if first is None:
        return _when(epoch_millis)
    return "+" + _millis(epoch_millis - first)


def _requests(requests: dict[str, int]) -> str:
    return ", ".join(f"{count} {kind}" for kind, count in requests.items()) or "none"
