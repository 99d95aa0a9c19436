//! ndn-python-repo 0.3's command protocol, without I/O.
//!
//! The 0.3 clients (`PutfileClient`, `DeleteClient`, `CommandChecker`)
//! talk to a Repo named `R` like this:
//!
//! 1. **Publish** (python-ndn pub-sub): the client, reachable under its
//!    prefix `P`, keeps a Data `P/msg/R/<verb>/<nonce>` whose content is a
//!    [`CommandParam`] and sends the notify Interest `R/<verb>/notify`
//!    (`<verb>` is `insert` or `delete`) with a [`NotifyParam`] as
//!    ApplicationParameters. The Repo fetches the message Interest
//!    `P/msg/R/<verb>/<nonce>` and then answers the notify Interest with an
//!    empty Data (the acknowledgement).
//! 2. **Insert**: the Repo fetches `NAME/seg=START ..= NAME/seg=END` from the
//!    client (a window of Interests, each tried [`Config::tries`] times),
//!    or `NAME` alone when the command has neither block id; with no END it
//!    stops at the FinalBlockId or at the first segment that cannot be
//!    fetched. Only when every segment is in does it hand the whole object
//!    to the store ([`Action::Store`]), so a reader sees all of it or none.
//!    A command with RegisterPrefix `Q` may name an object under `Q` even
//!    when the Repo does not serve it yet: `Q` is then served and registered
//!    ([`Action::Register`], before the segments are fetched).
//! 3. **Delete**: segments `NAME/seg=START ..` up to END or the first one
//!    missing ([`Action::Delete`]); a RegisterPrefix `Q` that an insert
//!    registered is unregistered ([`Action::Unregister`]).
//! 4. **Check**: the Interest `R/<verb> check/<CommandParam with the
//!    process id>` is answered with a [`CommandResponse`]: status 300 while
//!    the process runs, 200 with `insert_num`/`delete_num` when it is done,
//!    400 when the command was refused or the insert abandoned (a client
//!    that stopped answering, an object over the size limit), 503 when the
//!    Repo runs its maximum of inserts or one for an overlapping name, 404 for an unknown process and 403
//!    for a check whose parameter does not decode. Codes the store gives
//!    ([`crate::RepoError::status`]) pass through.
//!
//! [`Commands`] holds this state; the caller feeds it received packets and
//! the clock and carries out the [`Action`]s it returns.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use nexthop_wire::ndn::name::component_type;
use nexthop_wire::ndn::tlv::{self, Element, TlvReader};
use nexthop_wire::ndn::{tt as ndn_tt, Data, Interest, Name, NameComponent, NdnError};

/// TLV-TYPE numbers of ndn-python-repo 0.3's command messages.
pub mod tt {
    /// RepoCommandParameter/Response: first segment.
    pub const START_BLOCK_ID: u32 = 204;
    /// RepoCommandParameter/Response: last segment.
    pub const END_BLOCK_ID: u32 = 205;
    /// RepoCommandParameter/Response: the client's process id (bytes).
    pub const PROCESS_ID: u32 = 206;
    /// RepoCommandResponse: status code.
    pub const STATUS_CODE: u32 = 208;
    /// RepoCommandResponse: packets inserted.
    pub const INSERT_NUM: u32 = 209;
    /// RepoCommandResponse: packets deleted.
    pub const DELETE_NUM: u32 = 210;
    /// RepoCommandParameter: ForwardingHint (a nested Name).
    pub const FORWARDING_HINT: u32 = 211;
    /// RepoCommandParameter: RegisterPrefix (a nested Name).
    pub const REGISTER_PREFIX: u32 = 212;
    /// RepoCommandParameter: CheckPrefix (a nested Name).
    pub const CHECK_PREFIX: u32 = 213;
    /// Pub-sub NotifyAppParam: the message nonce.
    pub const NOTIFY_NONCE: u32 = 128;
}

/// Why a command message does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// The TLV structure itself is broken.
    #[error("TLV: {0}")]
    Tlv(#[from] NdnError),
    /// A field appears twice.
    #[error("TLV-TYPE {0} appears twice")]
    Duplicate(u32),
    /// A critical TLV-TYPE this message does not know.
    #[error("unknown critical TLV-TYPE {0}")]
    UnknownCritical(u32),
    /// A required field is absent.
    #[error("{0} is missing")]
    Missing(&'static str),
}

/// ndn-python-repo 0.3's RepoCommandParameter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommandParam {
    /// The object's name.
    pub name: Option<Name>,
    /// Where to reach the client (ForwardingHint's Name).
    pub forwarding_hint: Option<Name>,
    /// First segment.
    pub start_block_id: Option<u64>,
    /// Last segment.
    pub end_block_id: Option<u64>,
    /// The client's process id.
    pub process_id: Option<Vec<u8>>,
    /// RegisterPrefix's Name: the prefix the Repo registers with the
    /// forwarder for this insert (and unregisters on a delete naming it).
    pub register_prefix: Option<Name>,
    /// CheckPrefix's Name (kept for round trips; checks go to the Repo).
    pub check_prefix: Option<Name>,
}

