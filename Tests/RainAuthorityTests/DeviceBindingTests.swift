import Foundation
import RainAuthorityAPI
import RainAuthorityServer
import RainCore
import RainCrypto
import RainTestSupport
import RainTransport
import RainWire
import Testing

@testable import RainAuthority
@testable import RainStore

/// Every call with a token is bound to the device key of its session.
@Suite("Device binding")
struct DeviceBindingTests {
    static let app = AuthorityFixture.app

    // MARK: - The connection proof

    @Test("a proof verifies for its challenge and channel binding only")
    func proofMessage() throws {
        let key = try Ed25519PrivateKey()
        var connection = try ConnectionDeviceProof()
        let binding = Array(repeating: UInt8(7), count: 32)
        func request(_ challenge: [UInt8], _ binding: [UInt8]) throws -> AuthorityProveDeviceRequest {
            let message = DeviceBinding.signedMessage(deviceID: "dev-1", challenge: challenge, channelBinding: binding)
            return AuthorityProveDeviceRequest(
                deviceID: "dev-1", devicePublicKey: key.publicKey.rawRepresentation, signature: try key.signature(for: message))
        }
        // Another connection's channel binding (a relay), or another connection's challenge: refused.
        for bad in [
            try request(connection.challenge, Array(repeating: 8, count: 32)),
            try request(Array(repeating: 1, count: 32), binding),
        ] {
            var copy = connection
            let error = try #require(throws: RainError.self) { try copy.verify(bad, channelBinding: binding) }
            #expect(error.code == .provider)
            #expect(error.details.reason == DeviceBinding.proofFailedReason)
            #expect(copy.proof.isEmpty)
        }
        // Plain TCP (no binding) is not TLS: a TLS-bound signature does not verify there.
        var plain = connection
        #expect(throws: RainError.self) { try plain.verify(try request(connection.challenge, binding), channelBinding: nil) }

        try connection.verify(try request(connection.challenge, binding), channelBinding: binding)
        #expect(connection.proof == DeviceProof(deviceID: "dev-1", keys: [.ed25519(key.publicKey)]))
        // Again: harmless.
        try connection.verify(try request(connection.challenge, binding), channelBinding: binding)
        #expect(connection.proof.keys.count == 1)
    }

    @Test("the signed message separates its fields by length")
    func messageFormat() {
        let a = DeviceBinding.signedMessage(deviceID: "ab", challenge: [1], channelBinding: [])
        let b = DeviceBinding.signedMessage(deviceID: "a", challenge: Array("b".utf8) + [1], channelBinding: [])
        #expect(a != b)
        #expect(Array(a.prefix(21)) == Array("rain.device-proof.v1".utf8) + [0])
        #expect(Array(a[21..<25]) == [0, 0, 0, 2])
    }

