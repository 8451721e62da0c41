-- known(text): NULL for the ways exports write "no value" (Slurm's Unknown / None /
-- None assigned, nvidia-smi's [N/A], empty), else the text itself.
create or replace macro known(value) as
case
    when upper(trim(value)) in ('', 'UNKNOWN', 'NONE', 'NONE ASSIGNED', '[N/A]', 'N/A')
        then null
    else value
end
