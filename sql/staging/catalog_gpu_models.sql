-- One row per GPU model of settings.yaml gpu_memory_mib: the model's memory in MiB (as
-- nvidia-smi's memory.total reads it), which no telemetry export carries; user_efficiency
-- divides the memory used by it. A model without a row has no memory ratio. Written as
-- catalog_gpu_models_rows by catalog_tables.py.
select gpu_model, memory_mib
from catalog_gpu_models_rows
