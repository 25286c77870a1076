# Entry points. Every target bootstraps first (idempotent, fast when nothing changed):
# .venv, the package in editable mode with [test,embedded-s3,bench,docs], pyspark/pyspark-client guard, Java 17+.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PY := .venv/bin/python
PYTEST_ARGS ?=
# Examples per Hypothesis fuzz target for `make fuzz-hypothesis` (the suite's bounded run takes 150).
FUZZ_EXAMPLES ?= 20000
# Runs per atheris target for `make fuzz-atheris`: 20 targets x 60000 = 1.2 million executions.
FUZZ_RUNS ?= 60000
# e.g. BENCH_ARGS='--scenario job_commit --size tiny --repeat 1' (see python -m bench --help)
BENCH_ARGS ?=

# Spark's Python workers start `python3` from PATH unless told otherwise; without this they would not
# see the venv's pyarrow (mapInArrow fails with "No module named 'pyarrow'").
PYSPARK_PYTHON ?= $(CURDIR)/.venv/bin/python
PYSPARK_DRIVER_PYTHON ?= $(CURDIR)/.venv/bin/python
export PYSPARK_PYTHON PYSPARK_DRIVER_PYTHON

.PHONY: help bootstrap demo test test-fast compat release-check lint docs bench fuzz fuzz-atheris fuzz-hypothesis

help:
	@echo "make demo   - runs the daily ingest DAG end to end (local Spark, embedded S3), prints _SUCCESS"
	@echo "make test   - the whole test suite and make compat, in three lanes at once (PYTEST_ARGS='-k ...' narrows"
	@echo "              it to one pytest run and skips compat)"
	@echo "make test-fast - what a developer runs before pushing (< 5 min): TEST_FAST_FILES, no Spark or services"
	@echo "make compat - the compatibility run: the oldest supported set (constraints/oldest.txt, Python 3.10)"
	@echo "make release-check - the sdist and wheel built, twine check, the wheel installed into a fresh venv"
	@echo "              and listed by airflow providers list (~2 min; also in make test's side lane)"
	@echo "make lint   - ruff check + ruff format --check + mypy (the package and bench/) + lint-imports (the"
	@echo "              layer contract in pyproject.toml)"
	@echo "make fuzz   - the fuzz campaigns, fuzz-atheris then fuzz-hypothesis (both run, whatever the first finds)"
	@echo "make fuzz-atheris    - coverage-guided: tests/fuzz/atheris, FUZZ_RUNS (default 60000) runs per target;"
	@echo "                       prints executions, coverage (cov, ft), corpus size and findings per target"
	@echo "make fuzz-hypothesis - tests/fuzz with FUZZ_EXAMPLES (default 20000) examples per target;"
	@echo "                       prints executions, package lines reached and findings per target"
	@echo "make docs   - the documentation site (Sphinx, docs/) into build/docs, warnings as errors"
	@echo "make bench  - benchmarks (bench/; BENCH_ARGS='--scenario X --size tiny|small|full')"

bootstrap:
	@bash scripts/bootstrap.sh

demo: bootstrap
	$(PY) -m airflow_commit_provider.devtools.demo

# scripts/test.sh: the full run (no PYTEST_ARGS, as .ci/run) runs three lanes at once (the main suite;
# the deployment, cluster, benchmark and Airflow tests; the compatibility run, then the table, dev-tool
# and cleanup tests); it fails if any did. With PYTEST_ARGS, one pytest run. pytest's exit 5 (no tests
# collected) is a failure either way.
test: bootstrap
	@VENV_PYTHON=$(PY) bash scripts/test.sh $(PYTEST_ARGS)

# The inner loop: the core protocol on the local store and the embedded S3, formats, conflicts, the
# store contract, the commit operations seam (and its check that only it makes multipart calls),
# tries and the fuzz replays; no Spark, Airflow or cluster. Chosen by measured
# durations: 438 passed in 109 s at load 4-6 on the 2-core host (test_commit_bad_input left out:
# one of its cases alone took 88 s).
TEST_FAST_FILES := tests/core/test_commit_formats.py tests/core/test_commit_conflicts.py \
	tests/core/test_store_contract.py tests/core/test_store_settings.py tests/core/test_commit_operations.py \
	tests/success/test_success_expectations.py tests/tries/test_tries.py tests/tries/test_try_workdirs.py \
	tests/core/test_entry_spool.py tests/core/test_records_index.py tests/core/test_location_contract.py \
	tests/fuzz/test_atheris_regressions.py tests/fuzz/test_fuzz_protocol.py tests/fuzz/test_fuzz_commit_files.py
test-fast: bootstrap
	$(PY) -m pytest -q $(TEST_FAST_FILES) $(PYTEST_ARGS)

# The oldest set we support (scripts/compat.sh: its own cached venv outside the checkout).
compat: bootstrap
	@bash scripts/compat.sh

# What a release must pass before its upload (tests/deployment/test_release.py; make test runs it in
# the side lane with the deployment, which installs the same wheel).
release-check: bootstrap
	$(PY) -m pytest -q -p no:cacheprovider tests/deployment/test_release.py $(PYTEST_ARGS)

lint:
	@bash scripts/bootstrap.sh --no-java
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy
	.venv/bin/lint-imports --no-cache

# The documentation site: docs/ (MyST Markdown, references generated from the code) into build/docs,
# which git ignores. -E: a fresh environment, so the generated references follow the code; -W
# --keep-going: every warning is reported, and any fails the build (tests/docs runs this target).
DOCS_BUILD ?= build/docs
docs:
	@bash scripts/bootstrap.sh --no-java
	$(PY) -m sphinx -W --keep-going -E -q -b html docs $(DOCS_BUILD)
	@echo "make docs: $(DOCS_BUILD)/index.html"

bench: bootstrap
	$(PY) -m bench $(BENCH_ARGS)

fuzz:
	@rc=0; $(MAKE) --no-print-directory fuzz-atheris || rc=$$?; \
	$(MAKE) --no-print-directory fuzz-hypothesis || rc=$$?; \
	exit "$$rc"

# Every atheris target (tests/fuzz/atheris) under libFuzzer, one subprocess each, our package
# instrumented; findings land in tests/fuzz/atheris/crashers/<target>/, which the suite replays.
fuzz-atheris:
	@bash scripts/bootstrap.sh --no-java --fuzz
	FUZZ_RUNS=$(FUZZ_RUNS) nice -n 10 $(PY) scripts/atheris_campaign.py

# The suite runs tests/fuzz bounded (150 examples per target); this is the long campaign. Its report
# (tests/fuzz/conftest.py) lists each target's executions, lines reached and finding. Every target
# runs to its budget (no -x), so one finding does not hide another's; no per-test timeout: a
# campaign target runs for minutes by design.
fuzz-hypothesis:
	@bash scripts/bootstrap.sh --no-java
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FUZZ_COVERAGE=1 $(PY) -m pytest tests/fuzz -q -p no:cacheprovider --timeout=0 $(PYTEST_ARGS)
