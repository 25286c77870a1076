"""The atheris targets' kept inputs, replayed without atheris: every target's `TestOneInput` over
its seed corpus and its crashers (tests/fuzz/atheris), so CI checks them cheaply and a finding,
once fixed, stays fixed. `make fuzz` runs the targets coverage-guided (scripts/atheris_campaign.py)."""

from __future__ import annotations

import pytest
from support.atheris_targets import corpus_dir, kept_inputs, load_target, target_names


@pytest.mark.parametrize("name", target_names())
def test_kept_inputs_are_accepted_or_refused_cleanly(name: str) -> None:
    target = load_target(name)
    assert any(corpus_dir(name).glob("*")), f"{name}: no seed corpus in {corpus_dir(name)}"
    for path in kept_inputs(name):
        data = path.read_bytes()
        assert len(data) <= target.MAX_LEN, f"{path}: longer than the campaign's -max_len={target.MAX_LEN}"
        try:
            target.TestOneInput(data)
        except Exception as error:  # an assertion of the rule, or any other exception
            raise AssertionError(f"{path}: {type(error).__name__}: {error}") from error


def test_every_entry_point_of_issue_21_has_a_target() -> None:
    """Job and task IDs, locations, names and modes, durations and sizes, every JSON file read
    from a store, write options and the Spark conf, CLI arguments."""
    assert set(target_names()) >= {
        "job_ids",
        "task_keys",
        "locations",
        "stored_uris",
        "cleanup_scopes",
        "committer_names",
        "conflict_modes",
        "durations",
        "sizes",
        "newer_than",
        "task_manifests",
        "pendingsets",
        "pending_commits",
        "job_outcomes",
        "success_files",
        "job_records",
        "upload_records",
        "partition_rows",
        "write_options",
        "cli_arguments",
    }
