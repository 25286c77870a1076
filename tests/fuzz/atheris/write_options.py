"""Atheris target: a write's data-source options and the Spark conf it falls back to
(`parse_options`, then `commit_options`).

The input is NUL-separated fields: the format (its first byte picks one), then key and value
pairs. A key starting with ``spark.`` goes to the conf; a value's first byte may make it a
number, a flag or None (\\x01 int, \\x02 float, \\x03 bool, \\x04 None), as Python callers pass them.
"""

from __future__ import annotations

from support.fuzzing import COMMIT_OPTION_NAMES, accepted_or_refused, text_of, write_option_names

from airflow_commit_provider.spark.write_options import commit_options, parse_options

MAX_LEN = 512
FORMATS = ("parquet", "csv", "json", "orc")


def TestOneInput(data: bytes) -> None:
    format_field, *fields = text_of(data).split("\x00")
    format = FORMATS[ord(format_field[:1] or "\x00") % len(FORMATS)]
    options: dict[str, object] = {}
    conf: dict[str, str] = {}
    for key, value in zip(fields[::2], fields[1::2], strict=False):  # a last key without a value: none
        if key.startswith("spark."):
            conf[key] = value
        else:
            options[key] = _typed(value)
    shown = write_option_names(options, conf)
    parsed = accepted_or_refused(lambda: parse_options(options, format, conf), ValueError, *shown)
    if parsed is not None:
        accepted_or_refused(
            lambda: commit_options(parsed.committer, conf), ValueError, *shown, *COMMIT_OPTION_NAMES
        )


def _typed(value: str) -> object:
    tag, rest = value[:1], value[1:]
    try:
        if tag == "\x01":
            return int(rest)
        if tag == "\x02":
            return float(rest)
    except ValueError:
        return value
    if tag == "\x03":
        return rest == "1"
    return None if tag == "\x04" else value
