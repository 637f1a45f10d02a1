-- The approval of a rebuild's comparison, said once for both ways of giving it: the command line
-- (`replay-ledger rebuild --approve`, as the connected role) and the web console (as the finance
-- account its session proves, `console:<email>`). It approves only the comparison shown, and only
-- while that comparison is still the rebuild's: the fingerprint the person saw (`p_impressao`)
-- must be the rebuild's stored fingerprint, under a lock of its row. A comparison that changed
-- is refused with SQLSTATE RL409. The swap checks the fingerprint again under its lock of
-- `comissao`.
create or replace function comissao_reconstrucao_aprovar(p_id bigint, p_impressao text,
                                                         p_nota text, p_quem text)
returns table (aprovacao bigint, por text)
language plpgsql
as $$
declare
  r comissao_reconstrucao;
  v_linha jsonb;
  -- The approver's role may not write `aprovado_por` (its default, session_user, says who):
  -- the column is named only when a console account is recorded.
  v_colunas text := 'execucao_id, job, simulacao_passagem, simulacao_concluida_em, nota, pedidos, '
    'pedidos_alterados, total_antes_centavos, total_depois_centavos, eventos_total, '
    'eventos_max_posicao, eventos_hash, comissao_hash, definicao, versao_regra';
  v_id bigint;
  v_por text;
begin
  select * into r from comissao_reconstrucao c where c.id = p_id for update;
  if not found or r.estado <> 'comparada' or r.impressao is distinct from p_impressao then
    raise exception 'the comparison shown (%) is not rebuild %''s to approve now (it is %, %)',
      p_impressao, p_id, coalesce(r.impressao, '-'), coalesce(r.estado, 'gone')
      using errcode = 'RL409';
  end if;
  select jsonb_build_object(
           'execucao_id', 'reconstrucao-comissao-' || r.id, 'job', 'rebuild',
           'simulacao_passagem', 1, 'simulacao_concluida_em', r.comparada_em,
           'aprovado_por', p_quem, 'nota', p_nota, 'pedidos', count(*),
           'pedidos_alterados', count(*),
           'total_antes_centavos', coalesce(sum(d.antes), 0),
           'total_depois_centavos', coalesce(sum(d.depois), 0),
           'eventos_total', r.eventos_lidos, 'eventos_max_posicao', r.ultima_posicao,
           'eventos_hash', p_impressao, 'comissao_hash', r.checksum_nova,
           'definicao', jsonb_build_object('kind', 'rebuild', 'rule', r.versao_regra),
           'versao_regra', r.versao_regra)
  into v_linha
  from comissao_reconstrucao_diff d;
  if p_quem is not null then
    v_colunas := v_colunas || ', aprovado_por';
  end if;
  execute format(
    'insert into reprocessamento_aprovacao (%1$s) '
    'select %1$s from jsonb_populate_record(null::reprocessamento_aprovacao, $1) '
    'returning id, aprovado_por', v_colunas)
  using v_linha into v_id, v_por;
  update comissao_reconstrucao set aprovacao_id = v_id where id = r.id;
  return query select v_id, v_por;
end
$$;

-- The console's way in: the session must be live and its account a finance one (42501 otherwise).
create or replace function console_aprovar_reconstrucao(p_sessao text, p_ocioso interval,
                                                        p_id bigint, p_impressao text,
                                                        p_nota text)
returns bigint
language plpgsql security definer
as $$
declare
  v_id bigint;
begin
  select a.aprovacao into v_id
  from comissao_reconstrucao_aprovar(p_id, p_impressao, p_nota,
         'console:' || console_conta_da_sessao(p_sessao, 'financeiro', p_ocioso)) a;
  return v_id;
end
$$;

do $$
begin
  execute format('alter function console_aprovar_reconstrucao(text, interval, bigint, text, text) set search_path = %I, pg_temp', current_schema());
  revoke all on function console_aprovar_reconstrucao(text, interval, bigint, text, text) from public;
end
$$;
