"""Every file a `_SUCCESS` vouches for, checked against the store (`success verify --files`).

One listing of the destination, merged with the job's file list. Both are taken in key order: the
file list is written sorted (`docs/bounded-commits.md`) and is checked to be as it streams; the
listing goes through a sorted spool (`core.sorted_spool`), since not every S3 server lists keys in
that order. So the check holds one entry of each side at a time, never a set of names, whether
the job wrote ten files or a million, and costs one listing (1,000 keys a request on S3) and the
reads of the file list (checked against its reference: bytes, SHA-256, entries), never a request
per file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.success import CommittedFile, SuccessData
from airflow_commit_provider.core.paths import InvalidPathError, StorePath, is_hidden
from airflow_commit_provider.core.sorted_spool import join_sorted, key_order, spooled
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.progress import NoProgress, Progress

__all__ = ["PROBLEM_LINES", "FilesCheck", "check_listed_files"]

#: Problems (a file missing, or of another size) named one a line; past them they are counted.
PROBLEM_LINES = 20
#: Visible files the list does not name, named as examples; all of them are counted.
UNLISTED_EXAMPLES = 5
#: Entries between two progress updates.
_PROGRESS_STEP = 1000


@dataclass
class FilesCheck:
    """What one check of the listed files found. `listed` files were checked: `present` with the
    size listed, `missing`, or `resized` (another size); `unlisted` visible files under the
    destination are not in the list (another job's, or written beside the committer), which is no
    failure. `problems` names the first `PROBLEM_LINES` missing or resized files."""

    destination: StorePath
    listed: int = 0
    present: int = 0
    missing: int = 0
    resized: int = 0
    unlisted: int = 0
    problems: list[str] = field(default_factory=list)
    unlisted_examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.missing == 0 and self.resized == 0

    @property
    def problems_left_out(self) -> int:
        return self.missing + self.resized - len(self.problems)

    def describe(self) -> str:
        """One line: what was checked and what was found."""
        found = (
            "all present with their sizes"
            if self.ok
            else f"{self.missing:,} missing, {self.resized:,} of another size"
        )
        unlisted = f"; {self.unlisted:,} visible files under it are not listed" if self.unlisted else ""
        return f"{self.listed:,} listed files checked against one listing of {self.destination}: {found}{unlisted}"

    def to_json(self) -> dict[str, Any]:
        return {
            "destination": str(self.destination),
            "listed": self.listed,
            "present": self.present,
            "missing": self.missing,
            "resized": self.resized,
            "unlisted": self.unlisted,
            "problems": self.problems,
            "problems_left_out": self.problems_left_out,
            "unlisted_examples": self.unlisted_examples,
        }

    def _problem(self, line: str) -> None:
        if len(self.problems) < PROBLEM_LINES:
            self.problems.append(line)


def check_listed_files(
    store: Store,
    data: SuccessData,
    destination: StorePath,
    *,
    source: str,
    progress: Progress | None = None,
) -> FilesCheck:
    """Check every file `data` (read from `source`, vouching for `destination`) lists against one
    listing of `destination`: each must be there with the size listed.

    Raises InvalidCommitDataError naming `source` when it lists no files (Hadoop's name only the
    first 100, without sizes), or when its file list is not what its reference says or not sorted.
    """
    progress = progress or NoProgress()
    check = FilesCheck(destination)
    listed = _listed(data, store, destination, source)
    progress.start(f"listing {destination}", None)
    with spooled(_visible(store, destination, progress), prefix="verify-listing-") as found:
        total, _ = data.committed_file_count()
        progress.start(f"checking {total:,} listed files", total)
        for entry, status in join_sorted(listed, found):
            if entry is None:
                assert status is not None
                check.unlisted += 1
                if len(check.unlisted_examples) < UNLISTED_EXAMPLES:
                    check.unlisted_examples.append(status[1])
                continue
            check.listed += 1
            if check.listed % _PROGRESS_STEP == 0:
                progress.advance(_PROGRESS_STEP)
            _, uri, size = entry
            if status is None:
                check.missing += 1
                check._problem(f"missing: {uri} ({size:,} bytes listed)")
            elif status[2] != size:
                check.resized += 1
                check._problem(f"another size: {uri} is {status[2]:,} bytes, listed {size:,}")
            else:
                check.present += 1
        progress.advance(check.listed % _PROGRESS_STEP)
    return check


def _listed(
    data: SuccessData, store: Store, destination: StorePath, source: str
) -> Iterator[tuple[bytes, str, int]]:
    """(key order, URI, size) of every file `data` lists, in key order, checked to be so."""
    files: Iterable[CommittedFile] = data.iter_all_files(store, destination, source)
    if data.file_list is None:  # older files of ours: inline, in memory already, in no set order
        files = sorted(files, key=lambda committed: key_order(_key(committed.uri, source)))
    previous: bytes | None = None
    for committed in files:
        key = key_order(_key(committed.uri, source))
        if previous is not None and key <= previous:
            raise InvalidCommitDataError(
                f"{source}: its file list is not in key order, or names a file twice, at {committed.uri!r}"
            )
        previous = key
        yield key, committed.uri, committed.size


def _key(uri: str, source: str) -> str:
    try:
        return StorePath.from_uri(uri).key
    except InvalidPathError as error:
        raise InvalidCommitDataError(f"{source}: lists {uri!r}, which is not a URI: {error}") from error


def _visible(store: Store, destination: StorePath, progress: Progress) -> Iterator[tuple[bytes, str, int]]:
    """(key order, path, size) of the files under `destination` that readers see: not under a
    `_` or `.` directory, nor so named (`_SUCCESS`, the records, other jobs' work)."""
    for count, status in enumerate(store.list_files(destination), 1):
        if count % _PROGRESS_STEP == 0:
            progress.advance(_PROGRESS_STEP)
        if not is_hidden(status.path.relative_to(destination)):
            yield key_order(status.path.key), str(status.path), status.size
