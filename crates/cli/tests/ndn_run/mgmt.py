"""python-ndn 0.5.2 management reader for crates/cli/tests/ndn_mgmt.rs.

  mgmt.py FACE   fetch status/general, faces/list, fib/list and
                 strategy-choice/list with python-ndn's segment fetcher,
                 decode them with ndn.app_support.nfd_mgmt, print one JSON
                 object {"general": {...}, "faces": [...], "fib": [...],
                 "strategies": [...]}

FACE is a python-ndn transport URI (unix:///path or udp://127.0.0.1:port).
"""
import json
import sys

from ndn.app import NDNApp
from ndn.app_support import nfd_mgmt as m
from ndn.app_support.segment_fetcher import segment_fetcher
from ndn.client_conf import default_face
from ndn.encoding import Name
from ndn.security import KeychainDigest


async def fetch(app, name):
    out = b''
    async for seg in segment_fetcher(app, name):
        out += bytes(seg)
    return out


def main():
    app = NDNApp(face=default_face(sys.argv[1]), keychain=KeychainDigest())
    result = {}

    async def after_start():
        try:
            g = m.GeneralStatus.parse(await fetch(app, '/localhost/nfd/status/general'))
            result['general'] = {
                'version': g.nfd_version, 'start': g.start_timestamp,
                'fib': g.n_fib_entries, 'pit': g.n_pit_entries, 'cs': g.n_cs_entries,
                'in_interests': g.n_in_interests, 'out_data': g.n_out_data,
                'satisfied': g.n_satisfied_interests,
            }
            faces = m.FaceStatusMsg.parse(await fetch(app, '/localhost/nfd/faces/list'))
            result['faces'] = [{
                'id': f.face_id, 'uri': f.uri, 'local_uri': f.local_uri,
                'scope': f.face_scope.name if f.face_scope is not None else None,
                'in_interests': f.n_in_interests, 'out_data': f.n_out_data,
                'in_bytes': f.n_in_bytes, 'out_bytes': f.n_out_bytes,
            } for f in faces.face_status]
            fib = m.FibStatus.parse(await fetch(app, '/localhost/nfd/fib/list'))
            result['fib'] = [{
                'name': Name.to_str(e.name),
                'hops': [[h.face_id, h.cost] for h in e.next_hop_records],
            } for e in fib.entries]
            sc = m.StrategyChoiceMsg.parse(
                await fetch(app, '/localhost/nfd/strategy-choice/list'))
            result['strategies'] = [[Name.to_str(s.name), Name.to_str(s.strategy.name)]
                                    for s in sc.strategy_choices]
        finally:
            print(json.dumps(result), flush=True)
            app.shutdown()

    app.run_forever(after_start=after_start())


if __name__ == '__main__':
    main()
