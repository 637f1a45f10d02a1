// The seed's `calcularComissao` (seeds/000_2dc36fca75b1dbab.txt, "comissao.js"), copied verbatim
// (only re-indented). It is the reference for invariant `js-parity`: the Rust
// `replay_ledger::domain::calcular_comissao` must give the same answer for every payload.
// Do not "fix" it here: a difference is a Rust bug, or a decision to record in the book (docs/src/guarantees.md).

// comissao.js
export function calcularComissao({ valorCentavos, percentual }) {
  if (!Number.isInteger(valorCentavos) || typeof percentual !== 'number') {
    throw new Error('payload de pedido.pago invalido');
  }
  // A versao com bug dividia por 1.000: percentual 5 virava 0,5%
  return Math.round((valorCentavos * percentual) / 100);
}
