-- rate_precedence(gpu_model, cluster, valid_from, priority): of the rates.yaml rates that apply
-- to a GPU model, cluster and moment, the one in force sorts first by this key: the model's own
-- rate before the '*' fallback, then the cluster's own before the all-clusters one, then the
-- version valid from latest, then the first in the catalog's order.
create or replace macro rate_precedence(gpu_model, cluster, valid_from, priority) as
row(gpu_model = '*', cluster is null, -epoch_us(valid_from), priority)
