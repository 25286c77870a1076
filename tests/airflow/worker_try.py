"""One try of CommittedSparkSubmitOperator in a process of its own, as an Airflow worker runs it.

A test SIGKILLs this process the way a worker dies (OOM, node loss): ``on_kill`` never runs, and
the spark-submit it started lives on in its own session. Usage::

    worker_try.py '{"operator": {...keyword arguments...}, "ti": {"dag_id": ..., "try_number": 1}}'
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from airflow_commit_provider.operators.spark_submit import CommittedSparkSubmitOperator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `support`
from support.task_instances import task_instance


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    operator = CommittedSparkSubmitOperator(task_id=spec["ti"]["task_id"], **spec["operator"])
    print(json.dumps(operator.execute({"ti": task_instance(**spec["ti"])})), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
