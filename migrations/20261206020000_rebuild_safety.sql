-- The rebuild's swap, made safe on a busy table and for what hangs on `comissao`.

-- What a rebuild approval was given for: the comparison's differing rows at the approval, kept by
-- the approval's trigger. Under the swap's lock the rows that still differ must be among these,
-- with the same values and versions on both sides; an order that now agrees drops out, anything
-- else compares again.
create table if not exists comissao_reconstrucao_diff_aprovado (
  aprovacao_id bigint not null references reprocessamento_aprovacao (id) on delete cascade,
  pedido_id text not null,
  antes bigint,
  versao_antes bigint,
  depois bigint,
  versao_depois bigint,
  primary key (aprovacao_id, pedido_id)
);

create or replace function reprocessamento_aprovacao_guarda_diff() returns trigger
language plpgsql security definer
as $$
begin
  if new.job = 'rebuild' then
    insert into comissao_reconstrucao_diff_aprovado
      (aprovacao_id, pedido_id, antes, versao_antes, depois, versao_depois)
    select new.id, d.pedido_id, d.antes, d.versao_antes, d.depois, d.versao_depois
    from comissao_reconstrucao_diff d;
    return new;
  end if;
  insert into reprocessamento_diff_aprovado (aprovacao_id, pedido_id, antes, depois, versao_evento)
  select new.id, d.pedido_id, d.antes, d.depois, d.versao_evento
  from reprocessamento_diff d
  where d.execucao_id = new.execucao_id;
  return new;
end
$$;

-- What hangs on `comissao` that a swap by renaming would leave behind on the old table or lose:
-- row-level security and its policies, triggers other than the rebuild's own, rules, views and
-- other relations that depend on it, foreign keys to or from it. Each named, for the refusal.
create or replace function comissao_dependencias() returns setof text
language sql stable
as $$
  select 'row-level security on comissao'
  from pg_class c
  where c.oid = 'comissao'::regclass and (c.relrowsecurity or c.relforcerowsecurity)
  union all
  select 'policy ' || quote_ident(p.polname)
  from pg_policy p where p.polrelid = 'comissao'::regclass
  union all
  select 'trigger ' || quote_ident(t.tgname)
  from pg_trigger t
  where t.tgrelid = 'comissao'::regclass and not t.tgisinternal
    and t.tgname not in ('comissao_reconstrucao_insercao', 'comissao_reconstrucao_alteracao',
                         'comissao_reconstrucao_remocao')
  union all
  select 'rule ' || quote_ident(r.rulename)
  from pg_rewrite r
  where r.ev_class = 'comissao'::regclass and r.rulename <> '_RETURN'
  union all
  select distinct 'view ' || v.oid::regclass::text
  from pg_depend d
  join pg_rewrite r on r.oid = d.objid and d.classid = 'pg_rewrite'::regclass
  join pg_class v on v.oid = r.ev_class
  where d.refobjid = 'comissao'::regclass and d.refclassid = 'pg_class'::regclass
    and v.oid <> 'comissao'::regclass
  union all
  select 'foreign key ' || quote_ident(k.conname) || ' of ' || k.conrelid::regclass::text
  from pg_constraint k
  where k.contype = 'f'
    and (k.conrelid = 'comissao'::regclass or k.confrelid = 'comissao'::regclass)
$$;

-- The incoming table's privileges become exactly `p_de`'s at this moment: every grant on
-- `p_para` (but its owner's) is revoked, then `p_de`'s granted. A privilege revoked on
-- `comissao` while a rebuild was open (a leaked password) does not come back with the swap or
-- the rollback.
create or replace function comissao_igualar_grants(p_de text, p_para text) returns void
language plpgsql
as $$
declare
  g record;
begin
  for g in
    select distinct a.grantee
    from pg_class c, aclexplode(c.relacl) a
    where c.relname = p_para and c.relnamespace = current_schema()::regnamespace
      and a.grantee <> c.relowner
  loop
    if g.grantee = 0 then
      execute format('revoke all on %I from public', p_para);
    else
      execute format('revoke all on %I from %I', p_para, pg_get_userbyid(g.grantee));
    end if;
  end loop;
  perform comissao_copiar_grants(p_de, p_para);
end
$$;

create or replace function comissao_trocar(p_saida text, p_entrada text) returns void
language plpgsql
as $$
begin
  perform comissao_igualar_grants('comissao', p_entrada);
  perform comissao_reconstrucao_gatilhos('comissao', false);
  execute format('alter table comissao rename to %I', p_saida);
  execute format('alter table %I rename to comissao', p_entrada);
  perform comissao_renomear_indices(p_saida, 'comissao', p_saida);
  perform comissao_renomear_indices('comissao', p_entrada, 'comissao');
  perform comissao_reconstrucao_gatilhos('comissao', true);
end
$$;

do $$
declare
  f text;
begin
  foreach f in array array[
    'reprocessamento_aprovacao_guarda_diff()',
    'comissao_dependencias()',
    'comissao_igualar_grants(text, text)',
    'comissao_trocar(text, text)'
  ] loop
    execute format('alter function %s set search_path = %I, pg_temp', f, current_schema());
  end loop;
end
$$;
