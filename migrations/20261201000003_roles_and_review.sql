-- Who did it is proven, not claimed (DESIGN.md invariant 12), and the review queue says why.
-- Nothing the seed defines is changed: columns are added (nullable), rows are guarded by triggers
-- that let the table's owner through, so code written against the seed's schema keeps working.

-- A review decision names the authenticated database role of the session that took it; what a
-- human types is a note (bounded; the command line also refuses control characters).
alter table efeito_revisao alter column resolvido_por set default session_user;
alter table efeito_revisao add column if not exists nota text
  check (nota is null or char_length(nota) <= 500);

-- Why nobody knows whether an `incerto` effect went out, and since when. Written by the statement
-- that moves a row to `incerto` (a row the seed's own consumer made `incerto` has neither: the
-- review queue then shows `atualizado_em`). `status_http_incerto` goes with `resposta-http`.
alter table efeito_aplicado add column if not exists motivo_incerto text
  check (motivo_incerto in ('tempo-esgotado', 'resposta-http', 'redirecionamento',
                            'falha-de-conexao', 'conexao-interrompida', 'erro-do-provedor',
                            'queda-durante-chamada', 'fora-da-janela-de-dedup',
                            'tipo-nao-declarado', 'evento-indisponivel'));
alter table efeito_aplicado add column if not exists status_http_incerto integer
  check (status_http_incerto between 100 and 599);
alter table efeito_aplicado add column if not exists incerto_desde timestamptz;
update efeito_aplicado set incerto_desde = atualizado_em
where estado = 'incerto' and incerto_desde is null;

-- Whether the role running the statement is (a member of) the owner of the table a trigger fires
-- on: the owner, a superuser, or a `security definer` function owned by the owner.
create or replace function replay_ledger_e_dono(tabela oid) returns boolean
language sql stable
as $$
  select pg_catalog.pg_has_role(current_user, c.relowner, 'MEMBER')
  from pg_catalog.pg_class c where c.oid = tabela
$$;

-- An `incerto` row waits for a human: only the owner changes or removes it — in practice
-- `resolver_incerto` below, which runs as the owner — so the worker's role cannot settle the
-- review queue by itself. The worker never needs to: every statement it runs on the ledger is
-- fenced by `estado = 'reservado'`.
create or replace function efeito_aplicado_incerto_guardado() returns trigger
language plpgsql
as $$
begin
  if not replay_ledger_e_dono(tg_relid) then
    raise exception 'an incerto effect is changed only by a review decision (replay-ledger review resolve)'
      using errcode = '42501';
  end if;
  if tg_op = 'DELETE' then
    return old;
  end if;
  return new;
end
$$;
drop trigger if exists efeito_aplicado_incerto_guardado on efeito_aplicado;
create trigger efeito_aplicado_incerto_guardado
  before update or delete on efeito_aplicado
  for each row when (old.estado = 'incerto')
  execute function efeito_aplicado_incerto_guardado();

-- Resolves one `incerto` effect — `enviado`: it went out (`concluido`); `nao-enviado`: it did not
-- (the row is removed, so the next run performs it) — and records the decision with the session's
-- role, atomically, only while the row is still `incerto`. Returns the row's state before the
-- call: `incerto` when resolved now, another state when it was not `incerto`, null when there is
-- no such key. Runs as the owner (`security definer`): granted to the reviewer role only.
create or replace function resolver_incerto(p_chave text, p_decisao text, p_nota text)
returns text
language plpgsql security definer
as $$
declare
  v_tipo text;
  v_execucao text;
  v_estado text;
begin
  if p_decisao = 'enviado' then
    update efeito_aplicado set estado = 'concluido', atualizado_em = now()
    where chave = p_chave and estado = 'incerto'
    returning tipo_efeito, execucao_id into v_tipo, v_execucao;
  elsif p_decisao = 'nao-enviado' then
    delete from efeito_aplicado where chave = p_chave and estado = 'incerto'
    returning tipo_efeito, execucao_id into v_tipo, v_execucao;
  else
    raise exception 'a review decision is enviado or nao-enviado' using errcode = '22023';
  end if;
  if not found then
    select estado into v_estado from efeito_aplicado where chave = p_chave;
    return v_estado;
  end if;
  insert into efeito_revisao (chave, tipo_efeito, execucao_id, decisao, resolvido_por, nota)
  values (p_chave, v_tipo, v_execucao, p_decisao, session_user, p_nota);
  return 'incerto';
end
$$;
revoke all on function resolver_incerto(text, text, text) from public;

-- An execution becomes `concluida` only once its checkpoint has passed its window: the worker's
-- role cannot declare a window done that it did not run. The checkpoint has passed it when it
-- reaches `posicao_final` (a whole window), or when as many of the window's events lie at or
-- before it as the execution counts (a partition, whose last event may sit anywhere in the
-- range), or when the window is empty. The owner (and `migrate`'s fixes) pass.
create or replace function reprocessamento_execucao_conclusao() returns trigger
language plpgsql
as $$
declare
  v_checkpoint bigint;
  v_lidos bigint;
begin
  if tg_op = 'UPDATE' and old.estado = 'concluida' then
    return new;
  end if;
  if new.total_eventos = 0 or replay_ledger_e_dono(tg_relid) then
    return new;
  end if;
  select ultima_posicao into v_checkpoint
  from reprocessamento_checkpoint where execucao_id = new.execucao_id;
  if v_checkpoint >= new.posicao_final then
    return new;
  end if;
  select count(*) into v_lidos from evento_arquivado
  where posicao between new.posicao_inicial and v_checkpoint
    and ocorrido_em >= new.janela_inicio and ocorrido_em < new.janela_fim;
  if v_lidos >= new.total_eventos then
    return new;
  end if;
  raise exception 'an execution is concluida only once its checkpoint has passed its window'
    using errcode = '42501';
end
$$;
drop trigger if exists reprocessamento_execucao_conclusao on reprocessamento_execucao;
create trigger reprocessamento_execucao_conclusao
  before insert or update of estado on reprocessamento_execucao
  for each row when (new.estado = 'concluida')
  execute function reprocessamento_execucao_conclusao();

-- Functions resolve names in the schema `migrate` ran in, never in one a caller puts first on
-- its search_path (`security definer` hygiene; the trigger functions too, for the same reason).
do $$
declare
  f text;
begin
  foreach f in array array[
    'replay_ledger_e_dono(oid)',
    'efeito_aplicado_incerto_guardado()',
    'resolver_incerto(text, text, text)',
    'reprocessamento_execucao_conclusao()'
  ] loop
    execute format('alter function %s set search_path = %I, pg_temp', f, current_schema());
  end loop;
end
$$;
