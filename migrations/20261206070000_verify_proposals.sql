-- A verify job proposes the correction of each day it finds wrong: a gated replay job of that day
-- (as `verify --emit-jobs` would write it), kept here rather than in the jobs directory, which the
-- daemon never writes. `serve` runs the proposal's simulation; finance approves it and starts the
-- real run from the console, through the same approval gate as any gated job's.
--
-- `definicao` is the job's YAML, exactly as a file of the jobs directory would hold it (and read
-- by the same loader, against the directory's `effects.yaml`). The counts are what verify found on
-- the day when it proposed.
create table if not exists job_proposto (
  nome text primary key,
  job_verificacao text not null,
  dia date not null,
  definicao text not null,
  pedidos_errados bigint not null,
  pedidos_sem_comissao bigint not null,
  efeitos_faltando bigint not null,
  diferenca_centavos bigint not null,
  proposto_em timestamptz not null default now(),
  -- Every later verify that found the day still wrong, before its real run was applied.
  confirmado_em timestamptz not null default now(),
  constraint job_proposto_definicao_limitada check (octet_length(definicao) <= 65536)
);
create index if not exists job_proposto_dia_idx
  on job_proposto (job_verificacao, dia, proposto_em desc);

-- The console may ask `serve` for a new simulation of a gated job (after the data changed under
-- an approval, say): `simular`, by finance or an operator, for a simulation that exists.
alter table execucao_solicitada drop constraint if exists execucao_solicitada_acao_check;
alter table execucao_solicitada add constraint execucao_solicitada_acao_check
  check (acao in ('executar', 'retomar', 'varrer', 'interromper', 'simular'));

create or replace function console_solicitar(p_sessao text, p_ocioso interval, p_acao text,
                                             p_job text, p_execucao text, p_nota text)
returns bigint
language plpgsql security definer
as $$
declare
  v_email text;
  v_papel text;
  v_id bigint;
  v_execucao text := regexp_replace(p_execucao, ':simulacao$', '');
begin
  select s.email, u.papel into v_email, v_papel
  from console_sessao s join console_usuario u on u.email = s.email
  where s.id_hash = p_sessao and s.ultimo_uso > now() - s.ocioso;
  if v_email is null then
    raise exception 'no live console session' using errcode = '42501';
  end if;
  if not (v_papel = 'operador'
          or (v_papel = 'financeiro' and p_acao in ('executar', 'interromper', 'simular'))) then
    raise exception 'a % account may not ask for %', v_papel, p_acao using errcode = '42501';
  end if;
  if p_acao = 'executar' and (p_execucao is null or not exists (
       select 1 from reprocessamento_aprovacao a
       where a.execucao_id = v_execucao and a.job = p_job)) then
    raise exception 'execution % of job % has no approved simulation to start', p_execucao, p_job
      using errcode = '42501';
  end if;
  if p_acao = 'retomar' and (p_execucao is null or not exists (
       select 1 from reprocessamento_execucao e
       where e.execucao_id = p_execucao and e.modo = 'real'
         and e.estado in ('interrompida', 'falhou'))) then
    raise exception 'execution % is not a real run that was interrupted or failed', p_execucao
      using errcode = '42501';
  end if;
  if p_acao = 'simular' and (p_execucao is null or not exists (
       select 1 from reprocessamento_execucao e
       where e.execucao_id = v_execucao || ':simulacao' and e.job = p_job
         and e.modo = 'simulacao' and e.estado <> 'em-andamento')) then
    raise exception 'execution % of job % has no simulation to run again', p_execucao, p_job
      using errcode = '42501';
  end if;
  if p_acao = 'varrer' and p_execucao is not null then
    raise exception 'a sweep names no execution' using errcode = '42501';
  end if;
  if p_acao = 'interromper' then
    update reprocessamento_execucao e
    set interrupcao_pedida_em = coalesce(e.interrupcao_pedida_em, now()),
        interrupcao_pedida_por = coalesce(e.interrupcao_pedida_por, 'console:' || v_email)
    where e.execucao_id = p_execucao and e.job = p_job and e.modo = 'real'
      and e.estado = 'em-andamento' and e.execucao_id !~ ':p[0-9]+$';
    if not found then
      raise exception 'execution % of job % is not a real run in progress', p_execucao, p_job
        using errcode = '42501';
    end if;
    insert into execucao_solicitada (acao, job, execucao_id, nota, solicitado_por, estado,
                                     iniciado_em, concluido_em, resultado)
    values (p_acao, p_job, p_execucao, p_nota, 'console:' || v_email, 'concluida', now(), now(),
            'a execução para ao fim do lote em curso, com o checkpoint guardado')
    returning id into v_id;
  else
    if exists (select 1 from execucao_solicitada
               where job = p_job and estado in ('pendente', 'em-andamento')) then
      raise exception 'job % already has an open request', p_job using errcode = '23505';
    end if;
    insert into execucao_solicitada (acao, job, execucao_id, nota, solicitado_por)
    values (p_acao, p_job, p_execucao, p_nota, 'console:' || v_email)
    returning id into v_id;
  end if;
  insert into console_auditoria (quem, acao, alvo, detalhe)
  values ('console:' || v_email, 'solicitacao', coalesce(p_execucao, p_job),
          p_acao || ' ' || p_job || ' (pedido ' || v_id || ')' || coalesce(': ' || p_nota, ''));
  return v_id;
end
$$;

do $$
begin
  execute format('alter function console_solicitar(text, interval, text, text, text, text) set search_path = %I, pg_temp',
                 current_schema());
end
$$;
revoke all on function console_solicitar(text, interval, text, text, text, text) from public;
