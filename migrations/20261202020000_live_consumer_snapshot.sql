-- The live consumer no longer waits for the oldest transaction of the whole server. It applies
-- every committed event as soon as its transaction is visible, in rounds: a round takes a
-- snapshot (`pg_current_snapshot()`) and applies, in (xid_insercao, posicao) order, the events of
-- the transactions that snapshot sees and the previous round's did not. What it already applied
-- is a snapshot, not a list of events: every event visible in `visto` (and, for the round in
-- progress, every event visible in `rodada` up to `rodada_ultimo_xid` / `rodada_ultima_posicao`).
-- `reprocessamento_checkpoint.ultimo_xid` / `ultima_posicao` stay the safe horizon: every event
-- at or before them is applied and no transaction can add one there any more.
create table if not exists consumo_ao_vivo (
  execucao_id text primary key,
  visto pg_snapshot not null,
  rodada pg_snapshot,
  rodada_ultimo_xid xid8,
  rodada_ultima_posicao bigint,
  atualizado_em timestamptz not null default now(),
  check ((rodada is null) = (rodada_ultimo_xid is null)
     and (rodada is null) = (rodada_ultima_posicao is null))
);

-- When an event was archived, for the consumer's lag (the age of the oldest event not yet
-- applied). Added without a default first, so existing rows are not rewritten (they stay null:
-- their age is unknown); new rows get the time of their insert.
alter table evento_arquivado add column if not exists arquivado_em timestamptz;
alter table evento_arquivado alter column arquivado_em set default clock_timestamp();
