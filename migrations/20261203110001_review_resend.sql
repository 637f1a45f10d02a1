-- A decision acts (DESIGN.md invariant 14): `nao-enviado` no longer removes the row (a finished
-- window is never run again, so nothing would send it); it queues the key for a resend. The row
-- stays `incerto` — the seed's states, so the seed's own applier still sees a registered key and
-- never sends it — and `reenvio_pedido_em` says a human asked for it. The next sweep (or a replay
-- or the live consumer covering the event, whichever reserves it first) reserves it, which
-- clears the mark, calls the provider once and settles it as any reservation.
alter table efeito_aplicado add column if not exists reenvio_pedido_em timestamptz;
-- When a queued key was reserved again: its provider never received it (a human said so), so the
-- provider's `dedup_window` counts from here, not from the attempts before the decision.
alter table efeito_aplicado add column if not exists reenvio_desde timestamptz;
alter table efeito_aplicado drop constraint if exists efeito_aplicado_reenvio_incerto;
alter table efeito_aplicado add constraint efeito_aplicado_reenvio_incerto
  check (reenvio_pedido_em is null or estado = 'incerto');
-- The queue the sweeper reads, and the probe a reservation makes: few rows, kept by a partial index.
create index if not exists efeito_aplicado_reenvio
  on efeito_aplicado (reenvio_pedido_em, chave) where reenvio_pedido_em is not null;

-- An `incerto` row waits for a human: only the owner changes or removes it, except the one step
-- a human's `nao-enviado` allows anyone who reserves: the queued row becomes a reservation (and
-- the mark is cleared), so exactly one writer takes it.
create or replace function efeito_aplicado_incerto_guardado() returns trigger
language plpgsql
as $$
begin
  if tg_op = 'UPDATE' and old.reenvio_pedido_em is not null
     and new.estado = 'reservado' and new.reenvio_pedido_em is null then
    return new;
  end if;
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

-- Resolves one `incerto` effect as `p_quem` — `enviado`: it went out (`concluido`, a pending
-- resend cancelled); `nao-enviado`: it did not (queued for a resend) — and records the decision,
-- atomically, only while the row is still `incerto` (and, for `nao-enviado`, not queued yet).
-- Returns the row's state before the call: `incerto` when resolved now, `reenvio-pendente` when
-- it was already queued, another state when it was not `incerto`, null when there is no such key.
create or replace function resolver_incerto_como(p_chave text, p_decisao text, p_nota text, p_quem text)
returns text
language plpgsql security definer
as $$
declare
  v_tipo text;
  v_execucao text;
  v_estado text;
  v_pendente timestamptz;
begin
  if p_decisao = 'enviado' then
    update efeito_aplicado set estado = 'concluido', atualizado_em = now(), reenvio_pedido_em = null
    where chave = p_chave and estado = 'incerto'
    returning tipo_efeito, execucao_id into v_tipo, v_execucao;
  elsif p_decisao = 'nao-enviado' then
    update efeito_aplicado set reenvio_pedido_em = now(), atualizado_em = now()
    where chave = p_chave and estado = 'incerto' and reenvio_pedido_em is null
    returning tipo_efeito, execucao_id into v_tipo, v_execucao;
  else
    raise exception 'a review decision is enviado or nao-enviado' using errcode = '22023';
  end if;
  if not found then
    select estado, reenvio_pedido_em into v_estado, v_pendente
    from efeito_aplicado where chave = p_chave;
    if v_pendente is not null then
      return 'reenvio-pendente';
    end if;
    return v_estado;
  end if;
  insert into efeito_revisao (chave, tipo_efeito, execucao_id, decisao, resolvido_por, nota)
  values (p_chave, v_tipo, v_execucao, p_decisao, p_quem, p_nota);
  return 'incerto';
end
$$;
revoke all on function resolver_incerto_como(text, text, text, text) from public;

do $$
declare
  f text;
begin
  foreach f in array array[
    'efeito_aplicado_incerto_guardado()',
    'resolver_incerto_como(text, text, text, text)'
  ] loop
    execute format('alter function %s set search_path = %I, pg_temp', f, current_schema());
  end loop;
end
$$;
