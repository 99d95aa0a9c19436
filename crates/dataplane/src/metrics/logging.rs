//! The process-wide `tracing` subscriber the binary installs: text or JSON
//! lines on stderr, filtered by `--log-level` or `RUST_LOG`.

use std::io;

/// Why [`init_logging`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoggingError {
    /// `RUST_LOG` is not a valid filter.
    #[error("RUST_LOG={value:?} is not a valid log filter: {message}")]
    BadFilter {
        /// The variable's value.
        value: String,
        /// The parser's message.
        message: String,
    },
    /// A log level given by the caller (`--log-level`) is not a valid
    /// filter.
    #[error("log level {value:?} is not a valid log filter: {message}")]
    BadLevel {
        /// The level as given.
        value: String,
        /// The parser's message.
        message: String,
    },
    /// A global subscriber was already installed.
    #[error("a log subscriber is already installed")]
    AlreadySet,
}

/// Default filter when `RUST_LOG` is unset or empty.
pub const DEFAULT_LOG_FILTER: &str = "info";

fn log_filter(var: Option<String>) -> Result<tracing_subscriber::EnvFilter, LoggingError> {
    match var.filter(|v| !v.trim().is_empty()) {
        None => Ok(tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER)),
        Some(value) => {
            tracing_subscriber::EnvFilter::try_new(&value).map_err(|e| LoggingError::BadFilter {
                value,
                message: e.to_string(),
            })
        }
    }
}

/// The filter: `level` when given, else `RUST_LOG` (`var`), else the
/// default.
fn level_filter(
    level: Option<&str>,
    var: Option<String>,
) -> Result<tracing_subscriber::EnvFilter, LoggingError> {
    match level {
        Some(l) => tracing_subscriber::EnvFilter::try_new(l).map_err(|e| LoggingError::BadLevel {
            value: l.to_string(),
            message: e.to_string(),
        }),
        None => log_filter(var),
    }
}

/// A subscriber writing to `writer`: text lines, or one JSON object per
/// line when `json`.
fn subscriber<W>(
    json: bool,
    filter: tracing_subscriber::EnvFilter,
    writer: W,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'a> tracing_subscriber::fmt::MakeWriter<'a> + Send + Sync + 'static,
{
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_target(true);
    if json {
        Box::new(b.json().flatten_event(true).finish())
    } else {
        Box::new(b.with_ansi(false).finish())
    }
}

/// Install the process-wide log subscriber: stderr, text lines or (with
/// `json`) one JSON object per line, filtered by `RUST_LOG` (default
/// [`DEFAULT_LOG_FILTER`]).
///
/// # Errors
/// `RUST_LOG` does not parse, or a subscriber was already installed.
pub fn init_logging(json: bool) -> Result<(), LoggingError> {
    init_logging_at(json, None)
}

/// [`init_logging`], with `level` (a level such as `debug`, or any
/// `RUST_LOG`-style filter) in place of `RUST_LOG` when given.
///
/// # Errors
/// `level` or `RUST_LOG` does not parse, or a subscriber was already
/// installed.
pub fn init_logging_at(json: bool, level: Option<&str>) -> Result<(), LoggingError> {
    let filter = level_filter(level, std::env::var("RUST_LOG").ok())?;
    tracing::subscriber::set_global_default(subscriber(json, filter, io::stderr))
        .map_err(|_| LoggingError::AlreadySet)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Buf {
        type Writer = Buf;
        fn make_writer(&'a self) -> Buf {
            self.clone()
        }
    }

    #[test]
    fn json_logs_are_one_object_per_line_with_fields() {
        let buf = Buf::default();
        let sub = subscriber(true, log_filter(None).unwrap(), buf.clone());
        tracing::subscriber::with_default(sub, || {
            tracing::info!(port = 3, "port up");
            tracing::debug!("hidden at the default level");
        });
        let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 1, "{out}");
        let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["message"], "port up");
        assert_eq!(v["port"], 3);
    }

    #[test]
    fn text_logs_respect_the_filter() {
        let buf = Buf::default();
        let filter = log_filter(Some("debug".to_string())).unwrap();
        let sub = subscriber(false, filter, buf.clone());
        tracing::subscriber::with_default(sub, || {
            tracing::debug!(frames = 5, "tick");
        });
        let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert!(out.contains("DEBUG"), "{out}");
        assert!(out.contains("tick frames=5"), "{out}");
        assert!(!out.contains('\u{1b}'), "no colour codes: {out:?}");
    }

    #[test]
    fn a_given_level_wins_over_rust_log() {
        let buf = Buf::default();
        let filter = level_filter(Some("warn"), Some("trace".to_string())).unwrap();
        let sub = subscriber(false, filter, buf.clone());
        tracing::subscriber::with_default(sub, || {
            tracing::info!("hidden below warn");
            tracing::warn!("shown");
        });
        let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert!(out.contains("shown") && !out.contains("hidden"), "{out}");
        let err = level_filter(Some("=["), None).unwrap_err();
        assert!(err.to_string().contains("log level \"=[\""), "{err}");
        // Without a level, RUST_LOG decides.
        assert!(matches!(
            level_filter(None, Some("=[".to_string())),
            Err(LoggingError::BadFilter { .. })
        ));
    }

    #[test]
    fn a_bad_rust_log_is_a_clear_error() {
        let err = log_filter(Some("=[".to_string())).unwrap_err();
        assert!(err.to_string().contains("RUST_LOG=\"=[\""), "{err}");
        assert!(log_filter(Some("  ".to_string())).is_ok());
    }
}
