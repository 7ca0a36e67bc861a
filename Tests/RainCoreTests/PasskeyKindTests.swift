import RainCore
import Testing

/// How a registration's passkey is named in the account's list.
struct PasskeyKindTests {
    static let otherAAGUID: [UInt8] = Array(1...16)

    @Test(
        "RainWallet's own AAGUIDs name the platform and file authenticators; otherwise the attachment, then the transports decide",
        arguments: [
            (PasskeyKind.platformAAGUID, nil, [], PasskeyKind.platform),
            (PasskeyKind.fileAAGUID, "platform", ["internal"], .file),
            (otherAAGUID, "cross-platform", [], .securityKey),
            (otherAAGUID, nil, ["usb"], .securityKey),
            (otherAAGUID, nil, ["hybrid", "internal"], .securityKey),
            (otherAAGUID, "platform", [], .platform),
            (otherAAGUID, nil, ["internal"], .platform),
            (Array(repeating: 0, count: 16), nil, [], .unknown),
        ] as [([UInt8], String?, [String], PasskeyKind)])
    func classifies(aaguid: [UInt8], attachment: String?, transports: [String], expected: PasskeyKind) {
        #expect(PasskeyKind.classify(aaguid: aaguid, attachment: attachment, transports: transports) == expected)
    }

    @Test("a kind is named by its raw value on the wire and unknown for none")
    func names() {
        #expect(PasskeyKind.securityKey.rawValue == "security-key")
        #expect(PasskeyKind.unknown.rawValue.isEmpty && PasskeyKind.unknown.displayName == "unknown")
        #expect(PasskeyKind(rawValue: "platform") == .platform)
        #expect(PasskeyKind.platformAAGUID.count == 16 && PasskeyKind.fileAAGUID.count == 16)
        #expect(PasskeyKind.platformAAGUID != PasskeyKind.fileAAGUID)
    }
}
