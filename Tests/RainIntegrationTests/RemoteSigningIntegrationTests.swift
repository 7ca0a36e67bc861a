import Foundation
import RainCore
import RainCrypto
import RainTestSupport
import RainWallet
import Testing

/// Signing with a real `rainwalletd authority` over TLS: the device shows and confirms, the
/// authority in its own process holds the key and signs.
@Suite("Signatures through a remote TLS authority (processes)")
struct RemoteSigningIntegrationTests {
    @Test("rainwallet sign tx signs through a TLS authority process, which logs wallet.signed and no key")
    func signsThroughTLSAuthority() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        let certs = try await TLSAuthorityTests.certificates(in: setup)
        try await AuthorityProcess.with(
            in: setup.directory,
            ["--listen", "127.0.0.1:0", "--tls-cert", certs.serverCertificatePath, "--tls-key", certs.serverKeyPath]
        ) { authority in
            let device = try await DaemonHarness.start(
                config: exportAllowedConfig,
                extraArguments: ["--authority", "localhost:\(authority.port)", "--authority-ca", certs.caPath])
            defer { device.shutdown() }
            try await device.cliLogIn("remote-sign@example.com")
            let wallet = try await device.cliWallet()
            let address = try #require(wallet["ethereumAddress"] as? String)

            let unsigned = try #require(Hex.decode(unsignedBaseUSDCTransfer))
            let signed = try await device.runCLI(
                ["--json", "sign", "tx", "--chain-id", "8453", "-"], stdin: "0x" + unsignedBaseUSDCTransfer)
            #expect(signed.status == 0, "\(signed)")
            let result = try jsonObject(signed.stdout)
            #expect(result["signedBytesSha256"] as? String == "0x" + Hex.encode(SHA256.hash(unsigned)))
            #expect(result["address"] as? String == address)
            let signature = try #require(Hex.decode(String((result["signature"] as? String ?? "").dropFirst(2))))
            try #require(signature.count == 65)
            let recovered = try Secp256k1Recovery.recoverAddress(
                digest: Keccak256.hash(unsigned), r: Array(signature[0..<32]), s: Array(signature[32..<64]),
                recoveryID: signature[64] - 27)
            #expect("0x" + Hex.encode(recovered) == address.lowercased())
            #expect(await eventually { authority.log.contains("wallet.signed") }, "\(authority.log)")

            // The keys, exported through the same authority, appear in neither daemon's log nor in
            // what the signature printed.
            var scanner = SecretScanner()
            let phrase = try await device.runCLI(["--json", "export", "phrase", "--yes"])
            #expect(phrase.status == 0, "\(phrase)")
            scanner.addPhrase(try #require(try jsonObject(phrase.stdout)["words"] as? [String]))
            let ethereum = try await device.runCLI(["export", "key", "--chain", "ethereum", "--yes"])
            let ethereumKey = ethereum.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            scanner.addKey(try #require(Hex.decode(String(ethereumKey.dropFirst(2)))), label: "ethereum key")
            let solana = try await device.runCLI(["export", "key", "--chain", "solana", "--yes"])
            let keypair = try #require(Base58.decode(solana.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
            scanner.addKey(keypair, label: "solana keypair")
            scanner.addKey(Array(keypair.prefix(32)), label: "solana seed")
            let findings = scanner.findings(in: [authority.log, device.log, signed.stdout, signed.stderr])
            #expect(findings.isEmpty, "\(findings)")
            // The scanner sees the keys where they belong, so finding none above means something.
            #expect(!scanner.findings(in: [ethereum.stdout, solana.stdout]).isEmpty)
        }
    }
}
