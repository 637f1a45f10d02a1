-- A pass's figures count the orders whose value the pass changes, net: an order the pass moves
-- A -> B -> A (equal versions of one order in two batches) counts in no figure. To say whether a
-- correction still changes the order within its pass, the row keeps the value before the pass
-- first changed it (`antes` keeps the value before the execution first did). Rows written before
-- this version: their only pass's `antes`, or the value the pass replaced.
alter table reprocessamento_correcao add column if not exists antes_passagem bigint;
update reprocessamento_correcao
set antes_passagem = case when passagem_anterior is null then antes else depois_anterior end
where antes_passagem is null;

-- What finance approved survives a later simulation: each approval keeps the diff it was given
-- for (a new `--simulate --restart` replaces `reprocessamento_diff`, not this). The copy is taken
-- by a trigger in the approval's own transaction, whoever inserts it (the command line's
-- approver role, the console's function, the rebuild's approval), so no approval exists without
-- its diff.
create table if not exists reprocessamento_diff_aprovado (
  aprovacao_id bigint not null references reprocessamento_aprovacao (id) on delete cascade,
  pedido_id text not null,
  antes bigint,
  depois bigint not null,
  versao_evento bigint,
  primary key (aprovacao_id, pedido_id)
);

create or replace function reprocessamento_aprovacao_guarda_diff() returns trigger
language plpgsql security definer
as $$
begin
  insert into reprocessamento_diff_aprovado (aprovacao_id, pedido_id, antes, depois, versao_evento)
  select new.id, d.pedido_id, d.antes, d.depois, d.versao_evento
  from reprocessamento_diff d
  where d.execucao_id = new.execucao_id;
  return new;
end
$$;
do $$
begin
  execute format('alter function reprocessamento_aprovacao_guarda_diff() set search_path = %I, pg_temp',
                 current_schema());
end
$$;
revoke all on function reprocessamento_aprovacao_guarda_diff() from public;
drop trigger if exists reprocessamento_aprovacao_guarda_diff on reprocessamento_aprovacao;
create trigger reprocessamento_aprovacao_guarda_diff
  after insert on reprocessamento_aprovacao
  for each row execute function reprocessamento_aprovacao_guarda_diff();

-- Approvals given before this version: the diff as it stands is the best copy there is, for the
-- latest approval of each execution whose simulation has not run again since.
insert into reprocessamento_diff_aprovado (aprovacao_id, pedido_id, antes, depois, versao_evento)
select a.id, d.pedido_id, d.antes, d.depois, d.versao_evento
from reprocessamento_aprovacao a
join reprocessamento_diff d on d.execucao_id = a.execucao_id
where a.id = (select max(b.id) from reprocessamento_aprovacao b where b.execucao_id = a.execucao_id)
on conflict do nothing;
