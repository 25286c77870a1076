"""The committers by name, and `resolve`: one user's choice in, one frozen `WritePlan` out.

Every caller that chooses or checks a committer goes through here - the operator, ``write_committed``,
``jvm_committer_conf``, the ``_SUCCESS`` check and the tests' parametrisation - so a committer's
name and traits (``CommitterTraits``, declared on its class) are interpreted in one place.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from airflow_commit_provider.core.committers.base import Committer
from airflow_commit_provider.core.committers.file_output import FileOutputV1Committer, FileOutputV2Committer
from airflow_commit_provider.core.committers.magic import MagicCommitter
from airflow_commit_provider.core.committers.manifest import ManifestCommitter
from airflow_commit_provider.core.committers.staging import PartitionedCommitter, StagingCommitter
from airflow_commit_provider.core.committers.traits import CommitterTraits
from airflow_commit_provider.core.options import ConflictMode, parse_conflict_mode
from airflow_commit_provider.core.paths import HDFS_SCHEME, S3_SCHEMES, Destination, StorePath

Engine = Literal["python", "hadoop"]
#: ``python``: this package's committers (``write_committed``); ``hadoop``: Hadoop's JVM committers.
ENGINES: tuple[Engine, ...] = ("python", "hadoop")

COMMITTERS: dict[str, type[Committer]] = {
    cls.name: cls
    for cls in (
        FileOutputV1Committer,
        FileOutputV2Committer,
        ManifestCommitter,
        StagingCommitter,
        PartitionedCommitter,
        MagicCommitter,
    )
}


def committer_class(name: str) -> type[Committer]:
    """The committer called `name` (by `committer_spelling`), or a ValueError listing the names there are."""
    try:
        return COMMITTERS[committer_spelling(name)]
    except KeyError:
        raise ValueError(
            f"unknown committer {name!r}: choose one of {', '.join(sorted(COMMITTERS))}"
        ) from None


def committer_names(**wanted: object) -> tuple[str, ...]:
    """Names of the committers whose traits have the given values, e.g. ``family="upload"``."""
    return tuple(
        name
        for name, cls in COMMITTERS.items()
        if all(getattr(cls.traits, trait) == value for trait, value in wanted.items())
    )


def committer_spelling(name: str) -> str:
    """`name` as the registry spells committers: case and surrounding spaces do not count.

    The one spelling rule: `resolve` applies it to the user's choice, whichever entry point (the
    operator, ``write_committed``, the data source, ``jvm_committer_conf``) passed it on,
    `committer_class` to a name a job is opened by, and the ``_SUCCESS`` check to the names it
    compares, so ``"Magic"`` and ``" magic "`` read alike everywhere.
    """
    return name.strip().lower()


def canonical_jvm_name(name: str) -> str:
    """Our name for the committer Hadoop users call `name` (``file`` and ``staging`` included)."""
    for canonical, cls in COMMITTERS.items():
        if name == canonical or name in cls.traits.jvm.aliases:
            return canonical
    known = sorted({*COMMITTERS, *(alias for cls in COMMITTERS.values() for alias in cls.traits.jvm.aliases)})
    raise ValueError(f"unknown JVM committer {name!r}: choose one of {', '.join(known)}")


def committer_named_in_success(name: str) -> str | None:
    """Our name for the committer a ``_SUCCESS`` names in ``committer`` (ours, or one of Hadoop's
    S3A or manifest committers), or None when it is none of ours."""
    spelled = committer_spelling(name)
    for canonical, cls in COMMITTERS.items():
        jvm = cls.traits.jvm
        if spelled in {canonical, *jvm.aliases, *(committer_spelling(n) for n in jvm.success_names)}:
            return canonical
    return None


def default_committer(destination: StorePath, partitioned: bool, conflict_mode: str) -> str:
    """The committer a write gets when it names none.

    ``fail`` and ``replace`` need a committer that resolves conflicts at job commit: per partition
    for a partitioned write, else over the destination; HDFS has no multipart uploads, so a
    partitioned ``replace`` there swaps partition folders (``manifest``). ``append`` needs no
    rename on S3 (``magic``) and is atomic by rename on a local filesystem or HDFS (``manifest``).
    """
    if conflict_mode == "replace" and partitioned and destination.scheme == HDFS_SCHEME:
        return "manifest"
    if conflict_mode in ("fail", "replace"):
        (name,) = committer_names(conflicts="partition" if partitioned else "destination")
        return name
    return "magic" if destination.scheme in S3_SCHEMES else "manifest"


@dataclass(frozen=True)
class WritePlan:
    """How one write is committed, decided once by `resolve`; everything downstream reads it."""

    committer: str
    traits: CommitterTraits
    destination: Destination
    """Parsed once: any Hadoop filesystem for ``engine="hadoop"``, else one of our stores."""
    partition_columns: tuple[str, ...]
    conflict_mode: ConflictMode
    """The mode the user asked for."""
    committer_conflict_mode: ConflictMode
    """The mode the committer applies at job commit: ``append`` for committers that resolve no
    conflicts (``fail`` is then checked before the job starts, see `check_conflicts_before_setup`)."""
    check_conflicts_before_setup: bool
    """``fail`` with a committer that resolves no conflicts: the driver refuses a destination that
    already holds files before the job starts, as Spark's ``SaveMode.ErrorIfExists`` does."""
    engine: Engine
    allow_unsafe_v2: bool
    records_job_id: bool
    """Whether the ``_SUCCESS`` names the job ID given to the write; when it does not (Hadoop's
    manifest and classic committers), only its time can tie it to this write."""