/// ndn-python-repo 0.3's RepoCommandResponse.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommandResponse {
    /// The object's name.
    pub name: Option<Name>,
    /// First segment.
    pub start_block_id: Option<u64>,
    /// Last segment.
    pub end_block_id: Option<u64>,
    /// The process id.
    pub process_id: Option<Vec<u8>>,
    /// Status code (see the module docs).
    pub status_code: Option<u64>,
    /// Packets inserted.
    pub insert_num: Option<u64>,
    /// Packets deleted.
    pub delete_num: Option<u64>,
}

/// python-ndn pub-sub's NotifyAppParam (the notify Interest's parameters).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NotifyParam {
    /// Where the message Data is published.
    pub publisher_prefix: Name,
    /// The message's nonce (its last name component).
    pub nonce: Vec<u8>,
    /// Forwarding hint towards the publisher.
    pub forwarding_hint: Option<Name>,
}

/// Put `e` into `slot` unless it is already filled.
fn once<'a>(slot: &mut Option<Element<'a>>, e: Element<'a>) -> Result<(), CommandError> {
    if slot.is_some() {
        return Err(CommandError::Duplicate(e.typ));
    }
    *slot = Some(e);
    Ok(())
}

/// Read the elements of `buf` into `slots` by TLV-TYPE (`types[i]` goes to
/// `slots[i]`); unknown non-critical elements are skipped.
fn fields<'a, const N: usize>(
    buf: &'a [u8],
    types: [u32; N],
) -> Result<[Option<Element<'a>>; N], CommandError> {
    let mut slots = [None; N];
    let mut r = TlvReader::new(buf);
    while !r.is_empty() {
        let e = r.read()?;
        match types.iter().position(|t| *t == e.typ) {
            Some(i) => once(&mut slots[i], e)?,
            None if tlv::is_critical(e.typ) => return Err(CommandError::UnknownCritical(e.typ)),
            None => {}
        }
    }
    Ok(slots)
}

fn name_of(e: Option<Element<'_>>) -> Result<Option<Name>, CommandError> {
    e.map(|e| Name::from_value(e.value))
        .transpose()
        .map_err(CommandError::from)
}

/// A nested model holding one optional Name (ForwardingHint, RegisterPrefix,
/// CheckPrefix): python-ndn writes it empty when the Name is unset.
fn nested_name(e: Option<Element<'_>>) -> Result<Option<Name>, CommandError> {
    let Some(e) = e else { return Ok(None) };
    let [n] = fields(e.value, [ndn_tt::NAME])?;
    name_of(n)
}

fn nni_of(e: Option<Element<'_>>) -> Result<Option<u64>, CommandError> {
    e.map(|e| e.nni()).transpose().map_err(CommandError::from)
}

fn put_nested(out: &mut Vec<u8>, typ: u32, name: &Option<Name>) {
    if let Some(n) = name {
        tlv::write_tlv(out, typ, &n.to_wire());
    }
}

impl CommandParam {
    /// Decode a RepoCommandParameter (fields in any order, each at most
    /// once; unknown non-critical fields skipped).
    pub fn decode(buf: &[u8]) -> Result<Self, CommandError> {
        let [name, hint, start, end, pid, reg, check] = fields(
            buf,
            [
                ndn_tt::NAME,
                tt::FORWARDING_HINT,
                tt::START_BLOCK_ID,
                tt::END_BLOCK_ID,
                tt::PROCESS_ID,
                tt::REGISTER_PREFIX,
                tt::CHECK_PREFIX,
            ],
        )?;
        Ok(CommandParam {
            name: name_of(name)?,
            forwarding_hint: nested_name(hint)?,
            start_block_id: nni_of(start)?,
            end_block_id: nni_of(end)?,
            process_id: pid.map(|e| e.value.to_vec()),
            register_prefix: nested_name(reg)?,
            check_prefix: nested_name(check)?,
        })
    }

    /// Encode in ndn-python-repo's field order.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(n) = &self.name {
            n.encode(&mut out);
        }
        put_nested(&mut out, tt::FORWARDING_HINT, &self.forwarding_hint);
        if let Some(v) = self.start_block_id {
            tlv::write_nni_tlv(&mut out, tt::START_BLOCK_ID, v);
        }
        if let Some(v) = self.end_block_id {
            tlv::write_nni_tlv(&mut out, tt::END_BLOCK_ID, v);
        }
        if let Some(p) = &self.process_id {
            tlv::write_tlv(&mut out, tt::PROCESS_ID, p);
        }
        put_nested(&mut out, tt::REGISTER_PREFIX, &self.register_prefix);
        put_nested(&mut out, tt::CHECK_PREFIX, &self.check_prefix);
        out
    }
}

