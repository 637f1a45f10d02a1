-- The web console (`replay-ledger console`, `serve --console-addr`): accounts, sessions, login
-- throttling and the audit trail live here, so several console instances share them. Nothing the
-- seed defines is changed.
--
-- Who did it is proven, not claimed (DESIGN.md invariant 12): the console connects with a
-- database role of its own (`grants --console`) that may read, keep sessions, and record an
-- approval or a review decision only through the `security definer` functions below, which take
-- the session (never a name) and check that its account holds the right. Every approval and every
-- review decision, whoever records it (the console, the approver's or the reviewer's role), writes
-- its audit row in the same statement, by a trigger: neither can exist without the other.

-- A console account. `papel`: `leitor` reads; `financeiro` reads and approves simulations;
-- `operador` reads and resolves review items. The password is an argon2id hash in PHC form.
create table if not exists console_usuario (
  email text primary key check (email = lower(email) and char_length(email) between 3 and 254),
  papel text not null check (papel in ('leitor', 'financeiro', 'operador')),
  senha_hash text not null,
  criado_em timestamptz not null default now(),
  atualizado_em timestamptz not null default now(),
  criado_por text not null default session_user
);

-- A logged-in session. The cookie carries a random token; only its SHA-256 is stored, so reading
-- this table gives no way in. `csrf` is the token every form of the session carries. Idle expiry
-- is judged by the database's clock against `ultimo_uso`.
create table if not exists console_sessao (
  id_hash text primary key,
  email text not null references console_usuario (email) on delete cascade,
  csrf text not null,
  criada_em timestamptz not null default now(),
  ultimo_uso timestamptz not null default now(),
  endereco text
);
create index if not exists console_sessao_ultimo_uso_idx on console_sessao (ultimo_uso);

-- Login attempts, for throttling per account and per address (kept one day).
create table if not exists console_tentativa_login (
  id bigserial primary key,
  email text not null,
  endereco text not null,
  sucesso boolean not null,
  em timestamptz not null default now()
);
create index if not exists console_tentativa_login_email_idx on console_tentativa_login (email, em);
create index if not exists console_tentativa_login_endereco_idx on console_tentativa_login (endereco, em);
create index if not exists console_tentativa_login_em_idx on console_tentativa_login (em);

-- What was done, by whom, when. `quem` is an identity as recorded elsewhere: `console:<email>`
-- for a console account, else the database role. Written only by the functions and triggers below.
create table if not exists console_auditoria (
  id bigserial primary key,
  em timestamptz not null default now(),
  quem text not null,
  acao text not null check (acao in ('login', 'login-recusado', 'logout', 'aprovacao', 'resolucao',
                                     'usuario-criado', 'usuario-alterado', 'usuario-removido')),
  alvo text,
  detalhe text,
  endereco text
);
create index if not exists console_auditoria_em_idx on console_auditoria (em desc, id desc);

-- Every approval writes its audit row, whoever inserted it.
create or replace function reprocessamento_aprovacao_auditada() returns trigger
language plpgsql security definer
as $$
begin
  insert into console_auditoria (quem, acao, alvo, detalhe)
  values (new.aprovado_por, 'aprovacao', new.execucao_id,
          'simulação passagem ' || new.simulacao_passagem || coalesce(': ' || new.nota, ''));
  return new;
end
$$;
drop trigger if exists reprocessamento_aprovacao_auditada on reprocessamento_aprovacao;
create trigger reprocessamento_aprovacao_auditada
  after insert on reprocessamento_aprovacao
  for each row execute function reprocessamento_aprovacao_auditada();

-- Every review decision writes its audit row, whoever took it.
create or replace function efeito_revisao_auditada() returns trigger
language plpgsql security definer
as $$
begin
  insert into console_auditoria (quem, acao, alvo, detalhe)
  values (new.resolvido_por, 'resolucao', new.chave, new.decisao || coalesce(': ' || new.nota, ''));
  return new;
end
$$;
drop trigger if exists efeito_revisao_auditada on efeito_revisao;
create trigger efeito_revisao_auditada
  after insert on efeito_revisao
  for each row execute function efeito_revisao_auditada();

