"""The commit protocol every committer implements, as a template over shared stages.

Driver side: `setup_job`, `commit_job(committed)`, `abort_job`, `cleanup_job`.
Task side: `task_attempt(task, attempt)` gives an attempt with `setup_task`, `create_file`,
`needs_task_commit`, `commit_task`, `abort_task`.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping, Sequence
from typing import ClassVar, NoReturn

from airflow_commit_provider.core.committers.traits import CommitterTraits
from airflow_commit_provider.core.formats.attempts import FAILED, REFUSED, SPECULATIVE_LOST, LostAttempt
from airflow_commit_provider.core.formats.jsonio import now_millis
from airflow_commit_provider.core.formats.outcome import JobOutcome
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.iostats import IOStatistics
from airflow_commit_provider.core.layout import JobLayout, validate_job_id
from airflow_commit_provider.core.options import CommitOptions, TaskCommitResult
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages import (
    cleanup,
    commit_files,
    job_state,
    lists,
    load_manifests,
    lost_attempts,
    sources,
    success,
)
from airflow_commit_provider.core.stages.context import JobContext, ProgressCallback, log
from airflow_commit_provider.core.stages.errors import (
    CommitError,
    InvalidCommitDataError,
    JobFencedError,
    JobNotActiveError,
)
from airflow_commit_provider.core.stages.load_manifests import LoadedJob
from airflow_commit_provider.core.stages.manifests import ManifestDecoder, ManifestSummary
from airflow_commit_provider.core.stages.task_commit import (
    ManifestFile,
    attempt_holds_task_commit,
    read_manifest,
    save_task_manifest,
    task_commit_holder,
)
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError, Store, StoreError
from airflow_commit_provider.core.store.streams import PublishOnCloseStream


class Committer(abc.ABC):
    name: ClassVar[str]
    required_capabilities: ClassVar[tuple[str, ...]] = ()
    uses_magic_layout: ClassVar[bool] = False
    traits: ClassVar[CommitterTraits]
    decoder: ClassVar[ManifestDecoder]
    entry_action: ClassVar[commit_files.EntryAction | commit_files.CompleteUploads]

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

    def local_job_dir(self) -> str | None:
        """Where this job's tasks buffer output on local disk, if they do (the staging committers);
        the process that ran them removes it once the job is over."""
        return None

    def _check_store(self) -> None:
        self.traits.require_allowed(self.name, self.options.allow_unsafe_v2)
        for capability in self.required_capabilities:
            self.store.require(capability, f"the {self.name} committer")

    # Job --------------------------------------------------------------------------------------
    def setup_job(self) -> None:
        job_state.setup_job(self.context, self.required_capabilities, uploads=self.traits.family == "upload")

    @abc.abstractmethod
    def task_attempt(self, task: int, attempt: int) -> TaskAttempt: ...

    def commit_job(self, committed: Sequence[TaskCommitResult] | None = None) -> SuccessData:
        """Commit exactly the reported task attempts; with no list, resume an interrupted commit.

        A job past its commit point is rolled forward whoever asks; a fenced job is refused with
        JobFencedError once what it left is removed. See `stages.job_state` for the states.
        """
        self.context.count_store_requests_from_here()
        outcome = job_state.read_outcome(self.context)
        if outcome is None:
            return self._commit_to_the_end(committed)
        if not outcome.committing:
            self._refuse_fenced(outcome)
        if committed is not None and _attempt_ids(committed) != _attempt_ids(outcome.committed):
            raise CommitError(
                f"job {self.job_id}: a commit with a different task list is already under way "
                f"({self.layout.outcome})"
            )
        log.info(
            "job %s had already reached its commit point (%s): rolling it forward",
            self.job_id,
            self.layout.outcome,
        )
        return self._roll_forward(outcome, success.read_job_record(self.context))

    def abort_job(self, reason: str = "aborted") -> SuccessData | None:
        """Fence the job, or finish it if it already reached its commit point.

        Returns None when the job is aborted: nothing of it is visible or pending. Returns the
        job's SuccessData when it had reached its commit point: abort then completes the commit
        instead, because part of the output may already be visible.
        """
        self.context.count_store_requests_from_here()
        outcome = job_state.overrule_unreadable_outcome(
            self.context,
            JobOutcome(self.job_id, "abort", self.name, reason=reason, origin=self.options.origin),
            self._nothing_committed_yet,
        )
        if not outcome.committing:
            cleanup.discard_job(self.context)
            return None
        record = success.read_job_record(self.context)
        if record is None:
            log.warning(
                "job %s had already reached its commit point (%s): completing the commit instead of aborting",
                self.job_id,
                self.layout.outcome,
            )
        return self._roll_forward(outcome, record)

    def _nothing_committed_yet(self) -> bool:
        """Whether every committed task's manifest is readable and everything it names is still where
        task commit left it: then job commit cannot have started making anything visible."""
        ctx = self.context
        committed = []
        for status in ctx.store.list_files(ctx.layout.manifests_dir):
            try:
                manifest, _digest = read_manifest(ctx.store, status.path, self.decoder, "")
            except (InvalidCommitDataError, FileNotFoundInStoreError):
                return False
            committed.append(
                TaskCommitResult(
                    manifest.task_id,
                    manifest.task_attempt_id,
                    status.path.uri(),
                    manifest.files,
                    manifest.total_bytes,
                )
            )
        try:
            with self._load(committed) as loaded:
                sources.check_sources_exist(ctx, loaded.spool)
        except (InvalidCommitDataError, CommitError):
            return False
        return True

    def cleanup_job(self) -> None:
        outcome = job_state.read_outcome(self.context)
        if outcome is None or not outcome.committing:
            cleanup.discard_job(self.context)
            return
        record = success.read_job_record(self.context)
        if record is None:
            cleanup.cleanup_job(self.context, _attempt_ids(outcome.committed))
        else:
            self._clean_up_committed(outcome, record)

    def _clean_up_committed(self, outcome: JobOutcome, record: SuccessData) -> SuccessData:
        """Clean up a COMMITTED job; returns its record, into which its lost attempts are folded once
        it has ended (no attempt can note its end any more) and before their notes and work go."""
        cleanup.end_job(self.context)
        record = lost_attempts.fold_lost_attempts(
            self.context, outcome, record, records_uploads=self.traits.family == "upload"
        )
        cleanup.remove_job_files(self.context, _attempt_ids(outcome.committed), job_committed=True)
        return record

    def _refuse_fenced(self, outcome: JobOutcome) -> NoReturn:
        cleanup.discard_job(self.context)
        raise JobFencedError(
            f"job {self.job_id} was aborted ({outcome.reason or 'fenced'}, {self.layout.outcome}) "
            "before it could commit: its output was discarded"
        )

    def _commit_to_the_end(self, committed: Sequence[TaskCommitResult] | None) -> SuccessData:
        ctx = self.context
        try:
            job_state.require_active_job(ctx, "commit the job")
            if committed is None:
                raise CommitError(
                    f"job {self.job_id}: no committed task list was given and no commit is under way"
                )
            with ctx.statistics.timed("committer_commit_job"):
                loaded = self._load(committed)
                try:
                    with ctx.phase("checks"):
                        sources.check_sources_exist(ctx, loaded.spool)
                        self._before_entries(loaded)
                    # Before the commit point, so that its outcome names them (see `stages.lists`).
                    job_lists = lists.write_job_lists(ctx, loaded)
                except BaseException:
                    loaded.close()
                    raise
        except Exception:
            if job_state.read_outcome(ctx) is not None:  # decided elsewhere meanwhile: follow that
                return self.commit_job(committed)
            raise
        proposal = JobOutcome(
            self.job_id,
            "commit",
            self.name,
            tuple(committed),
            conflict_mode=self.options.conflict_mode,
            origin=self.options.origin,
            table=self.options.table,
            file_list=job_lists.file_list,
            partition_list=job_lists.partition_list,
        )
        try:
            with ctx.phase("commit point"):
                outcome = job_state.decide(ctx, proposal)
        except BaseException:
            loaded.close()
            raise
        if outcome is not proposal:
            loaded.close()
            return self.commit_job(committed)
        with ctx.statistics.timed("committer_commit_job"):
            return self._finish(outcome, loaded, job_lists)

    def _roll_forward(self, outcome: JobOutcome, record: SuccessData | None) -> SuccessData:
        """Finish a job past its commit point, given its record if it has one (then only cleanup
        may be left); every step is idempotent, so repeating is safe."""
        if record is not None:
            if not self.options.skip_cleanup:
                record = self._clean_up_committed(outcome, record)
            return record
        # The digests were checked by the driver that decided, against its tasks' own reports; an
        # outcome's copies are no better than the manifests they would check, so a changed byte there
        # must not leave a decided job unable to finish.
        undigested = [dataclasses.replace(result, digest=None) for result in outcome.committed]
        with self.context.statistics.timed("committer_commit_job"):
            loaded = self._load(undigested)
            try:
                job_lists = lists.lists_to_roll_forward(self.context, loaded, outcome)
            except BaseException:
                loaded.close()
                raise
            return self._finish(outcome, loaded, job_lists)

    def _finish(self, outcome: JobOutcome, loaded: LoadedJob, job_lists: lists.JobLists) -> SuccessData:
        ctx = self.context
        with loaded:
            if self.traits.partition_markers:
                with ctx.phase("remove partition markers"):
                    success.delete_partition_markers(ctx, loaded.spool)
            with ctx.phase("commit files"):
                commit_files.commit_entries(ctx, loaded.spool, self._entry_action(outcome))
            with ctx.phase(f"conflict mode {outcome.conflict_mode}"):
                self._after_entries(loaded, outcome)
            result = success.save_success(
                ctx, loaded, job_lists, per_partition=self.traits.partition_markers, table=outcome.table
            )
        log.info("job %s committed %d files, %d bytes", self.job_id, result.file_count, result.total_bytes)
        if not self.options.skip_cleanup:
            result = self._clean_up_committed(outcome, result)
        return result

    def _load(self, committed: Sequence[TaskCommitResult]) -> LoadedJob:
        with self.context.phase("load manifests"):
            return load_manifests.load_committed_manifests(
                self.context, committed, self.decoder, exclusive=self.traits.exclusive_task_commit
            )

    def _entry_action(self, outcome: JobOutcome) -> commit_files.EntryAction | commit_files.CompleteUploads:
        """How the decided job's entries are made visible: the committer's own action, unless its
        conflict mode asks for another (``replace`` on a rename store stages them, `PartitionSwapping`)."""
        return type(self).entry_action

    def _before_entries(self, loaded: LoadedJob) -> None:  # noqa: B027 - optional stage hook
        """Committer-specific checks that can still refuse the job (e.g. conflict_mode='fail')."""

    def _after_entries(self, loaded: LoadedJob, outcome: JobOutcome) -> None:  # noqa: B027 - optional stage hook
        """Committer-specific steps after the entries are visible (e.g. conflict_mode='replace').

        They follow the decision (`outcome`), not this committer's options: whoever rolls a
        commit forward applies the conflict mode the job committed with.
        """


def _attempt_ids(committed: Sequence[TaskCommitResult]) -> set[str]:
    return {result.task_attempt_id for result in committed}


class TaskAttempt(abc.ABC):
    def __init__(self, committer: Committer, task: int, attempt: int):
        self.committer = committer
        self.context = committer.context
        self.task_id = committer.layout.task_id(task)
        self.task_attempt_id = committer.layout.task_attempt_id(task, attempt)
        self._store_mark = self.store.statistics.snapshot()
        self._started_at = now_millis()

    @property
    def store(self) -> Store:
        return self.committer.store

    def store_requests(self) -> IOStatistics:
        """The store requests made since this attempt began, for its manifest's `iostatistics`
        (job commit adds them up into `_SUCCESS`, as Hadoop's committers do)."""
        return self.store.statistics.counters_since(self._store_mark)

    def setup_task(self) -> None:
        """Refuse to start an attempt of a job that is over, as Hadoop's task setup does.

        Otherwise a late attempt would recreate the job's work directories after cleanup.
        Work areas themselves are created lazily.
        """
        job_state.require_active_job(self.context, f"set up task attempt {self.task_attempt_id}")

    @abc.abstractmethod
    def create_file(self, relative_path: str) -> PublishOnCloseStream:
        """A stream for one output file at `destination/relative_path`: close it to keep the file,
        discard it (or leave a `with` block by an exception) to drop it, whatever the committer."""

    @abc.abstractmethod
    def needs_task_commit(self) -> bool: ...

    @abc.abstractmethod
    def commit_task(
        self, rows: int | None = None, partition_rows: Mapping[str, int] | None = None
    ) -> TaskCommitResult:
        """Commit this attempt's files; `rows` it wrote in all, `partition_rows` per partition directory."""

    def abort_task(self) -> None:
        """Discard this attempt's output, as Spark's abortTask; unless the attempt holds its task's
        commit (which a later attempt adopts), it leaves a note for the job record: it lost to the
        attempt that holds the commit (a speculative copy, or the original a copy outran), or, with
        none but its own (which the last-wins committers let a retry replace), it failed and its
        task is retried. Once the job is over, or at a destination where it was never set up, it
        leaves nothing at all (`_leave_note`)."""
        if self.discard_output():
            holder = task_commit_holder(self.context, self.task_id, self.committer.decoder)
            if holder is None or holder == self.task_attempt_id:  # its own commit, which a retry replaces
                self._leave_note(FAILED)
            else:
                self._leave_note(SPECULATIVE_LOST, winner=holder)

    @abc.abstractmethod
    def discard_output(self) -> bool:
        """Remove what this attempt wrote, leaving no note (an attempt with nothing to commit, or
        one of a job that is over); False if it was kept, being its task's commit."""

    def destination_of(self, relative_path: str) -> StorePath:
        return self.committer.destination.join(relative_path)

    def _summary(self, files: int, total_bytes: int, rows: int | None) -> ManifestSummary:
        """What this attempt's manifest says of it, for its task commit result."""
        return ManifestSummary(
            self.committer.job_id, self.task_id, self.task_attempt_id, files, total_bytes, rows=rows
        )

    def _publish(self, manifest: ManifestFile) -> TaskCommitResult:
        try:
            result = save_task_manifest(
                self.context,
                manifest,
                self.committer.decoder,
                exclusive=self.committer.traits.exclusive_task_commit,
            )
        except JobNotActiveError:
            self._discard_late()
            raise
        if result.adopted_from is not None:
            self._leave_note(REFUSED, winner=result.task_attempt_id)
            return result
        return dataclasses.replace(result, started_at=self._started_at, committed_at=now_millis())

    def _require_active_job(self) -> None:
        """Refuse to commit (and discard this attempt's output) once the job is committed or aborted."""
        try:
            job_state.require_active_job(self.context, f"commit task attempt {self.task_attempt_id}")
        except JobNotActiveError:
            self._discard_late()
            raise

    def _discard_late(self) -> None:
        """Discard the output of an attempt whose job is over, and the folders of the job's tree
        that its writes recreated: an attempt that wakes up after its job ended changes nothing."""
        self.discard_output()
        self._remove_emptied_dirs()

    def _remove_emptied_dirs(self) -> None:
        """On stores with folders, remove those of the job's tree that this attempt's writes made
        and its discards or take-backs emptied, once the job is over: its cleanup has run or is
        running, and deletes only what it finds. Only empty folders go, only along this attempt's
        own paths (`JobLayout.attempt_dirs`), never the destination itself."""
        layout = self.context.layout
        for directory in layout.attempt_dirs(self.task_attempt_id):
            self.store.remove_empty_dirs(directory, layout.destination)

    def _leave_note(self, outcome: str, winner: str | None = None) -> None:
        """Note how this attempt ended for its job's record (`formats.attempts`); one PUT and two
        HEADs, in the rare attempt that loses. One that cannot be written is only missed by the
        report (which then calls the attempt killed).

        Only while the job is live (continuity of correctness: an attempt that wakes up after job
        commit or abort changes nothing). Once the job is over its record is made, or there is
        none, and a note would outlive the cleanup that has run; so is one at a destination where
        the job was never set up. The job is checked before writing; a note written as the job
        ended is taken back, with the folders its write recreated."""
        note = LostAttempt(
            self.task_id, self.task_attempt_id, outcome, self._started_at, now_millis(), winner
        )
        path = self.context.layout.attempt_note(self.task_attempt_id)
        try:
            if job_state.job_is_active(self.context):
                self.store.write_bytes(path, note.to_note())
                if job_state.job_is_active(self.context):
                    return
                self.store.delete(path)
            self._remove_emptied_dirs()
        except StoreError as error:
            log.warning(
                "task attempt %s: could not note its end (%s): %s", self.task_attempt_id, outcome, error
            )

    def _holds_task_commit(self) -> bool:
        """Whether this attempt's commit is its task's commit in the active job (abort must keep it)."""
        return attempt_holds_task_commit(
            self.context, self.task_id, self.task_attempt_id, self.committer.decoder
        )