impl CommandResponse {
    /// Decode a RepoCommandResponse.
    pub fn decode(buf: &[u8]) -> Result<Self, CommandError> {
        let [name, start, end, pid, status, ins, del] = fields(
            buf,
            [
                ndn_tt::NAME,
                tt::START_BLOCK_ID,
                tt::END_BLOCK_ID,
                tt::PROCESS_ID,
                tt::STATUS_CODE,
                tt::INSERT_NUM,
                tt::DELETE_NUM,
            ],
        )?;
        Ok(CommandResponse {
            name: name_of(name)?,
            start_block_id: nni_of(start)?,
            end_block_id: nni_of(end)?,
            process_id: pid.map(|e| e.value.to_vec()),
            status_code: nni_of(status)?,
            insert_num: nni_of(ins)?,
            delete_num: nni_of(del)?,
        })
    }

    /// Encode in ndn-python-repo's field order.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(n) = &self.name {
            n.encode(&mut out);
        }
        for (typ, v) in [
            (tt::START_BLOCK_ID, self.start_block_id),
            (tt::END_BLOCK_ID, self.end_block_id),
        ] {
            if let Some(v) = v {
                tlv::write_nni_tlv(&mut out, typ, v);
            }
        }
        if let Some(p) = &self.process_id {
            tlv::write_tlv(&mut out, tt::PROCESS_ID, p);
        }
        for (typ, v) in [
            (tt::STATUS_CODE, self.status_code),
            (tt::INSERT_NUM, self.insert_num),
            (tt::DELETE_NUM, self.delete_num),
        ] {
            if let Some(v) = v {
                tlv::write_nni_tlv(&mut out, typ, v);
            }
        }
        out
    }
}

impl NotifyParam {
    /// Decode a NotifyAppParam; the publisher prefix and nonce are required.
    pub fn decode(buf: &[u8]) -> Result<Self, CommandError> {
        let [prefix, nonce, hint] =
            fields(buf, [ndn_tt::NAME, tt::NOTIFY_NONCE, tt::FORWARDING_HINT])?;
        Ok(NotifyParam {
            publisher_prefix: name_of(prefix)?.ok_or(CommandError::Missing("publisher prefix"))?,
            nonce: nonce
                .ok_or(CommandError::Missing("notify nonce"))?
                .value
                .to_vec(),
            forwarding_hint: nested_name(hint)?,
        })
    }

    /// Encode in python-ndn's field order.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.publisher_prefix.encode(&mut out);
        tlv::write_tlv(&mut out, tt::NOTIFY_NONCE, &self.nonce);
        put_nested(&mut out, tt::FORWARDING_HINT, &self.forwarding_hint);
        out
    }
}

/// Which command a process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// `insert`.
    Insert,
    /// `delete`.
    Delete,
}

impl Verb {
    /// The topic component (`insert`, `delete`).
    pub fn keyword(self) -> &'static [u8] {
        match self {
            Verb::Insert => b"insert",
            Verb::Delete => b"delete",
        }
    }

    /// The check component (`insert check`, `delete check`).
    pub fn check_keyword(self) -> &'static [u8] {
        match self {
            Verb::Insert => b"insert check",
            Verb::Delete => b"delete check",
        }
    }

    fn of(topic: &[u8]) -> Option<Verb> {
        [Verb::Insert, Verb::Delete]
            .into_iter()
            .find(|v| v.keyword() == topic)
    }

    fn of_check(c: &[u8]) -> Option<Verb> {
        [Verb::Insert, Verb::Delete]
            .into_iter()
            .find(|v| v.check_keyword() == c)
    }
}

/// Status codes of the 0.3 protocol that this Repo gives.
pub mod status {
    /// Done.
    pub const OK: u64 = 200;
    /// In progress.
    pub const IN_PROGRESS: u64 = 300;
    /// Refused (malformed, outside the served prefixes, too large) or
    /// abandoned (the client stopped answering).
    pub const REFUSED: u64 = 400;
    /// A check whose parameter does not decode.
    pub const BAD_CHECK: u64 = 403;
    /// No such process.
    pub const UNKNOWN: u64 = 404;
    /// Too many inserts running, or one running for an overlapping name.
    pub const BUSY: u64 = 503;
}

/// Segment Interests in flight per insert unless told otherwise: enough
/// that each wake-up of the Repo takes many segments (with 32 the fetch
/// was bound by wake-ups; docs/benchmarks.md, the Repo's writes).
pub const DEFAULT_WINDOW: usize = 128;

