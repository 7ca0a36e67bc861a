import FoundationEssentials
import RainCore

// `SessionState` (proto/session.proto) answers the cheapest and most frequent calls (GetState,
// AwaitRestore, Refresh) and rides in every Watch event, so protobuf-c's encoding and decoding
// weigh on every call (docs/performance.md). Written and read directly here, by the rules of
// EnvelopeCodec.swift: the bytes protobuf-c packs, and its canonical form read directly with
// anything else left to protobuf-c (`SessionStateCodecTests` checks both agree).

extension SessionSnapshot {
    /// The `SessionState` bytes, as protobuf-c packs them.
    /// - Throws: RAIN_102 for a string with an embedded NUL.
    package func canonicalBytes() throws(RainError) -> [UInt8] {
        // Only a size computed wrong gets nil (SessionStateCodecTests fail then): protobuf-c's bytes.
        if let bytes = try directBytes() { return bytes }
        return try encodeReference()
    }

    /// The bytes written directly; nil when they did not fill the size computed for them.
    package func directBytes() throws(RainError) -> [UInt8]? {
        let account = accountID ?? ""
        let wallet = walletID ?? ""
        let warning = storageWarning ?? ""
        try EnvelopeSize.refuseNUL(account, field: "account id")
        try EnvelopeSize.refuseNUL(wallet, field: "wallet id")
        try EnvelopeSize.refuseNUL(warning, field: "storage warning")
        let contactValue = contact?.value ?? ""
        try EnvelopeSize.refuseNUL(contactValue, field: "contact")
        let authValue: UInt64 =
            switch authState {
            case .loading: 1
            case .authenticated: 2
            case .unauthenticated: 3
            }
        let (statusValue, expiresAt): (UInt64, Int64) =
            switch sessionState {
            case .loading, .none: (0, 0)
            case .active(let at): (1, at.unixMilliseconds)
            case .expired: (2, 0)
            }
        let contactKind: UInt64 =
            switch contact {
            case .email: 1
            case .phone: 2
            case nil: 0
            }
        let contactLength = EnvelopeSize.varintField(1, contactKind) + EnvelopeSize.string(2, contactValue)
        let linkState = authorityLink?.phase.rawValue ?? ""
        let linkError = authorityLink?.lastError ?? ""
        let linkSince = authorityLink?.since.unixMilliseconds ?? 0
        let stream = authorityLink?.revocationStream
        let streamWord = stream?.word ?? ""
        let streamError = stream?.lastError ?? ""
        let streamSince = stream?.since.unixMilliseconds ?? 0
        try EnvelopeSize.refuseNUL(linkError, field: "authority link error")
        try EnvelopeSize.refuseNUL(streamError, field: "revocation stream error")
        let linkLength =
            EnvelopeSize.string(1, linkState) + EnvelopeSize.string(2, linkError)
            + EnvelopeSize.varintField(3, UInt64(bitPattern: linkSince)) + EnvelopeSize.string(4, streamWord)
            + EnvelopeSize.string(5, streamError) + EnvelopeSize.varintField(6, UInt64(bitPattern: streamSince))
        let storageWord = storage?.word ?? ""
        let storageError = storage?.lastError ?? ""
        let storageSince = storage?.since.unixMilliseconds ?? 0
        try EnvelopeSize.refuseNUL(storageError, field: "storage health error")
        let storageLength =
            EnvelopeSize.string(1, storageWord) + EnvelopeSize.string(2, storageError)
            + EnvelopeSize.varintField(3, UInt64(bitPattern: storageSince))
        let size =
            EnvelopeSize.varintField(1, authValue) + EnvelopeSize.varintField(2, statusValue)
            + EnvelopeSize.varintField(3, UInt64(bitPattern: expiresAt)) + EnvelopeSize.string(4, account)
            + EnvelopeSize.string(5, wallet) + EnvelopeSize.varintField(6, hasActiveSession ? 1 : 0)
            + (contact == nil ? 0 : EnvelopeSize.message(7, contactLength)) + EnvelopeSize.string(8, warning)
            + (authorityLink == nil ? 0 : EnvelopeSize.message(9, linkLength))
            + (storage == nil ? 0 : EnvelopeSize.message(10, storageLength))
        return ProtoWriter.bytes(exactly: size) { w in
            w.varintField(1, authValue)
            w.varintField(2, statusValue)
            w.varintField(3, UInt64(bitPattern: expiresAt))
            w.stringField(4, account)
            w.stringField(5, wallet)
            w.varintField(6, hasActiveSession ? 1 : 0)
            if contact != nil {
                w.tag(7, .lengthDelimited)
                w.varint(UInt64(contactLength))
                w.varintField(1, contactKind)
                w.stringField(2, contactValue)
            }
            w.stringField(8, warning)
            if authorityLink != nil {
                w.tag(9, .lengthDelimited)
                w.varint(UInt64(linkLength))
                w.stringField(1, linkState)
                w.stringField(2, linkError)
                w.varintField(3, UInt64(bitPattern: linkSince))
                w.stringField(4, streamWord)
                w.stringField(5, streamError)
                w.varintField(6, UInt64(bitPattern: streamSince))
            }
            if storage != nil {
                w.tag(10, .lengthDelimited)
                w.varint(UInt64(storageLength))
                w.stringField(1, storageWord)
                w.stringField(2, storageError)
                w.varintField(3, UInt64(bitPattern: storageSince))
            }
        }
    }

