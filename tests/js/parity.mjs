// Parity oracle for the commission rule: reads a JSON array of payloads (any JSON values) on
// stdin and prints one JSON line per payload, in order:
//
//   {"ok": 309}                                       a safe integer
//   {"ok": null, "nonfinite": true, "exact": "<int>"} finite but beyond Number.MAX_SAFE_INTEGER
//                                                     (`exact` is the double's exact value)
//   {"ok": null, "nonfinite": true}                   Infinity or NaN
//   {"error": true}                                   calcularComissao threw
//
// Usage: node tests/js/parity.mjs < payloads.json   (tests/it/domain.rs drives it)
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { calcularComissao } from './comissao.mjs';

export function outcome(payload) {
  let valor;
  try {
    valor = calcularComissao(payload);
  } catch {
    return { error: true };
  }
  if (Number.isSafeInteger(valor)) return { ok: valor + 0 }; // + 0 turns -0 into 0
  if (Number.isFinite(valor)) return { ok: null, nonfinite: true, exact: BigInt(valor).toString() };
  return { ok: null, nonfinite: true };
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const payloads = JSON.parse(readFileSync(0, 'utf8'));
  if (!Array.isArray(payloads)) throw new Error('stdin must be a JSON array of payloads');
  process.stdout.write(payloads.map((p) => JSON.stringify(outcome(p))).join('\n') + '\n');
}
