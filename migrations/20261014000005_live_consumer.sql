-- The live consumer (`replay-ledger consume`) must never skip an event whose transaction commits
-- after a later `posicao` was committed (out-of-order commits). Each event records the transaction
-- that inserted it; the consumer reads in (xid_insercao, posicao) order and only below the oldest
-- transaction still running (`pg_snapshot_xmin(pg_current_snapshot())`): every transaction below
-- that horizon has finished, and any transaction that commits later has an xid at or above it, so
-- it sorts after the consumer's checkpoint. Existing rows are stamped with this migration's
-- transaction (a one-time table rewrite): they are all committed.
alter table evento_arquivado
  add column if not exists xid_insercao xid8 not null default pg_current_xact_id();
-- Serves: the consumer's read (`where (xid_insercao, posicao) > ($1, $2) and xid_insercao < $horizon
-- order by xid_insercao, posicao limit $n`).
create index if not exists evento_arquivado_xid_posicao_idx
  on evento_arquivado (xid_insercao, posicao);

-- The consumer's checkpoint is a pair: the transaction and the position of the last event settled.
alter table reprocessamento_checkpoint add column if not exists ultimo_xid xid8;

-- Wakes the consumer as soon as events are archived (it also polls, in case a notification is
-- lost). One notification per statement, with no payload.
create or replace function replay_ledger_notificar_evento() returns trigger
language plpgsql as $$
begin
  perform pg_notify('evento_arquivado', '');
  return null;
end
$$;
drop trigger if exists evento_arquivado_notificar on evento_arquivado;
create trigger evento_arquivado_notificar
  after insert on evento_arquivado
  for each statement execute function replay_ledger_notificar_evento();
