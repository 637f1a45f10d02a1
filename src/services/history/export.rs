//! Where `comissao --as-of` writes its rows, one at a time as they are computed (nothing is held
//! but the current row): a text table or one JSON document on standard output, a CSV file or an
//! XLSX file shaped like the diff downloads finance already reads (`services::report`):
//!
//! - the table as of a moment: `pedido_id,valor_centavos,versao_evento,ocorrido_em` (CSV, cents)
//!   or `pedido_id`, `comissão (R$)`, `versão`, `ocorrido em (UTC)` (XLSX, reais as numbers);
//! - between two moments: the diff's own columns, `pedido_id,antes,depois,diferenca`.
//!
//! The CSV has the report's byte-order mark, CRLF, RFC 4180 quoting and formula guard; the XLSX
//! is written in constant-memory mode (rows go to a temporary file as they come), with text ids.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use rust_xlsxwriter::{Format, Workbook, XlsxError};

use super::{Row, Totals};
use crate::services::report::{csv, xlsx};
use replay_ledger_core::shared::text::inert;

/// The CSV header of the table as of a moment.
pub const TABLE_HEADER: &str = "pedido_id,valor_centavos,versao_evento,ocorrido_em";
/// The XLSX header of the table as of a moment.
pub const TABLE_XLSX_HEADER: [&str; 4] =
    ["pedido_id", "comissão (R$)", "versão", "ocorrido em (UTC)"];

/// The output's form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Form {
    Text,
    Json,
    Csv(PathBuf),
    Xlsx(PathBuf),
}

/// A writer of rows in one form; `compare` says which columns.
pub struct Export {
    out: Out,
    compare: bool,
    rows: u32,
}

enum Out {
    Text(BufWriter<io::Stdout>),
    Json(BufWriter<io::Stdout>),
    Csv(Box<::csv::Writer<File>>),
    Xlsx(Box<Workbook>, PathBuf),
}

fn xlsx_error(e: XlsxError) -> io::Error {
    io::Error::other(e.to_string())
}

impl Export {
    /// Opens the output and writes its header; `head` is the JSON's opening fields (the moments).
    pub fn open(form: &Form, compare: bool, head: &serde_json::Value) -> io::Result<Export> {
        let out = match form {
            Form::Text => Out::Text(BufWriter::new(io::stdout())),
            Form::Json => Out::Json(BufWriter::new(io::stdout())),
            Form::Csv(path) => {
                let header = if compare { csv::HEADER } else { TABLE_HEADER };
                Out::Csv(Box::new(csv::writer(File::create(path)?, header)?))
            }
            Form::Xlsx(path) => Out::Xlsx(Box::new(Workbook::new()), path.clone()),
        };
        let mut export = Export {
            out,
            compare,
            rows: 0,
        };
        export.header(head)?;
        Ok(export)
    }

    fn header(&mut self, head: &serde_json::Value) -> io::Result<()> {
        let compare = self.compare;
        match &mut self.out {
            Out::Text(w) if compare => writeln!(w, "pedido_id\tantes\tdepois\tdiferenca"),
            Out::Text(w) => writeln!(w, "pedido_id\tvalor_centavos\tversao_evento\tocorrido_em"),
            Out::Json(w) => {
                let head = serde_json::to_string(head)?;
                // The head's object, left open for the rows: `{…,"rows":[`.
                write!(w, "{},\"rows\":[", head.trim_end_matches('}'))
            }
            // The CSV's byte-order mark and header are written as it opens.
            Out::Csv(_) => Ok(()),
            Out::Xlsx(book, _) => xlsx_header(book, compare).map_err(xlsx_error),
        }
    }

