-- normal_state(text): the normalised job state of DESIGN.md, or NULL when unknown.
-- `CANCELLED by 1234` is CANCELLED; Slurm abbreviations and rarer states are accepted.
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
    -- rarer Slurm states, folded into the nearest normalised one
    when 'BOOT_FAIL' then 'NODE_FAIL' when 'BF' then 'NODE_FAIL'
    when 'DEADLINE' then 'TIMEOUT' when 'DL' then 'TIMEOUT'
    when 'SPECIAL_EXIT' then 'FAILED' when 'SE' then 'FAILED'
    when 'REVOKED' then 'CANCELLED' when 'RV' then 'CANCELLED'
    when 'SUSPENDED' then 'RUNNING' when 'S' then 'RUNNING'
    when 'RESIZING' then 'RUNNING' when 'RS' then 'RUNNING'
    when 'REQUEUED' then 'PREEMPTED' when 'RQ' then 'PREEMPTED'
end
