//! Network namespaces for labs and tests: create named namespaces and veth
//! pairs with iproute2, move a thread into one, and remove everything
//! again when the guard drops (also when the owner panics).
//!
//! A namespace made here is a named one (`ip netns add NAME`, a bind mount
//! under `/var/run/netns`), so `ip netns exec NAME ...` reaches it from a
//! shell as well. [`enter`] switches only the *calling thread* (Linux
//! `setns(2)` with `CLONE_NEWNET` is per thread): sockets the thread opens
//! afterwards live in that namespace, and keep living there after the
//! thread ends; child processes the thread spawns start in it.
//!
//! Everything here needs `CAP_SYS_ADMIN` (root); [`Namespaces::create`]
//! says so in its error when the first `ip netns add` fails.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};

/// Why a namespace operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetnsError {
    /// `ip` could not be run at all (iproute2 missing).
    #[error("cannot run `ip` (is iproute2 installed?): {0}")]
    NoIp(#[source] io::Error),
    /// An `ip` command failed; its arguments and its stderr.
    #[error("`ip {args}` failed: {stderr}")]
    Ip {
        /// The arguments, space-separated.
        args: String,
        /// What `ip` printed on stderr.
        stderr: String,
    },
    /// Opening the namespace file or `setns` failed.
    #[error("entering network namespace {name}: {source}")]
    Enter {
        /// The namespace name.
        name: String,
        /// The OS error.
        source: io::Error,
    },
}

/// Run `ip ARGS`; its stderr as the error when it fails.
pub fn ip(args: &[&str]) -> Result<(), NetnsError> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(NetnsError::NoIp)?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NetnsError::Ip {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// Move the calling thread into the named network namespace `name`
/// (`/var/run/netns/NAME`). Other threads are not affected.
///
/// # Errors
/// The namespace does not exist, or `setns` was refused (not root).
#[allow(unsafe_code)]
pub fn enter(name: &str) -> Result<(), NetnsError> {
    let err = |source| NetnsError::Enter {
        name: name.to_string(),
        source,
    };
    if name.contains('/') || name.is_empty() {
        return Err(err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a namespace name",
        )));
    }
    let file = File::open(format!("/var/run/netns/{name}")).map_err(err)?;
    // SAFETY: (1) `file` is an open descriptor that stays open for the
    // call; setns only reads it and changes the calling thread's network
    // namespace, which no Rust invariant depends on.
    let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if r != 0 {
        return Err(err(io::Error::last_os_error()));
    }
    Ok(())
}

/// Named network namespaces and the veth pairs between them, all removed
/// when this guard drops (deleting a namespace deletes its interfaces,
/// and a veth pair goes with either end).
#[derive(Debug, Default)]
pub struct Namespaces {
    names: Vec<String>,
}

impl Namespaces {
    /// A guard owning no namespace yet.
    pub fn new() -> Namespaces {
        Namespaces::default()
    }

    /// Create namespace `name` with its loopback up and IPv6 off on every
    /// interface (no router solicitations or DAD frames beside the
    /// traffic under test). A stale namespace of the same name (a run that
    /// was killed) is removed first.
    ///
    /// # Errors
    /// `ip netns add` failed; when not running as root the message says
    /// that root is needed.
    pub fn create(&mut self, name: &str) -> Result<(), NetnsError> {
        let _ = ip(&["netns", "del", name]);
        ip(&["netns", "add", name]).map_err(|e| match e {
            NetnsError::Ip { args, stderr } if !is_root() => NetnsError::Ip {
                args,
                stderr: format!("{stderr} (network namespaces need root)"),
            },
            e => e,
        })?;
        self.names.push(name.to_string());
        ip(&["-n", name, "link", "set", "lo", "up"])?;
        for key in ["all", "default"] {
            // Best effort: kernels without IPv6 have no such file.
            let _ = Command::new("ip")
                .args(["netns", "exec", name, "sysctl", "-q", "-w"])
                .arg(format!("net.ipv6.conf.{key}.disable_ipv6=1"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        Ok(())
    }

    /// A veth pair: `a` in namespace `ns_a`, `b` in namespace `ns_b`, both
    /// up, with `mtu` when given.
    ///
    /// # Errors
    /// An `ip` command failed.
    pub fn veth(
        &self,
        ns_a: &str,
        a: &str,
        ns_b: &str,
        b: &str,
        mtu: Option<u32>,
    ) -> Result<(), NetnsError> {
        ip(&[
            "-n", ns_a, "link", "add", a, "type", "veth", "peer", "name", b, "netns", ns_b,
        ])?;
        for (ns, i) in [(ns_a, a), (ns_b, b)] {
            if let Some(m) = mtu {
                ip(&["-n", ns, "link", "set", i, "mtu", &m.to_string()])?;
            }
            ip(&["-n", ns, "link", "set", i, "up"])?;
        }
        Ok(())
    }

    /// The namespaces this guard owns, in creation order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Delete every namespace now (the guard is then empty). Errors are
    /// ignored: this is cleanup.
    pub fn remove_all(&mut self) {
        for n in self.names.drain(..).rev() {
            let _ = ip(&["netns", "del", &n]);
        }
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        self.remove_all();
    }
}

/// Whether the process runs as root (effective uid 0).
#[allow(unsafe_code)]
pub fn is_root() -> bool {
    // SAFETY: (2) geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_are_refused_before_any_system_call() {
        for bad in ["", "a/b", "../x"] {
            let e = enter(bad).unwrap_err();
            assert!(e.to_string().contains("not a namespace name"), "{e}");
        }
    }

    #[test]
    fn entering_a_missing_namespace_names_it() {
        let e = enter("nexthop-no-such-namespace").unwrap_err();
        assert!(e.to_string().contains("nexthop-no-such-namespace"), "{e}");
    }

    /// Creates two namespaces and a veth pair, enters one from a thread,
    /// and checks the guard removes them. Needs root; elsewhere it checks
    /// that the error says so.
    #[test]
    fn namespaces_are_created_entered_and_removed() {
        let tag = format!("nh-unit-{}", std::process::id());
        let (a, b) = (format!("{tag}-a"), format!("{tag}-b"));
        let mut ns = Namespaces::new();
        match ns.create(&a) {
            Ok(()) => {}
            Err(e) if !is_root() => {
                assert!(e.to_string().contains("root"), "{e}");
                return;
            }
            Err(e) => panic!("{e}"),
        }
        ns.create(&b).unwrap();
        ns.veth(&a, "va", &b, "vb", Some(1500)).unwrap();
        let a2 = a.clone();
        let index = std::thread::spawn(move || {
            enter(&a2).unwrap();
            crate::afpacket::if_index("va")
        })
        .join()
        .unwrap();
        assert!(index.is_ok(), "va not visible inside {a}: {index:?}");
        // This thread is still in the original namespace.
        assert!(crate::afpacket::if_index("va").is_err());
        drop(ns);
        assert!(!std::path::Path::new(&format!("/var/run/netns/{a}")).exists());
        assert!(!std::path::Path::new(&format!("/var/run/netns/{b}")).exists());
    }
}
