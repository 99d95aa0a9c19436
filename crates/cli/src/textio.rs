//! File and input helpers shared by the single-file table commands
//! (`nexthop lpm`, `nexthop ndn fib`): atomic replacement of an output
//! file, and the "arguments, or stdin one per line" input rule.

use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::{anyhow, Context, Result};

/// Whether commands' text (progress and summaries) goes to stderr: set by
/// `--json`, which keeps stdout for the JSON object.
static TEXT_TO_STDERR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Send [`say!`]'s text to stderr (`true`, with `--json`) or stdout.
pub fn text_to_stderr(on: bool) {
    TEXT_TO_STDERR.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether [`say!`] writes to stderr.
pub fn text_on_stderr() -> bool {
    TEXT_TO_STDERR.load(std::sync::atomic::Ordering::Relaxed)
}

/// `println!` for a command's text: to stdout, or to stderr with `--json`
/// ([`text_to_stderr`]).
macro_rules! say {
    ($($arg:tt)*) => {
        if $crate::textio::text_on_stderr() {
            eprintln!($($arg)*)
        } else {
            println!($($arg)*)
        }
    };
}
pub(crate) use say;

/// Write `bytes` to `path` through a temporary file in the same directory
/// (fsynced) and a rename, so readers see the old file or the new one,
/// never a mix; on error the temporary file is removed and `path` is
/// untouched. Temporaries of earlier writers of `path` that were killed
/// before their rename are removed first.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| anyhow!("{}: not a file path", path.display()))?;
    let prefix = format!(".{}.tmp.", name.to_string_lossy());
    remove_stale_temporaries(dir, &prefix);
    let tmp = dir.join(format!("{prefix}{}", std::process::id()));
    let res = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(anyhow!("{}: {e}", path.display()));
    }
    Ok(())
}

/// Remove `PREFIX<PID>` files in `dir` left by writers that were killed
/// before their rename: those whose process no longer exists (no
/// `/proc/PID`). A live writer's file is left alone. Best effort: an entry
/// that cannot be read or removed is skipped.
fn remove_stale_temporaries(dir: &Path, prefix: &str) {
    // Without a mounted /proc every writer would look dead.
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// A count on the command line (clap `value_parser`): a whole number
/// written `10000000` or, for large ones, `1e7` / `2.5e6`. A fraction, a
/// sign or a value past 2^53 is refused with a message saying what was
/// expected.
pub fn count_arg(s: &str) -> std::result::Result<usize, String> {
    count_arg_u64(s).and_then(|n| usize::try_from(n).map_err(|_| format!("{s} is too large")))
}

/// [`count_arg`] for a `u64`.
pub fn count_arg_u64(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    if let Ok(n) = t.parse::<u64>() {
        return Ok(n);
    }
    let bad = || format!("expected a whole number such as 1000000 or 1e6, got {s:?}");
    if !t.contains(['e', 'E']) {
        return Err(bad());
    }
    match t.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 && x.fract() == 0.0 && x <= (1u64 << 53) as f64 => {
            Ok(x as u64)
        }
        _ => Err(bad()),
    }
}

/// `n` and the noun for it: `1 name`, `2 names` (`one` for one, `many`
/// otherwise).
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Call `f` on each of `args`, or, when there are none, on each line of
/// stdin (trimmed; blank lines and `#` comment lines skipped). An error of
/// `f` is prefixed with where the input came from: `argument N` or
/// `stdin:N` (1-based).
pub fn for_each_input(args: &[String], mut f: impl FnMut(&str) -> Result<()>) -> Result<()> {
    if !args.is_empty() {
        for (i, s) in args.iter().enumerate() {
            f(s).with_context(|| format!("argument {}", i + 1))?;
        }
        return Ok(());
    }
    for (i, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line.context("reading stdin")?;
        // A byte-order mark is skipped, as by every text parser.
        let line = if i == 0 {
            line.strip_prefix('\u{feff}').unwrap_or(&line)
        } else {
            &line
        };
        let s = line.trim();
        if s.is_empty() || s.starts_with('#') {
            continue;
        }
        f(s).with_context(|| format!("stdin:{}", i + 1))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_are_whole_numbers_in_either_notation() {
        use super::{count_arg, count_arg_u64};
        assert_eq!(count_arg("10000000"), Ok(10_000_000));
        assert_eq!(count_arg("1e7"), Ok(10_000_000));
        assert_eq!(count_arg("2.5e6"), Ok(2_500_000));
        assert_eq!(count_arg("0"), Ok(0));
        assert_eq!(count_arg_u64("9007199254740992"), Ok(1 << 53));
        assert_eq!(count_arg_u64("18446744073709551615"), Ok(u64::MAX));
        for bad in [
            "", "1.5", "1.5e0", "-1", "-1e3", "1e300", "inf", "NaN", "1e", "ten", "1_000",
        ] {
            let e = count_arg(bad).unwrap_err();
            assert!(e.contains("whole number"), "{bad}: {e}");
        }
    }

    use super::*;

    #[test]
    fn atomic_writes_remove_temporaries_of_dead_writers_only() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.lpm");
        // PIDs never exceed 2^22, so 999999999 names a writer that is gone;
        // PID 1 is always alive.
        let dead = d.path().join(".t.lpm.tmp.999999999");
        let live = d.path().join(".t.lpm.tmp.1");
        let other = d.path().join(".u.lpm.tmp.999999999");
        for f in [&dead, &live, &other] {
            std::fs::write(f, b"partial").unwrap();
        }
        write_atomic(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert!(!dead.exists());
        assert!(live.exists());
        assert!(other.exists(), "another file's temporaries are not touched");
    }

    #[test]
    fn atomic_writes_replace_the_file_and_leave_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.bin");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
        let e = write_atomic(&d.path().join("no/such/dir/t.bin"), b"x").unwrap_err();
        assert!(e.to_string().contains("t.bin"), "{e}");
    }

    #[test]
    fn argument_errors_name_the_argument() {
        let args = vec!["a".to_string(), "bad".to_string()];
        let mut seen = Vec::new();
        let e = for_each_input(&args, |s| {
            seen.push(s.to_string());
            if s == "bad" {
                anyhow::bail!("not good")
            }
            Ok(())
        })
        .unwrap_err();
        assert_eq!(seen, ["a", "bad"]);
        assert_eq!(format!("{e:#}"), "argument 2: not good");
    }

    #[test]
    fn counts_use_the_singular_for_one() {
        assert_eq!(count(1u32, "name", "names"), "1 name");
        assert_eq!(count(0u32, "name", "names"), "0 names");
        assert_eq!(
            count(2u64, "action change", "action changes"),
            "2 action changes"
        );
    }
}
