-- The approver's role notes its approval on the rebuild it approves (`update (aprovacao_id)` on
-- `comissao_reconstrucao`, which the approval's `for update` of the row needs too); nothing let
-- it note any other id. Now the id noted must be an approval of that rebuild's comparison as it
-- stands (its execution and fingerprint), whoever writes it.
create or replace function comissao_reconstrucao_aprovacao_valida() returns trigger
language plpgsql security definer
as $$
begin
  if new.aprovacao_id is not null
     and new.aprovacao_id is distinct from old.aprovacao_id
     and not exists (
       select 1 from reprocessamento_aprovacao a
       where a.id = new.aprovacao_id
         and a.execucao_id = 'reconstrucao-comissao-' || new.id
         and a.eventos_hash = new.impressao) then
    raise exception 'approval % is not an approval of rebuild %''s comparison', new.aprovacao_id, new.id
      using errcode = '42501';
  end if;
  return new;
end
$$;
do $$
begin
  execute format('alter function comissao_reconstrucao_aprovacao_valida() set search_path = %I, pg_temp',
                 current_schema());
end
$$;
revoke all on function comissao_reconstrucao_aprovacao_valida() from public;
drop trigger if exists comissao_reconstrucao_aprovacao_valida on comissao_reconstrucao;
create trigger comissao_reconstrucao_aprovacao_valida
  before update of aprovacao_id on comissao_reconstrucao
  for each row execute function comissao_reconstrucao_aprovacao_valida();
