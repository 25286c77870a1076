"""Durable submission: a retry reconnects to the application its killed try left running, then the
job it ran is settled exactly once (adopted if it committed, fenced if not).

The Spark provider's ``SparkSubmitOperator`` is durable by default (``ResumableJobMixin``): where it
tracks the application through the cluster (YARN cluster mode with ``yarn_track_via_rm_api``, a
standalone master's driver status, Kubernetes with ``track_driver_via_k8s_api``), spark-submit
returns once the application is submitted, the application's ID goes into the task state store,
and a retry after a dead worker reconnects to it. A committed try keeps that and adds what
exactly once needs:

- **What is stored**: one key, :data:`APPLICATION_KEY`, a JSON object naming the application, the
  job it runs and the try that submitted it (:class:`StoredApplication`). The provider's own key
  (``external_id_key``, a bare ID) is left alone: its ``execute_resumable`` returns a stored
  succeeded application as the result, where a cleared task must write again.
- **Found by tag**: a YARN application carries its job's tag (:func:`job_tag` in ``spark.yarn.tags``),
  so a retry finds an earlier try's application through the ResourceManager even if the worker
  died between submitting and storing (the gap the provider's mixin documents).
- **What a retry does**: it waits for every earlier application that is still active (stored, or
  found by tag), then settles the earlier jobs as every retry does, and submits a new application
  only if it adopted nothing. A retry never starts a second application while the first may commit.
- **A clear**: the stored application belongs to a delivered job, which settling leaves alone, so
  the cleared try submits a new application and stores it in its place.
- **The AM**: in YARN cluster mode a second attempt of the application master would run the driver
  again inside the same application: ``spark.yarn.maxAppAttempts`` is 1 unless the user set it,
  and a user's value above 1 is refused.

Where tracking does not apply (client mode, a local master, Kubernetes or YARN without the
provider's tracking), spark-submit waits for the application and the adopt-or-fence protocol alone
holds; :meth:`SubmissionMode.describe` says in the log which one applies. The provider's refusal
(YARN cluster mode with ``durable`` but without RM tracking) is the same here.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

from airflow_commit_provider.hooks.spark_submit import YARN_ACTIVE_STATES

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow.sdk import Context

    from airflow_commit_provider.hooks.spark_submit import CommittedSparkSubmitHook

__all__ = [
    "APPLICATION_KEY",
    "FORGOTTEN",
    "JOB_TAG_PREFIX",
    "MAX_APP_ATTEMPTS",
    "EarlierApplication",
    "ProviderTracking",
    "StoredApplication",
    "SubmissionMode",
    "earlier_applications",
    "job_tag",
    "submission_mode",
    "yarn_cluster_conf",
]

#: The task state store key of the try's application. Never rename it: retries of tries that ran
#: before the change would no longer find their application.
APPLICATION_KEY = "airflow_commit_application"
#: A YARN application's tag naming its job; YARN keeps tags in lower case, as UUIDs are.
JOB_TAG_PREFIX = "airflow-commit-job-"
#: The conf that lets YARN start the driver again in a new AM container, and the only value allowed.
MAX_APP_ATTEMPTS = ("spark.yarn.maxAppAttempts", "1")
_YARN_TAGS = "spark.yarn.tags"
#: The state of a stored YARN application the ResourceManager no longer lists (it ended long ago).
FORGOTTEN = "FORGOTTEN"
_TRACKED_BY = {
    "yarn": "the YARN ResourceManager's REST API",
    "kubernetes": "the Kubernetes API",
    "standalone": "the standalone master's driver status",
}


def job_tag(job_id: str) -> str:
    """The YARN application tag naming `job_id`."""
    return f"{JOB_TAG_PREFIX}{job_id}".lower()


@dataclass(frozen=True)
class SubmissionMode:
    """How a try's application is followed and found again."""

    tracking: str | None
    """``yarn``, ``kubernetes`` or ``standalone``: spark-submit returns once the application is
    submitted and the try waits through the cluster; None: spark-submit waits for it."""
    durable: bool
    """Whether the application is stored and a retry reconnects to it."""
    yarn_cluster: bool = False
    """Whether the driver runs in YARN's application master (:func:`yarn_cluster_conf` applies)."""

    def describe(self) -> str:
        """The log line saying which protocol holds for this try."""
        if self.tracking is None:
            return (
                "Durable submission does not apply (spark-submit waits for the application here: client "
                "mode, a local master, or no cluster tracking): a retry adopts or fences this try's job"
            )
        tracked = f"the application is followed through {_TRACKED_BY[self.tracking]}"
        if not self.durable:
            return f"Not durable (durable=False): {tracked}; a retry adopts or fences this try's job"
        return (
            f"Durable submission: {tracked} and stored in the task state store; a retry waits for it "
            "to end, then adopts or fences its job"
        )