/// Limits and timing of [`Commands`].
#[derive(Debug, Clone)]
pub struct Config {
    /// Segment Interests in flight per insert.
    pub window: usize,
    /// Inserts running at once; more are refused with 503.
    pub max_inserts: usize,
    /// Largest object (sum of Data wire sizes); a larger insert is
    /// abandoned with 400.
    pub max_object_bytes: usize,
    /// Most segments one insert may name (END - START + 1).
    pub max_segments: u64,
    /// Message fetches (step 1 of the protocol) at once; more notify
    /// Interests are ignored until one ends.
    pub max_message_fetches: usize,
    /// Processes whose status is kept; the oldest finished one makes room.
    /// Also the most notify nonces remembered (each for `keep_status`);
    /// past it, notify Interests are ignored.
    pub max_processes: usize,
    /// InterestLifetime of every Interest the Repo sends.
    pub lifetime: Duration,
    /// Tries per Interest before the segment (and so the insert) or the
    /// message is given up.
    pub tries: u32,
    /// How long a finished process's status stays readable.
    pub keep_status: Duration,
    /// Prefixes inserts may register (RegisterPrefix) beyond those the
    /// Repo was started with; an insert that would register one more is
    /// refused with 400.
    pub max_registered: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            window: DEFAULT_WINDOW,
            max_inserts: 4,
            max_object_bytes: crate::DEFAULT_MAX_OBJECT_BYTES,
            max_segments: 1 << 20,
            max_message_fetches: 64,
            max_processes: 4096,
            lifetime: Duration::from_millis(1000),
            tries: 3,
            keep_status: Duration::from_secs(60),
            max_registered: 1024,
        }
    }
}

/// What the caller must do for [`Commands`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send this packet (an Interest or a Data, wire bytes) to the forwarder.
    Send(Vec<u8>),
    /// Store these Data packets (wire bytes, segment order) as one atomic
    /// object under `prefix`, then report with [`Commands::stored`].
    Store {
        /// The process id.
        process: Vec<u8>,
        /// The object's name.
        prefix: Name,
        /// Its packets.
        packets: Vec<Vec<u8>>,
    },
    /// Delete the segments `name/seg=start ..= end` up to the first one
    /// missing, then report with [`Commands::deleted`].
    Delete {
        /// The process id.
        process: Vec<u8>,
        /// The object's name.
        name: Name,
        /// First segment.
        start: u64,
        /// Last segment.
        end: u64,
    },
    /// Register this prefix with the forwarder (`rib/register`) and keep it
    /// in the store, so that Interests under it reach the Repo (an insert's
    /// RegisterPrefix, before its segments are fetched).
    Register(Name),
    /// Unregister this prefix (`rib/unregister`) and forget it in the store
    /// (a delete's RegisterPrefix naming a prefix registered by an insert).
    Unregister(Name),
}

/// Why an Interest is pending.
#[derive(Debug)]
enum Purpose {
    /// The command message announced by the notify Interest `notify`.
    Message { verb: Verb, notify: Name },
    /// Segment `seg` (or the single packet when `None`) of the insert
    /// `process`.
    Segment { process: Vec<u8>, seg: Option<u64> },
}

#[derive(Debug)]
struct Pending {
    purpose: Purpose,
    interest: Interest,
    tries_left: u32,
    deadline: Instant,
}

#[derive(Debug)]
struct Insert {
    name: Name,
    hint: Option<Name>,
    /// `None`: the single packet `name` (no block ids).
    start: Option<u64>,
    /// Last segment, once known (END, else FinalBlockId).
    last: Option<u64>,
    /// Next segment to ask for.
    next: u64,
    got: BTreeMap<u64, Vec<u8>>,
    bytes: usize,
    in_flight: usize,
}

#[derive(Debug)]
struct Process {
    response: CommandResponse,
    /// When a finished process's status is dropped (`None` while running).
    expires: Option<Instant>,
}

/// Counters of [`Commands`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Commands received whose message did not decode or lacked a name.
    pub malformed: u64,
    /// Inserts stored whole.
    pub inserted: u64,
    /// Inserts refused or abandoned.
    pub failed_inserts: u64,
    /// Delete commands carried out.
    pub deletes: u64,
    /// Data that answered no pending Interest.
    pub unsolicited: u64,
}

/// The Repo's command state: processes, inserts in progress, the
/// Interests it waits on. No I/O; see the module docs.
#[derive(Debug)]
pub struct Commands {
    repo: Name,
    /// Prefixes served: those the Repo was started with, then those
    /// registered by inserts ([`Commands::add_served`]).
    served: Vec<Name>,
    /// How many of `served` the Repo was started with (never unregistered).
    fixed: usize,
    cfg: Config,
    nonce: u64,
    pending: HashMap<Name, Pending>,
    messages: usize,
    inserts: HashMap<Vec<u8>, Insert>,
    processes: HashMap<(Verb, Vec<u8>), Process>,
    /// Notify nonces seen, with when to forget them (python-ndn pub-sub
    /// repeats a notify Interest with the same nonce).
    seen: HashMap<Vec<u8>, Instant>,
    counters: Counters,
}

fn generic(v: &[u8]) -> NameComponent {
    NameComponent::generic(v.to_vec())
}

fn with(prefix: &Name, c: &NameComponent) -> Name {
    let mut n = prefix.clone();
    n.push(c);
    n
}

