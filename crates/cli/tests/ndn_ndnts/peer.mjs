// NDNts 0.0.20250307 peer for crates/cli/tests/ndn_ndnts.rs.
//
//   node peer.mjs produce FACE PREFIX   register PREFIX with NDNts's nfdmgmt
//                                       (rib/register, digest-signed command
//                                       Interest), print "registered True" once
//                                       the forwarder answered 200, then answer
//                                       every Interest under PREFIX with
//                                       "ndnts <name>"
//   node peer.mjs consume FACE NAME     print "DATA <content>" or "TIMEOUT"
//                                       (NDNts's forwarder ignores Nacks)
//
// FACE is unix:///path or udp://127.0.0.1:port. The NDNts packages are the ones
// scripts/setup-interop.sh installs under crates/wire/tests/interop; NDNTS_MODULES
// names that folder (this file lives elsewhere, so bare imports would not resolve).
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const modules = process.env.NDNTS_MODULES;
if (!modules) {
  console.error("NDNTS_MODULES (the folder holding node_modules/@ndn) is not set");
  process.exit(2);
}
const req = createRequire(path.join(modules, "package.json"));
const load = (pkg) => import(pathToFileURL(req.resolve(pkg)).href);
const { consume, produce } = await load("@ndn/endpoint");
const { Forwarder, ReadvertiseDestination } = await load("@ndn/fw");
const { enableNfdPrefixReg } = await load("@ndn/nfdmgmt");
const { UdpTransport, UnixTransport } = await load("@ndn/node-transport");
const { Data, Interest, Name } = await load("@ndn/packet");

const [mode, face, nameArg] = process.argv.slice(2);

async function openFace(uri) {
  const fw = Forwarder.getDefault();
  if (uri.startsWith("unix://")) {
    return UnixTransport.createFace({ fw }, uri.slice("unix://".length));
  }
  if (uri.startsWith("udp://")) {
    const hostport = uri.slice("udp://".length);
    const i = hostport.lastIndexOf(":");
    return UdpTransport.createFace({ fw }, { host: hostport.slice(0, i), port: Number(hostport.slice(i + 1)) });
  }
  throw new Error(`unknown face ${uri}`);
}

const fwFace = await openFace(face);
const name = new Name(nameArg);

if (mode === "produce") {
  const reg = enableNfdPrefixReg(fwFace, {
    retry: { retries: 0 },
    refreshInterval: false,
  });
  produce(name, async (interest) => {
    const content = new TextEncoder().encode(`ndnts ${interest.name.toString()}`);
    return new Data(interest.name, Data.FreshnessPeriod(1000), content);
  });
  // The readvertise record turns ADVERTISED once rib/register was answered
  // with StatusCode 200; any other answer makes it retry (here: never).
  const deadline = Date.now() + 5000;
  for (;;) {
    const rec = reg.table.get(name);
    if (rec?.status === ReadvertiseDestination.Status.ADVERTISED) {
      console.log("registered True");
      break;
    }
    if (Date.now() > deadline) {
      console.log("registered False");
      process.exit(1);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
} else if (mode === "consume") {
  try {
    const data = await consume(new Interest(name, Interest.MustBeFresh, Interest.Lifetime(2000)), { retx: 0 });
    console.log(`DATA ${new TextDecoder().decode(data.content)}`);
  } catch (err) {
    // NDNts's forwarder ignores Nacks: a Nacked Interest also ends as an
    // expiry ("Interest rejected: expire").
    const msg = String(err?.message ?? err);
    console.log(/expire/.test(msg) ? "TIMEOUT" : `ERROR ${msg}`);
  }
  fwFace.close();
  process.exit(0);
} else {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}
