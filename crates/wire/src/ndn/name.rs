//! Names and name components, with cached component offsets and per-prefix
//! hashes.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use super::error::NdnError;
use super::tlv::{self, TlvReader};
use super::tt;

/// TLV-TYPE numbers of name components (NDN packet format v0.3 and the
/// naming conventions rev. 3).
pub mod component_type {
    /// `sha256digest=`: SHA-256 of a whole Data packet, 32 bytes.
    pub const IMPLICIT_SHA256_DIGEST: u16 = 1;
    /// `params-sha256=`: SHA-256 of an Interest's parameters, 32 bytes.
    pub const PARAMETERS_SHA256_DIGEST: u16 = 2;
    /// A generic component (printed without a type prefix).
    pub const GENERIC: u16 = 8;
    /// A keyword component (`32=`).
    pub const KEYWORD: u16 = 32;
    /// `seg=`: segment number (NonNegativeInteger).
    pub const SEGMENT: u16 = 50;
    /// `off=`: byte offset (NonNegativeInteger).
    pub const BYTE_OFFSET: u16 = 52;
    /// `v=`: version (NonNegativeInteger).
    pub const VERSION: u16 = 54;
    /// `t=`: timestamp in microseconds since the Unix epoch (NonNegativeInteger).
    pub const TIMESTAMP: u16 = 56;
    /// `seq=`: sequence number (NonNegativeInteger).
    pub const SEQUENCE_NUM: u16 = 58;
}
use component_type as ct;

/// Seed of the prefix hashes a [`Name`] caches ([`Name::prefix_hash`]):
/// a per-process secret, drawn from the operating system's randomness (the
/// keys of `std`'s `RandomState`) the first time it is needed and fixed
/// for the life of the process.
///
/// The chain is XXH3, fast but not collision resistant under a *known*
/// seed: whoever knows the seed can construct any number of names with
/// one 64-bit hash (see nexthop-ndn's test
/// `names_colliding_under_a_known_seed_differ_under_the_secret_one`), and
/// tables keyed on these hashes (a forwarder's FIB, PIT and Content Store)
/// would chain them all together. With a secret seed the hash of a name is
/// unknown outside the process, so chosen names cannot be aimed at one
/// chain.
#[inline]
pub fn prefix_hash_seed() -> u64 {
    process_seed().seed
}

struct ProcessSeed {
    seed: u64,
    /// `empty_prefix_hash(seed)`, the start of every cached chain.
    empty: u64,
}

fn process_seed() -> &'static ProcessSeed {
    use std::hash::{BuildHasher, Hasher};
    static SEED: std::sync::OnceLock<ProcessSeed> = std::sync::OnceLock::new();
    SEED.get_or_init(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write(b"nexthop ndn name prefix hash seed");
        let seed = h.finish();
        ProcessSeed {
            seed,
            empty: empty_prefix_hash(seed),
        }
    })
}

/// The start of the cached chain: [`empty_prefix_hash`] of
/// [`prefix_hash_seed`].
#[inline]
fn cached_empty_hash() -> u64 {
    process_seed().empty
}

/// The hash of the empty prefix under `seed`: the start of the chain that
/// [`extend_prefix_hash`] continues.
#[inline]
pub fn empty_prefix_hash(seed: u64) -> u64 {
    nexthop_hash::hash64(&[], seed)
}

/// The hash of a prefix one component longer: `h` is the hash of the
/// shorter prefix, `component_tlv` the next component's whole TLV (type,
/// length and value, as [`ComponentRef::tlv`] gives it).
///
/// Prefix hashes are a chain, `h(0) = empty_prefix_hash(seed)`,
/// `h(i+1) = XXH3-64(component_i, seed = h(i))`, so hashing every prefix of
/// a name reads each byte once. A caller that stores names in its own form
/// can recompute identical hashes with these two functions.
#[inline]
pub fn extend_prefix_hash(h: u64, component_tlv: &[u8]) -> u64 {
    nexthop_hash::hash64(component_tlv, h)
}

