-- What a row of a pass's corrections (and of a simulation's diff) held before the statement that
-- last wrote it, kept by that statement's own `on conflict do update`. The figures a batch adds
-- (orders new to the pass, totals before and after) are then summed from the rows the write
-- returns, and the write never reads the table first: that read was a join whose plan depended on
-- statistics taken while the table was still small, and a real run of 1,000,000 corrections spent
-- minutes in it (each batch scanned every row its pass had written so far).
--
-- `depois_anterior` is null when the write inserted the row (or, for corrections, took it over
-- from an earlier pass); otherwise the `depois` it replaced. `antes_anterior` (diff only) is the
-- `antes` it replaced. Added without defaults: no existing row is rewritten.
alter table reprocessamento_correcao add column if not exists depois_anterior bigint;
alter table reprocessamento_diff add column if not exists antes_anterior bigint;
alter table reprocessamento_diff add column if not exists depois_anterior bigint;
