-- One order's story (`explain`, the console's `/pedidos/{id}`): its events and its corrections,
-- found without reading the whole archive.
create index if not exists evento_arquivado_pedido_idx on evento_arquivado (pedido_id, posicao);
create index if not exists reprocessamento_correcao_pedido_idx
  on reprocessamento_correcao (pedido_id);