/// Check that `t` is a valid component TLV-TYPE (1..=65535) and that digest
/// components hold 32 bytes.
fn check_component(typ: u32, value_len: usize) -> Result<u16, NdnError> {
    let Ok(t) = u16::try_from(typ) else {
        return Err(NdnError::Malformed("name component TLV-TYPE above 65535"));
    };
    if (t == ct::IMPLICIT_SHA256_DIGEST || t == ct::PARAMETERS_SHA256_DIGEST) && value_len != 32 {
        return Err(NdnError::Malformed("digest name component is not 32 bytes"));
    }
    Ok(t)
}

/// A borrowed name component.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ComponentRef<'a> {
    typ: u16,
    value: &'a [u8],
    tlv: &'a [u8],
}

impl<'a> ComponentRef<'a> {
    /// TLV-TYPE (see [`component_type`]).
    #[inline]
    pub fn typ(&self) -> u16 {
        self.typ
    }
    /// TLV-VALUE.
    #[inline]
    pub fn value(&self) -> &'a [u8] {
        self.value
    }
    /// The whole component TLV.
    #[inline]
    pub fn tlv(&self) -> &'a [u8] {
        self.tlv
    }
    /// The value as a NonNegativeInteger, whatever the type.
    #[inline]
    pub fn as_number(&self) -> Option<u64> {
        tlv::read_nni(self.value).ok()
    }
    /// The number of a component of type `typ`, if it is one.
    #[inline]
    fn number_of(&self, typ: u16) -> Option<u64> {
        (self.typ == typ).then(|| self.as_number()).flatten()
    }
    /// The segment number, if this is a segment component.
    pub fn as_segment(&self) -> Option<u64> {
        self.number_of(ct::SEGMENT)
    }
    /// The byte offset, if this is a byte-offset component.
    pub fn as_byte_offset(&self) -> Option<u64> {
        self.number_of(ct::BYTE_OFFSET)
    }
    /// The version, if this is a version component.
    pub fn as_version(&self) -> Option<u64> {
        self.number_of(ct::VERSION)
    }
    /// The timestamp (µs since the epoch), if this is a timestamp component.
    pub fn as_timestamp(&self) -> Option<u64> {
        self.number_of(ct::TIMESTAMP)
    }
    /// The sequence number, if this is a sequence-number component.
    pub fn as_sequence_num(&self) -> Option<u64> {
        self.number_of(ct::SEQUENCE_NUM)
    }
    /// An owned copy.
    pub fn to_owned(&self) -> NameComponent {
        NameComponent {
            typ: self.typ,
            value: self.value.to_vec(),
        }
    }
}

impl Ord for ComponentRef<'_> {
    /// The spec's canonical order: TLV-TYPE, then length, then bytes.
    fn cmp(&self, other: &Self) -> Ordering {
        self.typ
            .cmp(&other.typ)
            .then(self.value.len().cmp(&other.value.len()))
            .then_with(|| self.value.cmp(other.value))
    }
}
impl PartialOrd for ComponentRef<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for ComponentRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// An owned name component.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct NameComponent {
    typ: u16,
    value: Vec<u8>,
}

