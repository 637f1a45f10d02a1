-- The seed's schema, as given (names, columns, checks unchanged), so a team that already has these
-- tables can point the worker at them. `if not exists` lets such a team run `migrate` unharmed.
create table if not exists evento_arquivado (
  posicao bigint primary key, -- ordem global do log de origem
  id text not null unique,
  tipo text not null,
  pedido_id text not null,
  versao bigint not null, -- versao do agregado (o pedido)
  payload jsonb not null,
  ocorrido_em timestamptz not null
);
create index if not exists evento_arquivado_ocorrido_em_posicao_idx on evento_arquivado (ocorrido_em, posicao);

create table if not exists comissao (
  pedido_id text primary key,
  valor_centavos bigint not null,
  versao_evento bigint not null,
  atualizado_em timestamptz not null default now()
);

-- Um registro por efeito externo, com a mesma chave no consumidor ao vivo e no replay
create table if not exists efeito_aplicado (
  chave text primary key, -- '<evento_id>:<tipo_efeito>'
  evento_id text not null,
  tipo_efeito text not null,
  estado text not null check (estado in ('reservado', 'concluido', 'incerto')),
  execucao_id text not null, -- 'ao-vivo' ou o id do reprocessamento
  resultado jsonb,
  criado_em timestamptz not null default now(),
  atualizado_em timestamptz not null default now()
);

create table if not exists reprocessamento_checkpoint (
  execucao_id text primary key,
  ultima_posicao bigint not null,
  atualizado_em timestamptz not null default now()
);

create table if not exists reprocessamento_diff (
  execucao_id text not null,
  pedido_id text not null,
  antes bigint,
  depois bigint not null,
  primary key (execucao_id, pedido_id)
);
