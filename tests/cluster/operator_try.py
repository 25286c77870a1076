"""One Airflow task try in a process of its own: ``CommittedSparkSubmitOperator.execute``.

    python operator_try.py SPEC.json

SPEC: ``{"operator": {...keyword arguments...}, "ti": {"dag_id", "task_id", "run_id", "map_index",
"try_number"}, "result": "path"}``. The operator is built inside a real DAG and executed with a
context whose ``ti`` carries the task instance key and try number, as the worker would give it;
the connections come from ``AIRFLOW_CONN_*`` in the environment. On return the XCom value goes to
``result`` as JSON (``{"ok": true, "summary": ...}``); on failure ``{"ok": false, "error": ...}``
and exit status 1. The tests SIGKILL this process to play a dead Airflow worker.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `support`
from support.task_instances import task_instance


def main(spec_path: str) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(levelname)s %(name)s: %(message)s")
    spec = json.loads(Path(spec_path).read_text())
    ti_fields: dict[str, Any] = spec["ti"]
    result = Path(spec["result"])

    from airflow.sdk import DAG

    from airflow_commit_provider.operators import CommittedSparkSubmitOperator

    with DAG(dag_id=ti_fields["dag_id"], schedule=None):
        operator = CommittedSparkSubmitOperator(task_id=ti_fields["task_id"], **spec["operator"])
    ti = task_instance(**ti_fields)
    context = {"ti": ti, "task_instance": ti, "run_id": ti_fields["run_id"], "dag_run": None}
    try:
        summary = operator.execute(context)  # type: ignore[arg-type]
    except BaseException as error:
        result.write_text(json.dumps({"ok": False, "error": type(error).__name__, "message": str(error)}))
        raise
    result.write_text(json.dumps({"ok": True, "summary": summary}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
