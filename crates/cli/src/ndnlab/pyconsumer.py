"""python-ndn consumer rate for `nexthop ndn bench`.

  pyconsumer.py FACE PREFIX SECONDS WINDOW

WINDOW coroutines each express Interests for unique names under PREFIX,
one at a time, for SECONDS; prints one line
"satisfied N nacked N timed_out N elapsed SECONDS".
"""
import asyncio
import os
import sys
import time

from ndn.app import NDNApp
from ndn.client_conf import default_face
from ndn.security import KeychainDigest
from ndn.types import InterestNack, InterestTimeout


def main():
    face, prefix, seconds, window = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    app = NDNApp(face=default_face(face), keychain=KeychainDigest())
    counts = {'satisfied': 0, 'nacked': 0, 'timed_out': 0}
    run = '%d' % os.getpid()

    async def worker(k, deadline):
        seq = 0
        while time.monotonic() < deadline:
            name = '%s/py%s/%d/%d' % (prefix, run, k, seq)
            seq += 1
            try:
                await app.express_interest(name, must_be_fresh=False, can_be_prefix=False,
                                           lifetime=1000)
                counts['satisfied'] += 1
            except InterestNack:
                counts['nacked'] += 1
            except InterestTimeout:
                counts['timed_out'] += 1

    async def after_start():
        try:
            start = time.monotonic()
            deadline = start + seconds
            await asyncio.gather(*(worker(k, deadline) for k in range(window)))
            elapsed = time.monotonic() - start
            print('satisfied %d nacked %d timed_out %d elapsed %.3f' % (
                counts['satisfied'], counts['nacked'], counts['timed_out'], elapsed), flush=True)
        finally:
            app.shutdown()

    app.run_forever(after_start=after_start())


if __name__ == '__main__':
    main()
