"""The commit protocol every committer implements, as a template over shared stages.

Driver side: `setup_job`, `commit_job(committed)`, `abort_job`, `cleanup_job`.
Task side: `task_attempt(task, attempt)` gives an attempt with `setup_task`, `create_file`,
`needs_task_commit`, `commit_task`, `abort_task`.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Sequence
from typing import BinaryIO, ClassVar

from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.layout import JobLayout, validate_job_id
from airflow_commit_provider.core.options import CommitOptions, TaskCommitResult
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages import cleanup, commit_files, job_state, load_manifests, success
from airflow_commit_provider.core.stages.context import JobContext, ProgressCallback, log
from airflow_commit_provider.core.stages.errors import CommitError, InvalidCommitDataError, JobNotActiveError
from airflow_commit_provider.core.stages.load_manifests import LoadedJob
from airflow_commit_provider.core.stages.manifests import LoadedManifest, ManifestDecoder
from airflow_commit_provider.core.stages.task_commit import attempt_holds_task_commit, save_task_manifest
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError, Store


class Committer(abc.ABC):
    name: ClassVar[str]
    required_capabilities: ClassVar[tuple[str, ...]] = ()
    uses_magic_layout: ClassVar[bool] = False
    exclusive_task_commit: ClassVar[bool] = True
    """Whether a task's first committed attempt wins (needs create-if-absent) or the last does."""
    decoder: ClassVar[ManifestDecoder]
    entry_action: ClassVar[commit_files.EntryAction]

    def __init__(
        self,
        store: Store,
        destination: str | StorePath,
        job_id: str,
        options: CommitOptions | None = None,
        progress: ProgressCallback | None = None,
    ):
        self.store = store
        self.destination = StorePath.parse(destination)
        self.options = options or CommitOptions()
        layout = JobLayout(self.destination, validate_job_id(job_id), magic=self.uses_magic_layout)
        self.context = JobContext(store, layout, self.name, self.options, progress=progress)
        self._check_store()

    @property
    def job_id(self) -> str:
        return self.context.job_id

    @property
    def layout(self) -> JobLayout:
        return self.context.layout

    def _check_store(self) -> None:
        for capability in self.required_capabilities:
            self.store.require(capability, f"the {self.name} committer")

    # Job --------------------------------------------------------------------------------------
    def setup_job(self) -> None:
        job_state.setup_job(self.context, self.required_capabilities)

    @abc.abstractmethod
    def task_attempt(self, task: int, attempt: int) -> TaskAttempt: ...

    def commit_job(self, committed: Sequence[TaskCommitResult] | None = None) -> SuccessData:
        """Commit exactly the reported task attempts; with no list, resume an interrupted commit."""
        ctx = self.context
        previous = success.read_success(ctx)
        if previous is not None and previous.job_id == self.job_id:
            log.info("job %s is already committed", self.job_id)
            if not self.options.skip_cleanup:
                # An interrupted cleanup may have deleted the job marker but not the job directory:
                # cleanup is idempotent, so finish it whatever state it reached.
                self.cleanup_job()
            return previous
        job_state.require_active_job(ctx, "commit the job")
        committed = self._commit_intent(committed)
        with ctx.statistics.timed("committer_commit_job"):
            loaded = load_manifests.load_committed_manifests(
                ctx, committed, self.decoder, exclusive=self.exclusive_task_commit
            )
            with loaded.spool:
                self._before_entries(loaded)
                commit_files.commit_entries(ctx, loaded.spool, type(self).entry_action)
                self._after_entries(loaded)
                result = success.save_success(ctx, loaded.spool, loaded.rows)
        log.info("job %s committed %d files, %d bytes", self.job_id, result.file_count, result.total_bytes)
        if not self.options.skip_cleanup:
            cleanup.cleanup_job(ctx, {r.task_attempt_id for r in committed})
        return result

    def _commit_intent(self, committed: Sequence[TaskCommitResult] | None) -> list[TaskCommitResult]:
        path = self.layout.commit_intent
        try:
            saved = json.loads(self.store.read_bytes(path))
        except FileNotFoundInStoreError:
            saved = None
        except ValueError as error:
            raise InvalidCommitDataError(f"{path}: corrupt commit intent: {error}") from error
        if saved is not None:
            recorded = [TaskCommitResult.from_json(item) for item in saved["committed"]]
            if committed is not None and {r.task_attempt_id for r in committed} != {
                r.task_attempt_id for r in recorded
            }:
                raise CommitError(
                    f"job {self.job_id}: a commit with a different task list is already under way ({path})"
                )
            return recorded
        if committed is None:
            raise CommitError(
                f"job {self.job_id}: no committed task list was given and no commit is under way"
            )
        payload = {"jobId": self.job_id, "committed": [r.to_json() for r in committed]}
        self.store.write_bytes(path, json.dumps(payload).encode("utf-8"))
        return list(committed)

    def _before_entries(self, loaded: LoadedJob) -> None:  # noqa: B027 - optional stage hook
        """Committer-specific checks before anything becomes visible (e.g. conflict_mode='fail')."""

    def _after_entries(self, loaded: LoadedJob) -> None:  # noqa: B027 - optional stage hook
        """Committer-specific steps after the entries are visible (e.g. conflict_mode='replace')."""

    def abort_job(self) -> None:
        """Discard all of this job's uncommitted work: uploads, temp files, manifests."""
        cleanup.cleanup_job(self.context, committed_attempts=set())

    def cleanup_job(self) -> None:
        committed = self._recorded_committed_attempts()
        cleanup.cleanup_job(self.context, committed)

    def _recorded_committed_attempts(self) -> set[str]:
        try:
            saved = json.loads(self.store.read_bytes(self.layout.commit_intent))
        except FileNotFoundInStoreError:
            return set()
        return {item["task_attempt_id"] for item in saved["committed"]}