-- Accounts created, changed (role or password) and removed, by the database role that did it.
create or replace function console_usuario_auditado() returns trigger
language plpgsql security definer
as $$
begin
  if tg_op = 'INSERT' then
    insert into console_auditoria (quem, acao, alvo, detalhe)
    values (session_user, 'usuario-criado', 'console:' || new.email, new.papel);
  elsif tg_op = 'UPDATE' then
    insert into console_auditoria (quem, acao, alvo, detalhe)
    values (session_user, 'usuario-alterado', 'console:' || new.email, new.papel);
  else
    insert into console_auditoria (quem, acao, alvo, detalhe)
    values (session_user, 'usuario-removido', 'console:' || old.email, old.papel);
  end if;
  return null;
end
$$;
drop trigger if exists console_usuario_auditado on console_usuario;
create trigger console_usuario_auditado
  after insert or update or delete on console_usuario
  for each row execute function console_usuario_auditado();

-- What was recorded before this migration gets its audit rows once.
insert into console_auditoria (em, quem, acao, alvo, detalhe)
select a.aprovado_em, a.aprovado_por, 'aprovacao', a.execucao_id,
       'simulação passagem ' || a.simulacao_passagem || coalesce(': ' || a.nota, '')
from reprocessamento_aprovacao a
where not exists (select 1 from console_auditoria c where c.acao = 'aprovacao');
insert into console_auditoria (em, quem, acao, alvo, detalhe)
select r.resolvido_em, r.resolvido_por, 'resolucao', r.chave, r.decisao || coalesce(': ' || r.nota, '')
from efeito_revisao r
where not exists (select 1 from console_auditoria c where c.acao = 'resolucao');

-- The account of a live session (used at most `p_ocioso` ago) whose role is `p_papel`, or an
-- error 42501: what the console may record is bound to a session, never to a name it passes.
create or replace function console_conta_da_sessao(p_sessao text, p_papel text, p_ocioso interval)
returns text
language plpgsql security definer
as $$
declare
  v_email text;
begin
  select s.email into v_email
  from console_sessao s join console_usuario u on u.email = s.email
  where s.id_hash = p_sessao and s.ultimo_uso > now() - p_ocioso and u.papel = p_papel;
  if v_email is null then
    raise exception 'no live console session of a % account', p_papel using errcode = '42501';
  end if;
  return v_email;
end
$$;

-- Resolves one `incerto` effect as `p_quem` (see `resolver_incerto`). Not executable by anyone
-- but the owner: reached only through `resolver_incerto` and `console_resolver_incerto`.
create or replace function resolver_incerto_como(p_chave text, p_decisao text, p_nota text, p_quem text)
returns text
language plpgsql security definer
as $$
declare
  v_tipo text;
  v_execucao text;
  v_estado text;
begin
  if p_decisao = 'enviado' then
    update efeito_aplicado set estado = 'concluido', atualizado_em = now()
    where chave = p_chave and estado = 'incerto'
    returning tipo_efeito, execucao_id into v_tipo, v_execucao;
  elsif p_decisao = 'nao-enviado' then
    delete from efeito_aplicado where chave = p_chave and estado = 'incerto'
    returning tipo_efeito, execucao_id into v_tipo, v_execucao;
  else
    raise exception 'a review decision is enviado or nao-enviado' using errcode = '22023';
  end if;
  if not found then
    select estado into v_estado from efeito_aplicado where chave = p_chave;
    return v_estado;
  end if;
  insert into efeito_revisao (chave, tipo_efeito, execucao_id, decisao, resolvido_por, nota)
  values (p_chave, v_tipo, v_execucao, p_decisao, p_quem, p_nota);
  return 'incerto';
end
$$;
revoke all on function resolver_incerto_como(text, text, text, text) from public;

-- The reviewer's way, as before: the decision names the session's database role.
create or replace function resolver_incerto(p_chave text, p_decisao text, p_nota text)
returns text
language plpgsql security definer
as $$
begin
  return resolver_incerto_como(p_chave, p_decisao, p_nota, session_user);
end
$$;
revoke all on function resolver_incerto(text, text, text) from public;

