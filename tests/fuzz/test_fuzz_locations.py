"""Fuzz targets: locations as users give them (`StorePath.parse`), as commit files store them
(`StorePath.from_uri`) and as a cleanup's scope (`parse_scope`).

Beyond refusing cleanly, the two forms must agree: a parsed location prints back to itself, and
its stored URI reads back to the same path, whatever its key holds.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st
from support.fuzzing import FUZZ, accepted_or_refused, hostile_text

from airflow_commit_provider.cleanup.scope import ScopeError, parse_scope
from airflow_commit_provider.core.paths import InvalidPathError, StorePath

locations = st.one_of(
    hostile_text,
    st.tuples(
        st.sampled_from(("s3://", "s3a://", "S3N://", "file://", "file:///", "gs://", "s3:/", "")),
        hostile_text,
    ).map("".join),
    st.tuples(st.sampled_from(("s3://", "s3a://")), hostile_text, st.just("/"), hostile_text).map("".join),
)


@FUZZ
@given(locations)
@example("s3://bucket/a\nb")
@example("s3://[bucket/key")
@example("\ud800")
@example("/tmp/undecodable-\udcff")
@example("s3://bucket/\udcff")
def test_locations_as_users_give_them(text: str) -> None:
    path = accepted_or_refused(lambda: StorePath.parse(text), InvalidPathError, repr(text), "empty path")
    if path is not None:
        assert StorePath.parse(str(path)) == path
        assert StorePath.from_uri(path.uri()) == path


@FUZZ
@given(locations)
@example("s3://[bucket/key")
@example("s3://bucket]/key")
@example("s3://bucket/a\tb")
@example("s3://bucket/a\nb")
@example("s3://bucket/k%FF")
@example("file:///tmp/undecodable-%FF")
def test_locations_as_commit_files_store_them(uri: str) -> None:
    path = accepted_or_refused(lambda: StorePath.from_uri(uri), InvalidPathError, repr(uri))
    if path is not None:
        assert StorePath.from_uri(path.uri()) == path


def test_a_raw_newline_in_a_stored_uri_is_refused() -> None:
    """`urlsplit` drops tabs and newlines: `s3://bucket/a\nb` would have read as key `ab`."""
    for uri in ("s3://bucket/a\nb", "s3://bucket/a\tb", "s3://bucket/a\rb?x"):
        assert (
            accepted_or_refused(lambda uri=uri: StorePath.from_uri(uri), InvalidPathError, repr(uri)) is None
        )


@FUZZ
@given(locations)
def test_cleanup_scopes(text: str) -> None:
    scope = accepted_or_refused(lambda: parse_scope(text, argument="--scope"), ScopeError, "--scope")
    if scope is not None:
        assert scope.key.strip("/") and ".." not in scope.key.split("/")