impl Commands {
    /// The state of the Repo `repo`, which serves Data under `served` (an
    /// insert must fall under one of them); `seed` seeds its Interest
    /// nonces.
    pub fn new(repo: Name, served: Vec<Name>, cfg: Config, seed: u64) -> Self {
        Commands {
            repo,
            fixed: served.len(),
            served,
            cfg,
            nonce: seed,
            pending: HashMap::new(),
            messages: 0,
            inserts: HashMap::new(),
            processes: HashMap::new(),
            seen: HashMap::new(),
            counters: Counters::default(),
        }
    }

    /// Serve `prefix` too (one an insert registered before a restart, read
    /// back from the store); false when it was served already or lies in
    /// the command names.
    pub fn add_served(&mut self, prefix: Name) -> bool {
        if self.served.contains(&prefix) || self.in_command_space(&prefix) {
            return false;
        }
        self.served.push(prefix);
        true
    }

    /// The prefixes served (see [`Commands::add_served`]).
    pub fn served(&self) -> &[Name] {
        &self.served
    }

    /// A command's RegisterPrefix when it is usable: non-empty and not
    /// among the Repo's command names.
    fn register_prefix_of(&self, param: &CommandParam) -> Option<Name> {
        param
            .register_prefix
            .clone()
            .filter(|p| !p.is_empty() && !self.in_command_space(p))
    }

    /// Counters so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Inserts in progress.
    pub fn inserts_running(&self) -> usize {
        self.inserts.len()
    }

    fn next_nonce(&mut self) -> u32 {
        // splitmix64 over a seeded counter.
        self.nonce = self.nonce.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.nonce;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as u32
    }

    /// Whether `name` is a command name of this Repo (`R/insert...`,
    /// `R/delete...`, `R/insert check...`, `R/delete check...`).
    fn in_command_space(&self, name: &Name) -> bool {
        if !self.repo.is_prefix_of(name) {
            return false;
        }
        name.get(self.repo.len()).is_some_and(|c| {
            c.typ() == component_type::GENERIC
                && (Verb::of(c.value()).is_some() || Verb::of_check(c.value()).is_some())
        })
    }

    /// The earliest time [`Commands::poll`] has work.
    pub fn next_deadline(&self) -> Option<Instant> {
        let p = self.pending.values().map(|p| p.deadline).min();
        let s = self.processes.values().filter_map(|p| p.expires).min();
        let n = self.seen.values().copied().min();
        [p, s, n].into_iter().flatten().min()
    }

    /// Handle an Interest received from the forwarder: `None` when it is
    /// not a command Interest of this Repo (serve it from the store), else
    /// what to do (possibly nothing).
    pub fn on_interest(&mut self, i: &Interest, now: Instant) -> Option<Vec<Action>> {
        if !self.in_command_space(&i.name) {
            return None;
        }
        let at = self.repo.len();
        let first = i.name.get(at)?;
        if let Some(verb) = Verb::of_check(first.value()) {
            return Some(self.on_check(verb, i));
        }
        let verb = Verb::of(first.value())?;
        let is_notify = i
            .name
            .get(at + 1)
            .is_some_and(|c| c.typ() == component_type::GENERIC && c.value() == b"notify");
        if !is_notify || i.name.len() != at + 3 || !i.params_digest_ok() {
            return Some(Vec::new());
        }
        Some(self.on_notify(verb, i, now))
    }

    fn on_check(&mut self, verb: Verb, i: &Interest) -> Vec<Action> {
        let at = self.repo.len() + 1;
        let pid = i
            .name
            .get(at)
            .filter(|_| i.name.len() == at + 1)
            .and_then(|c| CommandParam::decode(c.value()).ok())
            .and_then(|p| p.process_id);
        let response = match pid {
            None => CommandResponse {
                status_code: Some(status::BAD_CHECK),
                ..CommandResponse::default()
            },
            Some(pid) => match self.processes.get(&(verb, pid)) {
                Some(p) => p.response.clone(),
                None => CommandResponse {
                    status_code: Some(status::UNKNOWN),
                    ..CommandResponse::default()
                },
            },
        };
        let mut d = Data::new(i.name.clone(), response.encode());
        d.meta_info.freshness_period_ms = Some(1000);
        d.sign_digest_sha256();
        vec![Action::Send(d.to_wire())]
    }

