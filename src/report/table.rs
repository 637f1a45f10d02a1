//! A table of a report, rendered both as aligned plain text and as an HTML table with inline
//! styles (what common mail clients render).

use super::escape::esc;

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

    /// The table as aligned plain text, every cell made inert ([`crate::text::inert`]): a cell
    /// from the archive cannot end its line or forge another in a mail's text part.
    pub fn text(&self) -> String {
        let columns = self.right.len();
        let mut widths = vec![0; columns];
        let header: Vec<String> = self.headers.iter().map(|h| h.to_string()).collect();
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|row| row.iter().map(|c| crate::text::inert(c)).collect())
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

    pub fn html(&self) -> String {
        let cell = "padding: 3px 10px; border-bottom: 1px solid #dddddd;";
        let mut out = String::from(
            "<table cellpadding=\"0\" cellspacing=\"0\" style=\"border-collapse: collapse; margin: 4px 0;\">\n",
        );
        if !self.headers.is_empty() {
            out.push_str("<tr>");
            for (i, h) in self.headers.iter().enumerate() {
                out.push_str(&format!(
                    "<th style=\"{cell} text-align: {}; background: #f2f2f2;\">{}</th>",
                    align(self.right[i]),
                    esc(h)
                ));
            }
            out.push_str("</tr>\n");
        }
        for row in &self.rows {
            out.push_str("<tr>");
            for (i, value) in row.iter().enumerate() {
                let label = self.headers.is_empty() && i == 0;
                let tag = if label { "th" } else { "td" };
                out.push_str(&format!(
                    "<{tag} style=\"{cell} text-align: {};{}\">{}</{tag}>",
                    align(self.right[i]),
                    if label {
                        " font-weight: normal; color: #555555;"
                    } else {
                        ""
                    },
                    esc(value)
                ));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n");
        out
    }
}

fn align(right: bool) -> &'static str {
    if right {
        "right"
    } else {
        "left"
    }
}
