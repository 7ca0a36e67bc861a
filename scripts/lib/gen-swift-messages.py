#!/usr/bin/python3
"""Writes RainWire's Swift message types for proto files, from protoc's descriptor set.

Usage: gen-swift-messages.py DESCRIPTOR_SET OUT_DIR proto/x.proto...

For each named proto file it writes OUT_DIR/RainWire/<x>.pb.swift: a public struct per message (fields in
lowerCamelCase, proto3 defaults, a memberwise init, the .proto comments as doc comments) and its
conversion to and from protobuf-c's generated C (Sources/CRainProto) through the helpers of
Sources/RainWire/ProtobufC+Support.swift. It also writes services.pb.swift: RainWire's
`Method` and `AuthorityMethod`, a constant per `rpc` of the files' service blocks with the messages
it names (generate_methods), and from `service Authority` the `Authority` protocol's requirements,
`RemoteAuthority`'s calls and `AuthorityService`'s routes (gen_authority_calls.py). Each file goes in
OUT_DIR/<module>/. Run by scripts/gen-proto; the output is deterministic.

Conventions of this code base the generator follows:
- A `bool has_x` beside a field `x` of the same message marks presence: Swift has one field
  `x: T?` (nil when `has_x` is false), not two.
- Booleans read `is…`/`has…` (`is_owner` → `isOwner`; `truncated` → `isTruncated`).
- Initialisms keep their case after the first word (`key_id` → `keyID`); `uid` stays `uid`.
- A field whose comment says "never logged", or whose name says it holds a secret (SECRET_NAMES),
  prints as `<redacted>`: its message gets a `CustomStringConvertible` that leaves it out.
- A proto3 enum is open: a struct over its `Int32` number, a static value per name (the enum's
  name dropped: `CONTACT_KIND_EMAIL` → `.email`); an unknown number is kept.
- A oneof of one field marks presence (`x: T?`); of more, a Swift enum with a case per field.
- A message of a file whose Swift side stays hand-written (HAND_WRITTEN) is named by its Swift type
  and converted by its hand-written functions.
- A message field whose comment starts with "Required" is `T`, not `T?`: a message without it does
  not decode (RAIN_102 naming the field). A field of a message in EMPTY_WHEN_ABSENT is `T` too, an
  absent one read as `T()` and one always written.
- Units stay on the wire's terms (`expires_at_ms` → `expiresAtMilliseconds: Int64`); a Date or
  Duration view is a small hand-written extension beside the generated type (`…+Date.swift`).
Anything the generator does not support yet (maps, nested types, proto3 `optional`, types of a
file that is not generated and not in HAND_WRITTEN) stops it with an error naming the proto element, rather than
producing Swift that is subtly wrong.
"""

import os
import re
import sys

# No __pycache__ beside the scripts.
sys.dont_write_bytecode = True
import gen_authority_calls  # noqa: E402

from google.protobuf import descriptor_pb2

FD = descriptor_pb2.FieldDescriptorProto

# Field names that always hold a secret, whatever their comment says.
SECRET_NAMES = {
    "passphrase", "password", "pin", "code", "token", "access_token", "refresh_token", "phrase",
    "mnemonic", "words", "private_key", "keypair", "secret", "seed", "idempotency_key",
}
SECRET_SUFFIXES = ("_token", "_private_key", "_private_key_hex", "_secret", "_keypair", "_keypair_base58", "_passphrase")

# Words spelled in capitals when they are not the first word of a name, and abbreviations spelled out.
INITIALISMS = {
    "id": "ID", "ids": "IDs", "url": "URL", "uri": "URI", "json": "JSON", "http": "HTTP", "tls": "TLS",
    "pid": "PID", "ms": "Milliseconds",
}

# .swift-format's lineLength.
LINE_LENGTH = 130

BOOL_PREFIXES = ("is_", "has_", "can_", "should_", "was_")