impl NameComponent {
    /// A component of type `typ` (1..=65535; digest types need 32 bytes).
    pub fn new(typ: u16, value: impl Into<Vec<u8>>) -> Result<Self, NdnError> {
        let value = value.into();
        check_component(typ as u32, value.len())?;
        if typ == 0 {
            return Err(NdnError::Malformed("name component TLV-TYPE 0"));
        }
        Ok(NameComponent { typ, value })
    }
    /// A generic component.
    pub fn generic(value: impl Into<Vec<u8>>) -> Self {
        NameComponent {
            typ: ct::GENERIC,
            value: value.into(),
        }
    }
    /// A number component of type `typ` (shortest NonNegativeInteger).
    pub fn number(typ: u16, n: u64) -> Self {
        let mut value = Vec::with_capacity(8);
        tlv::write_nni(&mut value, n);
        NameComponent { typ, value }
    }
    /// `seg=n`.
    pub fn segment(n: u64) -> Self {
        Self::number(ct::SEGMENT, n)
    }
    /// `off=n`.
    pub fn byte_offset(n: u64) -> Self {
        Self::number(ct::BYTE_OFFSET, n)
    }
    /// `v=n`.
    pub fn version(n: u64) -> Self {
        Self::number(ct::VERSION, n)
    }
    /// `t=n` (µs since the epoch).
    pub fn timestamp(n: u64) -> Self {
        Self::number(ct::TIMESTAMP, n)
    }
    /// `seq=n`.
    pub fn sequence_num(n: u64) -> Self {
        Self::number(ct::SEQUENCE_NUM, n)
    }
    /// `sha256digest=`.
    pub fn implicit_digest(d: [u8; 32]) -> Self {
        NameComponent {
            typ: ct::IMPLICIT_SHA256_DIGEST,
            value: d.to_vec(),
        }
    }
    /// `params-sha256=`.
    pub fn params_digest(d: [u8; 32]) -> Self {
        NameComponent {
            typ: ct::PARAMETERS_SHA256_DIGEST,
            value: d.to_vec(),
        }
    }
    /// TLV-TYPE.
    pub fn typ(&self) -> u16 {
        self.typ
    }
    /// TLV-VALUE.
    pub fn value(&self) -> &[u8] {
        &self.value
    }
    /// Append the whole component TLV.
    pub fn encode(&self, out: &mut Vec<u8>) {
        tlv::write_tlv(out, self.typ as u32, &self.value);
    }
    /// Bytes the component TLV takes.
    pub fn encoded_len(&self) -> usize {
        tlv::tlv_len(self.typ as u32, self.value.len())
    }
}

impl fmt::Debug for NameComponent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        super::uri::write_component(f, self.typ, &self.value)
    }
}
impl fmt::Display for NameComponent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        super::uri::write_component(f, self.typ, &self.value)
    }
}
impl fmt::Display for ComponentRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        super::uri::write_component(f, self.typ, self.value)
    }
}

/// Iterator over the components of a validated name TLV-VALUE.
#[derive(Debug, Clone)]
pub struct Components<'a> {
    reader: TlvReader<'a>,
}

impl<'a> Iterator for Components<'a> {
    type Item = ComponentRef<'a>;
    #[inline]
    fn next(&mut self) -> Option<ComponentRef<'a>> {
        // The bytes were validated when the name was built, so `read` and the
        // type conversion cannot fail; stop rather than panic if they did.
        let e = self.reader.read().ok()?;
        Some(ComponentRef {
            typ: u16::try_from(e.typ).ok()?,
            value: e.value,
            tlv: e.tlv,
        })
    }
}

/// Iterator over the prefix hashes of a name under some seed, from the
/// empty prefix to the whole name (`len() + 1` values).
#[derive(Debug, Clone)]
pub struct PrefixHashes<'a> {
    next: Option<u64>,
    components: Components<'a>,
}

impl Iterator for PrefixHashes<'_> {
    type Item = u64;
    #[inline]
    fn next(&mut self) -> Option<u64> {
        let h = self.next?;
        self.next = self.components.next().map(|c| extend_prefix_hash(h, c.tlv));
        Some(h)
    }
}

/// Validate a name TLV-VALUE and return its component count;
/// `on_component` gets each component's end offset and TLV-TYPE.
#[inline]
fn validate_value(
    value: &[u8],
    base: usize,
    mut on_component: impl FnMut(usize, u16),
) -> Result<usize, NdnError> {
    if value.len() > u32::MAX as usize {
        return Err(NdnError::Malformed("Name longer than 2^32 - 1 bytes"));
    }
    let mut r = TlvReader::with_base(value, base);
    let mut n = 0;
    while !r.is_empty() {
        let e = r.read()?;
        let t = check_component(e.typ, e.value.len())?;
        on_component(e.at - base + e.tlv.len(), t);
        n += 1;
    }
    Ok(n)
}

/// Validate a Name TLV-VALUE and write the end offset of every component
/// into `ends` (cleared first): `value[..ends[i]]` is the prefix of `i + 1`
/// components. The borrowed counterpart of [`Name`]'s offset cache: with a
/// reused `ends` buffer a receiver parses names without allocating.
/// Returns the component count.
pub fn component_ends_into(value: &[u8], ends: &mut Vec<u32>) -> Result<usize, NdnError> {
    ends.clear();
    let r = validate_value(value, 0, |end, _| ends.push(end as u32));
    if r.is_err() {
        ends.clear();
    }
    r
}

