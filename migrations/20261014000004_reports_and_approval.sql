-- Reports to finance and the approval gate. Nothing the seed defines is changed.

-- The corrections a real run wrote to `comissao`, one row per order and execution: the value before
-- the execution first changed it and the value it left. Written in the same transaction as the
-- version-guarded upsert, so a report of a real run lists exactly what it changed (the simulation's
-- counterpart is `reprocessamento_diff`). Only orders whose value changed are recorded.
create table if not exists reprocessamento_correcao (
  execucao_id text not null,
  pedido_id text not null,
  antes bigint,            -- null: the order had no commission row
  depois bigint not null,
  versao_evento bigint not null,
  registrado_em timestamptz not null default now(),
  atualizado_em timestamptz not null default now(),
  primary key (execucao_id, pedido_id)
);

-- Approvals of a simulation before its real run (`require_approved_simulation: true`): who, when,
-- which simulation pass, the diff totals they approved, and the fingerprint of the window and of
-- the commissions of the diff's orders at approval. The real run starts only if the latest
-- approval is of the latest finished simulation and the fingerprint still holds.
create table if not exists reprocessamento_aprovacao (
  id bigserial primary key,
  execucao_id text not null,            -- the execution id (the real run's key)
  job text not null,
  simulacao_passagem integer not null,  -- reprocessamento_execucao.passagem of '<id>:simulacao'
  simulacao_concluida_em timestamptz not null,
  aprovado_por text not null,
  aprovado_em timestamptz not null default now(),
  pedidos bigint not null,              -- rows of the diff
  pedidos_alterados bigint not null,    -- rows whose value changes
  total_antes_centavos bigint not null,
  total_depois_centavos bigint not null,
  eventos_total bigint not null,        -- events of the window
  eventos_max_posicao bigint,
  eventos_hash text not null,           -- over (id, versao, posicao, payload) of the window's events
  comissao_hash text not null           -- over the `comissao` rows of the diff's orders
);
create index if not exists reprocessamento_aprovacao_execucao_idx
  on reprocessamento_aprovacao (execucao_id, id);

-- Per report job: executions finished from `desde` on are its to report (a new job looks back one
-- day, not over the whole history). What was already e-mailed is in the ledger (`efeito_aplicado`,
-- key '<job>:<execution>#<pass>:email'), not here.
create table if not exists relatorio_job (
  job text primary key,
  desde timestamptz not null,
  criado_em timestamptz not null default now()
);
