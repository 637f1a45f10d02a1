-- One truth for numbers: every figure that describes an execution is a tally, committed in the
-- same transaction as the batch it describes, and every surface (the run summary, `status`, the
-- report, `/metrics`) reads these rows. A figure is never recomputed from what one process saw, so
-- the surfaces agree with each other and with the tables after any interruption.
--
-- `execucao_id` is the checkpoint key that counted (a partition counts under its own key);
-- `agregado` the execution it adds up into (a partition's parent, else itself); `passagem` the
-- pass, so a `--restart` starts from zero without losing the history. `medida` is one figure:
-- `eventos-lidos`, `pedidos-alterados`, `estado:gravado`, `efeito:aplicado`, …
create table if not exists reprocessamento_contagem (
  execucao_id text not null,
  agregado text not null,
  passagem integer not null,
  medida text not null,
  valor bigint not null,
  primary key (execucao_id, passagem, medida)
);
create index if not exists reprocessamento_contagem_agregado_idx
  on reprocessamento_contagem (agregado, passagem);

-- The pass that last changed an order, so a new pass's figures count only its own corrections
-- (the row is kept: it says what the execution changed).
alter table reprocessamento_correcao add column if not exists passagem integer not null default 1;

-- Approved = applied: the job's outcome-deciding definition (window, event types, each effect
-- type's mode, on_failure and provider, on_invalid_event) and the commission rule's version, as
-- recorded when a pass starts; an approval binds the simulation's, and a real run's must match.
alter table reprocessamento_execucao add column if not exists definicao jsonb;
alter table reprocessamento_aprovacao add column if not exists definicao jsonb;
alter table reprocessamento_aprovacao add column if not exists versao_regra text;
-- Who approved is the authenticated database role, never a name given on the command line; what
-- was given becomes a note.
alter table reprocessamento_aprovacao alter column aprovado_por set default session_user;
alter table reprocessamento_aprovacao add column if not exists nota text
  check (nota is null or char_length(nota) <= 500);