/// A borrowed, validated view of a name: the TLV-VALUE of a Name element.
///
/// Cheap to make from packet bytes (one validating pass, no allocation);
/// [`NameRef::to_name`] makes the owned [`Name`] with its offset and hash
/// caches.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NameRef<'a> {
    value: &'a [u8],
    len: usize,
}

impl<'a> NameRef<'a> {
    /// View a Name TLV-VALUE (the concatenated component TLVs).
    pub fn from_value(value: &'a [u8]) -> Result<Self, NdnError> {
        Self::from_value_with(value, |_| {})
    }
    /// [`Self::from_value`], telling `on_type` every component's TLV-TYPE
    /// (what a packet decoder checks without a second walk).
    #[inline]
    pub(crate) fn from_value_with(
        value: &'a [u8],
        mut on_type: impl FnMut(u16),
    ) -> Result<Self, NdnError> {
        let len = validate_value(value, 0, |_, t| on_type(t))?;
        Ok(NameRef { value, len })
    }
    /// View a whole Name element (TLV-TYPE 7); the buffer must hold exactly it.
    pub fn from_wire(wire: &'a [u8]) -> Result<Self, NdnError> {
        let e = tlv::read_single(wire, tt::NAME)?;
        let len = validate_value(e.value, e.value_at, |_, _| {})?;
        Ok(NameRef {
            value: e.value,
            len,
        })
    }
    /// The concatenated component TLVs.
    #[inline]
    pub fn value(&self) -> &'a [u8] {
        self.value
    }
    /// Number of components.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the name has no components.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The components in order.
    #[inline]
    pub fn components(&self) -> Components<'a> {
        Components {
            reader: TlvReader::new(self.value),
        }
    }
    /// The prefix hashes under `seed`, for 0, 1, ..., `len()` components.
    #[inline]
    pub fn prefix_hashes_with(&self, seed: u64) -> PrefixHashes<'a> {
        PrefixHashes {
            next: Some(empty_prefix_hash(seed)),
            components: self.components(),
        }
    }
    /// An owned [`Name`] with its caches.
    pub fn to_name(&self) -> Name {
        let mut ends = Vec::with_capacity(self.len);
        let mut hashes = Vec::with_capacity(self.len + 1);
        let mut h = cached_empty_hash();
        hashes.push(h);
        let mut end = 0usize;
        for c in self.components() {
            end += c.tlv.len();
            ends.push(end as u32);
            h = extend_prefix_hash(h, c.tlv);
            hashes.push(h);
        }
        Name {
            value: self.value.to_vec(),
            ends,
            hashes,
        }
    }
}

impl fmt::Debug for NameRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}
impl fmt::Display for NameRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        super::uri::write_name(f, self.components())
    }
}

/// An owned name with cached component offsets and prefix hashes.
///
/// * `value`: the Name's TLV-VALUE (component TLVs back to back);
/// * `ends[i]`: end offset in `value` of component `i`, so the bytes of the
///   `i`-component prefix are `value[..ends[i-1]]`, found in O(1);
/// * `hashes[i]`: hash of the `i`-component prefix under
///   [`prefix_hash_seed`] (`hashes[0]` is the empty prefix), computed in one
///   pass when the name is built, so a FIB never rehashes the name.
///
/// Equality, hashing and ordering look at the components only
/// (ordering is the spec's canonical order).
#[derive(Clone)]
pub struct Name {
    value: Vec<u8>,
    ends: Vec<u32>,
    hashes: Vec<u64>,
}

impl Default for Name {
    fn default() -> Self {
        Self::new()
    }
}

impl Name {
    /// The empty name `/`.
    pub fn new() -> Self {
        Name {
            value: Vec::new(),
            ends: Vec::new(),
            hashes: vec![cached_empty_hash()],
        }
    }

    /// Parse an NDN URI (see [`crate::ndn`] for the rules).
    pub fn from_uri(uri: &str) -> Result<Self, super::ParseNameError> {
        super::uri::parse_name(uri)
    }

