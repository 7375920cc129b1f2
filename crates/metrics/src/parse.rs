//! Reading the text exposition format back: samples with their labels
//! and values, for `zns top --metrics` and tests. Comments (`# HELP`,
//! `# TYPE`, `# EOF`) are skipped.

use crate::error::MetricsError;

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Metric name, suffix included (`zns_commands_total`).
    pub name: String,
    /// Label pairs in their order.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: f64,
}

impl Sample {
    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// Every sample of `text`.
pub fn parse(text: &str) -> Result<Vec<Sample>, MetricsError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| MetricsError::Malformed(format!("line {}", n + 1), why.to_string());
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) => line.split_at(i),
            None => return Err(bad("no value")),
        };
        let (labels, rest) = if let Some(r) = rest.strip_prefix('{') {
            labels(r).ok_or_else(|| bad("labels are not closed"))?
        } else {
            (Vec::new(), rest)
        };
        let v = rest.split_whitespace().next().ok_or_else(|| bad("no value"))?;
        let value = match v {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().map_err(|_| bad("the value is not a number"))?,
        };
        out.push(Sample { name: name.to_string(), labels, value });
    }
    Ok(out)
}

/// Label pairs up to the closing brace, and what follows it.
fn labels(s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut out = Vec::new();
    let mut rest = s.trim_start();
    loop {
        rest = rest.trim_start_matches([',', ' ']);
        if let Some(r) = rest.strip_prefix('}') {
            return Some((out, r));
        }
        let eq = rest.find('=')?;
        let key = rest[..eq].trim().to_string();
        let mut chars = rest[eq + 1..].strip_prefix('"')?.char_indices();
        let mut value = String::new();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '"' => break i,
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                c => value.push(c),
            }
        };
        out.push((key, value));
        rest = &rest[eq + 1 + 1 + end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_with_escaped_labels_and_infinities() {
        let text = "# HELP x y\n# TYPE a counter\na_total{q=\"0\",s=\"Zone \\\"Is\\\" Full\"} 3\n\
                    b 2.5\nh_bucket{le=\"+Inf\"} 7\nc{} +Inf\n# EOF\n";
        let s = parse(text).unwrap();
        assert_eq!(s.len(), 4);
        assert_eq!(s[0].name, "a_total");
        assert_eq!(s[0].label("s"), Some("Zone \"Is\" Full"));
        assert_eq!(s[0].value, 3.0);
        assert_eq!((s[1].name.as_str(), s[1].value), ("b", 2.5));
        assert_eq!(s[2].label("le"), Some("+Inf"));
        assert!(s[3].value.is_infinite());
        assert!(parse("a{q=\"0\" 1").is_err());
        assert!(parse("a x").is_err());
    }
}
