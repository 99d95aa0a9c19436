"""ndn-python-repo 0.3 clients (from PyPI, unchanged) for crates/cli/tests/ndn_repo.rs.

  client.py FACE REPO insert NAME FILE [REGISTER]
                                         PutfileClient.insert_file (with register_prefix
                                         REGISTER when given); prints "inserted N"
  client.py FACE REPO fetch NAME OUT     GetfileClient.fetch_file; prints "fetched BYTES"
                                         or "fetched none" when nothing came back
  client.py FACE REPO delete NAME [REGISTER]
                                         DeleteClient.delete_file (with register_prefix
                                         REGISTER when given); prints "deleted N"
  client.py FACE REPO publish HEX        publish the raw insert message HEX through the
                                         package's PubSub; prints "acknowledged True|False"
  client.py FACE REPO check VERB PID     CommandChecker.check_<VERB> for the hex process id;
                                         prints "status CODE" or "status none"
  client.py FACE REPO vanish NAME FILE   publish an insert of FILE, serve its first segment
                                         only and exit; prints "vanished PID"

FACE is a python-ndn transport URI. The client's prefix is /client. HOME must be a
private directory: a python-ndn keychain with the identity /client is created there
(PutfileClient signs its segments with the default key).
"""
import asyncio as aio
import os
import sys
import traceback

from ndn.app import NDNApp
from ndn.client_conf import default_face
from ndn.encoding import Component, Name
from ndn.security import KeychainDigest, KeychainSqlite3, TpmFile

from ndn_python_repo.clients import DeleteClient, GetfileClient, PutfileClient
from ndn_python_repo.clients.command_checker import CommandChecker
from ndn_python_repo.command.repo_commands import CheckPrefix, RepoCommandParameter
from ndn_python_repo.utils import PubSub

SEGMENT_SIZE = 8000


def ensure_keychain():
    d = os.path.expanduser('~/.ndn')
    pib = os.path.join(d, 'pib.db')
    if not os.path.exists(pib):
        os.makedirs(d, exist_ok=True)
        tpm = os.path.join(d, 'ndnsec-key-file')
        KeychainSqlite3.initialize(pib, 'tpm-file', tpm)
        kc = KeychainSqlite3(pib, TpmFile(tpm))
        kc.touch_identity('/client')


async def vanish(app, repo, name, path):
    with open(path, 'rb') as f:
        content = f.read()
    n = (len(content) + SEGMENT_SIZE - 1) // SEGMENT_SIZE
    first = app.prepare_data(name + [Component.from_segment(0)], content[:SEGMENT_SIZE],
                             final_block_id=Component.from_segment(n - 1))

    def on_interest(int_name, _param, _app_param):
        if Component.to_number(int_name[-1]) == 0:
            app.put_raw_packet(first)

    await app.register(name, on_interest)
    pid = os.urandom(4)
    p = RepoCommandParameter()
    p.name = name
    p.start_block_id = 0
    p.end_block_id = n - 1
    p.process_id = pid
    p.check_prefix = CheckPrefix()
    p.check_prefix.name = Name.from_str('/client')
    pb = PubSub(app, Name.from_str('/client'))
    await pb.wait_for_ready()
    ok = await pb.publish(repo + ['insert'], p.encode())
    # Let the Repo ask for its window, answer segment 0, then disappear.
    await aio.sleep(0.5)
    print('vanished', pid.hex() if ok else 'unacknowledged', flush=True)
    os._exit(0)


async def run(app, argv):
    face, repo, verb = argv[1], Name.from_str(argv[2]), argv[3]
    client = Name.from_str('/client')
    if verb == 'insert':
        name = Name.from_str(argv[4])
        reg = Name.from_str(argv[6]) if len(argv) > 6 else None
        n = await PutfileClient(app, client, repo).insert_file(
            argv[5], name, SEGMENT_SIZE, 0, 2, register_prefix=reg)
        print('inserted', n, flush=True)
    elif verb == 'fetch':
        out = argv[5]
        await GetfileClient(app, repo).fetch_file(Name.from_str(argv[4]), out, overwrite=True)
        print('fetched', os.path.getsize(out) if os.path.exists(out) else 'none', flush=True)
    elif verb == 'delete':
        reg = Name.from_str(argv[5]) if len(argv) > 5 else None
        n = await DeleteClient(app, client, repo).delete_file(
            Name.from_str(argv[4]), register_prefix=reg)
        print('deleted', n, flush=True)
    elif verb == 'publish':
        pb = PubSub(app, client)
        await pb.wait_for_ready()
        ok = await pb.publish(repo + ['insert'], bytes.fromhex(argv[4]))
        print('acknowledged', ok, flush=True)
    elif verb == 'check':
        checker = CommandChecker(app)
        pid = bytes.fromhex(argv[5])
        if argv[4] == 'insert':
            r = await checker.check_insert(repo, pid)
        else:
            r = await checker.check_delete(repo, pid)
        print('status', r.status_code if r is not None else 'none', flush=True)
    elif verb == 'vanish':
        await vanish(app, repo, Name.from_str(argv[4]), argv[5])
    else:
        raise SystemExit(f'unknown verb {verb}')


def main():
    ensure_keychain()
    app = NDNApp(face=default_face(sys.argv[1]), keychain=KeychainDigest())
    rc = 0

    async def after_start():
        nonlocal rc
        try:
            await run(app, sys.argv)
        except BaseException:
            traceback.print_exc()
            rc = 1
        finally:
            app.shutdown()

    app.run_forever(after_start=after_start())
    sys.exit(rc)


if __name__ == '__main__':
    main()
