//! A table of a report, rendered both as aligned plain text and as an HTML table with inline
//! styles (what common mail clients render), through maud, which escapes every cell.

use maud::{html, Markup};

/// A table rendered both as aligned text and as HTML.
pub(super) struct Table {
    pub headers: Vec<&'static str>,
    /// Per column: right-aligned (numbers, money).
    pub right: Vec<bool>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// Label/value rows without a header; values right-aligned (amounts) or not.
    pub fn key_value(rows: Vec<Vec<String>>, right: bool) -> Table {
        Table {
            headers: Vec::new(),
            right: vec![false, right],
            rows,
        }
    }

    /// The table as aligned plain text, every cell made inert ([`replay_ledger_core::shared::text::inert`]): a cell
    /// from the archive cannot end its line or forge another in a mail's text part.
    pub fn text(&self) -> String {
        let columns = self.right.len();
        let mut widths = vec![0; columns];
        let header: Vec<String> = self.headers.iter().map(|h| h.to_string()).collect();
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|row| {
                row.iter()
                    .map(|c| replay_ledger_core::shared::text::inert(c))
                    .collect()
            })
            .collect();
        for row in std::iter::once(&header).chain(&rows) {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let line = |row: &[String]| {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(i, cell)| {
                    let pad = " ".repeat(widths[i].saturating_sub(cell.chars().count()));
                    if self.right[i] {
                        format!("{pad}{cell}")
                    } else if i + 1 == row.len() {
                        cell.clone()
                    } else {
                        format!("{cell}{pad}")
                    }
                })
                .collect();
            format!("  {}\n", cells.join("   ").trim_end())
        };
        let mut out = String::new();
        if !header.is_empty() {
            out.push_str(&line(&header));
        }
        for row in &rows {
            out.push_str(&line(row));
        }
        out
    }

    /// The table as HTML (maud escapes every header and cell). A table without headers is
    /// label/value rows: the label is a row header, in a softer colour. Each row ends its line of
    /// the message's source (the `"\n"`s), so the source reads row by row.
    pub fn html(&self) -> Markup {
        html! {
            table cellpadding="0" cellspacing="0" style="border-collapse: collapse; margin: 4px 0;" {
                "\n"
                @if !self.headers.is_empty() {
                    tr {
                        @for (header, right) in self.headers.iter().zip(&self.right) {
                            th style={ (CELL) " text-align: " (align(*right)) "; background: #f2f2f2;" } { (header) }
                        }
                    }
                    "\n"
                }
                @for row in &self.rows {
                    tr {
                        @for (i, value) in row.iter().enumerate() {
                            @if self.headers.is_empty() && i == 0 {
                                th style={ (CELL) " text-align: " (align(self.right[i])) "; font-weight: normal; color: #555555;" } { (value) }
                            } @else {
                                td style={ (CELL) " text-align: " (align(self.right[i])) ";" } { (value) }
                            }
                        }
                    }
                    "\n"
                }
            }
            "\n"
        }
    }
}

/// The style every cell shares.
const CELL: &str = "padding: 3px 10px; border-bottom: 1px solid #dddddd;";

fn align(right: bool) -> &'static str {
    if right {
        "right"
    } else {
        "left"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_and_cells_from_data_are_escaped() {
        let table = Table {
            headers: vec!["<pedido>"],
            right: vec![false],
            rows: vec![vec!["<b>\"x\" & 'y'</b>".into()]],
        };
        let html = table.html().into_string();
        assert!(html.contains(">&lt;pedido&gt;</th>"), "{html}");
        assert!(
            html.contains(">&lt;b&gt;&quot;x&quot; &amp; 'y'&lt;/b&gt;</td>"),
            "{html}"
        );
    }
}