    @Test("a connection proves at most two keys, of one device; P-256 keys prove like Ed25519 ones")
    func keyLimits() throws {
        var connection = try ConnectionDeviceProof()
        let signers: [any DeviceSigner] = [
            SoftwareDeviceSigner(try Ed25519PrivateKey()), TestP256DeviceSigner(try P256PrivateKey()),
            SoftwareDeviceSigner(try Ed25519PrivateKey()),
        ]
        func request(_ signer: any DeviceSigner, device: String = "dev-1") throws -> AuthorityProveDeviceRequest {
            let message = DeviceBinding.signedMessage(deviceID: device, challenge: connection.challenge, channelBinding: [])
            return AuthorityProveDeviceRequest(
                deviceID: device, devicePublicKey: signer.publicKey.wireBytes, signature: try signer.sign(message))
        }
        try connection.verify(try request(signers[0]), channelBinding: nil)
        let otherDevice = try #require(throws: RainError.self) {
            try connection.verify(try request(signers[1], device: "dev-2"), channelBinding: nil)
        }
        #expect(otherDevice.code == .invalidArgument)
        try connection.verify(try request(signers[1]), channelBinding: nil)
        #expect(connection.proof.keys == signers.prefix(2).map(\.publicKey))
        let third = try #require(throws: RainError.self) { try connection.verify(try request(signers[2]), channelBinding: nil) }
        #expect(third.details.reason == "too_many_keys")
    }

    // MARK: - In-process (embedded)

    @Test("no proof is RAIN_501 device_proof_required on every token call, and never revokes")
    func unprovenNeverRevokes() async throws {
        try await AuthorityFixture.with { f in
            let login = try await f.login()
            let none = DeviceProof.none(deviceID: "device-a")
            let access = login.tokens.accessToken
            let calls: [(String, () async throws -> Void)] = [
                ("account", { _ = try await f.authority.accountInfo(appID: Self.app, accessToken: access, proof: none) }),
                ("wallet", { _ = try await f.authority.wallet(appID: Self.app, accessToken: access, proof: none) }),
                ("export", { _ = try await f.authority.exportWallet(appID: Self.app, accessToken: access, proof: none) }),
                (
                    "refresh",
                    {
                        _ = try await f.authority.refreshSession(
                            RefreshRequest(appID: Self.app, deviceID: "device-a", refreshToken: login.tokens.refreshToken),
                            proof: none)
                    }
                ),
                (
                    "logout",
                    { try await f.authority.revokeSession(appID: Self.app, refreshToken: login.tokens.refreshToken, proof: none) }
                ),
                (
                    "contact",
                    {
                        _ = try await f.authority.sendContactVerificationCode(
                            appID: Self.app, deviceID: "device-a", accessToken: access, contact: AuthorityFixture.phone,
                            proof: none)
                    }
                ),
            ]
            for (name, call) in calls {
                let error = await rainError(call)
                #expect(error?.code == .provider, "\(name)")
                #expect(error?.details.reason == DeviceBinding.proofRequiredReason, "\(name)")
            }
            #expect(try await f.session(login.accountID).revokedAt == nil)
            _ = try await f.authority.accountInfo(appID: Self.app, accessToken: access, proof: FixtureDevice.proof)
        }
    }

    @Test(
        "a token used with a proof of another key revokes the session family (stolen_token)",
        arguments: ["account", "wallet", "export", "logout"])
    func otherKeyRevokes(call: String) async throws {
        try await AuthorityFixture.with { f in
            let login = try await f.login()
            let thief = TestDeviceKeys(deviceID: "device-a", signers: [TestP256DeviceSigner(try P256PrivateKey())]).proof
            let reason = await sessionRefusal {
                switch call {
                case "account":
                    _ = try await f.authority.accountInfo(appID: Self.app, accessToken: login.tokens.accessToken, proof: thief)
                case "wallet":
                    _ = try await f.authority.wallet(appID: Self.app, accessToken: login.tokens.accessToken, proof: thief)
                case "export":
                    _ = try await f.authority.exportWallet(appID: Self.app, accessToken: login.tokens.accessToken, proof: thief)
                default:
                    // A logout is a token call too: refused, and recorded as theft rather than a logout.
                    try await f.authority.revokeSession(appID: Self.app, refreshToken: login.tokens.refreshToken, proof: thief)
                }
            }
            #expect(reason == "refresh_rejected")
            #expect(try await f.session(login.accountID).revokeReason == SessionRevokeReason.stolenToken)
            let owner = await sessionRefusal {
                _ = try await f.authority.accountInfo(appID: Self.app, accessToken: login.tokens.accessToken)
            }
            #expect(owner == "revoked")
        }
    }

    @Test("a session bound to a P-256 key (a TPM's) is used and refreshed with a proof of that key")
    func p256Session() async throws {
        try await AuthorityFixture.with { f in
            let signer = TestP256DeviceSigner(try P256PrivateKey())
            let device = TestDeviceKeys(deviceID: "device-a", signers: [signer])
            let (challenge, code) = try await f.send()
            let login = try await f.authority.confirmLoginCode(
                ConfirmCodeRequest(
                    appID: Self.app, deviceID: "device-a", challengeID: challenge.challengeID, code: code,
                    devicePublicKey: signer.publicKey.wireBytes))
            #expect(try await f.session(login.accountID).devicePublicKey?.count == 65)
            _ = try await f.authority.accountInfo(appID: Self.app, accessToken: login.tokens.accessToken, proof: device.proof)
            let next = try await f.authority.refreshSession(
                RefreshRequest(appID: Self.app, deviceID: "device-a", refreshToken: login.tokens.refreshToken),
                proof: device.proof)
            _ = try await f.authority.wallet(appID: Self.app, accessToken: next.accessToken, proof: device.proof)
        }
    }

    @Test("a malformed device key at login is RAIN_102, before the code is used")
    func malformedLoginKey() async throws {
        try await AuthorityFixture.with { f in
            let (challenge, code) = try await f.send()
            let error = await rainError {
                _ = try await f.authority.confirmLoginCode(
                    ConfirmCodeRequest(
                        appID: Self.app, deviceID: "device-a", challengeID: challenge.challengeID, code: code,
                        devicePublicKey: [4] + Array(repeating: 1, count: 64)))
            }
            #expect(error?.code == .invalidArgument)
            _ = try await f.confirm(challenge, code: code)
        }
    }

    // MARK: - Key moves

    @Test("rebind then confirm: the old key works between the two steps and not after; repeats are harmless")
    func rebindThenConfirm() async throws {
        try await AuthorityFixture.with { f in
            let old = FixtureDevice.key
            let new = TestP256DeviceSigner(try P256PrivateKey())
            let login = try await f.login(deviceKey: old)
            let both = TestDeviceKeys(deviceID: "device-a", signers: [new, SoftwareDeviceSigner(old)]).proof
            let onlyOld = TestDeviceKeys(deviceID: "device-a", keys: [old]).proof
            let onlyNew = TestDeviceKeys(deviceID: "device-a", signers: [new]).proof

            // Step 1 needs both keys proven.
            let half = await rainError {
                try await f.authority.rebindDevice(deviceID: "device-a", newKey: new.publicKey, proof: onlyNew)
            }
            #expect(half?.details.reason == DeviceBinding.proofRequiredReason)
            try await f.authority.rebindDevice(deviceID: "device-a", newKey: new.publicKey, proof: both)
            try await f.authority.rebindDevice(deviceID: "device-a", newKey: new.publicKey, proof: both)
            let pending = try await f.session(login.accountID)
            #expect(pending.pendingDevicePublicKey == new.publicKey.wireBytes)
            #expect(pending.devicePublicKey == old.publicKey.rawRepresentation)

            // Between the steps, either key alone is accepted (a kill mid-migration leaves either in use).
            let access = login.tokens.accessToken
            _ = try await f.authority.accountInfo(appID: Self.app, accessToken: access, proof: onlyOld)
            _ = try await f.authority.accountInfo(appID: Self.app, accessToken: access, proof: onlyNew)
            let refreshed = try await f.authority.refreshSession(
                RefreshRequest(appID: Self.app, deviceID: "device-a", refreshToken: login.tokens.refreshToken),
                proof: onlyNew)

            // Step 2 needs the new key; then only it is accepted.
            let wrong = await rainError {
                try await f.authority.confirmDeviceKey(deviceID: "device-a", key: new.publicKey, proof: onlyOld)
            }
            #expect(wrong?.details.reason == DeviceBinding.proofRequiredReason)
            try await f.authority.confirmDeviceKey(deviceID: "device-a", key: new.publicKey, proof: onlyNew)
            try await f.authority.confirmDeviceKey(deviceID: "device-a", key: new.publicKey, proof: onlyNew)
            // A step 1 repeated after the confirmation changes nothing.
            try await f.authority.rebindDevice(deviceID: "device-a", newKey: new.publicKey, proof: both)
            let confirmed = try await f.session(login.accountID)
            #expect(confirmed.devicePublicKey == new.publicKey.wireBytes)
            #expect(confirmed.pendingDevicePublicKey == nil)
            _ = try await f.authority.accountInfo(appID: Self.app, accessToken: refreshed.accessToken, proof: onlyNew)
            // The old key is now another key: its use is theft.
            let stale = await sessionRefusal {
                _ = try await f.authority.accountInfo(appID: Self.app, accessToken: refreshed.accessToken, proof: onlyOld)
            }
            #expect(stale == "refresh_rejected")
        }
    }

    @Test("a rebind moves only the device's own sessions bound to the proven key")
    func rebindScope() async throws {
        try await AuthorityFixture.with { f in
            let other = try await f.login(AuthorityFixture.phone, device: "device-b", deviceKey: try Ed25519PrivateKey())
            let new = SoftwareDeviceSigner(try Ed25519PrivateKey())
            try await f.authority.rebindDevice(
                deviceID: "device-a", newKey: new.publicKey,
                proof: TestDeviceKeys(deviceID: "device-a", signers: [new, SoftwareDeviceSigner(FixtureDevice.key)]).proof)
            #expect(try await f.session(other.accountID, device: "device-b").pendingDevicePublicKey == nil)
        }
    }

    // MARK: - Over the wire

    @Test("over TCP: a remote without a device proves nothing (RAIN_501, no revocation); a failing key is RAIN_501 too")
    func remoteUnproven() async throws {
        try await RemoteFixture.with { f in
            let login = try await f.login()
            let anonymous = try RemoteAuthority(
                address: f.server.address, deadlines: .forTests, logger: f.logger.child("anonymous"))
            defer { anonymous.close() }
            let error = await rainError {
                _ = try await anonymous.accountInfo(
                    appID: RemoteFixture.app, accessToken: login.tokens.accessToken, proof: .none())
            }
            #expect(error?.code == .provider)
            #expect(error?.details.reason == DeviceBinding.proofRequiredReason)

            let locked = try RemoteAuthority(
                address: f.server.address,
                device: TestDeviceKeys(
                    deviceID: RemoteFixture.device,
                    signers: [FailingDeviceSigner(publicKey: .ed25519(FixtureDevice.key.publicKey))]),
                connectTimeout: .seconds(20), logger: f.logger.child("locked"))
            defer { locked.close() }
            let failed = await rainError {
                _ = try await locked.refreshSession(
                    RefreshRequest(
                        appID: RemoteFixture.app, deviceID: RemoteFixture.device, refreshToken: login.tokens.refreshToken),
                    proof: .none())
            }
            #expect(failed?.code == .provider)
            #expect(failed?.details.reason == "keyring_locked")
            let record = try #require(try await f.store.sessions(appID: RemoteFixture.app, accountID: login.accountID).first)
            #expect(record.revokedAt == nil)
            _ = try await f.remote.accountInfo(appID: RemoteFixture.app, accessToken: login.tokens.accessToken)
        }
    }

    @Test("over TCP: a device moves to a new key through RebindDevice and ConfirmDeviceKey")
    func remoteRebind() async throws {
        try await RemoteFixture.with { f in
            let login = try await f.login()
            let new = TestP256DeviceSigner(try P256PrivateKey())
            let moving = try RemoteAuthority(
                address: f.server.address,
                device: TestDeviceKeys(deviceID: RemoteFixture.device, signers: [new, SoftwareDeviceSigner(FixtureDevice.key)]),
                deadlines: .forTests, logger: f.logger.child("moving"))
            defer { moving.close() }
            try await moving.rebindDevice(deviceID: RemoteFixture.device, newKey: new.publicKey, proof: .none())
            let moved = try RemoteAuthority(
                address: f.server.address, device: TestDeviceKeys(deviceID: RemoteFixture.device, signers: [new]),
                deadlines: .forTests, logger: f.logger.child("moved"))
            defer { moved.close() }
            try await moved.confirmDeviceKey(deviceID: RemoteFixture.device, key: new.publicKey, proof: .none())
            _ = try await moved.accountInfo(appID: RemoteFixture.app, accessToken: login.tokens.accessToken, proof: .none())
        }
    }

    @Test("over TLS: a proof is bound to its connection; replayed on another one it fails, and the channel binding is RFC 9266's")
    func tlsProofNotReusable() async throws {
        try await TestCertificates.withTemporaryDirectory { c in
            try await RemoteFixture.with(
                serverTLS: try TestCertificates.serverContext(c),
                clientTLS: try TLSContext.client(trustedCertificatesFile: c.caPath)
            ) { f in
                let login = try await f.login()
                let address = try TCPAddress(parsing: f.server.address, field: "authority", allowsNonLoopback: true)
                let tls = try TLSContext.client(trustedCertificatesFile: c.caPath)
                let first = try ClientConnection(tcp: address, tls: tls, connectTimeout: .seconds(5))
                let second = try ClientConnection(tcp: address, tls: tls, connectTimeout: .seconds(5))
                defer {
                    first.close()
                    second.close()
                }
                let firstBinding = try #require(first.channelBinding)
                #expect(firstBinding.count == 32)
                #expect(firstBinding != second.channelBinding)
                func challenge(_ c: ClientConnection) async throws -> [UInt8] {
                    try AuthorityBeginDeviceProofResponse.decode(
                        try await c.call(
                            method: AuthorityMethod.beginDeviceProof, payload: try AuthorityBeginDeviceProofRequest().encode())
                    ).challenge
                }
                let firstChallenge = try await challenge(first)
                #expect(try await challenge(first) == firstChallenge)
                _ = try await challenge(second)
                let signed = try AuthorityProveDeviceRequest(
                    deviceID: RemoteFixture.device, devicePublicKey: FixtureDevice.key.publicKey.rawRepresentation,
                    signature: FixtureDevice.key.signature(
                        for: DeviceBinding.signedMessage(
                            deviceID: RemoteFixture.device, challenge: firstChallenge, channelBinding: firstBinding))
                ).encode()
                // Replayed on the second connection: refused.
                let replay = await rainError { _ = try await second.call(method: AuthorityMethod.proveDevice, payload: signed) }
                #expect(replay?.details.reason == DeviceBinding.proofFailedReason)
                // Signed without the channel binding (as on plain TCP): refused over TLS.
                let unbound = try AuthorityProveDeviceRequest(
                    deviceID: RemoteFixture.device, devicePublicKey: FixtureDevice.key.publicKey.rawRepresentation,
                    signature: FixtureDevice.key.signature(
                        for: DeviceBinding.signedMessage(
                            deviceID: RemoteFixture.device, challenge: firstChallenge, channelBinding: []))
                ).encode()
                let noBinding = await rainError {
                    _ = try await first.call(method: AuthorityMethod.proveDevice, payload: unbound)
                }
                #expect(noBinding?.details.reason == DeviceBinding.proofFailedReason)
                // On its own connection: accepted, and the token works there only.
                _ = try await first.call(method: AuthorityMethod.proveDevice, payload: signed)
                let read = try AuthorityAccountInfoRequest(appID: RemoteFixture.app, accessToken: login.tokens.accessToken)
                    .encode()
                _ = try await first.call(method: AuthorityMethod.getAccountInfo, payload: read)
                let elsewhere = await rainError {
                    _ = try await second.call(method: AuthorityMethod.getAccountInfo, payload: read)
                }
                #expect(elsewhere?.details.reason == DeviceBinding.proofRequiredReason)
            }
        }
    }
}