    /// Build from a Name TLV-VALUE.
    pub fn from_value(value: &[u8]) -> Result<Self, NdnError> {
        Ok(NameRef::from_value(value)?.to_name())
    }

    /// Make this name a copy of `name`, reusing its buffers: no
    /// allocation when they already hold as many bytes and components
    /// (the decode path of a receiver that keeps one scratch name).
    pub fn assign(&mut self, name: NameRef<'_>) {
        self.value.clear();
        self.value.extend_from_slice(name.value());
        self.ends.clear();
        self.hashes.clear();
        let mut h = cached_empty_hash();
        self.hashes.push(h);
        let mut end = 0usize;
        for c in name.components() {
            end += c.tlv.len();
            self.ends.push(end as u32);
            h = extend_prefix_hash(h, c.tlv);
            self.hashes.push(h);
        }
    }

    /// Build from a whole Name element (TLV-TYPE 7), which must fill `wire`.
    pub fn from_wire(wire: &[u8]) -> Result<Self, NdnError> {
        Ok(NameRef::from_wire(wire)?.to_name())
    }

    /// Build from components.
    pub fn from_components<I, C>(components: I) -> Self
    where
        I: IntoIterator<Item = C>,
        C: std::borrow::Borrow<NameComponent>,
    {
        let mut n = Name::new();
        for c in components {
            n.push(c.borrow());
        }
        n
    }

    /// Append a component, extending the caches.
    pub fn push(&mut self, c: &NameComponent) {
        let start = self.value.len();
        c.encode(&mut self.value);
        self.push_cached(start);
    }

    fn push_cached(&mut self, start: usize) {
        let end = self.value.len();
        self.ends.push(end as u32);
        let prev = self
            .hashes
            .last()
            .copied()
            .unwrap_or_else(cached_empty_hash);
        self.hashes.push(extend_prefix_hash(
            prev,
            self.value.get(start..end).unwrap_or(&[]),
        ));
    }

    /// Append a component given as TLV-TYPE and TLV-VALUE.
    pub fn push_typed(&mut self, typ: u16, value: &[u8]) -> Result<(), NdnError> {
        check_component(typ as u32, value.len())?;
        if typ == 0 {
            return Err(NdnError::Malformed("name component TLV-TYPE 0"));
        }
        let start = self.value.len();
        tlv::write_tlv(&mut self.value, typ as u32, value);
        self.push_cached(start);
        Ok(())
    }

