"""The report writers of a billing month, without Dagster: one module per output (the finance
workbook, the department workbook and page), the sheet kit they share (`sheets`), the streamed
XLSX sheet (`streamed_sheet`), the report queries (`queries`, SQL in `sql/reports/`) and the
figure definitions (`definitions`, wording in `reports/definitions.yaml`). The Dagster assets
that call them are in `pipelines/defs/reports/`.
"""
