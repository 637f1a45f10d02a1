-- The partition of an order, said once. A job with `partitions: N` splits its window by a stable
-- hash of `pedido_id`; every statement that reads a partition's events or settles its
-- reservations calls this function, so no copy can drift and let a worker settle another
-- partition's reservations. A plain SQL expression, immutable: the planner inlines it.
create or replace function particao_do_pedido(pedido_id text, particoes integer)
returns integer
language sql immutable parallel safe
as $$ select mod(hashtext(pedido_id) & 2147483647, particoes) $$;