def submission_mode(hook: CommittedSparkSubmitHook, durable: bool) -> SubmissionMode:
    """The mode of `hook`'s submissions, with the provider's refusals (same conditions, one line)."""
    if getattr(hook, "_track_driver_via_k8s_api", False):
        hook._validate_track_driver_via_k8s_api_config()
    if hook.is_yarn_cluster_mode and hook.tracking is None and durable:
        raise ValueError(
            "YARN cluster mode with durable=True requires yarn_track_via_rm_api=True: the RM REST API is "
            "needed to find the application on retry (or set durable=False)"
        )
    if hook.tracking == "yarn":
        hook._validate_yarn_track_via_rm_api_config()
    return SubmissionMode(hook.tracking, durable and hook.tracking is not None, hook.is_yarn_cluster_mode)


def yarn_cluster_conf(conf: Mapping[str, Any], job_id: str) -> dict[str, str]:
    """The confs a YARN cluster-mode application of `job_id` gets on top of `conf`: its job's tag
    (after the user's tags) and a single AM attempt; a ValueError for ``maxAppAttempts`` above 1."""
    key, single = MAX_APP_ATTEMPTS
    attempts = str(conf.get(key, single)).strip()
    if attempts != single:
        raise ValueError(
            f"conf {key}={attempts}: a second AM attempt runs the driver and its job again in the same "
            f"application, which a committed try does not follow; leave it unset or {single}"
        )
    tags = [tag.strip() for tag in str(conf.get(_YARN_TAGS) or "").split(",") if tag.strip()]
    return {key: single, _YARN_TAGS: ",".join([*tags, job_tag(job_id)])}


@dataclass(frozen=True)
class StoredApplication:
    """What the task state store keeps of the application a try submitted (:data:`APPLICATION_KEY`)."""

    application_id: str
    job_id: str
    try_number: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: Any) -> StoredApplication:
        """Parse the stored value; a ValueError naming the key for anything else."""
        if isinstance(value, str):  # a value written as a JSON string
            try:
                value = json.loads(value)
            except ValueError:
                value = None
        try:
            return cls(str(value["application_id"]), str(value["job_id"]), int(value["try_number"]))
        except (TypeError, KeyError, ValueError):
            raise ValueError(
                f"task state store key {APPLICATION_KEY!r} holds {value!r}, not "
                '{"application_id", "job_id", "try_number"}'
            ) from None


class StateStore(Protocol):
    """Airflow's ``context["task_state_store"]`` (3.3+): what this module uses of it."""

    def get(self, key: str, default: Any = None) -> Any: ...
    def set(self, key: str, value: Any) -> None: ...
    def delete(self, key: str) -> None: ...


class TrackingOperator(Protocol):
    """The provider's ``SparkSubmitOperator``: its resumable-job methods act on its ``_hook``."""

    _hook: Any

    def submit_job(self, context: Context) -> Any: ...
    def get_job_status(self, external_id: Any, context: Context) -> str: ...
    def is_job_active(self, status: str) -> bool: ...
    def poll_until_complete(self, external_id: Any, context: Context) -> None: ...


