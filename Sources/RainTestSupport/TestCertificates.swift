import Foundation
import Synchronization

/// Certificates for TLS tests, made at test time with the `openssl` command (Debian package
/// `openssl`, installed by `scripts/lib/deps.sh`): EC P-256 keys, nothing checked in.
///
/// - `ca.pem`: the test CA; `server.pem` + `server.key`: issued by it for `localhost`, 127.0.0.1
///   and ::1 (subjectAltName), valid for two days; key mode 0600.
/// - `other-ca.pem`: an unrelated CA that issued nothing the server presents.
/// - `wrong-name.pem`: issued by the test CA for `authority.example` only (same key as the server).
/// - `expired.pem`: issued by the test CA for the same names, expired a day ago (same key).
public struct TestCertificates: Sendable {
    /// The directory holding the files.
    public let directory: String

    public var caPath: String { "\(directory)/ca.pem" }
    public var serverCertificatePath: String { "\(directory)/server.pem" }
    public var serverKeyPath: String { "\(directory)/server.key" }
    public var otherCAPath: String { "\(directory)/other-ca.pem" }
    public var wrongNameCertificatePath: String { "\(directory)/wrong-name.pem" }
    public var expiredCertificatePath: String { "\(directory)/expired.pem" }

    /// Puts every file in `directory` (which must exist). The first call of a test process makes
    /// them (eight `openssl` runs) in a directory of its own, removed at exit; later calls copy
    /// them. The work runs on a Dispatch queue, never on the Swift concurrency pool.
    /// - Throws: `HarnessError` with openssl's output when a command fails.
    public static func make(in directory: String) async throws -> TestCertificates {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<TestCertificates, any Error>) in
            generationQueue.async {
                continuation.resume(with: Result { try copyTemplate(to: directory) })
            }
        }
    }

    private static let generationQueue = DispatchQueue(label: "rainwallet.test-certificates")
    private static let isTemplateMade = Mutex(false)
    private static let fileNames = [
        "ca.pem", "ca.key", "other-ca.pem", "other-ca.key", "server.pem", "server.key", "wrong-name.pem", "expired.pem",
    ]

    /// Makes the template once (on `generationQueue`), then copies it into `directory`.
    private static func copyTemplate(to directory: String) throws -> TestCertificates {
        let template = templateDirectory
        if !isTemplateMade.withLock({ $0 }) {
            try? FileManager.default.removeItem(atPath: template)
            try FileManager.default.createDirectory(
                atPath: template, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            atexit { try? FileManager.default.removeItem(atPath: templateDirectory) }
            _ = try generate(in: template)
            isTemplateMade.withLock { $0 = true }
        }
        for name in fileNames {
            try FileManager.default.copyItem(atPath: "\(template)/\(name)", toPath: "\(directory)/\(name)")
            guard chmod("\(directory)/\(name)", name.hasSuffix(".key") ? 0o600 : 0o644) == 0 else {
                throw HarnessError("chmod \(directory)/\(name) failed")
            }
        }
        return TestCertificates(directory: directory)
    }

    private static func generate(in directory: String) throws -> TestCertificates {
        let c = TestCertificates(directory: directory)
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        let caExtensions = ["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"]
        try openssl(
            ["req", "-x509"] + ec + [
                "-keyout", "\(directory)/ca.key", "-out", c.caPath, "-days", "2", "-subj", "/CN=Rain Test CA",
            ] + caExtensions)
        try openssl(
            ["req", "-x509"] + ec + [
                "-keyout", "\(directory)/other-ca.key", "-out", c.otherCAPath, "-days", "2", "-subj", "/CN=Unrelated CA",
            ]
                + caExtensions)
        try openssl(
            ["req", "-new"] + ec + ["-keyout", c.serverKeyPath, "-out", "\(directory)/server.csr", "-subj", "/CN=localhost"])
        let common = "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
        try (common + "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\n").write(
            toFile: "\(directory)/server.ext", atomically: true, encoding: .utf8)
        try (common + "subjectAltName=DNS:authority.example\n").write(
            toFile: "\(directory)/wrong-name.ext", atomically: true, encoding: .utf8)
        func issue(_ out: String, extensions: String, days: String) throws {
            try openssl([
                "x509", "-req", "-in", "\(directory)/server.csr", "-CA", c.caPath, "-CAkey", "\(directory)/ca.key",
                "-CAcreateserial", "-out", out, "-days", days, "-extfile", extensions,
            ])
        }
        try issue(c.serverCertificatePath, extensions: "\(directory)/server.ext", days: "2")
        try issue(c.wrongNameCertificatePath, extensions: "\(directory)/wrong-name.ext", days: "2")
        // Not after = not before − 1 day: expired from the start.
        try issue(c.expiredCertificatePath, extensions: "\(directory)/server.ext", days: "-1")
        guard chmod(c.serverKeyPath, 0o600) == 0 else { throw HarnessError("chmod \(c.serverKeyPath) failed") }
        return c
    }

    /// Runs `openssl ARGS` and returns its standard output. Blocks: call it off the Swift
    /// concurrency pool.
    /// - Throws: `HarnessError` with its output when it exits non-zero.
    @discardableResult
    static func openssl(_ arguments: [String], input: String? = nil) throws -> String {
        let r = try TestProcess.runBlocking("/usr/bin/openssl", arguments, input: input ?? "")
        let text = r.stdout + r.stderr
        guard r.status == 0 else {
            throw HarnessError("openssl \(arguments.joined(separator: " ")) exited \(r.status): \(text)")
        }
        return text
    }

    /// Runs `openssl s_client` against `port` on 127.0.0.1 with `extra` flags (`-tls1_2`, …),
    /// trusting `caPath`, sending nothing; returns 0 and its output when it connected, else 1 and
    /// the output. Runs on a Dispatch queue, not on the Swift concurrency pool.
    public func sClient(port: UInt16, _ extra: [String]) async -> (status: Int32, output: String) {
        let arguments = ["s_client", "-connect", "127.0.0.1:\(port)", "-CAfile", caPath, "-verify_return_error"] + extra
        return await withCheckedContinuation { (continuation: CheckedContinuation<(status: Int32, output: String), Never>) in
            DispatchQueue.global().async {
                do {
                    continuation.resume(returning: (0, try Self.openssl(arguments, input: "")))
                } catch {
                    continuation.resume(returning: (1, "\(error)"))
                }
            }
        }
    }
}

/// Where the first `TestCertificates.make` of this process generates the files.
private let templateDirectory = "/tmp/rain-test-certs-\(getpid())"