# Swift names the rules above would spell badly, by proto full name.
SWIFT_NAMES = {
    # `is` would not read as a question before these verbs.
    "rain.wallet.v1.LogoutResponse.had_session": "hadSession",
    "rain.wallet.v1.AccountResponse.needs_backup_email": "needsBackupEmail",
    "rain.wallet.v1.SessionPolicy.auto_refresh": "isAutoRefreshEnabled",
    # authority.proto's Swift side names its own passkey messages PasskeyBegin…/PasskeyFinish…;
    # the device's read the other way round.
    "rain.wallet.v1.PasskeyBeginRequest": "BeginPasskeyRequest",
    "rain.wallet.v1.PasskeyBeginResponse": "BeginPasskeyResponse",
    "rain.wallet.v1.PasskeyFinishRequest": "FinishPasskeyRequest",
    "rain.wallet.v1.PasskeyFinishResponse": "FinishPasskeyResponse",
    "rain.wallet.v1.PasskeyCancelRequest": "CancelPasskeyRequest",
    "rain.wallet.v1.PasskeyCancelResponse": "CancelPasskeyResponse",
    "rain.wallet.v1.PasskeyRunRequest": "RunPasskeyRequest",
    # `Event` alone says little beside RainAuthorityAPI's revocation events.
    "rain.wallet.v1.Event": "WatchEvent",
    "rain.wallet.v1.Event.type": "kind",
    # A verb: `isVerify` would not read as a question.
    "rain.wallet.v1.ReadAuditLogRequest.verify": "isVerifyRequested",
    # RainAccess.AuditVerification is the audit log's own result (a typed problem); the wire's
    # form keeps another name so that code seeing both modules needs no qualification.
    "rain.wallet.v1.AuditVerification": "AuditVerificationMessage",
    # authority.proto: the Swift names the authority and the device's client were written against
    # (AuthorityMethod lists them); the proto's are longer and say the hop, which Swift need not.
    "rain.wallet.v1.AuthorityConfirmLoginCodeRequest": "ConfirmCodeRequest",
    "rain.wallet.v1.AuthorityConfirmLoginCodeResponse": "LoginResult",
    "rain.wallet.v1.AuthorityRefreshSessionRequest": "RefreshRequest",
    "rain.wallet.v1.AuthorityExportWalletResponse": "WalletSecrets",
    "rain.wallet.v1.AuthorityAccountInfoResponse": "AccountInfo",
    "rain.wallet.v1.AuthorityWalletResponse": "WalletInfo",
    "rain.wallet.v1.AuthorityPasskeyBeginResponse": "PasskeyCeremony",
    "rain.wallet.v1.AuthorityPasskeyFinishRequest": "PasskeyFinishRequest",
    "rain.wallet.v1.AuthorityPasskeyBeginRequest": "PasskeyBeginRequest",
    "rain.wallet.v1.AuthoritySessionTokens": "SessionTokens",
    "rain.wallet.v1.AuthoritySendLoginCodeRequest": "SendCodeRequest",
    "rain.wallet.v1.AuthoritySendLoginCodeResponse": "SendCodeResult",
    "rain.wallet.v1.AuthorityPasskeyFinishResponse": "PasskeyFinishResult",
    "rain.wallet.v1.AuthorityAccountInfoResponse.needs_backup_email": "needsBackupEmail",
    # `isAccountCreated` would read as a question about the account, not what this login did.
    "rain.wallet.v1.AuthorityConfirmLoginCodeResponse.account_created": "accountCreated",
    "rain.wallet.v1.AuthorityPasskeyFinishResponse.account_created": "accountCreated",
    # The Swift names say the encoding, which the proto says in comments.
    "rain.wallet.v1.AuthorityExportWalletResponse.ethereum_private_key": "ethereumPrivateKeyHex",
    "rain.wallet.v1.AuthorityExportWalletResponse.solana_keypair": "solanaKeypairBase58",
}

class HandWritten:
    """A message or enum whose Swift type is written by hand, as generated messages name it: the
    Swift type and its hand-written conversions (internal functions of RainWire). For a message,
    `read(UnsafeMutablePointer<C>?) throws(RainError) -> T` and
    `write(T, CArena) throws(RainError) -> UnsafeMutablePointer<C>`; for an enum,
    `read(C) -> T` and `write(T) -> C`. With `default` None the field is `T?`: `read` returns nil
    for an absent message or an unknown number, and `write` takes the optional; else the field is
    `T` and `default` is what `read` returns for an absent message or an unknown number. A message
    no generated message names needs no conversions (`read` and `write` None)."""

    def __init__(self, swift_type, read=None, write=None, default=None):
        self.swift_type = swift_type
        self.read = read
        self.write = write
        self.default = default


# The messages and enums with hand-written Swift types that generated messages name, by proto full
# name. One in a generated file is not generated.
HAND_WRITTEN = {
    # session.proto: SessionSnapshot and SessionStateCodec are tuned for the per-call path. An
    # absent state reads as unauthenticated, as readSessionState has it.
    "rain.wallet.v1.SessionState": HandWritten("SessionSnapshot", "readSessionState", "cSessionState", ".unauthenticated"),
    # contact.proto: RainWalletContact (an enum of email and phone) is RainWallet's public type; a
    # contact of a kind this build does not know reads as nil.
    "rain.wallet.v1.Contact": HandWritten("RainWalletContact", "readContact", "cContact"),
    # RainCore's link and key states, which SessionState carries too.
    "rain.wallet.v1.AuthorityLink": HandWritten("AuthorityLinkState", "readAuthorityLink", "cAuthorityLink"),
    "rain.wallet.v1.StorageHealth": HandWritten("StorageHealthState", "readStorageHealth", "cStorageHealth"),
    # RainCore's passkey summary, which the authority's AccountInfo carries too (with dates).
    "rain.wallet.v1.PasskeyInfo": HandWritten("PasskeyInfo", "readPasskeyInfo", "cPasskeyInfo"),
    # Closed Swift enums that RainWallet's API and the CLI's output name (by their raw strings).
    "rain.wallet.v1.Chain": HandWritten("RainChain", "readChain", "cChain"),
    "rain.wallet.v1.ExpiryReason": HandWritten("ExpiryReason", "readExpiryReason", "cExpiryReason"),
    "rain.wallet.v1.EventType": HandWritten("WatchEvent.Kind", "readEventType", "cEventType", ".authState"),
}