-- The console's way: the decision names the operator account of the session.
create or replace function console_resolver_incerto(p_sessao text, p_ocioso interval, p_chave text,
                                                    p_decisao text, p_nota text)
returns text
language plpgsql security definer
as $$
begin
  return resolver_incerto_como(p_chave, p_decisao, p_nota,
                               'console:' || console_conta_da_sessao(p_sessao, 'operador', p_ocioso));
end
$$;

-- The console's approval: the row `approval::approve` built (its checks and fingerprint are the
-- CLI's), recorded as the finance account of the session. Returns the approval's id.
create or replace function console_aprovar(p_sessao text, p_ocioso interval, p_aprovacao jsonb)
returns bigint
language plpgsql security definer
as $$
declare
  v_quem text := 'console:' || console_conta_da_sessao(p_sessao, 'financeiro', p_ocioso);
  r reprocessamento_aprovacao;
  v_id bigint;
begin
  r := jsonb_populate_record(null::reprocessamento_aprovacao, p_aprovacao);
  insert into reprocessamento_aprovacao
    (execucao_id, job, simulacao_passagem, simulacao_concluida_em, aprovado_por, nota, pedidos,
     pedidos_alterados, total_antes_centavos, total_depois_centavos, eventos_total,
     eventos_max_posicao, eventos_hash, comissao_hash, definicao, versao_regra)
  values
    (r.execucao_id, r.job, r.simulacao_passagem, r.simulacao_concluida_em, v_quem, r.nota, r.pedidos,
     r.pedidos_alterados, r.total_antes_centavos, r.total_depois_centavos, r.eventos_total,
     r.eventos_max_posicao, r.eventos_hash, r.comissao_hash, r.definicao, r.versao_regra)
  returning id into v_id;
  return v_id;
end
$$;

-- A login that passed the password check: the session, the attempt and the audit row together.
create or replace function console_abrir_sessao(p_sessao text, p_email text, p_csrf text, p_endereco text)
returns void
language plpgsql security definer
as $$
begin
  insert into console_sessao (id_hash, email, csrf, endereco)
  values (p_sessao, p_email, p_csrf, p_endereco);
  insert into console_tentativa_login (email, endereco, sucesso) values (p_email, p_endereco, true);
  insert into console_auditoria (quem, acao, endereco) values ('console:' || p_email, 'login', p_endereco);
  delete from console_tentativa_login where em < now() - interval '1 day';
end
$$;

-- A login refused (unknown account or wrong password): the attempt and the audit row.
create or replace function console_recusar_login(p_email text, p_endereco text)
returns void
language plpgsql security definer
as $$
begin
  insert into console_tentativa_login (email, endereco, sucesso) values (p_email, p_endereco, false);
  insert into console_auditoria (quem, acao, endereco)
  values ('console:' || left(p_email, 254), 'login-recusado', p_endereco);
  delete from console_tentativa_login where em < now() - interval '1 day';
end
$$;

-- A logout: the session ends and the audit row says who left. Nothing when there is no session.
create or replace function console_fechar_sessao(p_sessao text, p_endereco text)
returns void
language plpgsql security definer
as $$
declare
  v_email text;
begin
  delete from console_sessao where id_hash = p_sessao returning email into v_email;
  if found then
    insert into console_auditoria (quem, acao, endereco) values ('console:' || v_email, 'logout', p_endereco);
  end if;
end
$$;

do $$
declare
  f text;
begin
  foreach f in array array[
    'reprocessamento_aprovacao_auditada()',
    'efeito_revisao_auditada()',
    'console_usuario_auditado()',
    'console_conta_da_sessao(text, text, interval)',
    'resolver_incerto_como(text, text, text, text)',
    'resolver_incerto(text, text, text)',
    'console_resolver_incerto(text, interval, text, text, text)',
    'console_aprovar(text, interval, jsonb)',
    'console_abrir_sessao(text, text, text, text)',
    'console_recusar_login(text, text)',
    'console_fechar_sessao(text, text)'
  ] loop
    execute format('alter function %s set search_path = %I, pg_temp', f, current_schema());
    execute format('revoke all on function %s from public', f);
  end loop;
end
$$;