    fn on_notify(&mut self, verb: Verb, i: &Interest, now: Instant) -> Vec<Action> {
        let Some(p) = i
            .app_parameters
            .as_deref()
            .and_then(|a| NotifyParam::decode(a).ok())
        else {
            self.counters.malformed += 1;
            return Vec::new();
        };
        if self.seen.contains_key(&p.nonce) || self.messages >= self.cfg.max_message_fetches {
            return Vec::new();
        }
        // The nonces remembered are bounded like the process records.
        if self.seen.len() >= self.cfg.max_processes {
            self.seen.retain(|_, e| *e > now);
            if self.seen.len() >= self.cfg.max_processes {
                return Vec::new();
            }
        }
        self.seen
            .insert(p.nonce.clone(), now + self.cfg.keep_status);
        // P/msg/R/<verb>/<nonce>
        let mut msg = with(&p.publisher_prefix, &generic(b"msg"));
        for c in self.repo.components() {
            msg.push(&c.to_owned());
        }
        msg.push(&generic(verb.keyword()));
        msg.push(&generic(&p.nonce));
        let notify = i.name.clone();
        let purpose = Purpose::Message { verb, notify };
        let sent = self.express(msg, p.forwarding_hint, purpose, now);
        if sent.is_some() {
            self.messages += 1;
        }
        sent.into_iter().collect()
    }

    /// Send an Interest for `name` and remember why; `None` (nothing sent)
    /// when an Interest for that name is pending already.
    fn express(
        &mut self,
        name: Name,
        hint: Option<Name>,
        purpose: Purpose,
        now: Instant,
    ) -> Option<Action> {
        if self.pending.contains_key(&name) {
            return None;
        }
        let mut interest = Interest::new(name.clone());
        interest.forwarding_hint = hint.into_iter().collect();
        interest.lifetime_ms = Some(self.cfg.lifetime.as_millis() as u64);
        interest.nonce = Some(self.next_nonce());
        let wire = interest.to_wire();
        self.pending.insert(
            name,
            Pending {
                purpose,
                interest,
                tries_left: self.cfg.tries.saturating_sub(1),
                deadline: now + self.cfg.lifetime,
            },
        );
        Some(Action::Send(wire))
    }

    /// Handle a Data received from the forwarder (`wire` its bytes as
    /// received).
    pub fn on_data(&mut self, d: &Data, wire: &[u8], now: Instant) -> Vec<Action> {
        let Some(p) = self.pending.remove(&d.name) else {
            self.counters.unsolicited += 1;
            return Vec::new();
        };
        match p.purpose {
            Purpose::Message { verb, notify } => {
                self.messages = self.messages.saturating_sub(1);
                let msg = d.content.as_deref().unwrap_or_default();
                let mut out = self.on_message(verb, msg, now);
                // The acknowledgement: an empty Data for the notify Interest.
                let mut ack = Data::new(notify, Vec::new());
                ack.sign_digest_sha256();
                out.push(Action::Send(ack.to_wire()));
                out
            }
            Purpose::Segment { process, seg } => self.on_segment(process, seg, d, wire, now),
        }
    }

    fn set_status(&mut self, verb: Verb, pid: &[u8], code: u64, num: u64, now: Instant) {
        let done = code != status::IN_PROGRESS;
        let response = CommandResponse {
            process_id: Some(pid.to_vec()),
            status_code: Some(code),
            insert_num: (verb == Verb::Insert).then_some(num),
            delete_num: (verb == Verb::Delete).then_some(num),
            ..CommandResponse::default()
        };
        let expires = done.then(|| now + self.cfg.keep_status);
        self.processes
            .insert((verb, pid.to_vec()), Process { response, expires });
    }

    /// Room for one more process record: drop expired ones, then the
    /// finished one that expires first. False when every record belongs
    /// to a running process.
    fn make_room(&mut self, now: Instant) -> bool {
        if self.processes.len() < self.cfg.max_processes {
            return true;
        }
        self.processes
            .retain(|_, p| p.expires.is_none_or(|e| e > now));
        if self.processes.len() < self.cfg.max_processes {
            return true;
        }
        let oldest = self
            .processes
            .iter()
            .filter_map(|(k, p)| p.expires.map(|e| (e, k.clone())))
            .min_by_key(|(e, _)| *e);
        match oldest {
            Some((_, k)) => {
                self.processes.remove(&k);
                true
            }
            None => false,
        }
    }

    fn on_message(&mut self, verb: Verb, msg: &[u8], now: Instant) -> Vec<Action> {
        let Ok(param) = CommandParam::decode(msg) else {
            self.counters.malformed += 1;
            return Vec::new();
        };
        let Some(pid) = param.process_id.clone() else {
            self.counters.malformed += 1;
            return Vec::new();
        };
        let key = (verb, pid.clone());
        if self.processes.contains_key(&key) || !self.make_room(now) {
            // A repeated process id, or no room: the first one stands.
            return Vec::new();
        }
        let Some(name) = param.name.clone() else {
            self.counters.malformed += 1;
            self.set_status(verb, &pid, status::REFUSED, 0, now);
            return Vec::new();
        };
        match verb {
            Verb::Delete => {
                let start = param.start_block_id.unwrap_or(0);
                let end = param.end_block_id.unwrap_or(u64::MAX);
                if end < start {
                    self.counters.malformed += 1;
                    self.set_status(verb, &pid, status::REFUSED, 0, now);
                    return Vec::new();
                }
                self.set_status(verb, &pid, status::IN_PROGRESS, 0, now);
                let mut out = Vec::new();
                // A prefix an insert registered is unregistered when a
                // delete names it (ndn-python-repo's semantics); the
                // prefixes the Repo was started with stay.
                if let Some(reg) = self.register_prefix_of(&param) {
                    if let Some(at) = self.served.iter().position(|p| *p == reg) {
                        if at >= self.fixed {
                            self.served.remove(at);
                            out.push(Action::Unregister(reg));
                        }
                    }
                }
                out.push(Action::Delete {
                    process: pid,
                    name,
                    start,
                    end,
                });
                out
            }
            Verb::Insert => self.start_insert(pid, name, &param, now),
        }
    }

