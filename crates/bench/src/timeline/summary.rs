//! A trace's figures without a picture: what `zns trace summary` prints.
//! The commands' latencies by kind (from submission to completion, in the
//! trace's time, which for an emulator is the drive's), the dies' work by
//! operation, the write buffer's waits and fullest moment, and the
//! slowest commands. It answers the question a tail in an application's
//! figures raises first: did the drive take that long, or did something
//! above it?
//!
//! Tracks are told apart by their process names, as the trace writer of
//! `emu:...,trace=FILE` gives them: `queue N` (commands), `dies` (flash
//! operations), `write buffer` (waits for room, and the `used` counter).
//!
//! Thread safety: plain data and functions.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Timeline;

/// Latencies of one kind of command, µs.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandStats {
    /// The kind, as the trace names it (`read`, `write`, `flush`, ...).
    pub kind: String,
    /// Commands of the kind that completed in the trace.
    pub count: u64,
    /// Mean latency.
    pub mean_us: f64,
    /// Median (nearest rank).
    pub p50_us: f64,
    /// 99th percentile (nearest rank).
    pub p99_us: f64,
    /// 99.9th percentile (nearest rank).
    pub p999_us: f64,
    /// The longest.
    pub max_us: f64,
}

/// The dies' work of one flash operation.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlashStats {
    /// The operation (`read`, `program`, `erase`, ...).
    pub op: String,
    /// Operations in the trace, on all dies.
    pub count: u64,
    /// Their time summed over the dies, µs.
    pub busy_us: f64,
    /// The longest, µs.
    pub max_us: f64,
}

/// One of the slowest commands.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlowCommand {
    /// Its kind.
    pub kind: String,
    /// The queue it came on (the process's name: `queue N`).
    pub queue: String,
    /// Submission, µs of the trace's time.
    pub start_us: f64,
    /// Latency, µs.
    pub latency_us: f64,
}

/// What a trace holds, summed up.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceSummary {
    /// First and last event, µs (`None`: no timed event).
    pub span_us: Option<(f64, f64)>,
    /// Commands by kind, by name.
    pub commands: Vec<CommandStats>,
    /// Flash operations by kind, by name.
    pub flash: Vec<FlashStats>,
    /// Times a command waited for room in the write buffer.
    pub buffer_waits: u64,
    /// The most of the write buffer in use at once, KiB (`None`: the
    /// trace has no buffer counter).
    pub buffer_max_used_kib: Option<f64>,
    /// The slowest commands, slowest first.
    pub slowest: Vec<SlowCommand>,
}

impl TraceSummary {
    /// The summary of `t`, with its `slowest` slowest commands.
    pub fn of(t: &Timeline, slowest: usize) -> TraceSummary {
        let mut latencies: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        // Borrowed until the slowest are picked: only those are copied.
        let mut all: Vec<(&str, &super::Slice)> = Vec::new();
        let mut flash: BTreeMap<&str, FlashStats> = BTreeMap::new();
        let mut buffer_waits = 0;
        let mut buffer_max_used_kib: Option<f64> = None;
        for track in &t.tracks {
            if track.process.starts_with("queue ") {
                for s in &track.slices {
                    latencies.entry(&s.name).or_default().push(s.dur);
                    all.push((&track.process, s));
                }
            } else if track.process == "dies" {
                for s in &track.slices {
                    let f = flash.entry(&s.name).or_insert_with(|| FlashStats {
                        op: s.name.clone(),
                        count: 0,
                        busy_us: 0.0,
                        max_us: 0.0,
                    });
                    f.count += 1;
                    f.busy_us += s.dur;
                    f.max_us = f.max_us.max(s.dur);
                }
            } else if track.process == "write buffer" {
                buffer_waits += track.marks.len() as u64;
                if track.name.ends_with(" used") {
                    for &(_, v) in &track.counter {
                        buffer_max_used_kib = Some(buffer_max_used_kib.map_or(v, |m| m.max(v)));
                    }
                }
            }
        }
        let commands = latencies.into_iter().map(|(kind, d)| command_stats(kind, d)).collect();
        all.sort_by(|a, b| b.1.dur.total_cmp(&a.1.dur));
        let slowest = all
            .into_iter()
            .take(slowest)
            .map(|(queue, s)| SlowCommand {
                kind: s.name.clone(),
                queue: queue.to_string(),
                start_us: s.start,
                latency_us: s.dur,
            })
            .collect();
        TraceSummary {
            span_us: t.span(),
            commands,
            flash: flash.into_values().collect(),
            buffer_waits,
            buffer_max_used_kib,
            slowest,
        }
    }

    /// The summary as text: a table of commands, one of flash operations,
    /// the buffer's line and the slowest commands.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        if let Some((a, b)) = self.span_us {
            let _ = writeln!(s, "trace: {:.3} ms ({a:.1} to {b:.1} µs)", (b - a) / 1000.0);
        }
        let _ = writeln!(
            s,
            "{:<14} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "command", "count", "mean µs", "p50", "p99", "p99.9", "max"
        );
        for c in &self.commands {
            let _ = writeln!(
                s,
                "{:<14} {:>9} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                c.kind, c.count, c.mean_us, c.p50_us, c.p99_us, c.p999_us, c.max_us
            );
        }
        if !self.flash.is_empty() {
            let _ =
                writeln!(s, "{:<14} {:>9} {:>14} {:>10}", "flash", "count", "busy ms", "max µs");
            for f in &self.flash {
                let _ = writeln!(
                    s,
                    "{:<14} {:>9} {:>14.3} {:>10.1}",
                    f.op,
                    f.count,
                    f.busy_us / 1000.0,
                    f.max_us
                );
            }
        }
        let fullest = match self.buffer_max_used_kib {
            Some(k) => format!("at most {k} KiB in use"),
            None => "no buffer counter".into(),
        };
        let _ = writeln!(s, "write buffer: {} waits for room; {fullest}", self.buffer_waits);
        if !self.slowest.is_empty() {
            let _ = writeln!(s, "slowest commands:");
            for c in &self.slowest {
                let _ = writeln!(
                    s,
                    "  {:<12} {:>10.1} µs at {:.1} µs ({})",
                    c.kind, c.latency_us, c.start_us, c.queue
                );
            }
        }
        s
    }
}

