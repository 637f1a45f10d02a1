-- Where a running execution (or partition) stands between two batches: the pace its runner
-- measures (events/s, effect calls/s, ETA, the effect type whose rate limit holds it back) and
-- the effect calls made so far in the pass. Written every few seconds by the runner, read by the
-- console; informational only — every figure people act on comes from the tallies.
create table if not exists reprocessamento_progresso (
  execucao_id text primary key,
  eventos_feitos bigint not null,
  eventos_total bigint not null,
  chamadas bigint not null,
  eventos_por_s double precision not null,
  efeitos_por_s double precision not null,
  eta_s bigint,
  limitado_por text,
  atualizado_em timestamptz not null default now()
);
