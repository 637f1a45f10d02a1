-- Blue-green rebuild of `comissao` (`replay-ledger rebuild`): a new table built from the whole
-- archive with the rule in force, kept up with the live writers, compared, approved, then swapped
-- in by renaming, in one transaction. The seed's `comissao` is unchanged; these are additions.

-- One row per rebuild; at most one is open (not `encerrada` nor `abandonada`) at a time.
--   construindo: comissao_nova is being built or kept up; not compared yet
--   comparada:   compared with comissao (counts, checksums, the diff below), waiting for approval
--   trocada:     swapped in; the previous table is kept as comissao_anterior
--   revertida:   swapped back (`--rollback`); the rebuilt table is kept as comissao_nova
--   encerrada:   the kept table was dropped (`--drop-previous`)
--   abandonada:  given up before the swap (`--abandon`); comissao_nova dropped
create table if not exists comissao_reconstrucao (
  id bigserial primary key,
  estado text not null check (estado in
    ('construindo', 'comparada', 'trocada', 'revertida', 'encerrada', 'abandonada')),
  versao_regra text not null,
  ultima_posicao bigint,                 -- checkpoint: every pedido.pago up to it is in comissao_nova
  alvo_posicao bigint,                   -- the archive's highest posicao when the build started
  eventos_total bigint not null default 0,   -- pedido.pago events to read when the build started
  eventos_lidos bigint not null default 0,
  pedidos_refeitos bigint not null default 0, -- orders re-derived because a live writer wrote them
  iniciado_em timestamptz not null default now(),
  atualizado_em timestamptz not null default now(),
  construida_em timestamptz,
  comparada_em timestamptz,
  contagem_atual bigint,
  checksum_atual text,
  contagem_nova bigint,
  checksum_nova text,
  pedidos_diferentes bigint,
  impressao text,                        -- fingerprint of the comparison shown (the diff)
  aprovacao_id bigint,
  trocada_em timestamptz,
  revertida_em timestamptz,
  encerrada_em timestamptz
);
create unique index if not exists comissao_reconstrucao_uma_aberta
  on comissao_reconstrucao ((true)) where estado not in ('encerrada', 'abandonada');

-- Orders some writer changed in `comissao` while a rebuild is open: re-derived into the new table
-- (or, after the swap, carried back by a rollback), so no write is lost.
create table if not exists comissao_reconstrucao_fila (
  pedido_id text primary key,
  registrado_em timestamptz not null default now()
);

-- The orders whose row differs between comissao and comissao_nova, as last compared (and kept up
-- as the live writes are re-derived): what finance approves.
create table if not exists comissao_reconstrucao_diff (
  pedido_id text primary key,
  antes bigint,
  versao_antes bigint,
  depois bigint,
  versao_depois bigint
);

