-- The ownership lease (issue 33): the owner of an execution confirms, every few seconds on the
-- session that holds its advisory lock, that it is alive and still holds its epoch. An owner that
-- could not confirm within its lease stops itself (no new reservation, no new call). A process
-- that finds the execution's lock held by an owner whose last confirmation is older than twice
-- the lease (by this database's clock) knows that owner has stopped, and ends that owner's
-- sessions so the lock is free: a host cut off by the network no longer keeps its partitions.
-- A separate table from `reprocessamento_dono`, so that confirming never waits for the owner's
-- own writes (which hold the epoch's row `for share`).
create table if not exists reprocessamento_arrendamento (
  execucao_id text primary key,      -- the checkpoint key, as in `reprocessamento_dono`
  epoca bigint not null,             -- the epoch that confirmed
  confirmado_em timestamptz not null default now(),
  confirmado_por text not null       -- application_name of the session holding the lock
);