    fn start_insert(
        &mut self,
        pid: Vec<u8>,
        name: Name,
        param: &CommandParam,
        now: Instant,
    ) -> Vec<Action> {
        let (start, end) = match (param.start_block_id, param.end_block_id) {
            (None, None) => (None, None),
            (s, e) => (Some(s.unwrap_or(0)), e),
        };
        let too_many = match (start, end) {
            (Some(s), Some(e)) => e < s || e - s >= self.cfg.max_segments,
            _ => false,
        };
        // The name must fall under a served prefix or under the command's
        // RegisterPrefix, which is then registered.
        let reg = self.register_prefix_of(param);
        let served = self.served.iter().any(|p| p.is_prefix_of(&name))
            || reg.as_ref().is_some_and(|r| r.is_prefix_of(&name));
        let no_room = reg.as_ref().is_some_and(|r| {
            !self.served.contains(r) && self.served.len() - self.fixed >= self.cfg.max_registered
        });
        if too_many || !served || no_room || self.in_command_space(&name) || name.is_empty() {
            self.counters.failed_inserts += 1;
            self.set_status(Verb::Insert, &pid, status::REFUSED, 0, now);
            return Vec::new();
        }
        let overlaps = self
            .inserts
            .values()
            .any(|o| o.name.is_prefix_of(&name) || name.is_prefix_of(&o.name));
        if self.inserts.len() >= self.cfg.max_inserts || overlaps {
            self.counters.failed_inserts += 1;
            self.set_status(Verb::Insert, &pid, status::BUSY, 0, now);
            return Vec::new();
        }
        self.set_status(Verb::Insert, &pid, status::IN_PROGRESS, 0, now);
        let mut out = Vec::new();
        if let Some(reg) = reg {
            if self.add_served(reg.clone()) {
                out.push(Action::Register(reg));
            }
        }
        let ins = Insert {
            name,
            hint: param.forwarding_hint.clone(),
            start,
            last: if start.is_none() { Some(0) } else { end },
            next: start.unwrap_or(0),
            got: BTreeMap::new(),
            bytes: 0,
            in_flight: 0,
        };
        self.inserts.insert(pid.clone(), ins);
        out.extend(self.fill_window(&pid, now));
        out
    }

    /// Ask for more segments of insert `pid`, up to the window.
    fn fill_window(&mut self, pid: &[u8], now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        loop {
            let Some(ins) = self.inserts.get_mut(pid) else {
                return out;
            };
            // Until the last segment is known (END, else the first
            // FinalBlockId), one Interest at a time.
            let window = if ins.last.is_some() {
                self.cfg.window
            } else {
                1
            };
            if ins.in_flight >= window || ins.last.is_some_and(|l| ins.next > l) {
                return out;
            }
            let (name, seg) = match ins.start {
                None => (ins.name.clone(), None),
                Some(_) => (
                    with(&ins.name, &NameComponent::segment(ins.next)),
                    Some(ins.next),
                ),
            };
            ins.next += 1;
            ins.in_flight += 1;
            let hint = ins.hint.clone();
            let purpose = Purpose::Segment {
                process: pid.to_vec(),
                seg,
            };
            match self.express(name, hint, purpose, now) {
                Some(a) => out.push(a),
                None => {
                    // Another process waits for the same name.
                    out.extend(self.abandon(pid, now));
                    return out;
                }
            }
        }
    }

    fn on_segment(
        &mut self,
        pid: Vec<u8>,
        seg: Option<u64>,
        d: &Data,
        wire: &[u8],
        now: Instant,
    ) -> Vec<Action> {
        let max = self.cfg.max_object_bytes;
        let Some(ins) = self.inserts.get_mut(&pid) else {
            return Vec::new();
        };
        ins.in_flight = ins.in_flight.saturating_sub(1);
        // The pending entry was keyed by the exact name asked for, so the
        // Data is under the object's name; check it anyway.
        if !ins.name.is_prefix_of(&d.name) {
            return self.abandon(&pid, now);
        }
        ins.bytes = ins.bytes.saturating_add(wire.len());
        if ins.bytes > max {
            return self.abandon(&pid, now);
        }
        let seg = seg.unwrap_or(0);
        if ins.last.is_none() {
            ins.last = d
                .meta_info
                .final_block_id
                .as_ref()
                .filter(|c| c.typ() == component_type::SEGMENT)
                .and_then(|c| tlv::read_nni(c.value()).ok());
            if let Some(l) = ins.last {
                let first = ins.start.unwrap_or(0);
                if l < first || l - first >= self.cfg.max_segments {
                    return self.abandon(&pid, now);
                }
            }
        }
        ins.got.insert(seg, wire.to_vec());
        let mut out = self.fill_window(&pid, now);
        out.extend(self.maybe_complete(&pid));
        out
    }

