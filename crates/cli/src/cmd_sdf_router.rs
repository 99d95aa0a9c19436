//! `nexthop sdf run --app router`: the built-in IPv4 router
//! (`nexthop_sdf::app::Router`), its interfaces from `--router-iface` and
//! its routes from `--router-routes FILE` (the route file of
//! `python/nexthop/apps/router.py`). The file is read again when it
//! changes (checked at most every 100 ms of the app's clock): routes that
//! went or changed revoke their decisions, on either backend. A file that
//! no longer parses is reported and the table kept.
//!
//! Glue only: the router is `nexthop-sdf`'s.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use nexthop_dataplane::sdf::App;
use nexthop_sdf::app::{parse_routes, AppError, Control, Iface, InPkt, Route, Router};

/// How often the route file is looked at.
const CHECK_EVERY: Duration = Duration::from_millis(100);

/// The router's flags.
#[derive(Debug, Args)]
pub struct RouterArgs {
    /// router: one of its interfaces, PORT=MAC,IPV4 (repeatable; the
    /// router answers ARP for IPV4 on PORT and sends from MAC there).
    #[arg(long = "router-iface", value_name = "PORT=MAC,IPV4")]
    ifaces: Vec<Iface>,
    /// router: the route file, `PREFIX PORT NEXT_HOP_MAC` lines (`#`
    /// comments); read again when it changes.
    #[arg(long = "router-routes", value_name = "FILE")]
    routes: Option<PathBuf>,
}

/// The router app of `a`.
pub fn app(a: &RouterArgs) -> Result<Box<dyn App>> {
    Ok(Box::new(route_file(a)?))
}

fn route_file(a: &RouterArgs) -> Result<RouteFile> {
    if a.ifaces.is_empty() {
        bail!("--app router needs --router-iface PORT=MAC,IPV4 (one per port)");
    }
    let router = Router::new(&a.ifaces).map_err(|e| anyhow!("--router-iface: {e}"))?;
    let mut app = RouteFile {
        router,
        path: a.routes.clone(),
        text: None,
        next_check: Duration::ZERO,
        pending: Vec::new(),
    };
    if let Some(p) = &a.routes {
        let text = std::fs::read_to_string(p)
            .with_context(|| format!("--router-routes {}", p.display()))?;
        app.pending = parse_routes(&text).map_err(|e| anyhow!("{}: {e}", p.display()))?;
        if let Some(r) = app
            .pending
            .iter()
            .find(|r| !app.router.ports().contains(&r.port))
        {
            bail!(
                "{}: route {}: port {} has no --router-iface",
                p.display(),
                r.prefix,
                r.port
            );
        }
        app.text = Some(text);
    }
    Ok(app)
}

/// The router, its table kept equal to the route file.
struct RouteFile {
    router: Router,
    path: Option<PathBuf>,
    /// The file's text the table was last made from.
    text: Option<String>,
    next_check: Duration,
    /// Routes read at start, installed at the first call (which has the
    /// switch's `Control`).
    pending: Vec<Route>,
}

impl RouteFile {
    fn install(&mut self, ctl: &mut Control<'_>, routes: &[Route], what: &str) {
        let before = self.router.routes();
        match self.router.set_routes(ctl, routes) {
            Ok(_) => {
                let after = self.router.routes();
                let changed = before.iter().filter(|r| !after.contains(r)).count()
                    + after.iter().filter(|r| !before.contains(r)).count();
                eprintln!(
                    "nexthop sdf: router: {what}: {} routes, {changed} added, changed or withdrawn",
                    after.len()
                );
            }
            Err(e) => eprintln!("nexthop sdf: router: {what}: {e}; routes kept"),
        }
    }

    /// Install the start routes, then follow the file (module docs).
    fn follow(&mut self, ctl: &mut Control<'_>) {
        if !self.pending.is_empty() {
            let routes = std::mem::take(&mut self.pending);
            self.install(ctl, &routes, "routes");
        }
        let now = ctl.now();
        if now < self.next_check {
            return;
        }
        self.next_check = now + CHECK_EVERY;
        let Some(path) = &self.path else {
            return;
        };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                if self.text.take().is_some() {
                    eprintln!("nexthop sdf: router: {}: {e}; routes kept", path.display());
                }
                return;
            }
        };
        if self.text.as_deref() == Some(text.as_str()) {
            return;
        }
        let what = path.display().to_string();
        match parse_routes(&text) {
            Ok(routes) => self.install(ctl, &routes, &what),
            Err(e) => eprintln!("nexthop sdf: router: {what}: {e}; routes kept"),
        }
        self.text = Some(text);
    }
}

impl App for RouteFile {
    fn name(&self) -> &str {
        self.router.name()
    }

    fn on_packet(&mut self, pkt: &mut InPkt, ctl: &mut Control<'_>) -> Result<(), AppError> {
        self.follow(ctl);
        self.router.on_packet(pkt, ctl)
    }

    fn on_tick(&mut self, ctl: &mut Control<'_>) {
        self.follow(ctl);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nexthop_sdf::app::{Ports, Switch};
    use nexthop_sdf::Config;

    #[test]
    fn the_route_file_is_followed_and_a_bad_version_keeps_the_table() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("routes");
        std::fs::write(&file, "10.0.0.0/8 1 02:00:00:00:00:0a\n").unwrap();
        let args = RouterArgs {
            ifaces: vec!["1=02:00:00:00:00:01,10.0.0.1".parse().unwrap()],
            routes: Some(file.clone()),
        };
        let app = route_file(&args).unwrap();
        let mut s = Switch::new(app, Config::default(), Ports::physical(&[1]), true).unwrap();
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[8, 0]);
        f[14] = 0x45;
        f[22] = 64;
        f[30..34].copy_from_slice(&[10, 2, 3, 4]);
        let e = s.process(1, &f);
        assert_eq!(e[0].bytes[..6], [2, 0, 0, 0, 0, 0x0a]);
        assert_eq!(s.cache().len(), 1);
        // A changed next hop: the decision goes at the next check.
        std::fs::write(&file, "10.0.0.0/8 1 02:00:00:00:00:0b\n").unwrap();
        s.tick(Duration::from_millis(50));
        assert_eq!(s.cache().len(), 1, "not checked yet");
        s.tick(Duration::from_millis(150));
        assert_eq!(s.cache().len(), 0);
        let e = s.process(1, &f);
        assert_eq!(e[0].bytes[..6], [2, 0, 0, 0, 0, 0x0b]);
        // A file that does not parse, or a route out of a port with no
        // interface: the table stays.
        std::fs::write(&file, "10.0.0.0/8 1\n").unwrap();
        s.tick(Duration::from_millis(300));
        std::fs::write(&file, "10.0.0.0/8 2 02:00:00:00:00:0c\n").unwrap();
        s.tick(Duration::from_millis(450));
        assert_eq!(s.cache().len(), 1);
        assert_eq!(s.process(1, &f)[0].bytes[..6], [2, 0, 0, 0, 0, 0x0b]);
    }

    #[test]
    fn the_router_needs_interfaces_and_routes_on_them() {
        let none = RouterArgs {
            ifaces: Vec::new(),
            routes: None,
        };
        assert!(app(&none).is_err());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("routes");
        std::fs::write(&file, "10.0.0.0/8 2 02:00:00:00:00:0a\n").unwrap();
        let off = RouterArgs {
            ifaces: vec!["1=02:00:00:00:00:01,10.0.0.1".parse().unwrap()],
            routes: Some(file),
        };
        let e = app(&off).err().unwrap().to_string();
        assert!(e.contains("port 2 has no --router-iface"), "{e}");
    }
}
