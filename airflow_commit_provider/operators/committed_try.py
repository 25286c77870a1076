"""One try of a ``CommittedSparkSubmitOperator`` task, from its plan to the commit it delivers.

A :class:`CommittedTry` is made by ``execute`` for each try and owns everything of it: the write's
plan (its destination parsed once), the job, the spark-submit that runs it, what becomes of the
jobs of earlier tries (:mod:`~.try_settlement`), the abort of a failed or killed try
(:mod:`~.try_abort`), the ``_SUCCESS`` check (:mod:`~.try_outcome`), the registration of a table's
partitions (:mod:`~.registration`) and the delivery: the job marked delivered, the XCom summary,
the asset event, the commit report's target and what OpenLineage reports.

``on_kill`` may call :meth:`CommittedTry.kill` at any step of :meth:`CommittedTry.run`, from
Airflow's SIGTERM handler in the thread that runs it. A kill fails the try at its next step, stops
the running spark-submit (a hook killed before it starts never starts) and aborts the try's job,
once: a re-entrant lock guards the abort, which the handler may interrupt. The job marked delivered
is the try's point of no return: a kill before it fails the try (a committed job is then left for
the next try to adopt), a kill after it leaves the try to succeed.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Protocol, cast

from airflow.sdk.exceptions import AirflowException

from airflow_commit_provider.assets import commit_extra, emit_commit_event
from airflow_commit_provider.core.job_control import mark_delivered
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.store.check import require_uploads_outlive_job
from airflow_commit_provider.core.task_key import TaskKey
from airflow_commit_provider.operators.durable_submission import (
    ProviderTracking,
    StoredApplication,
    SubmissionMode,
    TrackingOperator,
    earlier_applications,
    submission_mode,
    yarn_cluster_conf,
)
from airflow_commit_provider.operators.registration import submit_registration, verified_or_registered
from airflow_commit_provider.operators.report_link import push_report_target
from airflow_commit_provider.operators.submission import (
    check_submission,
    hook_arguments,
    lineage_conf,
    shipped_py_files,
)
from airflow_commit_provider.operators.try_abort import STOP_WAIT_SECONDS, abort_try_job
from airflow_commit_provider.operators.try_outcome import (
    RegistrationPendingError,
    TaskLog,
    task_key,
    try_number,
    try_summary,
    verify_success,
)
from airflow_commit_provider.operators.try_settlement import log_adoption, settle_earlier_tries
from airflow_commit_provider.tries.plan import find_tried_jobs
from airflow_commit_provider.tries.workdirs import TryWorkdir, open_try_workdir

if TYPE_CHECKING:
    from collections.abc import Iterator
    from datetime import timedelta

    from airflow.sdk import Asset, Context

    from airflow_commit_provider.core.committers.registry import WritePlan
    from airflow_commit_provider.core.formats.success import SuccessData
    from airflow_commit_provider.core.paths import Destination
    from airflow_commit_provider.core.store import Store
    from airflow_commit_provider.hooks.commit_store import CommitStoreHook
    from airflow_commit_provider.hooks.spark_submit import CommittedSparkSubmitHook
    from airflow_commit_provider.tries.plan import TriedJob

__all__ = ["CommittedTry", "TriedOperator"]


class TriedOperator(Protocol):
    """What a try reads of the operator that runs it (``CommittedSparkSubmitOperator``, which makes
    the try and so is not imported here): its arguments, its store hook and how it plans a write."""

    @property
    def application(self) -> str: ...
    @property
    def conf(self) -> dict[str, Any] | None: ...
    @property
    def py_files(self) -> str | None: ...
    @property
    def ship_package(self) -> bool: ...
    @property
    def adopt_committed_tries(self) -> bool: ...
    @property
    def durable(self) -> bool: ...
    @property
    def conflict_mode(self) -> str | None: ...
    @property
    def asset(self) -> Asset | None: ...
    @property
    def emit_asset(self) -> bool: ...
    @property
    def aws_conn_id(self) -> str | None: ...
    @property
    def dag_id(self) -> str: ...
    @property
    def execution_timeout(self) -> timedelta | None: ...
    @property
    def task_id(self) -> str: ...
    @property
    def log(self) -> TaskLog: ...
    @property
    def hook(self) -> CommitStoreHook: ...
    @property
    def local_work_root(self) -> str: ...

    def write_plan(self) -> WritePlan: ...

    def job_conf(
        self, job_id: str, try_number: int | None, plan: WritePlan | None = None, key: TaskKey | None = None
    ) -> dict[str, str]: ...

    def _get_hook(self, **for_this_try: Any) -> CommittedSparkSubmitHook: ...


class CommittedTry:
    """One try: :meth:`run` commits (or adopts) one job and returns the XCom summary; :meth:`kill` stops it."""

    def __init__(self, operator: TriedOperator, context: Context) -> None:
        self.operator, self.context, self.log = operator, context, operator.log
        self.number, self.key = try_number(context), task_key(context)
        self.plan: WritePlan | None = None
        self.job_id: str | None = None
        """This try's own job, once known: the one an abort acts on (an adopted job is committed)."""
        self.spark_submits: list[CommittedSparkSubmitHook] = []
        """The hooks of this try's spark-submits (the job's, a registration's), from before each starts."""
        self.written: dict[str, Any] | None = None
        """What the try made visible, for OpenLineage: the delivered summary, or the ``_SUCCESS`` of a
        job that reached its commit point although the try failed."""
        self.mode = SubmissionMode(None, False)
        """How the application is followed and found again (:mod:`~.durable_submission`)."""
        self.killed = self.aborted = self.delivering = False
        self._abort_lock = threading.RLock()

    # The try's course -------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Commit this try's job (or adopt an earlier try's) and deliver it; on any failure, timeout or
        kill, stop spark-submit and abort the job, then raise."""
        started = time.monotonic()
        try:
            data, job_id, adopted_from = self._commit()
        except BaseException as error:  # failures, AirflowTaskTimeout, AirflowTaskTerminated
            self._stop_spark()
            self._abort(f"{type(error).__name__}: {error}")
            raise
        return self._deliver(data, job_id, adopted_from, time.monotonic() - started)

    def _commit(self) -> tuple[SuccessData, str, int | None]:
        """The committed job's ``_SUCCESS``, its ID and the try it was adopted from (None: this one's)."""
        operator = self.operator
        plan = self.plan = operator.write_plan()
        check_submission(plan, operator.application, operator.conf)
        hook = operator._get_hook()
        self.mode = submission_mode(hook, operator.durable)
        hook.check_launcher()
        self.log.info("%s", self.mode.describe())
        if self.mode.durable:
            self._reconnect(hook)
        if plan.engine == "python":
            self._alive("before it settled the jobs of earlier tries")
            with self._store() as store:
                tries = settle_earlier_tries(
                    store,
                    plan,
                    self.key,
                    self.number,
                    adopt_committed_tries=operator.adopt_committed_tries,
                    log=self.log,
                )
            self._report_target((tries.adopted or tries).job_id)
            if tries.adopted is not None:
                return self._adopt(tries.adopted), tries.adopted.job_id, tries.adopted.try_number
            job_id = tries.job_id
        else:
            self._refuse_short_lifecycle(plan)
            job_id = str(uuid.uuid4())
            self._report_target(job_id)
        self.job_id = job_id
        mode = operator.conflict_mode or "default"
        self.log.info(
            "Try %s: job %s writes %s with the %s committer (engine %s, conflict mode %s)",
            self.number,
            job_id,
            plan.destination,
            plan.committer,
            plan.engine,
            mode,
        )
        submitted_ms = self._submit_job(job_id)
        data = self._verified(job_id, submitted_ms)
        if data.job_id and data.job_id != job_id:  # Hadoop's manifest committer: Spark's own job ID
            self._report_target(data.job_id)
        if plan.engine == "python":
            self._mark_delivered(job_id)
        return data, job_id, None

    def _refuse_short_lifecycle(self, plan: WritePlan) -> None:
        """engine="hadoop": Hadoop's S3A committers keep pending uploads until job commit too, but
        read none of our confs, so the try checks the bucket's lifecycle rules against the task's
        ``execution_timeout`` before spark-submit (with engine="python" the driver's job setup does)."""
        if plan.traits.family != "upload" or plan.destination.root.is_local:
            return
        timeout = self.operator.execution_timeout
        with self._store() as store:
            require_uploads_outlive_job(
                store,
                plan.destination.root,
                timeout.total_seconds() if timeout is not None else None,
                f"the {plan.committer} committer",
            )

    def _adopt(self, job: TriedJob) -> SuccessData:
        """Verify and deliver an earlier try's committed job as this try's result, running no application."""
        self._alive(f"before it could adopt job {job.job_id}")
        log_adoption(job, self.log)
        data = self._verified(job.job_id, 0)
        self._mark_delivered(job.job_id)
        return data

    def _reconnect(self, hook: CommittedSparkSubmitHook) -> None:
        """Wait for every application an earlier try may have left running (:mod:`~.durable_submission`):
        only once it has ended are the earlier jobs settled, so no second application runs beside it.
        A kill meanwhile kills it through the cluster."""
        tracking = ProviderTracking(cast("TrackingOperator", self.operator), hook, self.context)
        job_ids: list[str] = []
        if self._plan.engine == "python" and self.key is not None and self.number is not None:
            with self._store() as store:
                jobs, _ = find_tried_jobs(store, self._plan.destination.root, self.key, self.number)
            job_ids = [job.job_id for job in jobs]
        for application in earlier_applications(tracking, job_ids):
            application_id = application.application_id
            self._alive(f"before it reconnected to application {application_id}")
            active, status = tracking.is_active(application)
            if not active:
                self.log.info("Application %s (%s) has ended: %s", application_id, application.found, status)
                continue
            self.log.info(
                "Reconnecting to application %s (%s), %s: waiting for it to end before settling its job",
                application_id,
                application.found,
                status,
            )
            hook.attach_application(application_id)
            self._start(hook, f"before it reconnected to application {application_id}")
            try:
                tracking.wait(application_id)
            except Exception as error:
                self.log.warning("Application %s ended without success: %s", application_id, error)
            else:
                self.log.info("Application %s ended: succeeded", application_id)
            with self._abort_lock:
                self.spark_submits.remove(hook)
            self._alive(f"while it waited for application {application_id}")

    def _submit_job(self, job_id: str) -> int:
        """Run the application as this try's job; when it was submitted (epoch ms)."""
        operator, plan = self.operator, self._plan
        with self._workdir(job_id) as (workdir, key):
            conf = {**(operator.conf or {}), **operator.job_conf(job_id, self.number, plan, key)}
            if self.mode.yarn_cluster:
                conf.update(yarn_cluster_conf(conf, job_id))
            hook = self._spark_submit_hook(workdir, conf)
            submitted_ms = int(time.time() * 1000)
            started = self._start(hook, f"before job {job_id} started")
            if self.mode.tracking is None:
                # spark-submit inherits the directory's lock: it stays while spark-submit lives.
                started.submit(operator.application, pass_fds=(workdir.lock_fd,))
            else:
                self._run_tracked(started, job_id)
        self._alive(f"while job {job_id} ran")
        return submitted_ms

    def _run_tracked(self, hook: CommittedSparkSubmitHook, job_id: str) -> None:
        """Submit through the provider's tracking, store the application (durable), wait for its end."""
        tracking = ProviderTracking(cast("TrackingOperator", self.operator), hook, self.context)
        application_id = tracking.submit()
        self.log.info("Try %s: application %s runs job %s", self.number, application_id, job_id)
        if self.mode.durable:
            stored = StoredApplication(application_id, job_id, self.number or 0)
            if tracking.store(stored):
                self.log.info(
                    "Stored application %s in the task state store: a retry reconnects to it", application_id
                )
            else:
                self.log.warning(
                    "No task state store in this Airflow: a retry finds application %s %s",
                    application_id,
                    "by its tag only" if self.mode.tracking == "yarn" else "not at all (it fences the job)",
                )
        tracking.wait(application_id)

    def _verified(self, job_id: str, submitted_ms: int) -> SuccessData:
        """The job's ``_SUCCESS`` (:func:`verify_success`); a table write committed with its
        registration pending is registered first (:mod:`~airflow_commit_provider.operators.registration`)."""

        def verify() -> SuccessData:
            with self._store() as store:
                return verify_success(store, self._plan, job_id, submitted_ms, self.log)

        return verified_or_registered(verify, self._register, self.log)

    def _register(self, pending: RegistrationPendingError, arguments: list[str]) -> int | None:
        """Run the registration-only application with the write's conf; its exit code."""
        operator = self.operator
        with self._workdir(pending.job_id) as (workdir, _key):
            name = f"{hook_arguments(operator).get('name') or operator.task_id}-registration"
            hook = self._spark_submit_hook(
                workdir, dict(operator.conf or {}), application_args=arguments, name=name
            )
            exit_code = submit_registration(
                self._start(hook, f"before registering job {pending.job_id}"), workdir, self.log
            )
        self._alive(f"while registering job {pending.job_id}")
        return exit_code

    def _mark_delivered(self, job_id: str) -> None:
        """Record that this try succeeded with `job_id`, so a later try (a clear) writes again; if
        this fails, the try fails, and its retry adopts the job and marks it. A kill from now on
        leaves the try to succeed."""
        with self._abort_lock:
            self._alive(f"before job {job_id} was delivered")
            self.delivering = True
        with self._store() as store:
            mark_delivered(store, self._plan.destination.root, job_id)

    def _deliver(
        self, data: SuccessData, job_id: str, adopted_from: int | None, duration: float
    ) -> dict[str, Any]:
        """The XCom summary; the asset's event (extra, partition keys) and what OpenLineage reports."""
        result = try_summary(
            data,
            self._plan,
            job_id,
            try_number=self.number,
            duration=duration,
            log=self.log,
            adopted_from_try=adopted_from,
        )
        partitions = [p for p in data.partitions if p]
        count = len(partitions) if data.partition_count is None else data.partition_count
        extra = commit_extra(
            result,
            partitions,
            partition_count=count,
            partition_list=partition_list_uri(self._plan.destination, data),
        )
        # What lineage reports: the extra's partitions (its facet lists no more) and the counts.
        self.written = {**result, "partitions": extra["partitions"]}
        asset = self.operator.asset
        if asset is not None:
            emit_commit_event(self.context, asset, extra, partitions, count)
        elif self.operator.emit_asset:
            self.log.info("destination is templated, so this task declared no asset for it (see emit_asset)")
        return result

    # Stopping ---------------------------------------------------------------------------------------
    def kill(self) -> None:
        """Stop spark-submit and everything it started, abort this try's job; ``run`` then fails.

        Airflow 3's SIGTERM handler returns after ``on_kill``, so the flag makes ``run`` raise at its
        next step even if spark-submit happened to exit cleanly at that moment.
        """
        self.killed = True
        if self.delivering:
            self.log.info("Killed once job %s was delivered: the try ends as it is", self.job_id)
            return
        if self.aborted:  # e.g. after execution_timeout: run has stopped and aborted already
            self.log.info("Killed: job %s was already stopped and aborted", self.job_id)
            return
        self.log.warning("Killed: stopping spark-submit and aborting job %s", self.job_id)
        self._stop_spark()
        self._abort("the task was killed")

    def _alive(self, step: str) -> None:
        """Go on to the next step only if the try was not killed."""
        if self.killed:
            raise AirflowException(f"the task was killed {step}")

    def _start(self, hook: CommittedSparkSubmitHook, step: str) -> CommittedSparkSubmitHook:
        """`hook` as one of the try's spark-submits (a kill from now on stops it); unless killed."""
        with self._abort_lock:
            self._alive(step)
            self.spark_submits.append(hook)
        return hook

    def _stop_spark(self) -> None:
        """Kill spark-submit and everything it started (its process group); wait until they are gone."""
        for hook in list(self.spark_submits):
            if not hook.kill_process_group(STOP_WAIT_SECONDS):
                self.log.warning("processes of job %s may still be alive after SIGKILL", self.job_id)

    def _abort(self, reason: str) -> None:
        """Abort this try's job once: pending uploads aborted, temporary directory deleted."""
        with self._abort_lock:
            if self.aborted or self.job_id is None or self.plan is None:
                return
            self.aborted = True
            committed = abort_try_job(
                self._store, self.plan, self.job_id, reason, self.operator.adopt_committed_tries, self.log
            )
            if committed is not None:  # for OpenLineage: the try fails, but its output is committed
                self.written = {**committed.summary(), "partitions": committed.partitions or []}

    # What the steps share ---------------------------------------------------------------------------
    @property
    def _plan(self) -> WritePlan:
        if self.plan is None:
            raise RuntimeError("the try has no plan before it runs")
        return self.plan

    def _store(self) -> contextlib.closing[Store]:
        return contextlib.closing(self.operator.hook.get_store(self._plan.destination.root))

    def _report_target(self, job_id: str) -> None:
        """Tell the commit report page which commit this try makes (an aborted try has a page too)."""
        push_report_target(self.context, self._plan.destination.uri, self.operator.aws_conn_id, job_id)

    @contextlib.contextmanager
    def _workdir(self, job_id: str) -> Iterator[tuple[TryWorkdir, TaskKey]]:
        """The try's local directory (:mod:`~airflow_commit_provider.tries.workdirs`), and the key it is under."""
        operator = self.operator
        key = self.key or TaskKey(operator.dag_id, operator.task_id, f"job-{job_id}", -1)
        with open_try_workdir(operator.local_work_root, key, self.number or 1) as workdir:
            yield workdir, key

    def _spark_submit_hook(
        self, workdir: TryWorkdir, conf: dict[str, Any], **arguments: Any
    ) -> CommittedSparkSubmitHook:
        """The hook of one spark-submit of this try: the package shipped from the try's directory,
        S3 settings in its environment only, private confs in a file there."""
        operator = self.operator
        return operator._get_hook(
            conf=lineage_conf(
                conf,
                self.context,
                parent_job_info=getattr(operator, "_openlineage_inject_parent_job_info", False),
                transport_info=getattr(operator, "_openlineage_inject_transport_info", False),  # not in 6.3.0
            ),
            py_files=shipped_py_files(operator.py_files, operator.ship_package, workdir.path),
            s3_environment=operator.hook.spark_environment(self._plan.destination.root),
            private_conf_dir=workdir.path,
            **arguments,
        )


def partition_list_uri(destination: Destination, data: SuccessData) -> str | None:
    """Where every partition a committed job wrote is listed, for readers of its asset event: its
    partition list when `_SUCCESS` names only the first ones, else the job's record (its
    ``partitionStats`` name each partition). Both outlive the `_SUCCESS` the next job replaces.
    None for a destination only Hadoop's committers write, whose jobs keep no record of ours."""
    if not destination.in_store:
        return None
    if data.partition_list is not None:
        return data.partition_list.path_under(destination.root).uri()
    return JobLayout(destination.root, data.job_id).job_record.uri()
