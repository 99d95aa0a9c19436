//! The NDN Ethernet face: NDN packets (NDNLPv2 when fragmented) carried
//! directly in Ethernet frames of ethertype 0x8624, as NFD's Ethernet
//! faces carry them.
//!
//! One [`EtherSocket`] per interface: an `AF_PACKET`/`SOCK_DGRAM` socket
//! bound to the interface and to the NDN ethertype (the kernel strips and
//! builds the Ethernet header), joined to NDN's multicast group
//! [`NDN_MULTICAST`] (`01:00:5e:00:17:aa`). The daemon makes it one
//! permanent multicast face (`ether://[01:00:5e:00:17:aa]`, local
//! `dev://IFACE`): Interests sent on it reach every forwarder on the link,
//! and what they send to the group comes back on the same face. The frames
//! this host sends itself (`PACKET_OUTGOING`) are skipped on receive.

use std::ffi::CString;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The NDN ethertype.
pub const ETHERTYPE_NDN: u16 = 0x8624;
/// NDN's Ethernet multicast group (NFD's default).
pub const NDN_MULTICAST: [u8; 6] = [0x01, 0x00, 0x5e, 0x00, 0x17, 0xaa];
/// The face URI of the multicast group.
pub const MULTICAST_URI: &str = "ether://[01:00:5e:00:17:aa]";

/// An interface name as the kernel takes it: 1 to 15 bytes, no `/`,
/// whitespace or NUL.
pub fn check_ifname(name: &str) -> Result<(), String> {
    let ok = (1..=15).contains(&name.len())
        && !name
            .bytes()
            .any(|b| b == b'/' || b == 0 || b.is_ascii_whitespace())
        && name != "."
        && name != "..";
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not an interface name (1 to 15 bytes, no '/' or spaces)"
        ))
    }
}

