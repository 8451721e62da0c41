-- mapping_applies(mapping, for_account, moment): whether a tenants.yaml account mapping
-- (mapping: the catalog_account_tenants row's alias) maps a scheduler account or namespace at a
-- moment: its account, valid then ([valid_from, valid_to)). Of the mappings that apply, the
-- lowest priority wins (order by priority nulls last: an account none maps is 'unmapped').
create or replace macro mapping_applies(mapping, for_account, moment) as
mapping.account = for_account
and moment >= mapping.valid_from and moment < mapping.valid_to
