-- Ending a lapsed owner's sessions without a grant that reaches the whole cluster.
--
-- A process that finds an execution's lock held by an owner whose lease lapsed twice over ends
-- that owner's sessions, so the lock frees at once. `pg_terminate_backend` needs the role of the
-- sessions ended (or `pg_signal_backend`, which ends any non-superuser session of the cluster).
-- With two worker roles, the taker's role is not the holder's: this function, run with the
-- rights of the schema's owner, ends only what a takeover needs —
--
-- - sessions of this database,
-- - named by this program (`replay-ledger <role> HOST:PID`) with the holder's `HOST:PID`,
-- - where `p_pid` holds the execution's lock (the 'RPLD' advisory lock, as `confirmar_dono`),
-- - and the execution's last confirmation is older than twice the lease (the longer of the
--   holder's own, recorded with its confirmation, and the caller's),
--
-- and of those only the ones whose role the owner has the privileges of (a superuser's never,
-- unless the owner is one). It returns every session it judged, ended or not, with its role, so
-- a caller of the holder's own role ends the rest itself.
alter table reprocessamento_arrendamento add column if not exists prazo interval;
comment on column reprocessamento_arrendamento.prazo is
  'the lease of the process that confirmed: a taker waits twice the longer of it and its own';

create or replace function reprocessamento_encerrar_caducado(p_execucao text, p_pid integer,
                                                             p_prazo interval)
returns table (pid integer, papel oid, encerrada boolean)
language plpgsql security definer
as $$
declare
  v_palavra text;
begin
  select split_part(a.application_name, ' ', 3) into v_palavra
  from pg_locks l join pg_stat_activity a on a.pid = l.pid
  where l.pid = p_pid and l.locktype = 'advisory' and l.granted
    and l.database = (select d.oid from pg_database d where d.datname = current_database())
    and l.classid = 1380994116 and l.objid = hashtext(p_execucao)::oid and l.objsubid = 2
    and a.application_name like 'replay-ledger %';
  if coalesce(v_palavra, '') = '' then
    return;
  end if;
  if not exists (select 1 from reprocessamento_arrendamento r
                 where r.execucao_id = p_execucao
                   and r.confirmado_em < now() - 2 * greatest(p_prazo, coalesce(r.prazo, p_prazo)))
  then
    return;
  end if;
  return query
    select a.pid, a.usesysid,
           case when pg_has_role(a.usesysid, 'USAGE')
                  or pg_has_role('pg_signal_backend', 'USAGE')
                then pg_terminate_backend(a.pid)
                else false end
    from pg_stat_activity a
    where a.datname = current_database() and a.pid <> pg_backend_pid()
      and a.application_name like 'replay-ledger %'
      and split_part(a.application_name, ' ', 3) = v_palavra;
end;
$$;

revoke all on function reprocessamento_encerrar_caducado(text, integer, interval) from public;

-- Its names resolve in the schema it was created in, whoever calls it.
do $$
begin
  execute format('alter function reprocessamento_encerrar_caducado(text, integer, interval) '
                 'set search_path = pg_catalog, %I', current_schema());
end;
$$;