    /// Writes one row.
    pub fn row(&mut self, row: Row) -> io::Result<()> {
        self.rows = self.rows.saturating_add(1);
        let n = self.rows;
        match (&mut self.out, row) {
            (Out::Text(w), Row::Order(r)) => writeln!(
                w,
                "{}\t{}\t{}\t{}",
                inert(&r.pedido_id),
                r.valor_centavos,
                r.versao_evento,
                r.ocorrido_em.to_rfc3339()
            ),
            (Out::Text(w), Row::Changed(d)) => writeln!(
                w,
                "{}\t{}\t{}\t{}",
                inert(&d.pedido_id),
                d.antes.map(|a| a.to_string()).unwrap_or_default(),
                d.depois,
                d.diferenca()
            ),
            (Out::Json(w), row) => {
                let value = match row {
                    Row::Order(r) => serde_json::to_value(r)?,
                    Row::Changed(d) => serde_json::json!({
                        "pedido_id": d.pedido_id, "antes": d.antes, "depois": d.depois,
                        "diferenca": d.diferenca(),
                    }),
                };
                let comma = if n > 1 { "," } else { "" };
                write!(w, "{comma}\n{value}")
            }
            (Out::Csv(w), Row::Order(r)) => Ok(w.write_record([
                csv::guard(&r.pedido_id),
                r.valor_centavos.to_string(),
                r.versao_evento.to_string(),
                r.ocorrido_em.to_rfc3339(),
            ])?),
            (Out::Csv(w), Row::Changed(d)) => Ok(w.write_record([
                csv::guard(&d.pedido_id),
                d.antes.map(|a| a.to_string()).unwrap_or_default(),
                d.depois.to_string(),
                d.diferenca().to_string(),
            ])?),
            (Out::Xlsx(book, _), row) => xlsx_row(book, n, row).map_err(xlsx_error),
        }
    }

    /// Writes the totals and closes the output.
    pub fn finish(self, totals: &Totals) -> io::Result<()> {
        match self.out {
            Out::Text(mut w) => {
                let total = match self.compare {
                    true => format!(
                        "# {} orders differ: before {} cents, after {} cents",
                        totals.orders, totals.before_cents, totals.after_cents
                    ),
                    false => format!(
                        "# {} orders, total {} cents",
                        totals.orders, totals.after_cents
                    ),
                };
                writeln!(w, "{total}")?;
                w.flush()
            }
            Out::Json(mut w) => {
                writeln!(w, "\n],\"totals\":{}}}", serde_json::to_string(totals)?)?;
                w.flush()
            }
            Out::Csv(mut w) => w.flush(),
            Out::Xlsx(mut book, path) => xlsx_save(&mut book, self.rows, &path).map_err(xlsx_error),
        }
    }
}

fn xlsx_header(book: &mut Workbook, compare: bool) -> Result<(), XlsxError> {
    let sheet = book.add_worksheet_with_constant_memory();
    sheet.set_name(if compare { "diff" } else { "comissao" })?;
    let bold = Format::new().set_bold();
    let header: [&str; 4] = if compare {
        xlsx::HEADER
    } else {
        TABLE_XLSX_HEADER
    };
    for (col, title) in (0u16..).zip(header) {
        sheet.write_string_with_format(0, col, title, &bold)?;
    }
    sheet.set_column_width(0, 24)?;
    for col in 1..=3 {
        sheet.set_column_width(col, 18)?;
    }
    sheet.set_freeze_panes(1, 0)?;
    Ok(())
}

fn xlsx_row(book: &mut Workbook, n: u32, row: Row) -> Result<(), XlsxError> {
    let sheet = book.worksheet_from_index(0)?;
    let money = Format::new().set_num_format("#,##0.00");
    let reais = |cents: i64| cents as f64 / 100.0;
    match row {
        Row::Order(r) => {
            sheet.write_string(n, 0, &r.pedido_id)?;
            sheet.write_number_with_format(n, 1, reais(r.valor_centavos), &money)?;
            sheet.write_number(n, 2, r.versao_evento as f64)?;
            sheet.write_string(n, 3, r.ocorrido_em.format("%Y-%m-%d %H:%M:%S").to_string())?;
        }
        Row::Changed(d) => {
            sheet.write_string(n, 0, &d.pedido_id)?;
            if let Some(antes) = d.antes {
                sheet.write_number_with_format(n, 1, reais(antes), &money)?;
            }
            sheet.write_number_with_format(n, 2, reais(d.depois), &money)?;
            sheet.write_number_with_format(n, 3, reais(d.diferenca()), &money)?;
        }
    }
    Ok(())
}

fn xlsx_save(book: &mut Workbook, rows: u32, path: &Path) -> Result<(), XlsxError> {
    book.worksheet_from_index(0)?.autofilter(0, 0, rows, 3)?;
    book.save(path)
}
