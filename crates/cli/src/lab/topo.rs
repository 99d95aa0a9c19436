//! The namespaces, links and node processes of the multi-node live labs
//! (`--switches` in [`super::net`], `--cluster` in [`super::cluster`]):
//! a source namespace, one sink namespace and N node namespaces, joined by
//! veth pairs the lab names, with one `nexthop` process per node.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result};
use nexthop_dataplane::live::StopFlag;
use nexthop_dataplane::netns::Namespaces;

use super::live::ChildGuard;

/// One end of a link: the source, the sink namespace or node `k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum At {
    Src,
    Snk,
    Node(usize),
}

/// The namespaces of a multi-node lab: `{prefix}{pid}-src`,
/// `{prefix}{pid}-snk` and `{prefix}{pid}-{node}{k}` for every node `k`.
/// Dropping it removes them (and so every link); drop the node processes
/// ([`NodeProc`]) first.
pub(crate) struct LabNet {
    ns: Namespaces,
    pub(crate) src: String,
    pub(crate) snk: String,
    pub(crate) nodes: Vec<String>,
}

/// A node's process, killed on drop unless it exited, and the file its
/// stdout goes to (`{stem}{k}.out`; stderr is `{stem}{k}.err`).
pub(crate) struct NodeProc {
    pub(crate) child: ChildGuard,
    pub(crate) out: PathBuf,
}

impl LabNet {
    /// Create the source, sink and `n` node namespaces (`node` is the
    /// node namespaces' stem).
    pub(crate) fn create(prefix: &str, node: &str, n: usize) -> Result<LabNet> {
        let tag = format!("{prefix}{}", std::process::id());
        let mut net = LabNet {
            ns: Namespaces::new(),
            src: format!("{tag}-src"),
            snk: format!("{tag}-snk"),
            nodes: (0..n).map(|k| format!("{tag}-{node}{k}")).collect(),
        };
        let LabNet {
            ns,
            src,
            snk,
            nodes,
        } = &mut net;
        for x in [&*src, &*snk].into_iter().chain(nodes.iter()) {
            ns.create(x)?;
        }
        Ok(net)
    }

    /// The namespace of `at`.
    pub(crate) fn name(&self, at: At) -> &str {
        match at {
            At::Src => &self.src,
            At::Snk => &self.snk,
            At::Node(k) => &self.nodes[k],
        }
    }

    /// A veth pair, both ends up: interface `ia` at `a`, `ib` at `b`.
    pub(crate) fn link(&self, a: At, ia: &str, b: At, ib: &str) -> Result<()> {
        self.ns.veth(self.name(a), ia, self.name(b), ib, None)?;
        Ok(())
    }

    /// Start `exe` in every node's namespace (`ip netns exec NS exe ..`,
    /// the arguments from `args(k, cmd)`), stdout to `out/{stem}{k}.out`,
    /// stderr to `out/{stem}{k}.err`, and wait until every one says it is
    /// forwarding ([`ChildGuard::wait_forwarding`]; `what` and `k` name a
    /// node in errors).
    pub(crate) fn start(
        &self,
        exe: &Path,
        out: &Path,
        stem: &str,
        what: &str,
        stop: &StopFlag,
        mut args: impl FnMut(usize, &mut Command),
    ) -> Result<Vec<NodeProc>> {
        let mut procs = Vec::new();
        let mut errs = Vec::new();
        for (k, x) in self.nodes.iter().enumerate() {
            let err = out.join(format!("{stem}{k}.err"));
            let outf = out.join(format!("{stem}{k}.out"));
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", x]).arg(exe);
            args(k, &mut cmd);
            cmd.stdin(Stdio::null())
                .stdout(fs::File::create(&outf)?)
                .stderr(fs::File::create(&err)?);
            let child = cmd
                .spawn()
                .with_context(|| format!("starting {what} {k}"))?;
            procs.push(NodeProc {
                child: ChildGuard(Some(child)),
                out: outf,
            });
            errs.push(err);
        }
        for (k, (p, err)) in procs.iter_mut().zip(&errs).enumerate() {
            p.child.wait_forwarding(err, &format!("{what} {k}"), stop)?;
        }
        Ok(procs)
    }
}
