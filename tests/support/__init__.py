"""Reusable helpers for the commit-protocol correctness tests.

- `faults`: a store wrapper that injects a failure (or a process death) at any store call;
- `invariants`: checks of the final store state (complete, exclusive, nothing left behind);
- `workload`: committers by store, attempt-tagged file contents, task/job drivers.

Import as `support.<module>`: `tests/` is on `sys.path` because `tests/conftest.py` is a rootdir
conftest outside any package.
"""
