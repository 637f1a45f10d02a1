-- One order's story (`explain`, the console's `/pedidos/{id}`) and `verify`'s reads of every
-- `pedido.pago` of the orders it checks: an order's events and corrections, found without
-- reading the whole archive. Hash indexes: a btree entry holds at most 2704 bytes,
-- and the archive is written by another system, which may store an order id longer than that; an
-- index of ours must never refuse its insert.
create index if not exists evento_arquivado_pedido_idx on evento_arquivado using hash (pedido_id);
create index if not exists reprocessamento_correcao_pedido_idx
  on reprocessamento_correcao using hash (pedido_id);
