//! A request's head (request line and header fields), read as its bytes
//! come: every byte is checked once, when it arrives, so a peer that sends
//! garbage is refused at its first byte that cannot be in a head, a bad
//! request line as soon as its line ends, and a head longer than the limit
//! when the limit is reached, never buffered past it.

/// How far a head has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Progress {
    /// More bytes are needed.
    More,
    /// The head is whole: its first `len` bytes, the empty line included.
    Whole(usize),
    /// The request is refused with this HTTP status.
    Refused(u16),
}

/// What a whole head asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Request<'a> {
    /// The method, as sent (methods are case-sensitive).
    pub method: &'a str,
    /// The request target up to its query.
    pub path: &'a str,
    /// The request announces a body (a nonzero Content-Length, or a
    /// Transfer-Encoding).
    pub body: bool,
}

/// The bytes of a head so far, at most `max` of them.
#[derive(Debug)]
pub(super) struct HeadReader {
    buf: Vec<u8>,
    max: usize,
    /// Bytes already checked.
    checked: usize,
    /// The request line has ended and was checked.
    line_checked: bool,
}

impl HeadReader {
    /// An empty head of at most `max` bytes.
    pub fn new(max: usize) -> Self {
        HeadReader { buf: Vec::new(), max, checked: 0, line_checked: false }
    }

    /// How many more bytes the head may take.
    pub fn room(&self) -> usize {
        self.max - self.buf.len()
    }

    /// The bytes so far.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Takes `bytes` (at most [`HeadReader::room`] of them) and says how
    /// far the head has come. Only the new bytes are looked at.
    pub fn feed(&mut self, bytes: &[u8]) -> Progress {
        let bytes = &bytes[..bytes.len().min(self.room())];
        self.buf.extend_from_slice(bytes);
        while self.checked < self.buf.len() {
            let i = self.checked;
            let b = self.buf[i];
            // Visible ASCII, space, tab, CR and LF: nothing else is in a
            // head this endpoint answers.
            if !(b == b'\t' || b == b'\r' || b == b'\n' || (0x20..0x7f).contains(&b)) {
                return Progress::Refused(400);
            }
            self.checked += 1;
            if b != b'\n' {
                continue;
            }
            if !self.line_checked {
                self.line_checked = true;
                if let Err(status) = request_line(&self.buf[..i]) {
                    return Progress::Refused(status);
                }
                continue;
            }
            // An empty line (LF, or CR LF, after the previous LF) ends it.
            let before = &self.buf[..i];
            if before.ends_with(b"\n") || before.ends_with(b"\n\r") {
                return Progress::Whole(i + 1);
            }
        }
        if self.buf.len() >= self.max {
            return Progress::Refused(431);
        }
        Progress::More
    }
}

/// A byte of a token (a method, a field name).
fn tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The method, target and version of a request line (its CR, if any,
/// still on), or the status refusing it: 505 for an HTTP version other
/// than 1.0 and 1.1, 400 for anything else wrong.
fn request_line(line: &[u8]) -> Result<(&str, &str), u16> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // Checked byte by byte already: ASCII.
    let line = std::str::from_utf8(line).map_err(|_| 400u16)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(400);
    };
    if method.is_empty() || !method.bytes().all(tchar) || target.is_empty() || target.contains('\t')
    {
        return Err(400);
    }
    match version.as_bytes() {
        b"HTTP/1.1" | b"HTTP/1.0" => Ok((method, target)),
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            Err(505)
        }
        _ => Err(400),
    }
}