# Messages whose absence means their empty value: a field of one is `T` (absent reads as `T()`, and
# it is always written). An absent tokens message is empty tokens, refused where it matters.
EMPTY_WHEN_ABSENT = {"rain.wallet.v1.AuthoritySessionTokens"}

SCALARS = {
    # proto type: (Swift type, Swift default, C → Swift, Swift → C)
    FD.TYPE_INT32: ("Int32", "0", "{}", "{}"),
    FD.TYPE_SINT32: ("Int32", "0", "{}", "{}"),
    FD.TYPE_SFIXED32: ("Int32", "0", "{}", "{}"),
    FD.TYPE_INT64: ("Int64", "0", "{}", "{}"),
    FD.TYPE_SINT64: ("Int64", "0", "{}", "{}"),
    FD.TYPE_SFIXED64: ("Int64", "0", "{}", "{}"),
    FD.TYPE_UINT32: ("UInt32", "0", "{}", "{}"),
    FD.TYPE_FIXED32: ("UInt32", "0", "{}", "{}"),
    FD.TYPE_UINT64: ("UInt64", "0", "{}", "{}"),
    FD.TYPE_FIXED64: ("UInt64", "0", "{}", "{}"),
    FD.TYPE_DOUBLE: ("Double", "0", "{}", "{}"),
    FD.TYPE_FLOAT: ("Float", "0", "{}", "{}"),
    FD.TYPE_BOOL: ("Bool", "false", "{} != 0", "{} ? 1 : 0"),
}


class Unsupported(Exception):
    pass


def camel_to_lower(name):
    """protobuf-c's lower-case form of a CamelCase name (`StorageKeyInfo` → `storage_key_info`)."""
    out = ""
    for i, ch in enumerate(name):
        if ch.isupper():
            if i > 0 and not name[i - 1].isupper():
                out += "_"
            elif i > 0 and i + 1 < len(name) and name[i + 1].islower():
                out += "_"
            out += ch.lower()
        else:
            out += ch
    return out


def lower_camel(name):
    words = name.split("_")
    return words[0] + "".join(INITIALISMS.get(w, w[:1].upper() + w[1:]) for w in words[1:])


def upper_camel(name):
    camel = lower_camel(name)
    return camel[:1].upper() + camel[1:]


def swift_name(field):
    words = field.name.split("_")
    if field.type == FD.TYPE_BOOL and field.label != FD.LABEL_REPEATED and not field.name.startswith(BOOL_PREFIXES):
        words = ["is"] + words
    out = words[0]
    for w in words[1:]:
        out += INITIALISMS.get(w, w[:1].upper() + w[1:])
    return out


def is_secret(field, comment):
    if "never logged" in comment.lower():
        return True
    return field.name in SECRET_NAMES or field.name.endswith(SECRET_SUFFIXES)


def clean_comment(text):
    lines = [ln[1:] if ln.startswith(" ") else ln for ln in text.strip("\n").split("\n")]
    while lines and not lines[-1].strip():
        lines.pop()
    return [ln.rstrip() for ln in lines]


def doc(lines, indent):
    return "".join(f"{indent}///{' ' + ln if ln else ''}\n" for ln in lines)


def quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Field:
    def __init__(self, msg, proto, comment, types):
        self.proto = proto
        self.c = proto.name
        self.name = SWIFT_NAMES.get(f"{msg.full}.{proto.name}") or swift_name(proto)
        self.comment = comment
        self.repeated = proto.label == FD.LABEL_REPEATED
        self.presence = None  # the `has_x` field that marks this one's presence
        self.oneof = None  # (C case field, C case constant) of a single-field oneof: presence
        self.secret = is_secret(proto, comment)
        t = proto.type
        if proto.proto3_optional:
            raise Unsupported(f"{msg.full}.{proto.name}: proto3 optional fields")
        if t == FD.TYPE_GROUP:
            raise Unsupported(f"{msg.full}.{proto.name}: groups")
        self.kind = {FD.TYPE_STRING: "string", FD.TYPE_BYTES: "bytes", FD.TYPE_MESSAGE: "message", FD.TYPE_ENUM: "enum"}.get(
            t, "scalar")
        if self.kind in ("message", "enum"):
            full = proto.type_name.lstrip(".")
            if full not in types:
                raise Unsupported(
                    f"{msg.full}.{proto.name}: {full} is nested or not in a generated file; types from other files")
            if types[full][0] == "map":
                raise Unsupported(f"{msg.full}.{proto.name}: maps")
            self.type_info = types[full]
            self.is_empty_when_absent = full in EMPTY_WHEN_ABSENT
            self.type_name = SWIFT_NAMES.get(full) or full.rsplit(".", 1)[-1]
            self.message_type = self.type_name
            if types[full][0] == "handwritten":
                self.hand_enum = self.kind == "enum"
                self.kind = "handwritten"
                self.hand = types[full][1]
                self.type_name = self.hand.swift_type
                if self.hand.read is None:
                    raise Unsupported(f"{msg.full}.{proto.name}: {full} names no hand-written conversions; fields of it")
                if self.hand_enum and self.repeated:
                    raise Unsupported(f"{msg.full}.{proto.name}: repeated hand-written enums")
        if self.kind == "scalar":
            self.scalar = SCALARS[t]
        self.is_required = comment.lstrip().startswith("Required")
        if self.is_required and (self.repeated or self.kind not in ("message", "handwritten") or
                                 (self.kind == "handwritten" and (self.hand_enum or self.hand.default is not None))):
            raise Unsupported(f"{msg.full}.{proto.name}: \"Required\" on a field that is not a single optional message; such fields")

    @property
    def element_type(self):
        if self.kind in ("message", "enum", "handwritten"):
            return self.type_name
        return {"string": "String", "bytes": "[UInt8]"}.get(self.kind) or self.scalar[0]

    @property
    def is_optional(self):
        if self.is_required:
            return False
        if self.kind == "handwritten":
            return not self.repeated and self.hand.default is None
        if self.kind == "message" and self.is_empty_when_absent and not self.oneof:
            return False
        return not self.repeated and (self.kind == "message" or self.presence or self.oneof)

    @property
    def swift_type(self):
        if self.repeated:
            return f"[{self.element_type}]"
        if self.is_optional:
            return f"{self.element_type}?"
        return self.element_type

    @property
    def default(self):
        """The init's default for the field; None for a required one, which has none."""
        if self.is_required:
            return None
        if self.repeated:
            return "[]"
        if self.is_optional:
            return "nil"
        return self.zero()

    def zero(self):
        """The proto3 default of one value."""
        if self.kind == "enum":
            return f".{self.type_info[1]}"
        if self.kind == "handwritten":
            return self.hand.default
        if self.kind == "message":
            return f"{self.type_name}()"
        return {"string": '""', "bytes": "[]"}.get(self.kind) or self.scalar[1]

    def read_one(self, value):
        """Swift reading one (non-repeated) C value `value`."""
        if self.kind == "string":
            return f"try readString({value}, field: {quote(self.c)})"
        if self.kind == "bytes":
            return f"readBytes({value})"
        if self.kind == "message":
            return f"try readMessage({value}, {self.message_type}.init(c:))"
        if self.kind == "handwritten":
            return f"{self.hand.read}({value})" if self.hand_enum else f"try {self.hand.read}({value})"
        if self.kind == "enum":
            return f"{self.type_name}(rawValue: Int32(bitPattern: {value}.rawValue))"
        return self.scalar[2].format(value)

    def write_one(self, value):
        """Swift making the C value of one Swift value `value`."""
        if self.kind == "string":
            return f"try arena.string({value}, field: {quote(self.c)})"
        if self.kind == "bytes":
            return f"arena.bytes({value})"
        if self.kind == "message":
            return f"arena.box(try {value}.cValue(arena))"
        if self.kind == "handwritten":
            return f"{self.hand.write}({value})" if self.hand_enum else f"try {self.hand.write}({value}, arena)"
        if self.kind == "enum":
            return f"{self.type_info[2]}(rawValue: UInt32(bitPattern: {value}.rawValue))"
        return self.scalar[3].format(value)

    def decode(self, m):
        """Swift reading this field of the C message `m`."""
        v = f"{m}.{self.c}"
        if self.repeated:
            n = f"{m}.n_{self.c}"
            if self.kind == "string":
                return f"try readStrings({v}, count: {n}, field: {quote(self.c)})"
            read = self.read_one("$0")
            if self.kind == "message":
                return f"try readMessages({v}, count: {n}, {self.message_type}.init(c:))"
            if self.kind == "handwritten":
                return f"try readList({v}, count: {n}) {{ (p) throws(RainError) in try {self.hand.read}(p) }}"
            return f"try readList({v}, count: {n}) {{ {read} }}"
        read = self.read_one(v)
        if self.is_required:
            return f"try required({read}, field: {quote(self.c)})"
        if self.kind == "message" and not self.is_optional:
            return f"{read} ?? {self.zero()}"
        if self.presence:
            return f"{m}.{self.presence.c} != 0 ? {read} : nil"
        if self.oneof:
            return f"{m}.{self.oneof[0]} == {self.oneof[1]} ? {read} : nil"
        return read

    def encode(self, m):
        """Swift statements setting this field of the C message `m` from `self`."""
        v = f"self.{self.name}"
        c = f"{m}.{self.c}"
        if self.repeated:
            if self.kind == "string":
                return [f"({m}.n_{self.c}, {c}) = try arena.strings({v}, field: {quote(self.c)})"]
            if self.kind == "message":
                return [f"({m}.n_{self.c}, {c}) = try arena.list({v}) {{ (e) throws(RainError) in arena.box(try e.cValue(arena)) }}"]
            if self.kind == "handwritten":
                return [f"({m}.n_{self.c}, {c}) = try arena.list({v}) {{ (e) throws(RainError) in {self.write_one('e')} }}"]
            return [f"{m}.n_{self.c} = {v}.count", f"{c} = arena.array({v}.map {{ {self.write_one('$0')} }})"]
        if self.oneof:
            return [f"if let value = {v} {{", f"    {m}.{self.oneof[0]} = {self.oneof[1]}",
                    f"    {c} = {self.write_one('value')}", "}"]
        if self.kind == "message" and not self.is_optional:
            return [f"{c} = {self.write_one(v)}"]
        if self.kind == "message":
            return [f"if let value = {v} {{ {c} = {self.write_one('value')} }}"]
        if self.kind == "handwritten":
            return [f"{c} = {self.write_one(v)}"]
        src = f"({v} ?? {self.zero()})" if self.presence else v
        lines = [f"{c} = {self.write_one(src)}"]
        if self.presence:
            lines.append(f"{m}.{self.presence.c} = {v} == nil ? 0 : 1")
        return lines


