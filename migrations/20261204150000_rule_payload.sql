-- What the engine reads of an archived payload, said once: the fields the commission rule and its
-- upcasters look at (`valorCentavos`, `percentual`, `valor`), and nothing else. A payload of 50 MB
-- of other fields reaches the worker as a few bytes, so its memory does not grow with payloads.
-- Each kept field decides the same as the whole payload would:
--   - an object or an array is replaced by an empty one (the rule only asks "is it a number?");
--   - a string longer than 1 MiB is cut to 1 MiB + 1 character (still longer than 1 MiB), and
--     the domain rejects a rule field that long (`MAX_FIELD_BYTES`) with its reason;
--   - a number is kept as it is (a jsonb number's text is bounded: ~150 KB at most).
-- A payload that is not an object becomes `null`: the rule rejects both alike.
create or replace function campo_da_regra(campo jsonb)
returns jsonb
language sql immutable parallel safe
as $$
  select case jsonb_typeof(campo)
    when 'object' then '{}'::jsonb
    when 'array' then '[]'::jsonb
    when 'string' then case when octet_length(campo #>> '{}') > 1048576
                            then to_jsonb(left(campo #>> '{}', 1048577))
                            else campo end
    else campo end
$$;

create or replace function payload_da_regra(payload jsonb)
returns jsonb
language sql immutable parallel safe
as $$
  select case when jsonb_typeof(payload) <> 'object' then 'null'::jsonb else
      case when payload ? 'valorCentavos'
           then jsonb_build_object('valorCentavos', campo_da_regra(payload -> 'valorCentavos'))
           else '{}'::jsonb end
   || case when payload ? 'percentual'
           then jsonb_build_object('percentual', campo_da_regra(payload -> 'percentual'))
           else '{}'::jsonb end
   || case when payload ? 'valor'
           then jsonb_build_object('valor', campo_da_regra(payload -> 'valor'))
           else '{}'::jsonb end
  end
$$;
