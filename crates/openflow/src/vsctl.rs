//! The bridge's configuration through `ovs-vsctl`: point its controller at
//! the backend ([`set_controller`]) and give the ports an app adds (its
//! tunnels) real switch ports ([`Tunnels`], a [`PortMapper`]).
//!
//! A tunnel port of the app is mapped by one of its properties (SEATTLE's
//! `peer`): `--ovs-tunnel VALUE=NAME,TYPE[,KEY=VAL...]` makes the app port
//! whose property equals VALUE the OVS interface NAME of TYPE (`patch`,
//! `vxlan`, `gre`, ... whatever the datapath supports) with
//! `options:KEY=VAL`, and `ofport_request` = the app's port number, so the
//! app's port numbers are the bridge's OpenFlow port numbers.

use std::collections::BTreeMap;
use std::process::Command;

use nexthop_sdf::app::PortInfo;
use nexthop_sdf::PortId;

use crate::backend::PortMapper;

/// Point `bridge`'s controller at `target` (`tcp:HOST:PORT`): OpenFlow
/// 1.3 only, secure fail mode (no flows but ours), out-of-band (no hidden
/// in-band flows), retries at most a second apart (a restart reconnects at
/// once).
pub fn set_controller(bridge: &str, target: &str) -> Result<(), String> {
    vsctl(&[
        "set-controller",
        bridge,
        target,
        "--",
        "set",
        "bridge",
        bridge,
        "fail-mode=secure",
        "protocols=OpenFlow13",
        "--",
        "set",
        "controller",
        bridge,
        "connection-mode=out-of-band",
        "max_backoff=1000",
    ])
    .map(|_| ())
}

