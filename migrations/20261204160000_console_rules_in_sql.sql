-- The console's rules, enforced where its role writes, not only in the console's code: a caller
-- that holds the console role but not its code (a stolen connection string, a bug) can still only
-- open sessions, write notes and record approvals the console itself would.
--
-- Notes: at most 500 characters, none a C0/C1 control, bidi control or line separator (the same
-- set as `shared::text::is_hazard`): a note reaches terminals, e-mails and pages. As table checks,
-- so every path (the console's functions, `approve --note`, `review resolve`) is held to them;
-- `not valid`, so rows written before stay as they are.
alter table reprocessamento_aprovacao drop constraint if exists reprocessamento_aprovacao_nota_inerte;
alter table reprocessamento_aprovacao add constraint reprocessamento_aprovacao_nota_inerte
  check (char_length(nota) <= 500
         and nota !~ '[\x01-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff]')
  not valid;
alter table efeito_revisao drop constraint if exists efeito_revisao_nota_inerte;
alter table efeito_revisao add constraint efeito_revisao_nota_inerte
  check (char_length(nota) <= 500
         and nota !~ '[\x01-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff]')
  not valid;

-- A session's idle timeout is positive and at most 30 days (`console --idle-timeout`'s bound).
create or replace function console_abrir_sessao(p_sessao text, p_email text, p_csrf text,
                                                p_endereco text, p_ocioso interval)
returns void
language plpgsql security definer
as $$
begin
  if p_ocioso is null or p_ocioso <= interval '0' or p_ocioso > interval '30 days' then
    raise exception 'a console session idles out within 30 days' using errcode = '22023';
  end if;
  insert into console_sessao (id_hash, email, csrf, endereco, ocioso)
  values (p_sessao, p_email, p_csrf, p_endereco, p_ocioso);
  insert into console_tentativa_login (email, endereco, sucesso) values (p_email, p_endereco, true);
  insert into console_auditoria (quem, acao, endereco) values ('console:' || p_email, 'login', p_endereco);
  delete from console_tentativa_login where em < now() - interval '1 day';
end
$$;

-- A simulation pass's figure `p_medida`, summed over its partitions as every surface sums it
-- (saturating at bigint's ends, as the summary does).
create or replace function console_contagem(p_agregado text, p_passagem integer, p_medida text)
returns bigint
language sql stable security definer
as $$
  select greatest(least(coalesce(sum(valor), 0), 9223372036854775807), -9223372036854775808)::bigint
  from reprocessamento_contagem
  where agregado = p_agregado and passagem = p_passagem and medida = p_medida
$$;

-- The console's approval, as before, except that the diff's totals are read from the
-- simulation's tallies, not taken from the caller.
create or replace function console_aprovar(p_sessao text, p_ocioso interval, p_aprovacao jsonb)
returns bigint
language plpgsql security definer
as $$
declare
  v_quem text := 'console:' || console_conta_da_sessao(p_sessao, 'financeiro', p_ocioso);
  r reprocessamento_aprovacao;
  v_sim text;
  v_id bigint;
begin
  r := jsonb_populate_record(null::reprocessamento_aprovacao, p_aprovacao);
  v_sim := r.execucao_id || ':simulacao';
  insert into reprocessamento_aprovacao
    (execucao_id, job, simulacao_passagem, simulacao_concluida_em, aprovado_por, nota, pedidos,
     pedidos_alterados, total_antes_centavos, total_depois_centavos, eventos_total,
     eventos_max_posicao, eventos_hash, comissao_hash, definicao, versao_regra)
  values
    (r.execucao_id, r.job, r.simulacao_passagem, r.simulacao_concluida_em, v_quem, r.nota,
     console_contagem(v_sim, r.simulacao_passagem, 'pedidos-no-diff'),
     console_contagem(v_sim, r.simulacao_passagem, 'pedidos-alterados'),
     console_contagem(v_sim, r.simulacao_passagem, 'total-antes-centavos'),
     console_contagem(v_sim, r.simulacao_passagem, 'total-depois-centavos'),
     r.eventos_total, r.eventos_max_posicao, r.eventos_hash, r.comissao_hash, r.definicao,
     r.versao_regra)
  returning id into v_id;
  return v_id;
end
$$;

do $$
declare
  f text;
begin
  foreach f in array array[
    'console_abrir_sessao(text, text, text, text, interval)',
    'console_contagem(text, integer, text)',
    'console_aprovar(text, interval, jsonb)'
  ] loop
    execute format('alter function %s set search_path = %I, pg_temp', f, current_schema());
    execute format('revoke all on function %s from public', f);
  end loop;
end
$$;
