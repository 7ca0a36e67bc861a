import Foundation
import RainTestSupport
import Testing

/// A program of the daemon's own user against the platform authenticator: the daemon, its app and
/// the attacker (`rainwallet-tpm-probe`) all run as one unprivileged uid (`OtherUser`), with the
/// state directory and the TPM the daemon uses. It can unseal the storage key and read every
/// passkey's key blob, as the daemon can; what it lacks is the PIN, which the TPM checks.
@Suite("Same user: a platform passkey without its PIN")
struct PlatformAttackTests {
    static let pin = "975310"

    @Test(
        "a program of the daemon's user loads the platform passkey's key into the TPM and cannot sign without the PIN; the TPM counts its try; the user's PIN still logs in"
    )
    func noSignatureWithoutThePIN() async throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        // Its own lockout parameters, set before anyone tries.
        try PlatformPasskeyTests.limitLockout(tpm)
        // The TPM is the machine's: the unprivileged uid reaches it, as a user reaches /dev/tpmrm0.
        #expect(chmod(tpm.directory, 0o755) == 0)
        for socket in ["tpm", "tpm.ctrl"] { #expect(chmod("\(tpm.directory)/\(socket)", 0o666) == 0) }

        let d = try await UserDaemon.start(
            config: #"""
                {"storage": {"provider": "tpm2", "tcti": "\#(tpm.tcti)"},
                 "profiles": {"default": {"passkeyDomain": "example.com"}}}
                """#)
        defer { d.stop() }
        try await d.approveTheApp()
        // The PINs the auto pinentry types, in a file of the daemon's user: chosen twice.
        let secrets = "\(d.home)/prompts.log.secrets"
        #expect(
            FileManager.default.createFile(
                atPath: secrets, contents: Data("\(Self.pin)\n\(Self.pin)\n".utf8), attributes: [.posixPermissions: 0o600]))
        try OtherUser.chown(secrets)
        let signup = try await d.cli(["passkey", "signup", "--authenticator", "platform"])
        #expect(signup.status == 0, "\(signup)\nlog:\n\(d.log)")

        let output = "\(d.home)/probe.json"
        let probe = try d.bin.launch(
            as: OtherUser.uid, executable: "\(d.bin.directory)/rainwallet-tpm-probe", ["\(d.home)/state", tpm.tcti],
            home: d.home, log: "\(d.home)/probe.log", stdout: output)
        let status = await probe.waitForExit(timeout: .seconds(30))
        #expect(status == 0, "probe: \(DaemonHarness.readFile("\(d.home)/probe.log"))")
        let found = try jsonObject(DaemonHarness.readFile(output))
        // It found the passkey and loaded its key, and the TPM refused to sign: no PIN.
        #expect(found["credentials"] as? Int == 1, "\(found)")
        #expect(found["signed"] as? Int == 0, "\(found)")
        #expect(found["errors"] as? [String] == ["RAIN_202"], "\(found)")
        // And its try counts toward the lockout, as a guess would.
        #expect(found["failedTries"] as? Int == 1, "\(found)")

        // The user's PIN still logs in.
        #expect(try await d.cli(["logout"]).status == 0)
        #expect(
            FileManager.default.createFile(
                atPath: secrets, contents: Data("\(Self.pin)\n".utf8), attributes: [.posixPermissions: 0o600]))
        try OtherUser.chown(secrets)
        let login = try await d.cli(["passkey", "login", "--authenticator", "platform"])
        #expect(login.status == 0, "\(login)")
    }
}