    /// Hand the object to the store when every segment is in.
    fn maybe_complete(&mut self, pid: &[u8]) -> Vec<Action> {
        let Some(ins) = self.inserts.get(pid) else {
            return Vec::new();
        };
        let first = ins.start.unwrap_or(0);
        let complete = ins.in_flight == 0
            && ins
                .last
                .is_some_and(|l| ins.got.len() as u64 == l - first + 1);
        if !complete {
            return Vec::new();
        }
        let Some(ins) = self.inserts.remove(pid) else {
            return Vec::new();
        };
        vec![Action::Store {
            process: pid.to_vec(),
            prefix: ins.name,
            packets: ins.got.into_values().collect(),
        }]
    }

    /// Give up insert `pid`: status 400, nothing stored, its Interests
    /// forgotten.
    fn abandon(&mut self, pid: &[u8], now: Instant) -> Vec<Action> {
        self.inserts.remove(pid);
        self.pending.retain(
            |_, p| !matches!(&p.purpose, Purpose::Segment { process, .. } if process == pid),
        );
        self.counters.failed_inserts += 1;
        self.set_status(Verb::Insert, pid, status::REFUSED, 0, now);
        Vec::new()
    }

    /// The outcome of an [`Action::Store`]: packets stored, or a status code.
    pub fn stored(&mut self, pid: &[u8], result: Result<usize, u64>, now: Instant) {
        match result {
            Ok(n) => {
                self.counters.inserted += 1;
                self.set_status(Verb::Insert, pid, status::OK, n as u64, now);
            }
            Err(code) => {
                self.counters.failed_inserts += 1;
                self.set_status(Verb::Insert, pid, code, 0, now);
            }
        }
    }

    /// The outcome of an [`Action::Delete`]: packets deleted, or a status code.
    pub fn deleted(&mut self, pid: &[u8], result: Result<usize, u64>, now: Instant) {
        self.counters.deletes += 1;
        match result {
            Ok(n) => self.set_status(Verb::Delete, pid, status::OK, n as u64, now),
            Err(code) => self.set_status(Verb::Delete, pid, code, 0, now),
        }
    }

    /// Retransmit or give up the Interests whose lifetime ran out, and
    /// forget expired statuses and nonces.
    pub fn poll(&mut self, now: Instant) -> Vec<Action> {
        self.processes
            .retain(|_, p| p.expires.is_none_or(|e| e > now));
        self.seen.retain(|_, e| *e > now);
        let due: Vec<Name> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(n, _)| n.clone())
            .collect();
        let mut out = Vec::new();
        for name in due {
            let Some(mut p) = self.pending.remove(&name) else {
                continue;
            };
            if p.tries_left > 0 {
                p.tries_left -= 1;
                p.deadline = now + self.cfg.lifetime;
                p.interest.nonce = Some(self.next_nonce());
                out.push(Action::Send(p.interest.to_wire()));
                self.pending.insert(name, p);
                continue;
            }
            match p.purpose {
                Purpose::Message { .. } => self.messages = self.messages.saturating_sub(1),
                Purpose::Segment { process, seg } => {
                    out.extend(self.segment_lost(&process, seg, now))
                }
            }
        }
        out
    }

    /// A segment that could not be fetched: with a known last segment the
    /// insert is abandoned; without one the object ends before it (as in
    /// ndn-python-repo), and is abandoned if that leaves it empty.
    fn segment_lost(&mut self, pid: &[u8], seg: Option<u64>, now: Instant) -> Vec<Action> {
        let Some(ins) = self.inserts.get_mut(pid) else {
            return Vec::new();
        };
        ins.in_flight = ins.in_flight.saturating_sub(1);
        let first = ins.start.unwrap_or(0);
        match (ins.last, seg) {
            (None, Some(s)) if s > first => {
                ins.last = Some(s - 1);
                ins.got.retain(|k, _| *k < s);
                let name = ins.name.clone();
                let before = self.pending.len();
                self.pending.retain(|n, p| {
                    !(matches!(&p.purpose, Purpose::Segment { process, seg: Some(k) } if process == pid && *k >= s)
                        && name.is_prefix_of(n))
                });
                let dropped = before - self.pending.len();
                if let Some(ins) = self.inserts.get_mut(pid) {
                    ins.in_flight = ins.in_flight.saturating_sub(dropped);
                }
                self.maybe_complete(pid)
            }
            _ => self.abandon(pid, now),
        }
    }
}

#[cfg(test)]
mod tests;
