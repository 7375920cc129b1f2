//! The scaffolding of the HTML pages: the report of a run
//! ([`super::report`]), the comparison of two runs ([`super::compare`])
//! and the comparison of a ZNS device with a conventional one
//! ([`super::versus`]) are each one self-contained page, written with
//! the same document head and style, sections of charts, notes and
//! tables.

use std::fmt::Write as _;

/// The style of every page.
const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1400px}\
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;font-size:13px;margin:8px 0}\
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}\
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}\
.charts{display:flex;flex-wrap:wrap;gap:12px}.charts svg{border:1px solid #eee}\
.bad{background:#fde2e2}.good{background:#e2f5e2}.note{color:#666;font-size:13px}\
code{background:#f4f4f4;padding:0 3px}.ref td:nth-child(2){text-align:left}";

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// One part of the page: a heading, a sentence and charts.
#[derive(Debug, Clone)]
pub struct Section {
    /// Heading.
    pub title: String,
    /// What the charts show.
    pub text: String,
    /// SVG charts.
    pub charts: Vec<String>,
}

/// The class of a table cell holding the ratio `q` of two figures: `bad`
/// more than 25% away from 1, else `good`.
pub(crate) fn ratio_class(q: f64) -> &'static str {
    if !(0.75..=1.0 / 0.75).contains(&q) {
        "bad"
    } else {
        "good"
    }
}

/// A page being written: the document head and the page's heading, then
/// its parts in order.
///
/// Thread safety: plain data.
#[derive(Debug)]
pub(crate) struct Page {
    h: String,
}

impl Page {
    /// A page titled `title` (text) under the heading `heading` (HTML).
    pub fn new(title: &str, heading: &str) -> Page {
        let mut h = String::new();
        let _ = write!(
            h,
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{}</title>\
             <style>{STYLE}</style></head><body>\n<h1>{heading}</h1>\n",
            esc(title)
        );
        Page { h }
    }

    /// HTML as it is.
    pub fn push(&mut self, html: &str) {
        self.h.push_str(html);
    }

    /// The heading (text) of a part of the page.
    pub fn heading(&mut self, title: &str) {
        let _ = writeln!(self.h, "<h2>{}</h2>", esc(title));
    }

    /// [`Page::heading`] with an anchor `id` to link to.
    pub fn heading_id(&mut self, id: &str, title: &str) {
        let _ = writeln!(self.h, "<h2 id=\"{}\">{}</h2>", esc(id), esc(title));
    }

    /// A note (HTML): a paragraph in small grey type.
    pub fn note(&mut self, html: &str) {
        let _ = writeln!(self.h, "<p class=\"note\">{html}</p>");
    }

    /// A section: its heading, its sentence and its charts side by side.
    pub fn section(&mut self, s: &Section) {
        self.heading(&s.title);
        self.note(&esc(&s.text));
        self.h.push_str("<div class=\"charts\">\n");
        for c in &s.charts {
            self.h.push_str(c);
            self.h.push('\n');
        }
        self.h.push_str("</div>\n");
    }

    /// The finished page.
    pub fn finish(mut self) -> String {
        self.h.push_str("</body></html>\n");
        self.h
    }
}

/// A table being written: its header row, then a row per line.
///
/// Thread safety: plain data.
#[derive(Debug)]
pub(crate) struct Table {
    h: String,
}

impl Table {
    /// A table with the header cells `headers` (text; an empty one for a
    /// corner cell) and the class `class`, if not empty.
    pub fn new(class: &str, headers: &[&str]) -> Table {
        let mut t = Table::plain(class);
        t.h.push_str("<tr>");
        for h in headers {
            let _ = write!(t.h, "<th>{}</th>", esc(h));
        }
        t.h.push_str("</tr>\n");
        t
    }

    /// A table without a header row (a row of its own heads each line),
    /// with the class `class`, if not empty.
    pub fn plain(class: &str) -> Table {
        let h = match class {
            "" => "<table>".to_string(),
            c => format!("<table class=\"{}\">", esc(c)),
        };
        Table { h }
    }

    /// A row of `cells` (HTML: `<td>` and `<th>` elements).
    pub fn row(&mut self, cells: &str) {
        let _ = writeln!(self.h, "<tr>{cells}</tr>");
    }

    /// The finished table.
    pub fn finish(mut self) -> String {
        self.h.push_str("</table>\n");
        self.h
    }
}
