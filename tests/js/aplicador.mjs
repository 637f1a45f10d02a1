// The seed's applier (seeds/000_2dc36fca75b1dbab.txt, "aplicador.js"), copied verbatim (only
// re-indented, and the import pointing at comissao.mjs). It is the seed's JavaScript consumer that
// writes `comissao` by name: the rebuild tests run it before, during and after a swap. Do not
// "fix" it here.

// aplicador.js
import { calcularComissao } from './comissao.mjs';
// Reserva a chave do efeito. Uma reserva abandonada so pode ser retomada
// quando o provedor deduplica pela chave ($5 = true).
const RESERVAR = `
insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id)
values ($1, $2, $3, 'reservado', $4)
on conflict (chave) do update
set execucao_id = excluded.execucao_id, atualizado_em = now()
where efeito_aplicado.estado = 'reservado'
and $5::boolean
and efeito_aplicado.atualizado_em < now() - interval '5 minutes'
returning chave`;
export function criarAplicador({
  pool, // pg.Pool
  gateway,
  execucaoId, // 'ao-vivo' ou, por exemplo, 'replay-2026-10-14-v2'
  politica, // { [tipoEfeito]: { modo: 'aplicar' | 'suprimir', aoFalhar: 'liberar' | 'manter' } }
  simular = false,
  metricas,
}) {
  async function gravarComissao(evento, valor) {
    // So sobrescreve se o evento for da mesma versao ou mais novo que o da linha atual
    const { rowCount } = await pool.query(
      `insert into comissao (pedido_id, valor_centavos, versao_evento)
values ($1, $2, $3)
on conflict (pedido_id) do update
set valor_centavos = excluded.valor_centavos,
versao_evento = excluded.versao_evento,
atualizado_em = now()
where comissao.versao_evento <= excluded.versao_evento`,
      [evento.pedidoId, valor, evento.versao],
    );
    metricas?.estado(rowCount === 1 ? 'gravado' : 'ignorado-versao-mais-nova');
  }
  async function registrarDiff(evento, valor) {
    const { rows } = await pool.query(
      'select valor_centavos, versao_evento from comissao where pedido_id = $1',
      [evento.pedidoId],
    );
    const atual = rows[0];
    if (atual && Number(atual.versao_evento) > Number(evento.versao)) return;
    await pool.query(
      `insert into reprocessamento_diff (execucao_id, pedido_id, antes, depois)
values ($1, $2, $3, $4)
on conflict (execucao_id, pedido_id) do update
set antes = excluded.antes, depois = excluded.depois`,
      [execucaoId, evento.pedidoId, atual ? atual.valor_centavos : null, valor],
    );
  }
  async function efeitoExterno(evento, tipo, executar) {
    const regra = politica[tipo];
    const chave = `${evento.id}:${tipo}`;
    if (!regra || regra.modo === 'suprimir') {
      metricas?.efeito(tipo, 'suprimido');
      return;
    }
    if (simular) {
      const { rowCount } = await pool.query(
        'select 1 from efeito_aplicado where chave = $1',
        [chave],
      );
      metricas?.efeito(tipo, rowCount ? 'ja-registrado' : 'seria-aplicado');
      return;
    }
    const reserva = await pool.query(RESERVAR, [
      chave,
      evento.id,
      tipo,
      execucaoId,
      regra.aoFalhar === 'liberar',
    ]);
    if (reserva.rowCount === 0) {
      metricas?.efeito(tipo, 'ja-registrado');
      return;
    }
    try {
      const resultado = await executar(chave);
      await pool.query(
        `update efeito_aplicado
set estado = 'concluido', resultado = $2, atualizado_em = now()
where chave = $1`,
        [chave, JSON.stringify(resultado ?? null)],
      );
      metricas?.efeito(tipo, 'aplicado');
    } catch (erro) {
      if (regra.aoFalhar === 'liberar') {
        // O provedor deduplica pela chave: tentar de novo nao duplica o efeito
        await pool.query(
          "delete from efeito_aplicado where chave = $1 and estado = 'reservado'",
          [chave],
        );
        throw erro;
      }
      // Sem idempotencia no provedor nao da para saber se a mensagem saiu
      await pool.query(
        "update efeito_aplicado set estado = 'incerto', atualizado_em = now() where chave = $1",
        [chave],
      );
      metricas?.efeito(tipo, 'incerto');
    }
  }
  async function aplicar(evento) {
    if (evento.tipo !== 'pedido.pago') return;
    const valor = calcularComissao(evento.payload);
    if (simular) await registrarDiff(evento, valor);
    else await gravarComissao(evento, valor);
    await efeitoExterno(evento, 'notificar-vendedor', (chave) =>
      gateway.notificarVendedor(
        { pedidoId: evento.pedidoId, valorCentavos: valor },
        { chaveIdempotencia: chave },
      ),
    );
  }
  return { aplicar };
}
