"""``SuccessManifestSensor``: wait for a job's ``_SUCCESS`` and check it says what downstream needs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.amazon.aws.sensors.base_aws import AwsBaseSensor
from airflow.providers.amazon.aws.utils.mixins import aws_template_fields
from airflow.sdk import PokeReturnValue

from airflow_commit_provider.compat import AirflowException, AirflowFailException, AirflowSensorTimeout, conf
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.success import LegacySuccessMarkerError
from airflow_commit_provider.hooks.commit_store import CommitStoreHook
from airflow_commit_provider.success.check import SuccessCheck, SuccessExpectations
from airflow_commit_provider.triggers.success_manifest import SuccessManifestTrigger

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_commit_provider.core.store import Store

__all__ = ["SuccessManifestSensor"]


class SuccessManifestSensor(AwsBaseSensor[CommitStoreHook]):
    """Wait for the ``_SUCCESS`` of a ``file://`` or ``s3://`` destination and validate it.

    The file must be JSON in the SuccessData format (ours or Hadoop's S3A/manifest committers'). A
    0-byte marker of the classic FileOutputCommitter fails the task unless ``allow_legacy=True``; a
    corrupt file fails it too. A valid file that does not meet the expectations below is *not yet*
    the awaited one (yesterday's ``_SUCCESS``, another job's), so the sensor keeps waiting, and its
    timeout message says why the last one was refused; with ``fail_on_mismatch=True`` it fails at
    once instead.

    Given a ``job_id``, the sensor also accepts the job's own record when ``_SUCCESS`` is absent or
    names another job: every committed job leaves one under ``<destination>/_airflow_commit/``, so on a
    table that several jobs write in parallel (a backfill of many days) each day's sensor proves its
    own job whichever committed last. For the ``partitioned`` committer, ``destination`` can also be the
    partition (``<table>/dt={{ ds }}``): each partition it writes gets a ``_SUCCESS`` of its own.

    Each poke costs one request, a single ranged GET of at most 64 KiB of ``_SUCCESS``, whatever
    the job wrote (a million files or ten thousand partitions: ours keep what the check needs in
    their first 64 KiB, and their lists beside them); two when it falls back to the job's record.
    Hadoop's ``_SUCCESS`` files and older ones of ours that are larger than 64 KiB are then read
    whole (one more GET). A required partition beyond the 100 a ``_SUCCESS`` lists inline is
    looked up in the job's partition list: one more ranged GET for a list of some thousands of
    partitions (see ``SuccessExpectations.check``). The parsed summary (job ID, committer, files,
    bytes, rows, the first 100 partitions and their count, timestamp, the path of the file judged
    and its ``source``) is returned as XCom.

    :param destination: where the job writes, a table's root folder (or its ``_SUCCESS`` file). Templated.
    :param aws_conn_id: AWS connection for an ``s3://`` destination; unused for a local one. Templated.
    :param region_name: overrides the connection's region. Templated.
    :param verify: overrides the connection's ``verify``: False, or a CA bundle path. Templated.
    :param botocore_config: botocore ``Config`` options over the connection's ``config_kwargs``.
        These three are the Amazon provider's sensors' arguments; a deferred sensor's trigger gets
        them too.
    :param job_id: the job ID the file must carry, e.g. the producing operator's XCom; when
        ``_SUCCESS`` names another job, the job's record is checked instead. Templated.
    :param committers: committer name, or names any of which may have written it. Templated.
    :param min_files: the least number of committed files. Templated.
    :param newer_than: the file must have been written after this instant (a datetime or an
        ISO-8601 string, e.g. ``"{{ data_interval_end }}"``). Templated.
    :param required_partitions: partitions (``"dt=2024-01-01"``) the job must have written. Templated.
    :param allow_legacy: accept a 0-byte legacy marker (it can then satisfy only ``newer_than``).
    :param fail_on_mismatch: fail instead of waiting when the file does not meet the expectations.
    :param deferrable: wait in the triggerer; defaults to ``[operators] default_deferrable``.
    """

    aws_hook_class = CommitStoreHook
    template_fields: Sequence[str] = aws_template_fields(
        "destination",
        "job_id",
        "committers",
        "min_files",
        "newer_than",
        "required_partitions",
    )
    ui_color = "#dff0d8"

    def __init__(
        self,
        *,
        destination: str,
        job_id: str | None = None,
        committers: str | Sequence[str] | None = None,
        min_files: int | None = None,
        newer_than: datetime | str | None = None,
        required_partitions: str | Sequence[str] | None = None,
        allow_legacy: bool = False,
        fail_on_mismatch: bool = False,
        deferrable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.destination = destination
        self.job_id = job_id
        self.committers = committers
        self.min_files = min_files
        self.newer_than = newer_than
        self.required_partitions = required_partitions
        self.allow_legacy = allow_legacy
        self.fail_on_mismatch = fail_on_mismatch
        if deferrable is None:
            deferrable = conf.getboolean("operators", "default_deferrable", fallback=False)
        self.deferrable = deferrable
        self._store: Store | None = None
        self._last_result: SuccessCheck | None = None

    @property
    def _hook_parameters(self) -> dict[str, Any]:
        return {**super()._hook_parameters, "threads": 1}  # one GET per poke

    # Checks ------------------------------------------------------------------------------------
    def _expectations(self) -> SuccessExpectations:
        """The one place the (rendered) arguments become the expectations every check uses."""
        return SuccessExpectations.build(
            job_id=self.job_id,
            committers=self.committers,
            min_files=self.min_files,
            newer_than=self.newer_than,
            required_partitions=self.required_partitions,
            allow_legacy=self.allow_legacy,
        )

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = self.hook.get_store(self.destination)
        return self._store

    def check(self) -> SuccessCheck:
        """Look once (``_SUCCESS``, or the job's record); fails the task if it can never qualify."""
        try:
            found = self._expectations().check(self.store, self.destination)
        except LegacySuccessMarkerError as error:
            raise AirflowFailException(
                f"{error}. Set allow_legacy=True to accept such markers, or write the output with a "
                "committer that records its job (any of this provider's, or Hadoop's S3A/manifest committers)"
            ) from error
        except InvalidCommitDataError as error:
            raise AirflowFailException(f"not a valid SuccessData file: {error}") from error
        self._last_result = found
        if found.state == "rejected" and self.fail_on_mismatch:
            raise AirflowFailException(found.describe())
        return found

    def poke(self, context: Context) -> bool | PokeReturnValue:
        found = self.check()
        self.log.info("%s", found.describe())
        if found.state == "accepted":
            return PokeReturnValue(is_done=True, xcom_value=found.xcom_summary())
        return False

    # Modes -------------------------------------------------------------------------------------
    def execute(self, context: Context) -> Any:
        self._expectations()  # argument errors fail before the first request
        if not self.deferrable:
            try:
                return super().execute(context)
            except AirflowSensorTimeout as timeout:
                raise AirflowSensorTimeout(f"{timeout} Last check: {self._describe_last()}") from timeout
            finally:
                self._close_store()
        try:
            found = self.check()
        finally:
            self._close_store()
        if found.state == "accepted":
            self.log.info("%s", found.describe())
            return found.xcom_summary()
        self.log.info("%s; deferring to the triggerer", found.describe())
        self.defer(
            trigger=self._trigger(),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def _trigger(self) -> SuccessManifestTrigger:
        return SuccessManifestTrigger(
            destination=self.destination,
            aws_conn_id=self.aws_conn_id,
            region_name=self.region_name,
            verify=self.verify,
            botocore_config=self.botocore_config,
            poke_interval=self.poke_interval,
            expectations=self._expectations(),
            fail_on_mismatch=self.fail_on_mismatch,
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        if not event:
            raise AirflowException(f"the trigger for {self.destination} ended without an event")
        if event.get("status") == "success":
            self.log.info("qualifies: %s", event.get("summary"))
            return event.get("summary")
        message = event.get("message", "unknown error")
        if event.get("kind") in ("invalid", "rejected"):
            raise AirflowFailException(message)
        raise AirflowException(message)

    def _describe_last(self) -> str:
        return self._last_result.describe() if self._last_result else "none"

    def _close_store(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