/// Statistics of `durations` (µs) of commands of `kind`.
fn command_stats(kind: &str, mut d: Vec<f64>) -> CommandStats {
    d.sort_by(f64::total_cmp);
    let n = d.len();
    // Nearest rank: the smallest value at least `p` of the samples are
    // not above.
    let rank = |p: f64| d[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
    CommandStats {
        kind: kind.to_string(),
        count: n as u64,
        mean_us: d.iter().sum::<f64>() / n as f64,
        p50_us: rank(0.50),
        p99_us: rank(0.99),
        p999_us: rank(0.999),
        max_us: d[n - 1],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trace as the emulator's writer makes one: two queues' commands,
    /// a die's operations, the buffer's counter and a wait.
    fn trace() -> Timeline {
        let mut events = vec![
            r#"{"ph":"M","pid":1,"name":"process_name","args":{"name":"dies"}}"#.to_string(),
            r#"{"ph":"M","pid":3,"name":"process_name","args":{"name":"write buffer"}}"#.into(),
            r#"{"ph":"M","pid":101,"name":"process_name","args":{"name":"queue 1"}}"#.into(),
            r#"{"ph":"M","pid":102,"name":"process_name","args":{"name":"queue 2"}}"#.into(),
            r#"{"ph":"X","pid":1,"tid":0,"name":"program","ts":10,"dur":2400,"args":{}}"#.into(),
            r#"{"ph":"X","pid":1,"tid":1,"name":"program","ts":20,"dur":2500,"args":{}}"#.into(),
            r#"{"ph":"X","pid":1,"tid":0,"name":"read","ts":3000,"dur":50,"args":{}}"#.into(),
            r#"{"ph":"C","pid":3,"tid":0,"name":"write buffer KiB","ts":5,"args":{"used":96,"free":8096}}"#.into(),
            r#"{"ph":"C","pid":3,"tid":0,"name":"write buffer KiB","ts":9,"args":{"used":8192,"free":0}}"#.into(),
            r#"{"ph":"i","s":"t","pid":3,"tid":0,"name":"waits for buffer room","ts":9,"args":{}}"#.into(),
        ];
        // 1,000 writes on queue 1 of 1..=1000 µs; one read on queue 2.
        for i in 1..=1000u32 {
            let (b, e) = (i * 2000, i * 2000 + i);
            events.push(format!(
                r#"{{"ph":"b","cat":"command","id":{i},"pid":101,"tid":1,"name":"write","ts":{b}}}"#
            ));
            events.push(format!(
                r#"{{"ph":"e","cat":"command","id":{i},"pid":101,"tid":1,"name":"write","ts":{e}}}"#
            ));
        }
        events.push(
            r#"{"ph":"b","cat":"command","id":1,"pid":102,"tid":2,"name":"read","ts":7}"#.into(),
        );
        events.push(
            r#"{"ph":"e","cat":"command","id":1,"pid":102,"tid":2,"name":"read","ts":80}"#.into(),
        );
        Timeline::parse(&format!("[{}]", events.join(","))).unwrap()
    }

    #[test]
    fn commands_by_kind_flash_by_operation_and_the_buffer() {
        let s = TraceSummary::of(&trace(), 3);
        let kinds: Vec<&str> = s.commands.iter().map(|c| c.kind.as_str()).collect();
        assert_eq!(kinds, ["read", "write"]);
        let w = &s.commands[1];
        assert_eq!(
            (w.count, w.p50_us, w.p99_us, w.p999_us, w.max_us),
            (1000, 500.0, 990.0, 999.0, 1000.0)
        );
        assert!((w.mean_us - 500.5).abs() < 1e-9, "{}", w.mean_us);
        let r = &s.commands[0];
        assert_eq!((r.count, r.p50_us, r.max_us), (1, 73.0, 73.0));
        assert_eq!(s.flash.len(), 2);
        assert_eq!((s.flash[0].op.as_str(), s.flash[0].count), ("program", 2));
        assert_eq!((s.flash[0].busy_us, s.flash[0].max_us), (4900.0, 2500.0));
        assert_eq!((s.buffer_waits, s.buffer_max_used_kib), (1, Some(8192.0)));
        let slow: Vec<f64> = s.slowest.iter().map(|c| c.latency_us).collect();
        assert_eq!(slow, [1000.0, 999.0, 998.0]);
        assert_eq!(s.slowest[0].queue, "queue 1");
        let text = s.to_text();
        assert!(text.contains("write buffer: 1 waits for room; at most 8192 KiB in use"), "{text}");
        assert!(text.lines().any(|l| l.starts_with("write") && l.contains("990.0")), "{text}");
    }

    #[test]
    fn a_trace_without_commands_or_a_buffer_says_so() {
        let t = Timeline::parse("[]").unwrap();
        let s = TraceSummary::of(&t, 5);
        assert!(s.commands.is_empty() && s.flash.is_empty() && s.slowest.is_empty());
        assert_eq!((s.span_us, s.buffer_waits, s.buffer_max_used_kib), (None, 0, None));
        assert!(s.to_text().contains("0 waits for room; no buffer counter"));
    }
}
