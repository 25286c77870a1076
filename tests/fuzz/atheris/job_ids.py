"""Atheris target: job IDs (`validate_job_id`) and the record names they are read back from
(`parse_record_name`). Accepted exactly when the documented alphabet matches the whole string:
`job1\\n` once passed, and its job wrote keys containing the newline."""

from __future__ import annotations

from support.fuzzing import USABLE_JOB_ID, accepted_or_refused, text_of

from airflow_commit_provider.core.layout import RECORD_KINDS, parse_record_name, validate_job_id

MAX_LEN = 256


def TestOneInput(data: bytes) -> None:
    job_id = text_of(data)
    accepted = accepted_or_refused(lambda: validate_job_id(job_id), ValueError, repr(job_id))
    assert (accepted is not None) == bool(USABLE_JOB_ID.fullmatch(job_id)), repr(job_id)
    for suffix in RECORD_KINDS.values():
        parsed = parse_record_name(job_id + suffix)
        assert (parsed is not None) == (accepted is not None), repr(job_id + suffix)
