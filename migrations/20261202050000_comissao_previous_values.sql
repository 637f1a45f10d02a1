-- What a `comissao` row held before the engine's version-guarded upsert last overwrote it, kept by
-- that upsert's own `on conflict do update` (which sees the row version it replaces, locked). The
-- engine takes the before-values of the orders it corrects from the upsert's `returning`: exactly
-- the values replaced, with no read of the batch's rows first. That read locked every order of the
-- batch (a second index descent and a lock record in the WAL per order) and was a fifth of a real
-- run's time in the database.
--
-- Only the engine's upsert reads these columns, from its own `returning`; another writer of
-- `comissao` may leave them stale, and nothing else relies on them. The seed's columns are
-- unchanged; added nullable without defaults: no existing row is rewritten.
alter table comissao add column if not exists valor_anterior bigint;
alter table comissao add column if not exists versao_anterior bigint;
