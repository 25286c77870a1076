"""Errors raised when a persisted commit file cannot be trusted."""

from __future__ import annotations


class InvalidCommitDataError(ValueError):
    """A manifest, pendingset or `_SUCCESS` file is corrupt, of the wrong kind, or inconsistent.

    The message always names the file.
    """
