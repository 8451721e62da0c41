-- rate_applies(rate, for_model, for_cluster, moment): whether a rates.yaml rate (rate: the
-- catalog_rates row's alias) applies to a GPU model on a cluster at a moment: its own model or
-- the '*' fallback, its own cluster or all clusters, in force at that moment. Of the rates that
-- apply, rate_precedence picks the one in force.
create or replace macro rate_applies(rate, for_model, for_cluster, moment) as
(rate.gpu_model = for_model or rate.gpu_model = '*')
and (rate.cluster = for_cluster or rate.cluster is null)
and moment >= rate.valid_from and moment < rate.valid_to
