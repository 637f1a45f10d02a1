-- One owner at a time, proven at every write (DESIGN.md invariant 17).
--
-- An execution (a run, a partition `<id>:pN`, the live consumer `ao-vivo`) is run by the process
-- that holds its advisory lock. A database restart drops that lock while the old holder may still
-- be working, and another process may take the execution at once. So taking it also increments
-- its ownership epoch here, and every write that belongs to the owner (checkpoint, tallies,
-- corrections, diff rows, the execution's state, reservations, the settlement of reservations
-- abandoned by an earlier owner) first confirms, in its own transaction or statement, that the
-- epoch it took is still the current one, through `confirmar_dono`.
--
-- The confirmation first checks that the execution's advisory lock is still held (by anyone:
-- `pg_try_advisory_xact_lock_shared` fails while its holder has it exclusively). A restart of
-- the server drops every advisory lock, and may also drop the last commits made with
-- `synchronous_commit = off`: an owner whose lock died must not write once more on top of them,
-- even before anybody else has taken the execution. It then locks the epoch's row `for share`
-- until the writer commits, and taking the execution updates it: the two wait for each other. A new owner's epoch is therefore committed only after
-- every write the old owner had confirmed, and every write the old owner tries afterwards fails
-- with SQLSTATE RLOWN and changes nothing. The new owner settles the old owner's reservations
-- after taking its epoch, so no reservation, completion or checkpoint of the old owner can land
-- after that settlement.
create table if not exists reprocessamento_dono (
  execucao_id text primary key,      -- the checkpoint key: `<id>`, `<id>:simulacao`, `<id>:p3`, `ao-vivo`
  epoca bigint not null,             -- incremented each time a process takes the execution
  tomada_em timestamptz not null default now(),
  tomada_por text not null           -- application_name of the session that took it
);

-- Confirms that `p_epoca` still owns `p_execucao_id`, and holds that until the caller's
-- transaction ends; raises SQLSTATE RLOWN (and the caller's statement changes nothing) when the
-- execution's lock is no longer held or a newer owner took it. The lock's two keys are the
-- worker's (`src/execution/lock.rs`): the class 'RPLD' and `hashtext` of the execution's key.
-- Security invoker: the caller needs `update` on `reprocessamento_dono`.
create or replace function confirmar_dono(p_execucao_id text, p_epoca bigint)
returns boolean
language plpgsql volatile
as $$
begin
  if pg_try_advisory_xact_lock_shared(1380994116, hashtext(p_execucao_id)) then
    raise exception 'execution % lost its lock: epoch % no longer owns it', p_execucao_id, p_epoca
      using errcode = 'RLOWN';
  end if;
  perform 1 from reprocessamento_dono
  where execucao_id = p_execucao_id and epoca = p_epoca
  for share;
  if not found then
    raise exception 'execution % was taken over: epoch % no longer owns it', p_execucao_id, p_epoca
      using errcode = 'RLOWN';
  end if;
  return true;
end;
$$;