class Oneof:
    """A oneof of two or more fields: a Swift enum with a case per field, nil when none is set."""

    def __init__(self, msg, proto, comment, members):
        self.c = proto.name
        self.name = lower_camel(proto.name)
        self.type_name = upper_camel(proto.name)
        self.comment = comment
        self.members = members
        self.secret = any(f.secret for f in members)
        self.swift_type = f"{self.type_name}?"
        self.default = "nil"
        self.case_field = f"{proto.name}_case"

    def render_enum(self):
        out = [f"    /// Which of `{self.c}`'s fields is set.\n"]
        out.append(f"    public enum {self.type_name}: Sendable, Hashable {{\n")
        for f in self.members:
            if f.comment:
                out.append(doc(clean_comment(f.comment), "        "))
            out.append(f"        case {f.name}({f.element_type})\n")
        out.append("    }\n\n")
        return "".join(out)

    def decode(self, m):
        parts = []
        for f in self.members:
            if f.kind == "message":
                value = (f"try readMessage({m}.{f.c}) {{ (p) throws(RainError) -> {self.type_name} in "
                         f".{f.name}(try {f.type_name}(c: p)) }}")
            else:
                value = f".{f.name}({f.read_one(f'{m}.{f.c}')})"
            parts.append(f"{m}.{self.case_field} == {f.oneof[1]} ? {value}")
        return " : ".join(parts) + " : nil"

    def encode(self, m):
        lines = [f"switch self.{self.name} {{", "case nil: break"]
        for f in self.members:
            lines += [f"case .{f.name}(let value):", f"    {m}.{self.case_field} = {f.oneof[1]}",
                      f"    {m}.{f.c} = {f.write_one('value')}"]
        lines.append("}")
        return lines


