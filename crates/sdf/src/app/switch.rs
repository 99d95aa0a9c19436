//! A whole SDF switch on one thread: the decision cache in front of an
//! app. The reference the data-plane pipeline is tested against, and the
//! cache's correctness oracle: with `caching` off every packet goes to the
//! app, and the output must be the same packet for packet.

use std::time::Duration;

use super::App;
use super::{apply_cached, decide, AppCounters, Control, DropCounts, Emits, Ports, Stats};
use crate::cache::{Config, ConfigError, DecisionCache, Installed};
use crate::key::{HeaderKey, PortId};

/// Counters of a [`Switch`] (besides the cache's and the app side's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchCounters {
    /// Packets processed.
    pub packets: u64,
    /// Packets answered by the cache.
    pub hits: u64,
    /// Packets that went to the app.
    pub misses: u64,
    /// Decisions cached.
    pub installed: u64,
    /// Cache hits dropped by their entry's primitive (TTL expired).
    pub hit_drops: DropCounts,
}

/// The cache in front of an app, on the caller's thread.
#[derive(Debug)]
pub struct Switch<A> {
    app: A,
    cache: DecisionCache,
    ports: Ports,
    caching: bool,
    now: Duration,
    counters: SwitchCounters,
    app_counters: AppCounters,
}

impl<A: App> Switch<A> {
    /// A switch with `ports` running `app`; `caching` false sends every
    /// packet to the app (the oracle).
    pub fn new(app: A, cfg: Config, ports: Ports, caching: bool) -> Result<Switch<A>, ConfigError> {
        Ok(Switch {
            app,
            cache: DecisionCache::new(cfg)?,
            ports,
            caching,
            now: Duration::ZERO,
            counters: SwitchCounters::default(),
            app_counters: AppCounters::default(),
        })
    }

    /// The app.
    pub fn app(&self) -> &A {
        &self.app
    }

    /// The app, to change its state from outside (tests, drivers).
    pub fn app_mut(&mut self) -> &mut A {
        &mut self.app
    }

    /// The cache.
    pub fn cache(&self) -> &DecisionCache {
        &self.cache
    }

    /// The ports.
    pub fn ports(&self) -> &Ports {
        &self.ports
    }

    /// The switch's counters.
    pub fn counters(&self) -> &SwitchCounters {
        &self.counters
    }

    /// Every counter, as [`Control::get_stats`] gives them.
    pub fn stats(&mut self) -> Stats {
        self.control().get_stats()
    }

    /// A [`Control`] for the caller (proactive decisions, say).
    pub fn control(&mut self) -> Control<'_> {
        Control::owned(
            &mut self.cache,
            &mut self.ports,
            &mut self.app_counters,
            self.now,
            self.caching,
        )
    }

    /// Run `f` on the app with a [`Control`] (a driver changing the app's
    /// state, say a route table, and revoking what depended on it).
    pub fn with_app<R>(&mut self, f: impl FnOnce(&mut A, &mut Control<'_>) -> R) -> R {
        let mut ctl = Control::owned(
            &mut self.cache,
            &mut self.ports,
            &mut self.app_counters,
            self.now,
            self.caching,
        );
        f(&mut self.app, &mut ctl)
    }

    /// Advance the clock to `now` and let the app expire state
    /// ([`App::on_tick`]).
    pub fn tick(&mut self, now: Duration) {
        self.now = now;
        let mut ctl = Control::owned(
            &mut self.cache,
            &mut self.ports,
            &mut self.app_counters,
            self.now,
            self.caching,
        );
        self.app.on_tick(&mut ctl);
    }

    /// Forward `frame` received on `in_port`: the frames to send.
    pub fn process(&mut self, in_port: PortId, frame: &[u8]) -> Emits {
        self.counters.packets += 1;
        let key = HeaderKey::from_frame(frame, in_port);
        if self.caching {
            if let Some(id) = self.cache.lookup(&key) {
                if let Some(actions) = self.cache.actions(id) {
                    self.counters.hits += 1;
                    return match apply_cached(actions, frame) {
                        Ok(e) => e.into_iter().collect(),
                        Err(r) => {
                            self.counters.hit_drops.add(r);
                            Emits::new()
                        }
                    };
                }
            }
        }
        self.counters.misses += 1;
        let mut ctl = Control::owned(
            &mut self.cache,
            &mut self.ports,
            &mut self.app_counters,
            self.now,
            self.caching,
        );
        let reply = decide(&mut self.app, &mut ctl, frame.to_vec(), in_port);
        if self.caching {
            if let Some(d) = &reply.decision {
                match self.cache.install(&key, d) {
                    Ok(Installed::Cached(_)) => self.counters.installed += 1,
                    Ok(Installed::NotCached(_)) => {}
                    Err(_) => self.app_counters.install_errors += 1,
                }
            }
        }
        reply.emits
    }
}
