import Foundation
import RainCore
import RainCrypto
import RainTestSupport
import RainWallet
import RainWire
import Testing

/// Outside libraries from PyPI (scripts/judges: eth-account and solders, pinned) as judges of the
/// wallet's signatures. A judge that is not installed fails the test: it is never skipped.
enum Judge {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Runs `tests/judges/SCRIPT` with the installed judges.
    /// - Returns: its exit status, standard output and standard error.
    static func run(_ script: String, _ arguments: [String], input: String = "") throws -> (
        status: Int32, stdout: String, stderr: String
    ) {
        let directory = root.appendingPathComponent(".build/python-judges").path
        let python = try #require(
            (try? String(contentsOfFile: "\(directory)/.python", encoding: .utf8))?.trimmingCharacters(
                in: .whitespacesAndNewlines),
            "the signing judges are not installed: run scripts/judges --install (scripts/test does)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [root.appendingPathComponent("tests/judges/\(script)").path] + arguments
        process.environment = ["PYTHONPATH": directory, "PATH": "/usr/bin:/bin", "HOME": "/tmp"]
        let (stdin, stdout, stderr) = (Pipe(), Pipe(), Pipe())
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try stdin.fileHandleForWriting.close()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: out, as: UTF8.self), String(decoding: err, as: UTF8.self))
    }

    /// `run`, which must succeed; its standard output as JSON.
    static func json(_ script: String, _ arguments: [String], input: String = "") throws -> [String: Any] {
        let result = try run(script, arguments, input: input)
        try #require(result.status == 0, "\(script) \(arguments.first ?? ""): \(result.stderr)")
        return try jsonObject(result.stdout)
    }
}

extension Data {
    var hex: String { Hex.encode(Array(self)) }
}

@Suite("Signatures end to end, judged by eth-account and solders")
struct SigningTests {
    /// A daemon whose default profile may export (the judges sign with the exported key) and a
    /// logged-in session.
    static func loggedIn(_ email: String) async throws -> (DaemonHarness, RainProvider) {
        let h = try await DaemonHarness.start(config: exportAllowedConfig)
        let provider = h.provider()
        do {
            try await h.logIn(provider, .email(email))
        } catch {
            h.shutdown()
            throw error
        }
        return (h, provider)
    }

    @Test("EVM: eth-account signs the same bytes with the exported key and recovers the wallet from every signature")
    func evmAgreesWithEthAccount() async throws {
        let (h, provider) = try await Self.loggedIn("evm-judge@example.com")
        defer { h.shutdown() }
        let wallet = try await provider.getWallet()
        let built = try Judge.json("evm.py", ["build", wallet.ethereumAddress])

        var messages: [[String: Any]] = []
        for message in ["Sign in to example.com", "", String(repeating: "long ", count: 200)] {
            let signed = try await provider.signMessage(message)
            #expect(signed.address == wallet.ethereumAddress)
            #expect(signed.signature.count == 65)
            messages.append(["messageHex": Data(message.utf8).hex, "signatureHex": signed.signatureHex])
        }
        let binary = Data([0x00, 0xff, 0x10, 0x80])
        messages.append(["messageHex": binary.hex, "signatureHex": try await provider.signMessage(binary).signatureHex])

        var typed: [[String: Any]] = []
        for document in try #require(built["typedData"] as? [[String: Any]]) {
            let json = try #require(document["json"] as? String)
            let signed = try await provider.signTypedData(json)
            typed.append(["name": document["name"] ?? "", "signatureHex": signed.signatureHex])
        }

        var transactions: [[String: Any]] = []
        for tx in try #require(built["transactions"] as? [[String: Any]]) {
            let hex = try #require(tx["unsignedHex"] as? String)
            let unsigned = try #require(Hex.decode(hex))
            let chainID = try #require(tx["chainId"] as? Int)
            let signed = try await provider.signTransaction(Data(unsigned), on: .evm(chainID: UInt64(chainID)))
            #expect(signed.transactionHash == Data(Keccak256.hash(Array(signed.rawTransaction))))
            #expect(signed.signedBytesSHA256 == Data(SHA256.hash(unsigned)))
            transactions.append([
                "name": tx["name"] ?? "", "rawHex": signed.rawTransaction.hex, "hashHex": signed.transactionHash.hex,
            ])
        }

        let key = try await provider.exportPrivateKey(chain: .ethereum)
        let request: [String: Any] = [
            "privateKey": key, "address": wallet.ethereumAddress, "messages": messages, "typedData": typed,
            "transactions": transactions,
        ]
        let verdict = try Judge.run(
            "evm.py", ["check"], input: String(decoding: try JSONSerialization.data(withJSONObject: request), as: UTF8.self))
        #expect(verdict.status == 0, "eth-account disagrees: \(verdict.stderr)")
        #expect(verdict.stdout.contains("ok: "), "\(verdict.stdout)")
    }

    @Test("Solana: solders builds the messages, verifies our signatures and gets the same transactions with the exported key")
    func solanaAgreesWithSolders() async throws {
        let (h, provider) = try await Self.loggedIn("solana-judge@example.com")
        defer { h.shutdown() }
        let wallet = try await provider.getWallet()
        let built = try Judge.json("solana.py", ["build", wallet.solanaAddress])
        var transactions: [[String: Any]] = []
        for message in try #require(built["messages"] as? [[String: Any]]) {
            let base64 = try #require(message["base64"] as? String)
            let bytes = try #require(Data(base64Encoded: base64))
            let signed = try await provider.signTransaction(bytes, on: .solana(cluster: "mainnet-beta"))
            #expect(signed.address == wallet.solanaAddress)
            #expect(signed.signature.count == 64)
            transactions.append([
                "name": message["name"] ?? "", "base64": signed.rawTransaction.base64EncodedString(),
                "hashHex": signed.transactionHash.hex,
            ])
        }
        var offchain: [[String: Any]] = []
        for text in ["Hello from a Solana app", "caf\u{e9} \u{2713}", String(repeating: "x", count: 1300)] {
            let signed = try await provider.signMessage(text, on: .solana())
            offchain.append(["text": text, "signatureHex": signed.signature.hex])
        }
        let keypair = try await provider.exportPrivateKey(chain: .solana)
        let request: [String: Any] = [
            "keypair": keypair, "address": wallet.solanaAddress, "transactions": transactions, "messages": offchain,
        ]
        let verdict = try Judge.run(
            "solana.py", ["check"],
            input: String(decoding: try JSONSerialization.data(withJSONObject: request), as: UTF8.self))
        #expect(verdict.status == 0, "solders disagrees: \(verdict.stderr)")
        #expect(verdict.stdout.contains("ok: "), "\(verdict.stdout)")
    }
}
