"""solders (PyPI) judges the wallet's Solana signatures: it builds the messages the test has the
daemon sign (a legacy System transfer, a v0 message with a lookup table and an SPL TransferChecked),
then checks our signatures and serialization against its own, made with the exported keypair
(Ed25519 is deterministic), and verifies the off-chain message signatures.

  python3 solana.py build WALLET_BASE58   -> JSON: {"messages": [{name, base64}]}
  python3 solana.py check < JSON          -> exit 0 when every signature agrees; else exit 1
"""
import base64
import json
import struct
import sys

from solders.address_lookup_table_account import AddressLookupTableAccount
from solders.hash import Hash
from solders.instruction import AccountMeta, Instruction
from solders.keypair import Keypair
from solders.message import Message, MessageV0, to_bytes_versioned
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction, VersionedTransaction

TOKEN_PROGRAM = Pubkey.from_string("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA")
COMPUTE_BUDGET = Pubkey.from_string("ComputeBudget111111111111111111111111111111")
USDC_MINT = Pubkey.from_string("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v")
BLOCKHASH = Hash.from_bytes(bytes(range(32)))
RECIPIENT = Pubkey.from_bytes(bytes([7] * 32))
SOURCE_TOKEN = Pubkey.from_bytes(bytes([8] * 32))
DESTINATION_TOKEN = Pubkey.from_bytes(bytes([9] * 32))
TABLE = Pubkey.from_bytes(bytes([10] * 32))


def messages(wallet):
    legacy = Message.new_with_blockhash(
        [transfer(TransferParams(from_pubkey=wallet, to_pubkey=RECIPIENT, lamports=1_500_000_000))], wallet, BLOCKHASH)
    transfer_checked = Instruction(
        TOKEN_PROGRAM, bytes([12]) + struct.pack("<Q", 2_500_000) + bytes([6]),
        [AccountMeta(SOURCE_TOKEN, False, True), AccountMeta(USDC_MINT, False, False),
         AccountMeta(DESTINATION_TOKEN, False, True), AccountMeta(wallet, True, False)])
    unit_price = Instruction(COMPUTE_BUDGET, bytes([3]) + struct.pack("<Q", 5000), [])
    table = AddressLookupTableAccount(TABLE, [DESTINATION_TOKEN, USDC_MINT])
    v0 = MessageV0.try_compile(wallet, [unit_price, transfer_checked], [table], BLOCKHASH)
    return {"legacy-transfer": legacy, "v0-usdc-transfer-checked": v0}


def envelope(text):
    body = text.encode()
    # solana-sdk's off-chain message v0: signing domain, version, format, length (u16 LE), message.
    if all(0x20 <= b <= 0x7E for b in body) and len(body) <= 1212:
        form = 0
    elif len(body) <= 1212:
        form = 1
    else:
        form = 2
    return b"\xffsolana offchain" + bytes([0, form]) + struct.pack("<H", len(body)) + body


def build(wallet):
    found = messages(Pubkey.from_string(wallet))
    print(json.dumps({"messages": [{"name": n, "base64": base64.b64encode(to_bytes_versioned(m) if isinstance(m, MessageV0) else bytes(m)).decode()}
                                   for n, m in found.items()]}))


def check(request):
    keypair = Keypair.from_base58_string(request["keypair"])
    wallet = keypair.pubkey()
    failures = []
    checks = 0
    if str(wallet) != request["address"]:
        failures.append(f"the exported keypair is {wallet}'s, the wallet answered {request['address']}")
    found = messages(wallet)
    for tx in request["transactions"]:
        message = found[tx["name"]]
        raw = base64.b64decode(tx["base64"])
        if isinstance(message, MessageV0):
            theirs = VersionedTransaction(message, [keypair])
            parsed = VersionedTransaction.from_bytes(raw)
            signed_bytes = to_bytes_versioned(message)
        else:
            theirs = Transaction([keypair], message, message.recent_blockhash)
            parsed = Transaction.from_bytes(raw)
            signed_bytes = bytes(message)
        checks += 3
        if bytes(theirs) != raw:
            failures.append(f"{tx['name']}: ours {raw.hex()}, solders {bytes(theirs).hex()}")
        if not parsed.signatures[0].verify(wallet, signed_bytes):
            failures.append(f"{tx['name']}: our signature does not verify over the message")
        if bytes(parsed.signatures[0]).hex() != tx["hashHex"]:
            failures.append(f"{tx['name']}: the transaction id is not the first signature")
    for m in request["messages"]:
        signature = Signature.from_bytes(bytes.fromhex(m["signatureHex"]))
        checks += 2
        if not signature.verify(wallet, envelope(m["text"])):
            failures.append(f"off-chain message {m['text'][:20]!r}: the signature does not verify over the envelope")
        if keypair.sign_message(envelope(m["text"])) != signature:
            failures.append(f"off-chain message {m['text'][:20]!r}: solders signs other bytes")
    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(1)
    print(f"ok: {checks} checks by solders agree")


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(sys.argv[2])
    else:
        check(json.load(sys.stdin))
