-- One row per billing month × cluster × GPU model × the next 3 months: the demand forecast
-- made from the months up to this one, and when allocation would cross the capacity threshold
-- at that trend. History: the model's allocated GPU-hours of the last 12 months in
-- month_trends (gaps allowed); method: the least-squares line through them (x: month number),
-- extended 1, 2 and 3 months; band: ± 1.96 × the residual standard error × √(1 + 1/n + (x −
-- x̄)² / Σ(x − x̄)²) (a 95 % prediction interval), from 3 months of history on; below 2 months,
-- no forecast. Sums are exact (DECIMAL hours), so the same months give the same forecast.
--   capacity_gpu_hours            this month's (the inventory assumed unchanged)
--   forecast_allocation_rate_pct  100 × forecast / capacity
--   threshold_pct                 expand_allocation_pct() (80: capacity_evidence's rule)
--   threshold_month               the first month whose trend value reaches the threshold
--                                 (NULL: already above it, or the trend does not rise)
--   trend_verdict                 the sentence the Trends sheet shows
-- Parameters: $billing_month.
with history as (
    select
        cluster,
        gpu_model,
        datediff('month', $billing_month::date, billing_month) as x,
        -- 38 digits: y × y must not overflow
        round(allocated_gpu_hours, 6)::decimal(38, 6) as y
    from month_trends
    where level = 'cluster_gpu_model'
        and billing_month > $billing_month::date - interval 12 month
        and billing_month <= $billing_month::date
        and allocated_gpu_hours is not null
),

current_month as (
    select cluster, gpu_model, capacity_gpu_hours, allocation_rate_pct
    from month_trends
    where level = 'cluster_gpu_model' and billing_month = $billing_month::date
),

sums as (
    select
        cluster,
        gpu_model,
        count(*) as n,
        sum(x) as sx,
        sum(x * x) as sxx,
        sum(y) as sy,
        sum(x * y) as sxy,
        sum(y * y) as syy
    from history
    group by all
),

fits as (
    -- n·Σ(x − x̄)² and n·Σ(x − x̄)(y − ȳ) from the exact sums; the line through the points
    select
        *,
        n * sxx - sx * sx as n_sxx,
        n * sxy - sx * sy as n_sxy
    from sums
),

slopes as (
    select *, case when n >= 2 then n_sxy::double / n_sxx end as slope
    from fits
),

lines as (
    select
        *,
        (sy::double - slope * sx) / n as intercept,
        -- residual standard error: √(SSE / (n − 2)), SSE = (n·Σy² − (Σy)² − slope·n_sxy) / n
        case
            when n >= 3
                then sqrt(greatest((n * syy - sy * sy - slope * n_sxy)::double / n, 0) / (n - 2))
        end as residual_se
    from slopes
),

horizons as (
    select unnest(range(1, 4)) as horizon_months
),

forecasts as (
    select
        c.cluster,
        c.gpu_model,
        c.capacity_gpu_hours,
        c.allocation_rate_pct,
        l.n,
        l.slope,
        l.intercept,
        h.horizon_months,
        l.intercept + l.slope * h.horizon_months as trend_gpu_hours,
        1.96 * l.residual_se * sqrt(
            1 + 1 / l.n + (h.horizon_months - l.sx / l.n) ^ 2 * l.n / l.n_sxx
        ) as band_gpu_hours
    from current_month as c
    join lines as l using (cluster, gpu_model)
    cross join horizons as h
),

crossings as (
    -- months ahead when the line reaches the threshold (x of this month is 0); demand is never
    -- below 0
    select
        *,
        case when trend_gpu_hours is not null then greatest(trend_gpu_hours, 0) end
            as forecast_gpu_hours,
        case
            when allocation_rate_pct < expand_allocation_pct() and slope > 0
                then greatest(ceil(
                    (expand_allocation_pct() / 100 * capacity_gpu_hours - intercept) / slope
                ), 1)::integer
        end as months_to_threshold
    from forecasts
)

select
    $billing_month::date as billing_month,
    cluster,
    gpu_model,
    horizon_months,
    ($billing_month::date + to_months(horizon_months))::date as forecast_month,
    n as history_months,
    case
        when n < 2 then format('too little history ({} month)', n)
        else format('least-squares line through {} months of allocated GPU-hours', n)
    end as method,
    forecast_gpu_hours,
    -- (greatest() would make a missing band 0: DuckDB's greatest skips NULLs)
    case when band_gpu_hours is not null then greatest(trend_gpu_hours - band_gpu_hours, 0) end
        as low_gpu_hours,
    trend_gpu_hours + band_gpu_hours as high_gpu_hours,
    capacity_gpu_hours,
    100.0 * forecast_gpu_hours / nullif(capacity_gpu_hours, 0) as forecast_allocation_rate_pct,
    expand_allocation_pct() as threshold_pct,
    ($billing_month::date + to_months(months_to_threshold))::date as threshold_month,
    case
        when n < 2 then 'no trend yet: one month of history'
        when allocation_rate_pct is null then 'allocation unknown (no inventory)'
        when allocation_rate_pct >= expand_allocation_pct()
            then format(
                'allocation {:.1f}% is at or above {:g}% already', allocation_rate_pct,
                expand_allocation_pct()
            )
        when slope <= 0
            then format(
                'allocation {:.1f}%, not rising: no crossing of {:g}% at this trend',
                allocation_rate_pct, expand_allocation_pct()
            )
        else
            format(
                'allocation {:.1f}%, rising {:.0f} GPU-hours a month: {:g}% reached in {} at '
                || 'this trend', allocation_rate_pct, slope, expand_allocation_pct(),
                strftime($billing_month::date + to_months(months_to_threshold), '%Y-%m')
            )
    end as trend_verdict
from crossings
order by cluster, gpu_model, horizon_months
