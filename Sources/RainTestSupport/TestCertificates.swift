import Foundation

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

    /// Makes every file in `directory` (which must exist).
    /// - Throws: `HarnessError` with openssl's output when a command fails.
    public static func make(in directory: String) throws -> TestCertificates {
        let c = TestCertificates(directory: directory)
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        let caExtensions = ["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"]
        try openssl(["req", "-x509"] + ec + ["-keyout", "\(directory)/ca.key", "-out", c.caPath, "-days", "2", "-subj", "/CN=Rain Test CA"] + caExtensions)
        try openssl(
            ["req", "-x509"] + ec + ["-keyout", "\(directory)/other-ca.key", "-out", c.otherCAPath, "-days", "2", "-subj", "/CN=Unrelated CA"]
                + caExtensions)
        try openssl(["req", "-new"] + ec + ["-keyout", c.serverKeyPath, "-out", "\(directory)/server.csr", "-subj", "/CN=localhost"])
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

    /// Runs `openssl ARGS` and returns its standard output.
    /// - Throws: `HarnessError` with its output when it exits non-zero.
    @discardableResult
    public static func openssl(_ arguments: [String], input: String? = nil) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = arguments
        let out = Pipe()
        let inPipe = Pipe()
        p.standardOutput = out
        p.standardError = out
        p.standardInput = inPipe
        try DaemonHarness.withProcessLaunchLock { try p.run() }
        if let input { inPipe.fileHandleForWriting.write(Data(input.utf8)) }
        try? inPipe.fileHandleForWriting.close()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard p.terminationStatus == 0 else {
            throw HarnessError("openssl \(arguments.joined(separator: " ")) exited \(p.terminationStatus): \(text)")
        }
        return text
    }

    /// Runs `openssl s_client` against `port` on 127.0.0.1 with `extra` flags (`-tls1_2`, …),
    /// trusting `caPath`, sending nothing; returns its exit status and output.
    public func sClient(port: UInt16, _ extra: [String]) throws -> (status: Int32, output: String) {
        do {
            let output = try Self.openssl(
                ["s_client", "-connect", "127.0.0.1:\(port)", "-CAfile", caPath, "-verify_return_error"] + extra, input: "")
            return (0, output)
        } catch let error as HarnessError {
            return (1, error.description)
        }
    }
}
