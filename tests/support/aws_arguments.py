"""The Amazon provider's AWS arguments as a DAG author templates them, for our operators and sensor."""

from __future__ import annotations

from typing import Any

CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
REGION = "us-west-1"
#: aws_conn_id, region_name and verify, each from a template.
TEMPLATED_AWS_ARGUMENTS = {
    "aws_conn_id": "{{ params.conn }}",
    "region_name": "{{ params.region }}",
    "verify": "{{ params.bundle }}",
}


def render_aws_arguments(task: Any, conn_id: str) -> None:
    """Render ``TEMPLATED_AWS_ARGUMENTS`` as Airflow does, after checking they are template fields and
    ``botocore_config`` is not, as in the Amazon provider's operators and sensors."""
    assert set(TEMPLATED_AWS_ARGUMENTS) <= set(task.template_fields)
    assert "botocore_config" not in task.template_fields
    task.render_template_fields({"params": {"conn": conn_id, "region": REGION, "bundle": CA_BUNDLE}})
    assert (task.aws_conn_id, task.region_name, task.verify) == (conn_id, REGION, CA_BUNDLE)
