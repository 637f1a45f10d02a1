-- The pace of a run over time, for the chart on its console page: each pace a runner publishes
-- (every few seconds, `reprocessamento_progresso` keeps only the last) is also kept here as a
-- sample. Informational, like the pace: no figure anyone acts on is read from here.
create table if not exists reprocessamento_ritmo (
  execucao_id text not null,
  em timestamptz not null default now(),
  eventos_feitos bigint not null,
  chamadas bigint not null,
  eventos_por_s double precision not null,
  efeitos_por_s double precision not null,
  primary key (execucao_id, em)
);
