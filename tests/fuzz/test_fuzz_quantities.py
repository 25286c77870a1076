"""Fuzz targets: durations (cleanup ages), sizes (part and file sizes) and dates (`newer_than`)."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import example, given
from hypothesis import strategies as st
from support.fuzzing import FUZZ, accepted_or_refused, hostile_text

from airflow_commit_provider.durations import as_timedelta, parse_duration
from airflow_commit_provider.spark.write_options import parse_size
from airflow_commit_provider.success.check import parse_newer_than

numbers = st.one_of(st.integers(), st.floats(), st.integers(min_value=-(2**70), max_value=2**70))
duration_texts = st.one_of(
    hostile_text,
    st.lists(
        st.tuples(st.from_regex(r"[0-9]{1,25}(\.[0-9]{1,5})?", fullmatch=True), st.sampled_from("smhdwSMx ")),
        max_size=4,
    ).map(lambda terms: "".join(number + unit for number, unit in terms)),
)


@FUZZ
@given(duration_texts)
@example("9" * 400 + "s")
@example("99999999999w")
@example("1h\n")
@example("\u0663s")
def test_durations(text: str) -> None:
    parsed = accepted_or_refused(lambda: parse_duration(text, "older_than"), ValueError, "older_than")
    assert parsed is None or parsed >= timedelta(0)


@FUZZ
@given(st.one_of(numbers, duration_texts, st.booleans()))
@example(10**30)
@example(float("nan"))
@example(float("inf"))
def test_ages_of_any_type(value: object) -> None:
    parsed = accepted_or_refused(lambda: as_timedelta(value, "older_than"), ValueError, "older_than")  # type: ignore[arg-type]
    assert parsed is None or parsed >= timedelta(0)


@FUZZ
@given(
    st.one_of(
        numbers,
        st.booleans(),
        hostile_text,
        st.tuples(
            st.from_regex(r"\s*[0-9]{1,30}\s*", fullmatch=True),
            st.sampled_from(["", "k", "M", "gib", "tb", "x", "\n"]),
        ).map("".join),
    )
)
@example("128m\n")
@example("\u0663m")
def test_sizes(value: object) -> None:
    size = accepted_or_refused(lambda: parse_size(value, "part_size"), ValueError, "part_size")
    assert size is None or size >= 0


@FUZZ
@given(st.one_of(hostile_text, st.datetimes().map(lambda moment: moment.isoformat()), st.dates().map(str)))
def test_newer_than_dates(text: str) -> None:
    moment = accepted_or_refused(lambda: parse_newer_than(text), ValueError, "newer_than")
    assert moment is None or moment.tzinfo is not None
