//! The lab's frames: a payload naming the destination's index and phase,
//! so a sink checks a frame without a table lookup; and port masks.

use nexthop_othello::fib::Action;

/// Output ports of the lab (the sinks); port 0 is the forwarder's input.
pub(crate) const PORTS: [u16; 4] = [1, 2, 3, 4];
/// Bytes of a lab frame (the minimum Ethernet frame less its FCS).
pub(crate) const FRAME_LEN: usize = 60;
/// Source MAC of every lab frame.
pub(crate) const LAB_SRC: [u8; 6] = [0x02, 0x6e, 0x68, 0x00, 0x1a, 0xb0];
/// IEEE local experimental ethertype.
const ETHERTYPE: [u8; 2] = [0x88, 0xb5];
const MAGIC: &[u8; 4] = b"NHLB";
/// Phase byte of traffic frames.
pub(crate) const PHASE_TRAFFIC: u8 = 1;
/// Phase byte of final-wave frames.
pub(crate) const PHASE_FINAL: u8 = 2;

/// Write a lab frame: `dst`, the lab source, the lab ethertype, magic,
/// phase, the name's index and a tag (a sequence or chunk number).
pub(crate) fn write_frame(buf: &mut [u8; FRAME_LEN], dst: &[u8; 6], phase: u8, idx: u32, tag: u32) {
    buf[0..6].copy_from_slice(dst);
    buf[6..12].copy_from_slice(&LAB_SRC);
    buf[12..14].copy_from_slice(&ETHERTYPE);
    buf[14..18].copy_from_slice(MAGIC);
    buf[18] = phase;
    buf[19..23].copy_from_slice(&idx.to_le_bytes());
    buf[23..27].copy_from_slice(&tag.to_le_bytes());
}

/// A parsed lab frame: destination, phase, name index, tag.
pub(crate) struct LabFrame {
    pub dst: [u8; 6],
    pub phase: u8,
    pub idx: u32,
    pub tag: u32,
}

/// Parse a lab frame; `None` for anything else (other traffic on a link).
pub(crate) fn parse_frame(f: &[u8]) -> Option<LabFrame> {
    if f.len() < 27 || f[6..12] != LAB_SRC || f[12..14] != ETHERTYPE || &f[14..18] != MAGIC {
        return None;
    }
    let u32_at = |i: usize| u32::from_le_bytes([f[i], f[i + 1], f[i + 2], f[i + 3]]);
    let mut dst = [0u8; 6];
    dst.copy_from_slice(&f[0..6]);
    Some(LabFrame {
        dst,
        phase: f[18],
        idx: u32_at(19),
        tag: u32_at(23),
    })
}

/// Bit of [`mask_of`] for punts to the controller.
pub(crate) const PUNT: u8 = 0x80;

/// Where an action sends a frame, as a bit mask: bit `p` for port `p`
/// (ports 0..=6 are representable, which the lab's actions respect) and
/// [`PUNT`] for the controller; 0 for drop.
pub(crate) fn mask_of(a: &Action) -> u8 {
    let bit = |p: u16| if p < 7 { 1u8 << p } else { 0 };
    match a {
        Action::Port(p) => bit(*p),
        Action::PortSet(ps) => ps.iter().fold(0, |m, p| m | bit(*p)),
        Action::Drop => 0,
        Action::Controller => PUNT,
    }
}

/// The ports of a mask, e.g. `1+4`, `controller`, `no port (drop)`.
pub(crate) fn ports_of(mask: u8) -> String {
    let mut v: Vec<String> = (0..7u16)
        .filter(|p| mask & (1 << p) != 0)
        .map(|p| p.to_string())
        .collect();
    if mask & PUNT != 0 {
        v.push("controller".into());
    }
    if v.is_empty() {
        "no port (drop)".into()
    } else {
        v.join("+")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_foreign_frames_are_not_lab_frames() {
        let mut b = [0u8; FRAME_LEN];
        let dst = [2, 0, 0, 0, 0, 7];
        write_frame(&mut b, &dst, PHASE_FINAL, 123_456, 77);
        let f = parse_frame(&b).unwrap();
        assert_eq!(
            (f.dst, f.phase, f.idx, f.tag),
            (dst, PHASE_FINAL, 123_456, 77)
        );
        assert!(parse_frame(&b[..26]).is_none());
        let mut other = b;
        other[6] ^= 1;
        assert!(parse_frame(&other).is_none());
        let mut other = b;
        other[14] = b'X';
        assert!(parse_frame(&other).is_none());
    }

    #[test]
    fn masks_name_ports_and_punts() {
        assert_eq!(mask_of(&Action::Port(3)), 1 << 3);
        assert_eq!(mask_of(&Action::PortSet(vec![1, 4])), 0b1_0010);
        assert_eq!(mask_of(&Action::Drop), 0);
        assert_eq!(mask_of(&Action::Controller), PUNT);
        assert_eq!(ports_of(0b1_0010), "1+4");
        assert_eq!(ports_of(PUNT), "controller");
        assert_eq!(ports_of(0), "no port (drop)");
    }
}