-- Captures, statement by statement, the orders a writer changed in `comissao` while a rebuild is
-- open (the seed's JavaScript consumer, the live consumer, a replay, anyone). One `exists` per
-- statement when no rebuild is open.
create or replace function comissao_reconstrucao_capturar() returns trigger
language plpgsql security definer
as $$
begin
  if not exists (select 1 from comissao_reconstrucao
                 where estado in ('construindo', 'comparada', 'trocada')) then
    return null;
  end if;
  if tg_op = 'DELETE' then
    insert into comissao_reconstrucao_fila (pedido_id)
    select distinct pedido_id from antigas on conflict do nothing;
  else
    insert into comissao_reconstrucao_fila (pedido_id)
    select distinct pedido_id from novas on conflict do nothing;
  end if;
  return null;
end
$$;

-- The capture triggers: dropped from table `p_tabela`, and created on it when it is the table
-- named `comissao` now (after a swap, the new one) and `p_criar`.
create or replace function comissao_reconstrucao_gatilhos(p_tabela text, p_criar boolean)
returns void
language plpgsql
as $$
begin
  execute format('drop trigger if exists comissao_reconstrucao_insercao on %I', p_tabela);
  execute format('drop trigger if exists comissao_reconstrucao_alteracao on %I', p_tabela);
  execute format('drop trigger if exists comissao_reconstrucao_remocao on %I', p_tabela);
  if p_tabela <> 'comissao' or not p_criar then
    return;
  end if;
  create trigger comissao_reconstrucao_insercao after insert on comissao
    referencing new table as novas for each statement
    execute function comissao_reconstrucao_capturar();
  create trigger comissao_reconstrucao_alteracao after update on comissao
    referencing new table as novas for each statement
    execute function comissao_reconstrucao_capturar();
  create trigger comissao_reconstrucao_remocao after delete on comissao
    referencing old table as antigas for each statement
    execute function comissao_reconstrucao_capturar();
end
$$;
select comissao_reconstrucao_gatilhos('comissao', true);

-- Every privilege granted on table `p_de` (but its owner's) granted on `p_para` too.
create or replace function comissao_copiar_grants(p_de text, p_para text) returns void
language plpgsql
as $$
declare
  g record;
begin
  for g in
    select a.privilege_type, a.grantee
    from pg_class c, aclexplode(c.relacl) a
    where c.relname = p_de and c.relnamespace = current_schema()::regnamespace
      and a.grantee <> c.relowner
  loop
    if g.grantee = 0 then
      execute format('grant %s on %I to public', g.privilege_type, p_para);
    else
      execute format('grant %s on %I to %I', g.privilege_type, p_para,
                     pg_get_userbyid(g.grantee));
    end if;
  end loop;
end
$$;

-- A new, empty `comissao_nova` shaped exactly as `comissao` (columns, defaults, constraints,
-- indexes), with the same grants, so every role keeps its duty on the table once it is swapped in.
create or replace function comissao_nova_criar() returns void
language plpgsql
as $$
begin
  drop table if exists comissao_nova;
  create table comissao_nova (like comissao including all);
  perform comissao_copiar_grants('comissao', 'comissao_nova');
end
$$;

-- The swap: `comissao` becomes `p_saida`, `p_entrada` becomes `comissao`; each table's indexes
-- (and so its constraints) follow its name (`comissao_pkey` <-> `comissao_anterior_pkey`); the
-- capture triggers move to the new `comissao`. Runs inside the caller's transaction, which holds
-- `comissao` locked: all of it happens, or none.
create or replace function comissao_trocar(p_saida text, p_entrada text) returns void
language plpgsql
as $$
begin
  -- Grants given on `comissao` since the incoming table was created hold on it too.
  perform comissao_copiar_grants('comissao', p_entrada);
  perform comissao_reconstrucao_gatilhos('comissao', false);
  execute format('alter table comissao rename to %I', p_saida);
  execute format('alter table %I rename to comissao', p_entrada);
  perform comissao_renomear_indices(p_saida, 'comissao', p_saida);
  perform comissao_renomear_indices('comissao', p_entrada, 'comissao');
  perform comissao_reconstrucao_gatilhos('comissao', true);
end
$$;

-- The indexes of table `p_tabela` whose name starts with `p_de`: renamed to start with `p_para`.
create or replace function comissao_renomear_indices(p_tabela text, p_de text, p_para text)
returns void
language plpgsql
as $$
declare
  i record;
begin
  for i in
    select ic.relname as nome
    from pg_index x
    join pg_class t on t.oid = x.indrelid
    join pg_class ic on ic.oid = x.indexrelid
    where t.relname = p_tabela and t.relnamespace = current_schema()::regnamespace
  loop
    if left(i.nome, length(p_de)) = p_de then
      execute format('alter index %I rename to %I', i.nome,
                     p_para || substr(i.nome, length(p_de) + 1));
    end if;
  end loop;
end
$$;

do $$
declare
  f text;
begin
  foreach f in array array[
    'comissao_reconstrucao_capturar()',
    'comissao_reconstrucao_gatilhos(text, boolean)',
    'comissao_copiar_grants(text, text)',
    'comissao_nova_criar()',
    'comissao_trocar(text, text)',
    'comissao_renomear_indices(text, text, text)'
  ] loop
    execute format('alter function %s set search_path = %I, pg_temp', f, current_schema());
  end loop;
end
$$;
