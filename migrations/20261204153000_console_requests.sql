-- People act from the console (issue 32, point 8): an authorized account asks for a gated real
-- run to start, an interrupted real run to resume, or a sweep to run now. The console's role
-- cannot write `comissao` or `efeito_aplicado`, so it never runs anything itself: it records a
-- request here, through `console_solicitar` (which checks the session's role and writes the audit
-- row in the same transaction), and `serve` (the worker's role) claims the request, runs it
-- through the same path as a scheduled fire of the job, and records how it ended.

-- A request. `acao`: `executar` starts the real run of an approved simulation (`execucao_id` is
-- its execution id), `retomar` resumes an interrupted or failed real run (`execucao_id` is its
-- key), `varrer` runs one sweeper pass (no execution). `estado`: `pendente` until a `serve`
-- claims it, `em-andamento` while it runs, then `concluida` or `falhou` with a one-line
-- `resultado`.
create table if not exists execucao_solicitada (
  id bigserial primary key,
  acao text not null check (acao in ('executar', 'retomar', 'varrer')),
  job text not null,
  execucao_id text,
  nota text,
  solicitado_por text not null,
  solicitado_em timestamptz not null default now(),
  estado text not null default 'pendente'
    check (estado in ('pendente', 'em-andamento', 'concluida', 'falhou')),
  iniciado_em timestamptz,
  concluido_em timestamptz,
  resultado text
);
-- One open request per job: a second click, or a second person, gets a refusal, not a queue.
create unique index if not exists execucao_solicitada_uma_aberta_idx
  on execucao_solicitada (job) where estado in ('pendente', 'em-andamento');
create index if not exists execucao_solicitada_pendente_idx
  on execucao_solicitada (id) where estado = 'pendente';
create index if not exists execucao_solicitada_execucao_idx
  on execucao_solicitada (execucao_id, id desc);

-- The audit trail names the new action.
alter table console_auditoria drop constraint if exists console_auditoria_acao_check;
alter table console_auditoria add constraint console_auditoria_acao_check
  check (acao in ('login', 'login-recusado', 'logout', 'aprovacao', 'resolucao',
                  'usuario-criado', 'usuario-alterado', 'usuario-removido', 'solicitacao'));

-- The console's request: who is the live session's account (never a name passed in), whose role
-- must allow the action (finance may `executar`; an operator may `executar`, `retomar` and
-- `varrer`), refused (23505) while the job has an open request; the request and its audit row
-- are written together. Returns the request's id.
create or replace function console_solicitar(p_sessao text, p_ocioso interval, p_acao text,
                                             p_job text, p_execucao text, p_nota text)
returns bigint
language plpgsql security definer
as $$
declare
  v_email text;
  v_papel text;
  v_id bigint;
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
declare
  f text;
begin
  foreach f in array array[
    'console_solicitar(text, interval, text, text, text, text)'
  ] loop
    execute format('alter function %s set search_path = %I, pg_temp', f, current_schema());
    execute format('revoke all on function %s from public', f);
  end loop;
end
$$;