/// The request a whole head (as [`Progress::Whole`] delimited it) asks
/// for, or 400 for a malformed header field or Content-Length.
pub(super) fn parse(head: &[u8]) -> Result<Request<'_>, u16> {
    let text = std::str::from_utf8(head).map_err(|_| 400u16)?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let (method, target) = request_line(lines.next().unwrap_or("").as_bytes())?;
    let mut body = false;
    for line in lines.take_while(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else { return Err(400) };
        // No space before the colon, no folded (continued) lines.
        if name.is_empty() || !name.bytes().all(tchar) {
            return Err(400);
        }
        let value = value.trim_matches([' ', '\t']);
        if name.eq_ignore_ascii_case("content-length") {
            let n: u64 = value.parse().map_err(|_| 400u16)?;
            body |= n > 0;
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            body = true;
        }
    }
    let path = target.split('?').next().unwrap_or(target);
    Ok(Request { method, path, body })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `text` in pieces of `step` bytes; the last progress.
    fn feed(text: &[u8], step: usize, max: usize) -> Progress {
        let mut h = HeadReader::new(max);
        let mut p = Progress::More;
        for piece in text.chunks(step) {
            p = h.feed(piece);
            if p != Progress::More {
                break;
            }
        }
        p
    }

    #[test]
    fn a_head_is_whole_at_its_empty_line_however_it_comes() {
        let head = b"GET /metrics HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n";
        for step in [1, 2, 3, 7, head.len()] {
            assert_eq!(feed(head, step, 8192), Progress::Whole(head.len()), "step {step}");
        }
        assert_eq!(feed(b"GET / HTTP/1.0\n\n", 1, 8192), Progress::Whole(16));
        assert_eq!(feed(b"GET /metrics HTTP/1.1\r\nHost: a\r\n", 5, 8192), Progress::More);
        let r = parse(head).unwrap();
        assert_eq!(r, Request { method: "GET", path: "/metrics", body: false });
        let r = parse(b"HEAD /zones?x=1 HTTP/1.0\r\nContent-Length: 0\r\n\r\n").unwrap();
        assert_eq!(r, Request { method: "HEAD", path: "/zones", body: false });
    }

    #[test]
    fn garbage_is_refused_at_its_first_bad_byte_or_line() {
        assert_eq!(feed(b"\x16\x03\x01\x02\x00", 1, 8192), Progress::Refused(400));
        assert_eq!(feed(b"GET /\x00", 1, 8192), Progress::Refused(400));
        assert_eq!(feed(b"hello there\r\n", 4, 8192), Progress::Refused(400));
        assert_eq!(feed(b"GET  /metrics HTTP/1.1\r\n", 4, 8192), Progress::Refused(400));
        assert_eq!(feed(b"\r\n\r\n", 1, 8192), Progress::Refused(400));
        assert_eq!(feed(b"G(T / HTTP/1.1\r\n", 4, 8192), Progress::Refused(400));
        assert_eq!(feed(b"GET / HTTP/2.0\r\n", 4, 8192), Progress::Refused(505));
        assert_eq!(feed(b"GET / FTP/1.0\r\n", 4, 8192), Progress::Refused(400));
        assert_eq!(parse(b"GET / HTTP/1.1\r\nHost : a\r\n\r\n"), Err(400));
        assert_eq!(parse(b"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n"), Err(400));
        assert_eq!(parse(b"GET / HTTP/1.1\r\nno colon\r\n\r\n"), Err(400));
        assert_eq!(parse(b"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), Err(400));
    }

    #[test]
    fn a_head_is_refused_at_its_limit_and_never_holds_more() {
        let mut line = b"GET /".to_vec();
        line.resize(100_000, b'a');
        assert_eq!(feed(&line, 4096, 8192), Progress::Refused(431));
        let mut h = HeadReader::new(64);
        assert_eq!(h.feed(b"GET / HTTP/1.1\r\n"), Progress::More);
        assert_eq!(h.feed(&[b'x'; 1000]), Progress::Refused(431));
        assert_eq!(h.bytes().len(), 64);
        assert_eq!(h.room(), 0);
    }

    #[test]
    fn a_body_is_seen_from_content_length_or_transfer_encoding() {
        let r = parse(b"POST /metrics HTTP/1.1\r\ncontent-length: 5\r\n\r\n").unwrap();
        assert_eq!((r.method, r.body), ("POST", true));
        let r = parse(b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap();
        assert!(r.body);
    }
}