    /// Number of components.
    #[inline]
    pub fn len(&self) -> usize {
        self.ends.len()
    }
    /// Whether this is the empty name `/`.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
    /// The Name TLV-VALUE (component TLVs back to back).
    #[inline]
    pub fn value(&self) -> &[u8] {
        &self.value
    }
    /// End offsets of the components in [`Name::value`].
    #[inline]
    pub fn component_ends(&self) -> &[u32] {
        &self.ends
    }
    /// A borrowed view.
    #[inline]
    pub fn as_name_ref(&self) -> NameRef<'_> {
        NameRef {
            value: &self.value,
            len: self.ends.len(),
        }
    }
    /// Start offset of component `i` (or the end of the name for `i == len`).
    #[inline]
    fn start(&self, i: usize) -> usize {
        if i == 0 {
            0
        } else {
            self.ends
                .get(i - 1)
                .map_or(self.value.len(), |&e| e as usize)
        }
    }
    /// Component `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<ComponentRef<'_>> {
        let end = *self.ends.get(i)? as usize;
        let tlv = self.value.get(self.start(i)..end)?;
        Components {
            reader: TlvReader::new(tlv),
        }
        .next()
    }
    /// The last component.
    pub fn last(&self) -> Option<ComponentRef<'_>> {
        self.get(self.len().checked_sub(1)?)
    }
    /// The components in order.
    #[inline]
    pub fn components(&self) -> Components<'_> {
        self.as_name_ref().components()
    }
    /// The TLV-VALUE bytes of the prefix of `i` components (`i` is clamped
    /// to `len()`).
    #[inline]
    pub fn prefix_value(&self, i: usize) -> &[u8] {
        let end = self.start(i.min(self.len()));
        self.value.get(..end).unwrap_or(&[])
    }
    /// The hash of the `i`-component prefix under [`prefix_hash_seed`],
    /// from the cache (`i` is clamped to `len()`).
    #[inline]
    pub fn prefix_hash(&self, i: usize) -> u64 {
        let i = i.min(self.len());
        self.hashes.get(i).copied().unwrap_or_default()
    }
    /// All cached prefix hashes: `len() + 1` values, index = component count.
    #[inline]
    pub fn prefix_hashes(&self) -> &[u64] {
        &self.hashes
    }
    /// The prefix hashes under a caller-chosen seed or key (computed now, in
    /// one pass; equal to [`Name::prefix_hashes`] for [`prefix_hash_seed`]).
    #[inline]
    pub fn prefix_hashes_with(&self, seed: u64) -> PrefixHashes<'_> {
        self.as_name_ref().prefix_hashes_with(seed)
    }
    /// The hash of the `i`-component prefix under `seed` (`i` clamped).
    pub fn prefix_hash_with(&self, i: usize, seed: u64) -> u64 {
        let i = i.min(self.len());
        let mut h = empty_prefix_hash(seed);
        for c in self.components().take(i) {
            h = extend_prefix_hash(h, c.tlv);
        }
        h
    }
    /// An owned copy of the first `i` components (clamped), caches included.
    pub fn prefix(&self, i: usize) -> Name {
        let i = i.min(self.len());
        Name {
            value: self.prefix_value(i).to_vec(),
            ends: self.ends.get(..i).unwrap_or(&[]).to_vec(),
            hashes: self.hashes.get(..=i).unwrap_or(&[]).to_vec(),
        }
    }
    /// Whether `self` is a prefix of (or equal to) `other`.
    pub fn is_prefix_of(&self, other: &Name) -> bool {
        self.len() <= other.len() && other.prefix_value(self.len()) == self.value.as_slice()
    }
    /// Bytes the whole Name element takes.
    #[inline]
    pub fn encoded_len(&self) -> usize {
        tlv::tlv_len(tt::NAME, self.value.len())
    }
    /// Append the whole Name element (TLV-TYPE 7).
    pub fn encode(&self, out: &mut Vec<u8>) {
        tlv::write_tlv(out, tt::NAME, &self.value);
    }
    /// The whole Name element.
    pub fn to_wire(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.encoded_len());
        self.encode(&mut v);
        v
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}
impl Eq for Name {}
impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.value.hash(state);
    }
}
impl Ord for Name {
    fn cmp(&self, other: &Self) -> Ordering {
        self.components().cmp(other.components())
    }
}
impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Name({self})")
    }
}
impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        super::uri::write_name(f, self.components())
    }
}
impl std::str::FromStr for Name {
    type Err = super::ParseNameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Name::from_uri(s)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn component_ends_into_matches_the_owned_cache_and_reuses_the_buffer() {
        let n = Name::from_uri("/a/bb/v=3/ccc").unwrap();
        let mut ends = vec![99; 2];
        assert_eq!(component_ends_into(n.value(), &mut ends).unwrap(), 4);
        assert_eq!(ends, n.component_ends());
        let cap = ends.capacity();
        assert_eq!(component_ends_into(&n.value()[..3], &mut ends).unwrap(), 1);
        assert_eq!(ends, [3]);
        assert_eq!(ends.capacity(), cap);
        assert!(component_ends_into(&n.value()[..4], &mut ends).is_err());
        assert!(ends.is_empty());
        assert_eq!(component_ends_into(&[], &mut ends).unwrap(), 0);
    }

    use super::*;

    fn n(s: &str) -> Name {
        Name::from_uri(s).unwrap()
    }

    #[test]
    fn caches_match_a_recomputation_from_the_bytes() {
        let name = n("/edu/ucla/cs/seg=3");
        assert_eq!(name.len(), 4);
        assert_eq!(name.component_ends(), &[5, 11, 15, 18]);
        let mut h = cached_empty_hash();
        assert_eq!(name.prefix_hash(0), h);
        for (i, c) in name.components().enumerate() {
            h = extend_prefix_hash(h, c.tlv());
            assert_eq!(name.prefix_hash(i + 1), h);
            assert_eq!(
                name.prefix(i + 1).prefix_hashes(),
                &name.prefix_hashes()[..=i + 1]
            );
        }
        let again: Vec<u64> = name.prefix_hashes_with(prefix_hash_seed()).collect();
        assert_eq!(again, name.prefix_hashes());
    }

