-- unparsed(field, text, value, kind): the reject reason of an export field whose text did not
-- type, "field <field>: '<text>' is not a <kind>": when the text is given and its typed value
-- is NULL; else NULL, so that a row's reason can be the first of its checks that gives one
-- (coalesce).
create or replace macro unparsed(field, text, value, kind) as
case
    when text is not null and value is null
        then format('field {}: ''{}'' is not a {}', field, text, kind)
end