class Message:
    def __init__(self, file, proto, path, comments, c_prefix, fn_prefix, types):
        self.proto = proto
        self.full = f"{file.package}.{proto.name}"
        self.name = SWIFT_NAMES.get(self.full) or proto.name
        self.c_type = c_prefix + proto.name
        self.c_init = fn_prefix + camel_to_lower(proto.name) + "__init"
        self.comment = comments.get(path, "")
        if proto.nested_type or proto.enum_type:
            raise Unsupported(f"{self.full}: nested messages or enums")
        fields = [Field(self, f, comments.get(path + (2, i), ""), types) for i, f in enumerate(proto.field)]
        c_upper = (fn_prefix + camel_to_lower(proto.name)).upper()
        self.fields = []
        oneofs = {}
        for f in fields:
            if not f.proto.HasField("oneof_index"):
                self.fields.append(f)
                continue
            index = f.proto.oneof_index
            decl = proto.oneof_decl[index]
            members = [g for g in fields if g.proto.HasField("oneof_index") and g.proto.oneof_index == index]
            for g in members:
                if g.kind == "handwritten":
                    raise Unsupported(f"{self.full}.{g.c}: a hand-written message in a oneof")
                g.oneof = (f"{decl.name}_case", f"{c_upper}__{decl.name.upper()}_{g.c.upper()}")
            if len(members) == 1:
                # A oneof of one field marks its presence (what proto3 `optional` does): `x: T?`.
                comment = f.comment or comments.get(path + (8, index), "")
                f.comment = comment
                self.fields.append(f)
            elif index not in oneofs:
                oneofs[index] = Oneof(self, decl, comments.get(path + (8, index), ""), members)
                self.fields.append(oneofs[index])
        self.oneofs = list(oneofs.values())
        by_name = {f.c: f for f in self.fields if isinstance(f, Field)}
        for f in list(self.fields):
            if not isinstance(f, Field):
                continue
            target = by_name.get(f.c[4:]) if f.c.startswith("has_") and f.proto.type == FD.TYPE_BOOL else None
            if target and not target.repeated and target.kind not in ("message", "handwritten") and not target.oneof and not f.oneof:
                target.presence = f
                self.fields.remove(f)

    def render(self):
        out = []
        summary = clean_comment(self.comment) if self.comment else [f"The `{self.name}` message."]
        out.append(doc(summary, ""))
        conformances = "WireMessage, Hashable"
        secrets = [f for f in self.fields if f.secret]
        if secrets:
            conformances += ", CustomStringConvertible"
        out.append(f"public struct {self.name}: {conformances} {{\n")
        for o in self.oneofs:
            out.append(o.render_enum())
        for f in self.fields:
            if f.comment:
                out.append(doc(clean_comment(f.comment), "    "))
            out.append(f"    public var {f.name}: {f.swift_type}\n")
        if self.fields:
            out.append("\n")
        article = "An" if self.name[:1] in "AEIOU" else "A"
        out.append(f"    /// {article} `{self.name}`; an argument left out is its proto3 default.\n")
        if not self.fields:
            out.append("    public init() {}\n")
        else:
            params = [f"{f.name}: {f.swift_type}" + ("" if f.default is None else f" = {f.default}") for f in self.fields]
            line = f"    public init({', '.join(params)}) {{"
            if len(line) <= 130:
                out.append(line + "\n")
            else:
                out.append("    public init(\n")
                out.append("".join(f"        {p}{',' if i + 1 < len(params) else ''}\n" for i, p in enumerate(params)))
                out.append("    ) {\n")
            for f in self.fields:
                out.append(f"        self.{f.name} = {f.name}\n")
            out.append("    }\n")
        if secrets:
            parts = []
            for f in self.fields:
                parts.append(f"{f.name}: <redacted>" if f.secret else f"{f.name}: \\(String(describing: {f.name}))")
            out.append("\n")
            names = ", ".join(f"`{f.name}`" for f in secrets)
            out.append(f"    /// The message with {names} redacted.\n")
            out.append("    public var description: String {\n")
            segments, current = [], f"{self.name}("
            for i, p in enumerate(parts):
                piece = p + (", " if i + 1 < len(parts) else ")")
                if len(current) + len(piece) > 90:
                    segments.append(current)
                    current = ""
                current += piece
            segments.append(current)
            out.append(f'        "{segments[0]}"\n')
            for seg in segments[1:]:
                out.append(f'            + "{seg}"\n')
            out.append("    }\n")
        out.append("}\n")
        return "".join(out)

    def render_c(self):
        n = self.name
        out = [f"extension {n} {{\n"]
        out.append(f"    /// Decodes a `{n}`.\n")
        out.append(f"    /// - Throws: RAIN_102 for bytes that are not a `{n}`, or a string with NUL or not UTF-8.\n")
        out.append(f"    public static func decode(_ bytes: [UInt8]) throws(RainError) -> {n} {{\n")
        args = f"bytes, name: {quote(n)}, {self.c_init}, read: Self.init(c:))"
        if len(args) + 26 <= 130:
            out.append(f"        try unpackMessage({args}\n")
        elif len(args) + 12 <= 130:
            out.append(f"        try unpackMessage(\n            {args}\n")
        else:
            out.append(f"        try unpackMessage(\n            bytes, name: {quote(n)}, {self.c_init},\n")
            out.append("            read: Self.init(c:))\n")
        out.append("    }\n\n")
        out.append(f"    /// Encodes a `{n}`.\n")
        out.append("    /// - Throws: RAIN_102 for a string with NUL (protobuf-c cannot carry it).\n")
        out.append("    public func encode() throws(RainError) -> [UInt8] {\n")
        if not self.fields:
            out.append("        []  // no fields: no bytes\n    }\n\n")
        else:
            out.append("        let arena = CArena()\n")
            out.append("        var m = try cValue(arena)\n")
            out.append("        // The C message points into the arena: it lives until pack returns.\n")
            out.append("        return withExtendedLifetime(arena) { packMessage(&m) }\n    }\n\n")

        # Reading from C.
        out.append(f"    /// Copies a C `{n}` (its strings checked).\n")
        if not self.fields:
            out.append(f"    init(c _: UnsafeMutablePointer<{self.c_type}>) throws(RainError) {{ self.init() }}\n\n")
        else:
            out.append(f"    init(c p: UnsafeMutablePointer<{self.c_type}>) throws(RainError) {{\n")
            out.append("        let m = p.pointee\n")
            out.append("        self.init(\n")
            for i, f in enumerate(self.fields):
                out.append(f"            {f.name}: {f.decode('m')}{',' if i + 1 < len(self.fields) else ')'}\n")
            out.append("    }\n\n")
        # Writing to C.
        out.append(f"    /// The C `{n}`, its pointers owned by `arena`.\n")
        sig = f"func cValue(_ arena: CArena) throws(RainError) -> {self.c_type}"
        out.append(f"    {sig} {{\n")
        if self.fields:
            out.append(f"        var m = cMessage({self.c_init})\n")
            for f in self.fields:
                for line in f.encode("m"):
                    out.append(f"        {line}\n")
            out.append("        return m\n")
        else:
            out.append(f"        cMessage({self.c_init})\n")
        out.append("    }\n}\n")
        return "".join(out)