class TaskAttempt(abc.ABC):
    def __init__(self, committer: Committer, task: int, attempt: int):
        self.committer = committer
        self.context = committer.context
        self.task_id = committer.layout.task_id(task)
        self.task_attempt_id = committer.layout.task_attempt_id(task, attempt)

    @property
    def store(self) -> Store:
        return self.committer.store

    def setup_task(self) -> None:
        """Refuse to start an attempt of a job that is over, as Hadoop's task setup does.

        Otherwise a late attempt would recreate the job's work directories after cleanup.
        Work areas themselves are created lazily.
        """
        job_state.require_active_job(self.context, f"set up task attempt {self.task_attempt_id}")

    @abc.abstractmethod
    def create_file(self, relative_path: str) -> BinaryIO:
        """A stream for one output file at `destination/relative_path`; close it to keep it."""

    @abc.abstractmethod
    def needs_task_commit(self) -> bool: ...

    @abc.abstractmethod
    def commit_task(self, rows: int | None = None) -> TaskCommitResult: ...

    @abc.abstractmethod
    def abort_task(self) -> None: ...

    def destination_of(self, relative_path: str) -> StorePath:
        return self.committer.destination.join(relative_path)

    def _publish(self, manifest: LoadedManifest, data: bytes) -> TaskCommitResult:
        try:
            return save_task_manifest(
                self.context,
                manifest,
                data,
                self.committer.decoder,
                exclusive=self.committer.exclusive_task_commit,
            )
        except JobNotActiveError:
            self.abort_task()  # the job is over: a late attempt discards its own output
            raise

    def _require_active_job(self) -> None:
        """Refuse to commit (and discard this attempt's output) once the job is committed or aborted."""
        try:
            job_state.require_active_job(self.context, f"commit task attempt {self.task_attempt_id}")
        except JobNotActiveError:
            self.abort_task()
            raise

    def _holds_task_commit(self) -> bool:
        """Whether this attempt's commit is its task's commit in the active job (abort must keep it)."""
        return attempt_holds_task_commit(
            self.context, self.task_id, self.task_attempt_id, self.committer.decoder
        )
