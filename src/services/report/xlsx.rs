//! The diff as a spreadsheet (`GET /executions/{id}/diff.xlsx`): what a pt-BR spreadsheet opens
//! without an import dialog, where the CSV of integer cents needs one.
//!
//! One sheet `diff`: a header row (`pedido_id`, `antes (R$)`, `depois (R$)`, `diferença (R$)`),
//! frozen and filterable (an autofilter over the whole table), then one row per order. Amounts are
//! numbers in reais (cents / 100, shown with two decimals by the cell format, so the spreadsheet
//! sums them); an order without a commission before has an empty `antes`. Ids are written as text
//! cells, never formulas, whatever they start with.

use rust_xlsxwriter::{Format, Workbook, XlsxError};

use replay_ledger_core::tables::commission::DiffRow;

/// The header row.
pub const HEADER: [&str; 4] = ["pedido_id", "antes (R$)", "depois (R$)", "diferença (R$)"];

/// The sheet `diff` of a new workbook, with its header row in bold.
fn diff_sheet<'w>(
    workbook: &'w mut Workbook,
    titles: &[&str],
) -> Result<&'w mut rust_xlsxwriter::Worksheet, XlsxError> {
    let sheet = workbook.add_worksheet();
    sheet.set_name("diff")?;
    let bold = Format::new().set_bold();
    for (col, title) in (0u16..).zip(titles) {
        sheet.write_string_with_format(0, col, *title, &bold)?;
    }
    Ok(sheet)
}

/// The workbook's bytes.
pub fn render(rows: &[DiffRow]) -> Result<Vec<u8>, XlsxError> {
    let mut workbook = Workbook::new();
    let sheet = diff_sheet(&mut workbook, &HEADER)?;
    let money = Format::new().set_num_format("#,##0.00");
    let reais = |cents: i64| cents as f64 / 100.0;
    for (row, r) in (1u32..).zip(rows) {
        sheet.write_string(row, 0, &r.pedido_id)?;
        if let Some(antes) = r.antes {
            sheet.write_number_with_format(row, 1, reais(antes), &money)?;
        }
        sheet.write_number_with_format(row, 2, reais(r.depois), &money)?;
        sheet.write_number_with_format(row, 3, reais(r.diferenca()), &money)?;
    }
    let last = u32::try_from(rows.len()).unwrap_or(u32::MAX);
    sheet.autofilter(0, 0, last, 3)?;
    sheet.set_freeze_panes(1, 0)?;
    sheet.set_column_width(0, 24)?;
    for col in 1..=3 {
        sheet.set_column_width(col, 16)?;
    }
    workbook.save_to_buffer()
}

/// A rebuild's diff as a spreadsheet: the columns of the CSV's
/// [`REBUILD_HEADER`](super::csv::REBUILD_HEADER), amounts in reais, versions as numbers.
pub fn render_rebuild(
    rows: &[replay_ledger_core::services::rebuild::DiffRow],
) -> Result<Vec<u8>, XlsxError> {
    const TITLES: [&str; 7] = [
        "pedido_id",
        "antes (R$)",
        "versão antes",
        "depois (R$)",
        "versão depois",
        "diferença (R$)",
        "motivo",
    ];
    let mut workbook = Workbook::new();
    let sheet = diff_sheet(&mut workbook, &TITLES)?;
    let money = Format::new().set_num_format("#,##0.00");
    let reais = |cents: i64| cents as f64 / 100.0;
    for (row, r) in (1u32..).zip(rows) {
        sheet.write_string(row, 0, &r.pedido_id)?;
        if let Some(antes) = r.antes {
            sheet.write_number_with_format(row, 1, reais(antes), &money)?;
        }
        if let Some(v) = r.versao_antes {
            sheet.write_number(row, 2, v as f64)?;
        }
        if let Some(depois) = r.depois {
            sheet.write_number_with_format(row, 3, reais(depois), &money)?;
        }
        if let Some(v) = r.versao_depois {
            sheet.write_number(row, 4, v as f64)?;
        }
        let diferenca = r.depois.unwrap_or(0) - r.antes.unwrap_or(0);
        sheet.write_number_with_format(row, 5, reais(diferenca), &money)?;
        sheet.write_string(row, 6, r.why())?;
    }
    let last = u32::try_from(rows.len()).unwrap_or(u32::MAX);
    sheet.autofilter(0, 0, last, 6)?;
    sheet.set_freeze_panes(1, 0)?;
    sheet.set_column_width(0, 24)?;
    for col in 1..=5 {
        sheet.set_column_width(col, 14)?;
    }
    sheet.set_column_width(6, 28)?;
    workbook.save_to_buffer()
}
