import RainCore
import Testing

@testable import RainAccess

/// A prompt shows every field in full, within one Assuan line, or is not shown at all.
@Suite("Prompt layout: every field in full within one Assuan line, or refused")
struct PromptLayoutTests {
    static let code = PromptCode(text: "K7QX")

    static func caller(path: String, flatpak: String? = nil, script: String? = nil) -> CallerIdentity {
        CallerIdentity(
            pid: Int32.max, uid: 1000, executablePath: path, executableSHA256: [UInt8](repeating: 0xab, count: 32),
            script: script.map { .init(path: $0, sha256: [UInt8](repeating: 0xcd, count: 32)) }, flatpakAppID: flatpak)
    }

    /// The SETDESC line of `request`, or the error that refused it.
    static func setdesc(_ request: PromptRequest) -> Result<[UInt8], RainError> {
        Result { () throws(RainError) in try Assuan.command("SETDESC", try request.description(code: code)) }
    }

    /// Either the SETDESC line is within Assuan's limit and shows every field (as displayable
    /// text) in full, or the request was refused with `prompt_too_long`.
    static func expectShownInFullOrRefused(
        _ request: PromptRequest, sourceLocation: SourceLocation = #_sourceLocation
    ) -> Bool {
        switch setdesc(request) {
        case .success(let line):
            #expect(line.count <= Assuan.maximumLineLength + 1, sourceLocation: sourceLocation)
            let shown = String(decoding: Assuan.unescape(line.dropFirst("SETDESC ".utf8.count).dropLast()[...]), as: UTF8.self)
            let action = shown.contains(PromptText.displayable(request.action)) ? request.action : request.shortAction
            var fields = [PromptText.displayable(request.caller.appPath), request.profile, request.caller.hashPrefix, "K7QX"]
            fields += [action.map(PromptText.displayable) ?? "<no action shown>", "pid \(request.caller.pid)"]
            if let flatpak = request.caller.flatpakAppID { fields.append(PromptText.displayable(flatpak)) }
            if let script = request.caller.scriptHashPrefix { fields.append("script sha256 \(script)…") }
            for field in fields {
                #expect(shown.contains(field), "\(field.prefix(40))… is not shown in full", sourceLocation: sourceLocation)
            }
            return true
        case .failure(let error):
            #expect(error.code == .invalidArgument, sourceLocation: sourceLocation)
            #expect(error.details.reason == PromptReason.tooLong, sourceLocation: sourceLocation)
            return false
        }
    }

    @Test("the worst case (longest path, Flatpak id, profile name and action) is refused, never cut")
    func worstCase() {
        let request = PromptRequest(
            action: "approve " + String(repeating: "%", count: 4095) + " for the wallet profile",
            caller: Self.caller(
                path: "/" + String(repeating: "+", count: 4094), flatpak: String(repeating: "o", count: 255),
                script: "/" + String(repeating: "\u{202E}", count: 4094)),
            profile: String(repeating: "p", count: 64))
        #expect(!Self.expectShownInFullOrRefused(request))
        guard case .failure(let error) = Self.setdesc(request) else { return }
        // The message says what to do, and no part of the path.
        #expect(error.message.contains("shorter path"))
        #expect(!error.message.contains("++++"))
    }

    @Test("a description exactly at the limit is shown whole; one byte more is refused")
    func boundary() throws {
        let base = PromptRequest(action: "x", caller: Self.caller(path: "/a"), profile: "default")
        let room = PromptRequest.maximumDescriptionLength - Assuan.escapedLength(try base.description(code: Self.code)[...])
        let fits = PromptRequest(
            action: "x", caller: Self.caller(path: "/a" + String(repeating: "b", count: room)), profile: "default")
        #expect(Self.expectShownInFullOrRefused(fits))
        #expect(try Assuan.command("SETDESC", try fits.description(code: Self.code)).count == Assuan.maximumLineLength + 1)
        let over = PromptRequest(
            action: "x", caller: Self.caller(path: "/a" + String(repeating: "b", count: room + 1)), profile: "default")
        #expect(!Self.expectShownInFullOrRefused(over))
        // Escaping counts: a `%` takes three bytes on the line.
        let escaped = PromptRequest(
            action: "x", caller: Self.caller(path: "/a" + String(repeating: "%", count: room / 3 + 1)), profile: "default")
        #expect(!Self.expectShownInFullOrRefused(escaped))
    }

