-- One idle rule per session, whatever console instance serves it: the timeout of the instance
-- that opened the session is kept in its row, and every instance (and every function that binds
-- a decision to a session) judges idleness by that row's value against the database's clock.
-- Two consoles started with different `--idle-timeout` no longer disagree about one session.
alter table console_sessao add column if not exists ocioso interval not null
  default interval '30 minutes';

drop function if exists console_abrir_sessao(text, text, text, text);

-- A login that passed the password check: the session (with its idle timeout), the attempt and
-- the audit row together.
create or replace function console_abrir_sessao(p_sessao text, p_email text, p_csrf text,
                                                p_endereco text, p_ocioso interval)
returns void
language plpgsql security definer
as $$
begin
  insert into console_sessao (id_hash, email, csrf, endereco, ocioso)
  values (p_sessao, p_email, p_csrf, p_endereco, p_ocioso);
  insert into console_tentativa_login (email, endereco, sucesso) values (p_email, p_endereco, true);
  insert into console_auditoria (quem, acao, endereco) values ('console:' || p_email, 'login', p_endereco);
  delete from console_tentativa_login where em < now() - interval '1 day';
end
$$;

-- The account of a live session whose role is `p_papel`, or an error 42501. Live means used
-- within the session's own idle timeout; `p_ocioso` (the caller's) is no longer consulted and
-- stays only so the functions that call this keep their signatures.
create or replace function console_conta_da_sessao(p_sessao text, p_papel text, p_ocioso interval)
returns text
language plpgsql security definer
as $$
declare
  v_email text;
begin
  select s.email into v_email
  from console_sessao s join console_usuario u on u.email = s.email
  where s.id_hash = p_sessao and s.ultimo_uso > now() - s.ocioso and u.papel = p_papel;
  if v_email is null then
    raise exception 'no live console session of a % account', p_papel using errcode = '42501';
  end if;
  return v_email;
end
$$;

do $$
declare
  f text;
begin
  foreach f in array array[
    'console_conta_da_sessao(text, text, interval)',
    'console_abrir_sessao(text, text, text, text, interval)'
  ] loop
    execute format('alter function %s set search_path = %I, pg_temp', f, current_schema());
    execute format('revoke all on function %s from public', f);
  end loop;
end
$$;
