-- `payload_da_regra` and `campo_da_regra` were declared `immutable`, but they call
-- `jsonb_build_object` and `to_jsonb`, which PostgreSQL marks `stable`. The planner inlines a SQL
-- function only when its body is no more volatile than the function says it is, so it ran each
-- call as a separate function call instead: about 40 µs per event, seventeen times the cost of
-- reading the row. Every read for the rule paid it: the runner's windows, `verify`, the live
-- consumer and the rebuild. Both functions really are `stable`, and as `stable` they are inlined into the
-- query that calls them.
alter function campo_da_regra(jsonb) stable;
alter function payload_da_regra(jsonb) stable;
