"""eth-account (PyPI) judges the wallet's EVM signatures: it builds the unsigned transactions and
typed data the test has the daemon sign, then signs the same with the exported key and compares
bytes (RFC 6979 makes both deterministic) and recovers the signer of every signature.

  python3 evm.py build          -> JSON: {"transactions": [{name, chainId, unsignedHex}], "typedData": [{name, json}]}
  python3 evm.py check < JSON   -> exit 0 when every signature agrees; else exit 1 naming what differs
"""
import json
import sys

import rlp
from eth_account import Account
from eth_account._utils.signing import serializable_unsigned_transaction_from_dict
from eth_account.messages import encode_defunct, encode_typed_data
from eth_utils import keccak, to_bytes

USDC_BASE = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
RECIPIENT = "0xAb5801a7D398351b8bE11C439e05C5B3259aeC9B"
TRANSFER = "0xa9059cbb" + "00" * 12 + RECIPIENT[2:].lower() + (5_000_000).to_bytes(32, "big").hex()

TRANSACTIONS = {
    "type2-base-usdc-transfer": {
        "type": 2, "chainId": 8453, "nonce": 7, "maxPriorityFeePerGas": 1_000_000, "maxFeePerGas": 3_000_000_000,
        "gas": 65_000, "to": USDC_BASE, "value": 0, "data": TRANSFER, "accessList": [],
    },
    "type2-ethereum-eth-with-access-list": {
        "type": 2, "chainId": 1, "nonce": 0, "maxPriorityFeePerGas": 2_000_000_000, "maxFeePerGas": 40_000_000_000,
        "gas": 30_000, "to": RECIPIENT, "value": 1_500_000_000_000_000_000, "data": "0x",
        "accessList": [{"address": USDC_BASE, "storageKeys": ["0x" + "00" * 31 + "01"]}],
    },
    "type1-sepolia": {
        "type": 1, "chainId": 11155111, "nonce": 3, "gasPrice": 12_000_000_000, "gas": 21_000, "to": RECIPIENT,
        "value": 1, "data": "0x", "accessList": [],
    },
    "legacy-polygon-eip155": {
        "chainId": 137, "nonce": 1, "gasPrice": 30_000_000_000, "gas": 21_000, "to": RECIPIENT,
        "value": 10**18, "data": "0x",
    },
    # The EIP-155 example's transaction (its chain, 1, with the example's fields).
    "legacy-eip155-example": {
        "chainId": 1, "nonce": 9, "gasPrice": 20 * 10**9, "gas": 21_000,
        "to": "0x3535353535353535353535353535353535353535", "value": 10**18, "data": "0x",
    },
}

MAIL = {
    "types": {
        "EIP712Domain": [
            {"name": "name", "type": "string"}, {"name": "version", "type": "string"},
            {"name": "chainId", "type": "uint256"}, {"name": "verifyingContract", "type": "address"},
        ],
        "Person": [{"name": "name", "type": "string"}, {"name": "wallet", "type": "address"}],
        "Mail": [
            {"name": "from", "type": "Person"}, {"name": "to", "type": "Person"}, {"name": "contents", "type": "string"},
        ],
    },
    "primaryType": "Mail",
    "domain": {"name": "Ether Mail", "version": "1", "chainId": 1,
               "verifyingContract": "0xCcCCccccCCCCcCCCCCCcCcCccCcCCCcCcccccccC"},
    "message": {
        "from": {"name": "Cow", "wallet": "0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826"},
        "to": {"name": "Bob", "wallet": "0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB"},
        "contents": "Hello, Bob!",
    },
}

PERMIT = {
    "types": {
        "EIP712Domain": [
            {"name": "name", "type": "string"}, {"name": "version", "type": "string"},
            {"name": "chainId", "type": "uint256"}, {"name": "verifyingContract", "type": "address"},
        ],
        "Permit": [
            {"name": "owner", "type": "address"}, {"name": "spender", "type": "address"},
            {"name": "value", "type": "uint256"}, {"name": "nonce", "type": "uint256"},
            {"name": "deadline", "type": "uint256"},
        ],
    },
    "primaryType": "Permit",
    "domain": {"name": "USD Coin", "version": "2", "chainId": 8453, "verifyingContract": USDC_BASE},
    "message": {
        "owner": "OWNER", "spender": RECIPIENT,
        # Above 2^53 and above 2^64: the JSON keeps it as a number, which must not be rounded.
        "value": 123456789012345678901234567890, "nonce": 0, "deadline": 1900000000,
    },
}

