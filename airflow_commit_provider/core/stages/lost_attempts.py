"""Folding the attempts that lost into the job record, before cleanup deletes what they left.

Runs once the job is COMMITTED and has ended (`cleanup.end_job`: a note written later is taken
back by its attempt), so the commit itself (up to its record) makes no request more
than before: two listings (the notes, and where an attempt that died without a note left its
name: the upload records, or one level of the work directories), a read per note kept, and
a rewrite of the record only when some attempt lost. At most `KEPT_PER_TASK` attempts per task
are listed in the record, and how many more there were: a stage retried many times stays small.
"""

from __future__ import annotations

from collections import defaultdict

from airflow_commit_provider.core.formats.attempts import KILLED, LostAttempt
from airflow_commit_provider.core.formats.jsonio import read_json_bytes
from airflow_commit_provider.core.formats.outcome import JobOutcome
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.job_records import save_job_record
from airflow_commit_provider.core.parallel import parallel_map
from airflow_commit_provider.core.stages.context import JobContext, log
from airflow_commit_provider.core.stages.errors import InvalidCommitDataError
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError

#: Lost attempts the record lists per task; the rest are counted.
KEPT_PER_TASK = 4
_NOTE_SUFFIX = ".json"


def fold_lost_attempts(
    ctx: JobContext, outcome: JobOutcome, record: SuccessData, *, records_uploads: bool
) -> SuccessData:
    """The record with the job's lost attempts, saved if there were any; a record that has them
    already (a cleanup run again) is returned as it is.

    `records_uploads`: the committer's attempts record their uploads as they write (the upload
    family), which is where a killed one leaves its name; the others' each have a work directory.
    """
    if record.lost_attempts is not None:
        return record
    layout = ctx.layout
    accounted = {r.task_attempt_id for r in outcome.committed} | {
        r.adopted_from for r in outcome.committed if isinstance(r.adopted_from, str)
    }
    noted = {
        status.path.name[: -len(_NOTE_SUFFIX)]
        for status in ctx.store.list_files(layout.attempt_notes_dir)
        if status.path.parent == layout.attempt_notes_dir and status.path.name.endswith(_NOTE_SUFFIX)
    }
    # An attempt's upload records are written as it writes, so their times span its life. Only
    # each attempt's first and last time are kept: there is one record per file written.
    spans: dict[str, tuple[int, int]] = {}
    if records_uploads:
        for status in ctx.store.list_files(layout.upload_records_dir()):
            attempt, modified = status.path.parent.name, int(status.modified * 1000)
            first, last = spans.get(attempt, (modified, modified))
            spans[attempt] = (min(first, modified), max(last, modified))
        left_files = set(spans)
    else:
        left_files = set(ctx.store.list_child_dirs(layout.task_attempts_dir))
    by_task: dict[str, list[str]] = defaultdict(list)
    for attempt in (noted | left_files) - accounted:
        task = layout.task_of_attempt(attempt)
        if task is not None:
            by_task[task].append(attempt)
    if not by_task:
        return record
    kept = [attempt for task in sorted(by_task) for attempt in sorted(by_task[task])[:KEPT_PER_TASK]]

    def lost(attempt: str) -> LostAttempt:
        task = layout.task_of_attempt(attempt) or ""
        note = _read_note(ctx, attempt) if attempt in noted else None
        if note is not None:
            return note
        first, last = spans.get(attempt, (None, None))
        return LostAttempt(task, attempt, KILLED, first, last)

    record.lost_attempts = parallel_map(kept, lost, ctx.options.threads)
    record.lost_attempts_left_out = {
        task: len(attempts) - KEPT_PER_TASK
        for task, attempts in sorted(by_task.items())
        if len(attempts) > KEPT_PER_TASK
    }
    save_job_record(ctx.store, layout.destination, record)
    return record


def _read_note(ctx: JobContext, attempt: str) -> LostAttempt | None:
    """An attempt's note, if it is still there and names that attempt (else it counts as killed)."""
    path = ctx.layout.attempt_note(attempt)
    try:
        note = LostAttempt.from_note(read_json_bytes(ctx.store, path), str(path))
    except (FileNotFoundInStoreError, InvalidCommitDataError) as error:
        log.warning("job %s: ignoring the note of attempt %s: %s", ctx.job_id, attempt, error)
        return None
    if note.task_attempt_id != attempt or ctx.layout.task_of_attempt(attempt) != note.task_id:
        log.warning("job %s: %s is not the note of attempt %s", ctx.job_id, path, attempt)
        return None
    return note
