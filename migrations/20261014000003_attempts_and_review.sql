-- Append-only history of provider attempts: the seed's release deletes the ledger row and with it
-- the knowledge that a call was ever tried; this keeps it. No payload, no secrets: key, who, when,
-- outcome and an error class. Times come from the database clock (started = now() - elapsed).
create table if not exists efeito_tentativa (
  id bigserial primary key,
  chave text not null,
  execucao_id text not null,
  reserva_id uuid,
  iniciada_em timestamptz not null,
  concluida_em timestamptz not null,
  resultado text not null check (resultado in ('sucesso', 'falha')),
  classe_erro text
);
-- Serves: the first attempt of a key (dedup_window) and the review queue's attempts/last error.
create index if not exists efeito_tentativa_chave_idx on efeito_tentativa (chave, iniciada_em);

-- Decisions taken on the review queue: who said an `incerto` effect went out or did not, and when.
create table if not exists efeito_revisao (
  id bigserial primary key,
  chave text not null,
  tipo_efeito text not null,
  execucao_id text not null,
  decisao text not null check (decisao in ('enviado', 'nao-enviado')),
  resolvido_por text not null,
  resolvido_em timestamptz not null default now()
);