class Enum:
    """A proto3 enum: open, so a Swift struct over its number with a static value per known name."""

    def __init__(self, file, proto, path, comments):
        self.name = SWIFT_NAMES.get(f"{file.package}.{proto.name}") or proto.name
        self.comment = comments.get(path, "")
        prefix = camel_to_lower(proto.name).upper() + "_"
        self.values = []
        for i, v in enumerate(proto.value):
            short = v.name[len(prefix):] if v.name.startswith(prefix) else v.name
            name = lower_camel(short.lower())
            if name[:1].isdigit():
                name = "_" + name
            self.values.append((name, v.number, comments.get(path + (2, i), ""), v.name))
        zero = [v for v in self.values if v[1] == 0]
        if not zero:
            raise Unsupported(f"{file.package}.{proto.name}: an enum without a 0 value")
        self.zero = zero[0][0]

    def render(self):
        n = self.name
        out = [doc(clean_comment(self.comment) if self.comment else [f"The `{n}` enum."], "")]
        out.append(f"/// Open, as proto3 enums are: a number this build does not know is kept, and printed as it is.\n")
        out.append(f"public struct {n}: RawRepresentable, Sendable, Hashable, CustomStringConvertible {{\n")
        for name, number, comment, _ in self.values:
            out.append(doc(clean_comment(comment), "    ") if comment else "")
            out.append(f"    public static let {name} = {n}(rawValue: {number})\n")
        out.append("\n    /// The number on the wire.\n    public var rawValue: Int32\n\n")
        out.append("    /// The value of `rawValue`, known or not.\n")
        out.append("    public init(rawValue: Int32) { self.rawValue = rawValue }\n\n")
        out.append("    /// The proto name of a known value, else the number.\n")
        out.append("    public var description: String {\n        switch rawValue {\n")
        for name, number, _, proto_name in self.values:
            out.append(f"        case {number}: {quote(proto_name)}\n")
        out.append("        default: String(rawValue)\n        }\n    }\n}\n")
        return "".join(out)


def types_of(fds, generated, c_prefixes):
    """Every top-level message and enum of the generated files, and the HAND_WRITTEN messages of the
    others: full name → (kind, enum's 0 value or HandWritten, C type)."""
    types = {}
    for file in fds.file:
        if file.name not in generated:
            for m in list(file.message_type) + list(file.enum_type):
                full = f"{file.package}.{m.name}"
                if full in HAND_WRITTEN:
                    types[full] = ("handwritten", HAND_WRITTEN[full], c_prefixes(file) + m.name)
            continue
        for m in file.message_type:
            kind = "map" if m.options.map_entry else "message"
            types[f"{file.package}.{m.name}"] = (kind, None, c_prefixes(file) + m.name)
        for i, e in enumerate(file.enum_type):
            zero = Enum(file, e, (5, i), {}).zero
            types[f"{file.package}.{e.name}"] = ("enum", zero, c_prefixes(file) + e.name)
        for m in list(file.message_type) + list(file.enum_type):
            full = f"{file.package}.{m.name}"
            if full in HAND_WRITTEN:
                types[full] = ("handwritten", HAND_WRITTEN[full], c_prefixes(file) + m.name)
    return types


def c_prefix_of(file):
    return "__".join(p[:1].upper() + p[1:] for p in file.package.split(".")) + "__"


def comments_of(file):
    out = {}
    for loc in file.source_code_info.location:
        if loc.leading_comments:
            out[tuple(loc.path)] = loc.leading_comments
        elif loc.trailing_comments:
            out[tuple(loc.path)] = loc.trailing_comments
    return out


def generate(file, types):
    if file.syntax != "proto3":
        raise Unsupported(f"{file.name}: only proto3")
    c_prefix = c_prefix_of(file)
    fn_prefix = "__".join(file.package.split(".")) + "__"
    comments = comments_of(file)
    hand = lambda d: f"{file.package}.{d.name}" in HAND_WRITTEN
    enums = [Enum(file, e, (5, i), comments) for i, e in enumerate(file.enum_type) if not hand(e)]
    messages = [Message(file, m, (4, i), comments, c_prefix, fn_prefix, types)
                for i, m in enumerate(file.message_type) if not hand(m)]
    out = [f"// GENERATED by scripts/gen-proto from proto/{file.name}. Do not edit.\n"]
    out.append("internal import CProtobufC\ninternal import CRainProto\nimport RainCore\n\n")
    out.append(f"// The messages of proto/{file.name}, and their conversion to and from protobuf-c.\n")
    for e in enums:
        out.append("\n")
        out.append(e.render())
    for m in messages:
        out.append("\n")
        out.append(m.render())
    for m in messages:
        out.append("\n")
        out.append(m.render_c())
    text = "".join(out)
    if any(len(line) > LINE_LENGTH for line in text.split("\n")):
        # Some protobuf-c names alone nearly fill a line; rather than wrap them as the formatter
        # would, such a file is left out of `swift format`.
        header, rest = text.split("\n", 1)
        text = f"{header}\n// swift-format-ignore-file\n{rest}"
    return text, messages


# The service of the authority hop (PROTOCOL.md §8); every other service is the device protocol's.
AUTHORITY_SERVICE = "Authority"


