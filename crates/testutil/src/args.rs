//! Positional arguments of the probe examples (`build_probe N [pow2|tight]
//! REPS`, ...): counts written `10000000` or `1e7`, and words from a fixed
//! list. Bad input stops the probe with a message naming the argument,
//! instead of falling back to a default the user did not ask for.

/// A count written as an integer or as a float of at least 1 (`1e7`,
/// `2.5e6`); `None` for anything else.
pub fn parse_count(s: &str) -> Option<usize> {
    s.parse::<usize>().ok().or_else(|| {
        s.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 1.0 && *x <= usize::MAX as f64)
            .map(|x| x as usize)
    })
}

/// A benchmark flag's count ([`parse_count`]), or exit 2 with a message
/// naming the value: a bench never runs on a number it did not understand.
pub fn count_or_exit(s: &str) -> usize {
    parse_count(s).unwrap_or_else(|| {
        eprintln!("not a count: {s:?} (write it as 1000000 or 1e6)");
        std::process::exit(2)
    })
}

/// The process's positional arguments with the probe's usage line.
#[derive(Debug)]
pub struct Positional {
    args: Vec<String>,
    usage: &'static str,
}

impl Positional {
    /// The arguments of this process (after the program name).
    pub fn from_env(usage: &'static str) -> Self {
        Self::new(std::env::args().skip(1).collect(), usage)
    }

    /// Given arguments (for tests).
    pub fn new(args: Vec<String>, usage: &'static str) -> Self {
        Positional { args, usage }
    }

    fn fail(&self, msg: String) -> ! {
        eprintln!("{msg}\nusage: {}", self.usage);
        std::process::exit(2)
    }

    /// Argument `i` (from 0) as a count, `default` when absent.
    pub fn count(&self, i: usize, default: usize) -> usize {
        match self.args.get(i) {
            None => default,
            Some(s) => parse_count(s)
                .unwrap_or_else(|| self.fail(format!("argument {}: {s:?} is not a count", i + 1))),
        }
    }

    /// Argument `i` as a number (`None` when absent).
    pub fn number(&self, i: usize) -> Option<f64> {
        let s = self.args.get(i)?;
        match s.parse::<f64>() {
            Ok(x) if x.is_finite() => Some(x),
            _ => self.fail(format!("argument {}: {s:?} is not a number", i + 1)),
        }
    }

    /// Argument `i` as one of `choices`, the first when absent.
    pub fn word(&self, i: usize, choices: &[&'static str]) -> &'static str {
        match self.args.get(i) {
            None => choices[0],
            Some(s) => choices.iter().copied().find(|c| c == s).unwrap_or_else(|| {
                self.fail(format!(
                    "argument {}: {s:?} is not one of {}",
                    i + 1,
                    choices.join(", ")
                ))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_take_integers_and_exponents() {
        assert_eq!(parse_count("10000000"), Some(10_000_000));
        assert_eq!(parse_count("1e7"), Some(10_000_000));
        assert_eq!(parse_count("2.5e6"), Some(2_500_000));
        for bad in ["", "x", "0.5", "-3", "nan", "inf", "1e400"] {
            assert_eq!(parse_count(bad), None, "{bad}");
        }
    }

    #[test]
    fn absent_arguments_take_their_defaults() {
        let p = Positional::new(vec!["1e6".into(), "tight".into()], "probe N [pow2|tight] R");
        assert_eq!(p.count(0, 7), 1_000_000);
        assert_eq!(p.word(1, &["pow2", "tight"]), "tight");
        assert_eq!(p.count(2, 5), 5);
        assert_eq!(p.word(3, &["pow2", "tight"]), "pow2");
        assert_eq!(p.number(4), None);
        let q = Positional::new(vec!["0.3".into()], "probe F");
        assert_eq!(q.number(0), Some(0.3));
    }
}
