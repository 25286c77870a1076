"""``conflict_mode='replace'`` for the rename committers (manifest, file-v1): job commit swaps each
partition folder the job writes (`stages.swaps`), on a store that moves folders atomically."""

from __future__ import annotations

from airflow_commit_provider.core.committers.base import Committer
from airflow_commit_provider.core.formats.outcome import JobOutcome
from airflow_commit_provider.core.stages import commit_files, swaps
from airflow_commit_provider.core.stages.load_manifests import LoadedJob


class PartitionSwapping(Committer):
    """A rename committer whose ``replace`` swaps partitions (its traits say ``swaps_partitions``)."""

    def _check_store(self) -> None:
        super()._check_store()
        if self.options.conflict_mode == "replace":
            self.store.require(swaps.CAPABILITY, f"conflict_mode='replace' with the {self.name} committer")

    def _before_entries(self, loaded: LoadedJob) -> None:
        if self.options.conflict_mode == "replace":
            swaps.check_swappable(self.context, loaded.spool)

    def _entry_action(self, outcome: JobOutcome) -> commit_files.EntryAction | commit_files.CompleteUploads:
        if outcome.conflict_mode == "replace":
            return swaps.stage_entry
        return super()._entry_action(outcome)

    def _after_entries(self, loaded: LoadedJob, outcome: JobOutcome) -> None:
        if outcome.conflict_mode == "replace":
            swaps.swap_partitions(self.context, loaded.spool)
