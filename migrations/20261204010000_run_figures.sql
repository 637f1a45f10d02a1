-- One figure, one meaning: a real run's figures are the run's, over all its passes (a `--restart`
-- that finds nothing left to correct must not turn "7.997 pedidos" into "0 pedidos").
--
-- `passagem_anterior` is the pass that had last corrected the order when this write took the row
-- over (null: the write inserted it, the order is new to the execution). With `depois_anterior`,
-- now always the `depois` the write replaced, the correction upsert's own `returning` says what a
-- batch adds to its pass and to the whole run, without reading the table first. A correction's
-- `antes` is now kept as the value before the execution first changed the order, as the table
-- says; the pass's own "before" comes from `comissao.valor_anterior`.
alter table reprocessamento_correcao add column if not exists passagem_anterior integer;

-- The run's figures are tallied per pass under `execucao:<measure>` (what the pass added to the
-- run) and summed over the passes. Passes tallied before this version count as their own.
insert into reprocessamento_contagem (execucao_id, agregado, passagem, medida, valor)
select t.execucao_id, t.agregado, t.passagem, 'execucao:' || t.medida, t.valor
from reprocessamento_contagem t
where t.medida in ('pedidos-alterados', 'total-antes-centavos', 'total-depois-centavos')
  and not exists (
    select 1 from reprocessamento_contagem r
    where r.execucao_id = t.execucao_id and r.passagem = t.passagem and r.medida like 'execucao:%')
on conflict do nothing;