/// Run `ovs-vsctl --timeout=20 ARGS`: its stdout, or why it failed.
fn vsctl(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ovs-vsctl")
        .arg("--timeout=20")
        .args(args)
        .output()
        .map_err(|e| format!("ovs-vsctl (install openvswitch-switch): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ovs-vsctl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The switch port an app port becomes: `NAME,TYPE[,KEY=VAL...]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunnelSpec {
    /// The OVS interface name.
    pub name: String,
    /// Its type (`patch`, `vxlan`, `gre`, `internal`, ...).
    pub typ: String,
    /// Its `options:KEY=VAL`.
    pub options: Vec<(String, String)>,
}

fn ovs_word(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.:".contains(&b))
}

impl std::str::FromStr for TunnelSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<TunnelSpec, String> {
        let mut it = s.split(',');
        let name = it.next().unwrap_or_default();
        let typ = it.next().unwrap_or_default();
        if !ovs_word(name) || name.len() > 15 || !ovs_word(typ) {
            return Err(format!(
                "{s:?}: expected NAME,TYPE[,KEY=VAL...] (NAME at most 15 characters)"
            ));
        }
        let mut options = Vec::new();
        for kv in it {
            match kv.split_once('=') {
                Some((k, v)) if ovs_word(k) && ovs_word(v) => {
                    options.push((k.to_owned(), v.to_owned()))
                }
                _ => return Err(format!("{s:?}: option {kv:?} is not KEY=VAL")),
            }
        }
        Ok(TunnelSpec {
            name: name.to_owned(),
            typ: typ.to_owned(),
            options,
        })
    }
}

impl TunnelSpec {
    /// The `ovs-vsctl` arguments that (re)create this port on `bridge` as
    /// OpenFlow port `ofport` (an old port of the same name goes first, so
    /// a restarted backend starts clean).
    pub fn add_args(&self, bridge: &str, ofport: PortId) -> Vec<String> {
        let mut a: Vec<String> = ["--", "--if-exists", "del-port", bridge, &self.name]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(["--", "add-port", bridge, &self.name].map(String::from));
        a.extend(["--", "set", "interface", &self.name].map(String::from));
        a.push(format!("type={}", self.typ));
        a.push(format!("ofport_request={ofport}"));
        for (k, v) in &self.options {
            a.push(format!("options:{k}={v}"));
        }
        a
    }
}

/// Switch ports for the app's tunnels: `key`'s value of an app port picks
/// its [`TunnelSpec`].
#[derive(Clone, Debug)]
pub struct Tunnels {
    bridge: String,
    key: String,
    specs: BTreeMap<String, TunnelSpec>,
    made: BTreeMap<PortId, String>,
}

impl Tunnels {
    /// Tunnels on `bridge`, chosen by property `key` (value -> spec).
    pub fn new(bridge: &str, key: &str, specs: BTreeMap<String, TunnelSpec>) -> Tunnels {
        Tunnels {
            bridge: bridge.to_owned(),
            key: key.to_owned(),
            specs,
            made: BTreeMap::new(),
        }
    }

    /// The spec for `port`, or why there is none.
    pub fn spec_for(&self, port: &PortInfo) -> Result<&TunnelSpec, String> {
        let v = port.properties.get(&self.key).ok_or_else(|| {
            format!(
                "port {}: the app set no {:?} property to map it by",
                port.id, self.key
            )
        })?;
        self.specs.get(v).ok_or_else(|| {
            format!(
                "port {} ({}={v}): no --ovs-tunnel {v}=...",
                port.id, self.key
            )
        })
    }
}

impl Tunnels {
    fn try_add(&mut self, port: &PortInfo) -> Result<(), String> {
        let spec = self.spec_for(port)?.clone();
        let args = spec.add_args(&self.bridge, port.id);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        vsctl(&refs)?;
        let got = vsctl(&["get", "interface", &spec.name, "ofport"])?;
        if got != port.id.to_string() {
            let _ = vsctl(&["--if-exists", "del-port", &self.bridge, &spec.name]);
            return Err(format!(
                "port {}: OVS made {} OpenFlow port {got} (the number is taken?)",
                port.id, spec.name
            ));
        }
        self.made.insert(port.id, spec.name);
        Ok(())
    }
}

/// Failures are also printed on stderr (the run goes on without the port).
impl PortMapper for Tunnels {
    fn add(&mut self, port: &PortInfo) -> Result<(), String> {
        let r = self.try_add(port);
        match &r {
            Ok(()) => eprintln!(
                "nexthop sdf: app port {} is OVS port {} on {}",
                port.id, self.made[&port.id], self.bridge
            ),
            Err(e) => eprintln!("nexthop sdf: warning: {e}"),
        }
        r
    }

    fn remove(&mut self, id: PortId) -> Result<(), String> {
        match self.made.remove(&id) {
            Some(name) => vsctl(&["--if-exists", "del-port", &self.bridge, &name]).map(|_| ()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nexthop_sdf::app::PortKind;

    #[test]
    fn a_spec_parses_and_becomes_one_vsctl_transaction() {
        let s: TunnelSpec = "s0t1,patch,peer=s1t0".parse().unwrap();
        assert_eq!(s.name, "s0t1");
        assert_eq!(s.typ, "patch");
        assert_eq!(s.options, vec![("peer".into(), "s1t0".into())]);
        assert_eq!(
            s.add_args("s0", 2).join(" "),
            "-- --if-exists del-port s0 s0t1 -- add-port s0 s0t1 -- set interface s0t1 \
             type=patch ofport_request=2 options:peer=s1t0"
        );
        let v: TunnelSpec = "vx1,vxlan,remote_ip=10.0.0.2,key=7".parse().unwrap();
        assert_eq!(v.options.len(), 2);
    }

    #[test]
    fn bad_specs_are_refused() {
        for bad in [
            "",
            "s0t1",
            "s0t1,",
            "a name,patch",
            "waytoolongname01,patch",
            "t,patch,peer",
            "t,patch,peer=a b",
            "t,patch,=x",
            "t,patch;rm,peer=x",
        ] {
            assert!(bad.parse::<TunnelSpec>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_port_is_mapped_by_its_property() {
        let mut specs = BTreeMap::new();
        specs.insert("1".to_owned(), "t1,patch,peer=x".parse().unwrap());
        let t = Tunnels::new("br", "peer", specs);
        let mut p = PortInfo {
            id: 2,
            kind: PortKind::Tunnel,
            properties: BTreeMap::new(),
        };
        assert!(t.spec_for(&p).unwrap_err().contains("no \"peer\" property"));
        p.properties.insert("peer".into(), "3".into());
        assert!(t.spec_for(&p).unwrap_err().contains("no --ovs-tunnel 3="));
        p.properties.insert("peer".into(), "1".into());
        assert_eq!(t.spec_for(&p).unwrap().name, "t1");
    }
}
