"""python-ndn peer for crates/wire/tests/ndn_interop.rs.

  peer.py encode   stdin: {case: spec}   stdout: {case: hex of the packet python-ndn encodes}
  peer.py decode   stdin: {case: hex}    stdout: {case: fields python-ndn decodes, plus its re-encoding}

Specs and field sets are described in ndn_interop.rs; names travel as lists
of [TLV-TYPE, hex value] components so that no URI convention is involved.
"""
import hashlib
import json
import sys

from ndn.encoding import (Component, InterestParam, MetaInfo, make_data, make_interest,
                          parse_data, parse_interest)
from ndn.encoding.ndnlp_v2 import LpPacket, LpPacketValue, NetworkNack, parse_lp_packet_v2
from ndn.security import DigestSha256Signer


def name_of(comps):
    return [bytes(Component.from_bytes(bytes.fromhex(v), t)) for t, v in comps]


def comps_of(name):
    out = []
    for c in name:
        t = Component.get_type(c)
        out.append([t, bytes(Component.get_value(c)).hex()])
    return out


def encode_interest(s):
    p = InterestParam(can_be_prefix=s['cbp'], must_be_fresh=s['mbf'], nonce=s['nonce'],
                      lifetime=s['lifetime'], hop_limit=s['hop_limit'],
                      forwarding_hint=[name_of(h) for h in s['fwhint']])
    params = bytes.fromhex(s['app_params']) if s['app_params'] is not None else None
    name = name_of(s['name'])
    return bytes(make_interest(name, p, app_param=params))


def encode_data(s):
    fb = s['final_block_id']
    meta = MetaInfo(content_type=s['content_type'], freshness_period=s['freshness'],
                    final_block_id=bytes(Component.from_bytes(bytes.fromhex(fb[1]), fb[0])) if fb else None)
    return bytes(make_data(name_of(s['name']), meta, bytes.fromhex(s['content']),
                           signer=DigestSha256Signer()))


def encode(s):
    k = s['kind']
    if k == 'interest':
        return encode_interest(s)
    if k == 'data':
        return encode_data(s)
    if k == 'lp':
        lp = LpPacket()
        lp.lp_packet = LpPacketValue()
        if s['pit_token'] is not None:
            lp.lp_packet.pit_token = bytes.fromhex(s['pit_token'])
        if s['nack'] is not None:
            lp.lp_packet.nack = NetworkNack()
            lp.lp_packet.nack.nack_reason = s['nack']
        lp.lp_packet.fragment = encode(s['inner'])
        return bytes(lp.encode())
    raise ValueError(k)


def decode(w):
    t = w[0]
    if t == 0x05:
        name, p, params, sig = parse_interest(w)
        digest_ok = None
        if params is not None:
            covered = b''.join(bytes(x) for x in sig.digest_covered_part)
            digest_ok = hashlib.sha256(covered).digest() == bytes(sig.digest_value_buf)
        again = bytes(make_interest(
            [bytes(c) for c in name if Component.get_type(c) != Component.TYPE_PARAMETERS_SHA256], p,
            app_param=bytes(params) if params is not None else None))
        return {'kind': 'interest', 'name': comps_of(name), 'cbp': bool(p.can_be_prefix),
                'mbf': bool(p.must_be_fresh), 'fwhint': [comps_of(h) for h in p.forwarding_hint],
                'nonce': p.nonce, 'lifetime': p.lifetime, 'hop_limit': p.hop_limit,
                'app_params': bytes(params).hex() if params is not None else None,
                'params_digest_ok': digest_ok, 'reencoded': again.hex()}
    if t == 0x06:
        name, meta, content, sig = parse_data(w)
        covered = b''.join(bytes(x) for x in sig.signature_covered_part)
        digest_ok = (sig.signature_info.signature_type == 0
                     and hashlib.sha256(covered).digest() == bytes(sig.signature_value_buf))
        fb = None
        if meta.final_block_id is not None:
            c = bytes(meta.final_block_id)
            fb = [Component.get_type(c), bytes(Component.get_value(c)).hex()]
        again = bytes(make_data(name, meta, bytes(content) if content is not None else None,
                                signer=DigestSha256Signer()))
        return {'kind': 'data', 'name': comps_of(name), 'content_type': meta.content_type,
                'freshness': meta.freshness_period, 'final_block_id': fb,
                'content': bytes(content).hex() if content is not None else None,
                'sig_type': sig.signature_info.signature_type,
                'digest_ok': digest_ok, 'reencoded': again.hex()}
    if t == 0x64:
        v = parse_lp_packet_v2(w)
        return {'kind': 'lp', 'pit_token': bytes(v.pit_token).hex() if v.pit_token is not None else None,
                'nack': v.nack.nack_reason if v.nack is not None else None,
                'inner': decode(bytes(v.fragment)) if v.fragment is not None else None}
    raise ValueError(f'unknown packet type {t}')


def main():
    cmd = sys.argv[1]
    req = json.load(sys.stdin)
    if cmd == 'encode':
        out = {case: encode(spec).hex() for case, spec in req.items()}
    elif cmd == 'decode':
        out = {case: decode(bytes.fromhex(h)) for case, h in req.items()}
    else:
        raise SystemExit(f'unknown command {cmd}')
    json.dump(out, sys.stdout)


if __name__ == '__main__':
    main()
