//! The messages an approval will send, as files finance can open: the CSV (the diff's
//! conventions: BOM, CRLF, RFC 4180, formula-guarded text, cents) and the spreadsheet (reais as
//! numbers, text cells for ids).

use rust_xlsxwriter::{Format, Workbook, XlsxError};

use super::csv::{field, guard};
use crate::engine::approval::sends::Send;

/// The CSV header row.
pub const CSV_HEADER: &str =
    "tipo_efeito,chave,evento_id,pedido_id,posicao,ocorrido_em,valor_centavos";

/// The CSV's bytes.
pub fn csv(sends: &[Send]) -> Vec<u8> {
    let mut out = String::with_capacity(96 * (sends.len() + 1));
    out.push('\u{feff}');
    out.push_str(CSV_HEADER);
    out.push_str("\r\n");
    for s in sends {
        let cells = [
            field(&guard(&s.tipo)),
            field(&guard(&s.key)),
            field(&guard(&s.event_id)),
            field(&guard(&s.pedido_id)),
            s.posicao.to_string(),
            s.ocorrido_em.to_rfc3339(),
            s.valor_centavos.to_string(),
        ];
        out.push_str(&cells.join(","));
        out.push_str("\r\n");
    }
    out.into_bytes()
}

/// The spreadsheet's header row.
pub const XLSX_HEADER: [&str; 7] = [
    "tipo_efeito",
    "chave",
    "evento_id",
    "pedido_id",
    "posicao",
    "ocorrido_em (UTC)",
    "valor (R$)",
];

/// The workbook's bytes: one sheet `mensagens`.
pub fn xlsx(sends: &[Send]) -> Result<Vec<u8>, XlsxError> {
    let mut workbook = Workbook::new();
    let sheet = workbook.add_worksheet();
    sheet.set_name("mensagens")?;
    let bold = Format::new().set_bold();
    let money = Format::new().set_num_format("#,##0.00");
    for (col, title) in (0u16..).zip(XLSX_HEADER) {
        sheet.write_string_with_format(0, col, title, &bold)?;
    }
    for (row, s) in (1u32..).zip(sends) {
        sheet.write_string(row, 0, &s.tipo)?;
        sheet.write_string(row, 1, &s.key)?;
        sheet.write_string(row, 2, &s.event_id)?;
        sheet.write_string(row, 3, &s.pedido_id)?;
        sheet.write_number(row, 4, s.posicao as f64)?;
        sheet.write_string(
            row,
            5,
            s.ocorrido_em.format("%Y-%m-%d %H:%M:%S").to_string(),
        )?;
        sheet.write_number_with_format(row, 6, s.valor_centavos as f64 / 100.0, &money)?;
    }
    let last = u32::try_from(sends.len()).unwrap_or(u32::MAX);
    sheet.autofilter(0, 0, last, 6)?;
    sheet.set_freeze_panes(1, 0)?;
    sheet.set_column_width(1, 36)?;
    workbook.save_to_buffer()
}