    /// Reads the canonical form of a `SessionState`; nil where protobuf-c must decide.
    package static func decodeCanonical(_ bytes: [UInt8]) -> SessionSnapshot? {
        bytes.withUnsafeBufferPointer { buf -> SessionSnapshot? in
            var r = ProtoReader(buf)
            return r.sessionState()
        }
    }
}

extension ProtoReader {
    /// An enum value as protobuf-c reads it (an int32); nil past 31 bits (its truncation is its business).
    private mutating func enumValue() -> UInt64? {
        guard let v = varint(), v <= UInt64(Int32.max) else { return nil }
        return v
    }

    mutating func sessionState() -> SessionSnapshot? {
        var auth: UInt64 = 0
        var status: UInt64 = 0
        var expiresAt: Int64 = 0
        var account = ""
        var wallet = ""
        var hasActive = false
        var contact: RainWalletContact?
        var warning = ""
        var link: AuthorityLinkState?
        var storage: StorageHealthState?
        let isRead = eachField { p, number, type in
            switch (number, type) {
            case (1, Self.varintType): p.enumValue().map { auth = $0 } != nil
            case (2, Self.varintType): p.enumValue().map { status = $0 } != nil
            case (3, Self.varintType): p.varint().map { expiresAt = Int64(bitPattern: $0) } != nil
            case (4, Self.delimitedType): p.string().map { account = $0 } != nil
            case (5, Self.delimitedType): p.string().map { wallet = $0 } != nil
            case (6, Self.varintType): p.varint().map { hasActive = $0 != 0 } != nil
            case (7, Self.delimitedType):
                p.message { $0.contact() }.map { c in
                    contact = c.kind == 1 ? .email(c.value) : c.kind == 2 ? .phone(c.value) : nil
                } != nil
            case (8, Self.delimitedType): p.string().map { warning = $0 } != nil
            case (9, Self.delimitedType): p.message { $0.authorityLink() }.map { link = $0 } != nil
            case (10, Self.delimitedType): p.message { $0.storageHealth() }.map { storage = $0 } != nil
            default: false
            }
        }
        guard isRead else { return nil }
        let authState: AuthState = auth == 1 ? .loading : auth == 2 ? .authenticated : .unauthenticated
        let session: SessionState =
            status == 1
            ? .active(expiresAt: Date(unixMilliseconds: expiresAt))
            : status == 2 ? .expired : authState == .loading ? .loading : .none
        return SessionSnapshot(
            authState: authState, sessionState: session, accountID: account.isEmpty ? nil : account,
            walletID: wallet.isEmpty ? nil : wallet, contact: contact, hasActiveSession: hasActive,
            storageWarning: warning.isEmpty ? nil : warning, authorityLink: link, storage: storage)
    }

