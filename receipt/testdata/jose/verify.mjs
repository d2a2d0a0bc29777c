// Verifies countersign receipts with the jose npm package (not our code),
// and signs one back for Go to verify. Input on stdin, one JSON object:
//   {jwks, token, tampered, issuer, audience, now, signing_jwk, claims}
// Output on stdout, one JSON object with what jose said.
import { jwtVerify, createLocalJWKSet, importJWK, SignJWT, decodeProtectedHeader } from 'jose';

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const input = JSON.parse(Buffer.concat(chunks).toString('utf8'));
const jwks = createLocalJWKSet(input.jwks);
const options = {
  issuer: input.issuer,
  audience: input.audience,
  typ: 'countersign-receipt+jwt',
  algorithms: ['EdDSA'],
  currentDate: new Date(input.now * 1000),
};

const out = {};
const { payload, protectedHeader } = await jwtVerify(input.token, jwks, options);
out.payload = payload;
out.header = protectedHeader;

// An edited receipt must fail with jose too.
try {
  await jwtVerify(input.tampered, jwks, options);
  out.tampered = 'accepted';
} catch (e) {
  out.tampered = e.code;
}
// And an expired one.
try {
  await jwtVerify(input.token, jwks, { ...options, currentDate: new Date((payload.exp + 3600) * 1000) });
  out.expired = 'accepted';
} catch (e) {
  out.expired = e.code;
}

// The other way: jose signs a receipt with a key Go published.
const key = await importJWK(input.signing_jwk, 'EdDSA');
out.signed = await new SignJWT(input.claims)
  .setProtectedHeader({ alg: 'EdDSA', typ: 'countersign-receipt+jwt', kid: input.signing_jwk.kid })
  .sign(key);
out.signed_header = decodeProtectedHeader(out.signed);
process.stdout.write(JSON.stringify(out) + '\n');
