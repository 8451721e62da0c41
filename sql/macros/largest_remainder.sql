-- largest_remainder(floor_part, remainder, total, grp, tie): one part of `total` split over the
-- rows of a group (grp: a row() of the group's columns) in proportion to weights: floor_part is
-- total × weight // Σ weights, remainder total × weight % Σ weights. The rows with the largest
-- remainders (ties: tie ascending) get one unit more, as many rows as the floors fall short of
-- total, so the parts sum to total exactly and the same inputs always give the same parts.
create or replace macro largest_remainder(floor_part, remainder, total, grp, tie) as
floor_part + case
    when row_number() over (partition by grp order by remainder desc, tie)
        <= total - sum(floor_part) over (partition by grp)
        then 1
    else 0
end
