-- One row: whether the warehouse (its current database and schema) has the table $table.
-- Parameters: $table.
select count(*) > 0 as table_exists
from duckdb_tables()
where table_name = $table
    and schema_name = current_schema()
    and database_name = current_database()