/// Parse `aa:bb:cc:dd:ee:ff`.
fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.trim().split(':');
    for b in &mut mac {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn mac_string(mac: &[u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn sys_attr(ifname: &str, attr: &str) -> io::Result<String> {
    std::fs::read_to_string(format!("/sys/class/net/{ifname}/{attr}"))
        .map_err(|e| io::Error::new(e.kind(), format!("interface {ifname}: {attr}: {e}")))
}

fn with_context(e: io::Error, ifname: &str, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("interface {ifname}: {what}: {e}"))
}

fn link_addr(ifindex: i32, dst: Option<[u8; 6]>) -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is plain old data (integers and a byte array);
    // all zeroes is a valid value of it.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETHERTYPE_NDN.to_be();
    sll.sll_ifindex = ifindex;
    if let Some(mac) = dst {
        sll.sll_halen = 6;
        sll.sll_addr[..6].copy_from_slice(&mac);
    }
    sll
}

/// One interface's NDN Ethernet socket.
#[derive(Debug)]
pub struct EtherSocket {
    fd: OwnedFd,
    ifindex: i32,
    ifname: String,
    mac: [u8; 6],
    mtu: usize,
}

impl EtherSocket {
    /// Open the socket on `ifname`, bound to ethertype 0x8624 and joined
    /// to [`NDN_MULTICAST`]. Needs `CAP_NET_RAW`.
    ///
    /// # Errors
    /// No such interface, no permission, or a socket call failed; the
    /// message names the interface.
    pub fn open(ifname: &str) -> io::Result<EtherSocket> {
        check_ifname(ifname).map_err(io::Error::other)?;
        let mac = parse_mac(&sys_attr(ifname, "address")?).ok_or_else(|| {
            io::Error::other(format!("interface {ifname}: not an Ethernet address"))
        })?;
        let mtu: usize = sys_attr(ifname, "mtu")?
            .trim()
            .parse()
            .map_err(|_| io::Error::other(format!("interface {ifname}: unreadable mtu")))?;
        let cname = CString::new(ifname).map_err(io::Error::other)?;
        // SAFETY: `cname` is a live NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(with_context(io::Error::last_os_error(), ifname, "index"));
        }
        let ifindex = ifindex as i32;
        // SAFETY: a plain system call; it reads no memory of ours.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                i32::from(ETHERTYPE_NDN.to_be()),
            )
        };
        if raw < 0 {
            return Err(with_context(
                io::Error::last_os_error(),
                ifname,
                "AF_PACKET socket (needs CAP_NET_RAW)",
            ));
        }
        // SAFETY: `raw` is a descriptor socket() just returned, owned by
        // nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let sll = link_addr(ifindex, None);
        // SAFETY: `sll` is a live sockaddr_ll and the length passed is its
        // size; bind only reads it.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast::<libc::sockaddr>(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(with_context(io::Error::last_os_error(), ifname, "bind"));
        }
        // SAFETY: packet_mreq is plain old data; all zeroes is valid.
        let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mr.mr_ifindex = ifindex;
        mr.mr_type = libc::PACKET_MR_MULTICAST as u16;
        mr.mr_alen = 6;
        mr.mr_address[..6].copy_from_slice(&NDN_MULTICAST);
        // SAFETY: `mr` is a live packet_mreq and the length passed is its
        // size; setsockopt only reads it.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                (&mr as *const libc::packet_mreq).cast::<libc::c_void>(),
                size_of::<libc::packet_mreq>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(with_context(
                io::Error::last_os_error(),
                ifname,
                "join 01:00:5e:00:17:aa",
            ));
        }
        Ok(EtherSocket {
            fd,
            ifindex,
            ifname: ifname.to_string(),
            mac,
            mtu,
        })
    }

    /// The interface's name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The interface's own address.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The interface's MTU: the largest NDN packet (or fragment) one frame
    /// carries.
    pub fn mtu(&self) -> usize {
        self.mtu
    }

    /// The next frame another host sent: its payload's length in `buf`
    /// and its source address; `None` when nothing is waiting. Frames
    /// longer than `buf` are cut (the length returned is what `buf` got);
    /// the decoder then refuses them.
    ///
    /// # Errors
    /// The socket failed (the interface went away).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<(usize, [u8; 6])>> {
        loop {
            let mut sll = link_addr(0, None);
            let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: `buf` is writable for `buf.len()` bytes; `sll` and
            // `len` are live and `len` holds `sll`'s size, so the kernel
            // writes at most that much address.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast::<libc::c_void>(),
                    buf.len(),
                    0,
                    (&mut sll as *mut libc::sockaddr_ll).cast::<libc::sockaddr>(),
                    &mut len,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => return Ok(None),
                    io::ErrorKind::Interrupted => continue,
                    _ => return Err(e),
                }
            }
            if sll.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            let mut src = [0u8; 6];
            src.copy_from_slice(&sll.sll_addr[..6]);
            return Ok(Some((n as usize, src)));
        }
    }

    /// Send `payload` in one frame to `dst`.
    ///
    /// # Errors
    /// The kernel refused it (a full queue, a payload over the MTU).
    pub fn send(&self, payload: &[u8], dst: [u8; 6]) -> io::Result<()> {
        let sll = link_addr(self.ifindex, Some(dst));
        // SAFETY: `payload` is readable for its length; `sll` is a live
        // sockaddr_ll and the length passed is its size.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                payload.as_ptr().cast::<libc::c_void>(),
                payload.len(),
                0,
                (&sll as *const libc::sockaddr_ll).cast::<libc::sockaddr>(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

impl AsRawFd for EtherSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_and_addresses_are_checked() {
        for good in ["eth0", "veth-a", "a", "abcdefghijklmno"] {
            assert!(check_ifname(good).is_ok(), "{good}");
        }
        for bad in ["", "abcdefghijklmnop", "a/b", "a b", ".", "..", "x\0"] {
            assert!(check_ifname(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            parse_mac("02:00:5e:10:00:01\n"),
            Some([2, 0, 0x5e, 0x10, 0, 1])
        );
        for bad in [
            "",
            "02:00:5e:10:00",
            "02:00:5e:10:00:01:02",
            "2:0:5e:10:0:1",
            "zz:00:00:00:00:00",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
        assert_eq!(mac_string(&NDN_MULTICAST), "01:00:5e:00:17:aa");
    }

    #[test]
    fn a_missing_interface_is_a_clear_error() {
        let e = EtherSocket::open("nh-no-such0").unwrap_err();
        assert!(e.to_string().contains("nh-no-such0"), "{e}");
    }
}
