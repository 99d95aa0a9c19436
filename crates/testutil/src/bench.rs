//! The benchmark scaffold the comparison benches share (`compare` in
//! othello, `lpm` in lpm, `fib` in ndn): medians over rounds, ratios of
//! two runners from the same rounds, the machine a run was made on, and a
//! small JSON object writer for their reports.
//!
//! Times themselves come from [`crate::clock`] (thread CPU time) or the
//! wall clock, as each bench says.

use std::fmt::{Display, Write as _};

/// The median of `xs`: the middle value, or the mean of the two middle
/// values of an even count; NaN when `xs` is empty (a section that ran no
/// rounds), and NaNs in `xs` sort last.
pub fn median(xs: impl AsRef<[f64]>) -> f64 {
    let mut v = xs.as_ref().to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        l if l % 2 == 1 => v[l / 2],
        l => (v[l / 2 - 1] + v[l / 2]) / 2.0,
    }
}

/// The median over rounds of `num[r] / den[r]`, each pair measured in the
/// same round (adjacent in time, so that load that drifts between rounds
/// cancels). Rounds past the shorter slice are ignored.
pub fn ratio_median(num: &[f64], den: &[f64]) -> f64 {
    let r: Vec<f64> = num.iter().zip(den).map(|(a, b)| a / b).collect();
    median(&r)
}

/// The CPU model from `/proc/cpuinfo` (`"unknown"` where there is none).
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Logical CPUs this process may use (0 if unknown).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(0, |c| c.get())
}

/// The 1, 5 and 15 minute load averages, space-separated (empty where
/// `/proc/loadavg` is missing): benches print them, as machines are shared.
pub fn loadavg() -> String {
    let s = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

/// A JSON object written field by field, in order: numbers with four
/// decimals (non-finite ones as `null`), strings quoted and escaped, and
/// raw JSON values (nested objects, arrays) as given.
#[derive(Clone, Debug, Default)]
pub struct JsonObj(String);

impl JsonObj {
    /// An empty object.
    pub fn new() -> JsonObj {
        JsonObj::default()
    }

    /// Field `k` holding `raw` as written (a number, `true`, a nested
    /// object's [`JsonObj::done`], an array).
    pub fn field(mut self, k: &str, raw: impl Display) -> JsonObj {
        let sep = if self.0.is_empty() { "" } else { "," };
        let _ = write!(self.0, "{sep}{}:{raw}", quote(k));
        self
    }

    /// Field `k` holding the number `x` to four decimals, `null` if not
    /// finite.
    pub fn num(self, k: &str, x: f64) -> JsonObj {
        if x.is_finite() {
            self.field(k, format!("{x:.4}"))
        } else {
            self.field(k, "null")
        }
    }

    /// Field `k` holding the string `s`.
    pub fn str(self, k: &str, s: &str) -> JsonObj {
        let q = quote(s);
        self.field(k, q)
    }

    /// The object's text.
    pub fn done(self) -> String {
        format!("{{{}}}", self.0)
    }
}

/// `s` as a JSON string literal.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Profile only a bench's timed region: with `PERF_CTL_FIFO` set to the
/// control FIFO of `perf record --delay=-1 --control=fifo:PATH`, write
/// `cmd` (`"enable"` / `"disable"`) to it; without it, nothing.
pub fn perf_ctl(cmd: &str) {
    if let Ok(p) = std::env::var("PERF_CTL_FIFO") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(p) {
            let _ = writeln!(f, "{cmd}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty_counts() {
        assert_eq!(median([3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(Vec::<f64>::new()).is_nan());
        assert_eq!(median([7.5]), 7.5);
        // NaN sorts last instead of panicking.
        assert_eq!(median([f64::NAN, 1.0, 2.0]), 2.0);
    }

    #[test]
    fn ratio_median_pairs_rounds_before_taking_the_median() {
        // Per-round ratios 2, 4, 1: median 2. The ratio of the medians
        // (2 / 1 = 2 here by chance) is not what is computed: see the
        // second case.
        assert_eq!(ratio_median(&[2.0, 8.0, 3.0], &[1.0, 2.0, 3.0]), 2.0);
        // Ratios 10, 1, 1 -> 1, while median(num) / median(den) = 10 / 10.
        assert_eq!(ratio_median(&[100.0, 10.0, 1.0], &[10.0, 10.0, 1.0]), 1.0);
        assert_eq!(ratio_median(&[6.0, 9.0], &[3.0]), 2.0);
    }

    #[test]
    fn json_object_round_trips_through_a_json_parser() {
        let inner = JsonObj::new().num("x", 1.0 / 3.0).done();
        let doc = JsonObj::new()
            .str("cpu", "Intel \"Xeon\"\t\\ 2.1GHz")
            .field("cores", 2)
            .field("smoke", true)
            .num("nan", f64::NAN)
            .field("runs", format!("[{inner}]"))
            .done();
        let v: serde_json::Value = serde_json::from_str(&doc).expect("valid JSON");
        assert_eq!(v["cpu"], "Intel \"Xeon\"\t\\ 2.1GHz");
        assert_eq!(v["cores"], 2);
        assert_eq!(v["smoke"], true);
        assert!(v["nan"].is_null());
        assert_eq!(v["runs"][0]["x"], 0.3333);
        assert_eq!(doc, format!("{{\"cpu\":\"Intel \\\"Xeon\\\"\\t\\\\ 2.1GHz\",\"cores\":2,\"smoke\":true,\"nan\":null,\"runs\":[{{\"x\":0.3333}}]}}"));
    }

    #[test]
    fn load_averages_are_three_numbers_where_proc_has_them() {
        let l = loadavg();
        if std::path::Path::new("/proc/loadavg").exists() {
            assert_eq!(l.split_whitespace().count(), 3, "{l}");
            assert!(
                l.split_whitespace().all(|x| x.parse::<f64>().is_ok()),
                "{l}"
            );
        } else {
            assert_eq!(l, "");
        }
        assert!(!cpu_model().is_empty());
    }
}