class ProviderTracking:
    """The provider's submit, status and wait for one hook's application, and the task state store.

    The provider's ``SparkSubmitOperator`` methods (``submit_job``, ``get_job_status``,
    ``is_job_active``, ``poll_until_complete``, backed by its private per-mode backends) do the work;
    they act on the operator's ``_hook``, which is set to this try's hook first.
    """

    def __init__(self, operator: TrackingOperator, hook: CommittedSparkSubmitHook, context: Context) -> None:
        self.operator, self.hook, self.context = operator, hook, context
        operator._hook = hook

    @property
    def state_store(self) -> StateStore | None:
        return self.context.get("task_state_store")

    def submit(self) -> str:
        """spark-submit until the application is submitted (the provider's ``submit_job``); its ID."""
        return str(self.operator.submit_job(self.context))

    def is_active(self, application: EarlierApplication) -> tuple[bool, str]:
        """Whether the application may still run its driver, and its status as the cluster says it
        (as the ResourceManager listed it, on YARN)."""
        if application.listed_state is not None:
            return application.listed_state in YARN_ACTIVE_STATES, application.listed_state
        status = self.operator.get_job_status(application.application_id, self.context)
        return self.operator.is_job_active(status), status

    def wait(self, application_id: str) -> None:
        """Until the application ends; raises if it did not succeed (the provider's polling)."""
        self.operator.poll_until_complete(application_id, self.context)

    def stored(self) -> StoredApplication | None:
        """The application a try of this task instance stored last, if any."""
        store = self.state_store
        value = store.get(APPLICATION_KEY) if store is not None else None
        return None if value is None else StoredApplication.from_json(value)

    def store(self, application: StoredApplication) -> bool:
        """Keep `application` for a retry; False when this Airflow has no task state store."""
        store = self.state_store
        if store is None:
            return False
        store.set(APPLICATION_KEY, application.to_json())
        if self.hook.tracking == "kubernetes":
            # The provider caches a driver pod's "Succeeded" under its own key, which it reads before
            # asking Kubernetes about any pod: an earlier pod's must not answer for this one.
            store.delete(getattr(self.operator, "_K8S_DRIVER_STATUS_KEY", "k8s_driver_status"))
        return True


@dataclass(frozen=True)
class EarlierApplication:
    """An application an earlier try may have left running, and how the retry found it."""

    application_id: str
    found: str
    """How: stored by a try, or found by its job's tag."""
    listed_state: str | None = None
    """On YARN, the state the ResourceManager listed it in (``FORGOTTEN`` when it no longer knows a
    stored one, which ended long ago); None: the cluster is asked (the provider's status)."""


def earlier_applications(tracking: ProviderTracking, job_ids: Sequence[str]) -> list[EarlierApplication]:
    """The applications earlier tries may have left running: the one the task state store holds,
    and on YARN every one tagged with one of `job_ids` (the earlier tries' jobs,
    :func:`~airflow_commit_provider.tries.plan.find_tried_jobs`) or with the stored one's job."""
    stored = tracking.stored()
    if tracking.hook.tracking != "yarn":
        return [] if stored is None else [EarlierApplication(stored.application_id, _stored_by(stored))]
    tagged = [*job_ids, *([stored.job_id] if stored is not None else [])]
    listed = {
        app.application_id: app for app in tracking.hook.yarn_applications_tagged(job_tag(j) for j in tagged)
    }
    found: list[EarlierApplication] = []
    if stored is not None:
        app = listed.pop(stored.application_id, None)
        state = app.state if app is not None else FORGOTTEN
        found.append(EarlierApplication(stored.application_id, _stored_by(stored), state))
    for app in listed.values():
        found.append(
            EarlierApplication(
                app.application_id, f"found by its tag {', '.join(sorted(app.tags))}", app.state
            )
        )
    return found


def _stored_by(stored: StoredApplication) -> str:
    return f"stored by try {stored.try_number} for job {stored.job_id}"
