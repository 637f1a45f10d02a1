-- Additions of replay-ledger. Nothing the seed defines is changed; every column added is nullable
-- or has a default, so code written against the seed's schema (the JavaScript live consumer) keeps
-- working beside the worker.

-- The claim a writer holds on a reservation (DESIGN.md invariant 8): every completion, release or
-- move to `incerto` names it in its `where`, so a slow, stale worker cannot settle a reservation
-- that someone else has since retaken. One token per process run (or sweeper pass).
alter table efeito_aplicado add column if not exists reserva_id uuid;

-- Serves: the settlement of an execution's own abandoned reservations at start
-- (`where execucao_id = $1 and estado = 'reservado'`) and the sweeper's scan of stale reservations
-- (`where estado = 'reservado' and atualizado_em < now() - $1`).
create index if not exists efeito_aplicado_reservado_idx
  on efeito_aplicado (atualizado_em) where estado = 'reservado';
create index if not exists efeito_aplicado_reservado_execucao_idx
  on efeito_aplicado (execucao_id) where estado = 'reservado';
-- Serves: the review queue (`where estado = 'incerto'`).
create index if not exists efeito_aplicado_incerto_idx
  on efeito_aplicado (atualizado_em) where estado = 'incerto';

-- The version a diff row was computed from, so a simulation that meets an order's events out of
-- version order keeps the newest, exactly as the version-guarded upsert of `comissao` would.
alter table reprocessamento_diff add column if not exists versao_evento bigint;

-- One row per execution (a checkpoint key): what it is, its fixed `posicao` range and its summary.
-- A simulation's key is '<execution id>:simulacao', so a finished simulation never makes the real
-- run skip the window.
create table if not exists reprocessamento_execucao (
  execucao_id text primary key,
  job text not null,
  modo text not null check (modo in ('simulacao', 'real', 'ao-vivo')),
  janela_inicio timestamptz,
  janela_fim timestamptz,
  posicao_inicial bigint, -- the window's lowest posicao when the pass started
  posicao_final bigint,   -- the window's highest posicao when the pass started (fixed for the pass)
  total_eventos bigint not null default 0,
  estado text not null check (estado in ('em-andamento', 'concluida', 'falhou', 'interrompida')),
  passagem integer not null default 1, -- incremented by --restart
  iniciada_por text not null,
  iniciada_em timestamptz not null default now(),
  concluida_em timestamptz,
  erro text,
  resumo jsonb not null default '{}'::jsonb,
  atualizado_em timestamptz not null default now()
);

-- Events a run could not apply (an invalid payload), with the reason: never silently dropped.
create table if not exists evento_rejeitado (
  execucao_id text not null,
  evento_id text not null,
  posicao bigint not null,
  tipo text not null,
  erro text not null,
  registrado_em timestamptz not null default now(),
  primary key (execucao_id, evento_id)
);
