//! The messages an approval will send, as files finance can open: the CSV (the diff's
//! conventions: BOM, CRLF, RFC 4180, formula-guarded text, cents) and the spreadsheet (reais as
//! numbers, text cells for ids). Both are written message by message as the window is read, never
//! from a list of them all: the spreadsheet's sheet in rust_xlsxwriter's constant-memory mode
//! (rows go to a temporary file as they are written), so a window of 300,000 messages costs the
//! console the compressed file, not the rows.

use rust_xlsxwriter::{Format, Workbook, XlsxError};

use super::csv::{bytes, guard, writer};
use replay_ledger_core::engine::approval::sends::Send;

/// The CSV header row.
pub const CSV_HEADER: &str =
    "tipo_efeito,chave,evento_id,pedido_id,posicao,ocorrido_em,valor_centavos";

/// The CSV, written a message at a time.
pub struct Csv(::csv::Writer<Vec<u8>>);

impl Default for Csv {
    fn default() -> Self {
        Csv(writer(Vec::new(), CSV_HEADER).expect("a Vec takes every write"))
    }
}

impl Csv {
    pub fn push(&mut self, s: &Send) {
        self.0
            .write_record([
                guard(&s.tipo),
                guard(&s.key),
                guard(&s.event_id),
                guard(&s.pedido_id),
                s.posicao.to_string(),
                s.ocorrido_em.to_rfc3339(),
                s.valor_centavos.to_string(),
            ])
            .expect("a Vec takes every write and every row has the header's width");
    }

    pub fn finish(self) -> Vec<u8> {
        bytes(self.0)
    }
}

/// The CSV's bytes, for a list at hand.
pub fn csv(sends: &[Send]) -> Vec<u8> {
    let mut out = Csv::default();
    sends.iter().for_each(|s| out.push(s));
    out.finish()
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

/// The spreadsheet, one sheet `mensagens`, written a message at a time in constant memory. The
/// first error stops the writing; [`Xlsx::finish`] returns it.
pub struct Xlsx {
    book: Workbook,
    rows: u32,
    money: Format,
    failed: Option<XlsxError>,
}

impl Xlsx {
    pub fn new() -> Result<Xlsx, XlsxError> {
        let mut book = Workbook::new();
        let sheet = book.add_worksheet_with_constant_memory();
        sheet.set_name("mensagens")?;
        let bold = Format::new().set_bold();
        for (col, title) in (0u16..).zip(XLSX_HEADER) {
            sheet.write_string_with_format(0, col, title, &bold)?;
        }
        sheet.set_column_width(1, 36)?;
        sheet.set_freeze_panes(1, 0)?;
        Ok(Xlsx {
            book,
            rows: 0,
            money: Format::new().set_num_format("#,##0.00"),
            failed: None,
        })
    }

    pub fn push(&mut self, s: &Send) {
        if self.failed.is_some() {
            return;
        }
        if let Err(e) = self.write(s) {
            self.failed = Some(e);
        }
    }

    fn write(&mut self, s: &Send) -> Result<(), XlsxError> {
        let row = self.rows + 1;
        let sheet = self.book.worksheet_from_index(0)?;
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
        sheet.write_number_with_format(row, 6, s.valor_centavos as f64 / 100.0, &self.money)?;
        self.rows = row;
        Ok(())
    }

    /// The workbook's bytes (filterable over every row), or the first error.
    pub fn finish(mut self) -> Result<Vec<u8>, XlsxError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        self.book
            .worksheet_from_index(0)?
            .autofilter(0, 0, self.rows, 6)?;
        self.book.save_to_buffer()
    }
}

/// The workbook's bytes, for a list at hand.
pub fn xlsx(sends: &[Send]) -> Result<Vec<u8>, XlsxError> {
    let mut out = Xlsx::new()?;
    sends.iter().for_each(|s| out.push(s));
    out.finish()
}
