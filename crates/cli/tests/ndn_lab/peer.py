"""python-ndn 0.5.2 segmented-object peer for crates/cli/tests/ndn_lab.rs.

  peer.py serve FACE PREFIX FILE   register PREFIX (rib/register), print
                                   "registered True|False", serve FILE as
                                   PREFIX/v=VERSION/seg=N (4400-byte
                                   segments, FinalBlockId on each; an
                                   Interest with CanBePrefix for PREFIX gets
                                   segment 0), as putchunks does
  peer.py fetch FACE PREFIX OUT    fetch PREFIX with python-ndn's
                                   segment_fetcher, write it to OUT, print
                                   "FETCHED <bytes>"

FACE is a python-ndn transport URI (udp://127.0.0.1:port).
"""
import sys
import time

from ndn.app import NDNApp
from ndn.app_support.segment_fetcher import segment_fetcher
from ndn.client_conf import default_face
from ndn.encoding import Component, Name
from ndn.security import KeychainDigest

SEGMENT = 4400


def main():
    mode, face, prefix, path = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    app = NDNApp(face=default_face(face), keychain=KeychainDigest())

    if mode == 'serve':
        data = open(path, 'rb').read()
        chunks = [data[i:i + SEGMENT] for i in range(0, len(data), SEGMENT)] or [b'']
        base = Name.normalize(prefix)
        versioned = base + [Component.from_version(int(time.time() * 1000))]
        last = Component.from_segment(len(chunks) - 1)
        packets = [app.prepare_data(versioned + [Component.from_segment(i)], c,
                                    freshness_period=10000, final_block_id=last)
                   for i, c in enumerate(chunks)]

        def on_interest(name, param, _app_param):
            if len(name) == len(versioned) + 1 and \
                    Component.get_type(name[-1]) == Component.TYPE_SEGMENT:
                k = Component.to_number(name[-1])
                if k < len(packets):
                    app.put_raw_packet(packets[k])
            elif param.can_be_prefix:
                app.put_raw_packet(packets[0])

        async def after_start():
            ok = await app.register(base, on_interest)
            print('registered', ok, flush=True)

        app.run_forever(after_start=after_start())
    else:
        async def after_start():
            try:
                out = bytearray()
                async for seg in segment_fetcher(app, prefix, timeout=2000, retry_times=5):
                    out += bytes(seg)
                with open(path, 'wb') as f:
                    f.write(out)
                print('FETCHED', len(out), flush=True)
            finally:
                app.shutdown()

        app.run_forever(after_start=after_start())


if __name__ == '__main__':
    main()
