//! NDN packet format v0.3 and NDNLPv2: TLV codec, names, Interest, Data,
//! LpPacket. See `README.md` in this directory for the design notes.
#![doc = include_str!("README.md")]

pub mod data;
mod error;
pub mod interest;
pub mod lp;
pub mod name;
pub mod tlv;
mod uri;
pub mod view;

pub use data::{
    implicit_digest, verify_digest_sha256_wire, Data, KeyLocator, MetaInfo, SignatureInfo,
};
pub use interest::{params_digest_ok_wire, Interest};
pub use lp::{LpPacket, LpWrap, Nack, NackReason, NetPacket, Packet};

pub use view::{DataView, InterestView, KeyLocatorRef, LpView, NetPacketView, PacketView};

pub use error::{NdnError, ParseNameError, ParseNameErrorKind};
pub use name::prefix_hash_seed;
pub use name::{
    component_ends_into, component_type, empty_prefix_hash, extend_prefix_hash, ComponentRef,
    Components, Name, NameComponent, NameRef, PrefixHashes,
};

/// TLV-TYPE numbers of the NDN packet format v0.3 and NDNLPv2.
pub mod tt {
    /// Interest packet.
    pub const INTEREST: u32 = 5;
    /// Data packet.
    pub const DATA: u32 = 6;
    /// Name.
    pub const NAME: u32 = 7;
    /// Interest: CanBePrefix.
    pub const CAN_BE_PREFIX: u32 = 33;
    /// Interest: MustBeFresh.
    pub const MUST_BE_FRESH: u32 = 18;
    /// Interest: ForwardingHint.
    pub const FORWARDING_HINT: u32 = 30;
    /// Interest: Nonce.
    pub const NONCE: u32 = 10;
    /// Interest: InterestLifetime.
    pub const INTEREST_LIFETIME: u32 = 12;
    /// Interest: HopLimit.
    pub const HOP_LIMIT: u32 = 34;
    /// Interest: ApplicationParameters.
    pub const APPLICATION_PARAMETERS: u32 = 36;
    /// Interest: InterestSignatureInfo.
    pub const INTEREST_SIGNATURE_INFO: u32 = 44;
    /// Interest: InterestSignatureValue.
    pub const INTEREST_SIGNATURE_VALUE: u32 = 46;
    /// Data: MetaInfo.
    pub const META_INFO: u32 = 20;
    /// Data: Content.
    pub const CONTENT: u32 = 21;
    /// Data: SignatureInfo.
    pub const SIGNATURE_INFO: u32 = 22;
    /// Data: SignatureValue.
    pub const SIGNATURE_VALUE: u32 = 23;
    /// MetaInfo: ContentType.
    pub const CONTENT_TYPE: u32 = 24;
    /// MetaInfo: FreshnessPeriod.
    pub const FRESHNESS_PERIOD: u32 = 25;
    /// MetaInfo: FinalBlockId.
    pub const FINAL_BLOCK_ID: u32 = 26;
    /// SignatureInfo: SignatureType.
    pub const SIGNATURE_TYPE: u32 = 27;
    /// SignatureInfo: KeyLocator.
    pub const KEY_LOCATOR: u32 = 28;
    /// KeyLocator: KeyDigest.
    pub const KEY_DIGEST: u32 = 29;
    /// SignatureInfo: SignatureNonce.
    pub const SIGNATURE_NONCE: u32 = 38;
    /// SignatureInfo: SignatureTime.
    pub const SIGNATURE_TIME: u32 = 40;
    /// SignatureInfo: SignatureSeqNum.
    pub const SIGNATURE_SEQ_NUM: u32 = 42;
    /// NDNLPv2: LpPacket.
    pub const LP_PACKET: u32 = 100;
    /// NDNLPv2: Fragment.
    pub const FRAGMENT: u32 = 80;
    /// NDNLPv2: Sequence.
    pub const SEQUENCE: u32 = 81;
    /// NDNLPv2: FragIndex.
    pub const FRAG_INDEX: u32 = 82;
    /// NDNLPv2: FragCount.
    pub const FRAG_COUNT: u32 = 83;
    /// NDNLPv2: PitToken.
    pub const PIT_TOKEN: u32 = 98;
    /// NDNLPv2: Nack.
    pub const NACK: u32 = 800;
    /// NDNLPv2: NackReason.
    pub const NACK_REASON: u32 = 801;
    /// NDNLPv2: IncomingFaceId.
    pub const INCOMING_FACE_ID: u32 = 812;
    /// NDNLPv2: NextHopFaceId.
    pub const NEXT_HOP_FACE_ID: u32 = 816;
    /// NDNLPv2: CachePolicy.
    pub const CACHE_POLICY: u32 = 820;
    /// NDNLPv2: CongestionMark.
    pub const CONGESTION_MARK: u32 = 832;
    /// NDNLPv2: Ack.
    pub const ACK: u32 = 836;
    /// NDNLPv2: TxSequence.
    pub const TX_SEQUENCE: u32 = 840;
    /// NDNLPv2: NonDiscovery.
    pub const NON_DISCOVERY: u32 = 844;
    /// NDNLPv2: PrefixAnnouncement.
    pub const PREFIX_ANNOUNCEMENT: u32 = 848;
}
