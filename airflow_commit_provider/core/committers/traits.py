"""What each committer is, declared once beside its class and read by everything that chooses one.

The registry (`registry.py`) collects them; `resolve` turns a user's choice into a `WritePlan` from
them. A new committer, or a change of what one does, is an edit here-and-in-its-class, nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from airflow_commit_provider.core.stages.errors import CommitError


class UnsafeCommitterError(CommitError, ValueError):
    """An unsafe committer (file-v2) was chosen without ``allow_unsafe_v2``."""


Family = Literal["rename", "upload"]
ConflictScope = Literal["destination", "partition"]
JvmKind = Literal["s3a", "manifest", "file-output"]


@dataclass(frozen=True)
class JvmCommitter:
    """Hadoop's committer that does the same work in the JVM, for Spark's own writers
    (``engine="hadoop"``, :func:`airflow_commit_provider.spark.jvm_committer_conf`)."""

    kind: JvmKind
    """Which factory commits: ``S3ACommitterFactory``, a manifest committer factory, or the
    classic ``FileOutputCommitterFactory``."""
    records_job_id: bool
    """Whether its ``_SUCCESS`` names the job ID the conf gives it (``fs.s3a.committer.uuid``).
    Hadoop's manifest and classic committers take Spark's own per-write UUID instead."""
    json_success: bool = True
    """Whether it writes a JSON ``_SUCCESS``; the classic committer writes a 0-byte marker."""
    algorithm_version: int = 1
    """``mapreduce.fileoutputcommitter.algorithm.version`` (2 only for file-v2)."""
    aliases: tuple[str, ...] = ()
    """Other names Hadoop users know it by (``fs.s3a.committer.name=file``, ``staging``)."""
    success_names: tuple[str, ...] = ()
    """What else its ``_SUCCESS`` calls it in ``committer`` (the S3A committers write our names;
    Hadoop's manifest committer writes its class name)."""


@dataclass(frozen=True)
class CommitterTraits:
    """A committer's behaviour as far as choosing and checking it goes."""

    family: Family
    """``rename``: output is written aside and renamed into place; ``upload``: written as pending
    multipart uploads and completed at job commit (nothing is renamed)."""
    conflicts: ConflictScope | None
    """Where job commit resolves ``conflict_mode`` ``fail``/``replace``: over the whole destination,
    per partition written, or nowhere (None: the committer only appends)."""
    swaps_partitions: bool
    """Whether ``replace`` swaps each partition folder it writes at job commit (a rename store's
    `stages.swaps`), where `conflicts` is None: only ``replace`` is resolved at job commit then."""
    exclusive_task_commit: bool
    """Whether a task's first committed attempt wins (needs create-if-absent) or the last does."""
    unsafe: bool
    """Whether a failed job can leave partial output visible (file-v2); refused unless allowed."""
    partition_markers: bool
    """Whether job commit writes a ``_SUCCESS`` into each partition it wrote."""
    jvm: JvmCommitter
    """Its counterpart among Hadoop's JVM committers."""

    def require_allowed(self, name: str, allow_unsafe: bool) -> None:
        """Refuse an unsafe committer unless the user accepted it explicitly."""
        if self.unsafe and not allow_unsafe:
            raise UnsafeCommitterError(
                f"{name} is unsafe: a failed task commit leaves partial output visible and a job abort "
                "cannot undo committed tasks; pass allow_unsafe_v2=True to accept that"
            )