def swift_type_of(full, types):
    """The Swift type of a message by proto full name: its hand-written type, its SWIFT_NAMES name or
    its own."""
    if full not in types:
        raise Unsupported(f"{full}: a method's message from a file that is neither generated nor in HAND_WRITTEN")
    if types[full][0] == "handwritten":
        return types[full][1].swift_type
    return SWIFT_NAMES.get(full) or full.rsplit(".", 1)[-1]


def generate_methods(files, types):
    """Swift `Method` (the device protocol) and `AuthorityMethod` (the authority hop) from the service
    blocks of the proto files: a constant per rpc holding its full name, named lowerCamel(service) +
    rpc (the service left out where the enum holds one service), and the declarations the route
    tests compare the routes with. A service `XService` is `X` on the wire: its name would collide
    with a message `X` of the package otherwise."""
    enums = {"Method": [], "AuthorityMethod": []}
    for file in files:
        comments = comments_of(file)
        for i, service in enumerate(file.service):
            wire = service.name.removesuffix("Service") or service.name
            enum = "AuthorityMethod" if wire == AUTHORITY_SERVICE else "Method"
            for j, m in enumerate(service.method):
                if m.client_streaming:
                    raise Unsupported(f"{file.package}.{service.name}.{m.name}: client streams")
                request = swift_type_of(m.input_type.lstrip("."), types)
                response = swift_type_of(m.output_type.lstrip("."), types)
                comment = clean_comment(comments.get((6, i, 2, j), ""))
                enums[enum].append((wire, m.name, f"/{file.package}.{wire}/{m.name}", request, response,
                                    m.server_streaming, comment))
    summaries = {
        "Method": ["The device protocol's full method names (gRPC form, `/package.Service/Rpc`): one per `rpc`",
                   "of the proto files' device services. proto/PROTOCOL.md gives each one's policy and errors."],
        "AuthorityMethod": ["The authority hop's full method names (`service Authority` of proto/authority.proto): a",
                            "device daemon calling a remote authority (`rainwalletd authority --listen HOST:PORT`) with",
                            "the same framing as the device protocol. Requests carry no profile: the app id and device",
                            "id are request fields."],
    }
    # RainCore for the hand-written types a declaration names (SessionSnapshot).
    out = ["// GENERATED by scripts/gen-proto from the service blocks of proto/*.proto. Do not edit.\n",
           "import RainCore\n\n"]
    for enum, methods in enums.items():
        services = {m[0] for m in methods}
        out.append("\n" if enum != "Method" else "")
        out.append(doc(summaries[enum], ""))
        out.append(f"public enum {enum} {{\n")
        declarations = []
        for service, rpc, full, request, response, stream, comment in methods:
            name = rpc[:1].lower() + rpc[1:] if len(services) == 1 else service[:1].lower() + service[1:] + rpc
            answer = f"a stream of `{response}`" if stream else f"`{response}`"
            out.append(doc(comment + ([""] if comment else []) + [f"`{request}` → {answer}."], "    "))
            out.append(f"    public static let {name} = {quote(full)}\n")
            stream_arg = ", isServerStream: true" if stream else ""
            args = f"{name}, {request}.self, {response}.self{stream_arg}"
            if len(args) + len("        MethodDeclaration(),") > LINE_LENGTH:
                declarations.append(f"MethodDeclaration(\n            {args})")
            else:
                declarations.append(f"MethodDeclaration({args})")
        out.append("\n    /// Every method with the messages its declaration names, in declaration order.\n")
        out.append("    public static let declarations = [\n")
        out.append("".join(f"        {d},\n" for d in declarations))
        out.append("    ]\n}\n")
    return "".join(out)


# Where each generated file goes: OUT_DIR/<module>/, copied by scripts/gen-proto into
# Sources/<module>/Generated/.
AUTHORITY_FILES = (("RainAuthorityAPI", "authority_calls.pb.swift"),
                   ("RainAuthorityServer", "authority_routes.pb.swift"),
                   ("RainTestSupport", "forwarding_authority.pb.swift"))


def main():
    descriptor_set, out_dir, *names = sys.argv[1:]
    fds = descriptor_pb2.FileDescriptorSet()
    with open(descriptor_set, "rb") as f:
        fds.ParseFromString(f.read())
    files = {f.name: f for f in fds.file}
    bases = [name.removeprefix("proto/") for name in names]
    types = types_of(fds, set(bases), c_prefix_of)
    outputs = {}
    try:
        for base in bases:
            text, _ = generate(files[base], types)
            outputs[("RainWire", f"{base.removesuffix('.proto')}.pb.swift")] = text
        outputs[("RainWire", "services.pb.swift")] = generate_methods([files[base] for base in bases], types)
        texts = gen_authority_calls.generate(fds, [files[base] for base in bases], types, sys.modules[__name__])
        outputs.update(zip(AUTHORITY_FILES, texts))
    except Unsupported as e:
        sys.exit(f"gen-swift-messages: {e} are not supported yet")
    for (module, name), text in outputs.items():
        os.makedirs(f"{out_dir}/{module}", exist_ok=True)
        with open(f"{out_dir}/{module}/{name}", "w") as out:
            out.write(text)


if __name__ == "__main__":
    main()
