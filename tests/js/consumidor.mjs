// A consumer built on the seed's applier (aplicador.mjs), as a team running the seed's JavaScript
// would: it follows `evento_arquivado` after a position and applies each event through
// `criarAplicador`, which writes `comissao` by name. Used by the rebuild tests.
//
//   node tests/js/consumidor.mjs AFTER_POSICAO [EVERY]
//
// DATABASE_URL names the database. With EVERY = n, it applies only the events of orders whose
// number (the digits ending `pedido_id`) is a multiple of n, so a test can tell its writes from
// another consumer's. Prints `aplicado <posicao>` after each event, `parado <count>` on SIGTERM.
import pg from 'pg';
import { criarAplicador } from './aplicador.mjs';

const depois = BigInt(process.argv[2] ?? '0');
const cada = Number(process.argv[3] ?? '1');
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 2 });
const aplicador = criarAplicador({
  pool,
  gateway: { notificarVendedor: async () => ({ ok: true }) },
  execucaoId: 'consumidor-js',
  politica: { 'notificar-vendedor': { modo: 'suprimir', aoFalhar: 'manter' } },
});

let parar = false;
process.on('SIGTERM', () => { parar = true; });

let posicao = depois;
let aplicados = 0;
while (!parar) {
  const { rows } = await pool.query(
    `select posicao::text, id, tipo, pedido_id, versao::text, payload
     from evento_arquivado where posicao > $1 order by posicao limit 100`,
    [posicao.toString()],
  );
  for (const r of rows) {
    posicao = BigInt(r.posicao);
    const numero = Number((r.pedido_id.match(/(\d+)$/) ?? ['', '1'])[1]);
    if (numero % cada !== 0) continue;
    try {
      await aplicador.aplicar({
        id: r.id, tipo: r.tipo, pedidoId: r.pedido_id, versao: Number(r.versao), payload: r.payload,
      });
      aplicados += 1;
      console.log(`aplicado ${r.posicao}`);
    } catch (erro) {
      console.log(`rejeitado ${r.posicao}: ${erro.message}`);
    }
  }
  if (rows.length === 0) await new Promise((ok) => setTimeout(ok, 20));
}
console.log(`parado ${aplicados}`);
await pool.end();
