import RainCore
import RainTransport
import Testing

/// `LISTEN_PID` / `LISTEN_FDS` / `LISTEN_FDNAMES` as sd_listen_fds(3) reads them. The process-level
/// behaviour (descriptor checks, environment cleanup) is in RainIntegrationTests/SystemdTests.
@Suite struct SocketActivationTests {
    static let pid: Int32 = 4242

    @Test(
        "not for this process: no variables, another pid, no or zero LISTEN_FDS",
        arguments: [
            [:], ["LISTEN_FDS": "1"], ["LISTEN_PID": "4243", "LISTEN_FDS": "1"], ["LISTEN_PID": "4242"],
            ["LISTEN_PID": "4242", "LISTEN_FDS": "0"],
        ] as [[String: String]])
    func notActivated(environment: [String: String]) throws {
        #expect(try SocketActivation.selectDescriptor(environment: environment, pid: Self.pid, name: "rainwalletd") == nil)
    }

    @Test(
        "the chosen descriptor",
        arguments: [
            (["LISTEN_PID": "4242", "LISTEN_FDS": "1"], 3),
            (["LISTEN_PID": "4242", "LISTEN_FDS": "1", "LISTEN_FDNAMES": "anything"], 3),
            (["LISTEN_PID": "4242", "LISTEN_FDS": "3", "LISTEN_FDNAMES": "a:rainwalletd:b"], 4),
            (["LISTEN_PID": "4242", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "x:rainwalletd"], 4),
        ] as [([String: String], Int32)])
    func chosen(environment: [String: String], descriptor: Int32) throws {
        let selected = try #require(
            try SocketActivation.selectDescriptor(environment: environment, pid: Self.pid, name: "rainwalletd"))
        #expect(selected.descriptor == descriptor)
    }

    @Test(
        "malformed or ambiguous variables are RAIN_102",
        arguments: [
            ["LISTEN_PID": "me", "LISTEN_FDS": "1"], ["LISTEN_PID": "4242", "LISTEN_FDS": "one"],
            ["LISTEN_PID": "4242", "LISTEN_FDS": "-1"], ["LISTEN_PID": "4242", "LISTEN_FDS": "2"],
            ["LISTEN_PID": "4242", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "rainwalletd"],
            ["LISTEN_PID": "4242", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "a:b"],
            ["LISTEN_PID": "4242", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "rainwalletd:rainwalletd"],
        ] as [[String: String]])
    func refused(environment: [String: String]) {
        let error = #expect(throws: RainError.self) {
            _ = try SocketActivation.selectDescriptor(environment: environment, pid: Self.pid, name: "rainwalletd")
        }
        #expect(error?.code == .invalidArgument)
    }
}