def resolve(
    committer: str | None,
    destination: str | os.PathLike[str] | StorePath,
    *,
    partition_columns: Sequence[str] = (),
    conflict_mode: str | None = None,
    allow_unsafe_v2: bool = False,
    engine: str = "python",
) -> WritePlan:
    """Check the user's choice and decide how it is committed; raise ValueError naming what is wrong.

    ``committer=None`` picks `default_committer` (``engine="python"``); a name is read with
    `committer_spelling` (``"Magic"`` is ``magic``), the one place it is interpreted. A conflict mode the
    committer cannot honour is refused: only ``fail`` with ``engine="python"`` is honoured for
    committers that resolve no conflicts, by checking the destination before the job starts.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r} is not one of {', '.join(ENGINES)}")
    mode = parse_conflict_mode(conflict_mode or "append")
    columns = tuple(partition_columns)
    if committer is not None:
        committer = committer_spelling(committer)
        if not committer:
            raise ValueError(f"committer is empty: choose one of {', '.join(sorted(COMMITTERS))}")
    if engine == "hadoop":
        if committer is None:
            raise ValueError("engine='hadoop' needs a committer: one of Hadoop's JVM committers")
        name = canonical_jvm_name(committer)
        target = Destination.parse(destination, any_hadoop_filesystem=True)
    else:
        target = Destination.parse(destination)
        name = committer or default_committer(target.root, bool(columns), mode)
    traits = committer_class(name).traits
    traits.require_allowed(name, allow_unsafe_v2)
    if mode != "append" and not _honours(traits, mode, engine):
        raise ValueError(_conflict_refusal(name, mode, engine))
    if mode == "replace" and traits.conflicts is None and not columns:
        raise ValueError(
            f"conflict_mode='replace' with the {name} committer swaps the partition folders a write "
            "produces: give partition columns (partition_by), or replace a whole destination with the "
            "directory committer"
        )
    return accepted_plan(
        name,
        target,
        columns,
        mode,
        engine="hadoop" if engine == "hadoop" else "python",
        allow_unsafe_v2=allow_unsafe_v2,
    )


def accepted_plan(
    committer: str,
    destination: Destination,
    partition_columns: tuple[str, ...],
    conflict_mode: ConflictMode,
    *,
    engine: Engine,
    allow_unsafe_v2: bool,
) -> WritePlan:
    """The plan of a choice `resolve` accepted: what follows from it, nothing checked again.

    `resolve` ends here; a Spark driver comes here directly with the plan the operator resolved and
    passed in the conf under its digest (``spark.write_plan``), so a write is validated once.
    """
    traits = committer_class(committer).traits
    resolves_conflicts = traits.conflicts is not None or (
        conflict_mode == "replace" and _honours(traits, conflict_mode, engine)
    )
    return WritePlan(
        committer=committer,
        traits=traits,
        destination=destination,
        partition_columns=partition_columns,
        conflict_mode=conflict_mode,
        committer_conflict_mode=conflict_mode if resolves_conflicts else "append",
        check_conflicts_before_setup=conflict_mode == "fail" and not resolves_conflicts,
        engine=engine,
        allow_unsafe_v2=allow_unsafe_v2,
        records_job_id=engine == "python" or traits.jvm.records_job_id,
    )


def _honours(traits: CommitterTraits, mode: str, engine: str) -> bool:
    """Whether a committer with `traits` can honour `mode` (``fail`` or ``replace``): the staging
    committers at job commit; with ``engine="python"``, ``fail`` by a check before the job starts,
    and ``replace`` by the rename committers that swap partitions."""
    if traits.conflicts is not None:
        return True
    return engine == "python" and (mode == "fail" or (mode == "replace" and traits.swaps_partitions))


def _conflict_refusal(name: str, mode: str, engine: str) -> str:
    resolving = ", ".join(n for n, cls in COMMITTERS.items() if cls.traits.conflicts is not None)
    message = f"conflict_mode={mode!r} needs one of the staging committers ({resolving}), which resolve conflicts at job commit"
    if mode == "replace" and engine == "python":
        swapping = " or ".join(n for n, cls in COMMITTERS.items() if cls.traits.swaps_partitions)
        message += (
            f", or the {swapping} committer on a rename store (local files, HDFS), which swaps partitions"
        )
    message += f"; the {name} committer cannot honour it"
    if engine == "hadoop":
        message += ": with Hadoop's committers use Spark's save mode instead"
    return message