    @Test("any mix of field lengths: shown in full within the line, or refused")
    func sweep() {
        var generator = SplitMix(seed: 15)
        var shown = 0
        var refused = 0
        for _ in 0..<400 {
            let pieces: [Character] = ["a", "%", "+", "é", "\u{202E}", "\n", "/"]
            func text(_ n: Int) -> String {
                String((0..<n).map { _ in pieces[Int(generator.next() % UInt64(pieces.count))] })
            }
            let path = "/" + text(Int(generator.next() % 700))
            let flatpak = generator.next() % 2 == 0 ? nil : "org." + text(Int(generator.next() % 255))
            let script = generator.next() % 3 == 0 ? "/" + text(Int(generator.next() % 300)) : nil
            let action = "approve " + text(Int(generator.next() % 600))
            let short = generator.next() % 2 == 0 ? nil : "apply 3 changes, digest 0123456789abcdef"
            let request = PromptRequest(
                action: action, caller: Self.caller(path: path, flatpak: flatpak, script: script),
                profile: String(repeating: "p", count: 1 + Int(generator.next() % 64)), shortAction: short)
            if Self.expectShownInFullOrRefused(request) { shown += 1 } else { refused += 1 }
        }
        #expect(shown > 50 && refused > 50, "the sweep should meet both outcomes (\(shown) shown, \(refused) refused)")
    }

    @Test("an action too long for the prompt gives way to its short form; with none that fits, refused")
    func shortAction() throws {
        let list = (1...40).map { "access.apps.p\($0): [] → [\"/usr/bin/tool-\($0)\"]" }.joined(separator: "; ")
        let caller = Self.caller(path: "/usr/bin/rainwallet")
        let request = PromptRequest(
            action: "apply these security settings: \(list)", caller: caller, profile: "default",
            shortAction: "apply 40 security setting changes, digest 0123456789abcdef")
        let text = try request.description(code: Self.code)
        #expect(text.contains("apply 40 security setting changes, digest 0123456789abcdef"))
        #expect(!text.contains("access.apps.p1"), "no part of the list is shown when it does not fit whole")

        let fitting = PromptRequest(
            action: "apply these security settings: access.pinentry: (not set) → \"/usr/bin/pinentry-tty\"", caller: caller,
            profile: "default", shortAction: "apply 1 security setting change, digest 0123456789abcdef")
        #expect(try fitting.description(code: Self.code).contains("access.pinentry: (not set) → \"/usr/bin/pinentry-tty\""))

        let neither = PromptRequest(
            action: "apply: \(list)", caller: Self.caller(path: "/" + String(repeating: "a", count: 900)), profile: "default",
            shortAction: "apply 40 changes")
        #expect(!Self.expectShownInFullOrRefused(neither))
    }

    @Test("the coordinator refuses a request it cannot show in full before any pinentry starts")
    func coordinatorRefuses() async throws {
        // No terminal and no such program: anything past the layout check would fail otherwise.
        let coordinator = try PromptFixture.coordinator(on: nil, program: "/nonexistent/pinentry")
        let request = PromptFixture.request(PromptFixture.caller(path: "/" + String(repeating: "a", count: 995)))
        do throws(RainError) {
            _ = try await coordinator.confirm(request)
            Issue.record("a request longer than the line was shown")
        } catch {
            #expect(error.details.reason == PromptReason.tooLong)
        }
        #expect(await coordinator.activeProcessID == nil)
    }
    @Test("the machine's note is shown above the code, and counts against the line like every field")
    func noteIsShown() throws {
        var request = PromptRequest(action: "export the recovery phrase", caller: Self.caller(path: "/usr/bin/app"), profile: "p")
        let without = try request.description(code: Self.code)
        #expect(!without.contains("Note:"))
        request.notes = ["programs of yours can read this code too (no Yama LSM); see rainwallet status"]
        let with = try request.description(code: Self.code)
        #expect(with.contains("Note: programs of yours can read this code too (no Yama LSM)"), "\(with)")
        #expect(with.range(of: "Note:")?.lowerBound ?? with.endIndex < with.range(of: "K7QX")?.lowerBound ?? with.startIndex)
        // A note that leaves no room for the rest refuses the prompt rather than cutting it.
        request.notes = [String(repeating: "n", count: PromptRequest.maximumDescriptionLength)]
        #expect(Self.expectShownInFullOrRefused(request) == false)
    }
}

/// A small deterministic generator, so the sweep is the same on every run.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

}