    /// An `AuthorityLink`; nil (protobuf-c decides) for a state this build does not know.
    private mutating func authorityLink() -> AuthorityLinkState? {
        var phase: AuthorityLinkState.Phase?
        var error = ""
        var since: Int64 = 0
        var stream = ""
        var streamError = ""
        var streamSince: Int64 = 0
        let isRead = eachField { p, number, type in
            switch (number, type) {
            case (1, Self.delimitedType): p.linkPhase().map { phase = $0 } != nil
            case (2, Self.delimitedType): p.string().map { error = $0 } != nil
            case (3, Self.varintType): p.varint().map { since = Int64(bitPattern: $0) } != nil
            case (4, Self.delimitedType): p.string().map { stream = $0 } != nil
            case (5, Self.delimitedType): p.string().map { streamError = $0 } != nil
            case (6, Self.varintType): p.varint().map { streamSince = Int64(bitPattern: $0) } != nil
            default: false
            }
        }
        guard isRead, let phase else { return nil }
        let revocationStream: RevocationStreamState?
        switch stream {
        case "": revocationStream = nil
        case "up", "down":
            revocationStream = RevocationStreamState(
                isUp: stream == "up", lastError: streamError.isEmpty ? nil : streamError,
                since: Date(unixMilliseconds: streamSince))
        default: return nil
        }
        return AuthorityLinkState(
            phase: phase, lastError: error.isEmpty ? nil : error, since: Date(unixMilliseconds: since),
            revocationStream: revocationStream)
    }

    /// A `StorageHealth`; nil (protobuf-c decides) for a state this build does not know.
    private mutating func storageHealth() -> StorageHealthState? {
        var word = ""
        var error = ""
        var since: Int64 = 0
        let isRead = eachField { p, number, type in
            switch (number, type) {
            case (1, Self.delimitedType): p.string().map { word = $0 } != nil
            case (2, Self.delimitedType): p.string().map { error = $0 } != nil
            case (3, Self.varintType): p.varint().map { since = Int64(bitPattern: $0) } != nil
            default: false
            }
        }
        guard isRead, word == "available" || word == "unavailable" else { return nil }
        return StorageHealthState(
            isAvailable: word == "available", lastError: error.isEmpty ? nil : error, since: Date(unixMilliseconds: since))
    }

    /// A link state's name matched against the phases' names, packed into integers (every answer
    /// carries one: making a string of it, looking that up among the usual strings, then matching
    /// it by name weighs on every answer); nil for any other bytes. The names are ASCII, so
    /// each of their bytes reads as a one-byte varint: a longer varint is no name.
    private mutating func linkPhase() -> AuthorityLinkState.Phase? {
        guard var name = nested() else { return nil }
        var key = PackedName()
        while !name.isAtEnd {
            guard let b = name.varint(), b < 0x80, key.append(UInt8(b)) else { return nil }
        }
        for p in Self.phases where p.key == key { return p.phase }
        return nil
    }

    /// Up to 16 bytes and their count, for comparing short names at once.
    private struct PackedName: Equatable {
        var low: UInt64 = 0
        var high: UInt64 = 0
        var count = 0

        init() {}

        init?(_ s: String) {
            for b in s.utf8 { guard append(b) else { return nil } }
        }

        /// Adds a byte; false when 16 are already held.
        mutating func append(_ b: UInt8) -> Bool {
            switch count {
            case 0..<8: low |= UInt64(b) << (8 * UInt64(count))
            case 8..<16: high |= UInt64(b) << (8 * UInt64(count - 8))
            default: return false
            }
            count += 1
            return true
        }
    }

    private static let phases: [(key: PackedName, phase: AuthorityLinkState.Phase)] = AuthorityLinkState.Phase.allCases
        .compactMap { phase in PackedName(phase.rawValue).map { ($0, phase) } }

    private mutating func contact() -> (kind: UInt64, value: String)? {
        var kind: UInt64 = 0
        var value = ""
        let isRead = eachField { p, number, type in
            switch (number, type) {
            case (1, Self.varintType): p.enumValue().map { kind = $0 } != nil
            case (2, Self.delimitedType): p.string().map { value = $0 } != nil
            default: false
            }
        }
        return isRead ? (kind, value) : nil
    }
}
