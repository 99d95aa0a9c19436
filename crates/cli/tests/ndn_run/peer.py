"""python-ndn 0.5.2 peer for crates/cli/tests/ndn_run.rs.

  peer.py produce FACE PREFIX [SIZE]
                                register PREFIX (rib/register), print
                                "registered True|False", answer every
                                Interest under it with "hello <name>"
                                (or, with SIZE, SIZE bytes of "x")
  peer.py consume FACE NAME     print "DATA <content>", "NACK <reason>"
                                or "TIMEOUT"

FACE is a python-ndn transport URI (unix:///path or udp://127.0.0.1:port).
"""
import sys

from ndn.app import NDNApp
from ndn.client_conf import default_face
from ndn.encoding import Name
from ndn.security import KeychainDigest
from ndn.types import InterestNack, InterestTimeout


def main():
    mode, face, name = sys.argv[1], sys.argv[2], sys.argv[3]
    app = NDNApp(face=default_face(face), keychain=KeychainDigest())

    if mode == 'produce':
        size = int(sys.argv[4]) if len(sys.argv) > 4 else None

        def on_interest(int_name, _param, _app_param):
            content = b'x' * size if size else ('hello ' + Name.to_str(int_name)).encode()
            app.put_data(int_name, content=content, freshness_period=1000)

        async def after_start():
            ok = await app.register(name, on_interest)
            print('registered', ok, flush=True)

        app.run_forever(after_start=after_start())
    else:
        async def after_start():
            try:
                _, _, content = await app.express_interest(
                    name, must_be_fresh=True, can_be_prefix=False, lifetime=2000)
                print('DATA', bytes(content).decode(), flush=True)
            except InterestNack as e:
                print('NACK', e.reason, flush=True)
            except InterestTimeout:
                print('TIMEOUT', flush=True)
            finally:
                app.shutdown()

        app.run_forever(after_start=after_start())


if __name__ == '__main__':
    main()
