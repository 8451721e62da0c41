-- One row per charge line of the billing month in FinOps FOCUS (1.x) columns, for FinOps
-- tools: costs are the line amount (no discounts: billed = effective = list = contracted),
-- the consumed quantity is GPU-hours, the sub-account is the tenant. A reserved quota's unused
-- part has CapacityReservationId = the quota ('tenant/pool') and CapacityReservationStatus
-- 'Unused'; other lines leave both empty (a usage line mixes time inside and beyond a
-- reservation, so it is not marked 'Used'). x_ChargeType is charge_lines.charge_type (usage,
-- credit, reserved_unused, idle_share, platform); x_MeasuredShare the share (0-1, 4 decimals)
-- of a usage or credit line's GPU time that telemetry measured (charge_line_coverage), empty for
-- the other lines.
-- FOCUS 1.2 (README 'FOCUS export'): ConsumedQuantity and ConsumedUnit are set on Usage lines
-- only (empty on Credit lines, corrections of credits included); PricingQuantity carries the
-- charge's sign (a credit's GPU-hours are negative), so ListUnitPrice × PricingQuantity =
-- ListCost on every line. InvoiceId is the tenant's invoice of the billing month, which a
-- correction restates. CommitmentDiscountStatus is always empty (no commitment discounts).
-- Parameters: $billing_month, $month_start, $month_end.
with final as (
    select
        amount as "BilledCost",
        amount as "EffectiveCost",
        amount as "ListCost",
        amount as "ContractedCost",
        currency as "BillingCurrency",
        strftime($month_start::timestamp, '%Y-%m-%dT%H:%M:%SZ') as "BillingPeriodStart",
        strftime($month_end::timestamp, '%Y-%m-%dT%H:%M:%SZ') as "BillingPeriodEnd",
        strftime($month_start::timestamp, '%Y-%m-%dT%H:%M:%SZ') as "ChargePeriodStart",
        strftime($month_end::timestamp, '%Y-%m-%dT%H:%M:%SZ') as "ChargePeriodEnd",
        charge_category as "ChargeCategory",
        charge_class as "ChargeClass",
        charge_description as "ChargeDescription",
        'Usage-Based' as "ChargeFrequency",
        case when charge_category = 'Usage' then round(l.gpu_hours, 6) end
            as "ConsumedQuantity",
        case when charge_category = 'Usage' then 'GPU-Hours' end as "ConsumedUnit",
        case
            when charge_category = 'Credit' then -round(l.gpu_hours, 6)
            else round(l.gpu_hours, 6)
        end as "PricingQuantity",
        'GPU-Hours' as "PricingUnit",
        unit_price as "ListUnitPrice",
        unit_price as "ContractedUnitPrice",
        'Internal GPU platform' as "ProviderName",
        'Internal GPU platform' as "PublisherName",
        'Internal GPU platform' as "InvoiceIssuerName",
        format('GPU-{}-{}', strftime(billing_month, '%Y-%m'), tenant_id) as "InvoiceId",
        'GPU compute' as "ServiceName",
        'AI and Machine Learning' as "ServiceCategory",
        'AI Platforms' as "ServiceSubcategory",
        cluster as "BillingAccountId",
        cluster as "BillingAccountName",
        tenant_id as "SubAccountId",
        tenant_name as "SubAccountName",
        format('{}/{}', cluster, gpu_model) as "ResourceId",
        format('{} {} GPUs', cluster, gpu_model) as "ResourceName",
        'GPU pool' as "ResourceType",
        gpu_model as "SkuId",
        'GPU time' as "SkuMeter",
        format('{}@{}', gpu_model, unit_price) as "SkuPriceId",
        json_object('x_GpuModel', gpu_model)::varchar as "SkuPriceDetails",
        capacity_reservation_id as "CapacityReservationId",
        case when charge_type = 'reserved_unused' then 'Unused' end
            as "CapacityReservationStatus",
        null::varchar as "CommitmentDiscountStatus",
        to_json({
            department: department,
            cost_center: cost_center,
            gpu_model: gpu_model
        })::varchar as "Tags",
        charge_type as "x_ChargeType",
        round(c.measured_share_pct / 100, 4)::decimal(6, 4) as "x_MeasuredShare"
    from charge_lines as l
    left join charge_line_coverage as c
        using (billing_month, tenant_id, cluster, gpu_model, unit_price, charge_type)
    where l.billing_month = $billing_month
)

select * from final
order by
    "SubAccountId", "BillingAccountId", "SkuId", "ChargeCategory", "x_ChargeType", "SkuPriceId",
    "CapacityReservationId", "ChargeClass" nulls first
