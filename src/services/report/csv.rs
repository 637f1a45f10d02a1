//! The CSV attachment: the full diff, one row per order, that opens correctly in a spreadsheet.
//!
//! - UTF-8 with a byte-order mark (without it Excel reads UTF-8 as Latin-1), RFC 4180 quoting,
//!   CRLF line ends, a header row `pedido_id,antes,depois,diferenca`;
//! - amounts in integer cents (exact, and immune to the decimal-comma/decimal-point confusion
//!   between locales); an empty `antes` means the order had no commission row;
//! - formula injection: a `pedido_id` that a spreadsheet would take for a formula (starting with
//!   `=`, `+`, `-`, `@`, a tab or a carriage return) is prefixed with `'`, as OWASP recommends, so
//!   the cell is text. A reader recovers the id by dropping that one leading `'`.
//!
//! The quoting and the line ends are the `csv` crate's ([`writer`]); the byte-order mark and the
//! formula guard ([`guard`]) are this module's, around it. Every CSV the product writes (these
//! diffs, a window's messages, `comissao --as-of`) goes through [`writer`].

use std::io::{self, Write};

use replay_ledger_core::tables::commission::DiffRow;

pub const HEADER: &str = "pedido_id,antes,depois,diferenca";

/// UTF-8's byte-order mark, first in every CSV.
const BOM: &[u8] = "\u{feff}".as_bytes();

/// A CSV writer of the house's conventions over `out`: the byte-order mark, then `header`'s row
/// (its names split at commas); RFC 4180 quoting (a field is quoted when it holds a comma, a
/// quote or a line break, and its quotes are doubled) and CRLF after every row. Text a person
/// typed goes through [`guard`] first.
pub fn writer<W: Write>(mut out: W, header: &str) -> io::Result<::csv::Writer<W>> {
    out.write_all(BOM)?;
    let mut csv = ::csv::WriterBuilder::new()
        .terminator(::csv::Terminator::CRLF)
        .quote_style(::csv::QuoteStyle::Necessary)
        .from_writer(out);
    csv.write_record(header.split(','))?;
    Ok(csv)
}

/// The bytes of a CSV written into memory.
pub fn bytes(csv: ::csv::Writer<Vec<u8>>) -> Vec<u8> {
    csv.into_inner()
        .map_err(|e| e.into_error())
        .expect("a Vec takes every write")
}

/// A CSV written into memory, one record per item of `rows`.
fn in_memory<T, R>(header: &str, rows: &[T], record: impl Fn(&T) -> R) -> Vec<u8>
where
    R: IntoIterator,
    R::Item: AsRef<[u8]>,
{
    let mut csv =
        writer(Vec::with_capacity(40 * (rows.len() + 1)), header).expect("a Vec takes every write");
    for row in rows {
        csv.write_record(record(row))
            .expect("a Vec takes every write and every row has the header's width");
    }
    bytes(csv)
}

/// An optional number: empty when absent.
fn opt(n: Option<i64>) -> String {
    n.map_or(String::new(), |n| n.to_string())
}

/// The attachment's bytes.
pub fn render(rows: &[DiffRow]) -> Vec<u8> {
    in_memory(HEADER, rows, |row| {
        [
            guard(&row.pedido_id),
            opt(row.antes),
            row.depois.to_string(),
            row.diferenca().to_string(),
        ]
    })
}

/// The header of a rebuild's diff: both versions beside both values, and why the row differs.
pub const REBUILD_HEADER: &str =
    "pedido_id,antes,versao_antes,depois,versao_depois,diferenca,motivo";

/// A rebuild's diff (`replay-ledger rebuild --diff FILE.csv`, `/reconstrucao/diff.csv`): as
/// [`render`], with each side's `versao_evento` and the row's reason (a row that goes back to an
/// older version, or is deleted, says so even where its value does not change); an empty
/// `depois` means the swap deletes the row.
pub fn render_rebuild(rows: &[replay_ledger_core::services::rebuild::DiffRow]) -> Vec<u8> {
    in_memory(REBUILD_HEADER, rows, |row| {
        let diferenca = row.depois.unwrap_or(0) - row.antes.unwrap_or(0);
        [
            guard(&row.pedido_id),
            opt(row.antes),
            opt(row.versao_antes),
            opt(row.depois),
            opt(row.versao_depois),
            diferenca.to_string(),
            row.why().to_string(),
        ]
    })
}

/// Makes a text cell that a spreadsheet would evaluate as a formula inert.
pub fn guard(text: &str) -> String {
    if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{text}")
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, antes: Option<i64>, depois: i64) -> DiffRow {
        DiffRow {
            pedido_id: id.into(),
            antes,
            depois,
        }
    }

    #[test]
    fn the_csv_has_a_bom_a_header_and_one_crlf_row_per_order_in_cents() {
        let csv = String::from_utf8(render(&[
            row("ped-1", Some(50), 500),
            row("ped-2", None, 7),
        ]))
        .unwrap();
        assert_eq!(
            csv,
            "\u{feff}pedido_id,antes,depois,diferenca\r\nped-1,50,500,450\r\nped-2,,7,7\r\n"
        );
    }

    #[test]
    fn ids_a_spreadsheet_would_evaluate_are_prefixed_and_quoted_when_needed() {
        let csv = String::from_utf8(render(&[
            row("=HYPERLINK(\"http://x\",\"y\")", Some(1), 1),
            row("-2+3", Some(1), 0),
            row("@SUM(A1)", None, 1),
            row("a,b", None, 1),
            row("two\nlines", None, 1),
        ]))
        .unwrap();
        let lines: Vec<&str> = csv.split("\r\n").collect();
        assert_eq!(
            lines[1],
            "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\",1,1,0"
        );
        assert_eq!(lines[2], "'-2+3,1,0,-1");
        assert_eq!(lines[3], "'@SUM(A1),,1,1");
        assert_eq!(lines[4], "\"a,b\",,1,1");
        assert_eq!(lines[5], "\"two\nlines\",,1,1");
    }
}
