// NDNts peer for crates/wire/tests/ndn_interop.rs.
//
//   node peer.mjs encode   stdin: {case: spec}  stdout: {case: hex of the packet NDNts encodes}
//   node peer.mjs decode   stdin: {case: hex}   stdout: {case: fields NDNts decodes, plus its re-encoding}
//
// Names travel as lists of [TLV-TYPE, hex value] components.
import { LpPacket } from "@ndn/lp";
import { Component, Data, digestSigning, FwHint, Interest, NackHeader, Name } from "@ndn/packet";
import { Decoder, Encoder } from "@ndn/tlv";

const fromHex = (h) => Uint8Array.from(Buffer.from(h, "hex"));
const toHex = (b) => Buffer.from(b).toString("hex");
const nameOf = (comps) => new Name(comps.map(([t, v]) => new Component(t, fromHex(v))));
const compsOf = (name) => name.comps.map((c) => [c.type, toHex(c.value)]);

async function makeInterest(s) {
  const args = [nameOf(s.name)];
  if (s.cbp) args.push(Interest.CanBePrefix);
  if (s.mbf) args.push(Interest.MustBeFresh);
  if (s.fwhint.length > 0) args.push(new FwHint(s.fwhint.map(nameOf)));
  if (s.nonce !== null) args.push(Interest.Nonce(s.nonce));
  if (s.lifetime !== null) args.push(Interest.Lifetime(s.lifetime));
  if (s.hop_limit !== null) args.push(Interest.HopLimit(s.hop_limit));
  const interest = new Interest(...args);
  if (s.app_params !== null) {
    interest.appParameters = fromHex(s.app_params);
    await interest.updateParamsDigest();
  }
  return interest;
}

async function makeData(s) {
  const data = new Data(nameOf(s.name));
  if (s.content_type !== null) data.contentType = s.content_type;
  if (s.freshness !== null) data.freshnessPeriod = s.freshness;
  if (s.final_block_id !== null) data.finalBlockId = new Component(s.final_block_id[0], fromHex(s.final_block_id[1]));
  data.content = fromHex(s.content);
  await digestSigning.sign(data);
  return data;
}

async function encode(s) {
  switch (s.kind) {
    case "interest": return Encoder.encode(await makeInterest(s));
    case "data": return Encoder.encode(await makeData(s));
    case "lp": {
      const lpp = new LpPacket();
      if (s.pit_token !== null) lpp.pitToken = fromHex(s.pit_token);
      if (s.nack !== null) lpp.nack = new NackHeader(s.nack);
      lpp.payload = await encode(s.inner);
      return Encoder.encode(lpp);
    }
    default: throw new Error(`unknown kind ${s.kind}`);
  }
}

async function decode(w) {
  switch (w[0]) {
    case 0x05: {
      const i = new Decoder(w).decode(Interest);
      let paramsOk = null;
      if (i.appParameters !== undefined) {
        try { await i.validateParamsDigest(true); paramsOk = true; } catch { paramsOk = false; }
      }
      return {
        kind: "interest", name: compsOf(i.name), cbp: i.canBePrefix, mbf: i.mustBeFresh,
        fwhint: i.fwHint ? i.fwHint.delegations.map(compsOf) : [],
        // NDNts reads an absent HopLimit as 255 (and writes none for 255).
        nonce: i.nonce ?? null, lifetime: i.lifetime, hop_limit: i.hopLimit === 255 ? null : i.hopLimit,
        app_params: i.appParameters !== undefined ? toHex(i.appParameters) : null,
        params_digest_ok: paramsOk, reencoded: toHex(Encoder.encode(i)),
      };
    }
    case 0x06: {
      const d = new Decoder(w).decode(Data);
      let ok = false;
      try { await digestSigning.verify(d); ok = true; } catch { ok = false; }
      return {
        kind: "data", name: compsOf(d.name), content_type: d.contentType, freshness: d.freshnessPeriod,
        final_block_id: d.finalBlockId ? [d.finalBlockId.type, toHex(d.finalBlockId.value)] : null,
        content: toHex(d.content), sig_type: d.sigInfo.type, digest_ok: ok,
        reencoded: toHex(Encoder.encode(d)),
      };
    }
    case 0x64: {
      const p = new Decoder(w).decode(LpPacket);
      return {
        kind: "lp", pit_token: p.pitToken ? toHex(p.pitToken) : null,
        nack: p.nack ? p.nack.reason : null,
        inner: p.payload ? await decode(p.payload) : null,
      };
    }
    default: throw new Error(`unknown packet type ${w[0]}`);
  }
}

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const req = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const out = {};
for (const [k, v] of Object.entries(req)) {
  out[k] = process.argv[2] === "encode" ? toHex(await encode(v)) : await decode(fromHex(v));
}
process.stdout.write(JSON.stringify(out));
