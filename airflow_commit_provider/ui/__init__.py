"""The commit report in the Airflow UI: the plugin's pages, served by the api-server.

The task's "Commit report" link to them is the operator's (`operators.report_link`); both sides
take the pages' addresses from `report.addresses`, below them.
"""
