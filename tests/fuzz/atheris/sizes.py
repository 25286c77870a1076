"""Atheris target: sizes (part and file sizes, `parse_size`) and whole-number options
(`whole_number`), as a write's options or a Spark conf give them: as text, and as the number the
text is."""

from __future__ import annotations

from functools import partial

from support.fuzzing import accepted_or_refused, text_of

from airflow_commit_provider.spark.write_options import parse_size, whole_number

MAX_LEN = 64


def TestOneInput(data: bytes) -> None:
    text = text_of(data)
    values: list[object] = [text]
    try:
        values += [float(text)]
        values += [int(text)]
    except (ValueError, OverflowError):
        pass
    for value in values:
        size = accepted_or_refused(partial(parse_size, value, "part_size"), ValueError, "part_size")
        assert size is None or size >= 0, repr(value)
        accepted_or_refused(partial(whole_number, value, "threads"), ValueError, "threads")