    #[test]
    fn prefix_hash_depends_on_the_prefix_not_the_rest() {
        let a = n("/a/b/c");
        let b = n("/a/b/d/e");
        assert_eq!(a.prefix_hash(2), b.prefix_hash(2));
        assert_ne!(a.prefix_hash(3), b.prefix_hash(3));
        // Component boundaries are part of the hash: /ab is not /a/b.
        assert_ne!(n("/ab").prefix_hash(1), n("/a/b").prefix_hash(2));
    }

    #[test]
    fn keyed_hashes_differ_by_seed_and_agree_with_one_prefix_hash() {
        let a = n("/x/y/z");
        let k1: Vec<u64> = a.prefix_hashes_with(1).collect();
        let k2: Vec<u64> = a.prefix_hashes_with(2).collect();
        assert_eq!(k1.len(), 4);
        assert_ne!(k1, k2);
        for (i, h) in k1.iter().enumerate() {
            assert_eq!(a.prefix_hash_with(i, 1), *h);
        }
    }

    #[test]
    fn built_by_push_equals_parsed_and_decoded() {
        let mut m = Name::new();
        m.push(&NameComponent::generic(&b"a"[..]));
        m.push(&NameComponent::version(7));
        let parsed = n("/a/v=7");
        assert_eq!(m, parsed);
        assert_eq!(m.prefix_hashes(), parsed.prefix_hashes());
        let wire = m.to_wire();
        let decoded = Name::from_wire(&wire).unwrap();
        assert_eq!(decoded, m);
        assert_eq!(decoded.prefix_hashes(), m.prefix_hashes());
        assert_eq!(decoded.component_ends(), m.component_ends());
    }

    #[test]
    fn prefix_value_and_is_prefix_of() {
        let a = n("/a/b");
        let abc = n("/a/b/c");
        assert!(a.is_prefix_of(&abc));
        assert!(!abc.is_prefix_of(&a));
        assert!(!n("/a/bc").is_prefix_of(&abc));
        assert_eq!(abc.prefix_value(2), a.value());
        assert_eq!(abc.prefix_value(99), abc.value());
        assert_eq!(abc.prefix(2), a);
    }

    #[test]
    fn canonical_order_is_type_then_length_then_bytes() {
        let mut v = [
            n("/b"),
            n("/aa"),
            n("/a/b"),
            n("/a"),
            n("/"),
            n("/seg=1"),
            n("/sha256digest=0000000000000000000000000000000000000000000000000000000000000000"),
        ];
        v.sort();
        let s: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        assert_eq!(
            s,
            [
                "/",
                "/sha256digest=0000000000000000000000000000000000000000000000000000000000000000",
                "/a",
                "/a/b",
                "/b",
                "/aa",
                "/seg=1"
            ]
        );
    }

    #[test]
    fn decoding_rejects_bad_components() {
        // Component type above 65535.
        assert!(Name::from_value(&[254, 0, 1, 0, 0, 0]).is_err());
        // Digest component of the wrong size.
        assert!(Name::from_value(&[1, 1, 0]).is_err());
        // Truncated component.
        assert!(Name::from_value(&[8, 3, b'a']).is_err());
        // Trailing bytes after the Name element.
        assert!(Name::from_wire(&[7, 0, 0]).is_err());
    }

    #[test]
    fn number_accessors_read_their_own_type_only() {
        let name = n("/seg=5/v=6/t=7/seq=8/off=9");
        let c: Vec<_> = name.components().collect();
        assert_eq!(c[0].as_segment(), Some(5));
        assert_eq!(c[0].as_version(), None);
        assert_eq!(c[1].as_version(), Some(6));
        assert_eq!(c[2].as_timestamp(), Some(7));
        assert_eq!(c[3].as_sequence_num(), Some(8));
        assert_eq!(c[4].as_byte_offset(), Some(9));
        assert_eq!(name.last().and_then(|c| c.as_byte_offset()), Some(9));
    }
}
