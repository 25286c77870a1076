"""Atheris target: the first bytes of a `_SUCCESS` as a sensor poke reads them
(`SuccessData.from_prefix`): the fields complete in them, or an InvalidCommitDataError naming the
file. The input's first two bytes say where the prefix ends; what it reads is what the whole file
says, never another value (a member named twice aside: JSON leaves that to the reader)."""

from __future__ import annotations

import json

from support.fuzzing import accepted_or_refused

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.json_prefix import FilePrefix, parse_prefix
from airflow_commit_provider.core.formats.success import SuccessData

MAX_LEN = 4096
SOURCE = "s3://bucket/table/_SUCCESS"


def _members_once(data: bytes) -> dict[str, object] | None:
    pairs: list[list[tuple[str, object]]] = []
    try:
        json.loads(data, object_pairs_hook=lambda found: pairs.append(found) or dict(found))
    except (ValueError, RecursionError):
        return None
    names = [name for name, _ in pairs[-1]] if pairs else []
    return dict(pairs[-1]) if pairs and len(names) == len(set(names)) else None


def TestOneInput(data: bytes) -> None:
    document = data[2:]
    cut = int.from_bytes(data[:2], "big") % (len(document) + 1)
    prefix = FilePrefix(document[:cut], whole=False)
    parsed = accepted_or_refused(lambda: parse_prefix(prefix, SOURCE), InvalidCommitDataError, SOURCE)
    head = accepted_or_refused(
        lambda: SuccessData.from_prefix(prefix, SOURCE), InvalidCommitDataError, SOURCE
    )
    whole = _members_once(document)
    if parsed is None or whole is None or not isinstance(json.loads(document), dict):
        return
    for name, value in parsed.members.items():
        assert json.dumps(whole[name]) == json.dumps(value), f"{name}: {value!r} in the prefix"
    assert head is None or head.read_fields is None or head.read_fields == set(parsed.members)
