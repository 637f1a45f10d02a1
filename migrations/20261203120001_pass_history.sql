-- An execution's passes stay reachable: `reprocessamento_execucao` holds only the current pass
-- (a `--restart` starts a new one over the same row), so every start and every end of a pass is
-- also recorded here, by a trigger, whoever wrote the row. Each pass's figures stay in
-- `reprocessamento_contagem` under its `passagem`; this row says when it ran, who ran it and how
-- it ended.
create table if not exists reprocessamento_passagem (
  execucao_id text not null,
  passagem integer not null,
  modo text not null,
  estado text not null,
  iniciada_por text not null,
  iniciada_em timestamptz not null,
  concluida_em timestamptz,
  erro text,
  primary key (execucao_id, passagem)
);

create or replace function reprocessamento_passagem_registrada() returns trigger
language plpgsql security definer
as $$
begin
  insert into reprocessamento_passagem
    (execucao_id, passagem, modo, estado, iniciada_por, iniciada_em, concluida_em, erro)
  values (new.execucao_id, new.passagem, new.modo, new.estado, new.iniciada_por, new.iniciada_em,
          new.concluida_em, new.erro)
  on conflict (execucao_id, passagem) do update
  set modo = excluded.modo, estado = excluded.estado, iniciada_por = excluded.iniciada_por,
      iniciada_em = excluded.iniciada_em, concluida_em = excluded.concluida_em,
      erro = excluded.erro;
  return new;
end
$$;
drop trigger if exists reprocessamento_passagem_registrada on reprocessamento_execucao;
create trigger reprocessamento_passagem_registrada
  after insert or update of passagem, estado, concluida_em, erro, iniciada_em
  on reprocessamento_execucao
  for each row execute function reprocessamento_passagem_registrada();

-- The current pass of every existing execution (earlier ones were not recorded).
insert into reprocessamento_passagem
  (execucao_id, passagem, modo, estado, iniciada_por, iniciada_em, concluida_em, erro)
select execucao_id, passagem, modo, estado, iniciada_por, iniciada_em, concluida_em, erro
from reprocessamento_execucao
on conflict do nothing;

do $$
begin
  execute format('alter function reprocessamento_passagem_registrada() set search_path = %I, pg_temp',
                 current_schema());
end
$$;
