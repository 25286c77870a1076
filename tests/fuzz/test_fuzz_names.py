"""Fuzz targets: job IDs, record names, committer names, conflict modes and flags.

A job ID becomes part of every key a job writes, so what `validate_job_id` accepts must be exactly
the documented alphabet, whole: `job1\\n` was once accepted (`$` matches before a final newline)
and its job wrote keys containing the newline.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st
from support.fuzzing import FUZZ, USABLE_JOB_ID, accepted_or_refused, hostile_text

from airflow_commit_provider.core.committers.registry import (
    COMMITTERS,
    canonical_jvm_name,
    committer_class,
    committer_named_in_success,
    committer_spelling,
    resolve,
)
from airflow_commit_provider.core.layout import RECORD_KINDS, JobLayout, parse_record_name, validate_job_id
from airflow_commit_provider.core.options import CONFLICT_MODES, parse_bool, parse_conflict_mode
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.spark.jvm_committers import plan_conf

#: Crashers and near misses, kept as regression cases (issue 21).
JOB_ID_REGRESSIONS = ("job1\n", "job1\r\n", "job1\n\n", "\njob1", "job1 ", "j" * 129, "٣job", "job١", "")

job_ids = st.one_of(
    hostile_text,
    st.from_regex(USABLE_JOB_ID, fullmatch=True),
    st.tuples(st.from_regex(USABLE_JOB_ID, fullmatch=True), st.sampled_from("\n\r\t \x00/")).map("".join),
)


@FUZZ
@given(job_ids)
@example("job1\n")
@example("job\n1")
def test_job_id_is_the_documented_alphabet_whole(job_id: str) -> None:
    accepted = accepted_or_refused(lambda: validate_job_id(job_id), ValueError, repr(job_id))
    assert (accepted is not None) == bool(USABLE_JOB_ID.fullmatch(job_id)), job_id
    if accepted is not None:
        layout = JobLayout(StorePath.parse("s3://bucket/table"), accepted)
        assert all(path.key.isprintable() for path in (layout.job_dir, layout.outcome, layout.job_record))


def test_job_id_regressions_are_refused() -> None:
    for job_id in JOB_ID_REGRESSIONS:
        assert (
            accepted_or_refused(lambda job_id=job_id: validate_job_id(job_id), ValueError, repr(job_id))
            is None
        )


@FUZZ
@given(job_ids)
@example("job1\n")
def test_jvm_conf_takes_the_same_job_ids(job_id: str) -> None:
    plan = resolve("magic", "s3a://bucket/table", conflict_mode=None, allow_unsafe_v2=False, engine="hadoop")
    conf = accepted_or_refused(lambda: plan_conf(plan, job_id=job_id), ValueError, repr(job_id))
    assert (conf is not None) == bool(USABLE_JOB_ID.fullmatch(job_id))


@FUZZ
@given(
    st.one_of(hostile_text, st.tuples(job_ids, st.sampled_from(sorted(RECORD_KINDS.values()))).map("".join))
)
@example("job1\n.outcome.json")
def test_record_names_give_usable_job_ids_or_none(name: str) -> None:
    parsed = parse_record_name(name)
    if parsed is not None:
        job_id, kind = parsed
        assert validate_job_id(job_id) == job_id and name == job_id + RECORD_KINDS[kind]


committer_names = st.one_of(
    hostile_text,
    st.sampled_from(sorted(COMMITTERS)),
    st.sampled_from(sorted(COMMITTERS)).map(lambda name: name + "\n"),
    st.sampled_from(("file", "directory", "staging", "MAGIC", "FileOutputCommitter")),
)


@FUZZ
@given(committer_names)
def test_committer_names(name: str) -> None:
    found = accepted_or_refused(lambda: committer_class(name), ValueError, repr(name))
    assert found is None or found.name == committer_spelling(name)  # the registry's one spelling rule
    canonical = accepted_or_refused(lambda: canonical_jvm_name(name), ValueError, repr(name))
    assert canonical is None or canonical in COMMITTERS
    assert committer_named_in_success(name) in (None, *COMMITTERS)


@FUZZ
@given(
    st.one_of(
        hostile_text,
        st.sampled_from(CONFLICT_MODES),
        st.sampled_from(CONFLICT_MODES).map(lambda mode: mode + "\n"),
    )
)
def test_conflict_modes(mode: str) -> None:
    parsed = accepted_or_refused(lambda: parse_conflict_mode(mode), ValueError, repr(mode))
    assert parsed is None or (parsed in CONFLICT_MODES and parsed == mode)


@FUZZ
@given(st.one_of(hostile_text, st.integers(), st.none(), st.floats()))
def test_flags(value: object) -> None:
    accepted_or_refused(lambda: parse_bool(value, "skip_cleanup"), ValueError, "skip_cleanup")
