"""Finishing a committed table write whose partitions are not yet registered, from the worker.

A try finds its job (or the earlier try's job it adopts) committed with its registration pending
when the driver was killed between the commit point and the registration, or the metastore failed
then. The data is committed; only a Spark driver has a catalog client, so the operator submits
:mod:`airflow_commit_provider.spark.finish_registration` through the same hook, with the write's
conf, connection and S3 settings, then checks the job record again. Registering is idempotent, and
a job whose record lists its registered partitions submits nothing.

The application's arguments are only the destination, the table and the job ID, each checked here
(the table and job come from the job's record in the store): nothing secret is on its command line.
"""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from airflow.sdk.exceptions import AirflowException

from airflow_commit_provider.operators.try_outcome import RegistrationPendingError

if TYPE_CHECKING:
    from airflow_commit_provider.core.formats.success import SuccessData
    from airflow_commit_provider.hooks.spark_submit import CommittedSparkSubmitHook
    from airflow_commit_provider.operators.try_outcome import TaskLog
    from airflow_commit_provider.tries.workdirs import TryWorkdir

__all__ = ["registration_arguments", "submit_registration", "verified_or_registered"]

#: A catalog table name as the writer records it: ``table``, ``db.table`` or ``catalog.db.table``.
_TABLE_NAME = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+){0,2}")


def registration_arguments(pending: RegistrationPendingError) -> list[str]:
    """The registration application's arguments (destination, table, job ID), once each is checked."""
    if not _TABLE_NAME.fullmatch(pending.table):
        raise AirflowException(
            f"job {pending.job_id}'s record names table {pending.table!r}, which is not a table name "
            "(db.table): not registering its partitions"
        )
    try:
        canonical = str(uuid.UUID(pending.job_id))
    except ValueError:
        canonical = None
    if canonical != pending.job_id:
        raise AirflowException(f"job ID {pending.job_id!r} is not a UUID: not registering its partitions")
    return [pending.destination, pending.table, pending.job_id]


def submit_registration(hook: CommittedSparkSubmitHook, workdir: TryWorkdir, log: TaskLog) -> int | None:
    """Run the registration-only application with `hook` (holding its arguments); its exit code.

    It runs from a copy in the try's directory: run from the package's own folder, ``spark/``'s
    modules (``config``, ``catalog``...) would be top-level modules of the driver. A failure is
    logged here; :func:`verified_or_registered` then fails the try in one line.
    """
    from airflow_commit_provider.spark import finish_registration

    application = shutil.copy(finish_registration.__file__, Path(workdir.path, "finish_registration.py"))
    try:
        hook.submit(str(application), pass_fds=(workdir.lock_fd,))
    except AirflowException as error:
        log.warning("The registration-only Spark application failed: %s", error)
    return hook.exit_code


def verified_or_registered(
    verify: Callable[[], SuccessData],
    register: Callable[[RegistrationPendingError, list[str]], int | None],
    log: TaskLog,
) -> SuccessData:
    """What `verify` proves; if the job committed with its registration pending, `register` runs the
    registration-only application (with its checked arguments; its exit code), and then `verify`
    must pass: an error naming the table and the job otherwise (the data stays committed)."""
    try:
        return verify()
    except RegistrationPendingError as found:
        pending = found
    arguments = registration_arguments(pending)
    log.warning("%s", pending)
    exit_code = register(pending, arguments)
    try:
        data = verify()
    except RegistrationPendingError:
        ended = f"exited with code {exit_code}" if exit_code else "ended"
        raise AirflowException(
            f"registering the partitions of job {pending.job_id} in table {pending.table} failed (the "
            f"registration-only Spark application {ended}; its log is above): the data stays committed "
            f"in {pending.destination}, and a retry of this task registers them"
        ) from None
    registered = data.registered_partitions or []
    count = len(registered) if data.registered_partition_count is None else data.registered_partition_count
    log.info(
        "Registered the partitions of job %s in table %s (%d): %s%s",
        pending.job_id,
        pending.table,
        count,
        ", ".join(registered) or "(none)",
        f" and {count - len(registered):,} more" if count > len(registered) else "",
    )
    return data
