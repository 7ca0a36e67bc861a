import Foundation
@testable import RainDaemon
import Testing

@Suite struct DaemonPathsTests {
    @Test func defaultsFollowXDG() {
        let p = DaemonPaths.resolve(environment: [
            "XDG_RUNTIME_DIR": "/run/user/1000", "XDG_STATE_HOME": "/s", "XDG_CONFIG_HOME": "/c", "HOME": "/home/u",
        ])
        #expect(p.socket == "/run/user/1000/rainwallet/rainwalletd.sock")
        #expect(p.stateDirectory == "/s/rainwallet")
        #expect(p.config == "/c/rainwallet/config.json")
        #expect(!p.isConfigExplicit)
    }

    /// Without XDG_RUNTIME_DIR the socket lives in the user's own state directory, not
    /// in /tmp where another uid could create the directory first.
    @Test func fallbacksWithoutXDG() {
        let p = DaemonPaths.resolve(environment: ["HOME": "/home/u"])
        #expect(p.socket == "/home/u/.local/state/rainwallet/rainwalletd.sock")
        #expect(p.isSocketDefault)
        #expect(p.stateDirectory == "/home/u/.local/state/rainwallet")
        #expect(p.config == "/home/u/.config/rainwallet/config.json")
    }

    @Test func socketInStateHomeWithoutRuntimeDirectory() {
        let p = DaemonPaths.resolve(environment: ["XDG_STATE_HOME": "/s", "HOME": "/home/u"])
        #expect(p.socket == "/s/rainwallet/rainwalletd.sock")
    }

    /// Only a state directory too long for sun_path sends the socket to /tmp/rainwallet-UID.
    @Test func tooLongForASocketAddressFallsBackToTmp() {
        let longHome = "/home/" + String(repeating: "u", count: 90)
        let p = DaemonPaths.resolve(environment: ["HOME": longHome])
        #expect(p.socket == "/tmp/rainwallet-\(getuid())/rainwalletd.sock")
        let fits = "/home/" + String(repeating: "u", count: 107 - "/home//.local/state/rainwallet/rainwalletd.sock".utf8.count)
        #expect(DaemonPaths.resolve(environment: ["HOME": fits]).socket.hasPrefix(fits))
    }

    @Test func flagsOverride() {
        let p = DaemonPaths.resolve(environment: [:], socket: "/x.sock", stateDirectory: "/st", config: "/cf.json")
        #expect(
            p
                == DaemonPaths(
                    socket: "/x.sock", stateDirectory: "/st", config: "/cf.json", isConfigExplicit: true, isSocketDefault: false))
    }
}
