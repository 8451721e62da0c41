-- normal_state(text): the normalised job state of DESIGN.md, or NULL when unknown.
-- `CANCELLED by 1234` is CANCELLED; Slurm abbreviations are accepted.
create or replace macro normal_state(value) as
    case upper(split_part(trim(value), ' ', 1))
        when 'COMPLETED' then 'COMPLETED' when 'CD' then 'COMPLETED'
        when 'FAILED' then 'FAILED' when 'F' then 'FAILED'
        when 'CANCELLED' then 'CANCELLED' when 'CA' then 'CANCELLED'
        when 'TIMEOUT' then 'TIMEOUT' when 'TO' then 'TIMEOUT'
        when 'OUT_OF_MEMORY' then 'OUT_OF_MEMORY' when 'OOM' then 'OUT_OF_MEMORY'
        when 'NODE_FAIL' then 'NODE_FAIL' when 'NF' then 'NODE_FAIL'
        when 'PREEMPTED' then 'PREEMPTED' when 'PR' then 'PREEMPTED'
        when 'RUNNING' then 'RUNNING' when 'R' then 'RUNNING'
        when 'PENDING' then 'PENDING' when 'PD' then 'PENDING'
    end
