-- The rebuild loads `comissao_nova` as pg_restore does: the archive read once in order, each
-- order's row written once by COPY into a table with no index yet, the indexes and the
-- constraints they back built once after the load. The checkpoint is the last order fully
-- written (`ultimo_pedido_id`); `ultima_posicao` is set to the target once the load is through.
--
-- The tables' checksums are order-independent: per row the SHA-256 of an unambiguous encoding
-- (the id's length in bytes, `:`, the id, `:`, the value, `:`, the version), summed as four
-- 64-bit lanes, each modulo 2^64. The new table's is kept while it is written
-- (`nova_linhas`, `nova_resumo`), the current table's read in one scan (`comissao_resumo`).

alter table comissao_reconstrucao
  add column if not exists ultimo_pedido_id text,
  add column if not exists indices_adiados text[],
  add column if not exists nova_linhas bigint not null default 0,
  add column if not exists nova_resumo text;

comment on column comissao_reconstrucao.ultimo_pedido_id is
  'The load''s checkpoint: every order up to this pedido_id (in the database''s order) is in comissao_nova.';
comment on column comissao_reconstrucao.indices_adiados is
  'The definitions of comissao_nova''s indexes and the constraints they back, dropped for the load and built after it; empty once built, null before the load was prepared.';
comment on column comissao_reconstrucao.nova_linhas is
  'The rows of comissao_nova, counted as they are written.';
comment on column comissao_reconstrucao.nova_resumo is
  'The checksum of comissao_nova, kept as it is written (comissao_resumo computes the same by a scan).';

-- A table shaped as `comissao`: its row count and checksum, by one scan (no sort). Each row's
-- share is the expression written out in the scan, not a function call per row.
create or replace function comissao_resumo(p_tabela regclass, out linhas bigint, out resumo text)
language plpgsql stable
as $$
declare
  v_somas numeric[];
  v_faixa numeric;
  v_texto text := '';
begin
  execute format(
    'select count(*), array[' ||
    (select string_agg(format(
       'coalesce(sum((''x'' || encode(substr(h, %s, 8), ''hex''))::bit(64)::bigint::numeric), 0)',
       1 + 8 * i), ', ')
     from generate_series(0, 3) i) ||
    '] from (select sha256(convert_to(octet_length(convert_to(pedido_id, ''UTF8''))::text'
    ' || '':'' || pedido_id || '':'' || valor_centavos::text || '':'' || versao_evento::text,'
    ' ''UTF8'')) as h from %s) t',
    p_tabela)
  into linhas, v_somas;
  foreach v_faixa in array v_somas loop
    v_faixa := mod(mod(v_faixa, 18446744073709551616) + 18446744073709551616,
                   18446744073709551616);
    if v_faixa >= 9223372036854775808 then
      v_faixa := v_faixa - 18446744073709551616;
    end if;
    v_texto := v_texto || lpad(to_hex(v_faixa::bigint), 16, '0');
  end loop;
  resumo := 'sha256-soma:' || v_texto;
end
$$;

-- Records the definitions of `comissao_nova`'s indexes and of the constraints they back (primary
-- key, unique, exclusion), then drops them, for the load. Once per rebuild: a later call finds
-- them recorded and changes nothing.
create or replace function comissao_nova_adiar_indices(p_id bigint) returns void
language plpgsql
as $$
declare
  v_definicoes text[];
  r record;
begin
  if (select indices_adiados from comissao_reconstrucao where id = p_id) is not null then
    return;
  end if;
  select coalesce(array_agg(d.definicao order by d.ordem, d.nome), '{}') into v_definicoes
  from (
    select 1 as ordem, c.conname::text as nome,
           format('alter table comissao_nova add constraint %I %s', c.conname,
                  pg_get_constraintdef(c.oid)) as definicao
    from pg_constraint c
    where c.conrelid = 'comissao_nova'::regclass and c.contype in ('p', 'u', 'x')
    union all
    select 2, ic.relname::text, pg_get_indexdef(i.indexrelid)
    from pg_index i join pg_class ic on ic.oid = i.indexrelid
    where i.indrelid = 'comissao_nova'::regclass
      and not exists (select 1 from pg_constraint c where c.conindid = i.indexrelid
                                                     and c.conrelid = i.indrelid)
  ) d;
  for r in select c.conname from pg_constraint c
           where c.conrelid = 'comissao_nova'::regclass and c.contype in ('p', 'u', 'x') loop
    execute format('alter table comissao_nova drop constraint %I', r.conname);
  end loop;
  for r in select ic.relname from pg_index i join pg_class ic on ic.oid = i.indexrelid
           where i.indrelid = 'comissao_nova'::regclass loop
    execute format('drop index %I', r.relname);
  end loop;
  update comissao_reconstrucao set indices_adiados = v_definicoes where id = p_id;
end
$$;

-- Builds what `comissao_nova_adiar_indices` recorded, in the caller's transaction: all of them,
-- or (killed or failed) none.
create or replace function comissao_nova_indexar(p_id bigint) returns void
language plpgsql
as $$
declare
  v_definicao text;
begin
  foreach v_definicao in array
    coalesce((select indices_adiados from comissao_reconstrucao where id = p_id), '{}') loop
    execute v_definicao;
  end loop;
  update comissao_reconstrucao set indices_adiados = '{}' where id = p_id;
end
$$;

do $$
declare
  f text;
begin
  foreach f in array array[
    'comissao_resumo(regclass)',
    'comissao_nova_adiar_indices(bigint)',
    'comissao_nova_indexar(bigint)'
  ] loop
    execute format('alter function %s set search_path = %I, pg_temp', f, current_schema());
  end loop;
end
$$;
