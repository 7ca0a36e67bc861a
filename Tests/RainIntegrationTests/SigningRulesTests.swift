import Foundation
import Glibc
import RainCore
import RainCrypto
import RainTestSupport
import RainWallet
import RainWire
import Testing

/// The EIP-1559 USDC transfer on Base the judge builds, unsigned (chain 8453, nonce 7).
let unsignedBaseUSDCTransfer =
    "02f86d82210507830f424084b2d05e0082fde894833589fcd6edb6e08f4c7c32d4f71b54bda0291380b844a9059cbb000000000000000000000000"
    + "ab5801a7d398351b8be11c439e05c5b3259aec9b00000000000000000000000000000000000000000000000000000000004c4b40c0"

@Suite("Signing rules end to end: refusals, prompts, audit, idempotency, the key in memory")
struct SigningRulesTests {
    static func loggedIn(_ email: String, config: String? = nil) async throws -> DaemonHarness {
        let h = try await DaemonHarness.start(config: config)
        do {
            try await h.cliLogIn(email)
        } catch {
            h.shutdown()
            throw error
        }
        return h
    }

    /// Writes `text` to a file in the harness directory; returns its path.
    static func file(_ h: DaemonHarness, _ name: String, _ text: String) throws -> String {
        let path = "\(h.directory)/\(name)"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("the CLI signs a transaction, shows what it does on the prompt and audits the SHA-256, the app and the answer")
    func cliSignsAndAudits() async throws {
        let h = try await Self.loggedIn("sign-cli@example.com")
        defer { h.shutdown() }
        let tx = try Self.file(h, "tx.hex", "0x" + unsignedBaseUSDCTransfer + "\n")
        let signed = try await h.runCLI(["--json", "sign", "tx", "--chain-id", "8453", tx])
        #expect(signed.status == 0, "\(signed)")
        let result = try jsonObject(signed.stdout)
        let sha = try #require(result["signedBytesSha256"] as? String)
        #expect(sha == "0x" + Hex.encode(SHA256.hash(Hex.decode(unsignedBaseUSDCTransfer) ?? [])))
        #expect((result["signedTransaction"] as? String)?.hasPrefix("0x02") == true)

        // What the user read: the chain, the token by its issuer's contract, the amount, the recipient, the hash.
        let prompt = (h.answeredPages + [try #require(h.answeredPrompts.last)]).map(DaemonHarness.unescaped).joined()
        for shown in ["Base (8453)", "USDC", "5", "0xAb5801a7D398351b8bE11C439e05C5B3259aeC9B", String(sha.dropFirst(2))] {
            #expect(prompt.contains(shown), "the prompt does not show \(shown): \(prompt)")
        }

        // Refused on the prompt: exit 9, nothing signed, audited with the same hash.
        h.autoPinentryDismisses(true)
        let refused = try await h.runCLI(["sign", "tx", "--chain-id", "8453", tx])
        #expect(refused.status == 9, "\(refused)")
        h.autoPinentryDismisses(false)

        let audit = try await h.runCLI(["--json", "audit"])
        let entries = try audit.stdout.split(separator: "\n").map { try jsonObject(String($0)) }
        let signatures = entries.filter { $0["event"] as? String == "signature" }
        #expect(signatures.count == 1, "\(audit.stdout)")
        #expect((signatures.first?["detail"] as? String)?.contains("sha256:\(sha.dropFirst(2))") == true)
        let app = try #require(signatures.first?["app"] as? [String: Any])
        #expect(app["path"] as? String == h.binaryDirectory.appendingPathComponent("rainwallet").resolvingSymlinksInPath().path)
        let answers = entries.filter { $0["event"] as? String == "prompt_result" }.map { $0["result"] as? String ?? "" }
        #expect(answers.suffix(2) == ["ok", "refused"], "\(answers)")
        #expect(entries.filter { ($0["detail"] as? String)?.contains(String(sha.dropFirst(2))) == true }.count >= 3)
    }

    @Test("refusals come with their Rain code, field and exit status, before any prompt")
    func refusals() async throws {
        let h = try await Self.loggedIn("sign-refusals@example.com")
        defer { h.shutdown() }
        let prompts = h.answeredPrompts.count
        func run(_ arguments: [String], stdin: String? = nil) async throws -> (Int32, [String: Any]) {
            let r = try await h.runCLI(["--json", "sign"] + arguments, stdin: stdin)
            let last = r.stderr.split(separator: "\n").last.map(String.init) ?? "{}"
            return (r.status, (try? jsonObject(last))?["error"] as? [String: Any] ?? [:])
        }
        // A chain not supported: RAIN_104, exit 12 (the EIP-155 example's transaction on chain 56).
        let onBSC = "ec098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a764000080388080"
        let bsc = try await run(["tx", "--chain-id", "56", "-"], stdin: onBSC)
        #expect(bsc.0 == 12 && bsc.1["code"] as? String == "RAIN_104", "\(bsc)")
        // The transaction names Base; the request another chain.
        let mismatch = try await run(["tx", "--chain-id", "1", "-"], stdin: "0x" + unsignedBaseUSDCTransfer)
        #expect(mismatch.0 == 3 && mismatch.1["reason"] as? String == "chain_id_mismatch", "\(mismatch)")
        // Truncated.
        let truncated = try await run(["tx", "--chain-id", "8453", "-"], stdin: "0x" + unsignedBaseUSDCTransfer.dropLast(10))
        #expect(truncated.0 == 3 && truncated.1["code"] as? String == "RAIN_102", "\(truncated)")
        // A type 3 (blob) transaction.
        let blob = try await run(["tx", "--chain-id", "1", "-"], stdin: "0x03c0")
        #expect(blob.0 == 3 && blob.1["reason"] as? String == "transaction_type_not_supported", "\(blob)")
        // A uint256 above 2^256 - 1 in typed data: RAIN_406, exit 13.
        let over = Self.typedData(value: "115792089237316195423570985008687907853269984665640564039457584007913129639936")
        let tooLarge = try await run(["typed-data", "-"], stdin: over)
        #expect(tooLarge.0 == 13 && tooLarge.1["code"] as? String == "RAIN_406", "\(tooLarge)")
        // A field that `types` does not declare.
        let undeclared = try await run(["typed-data", "-"], stdin: Self.typedData(value: "1", extra: #","unlisted":"x""#))
        #expect(undeclared.0 == 3 && (undeclared.1["field"] as? String)?.contains("unlisted") == true, "\(undeclared)")
        // A duplicate key.
        let duplicate = try await run(["typed-data", "-"], stdin: Self.typedData(value: "1", extra: #","value":"2""#))
        #expect(duplicate.0 == 3, "\(duplicate)")
        // Another address than the wallet's.
        let wrongFrom = try await run(
            ["message", "--from", "0xAb5801a7D398351b8bE11C439e05C5B3259aeC9B", "-"], stdin: "hi")
        #expect(wrongFrom.0 == 3 && wrongFrom.1["reason"] as? String == "from_mismatch", "\(wrongFrom)")
        // A Solana "message" that is a transaction's message.
        var transfer: [UInt8] = [1, 0, 1, 3] + [UInt8](repeating: 1, count: 32) + [UInt8](repeating: 2, count: 32)
        transfer += [UInt8](repeating: 0, count: 32) + [UInt8](repeating: 9, count: 32)
        transfer += [1, 2, 2, 0, 1, 12, 2, 0, 0, 0, 0x00, 0xCA, 0x9A, 0x3B, 0, 0, 0, 0]
        let disguised = try await run(["message", "--chain", "solana", "--hex", "-"], stdin: Hex.encode(transfer))
        #expect(disguised.0 == 3 && disguised.1["reason"] as? String == "message_is_transaction", "\(disguised)")
        // Nobody was asked about any of them.
        #expect(h.answeredPrompts.count == prompts, "nobody was asked: \(h.answeredPrompts.dropFirst(prompts))")

        // Without a session: RAIN_201, exit 4.
        #expect(try await h.runCLI(["logout"]).status == 0)
        let noSession = try await run(["message", "-"], stdin: "hello")
        #expect(noSession.0 == 4 && noSession.1["code"] as? String == "RAIN_201", "\(noSession)")
    }

    /// An EIP-2612 permit on Base whose `value` is `value` (its text as written), with `extra`
    /// added to the message object.
    static func typedData(value: String, extra: String = "", strings: Int = 0, note: String = "") -> String {
        """
        {"types":{"EIP712Domain":[{"name":"name","type":"string"},{"name":"version","type":"string"},\
        {"name":"chainId","type":"uint256"},{"name":"verifyingContract","type":"address"}],\
        "Permit":[{"name":"owner","type":"address"},{"name":"spender","type":"address"},{"name":"value","type":"uint256"},\
        {"name":"nonce","type":"uint256"},{"name":"deadline","type":"uint256"}]},"primaryType":"Permit",\
        "domain":{"name":"USD Coin","version":"2","chainId":8453,"verifyingContract":"0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"},\
        "message":{"owner":"0x0000000000000000000000000000000000000001","spender":"0xAb5801a7D398351b8bE11C439e05C5B3259aeC9B",\
        "value":\(value),"nonce":0,"deadline":1900000000\(extra)}}
        """
    }

    @Test("a long request is shown in pages, the last with the SHA-256; control and bidirectional characters become ?")
    func pagedAndSanitized() async throws {
        let h = try await Self.loggedIn("sign-pages@example.com")
        defer { h.shutdown() }
        let notes = (0..<24).map { #"{"name":"n\#($0)","type":"string"}"# }.joined(separator: ",")
        let values = (0..<24).map { #""n\#($0)":"note \#($0) \u202e\u0007\u200f reversed""# }.joined(separator: ",")
        let json = """
            {"types":{"EIP712Domain":[{"name":"name","type":"string"},{"name":"chainId","type":"uint256"}],\
            "Notes":[\(notes)]},"primaryType":"Notes","domain":{"name":"Long","chainId":1},"message":{\(values)}}
            """
        let before = h.answeredPages.count
        let signed = try await h.provider().signTypedData(json)
        let pages = h.answeredPages.dropFirst(before).map(DaemonHarness.unescaped)
        #expect(pages.count >= 1, "a request this long takes more than one page")
        let last = DaemonHarness.unescaped(try #require(h.answeredPrompts.last))
        #expect(last.contains("SHA-256 of what is signed: \(signed.signedBytesSHA256.hex)"))
        let everything = (pages + [last]).joined()
        for index in 0..<24 { #expect(everything.contains("note \(index) ??? reversed"), "field n\(index) not shown") }
        #expect(!everything.contains("\u{202E}") && !everything.contains("\u{7}") && !everything.contains("\u{200F}"))
        for (index, page) in pages.enumerated() {
            #expect(!page.contains("type the code"), "page \(index + 1) shows the code")
        }
    }

    @Test("an idempotency key: the same request answers the same signature, another request is RAIN_102")
    func idempotency() async throws {
        let h = try await Self.loggedIn("sign-idem@example.com")
        defer { h.shutdown() }
        let provider = h.provider()
        let key = Data((0..<16).map { UInt8($0) })
        let unsigned = Data(try #require(Hex.decode(unsignedBaseUSDCTransfer)))
        let first = try await provider.signTransaction(unsigned, on: .evm(chainID: 8453), idempotencyKey: key)
        let again = try await provider.signTransaction(unsigned, on: .evm(chainID: 8453), idempotencyKey: key)
        #expect(first == again)
        let other = await rainError {
            _ = try await provider.signMessage("another request", idempotencyKey: key)
        }
        #expect(other?.code == .invalidArgument)
        #expect(other?.details.reason == "idempotency_key_reused")
        // After a restart the daemon has forgotten the key; the authority has not.
        try await h.restart()
        let prompts = h.answeredPrompts.count
        let afterRestart = await rainError {
            _ = try await provider.signMessage("another request", idempotencyKey: key)
        }
        #expect(afterRestart?.details.reason == "idempotency_key_reused")
        #expect(h.answeredPrompts.count == prompts + 1, "the authority refused it after the prompt")
        let repeated = try await provider.signTransaction(unsigned, on: .evm(chainID: 8453), idempotencyKey: key)
        #expect(repeated == first)
    }

    @Test("after signatures the daemon's memory holds neither private key: they live in locked memory only while they sign")
    func keysAreNotInMemory() async throws {
        try #require(geteuid() == 0, "reading another process's memory needs root (CI runs as root)")
        let h = try await Self.loggedIn("sign-memory@example.com", config: exportAllowedConfig)
        defer { h.shutdown() }
        let provider = h.provider()
        let ethereumHex = try await provider.exportPrivateKey(chain: .ethereum)
        let ethereum = try #require(Hex.decode(String(ethereumHex.dropFirst(2))))
        let keypairText = try await provider.exportPrivateKey(chain: .solana)
        let keypair = try #require(Base58.decode(keypairText))
        let solanaSeed = Array(keypair.prefix(32))
        // The exports put the keys in the daemon's heap as text and bytes: a fresh process signs.
        try await h.restart()
        let unsigned = Data(try #require(Hex.decode(unsignedBaseUSDCTransfer)))
        for index in 0..<5 {
            _ = try await provider.signTransaction(unsigned, on: .evm(chainID: 8453))
            _ = try await provider.signMessage("message \(index)", on: .solana())
        }
        let pid = try #require(h.pid)
        let found = try ProcessMemory.search(
            pid: pid,
            for: [
                ("ethereum key", ethereum), ("solana seed", solanaSeed),
                ("ethereum key as hex", Array(ethereumHex.dropFirst(2).utf8)),
                ("solana keypair as text", Array(keypairText.utf8)),
            ])
        #expect(found.isEmpty, "found in the daemon's memory: \(found)")
        // The scan can fail: the wallet's address, which the daemon holds as text, is found.
        let address = Array(try await provider.getWallet().ethereumAddress.utf8)
        #expect(!(try ProcessMemory.search(pid: pid, for: [("address", address)])).isEmpty)
    }
}

/// Reads a process's memory through `/proc/PID/mem` (root).
enum ProcessMemory {
    /// The names of the needles found in any readable mapping, with where.
    static func search(pid: Int32, for needles: [(String, [UInt8])]) throws -> [String] {
        let maps = try String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)
        let fd = open("/proc/\(pid)/mem", O_RDONLY)
        try #require(fd >= 0, "cannot open /proc/\(pid)/mem: errno \(errno)")
        defer { close(fd) }
        var found: [String] = []
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 2, fields[1].hasPrefix("r") else { continue }
            let range = fields[0].split(separator: "-")
            guard range.count == 2, let start = UInt64(range[0], radix: 16), let end = UInt64(range[1], radix: 16) else {
                continue
            }
            // The kernel's vsyscall page cannot be read through mem.
            if fields.count >= 6, fields[5] == "[vsyscall]" { continue }
            var bytes = [UInt8](repeating: 0, count: Int(end - start))
            let read = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(Int64(bitPattern: start))) }
            guard read > 0 else { continue }
            let region = bytes[0..<read]
            for (name, needle) in needles where contains(region, needle) {
                found.append("\(name) in \(line)")
            }
        }
        return found
    }

    /// memchr for the first byte, then memcmp: fast enough for a whole process in a debug build.
    static func contains(_ haystack: ArraySlice<UInt8>, _ needle: [UInt8]) -> Bool {
        guard let first = needle.first, needle.count <= haystack.count else { return false }
        return haystack.withUnsafeBytes { hay in
            needle.withUnsafeBytes { pin in
                guard let base = hay.baseAddress, let pattern = pin.baseAddress else { return false }
                var offset = 0
                let last = hay.count - pin.count
                while offset <= last {
                    guard let hit = memchr(base + offset, Int32(first), last - offset + 1) else { return false }
                    let at = base.distance(to: UnsafeRawPointer(hit))
                    if memcmp(base + at, pattern, pin.count) == 0 { return true }
                    offset = at + 1
                }
                return false
            }
        }
    }
}