NESTED = {
    "types": {
        "EIP712Domain": [{"name": "name", "type": "string"}, {"name": "chainId", "type": "uint256"}],
        "Item": [{"name": "id", "type": "uint8"}, {"name": "tags", "type": "bytes32[]"}, {"name": "blob", "type": "bytes"}],
        "Order": [
            {"name": "items", "type": "Item[]"}, {"name": "grid", "type": "int16[2][]"}, {"name": "ok", "type": "bool"},
            {"name": "note", "type": "string"}, {"name": "max", "type": "uint256"}, {"name": "min", "type": "int256"},
        ],
    },
    "primaryType": "Order",
    "domain": {"name": "Nested", "chainId": 42161},
    "message": {
        "items": [{"id": 255, "tags": ["0x" + "11" * 32, "0x" + "22" * 32], "blob": "0x0102"},
                  {"id": 0, "tags": [], "blob": "0x"}],
        "grid": [[-32768, 32767], [0, -1]], "ok": True, "note": "n\u00e9e \u2713",
        "max": 2**256 - 1, "min": -(2**255),
    },
}


def unsigned_bytes(tx):
    """The unsigned transaction's bytes, built here with rlp and checked against eth-account's hash."""
    d = dict(tx)
    to = to_bytes(hexstr=d["to"]) if d.get("to") else b""
    data = to_bytes(hexstr=d["data"])
    if d.get("type") in (1, 2):
        access = [[to_bytes(hexstr=a["address"]), [to_bytes(hexstr=k) for k in a["storageKeys"]]] for a in d["accessList"]]
        if d["type"] == 2:
            fields = [d["chainId"], d["nonce"], d["maxPriorityFeePerGas"], d["maxFeePerGas"], d["gas"], to, d["value"], data, access]
        else:
            fields = [d["chainId"], d["nonce"], d["gasPrice"], d["gas"], to, d["value"], data, access]
        out = bytes([d["type"]]) + rlp.encode(fields)
    else:
        out = rlp.encode([d["nonce"], d["gasPrice"], d["gas"], to, d["value"], data, d["chainId"], 0, 0])
    expected = serializable_unsigned_transaction_from_dict(d).hash()
    if keccak(out) != bytes(expected):
        raise SystemExit(f"judge: the unsigned bytes of {d} do not hash as eth-account's signing hash")
    return out


def typed(owner):
    permit = json.loads(json.dumps(PERMIT))
    permit["message"]["owner"] = owner
    return {"mail": MAIL, "permit": permit, "nested": NESTED}


def build(owner):
    print(json.dumps({
        "transactions": [{"name": n, "chainId": t["chainId"], "unsignedHex": unsigned_bytes(t).hex()}
                         for n, t in TRANSACTIONS.items()],
        "typedData": [{"name": n, "json": json.dumps(v)} for n, v in typed(owner).items()],
    }))


def check(request):
    key = request["privateKey"]
    address = Account.from_key(key).address
    failures = []
    checks = 0
    if address != request["address"]:
        failures.append(f"the exported key is {address}'s, the wallet answered {request['address']}")
    for m in request["messages"]:
        message = bytes.fromhex(m["messageHex"])
        ours = bytes.fromhex(m["signatureHex"][2:])
        theirs = Account.sign_message(encode_defunct(primitive=message), key).signature
        recovered = Account.recover_message(encode_defunct(primitive=message), signature=ours)
        checks += 2
        if bytes(theirs) != ours:
            failures.append(f"personal_sign of {message[:20]!r}: ours {ours.hex()}, eth-account {bytes(theirs).hex()}")
        if recovered != address:
            failures.append(f"personal_sign of {message[:20]!r} recovers to {recovered}")
    documents = typed(address)
    for t in request["typedData"]:
        full = documents[t["name"]]
        ours = bytes.fromhex(t["signatureHex"][2:])
        signable = encode_typed_data(full_message=full)
        theirs = Account.sign_message(signable, key).signature
        recovered = Account.recover_message(signable, signature=ours)
        checks += 2
        if bytes(theirs) != ours:
            failures.append(f"typed data {t['name']}: ours {ours.hex()}, eth-account {bytes(theirs).hex()}")
        if recovered != address:
            failures.append(f"typed data {t['name']} recovers to {recovered}")
    for tx in request["transactions"]:
        signed = Account.sign_transaction(TRANSACTIONS[tx["name"]], key)
        checks += 2
        if bytes(signed.raw_transaction).hex() != tx["rawHex"]:
            failures.append(f"{tx['name']}: ours {tx['rawHex']}, eth-account {bytes(signed.raw_transaction).hex()}")
        if bytes(signed.hash).hex() != tx["hashHex"]:
            failures.append(f"{tx['name']}: hash ours {tx['hashHex']}, eth-account {bytes(signed.hash).hex()}")
    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(1)
    print(f"ok: {checks} checks by eth-account agree")


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(sys.argv[2])
    else:
        check(json.load(sys.stdin))
