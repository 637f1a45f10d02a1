-- One language on the console's pages: what a sweep, a report, a verify or a rebuild job's last
-- run found is kept as data (`detalhe_dados`, beside the English line `status` prints), so the
-- console says it in Portuguese; and the audit names a rebuild's approval as what it is (it called
-- every approval a "simulação").
alter table job_rodada add column if not exists detalhe_dados jsonb;

create or replace function reprocessamento_aprovacao_auditada() returns trigger
language plpgsql security definer
as $$
begin
  insert into console_auditoria (quem, acao, alvo, detalhe)
  values (new.aprovado_por, 'aprovacao', new.execucao_id,
          case when new.job = 'rebuild'
               then 'troca da reconstrução de comissao (comparação aprovada)'
               else 'simulação passagem ' || new.simulacao_passagem
          end || coalesce(': ' || new.nota, ''));
  return new;
end
$$;

do $$
begin
  execute format('alter function reprocessamento_aprovacao_auditada() set search_path = %I, pg_temp',
                 current_schema());
end
$$;
