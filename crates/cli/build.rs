//! Build script of the `nexthop` binary: the long `--version` text.
//!
//! Sets `NEXTHOP_LONG_VERSION` to `VERSION (commit COMMIT; features
//! LIST)`: COMMIT is `git rev-parse --short=12 HEAD` of the checkout, or
//! `NEXTHOP_GIT_COMMIT` when set (builds from a source archive), or
//! `unknown` outside git; LIST names the enabled cargo features of this
//! crate (`none` when there are none).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `git ARGS` in `dir`, its trimmed stdout if it succeeded.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=NEXTHOP_GIT_COMMIT");
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into()));
    let commit = match env::var("NEXTHOP_GIT_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => {
            // Rebuild when HEAD moves: HEAD itself (a branch switch) and
            // the file of the branch it points to (a commit).
            for name in ["HEAD", "logs/HEAD"] {
                if let Some(p) = git(&dir, &["rev-parse", "--git-path", name]) {
                    println!("cargo:rerun-if-changed={}", dir.join(p).display());
                }
            }
            if let Some(branch) = git(&dir, &["symbolic-ref", "-q", "HEAD"]) {
                if let Some(p) = git(&dir, &["rev-parse", "--git-path", &branch]) {
                    println!("cargo:rerun-if-changed={}", dir.join(p).display());
                }
            }
            git(&dir, &["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into())
        }
    };
    let mut features: Vec<String> = env::vars()
        .filter_map(|(k, _)| {
            k.strip_prefix("CARGO_FEATURE_")
                .map(|f| f.to_ascii_lowercase().replace('_', "-"))
        })
        .filter(|f| f != "default")
        .collect();
    features.sort();
    let features = if features.is_empty() {
        "none".to_string()
    } else {
        features.join(", ")
    };
    println!(
        "cargo:rustc-env=NEXTHOP_LONG_VERSION={} (commit {commit}; features: {features})",
        env::var("CARGO_PKG_VERSION").unwrap_or_default()
    );
}
