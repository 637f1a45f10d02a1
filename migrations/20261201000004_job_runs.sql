-- The last run of the jobs that leave no execution behind (a sweep, a report job), so `status`
-- can say when each last ran and how it ended. One row per job, updated by each fire.
create table if not exists job_rodada (
  job text primary key,
  iniciada_em timestamptz not null,
  concluida_em timestamptz not null,
  resultado text not null check (resultado in ('concluida', 'falhou')),
  detalhe text
);
