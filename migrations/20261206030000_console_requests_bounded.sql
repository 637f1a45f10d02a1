-- What the console may ask `serve` for, held where its role writes: a caller holding only the
-- console role's password (and a session it opened) can ask for no more than the console's own
-- pages offer.
--
-- - `executar` names an execution whose simulation an approval exists for (the run's gate then
--   checks that approval against the data before anything is written);
-- - `retomar` names a real run that exists and was interrupted or failed;
-- - `varrer` names no execution;
-- - a note is held to the rules of every other note: at most 500 characters, none a control,
--   bidi control or line separator (a table check, so every path is held to it).
alter table execucao_solicitada drop constraint if exists execucao_solicitada_nota_inerte;
alter table execucao_solicitada add constraint execucao_solicitada_nota_inerte
  check (char_length(nota) <= 500
         and nota !~ '[\x01-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff]')
  not valid;

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
  if not (v_papel = 'operador' or (v_papel = 'financeiro' and p_acao = 'executar')) then
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
  if p_acao = 'varrer' and p_execucao is not null then
    raise exception 'a sweep names no execution' using errcode = '42501';
  end if;
  if exists (select 1 from execucao_solicitada
             where job = p_job and estado in ('pendente', 'em-andamento')) then
    raise exception 'job % already has an open request', p_job using errcode = '23505';
  end if;
  insert into execucao_solicitada (acao, job, execucao_id, nota, solicitado_por)
  values (p_acao, p_job, p_execucao, p_nota, 'console:' || v_email)
  returning id into v_id;
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
