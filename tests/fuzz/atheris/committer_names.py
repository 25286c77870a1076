"""Atheris target: committer names as users and `_SUCCESS` files spell them (`committer_class`,
`canonical_jvm_name`, `committer_named_in_success`): a committer of ours, or a ValueError naming
the name given."""

from __future__ import annotations

from support.fuzzing import accepted_or_refused, text_of

from airflow_commit_provider.core.committers.registry import (
    COMMITTERS,
    canonical_jvm_name,
    committer_class,
    committer_named_in_success,
    committer_spelling,
)

MAX_LEN = 128


def TestOneInput(data: bytes) -> None:
    name = text_of(data)
    found = accepted_or_refused(lambda: committer_class(name), ValueError, repr(name))
    assert found is None or found.name == committer_spelling(name), repr(name)
    canonical = accepted_or_refused(lambda: canonical_jvm_name(name), ValueError, repr(name))
    assert canonical is None or canonical in COMMITTERS, repr(name)
    assert committer_named_in_success(name) in (None, *COMMITTERS), repr(name)
