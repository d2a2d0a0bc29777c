"""Verifies a countersign receipt with PyJWT (not our code), as
docs/receipts.md shows, with the JWKS given on stdin instead of fetched.
Input on stdin: {"jwks", "token", "method", "url", "body", "audience",
"issuer"}; PyJWT checks exp against the wall clock. Prints {"claims": …} or {"error": "…"}."""
import hashlib
import json
import sys

import jwt  # PyJWT, with cryptography for EdDSA


def verify_receipt(token, key_for, method, url, body, audience, issuer):
    token = "".join(token.split())  # an email header may be folded
    header = jwt.get_unverified_header(token)
    if header.get("alg") != "EdDSA" or header.get("typ") != "countersign-receipt+jwt":
        raise ValueError("not a countersign receipt")
    claims = jwt.decode(token, key_for(header.get("kid")), algorithms=["EdDSA"],
                        audience=audience, issuer=issuer, leeway=30,
                        options={"require": ["iss", "jti", "iat", "exp", "aud"]})
    h = claims.get("http") or {}
    if (h.get("method") != method or h.get("url") != url
            or h.get("body_sha256") != hashlib.sha256(body).hexdigest()):
        raise ValueError("the receipt does not cover this request")
    return claims  # then accept claims["jti"] once, until claims["exp"]


def main():
    req = json.load(sys.stdin)
    keys = {k.key_id: k.key for k in jwt.PyJWKSet.from_dict(req["jwks"]).keys}

    def key_for(kid):
        if kid not in keys:
            raise ValueError("unknown key " + str(kid))
        return keys[kid]

    try:
        claims = verify_receipt(req["token"], key_for, req["method"], req["url"],
                                req["body"].encode(), req["audience"], req["issuer"])
        print(json.dumps({"claims": claims}))
    except Exception as e:  # noqa: BLE001 - the test reads the kind
        print(json.dumps({"error": type(e).__name__ + ": " + str(e)}))


main()
