#!/usr/bin/env python3
"""An outside relying party (python-fido2's Fido2Server, pinned in requirements.txt) judging the
registrations and assertions our authenticators produce.

Reads one JSON object on standard input:

    {"rpId": "example.com",
     "registration": {"challenge": B64URL, "userVerification": "preferred",
                      "response": RegistrationResponseJSON},
     "authentications": [{"challenge": B64URL, "userVerification": "required",
                          "response": AuthenticationResponseJSON}, ...]}

and verifies them as a website would: the client data's type, origin (https://rpId or a
subdomain) and challenge, the RP ID hash, the flags the requirement asks for, the attestation
statement's signature when it has one, and each assertion's signature with the registered key.
Prints what it found as JSON; exits 1 naming the first check that failed.
"""
import json
import sys

from fido2.attestation import Attestation, AttestationType
from fido2.server import Fido2Server
from fido2.utils import websafe_encode
from fido2.webauthn import (
    AuthenticationResponse,
    PublicKeyCredentialRpEntity,
    RegistrationResponse,
    UserVerificationRequirement,
)


def attestation_type(response):
    """Verifies the attestation statement's signature (any format but none) and names its type."""
    registration = RegistrationResponse.from_dict(response)
    attestation = registration.response.attestation_object
    if attestation.fmt == "none":
        if attestation.att_stmt:
            raise ValueError("a none attestation carries a statement")
        return "none"
    verifier = Attestation.for_type(attestation.fmt)()
    result = verifier.verify(attestation.att_stmt, attestation.auth_data, registration.response.client_data.hash)
    return {AttestationType.SELF: "self", AttestationType.BASIC: "basic"}.get(result.attestation_type, str(result.attestation_type))


def state(entry):
    return {
        "challenge": entry["challenge"],
        "user_verification": UserVerificationRequirement(entry.get("userVerification", "preferred")),
    }


def judge(request):
    server = Fido2Server(PublicKeyCredentialRpEntity(id=request["rpId"], name="judge"))
    registration = request["registration"]
    kind = attestation_type(registration["response"])
    auth_data = server.register_complete(state(registration), registration["response"])
    credential = auth_data.credential_data
    found = {
        "credentialId": websafe_encode(credential.credential_id),
        "attestation": kind,
        "registration": flags(auth_data),
        "assertions": [],
    }
    for entry in request.get("authentications", []):
        server.authenticate_complete(state(entry), [credential], entry["response"])
        assertion = AuthenticationResponse.from_dict(entry["response"]).response.authenticator_data
        found["assertions"].append(flags(assertion))
    return found


def flags(auth_data):
    return {
        "userPresent": auth_data.is_user_present(),
        "userVerified": auth_data.is_user_verified(),
        "backupEligible": bool(auth_data.flags & 0x08),
        "backedUp": bool(auth_data.flags & 0x10),
        "signCount": auth_data.counter,
    }


def main():
    try:
        found = judge(json.load(sys.stdin))
    except Exception as error:  # every refusal is the judge's verdict, said in one line
        print(f"refused: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
