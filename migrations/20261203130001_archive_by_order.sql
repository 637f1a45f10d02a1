-- `verify` reads every `pedido.pago` of each order it checks, newest first: without this index each
-- check of a few days would scan the whole archive. An addition only; the seed's table is unchanged.
create index if not exists evento_arquivado_pedido_versao_idx
  on evento_arquivado (pedido_id, versao desc, posicao desc);
