-- `verify` reads every `pedido.pago` of each order it checks: without this index each check of a
-- few days would scan the whole archive. A hash index: it holds a 4-byte hash per row, so it puts
-- no bound on the length of a `pedido_id` the archive accepts (a btree entry holds at most 2704
-- bytes, and would refuse the insert of a longer id). An addition only; the seed's table is
-- unchanged.
create index if not exists evento_arquivado_pedido_hash_idx
  on evento_arquivado using hash (pedido_id);
